package tool_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/tool"
)

func TestEcho(t *testing.T) {
	tests := []struct {
		args    string
		want    string
		wantErr bool
	}{
		{`{"text":"hi there"}`, "hi there", false},
		{`{"text":""}`, "", false},
		{`{}`, "text is missing", true},
		{`[1]`, "echo needs arguments", true},
	}
	for _, tt := range tests {
		res, err := tool.Echo{}.Call(context.Background(), tool.Call{Args: json.RawMessage(tt.args)})
		if err != nil {
			t.Fatalf("Call(%s) = %v", tt.args, err)
		}
		if res.Error != tt.wantErr || !strings.Contains(res.Text, tt.want) {
			t.Errorf("Call(%s) = %+v, want text containing %q, error %v", tt.args, res, tt.want, tt.wantErr)
		}
	}
}

func TestClock(t *testing.T) {
	at := time.Date(2026, 11, 30, 3, 4, 5, 0, time.FixedZone("x", 3600))
	res, err := tool.Clock{Now: func() time.Time { return at }}.Call(context.Background(), tool.Call{})
	if err != nil || res.Text != "2026-11-30T02:04:05Z" {
		t.Errorf("Call() = %+v, %v, want 2026-11-30T02:04:05Z", res, err)
	}
}

func TestSet(t *testing.T) {
	s := tool.Builtins()
	if _, ok := s.Lookup("echo"); !ok {
		t.Error(`Lookup("echo") = false, want true`)
	}
	if _, ok := s.Lookup("shell"); ok {
		t.Error(`Lookup("shell") = true, want false`)
	}
	specs := s.Specs()
	if len(specs) != 2 || specs[0].Name != "clock" || specs[1].Name != "echo" {
		t.Errorf("Specs() = %v, want clock and echo, sorted", specs)
	}
	for _, sp := range specs {
		if !json.Valid(sp.Parameters) {
			t.Errorf("%s parameters are not valid JSON", sp.Name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NewSet(duplicate) did not panic")
		}
	}()
	tool.NewSet(tool.Echo{}, tool.Echo{})
}
