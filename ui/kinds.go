package ui

import (
	"bytes"
	"embed"
	"fmt"
	neturl "net/url"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The surface kinds, as the t of a surface's kind object.
const (
	KindText     = "text"
	KindMarkdown = "markdown"
	KindTable    = "table"
	KindTree     = "tree"
	KindDiff     = "diff"
	KindProgress = "progress"
	KindStream   = "stream"
	KindTask     = "task"
	KindQuestion = "question"
	KindForm     = "form"
	KindStack    = "stack"
	KindChart    = "chart"
	KindRaster   = "raster"
	KindImage    = "image"
)

// The chart kinds, as the kind field of a chart surface.
const (
	ChartBars      = "bars"
	ChartColumns   = "columns"
	ChartStacked   = "stacked"
	ChartLine      = "line"
	ChartArea      = "area"
	ChartScatter   = "scatter"
	ChartSparkline = "sparkline"
	ChartDonut     = "donut"
	ChartGauge     = "gauge"
)

var kinds = []string{
	KindText, KindMarkdown, KindTable, KindTree, KindDiff, KindProgress, KindStream,
	KindTask, KindQuestion, KindForm, KindStack, KindChart, KindRaster, KindImage,
}

// coreKinds are the kinds every client has drawn since before placements:
// the seed's "older core kinds". Chart, raster and image were added for
// placements, and a client may lack them, so a fallback cannot use them.
var coreKinds = []string{
	KindText, KindMarkdown, KindTable, KindTree, KindDiff, KindProgress, KindStream,
	KindTask, KindQuestion, KindForm, KindStack,
}

var chartKinds = []string{
	ChartBars, ChartColumns, ChartStacked, ChartLine, ChartArea, ChartScatter,
	ChartSparkline, ChartDonut, ChartGauge,
}

// Kinds returns every surface kind, in the order DESIGN lists them.
func Kinds() []string { return slices.Clone(kinds) }

// CoreKinds returns the kinds a fallback may use: text, markdown, table,
// tree, diff, progress, stream, task, question, form and stack. Chart, raster
// and image, the kinds added for placements, are not core.
func CoreKinds() []string { return slices.Clone(coreKinds) }

// ChartKinds returns every chart kind, the values of a chart's kind field.
func ChartKinds() []string { return slices.Clone(chartKinds) }

// IsKind reports whether t is a surface kind.
func IsKind(t string) bool { return slices.Contains(kinds, t) }

// IsCore reports whether t is a core kind, one a fallback may use.
func IsCore(t string) bool { return slices.Contains(coreKinds, t) }

// schemaBase is the base of every embedded schema's $id. Nothing is ever
// fetched from it: the compiler has no loader, so only the embedded
// documents resolve.
const schemaBase = "https://github.com/getorrery/orrery/ui/schemas/"

//go:embed schemas/*.json
var schemaFS embed.FS

// Schema returns the JSON Schema (draft 2020-12) of a kind, such as "table",
// or of "surface" (a whole surface, every kind) or "kind" (a kind object), and
// whether there is one by that name. The bytes are a copy.
func Schema(name string) ([]byte, bool) {
	b, err := schemaFS.ReadFile("schemas/" + name + ".json")
	if err != nil {
		return nil, false
	}
	return b, true
}

// schemaSet is the compiled schema of each kind (and of "surface" and
// "kind"), and the parsed documents they were compiled from, by URL, for
// reading descriptions into refusals. It is built once and never changed.
type schemaSet struct {
	kinds map[string]*jsonschema.Schema // by t, for a kind object
	docs  map[string]any
}

var loadSchemas = sync.OnceValues(compileSchemas)

// newCompiler returns a compiler that can load nothing: no file:// and no
// network refs, only the resources added to it.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.UseLoader(nil)
	c.DefaultDraft(jsonschema.Draft2020)
	return c
}

func compileSchemas() (*schemaSet, error) {
	c := newCompiler()
	set := &schemaSet{kinds: map[string]*jsonschema.Schema{}, docs: map[string]any{}}
	names := append([]string{"surface", "kind"}, kinds...)
	for _, name := range names {
		b, ok := Schema(name)
		if !ok {
			return nil, fmt.Errorf("compile surface schemas: schemas/%s.json is missing", name)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("compile surface schemas: parse %s.json: %w", name, err)
		}
		url := schemaBase + name + ".json"
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("compile surface schemas: add %s.json: %w", name, err)
		}
		set.docs[url] = doc
	}
	for _, name := range names {
		sch, err := c.Compile(schemaBase + name + ".json")
		if err != nil {
			return nil, fmt.Errorf("compile surface schemas: %s.json: %w", name, err)
		}
		set.kinds[name] = sch
	}
	return set, nil
}

// schemaAt returns the schema object at an absolute schema location such as
// ".../table.json#/properties/rows", or nil.
func (s *schemaSet) schemaAt(loc string) map[string]any {
	url, frag, _ := strings.Cut(loc, "#")
	if f, err := neturl.PathUnescape(frag); err == nil {
		frag = f
	}
	doc, ok := s.docs[url]
	if !ok {
		return nil
	}
	v := doc
	for _, tok := range splitPointer(frag) {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i := 0
			for _, r := range tok {
				if r < '0' || r > '9' {
					return nil
				}
				i = i*10 + int(r-'0')
				if i > len(x) {
					return nil
				}
			}
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	m, _ := v.(map[string]any)
	return m
}
