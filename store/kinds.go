package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// ErrUnknownKind means a store kind names no registered implementation.
var ErrUnknownKind = errors.New("unknown store kind")

// OpenConfig is what an Opener opens a Log from.
type OpenConfig struct {
	// Dir is the data directory the Log keeps its files in.
	Dir string
	// Options are the kind's own settings, of a type its Opener knows
	// (the [nats] table for jetstream); nil for a kind that needs none.
	Options any
	// Logger hears what the store has to say as it runs (nil: nothing).
	Logger *slog.Logger
}

// Opener opens a Log of one kind. The Log it returns is ready; on an error
// nothing is left open.
type Opener func(ctx context.Context, c OpenConfig) (Log, error)

// Kinds maps the name of a store kind, as [store] kind names it ("sqlite"),
// to the Opener of that implementation. The zero value holds none. It is
// filled once at start (Register) and read after, so it needs no lock.
type Kinds struct {
	openers map[string]Opener
}

// Register adds the kind name. A name registered twice is a programming
// error: Register panics, at start, rather than let one shadow the other.
func (k *Kinds) Register(name string, open Opener) {
	if name == "" || open == nil {
		panic("store: Register needs a name and an Opener")
	}
	if _, dup := k.openers[name]; dup {
		panic(fmt.Sprintf("store: kind %q registered twice", name))
	}
	if k.openers == nil {
		k.openers = make(map[string]Opener)
	}
	k.openers[name] = open
}

// Names returns the registered kinds, sorted.
func (k *Kinds) Names() []string {
	names := make([]string, 0, len(k.openers))
	for name := range k.openers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Open opens a Log of kind name. An unknown name is refused with an error
// wrapping ErrUnknownKind that names the known ones.
func (k *Kinds) Open(ctx context.Context, name string, c OpenConfig) (Log, error) {
	open, ok := k.openers[name]
	if !ok {
		return nil, fmt.Errorf("%w %q: set [store] kind to one of %s", ErrUnknownKind, name, strings.Join(k.Names(), ", "))
	}
	return open(ctx, c)
}
