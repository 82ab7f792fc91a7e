package a2ui

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// cacheStructures are the definitions the cache tests project: bindings in
// text, typed values, when, nested stacks, buttons, questions, and kinds
// shown as their text form (progress, table), whose subtrees the cache
// parses once.
var cacheStructures = []string{
	`{"type":"stack","children":[{"type":"text","value":"${/left} tasks left"},{"type":"progress","value":"${/done}","max":5,"label":"tests"},{"type":"button","label":"Deploy ${/env}","on":{"press":"deploy"}}]}`,
	`{"type":"stack","children":[{"type":"text","value":"${/left} jobs to go"},{"type":"progress","value":"${/done}","max":10,"label":"jobs"},{"type":"button","label":"Ship ${/env}","on":{"press":"ship"}}]}`,
	`{"type":"stack","direction":"horizontal","children":[{"type":"text","value":"env ${/env}","when":"${/flag}"},{"type":"stack","children":[{"type":"markdown","value":"**${/left}**"},{"type":"progress","value":"${/done}","max":5}]}]}`,
	`{"type":"table","columns":[{"key":"name","label":"Name"},{"key":"n","label":"N"}],"rows":"${/rows}"}`,
	`{"type":"question","prompt":"Deploy to ${/env}?","choices":[{"label":"yes"},{"label":"no"}],"on":{"submit":"answer"}}`,
}

// randomData is a data object over the keys the structures read, with
// values of the right type mostly and of the wrong type sometimes, so
// that some bindings are refused.
func randomData(r *rand.Rand) json.RawMessage {
	d := map[string]any{}
	if r.IntN(4) > 0 {
		d["left"] = r.IntN(5)
	}
	switch r.IntN(5) {
	case 0:
	case 1:
		d["done"] = "four" // a string where progress wants a number
	default:
		d["done"] = r.IntN(6)
	}
	if r.IntN(4) > 0 {
		d["env"] = []string{"prod", "staging", "dev"}[r.IntN(3)]
	}
	if r.IntN(2) == 0 {
		d["flag"] = r.IntN(2) == 0
	}
	var rows []map[string]any
	for i := range r.IntN(4) {
		rows = append(rows, map[string]any{"name": fmt.Sprintf("r%d", i), "n": r.IntN(100)})
	}
	if rows != nil || r.IntN(2) == 0 {
		d["rows"] = rows
	}
	raw, _ := json.Marshal(d)
	return raw
}

// project returns what a projection gives, messages or refusal, as text.
func project(f func(string, json.RawMessage, json.RawMessage) ([]Message, error), id, structure string, data json.RawMessage) string {
	msgs, err := f(id, json.RawMessage(structure), data)
	if err != nil {
		return "error: " + err.Error()
	}
	raw, _ := json.Marshal(msgs)
	return string(raw)
}

// TestCacheTakesNewDefinition changes a component's definition between
// two data updates: the projection after the change must draw the new
// definition, never the one the cache held for the node before.
func TestCacheTakesNewDefinition(t *testing.T) {
	data := json.RawMessage(`{"left":2,"done":4,"env":"prod"}`)
	before := project(ProjectComponent, "placed:agent:deploy", cacheStructures[0], data)
	if !strings.Contains(before, "2 tasks left") || !strings.Contains(before, "Deploy prod") {
		t.Fatalf("first projection = %s, want the first definition drawn", before)
	}
	// The definition changes, then the data.
	for i, d := range []json.RawMessage{data, json.RawMessage(`{"left":1,"done":4,"env":"prod"}`)} {
		got := project(ProjectComponent, "placed:agent:deploy", cacheStructures[1], d)
		want := project(projectUncached, "placed:agent:deploy", cacheStructures[1], d)
		if got != want {
			t.Fatalf("update %d: cached %s\nuncached %s", i, got, want)
		}
		if strings.Contains(got, "tasks left") || strings.Contains(got, "Deploy") || !strings.Contains(got, "jobs to go") || !strings.Contains(got, "Ship prod") {
			t.Errorf("update %d = %s, want the new definition (jobs to go, Ship) and none of the old", i, got)
		}
		if !strings.Contains(got, "4/10") && !strings.Contains(got, "40%") {
			t.Errorf("update %d = %s, want the new progress max (4 of 10)", i, got)
		}
	}
	// Back to the first definition: the first entry again, with new data.
	again := project(ProjectComponent, "placed:agent:deploy", cacheStructures[0], json.RawMessage(`{"left":0,"done":5,"env":"dev"}`))
	if !strings.Contains(again, "0 tasks left") || !strings.Contains(again, "Deploy dev") {
		t.Errorf("projection of the first definition again = %s", again)
	}
}

// TestCachedMatchesUncached projects random sequences of definition and
// data changes with the cache and without it (every structure parsed
// anew, as before the cache): the messages, or the refusals, must be the
// same at every step.
func TestCachedMatchesUncached(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	refused, drawn := 0, 0
	for seq := range 50 {
		structure := cacheStructures[r.IntN(len(cacheStructures))]
		for step := range 20 {
			if r.IntN(5) == 0 {
				structure = cacheStructures[r.IntN(len(cacheStructures))]
			}
			data := randomData(r)
			got := project(ProjectComponent, "placed:agent:x", structure, data)
			want := project(projectUncached, "placed:agent:x", structure, data)
			if got != want {
				t.Fatalf("sequence %d step %d, structure %s, data %s:\ncached   %s\nuncached %s", seq, step, structure, data, got, want)
			}
			if strings.HasPrefix(got, "error: ") {
				refused++
			} else {
				drawn++
			}
		}
	}
	if refused == 0 || drawn == 0 {
		t.Errorf("%d refused, %d drawn: the sequences must exercise both", refused, drawn)
	}
}

// FuzzCachedProjection compares the cached projection with the uncached
// one for any structure and data.
func FuzzCachedProjection(f *testing.F) {
	for _, s := range cacheStructures {
		f.Add(s, `{"left":2,"done":4,"env":"prod","flag":true,"rows":[{"name":"a","n":1}]}`)
		f.Add(s, `{"done":"x"}`)
	}
	f.Fuzz(func(t *testing.T, structure, data string) {
		for range 2 { // the second time from the cache
			got := project(ProjectComponent, "placed:agent:f", structure, json.RawMessage(data))
			want := project(projectUncached, "placed:agent:f", structure, json.RawMessage(data))
			if got != want {
				t.Fatalf("cached %s\nuncached %s", got, want)
			}
		}
	})
}

// BenchmarkProjectComponent projects the stack of a text, a progress and a
// button against new data each time, with the cache (the structure parsed
// once) and without it (parsed per projection, as before the cache). Read
// cached as a ratio to uncached:
//
//	go test -run='^$' -bench=ProjectComponent -benchmem ./dialect/a2ui/
func BenchmarkProjectComponent(b *testing.B) {
	structure := json.RawMessage(cacheStructures[0])
	data := []json.RawMessage{json.RawMessage(`{"left":2,"done":4,"env":"prod"}`), json.RawMessage(`{"left":1,"done":4,"env":"prod"}`)}
	for _, c := range []struct {
		name string
		f    func(string, json.RawMessage, json.RawMessage) ([]Message, error)
	}{{"uncached", projectUncached}, {"cached", ProjectComponent}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := c.f("placed:agent:deploy", structure, data[i%2]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
