// Command gen writes protocol.schema.json and protocol.d.ts from the Go types
// of package protocol. go generate runs it in protocol/:
//
//	go run ./internal/gen -out .
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/getorrery/orrery/protocol/internal/schemagen"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	flags := flag.NewFlagSet("gen", flag.ContinueOnError)
	out := flags.String("out", ".", "directory to write "+schemagen.SchemaFile+" and "+schemagen.TypeScriptFile+" to")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: the only flag is -out", flags.Args())
	}
	schema, dts, err := schemagen.Generate()
	if err != nil {
		return err
	}
	if err := writeIfChanged(filepath.Join(*out, schemagen.SchemaFile), schema); err != nil {
		return err
	}
	return writeIfChanged(filepath.Join(*out, schemagen.TypeScriptFile), dts)
}

// writeIfChanged writes data to path unless the file already holds it, so an
// unchanged file keeps its modification time.
func writeIfChanged(path string, data []byte) error {
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, data):
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
