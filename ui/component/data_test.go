package component_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui/component"
)

// opsJSON writes ops as a JSON Patch document.
func opsJSON(t testing.TB, ops []protocol.PatchOp) []byte {
	t.Helper()
	b, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// apply applies a JSON Patch with the stock library, as a client does.
func apply(t testing.TB, doc []byte, patch []byte) []byte {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("DecodePatch(%s): %v", patch, err)
	}
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = false
	out, err := p.ApplyWithOptions(doc, opts)
	if err != nil {
		t.Fatalf("apply %s to %s: %v", patch, doc, err)
	}
	return out
}

// sameJSON reports whether two documents hold the same values, numbers
// compared by their exact text.
func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	dec := func(x []byte) any {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("decode %s: %v", x, err)
		}
		return v
	}
	return reflect.DeepEqual(dec(a), dec(b))
}

func TestSetDiff(t *testing.T) {
	tests := []struct {
		name, from, to, want string
	}{
		{"unchanged", `{"a":1}`, `{"a": 1}`, `[]`},
		{"one field", `{"failed":0,"runs":[{"name":"lint"}]}`, `{"failed":2,"runs":[{"name":"lint"}]}`,
			`[{"op":"replace","path":"/failed","value":2}]`},
		{"add and remove", `{"title":"a long title that stays","b":2}`, `{"title":"a long title that stays","c":3}`, `[{"op":"remove","path":"/b"},{"op":"add","path":"/c","value":3}]`},
		{"whole data when smaller", `{"a":1,"b":2}`, `{"a":1,"c":3}`, `[{"op":"replace","path":"","value":{"a":1,"c":3}}]`},
		{"append", `{"runs":["a"]}`, `{"runs":["a","b"]}`, `[{"op":"add","path":"/runs/-","value":"b"}]`},
		{"exact numbers", `{"id":1}`, `{"id":12345678901234567890}`, `[{"op":"replace","path":"/id","value":12345678901234567890}]`},
		{"escaped keys", `{"a/b":1,"m~n":1,"title":"a long title that stays"}`, `{"a/b":2,"m~n":2,"title":"a long title that stays"}`, `[{"op":"replace","path":"/a~1b","value":2},{"op":"replace","path":"/m~0n","value":2}]`},
		{"shifted array replaced whole", `{"list":[1,2,3,4,5,6,7,8],"title":"a long title that stays"}`, `{"list":[0,1,2,3,4,5,6,7,8],"title":"a long title that stays"}`,
			`[{"op":"replace","path":"/list","value":[0,1,2,3,4,5,6,7,8]}]`},
		{"whole subtree when smaller", `{"x":{"a":1,"b":2,"c":3}}`, `{"x":{"a":4,"b":5,"c":6}}`, `[{"op":"replace","path":"/x","value":{"a":4,"b":5,"c":6}}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := component.NewData(json.RawMessage(tt.from), component.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ops, err := d.Set(json.RawMessage(tt.to))
			if err != nil {
				t.Fatalf("Set() error: %v", err)
			}
			if got := string(opsJSON(t, ops)); got != tt.want {
				t.Errorf("Set() = %s, want %s", got, tt.want)
			}
			if got := apply(t, []byte(tt.from), opsJSON(t, ops)); !sameJSON(t, got, []byte(tt.to)) {
				t.Errorf("applying Set()'s ops gives %s, want %s", got, tt.to)
			}
		})
	}
}

// TestPatch checks that every RFC 6902 op applies, in order, and that the
// change handed out uses only add, replace and remove.
func TestPatch(t *testing.T) {
	d, err := component.NewData(json.RawMessage(`{"a":{"x":1},"list":[1,2,3],"n":0}`), component.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := d.Patch(json.RawMessage(`[
		{"op":"test","path":"/n","value":0},
		{"op":"replace","path":"/n","value":1},
		{"op":"copy","from":"/a","path":"/b"},
		{"op":"move","from":"/list/0","path":"/list/-"},
		{"op":"remove","path":"/a/x"},
		{"op":"add","path":"/list/0","value":"first"}]`))
	if err != nil {
		t.Fatalf("Patch() error: %v", err)
	}
	want := `{"a":{},"b":{"x":1},"list":["first",2,3,1],"n":1}`
	if got := d.JSON(); !sameJSON(t, got, []byte(want)) {
		t.Errorf("JSON() after Patch() = %s, want %s", got, want)
	}
	for _, op := range ops {
		if !slices.Contains([]string{"add", "replace", "remove"}, op.Op) {
			t.Errorf("Patch() handed out op %q, want only add, replace and remove", op.Op)
		}
	}
	if got := apply(t, []byte(`{"a":{"x":1},"list":[1,2,3],"n":0}`), opsJSON(t, ops)); !sameJSON(t, got, []byte(want)) {
		t.Errorf("applying Patch()'s ops gives %s, want %s", got, want)
	}
}

// TestDataRefusals checks each refused update: the sentinel, a message
// naming the path or the fix, and the last good data kept.
func TestDataRefusals(t *testing.T) {
	const first = `{"failed":1,"runs":[{"name":"lint"}]}`
	schema := component.NewSchema("runs", json.RawMessage(`{"type":"object","properties":{
		"failed":{"type":"integer"},"runs":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}}}}`))
	structure := component.MustParse(`{"type":"stack","children":[
		{"type":"text","value":"${/failed} failed"},
		{"type":"button","label":"Log","href":"${/log}"}]}`)
	big := `{"blob":"` + strings.Repeat("x", component.DefaultDataBytes) + `"}`
	tests := []struct {
		name     string
		opts     component.Options
		set      string // the update: a Set when patch is empty
		patch    string
		sentinel error
		path     string
		want     string
	}{
		{name: "array as data", set: `[{"failed":1}]`, sentinel: component.ErrNotObject,
			want: `the data is an array, not an object; data is one JSON object, such as {"items": [...]} around an array`},
		{name: "number as data", set: `3`, sentinel: component.ErrNotObject, want: "the data is a number, not an object"},
		{name: "not JSON", set: `{"failed":`, sentinel: component.ErrNotObject, want: "the data is not JSON"},
		{name: "over dataBytes", set: big, sentinel: component.ErrTooLarge,
			want: "the data is 262,155 bytes, over limits.dataBytes (262,144); send less (page or trim long lists), or raise limits.dataBytes; the last good data is kept"},
		{name: "over a lower dataBytes", opts: component.Options{Limits: component.Limits{DataBytes: 64}},
			set: `{"failed":1,"runs":[{"name":"lint"},{"name":"unit"},{"name":"e2e"}]}`, sentinel: component.ErrTooLarge,
			want: "the data is 68 bytes, over limits.dataBytes (64)"},
		{name: "patch over dataBytes", opts: component.Options{Limits: component.Limits{DataBytes: 64}},
			patch: `[{"op":"add","path":"/more","value":"` + strings.Repeat("y", 40) + `"}]`, sentinel: component.ErrTooLarge, want: "over limits.dataBytes (64)"},
		{name: "schema-invalid data", opts: component.Options{Schema: schema}, set: `{"failed":1,"runs":[{"name":7}]}`,
			sentinel: component.ErrDataSchema, path: "/runs/0/name",
			want: `the data at /runs/0/name does not match the schema of component "runs": expected string, got number`},
		{name: "schema-invalid patch", opts: component.Options{Schema: schema}, patch: `[{"op":"replace","path":"/failed","value":"two"}]`,
			sentinel: component.ErrDataSchema, path: "/failed", want: "the data at /failed does not match"},
		{name: "failing patch applies nothing", patch: `[{"op":"replace","path":"/failed","value":5},{"op":"replace","path":"/runs/3/name","value":"x"}]`,
			sentinel: component.ErrPatch, path: "/1",
			want: "the patch at /1 (replace /runs/3/name) does not apply: nothing is at its path; check it against the current data (nothing was applied, and the data is unchanged)"},
		{name: "failing test", patch: `[{"op":"test","path":"/failed","value":0}]`, sentinel: component.ErrPatch, path: "/0", want: "its test failed"},
		{name: "unknown op", patch: `[{"op":"replace","path":"/failed","value":0},{"op":"merge","path":"/failed","value":0}]`, sentinel: component.ErrPatch, path: "/1",
			want: "the patch at /1 is not an RFC 6902 operation: its op is not add, remove, replace, move, copy or test"},
		{name: "empty key", set: `{"runs":[{"":1}]}`, sentinel: component.ErrEmptyKey, path: "/runs/0",
			want: "the data at /runs/0 has an empty key; give it a name"},
		{name: "empty key by patch", patch: `[{"op":"add","path":"/","value":1}]`, sentinel: component.ErrEmptyKey, path: "", want: "the data has an empty key"},
		{name: "patch not an array", patch: `{"op":"replace"}`, sentinel: component.ErrPatch, want: "the patch is not a JSON array of RFC 6902 operations"},
		{name: "patch replacing the root with an array", patch: `[{"op":"replace","path":"","value":[1]}]`, sentinel: component.ErrNotObject,
			want: "the data is an array, not an object"},
		{name: "data that does not bind", opts: component.Options{Structure: structure}, set: `{"failed":1,"log":"/etc/passwd"}`,
			sentinel: component.ErrLink, path: "/children/1/href", want: "the data at /log, bound to structure /children/1/href, does not fit: the link \"/etc/passwd\" is refused: absolute paths are refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := component.NewData(json.RawMessage(first), tt.opts)
			if err != nil {
				t.Fatalf("NewData() error: %v", err)
			}
			before := d.JSON()
			var bound *component.Bound
			if b := d.Bound(); b != nil {
				bound = b
			}
			if tt.patch != "" {
				_, err = d.Patch(json.RawMessage(tt.patch))
			} else {
				_, err = d.Set(json.RawMessage(tt.set))
			}
			var e *component.Error
			if !errors.As(err, &e) || !errors.Is(err, tt.sentinel) {
				t.Fatalf("update = %v, want an *Error matching %v", err, tt.sentinel)
			}
			if e.Path != tt.path {
				t.Errorf("update path = %q, want %q", e.Path, tt.path)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("update = %q, want it to contain %q", err, tt.want)
			}
			if got := d.JSON(); !bytes.Equal(got, before) {
				t.Errorf("JSON() after a refused update = %s, want the last good %s", got, before)
			}
			if d.Bound() != bound {
				t.Errorf("Bound() changed after a refused update")
			}
			if _, err := component.NewData(json.RawMessage(first), tt.opts); err != nil {
				t.Errorf("NewData() again = %v", err)
			}
		})
	}
}

// TestNewDataRefusals checks that the first data is checked as an update is.
func TestNewDataRefusals(t *testing.T) {
	if _, err := component.NewData(json.RawMessage(`[]`), component.Options{}); !errors.Is(err, component.ErrNotObject) {
		t.Errorf("NewData([]) = %v, want ErrNotObject", err)
	}
	s := component.MustParse(`{"type":"progress","value":"${/v}"}`)
	_, err := component.NewData(json.RawMessage(`{"v":"half"}`), component.Options{Structure: s})
	if !errors.Is(err, component.ErrBind) || !strings.Contains(err.Error(), "the data at /v, bound to structure /value, does not fit: expected number, got string") {
		t.Errorf("NewData() = %v, want ErrBind naming /v and /value", err)
	}
}

// TestDataDefaults checks that a declared component's defaults are part of
// the data and of the change handed out.
func TestDataDefaults(t *testing.T) {
	schema := component.NewSchema("runs", json.RawMessage(`{"type":"object","properties":{
		"failed":{"type":"integer","default":0},"title":{"type":"string","default":"CI"}}}`))
	d, err := component.NewData(json.RawMessage(`{}`), component.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(d.JSON()), `{"failed":0,"title":"CI"}`; got != want {
		t.Errorf("JSON() = %s, want %s", got, want)
	}
	ops, err := d.Set(json.RawMessage(`{"failed":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(opsJSON(t, ops)), `[{"op":"replace","path":"/failed","value":3}]`; got != want {
		t.Errorf("Set() = %s, want %s (title keeps its default)", got, want)
	}
}

// TestDataBound checks that the bound tree follows the last good data.
func TestDataBound(t *testing.T) {
	s := component.MustParse(`{"type":"text","value":"${/left} left"}`)
	d, err := component.NewData(json.RawMessage(`{"left":3}`), component.Options{Structure: s})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Bound().Text; got != "3 left" {
		t.Errorf("Bound().Text = %q, want %q", got, "3 left")
	}
	if _, err := d.Patch(json.RawMessage(`[{"op":"replace","path":"/left","value":2}]`)); err != nil {
		t.Fatal(err)
	}
	if got := d.Bound().Text; got != "2 left" {
		t.Errorf("Bound().Text after Patch() = %q, want %q", got, "2 left")
	}
}

// TestSetPatchProperty runs random sequences of set and patch on random
// data. After each, the ops handed out, applied by the stock JSON Patch
// library to the client's copy, give the Data's data; a set gives exactly
// the object set, a patch what the library makes of the same patch, and a
// refused update changes nothing. Publish, called at random moments, keeps
// a second copy that ends equal too.
func TestSetPatchProperty(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x0123))
			first := randObject(r, 3)
			d, err := component.NewData(marshalT(t, first), component.Options{})
			if err != nil {
				t.Fatal(err)
			}
			client := d.JSON()
			published := d.JSON()
			accepted := 0
			for step := range 60 {
				prev := d.JSON()
				var ops []protocol.PatchOp
				var want []byte
				if r.IntN(2) == 0 {
					next := mutate(r, decodeT(t, prev))
					if r.IntN(10) == 0 {
						next = randObject(r, 3)
					}
					want = marshalT(t, next)
					ops, err = d.Set(want)
				} else {
					patch := randPatch(r, decodeT(t, prev))
					want = libraryApply(prev, patch)
					ops, err = d.Patch(patch)
					if want == nil && err == nil {
						t.Fatalf("step %d: Patch(%s) accepted a patch the library refuses", step, patch)
					}
					if want != nil && err != nil && !errors.Is(err, component.ErrNotObject) {
						t.Fatalf("step %d: Patch(%s) = %v, but the library applies it", step, patch, err)
					}
				}
				if err != nil {
					if got := d.JSON(); !bytes.Equal(got, prev) {
						t.Fatalf("step %d: refused update changed the data to %s", step, got)
					}
					continue
				}
				accepted++
				if !sameJSON(t, d.JSON(), want) {
					t.Fatalf("step %d: JSON() = %s, want %s", step, d.JSON(), want)
				}
				client = apply(t, client, opsJSON(t, ops))
				if !sameJSON(t, client, d.JSON()) {
					t.Fatalf("step %d: client copy = %s, want %s (ops %s)", step, client, d.JSON(), opsJSON(t, ops))
				}
				if r.IntN(4) == 0 {
					pops, err := d.Publish()
					if err != nil {
						t.Fatal(err)
					}
					published = apply(t, published, opsJSON(t, pops))
				}
			}
			pops, err := d.Publish()
			if err != nil {
				t.Fatal(err)
			}
			published = apply(t, published, opsJSON(t, pops))
			if !sameJSON(t, published, d.JSON()) {
				t.Errorf("published copy = %s, want %s", published, d.JSON())
			}
			if again, _ := d.Publish(); len(again) != 0 {
				t.Errorf("Publish() with nothing new = %v, want no ops", again)
			}
			if accepted < 20 {
				t.Errorf("only %d of 60 updates accepted; the generator makes too many bad ones", accepted)
			}
		})
	}
}

// libraryApply applies a patch with the stock library, or returns nil
// when it refuses it or the result is not an object.
func libraryApply(doc, patch []byte) []byte {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil
	}
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = false
	out, err := p.ApplyWithOptions(doc, opts)
	if err != nil {
		return nil
	}
	return out
}

func marshalT(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeT(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// keys are the object keys random data uses: no empty key, which Data
// refuses (see TestDataRefusals).
var keys = []string{"a", "b", "c", "runs", "a/b", "m~n", "0", "-"}

func randScalar(r *rand.Rand) any {
	switch r.IntN(8) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return json.Number(strconv.Itoa(r.IntN(2000) - 1000))
	case 3:
		return json.Number([]string{"1.5", "1.50", "-0.25", "1e3", "12345678901234567890", "0"}[r.IntN(6)])
	case 4:
		return ""
	default:
		return fmt.Sprintf("s%d", r.IntN(50))
	}
}

func randValue(r *rand.Rand, depth int) any {
	if depth <= 0 || r.IntN(3) == 0 {
		return randScalar(r)
	}
	if r.IntN(2) == 0 {
		return randObject(r, depth-1)
	}
	arr := make([]any, r.IntN(5))
	for i := range arr {
		arr[i] = randValue(r, depth-1)
	}
	return arr
}

func randObject(r *rand.Rand, depth int) map[string]any {
	obj := map[string]any{}
	for range r.IntN(5) {
		obj[keys[r.IntN(len(keys))]] = randValue(r, depth)
	}
	return obj
}

// mutate makes a few random changes deep inside v, so a set is usually a
// small change.
func mutate(r *rand.Rand, v any) any {
	for range 1 + r.IntN(3) {
		v = mutateOnce(r, v, 0)
	}
	return v
}

func mutateOnce(r *rand.Rand, v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 && r.IntN(3) != 0 {
			k := sortedKeysT(x)[r.IntN(len(x))]
			if r.IntN(5) == 0 {
				delete(x, k)
			} else {
				x[k] = mutateOnce(r, x[k], depth+1)
			}
			return x
		}
		x[keys[r.IntN(len(keys))]] = randValue(r, 2)
		return x
	case []any:
		switch {
		case len(x) > 0 && r.IntN(3) == 0:
			i := r.IntN(len(x))
			return append(x[:i:i], x[i+1:]...)
		case len(x) > 0 && r.IntN(2) == 0:
			i := r.IntN(len(x))
			x[i] = mutateOnce(r, x[i], depth+1)
			return x
		}
		return append(x, randValue(r, 2))
	}
	if depth == 0 {
		return randObject(r, 2)
	}
	return randValue(r, 2)
}

func sortedKeysT(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// paths lists the pointers of every value in v, the root first.
func paths(v any, p string, out *[]string) {
	*out = append(*out, p)
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeysT(x) {
			paths(x[k], p+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), out)
		}
	case []any:
		for i, e := range x {
			paths(e, p+"/"+strconv.Itoa(i), out)
		}
	}
}

// randPatch makes 1 to 4 random operations on existing or new paths of v;
// some do not apply.
func randPatch(r *rand.Rand, v any) []byte {
	var ps []string
	paths(v, "", &ps)
	existing := ps[1:]
	pick := func() string {
		if len(existing) == 0 || r.IntN(8) == 0 {
			return "/" + keys[r.IntN(len(keys))] + []string{"", "/9", "/x"}[r.IntN(3)]
		}
		return existing[r.IntN(len(existing))]
	}
	var ops []map[string]any
	for range 1 + r.IntN(4) {
		op := map[string]any{}
		switch r.IntN(8) {
		case 0, 1:
			op["op"], op["path"], op["value"] = "replace", pick(), randValue(r, 2)
		case 2, 3:
			target := pick()
			if r.IntN(2) == 0 {
				target = pick() + "/" + []string{"-", "0", "new"}[r.IntN(3)]
			}
			op["op"], op["path"], op["value"] = "add", target, randValue(r, 2)
		case 4:
			op["op"], op["path"] = "remove", pick()
		case 5:
			op["op"], op["from"], op["path"] = "move", pick(), "/"+keys[r.IntN(len(keys))]
		case 6:
			op["op"], op["from"], op["path"] = "copy", pick(), "/"+keys[r.IntN(len(keys))]
		default:
			op["op"], op["path"], op["value"] = "test", pick(), randScalar(r)
		}
		ops = append(ops, op)
	}
	b, _ := json.Marshal(ops)
	return b
}
