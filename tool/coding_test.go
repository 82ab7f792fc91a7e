package tool_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/getorrery/orrery/tool"
)

// codingExamples are, per tool, arguments its schema must accept and
// arguments it must refuse.
var codingExamples = map[string]struct {
	readOnly  bool
	good, bad []string
	subject   string // the subject of good[0]
}{
	"shell": {false, []string{`{"command":"git status"}`, `{"command":"ls","timeout_ms":600000}`},
		[]string{`{}`, `{"command":1}`, `{"command":"ls","timeout_ms":600001}`, `{"command":"ls","x":1}`, `{"command":""}`}, "git status"},
	"read_file": {true, []string{`{"path":"src/../a.go"}`, `{"path":"a","offset":1,"limit":10}`},
		[]string{`{}`, `{"path":"a","offset":0}`, `{"path":"a","limit":1.5}`, `{"path":""}`}, "a.go"},
	"write_file": {false, []string{`{"path":"./src//x.go","content":""}`},
		[]string{`{"path":"a"}`, `{"content":"x"}`, `{"path":"a","content":null}`}, "src/x.go"},
	"edit_file": {false, []string{`{"path":"src/x.go","old_string":"a","new_string":"b","replace_all":true}`},
		[]string{`{"path":"a","old_string":"","new_string":"b"}`, `{"path":"a","old_string":"a"}`, `{"path":"a","old_string":"a","new_string":"b","replace_all":"no"}`}, "src/x.go"},
	"list_files": {true, []string{`{}`, `{"path":"src"}`}, []string{`{"path":3}`, `{"dir":"x"}`}, "."},
	"glob":       {true, []string{`{"pattern":"**/*.go"}`, `{"pattern":"*","path":"src"}`}, []string{`{}`, `{"pattern":""}`}, "."},
	"grep": {true, []string{`{"pattern":"x","path":"src/","glob":"*.go","ignore_case":true}`},
		[]string{`{}`, `{"pattern":"x","ignore_case":"yes"}`}, "src"},
}

func TestCoding(t *testing.T) {
	tools := tool.Coding(tool.Shell{})
	set := tool.NewSet(tools...) // panics on a duplicate name
	if len(set.Specs()) != len(codingExamples) {
		t.Fatalf("Coding() has %d tools, want %d", len(set.Specs()), len(codingExamples))
	}
	for _, tl := range tools {
		sp := tl.Spec()
		ex, ok := codingExamples[sp.Name]
		if !ok {
			t.Errorf("Coding() has an unexpected tool %q", sp.Name)
			continue
		}
		t.Run(sp.Name, func(t *testing.T) {
			if sp.ReadOnly != ex.readOnly {
				t.Errorf("ReadOnly = %v, want %v", sp.ReadOnly, ex.readOnly)
			}
			if len(sp.Description) < 40 {
				t.Errorf("Description %q is too short to guide a model", sp.Description)
			}
			c := jsonschema.NewCompiler()
			c.UseLoader(nil)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sp.Parameters))
			if err != nil {
				t.Fatalf("Parameters are not JSON: %v", err)
			}
			if err := c.AddResource("mem://"+sp.Name+".json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("mem://" + sp.Name + ".json")
			if err != nil {
				t.Fatalf("Parameters do not compile as a JSON Schema: %v", err)
			}
			sj := tl.(tool.WorkspaceSubjecter)
			for _, g := range ex.good {
				inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(g))
				if err := sch.Validate(inst); err != nil {
					t.Errorf("schema refuses %s: %v", g, err)
				}
				if _, err := sj.Subject(json.RawMessage(g)); err != nil {
					t.Errorf("Subject(%s) = %v, want the arguments accepted", g, err)
				}
			}
			for _, b := range ex.bad {
				inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(b))
				if err := sch.Validate(inst); err == nil {
					t.Errorf("schema accepts %s, want it refused", b)
				}
				_, err := sj.Subject(json.RawMessage(b))
				if err == nil || !strings.HasPrefix(err.Error(), sp.Name+" needs arguments {") {
					t.Errorf("Subject(%s) = %v, want a refusal naming the arguments", b, err)
				}
			}
			if got, err := sj.Subject(json.RawMessage(ex.good[0])); got != ex.subject {
				t.Errorf("Subject(%s) = %q, %v, want %q", ex.good[0], got, err, ex.subject)
			}
		})
	}
}

// TestSubjectIn checks that the workspace-aware subject sees through the
// spellings of a path that the plain subject takes at face value.
func TestSubjectIn(t *testing.T) {
	ws, top := newWorkspace(t, map[string]string{"src/a.go": "", "secrets/key": ""})
	os.Symlink("secrets", filepath.Join(ws.Root, "public"))
	tests := []struct {
		tool      tool.WorkspaceSubjecter
		args      string
		plain, in string
		wantErr   string
	}{
		{tool.WriteFile{}, `{"path":"src/a.go","content":""}`, "src/a.go", "src/a.go", ""},
		{tool.WriteFile{}, `{"path":"` + filepath.Join(ws.Root, "secrets/key") + `","content":""}`, filepath.Join(ws.Root, "secrets/key"), "secrets/key", ""},
		{tool.EditFile{}, `{"path":"public/key","old_string":"a","new_string":"b"}`, "public/key", "secrets/key", ""},
		{tool.ReadFile{}, `{"path":"src/../secrets/key"}`, "secrets/key", "secrets/key", ""},
		{tool.Grep{}, `{"pattern":"x"}`, ".", ".", ""},
		{tool.Shell{}, `{"command":"rm -rf /"}`, "rm -rf /", "rm -rf /", ""},
		{tool.ReadFile{}, `{"path":"../x"}`, "../x", "", "climbs out of the workspace"},
		{tool.ListFiles{}, `{"path":"` + top + `"}`, top, "", "is not inside the workspace"},
	}
	for _, tt := range tests {
		plain, err := tt.tool.Subject(json.RawMessage(tt.args))
		if err != nil || plain != tt.plain {
			t.Errorf("Subject(%s) = %q, %v, want %q", tt.args, plain, err, tt.plain)
		}
		in, err := tt.tool.SubjectIn(ws, json.RawMessage(tt.args))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("SubjectIn(%s) = %q, %v, want an error containing %q", tt.args, in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || in != tt.in {
			t.Errorf("SubjectIn(%s) = %q, %v, want %q", tt.args, in, err, tt.in)
		}
	}
}

// FuzzSubject feeds arbitrary arguments to every coding tool's decoder
// (through Subject, which runs nothing): it must not panic, and a refusal
// must name the tool's arguments.
func FuzzSubject(f *testing.F) {
	for _, ex := range codingExamples {
		for _, a := range append(ex.good, ex.bad...) {
			f.Add(a)
		}
	}
	f.Add(`{"path":"a"} x`)
	f.Add(`[]`)
	f.Add(``)
	tools := tool.Coding(tool.Shell{})
	f.Fuzz(func(t *testing.T, args string) {
		for _, tl := range tools {
			name := tl.Spec().Name
			got, err := tl.(tool.Subjecter).Subject(json.RawMessage(args))
			if err != nil {
				if !strings.HasPrefix(err.Error(), name+" needs arguments {") {
					t.Errorf("%s.Subject(%q) = %v, want a refusal naming the arguments", name, args, err)
				}
				continue
			}
			if got == "" {
				t.Errorf("%s.Subject(%q) = \"\", want a subject", name, args)
			}
		}
	})
}
