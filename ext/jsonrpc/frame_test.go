package jsonrpc_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ext/jsonrpc"
)

func TestReadFrames(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		want    []string
		wantErr string // substring of the framing error after want
	}{
		{"two messages", "Content-Length: 2\r\n\r\n{}Content-Length: 7\r\n\r\n{\"a\":1}", 0, []string{"{}", `{"a":1}`}, ""},
		{"content type and case", "content-length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}", 0, []string{"{}"}, ""},
		{"empty stream", "", 0, nil, ""},
		{"no length", "Content-Type: x\r\n\r\n{}", 0, nil, "no Content-Length"},
		{"bare LF", "Content-Length: 2\n\n{}", 0, nil, "bare \\n"},
		{"no colon", "Content-Length 2\r\n\r\n{}", 0, nil, "no colon"},
		{"unknown header", "X-Foo: 1\r\n\r\n{}", 0, nil, "unknown"},
		{"negative length", "Content-Length: -1\r\n\r\n", 0, nil, "not a whole number"},
		{"text length", "Content-Length: two\r\n\r\n{}", 0, nil, "not a whole number"},
		{"two lengths", "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 0, nil, "two Content-Length"},
		{"over the limit", "Content-Length: 11\r\n\r\n{\"a\":\"bcd\"}", 10, nil, "over the limit of 10"},
		{"length too long", "Content-Length: 10\r\n\r\n{}", 0, nil, "ended 2 bytes into a body of 10"},
		{"length too short", "Content-Length: 1\r\n\r\n{}Content-Length: 2\r\n\r\n{}", 0, []string{"{"}, "unknown"},
		{"starts empty", "\r\nContent-Length: 2\r\n\r\n{}", 0, nil, "empty line"},
		{"endless header", strings.Repeat("x", 2000), 0, nil, "longer than"},
		{"cut header", "Content-Length: 2\r\n", 0, nil, "inside a header block"},
		{"too many headers", strings.Repeat("Content-Type: a\r\n", 9) + "\r\n", 0, nil, "more than 8 lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := jsonrpc.NewReader(strings.NewReader(tt.in), tt.max)
			var got []string
			var err error
			for {
				var body []byte
				body, err = r.Read()
				if err != nil {
					break
				}
				got = append(got, string(body))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("Read() bodies = %q, want %q", got, tt.want)
			}
			if tt.wantErr == "" {
				if err != io.EOF {
					t.Errorf("Read() end = %v, want io.EOF", err)
				}
				return
			}
			if !errors.Is(err, jsonrpc.ErrFraming) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Read() error = %v, want a framing error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestWriteReadsBack(t *testing.T) {
	var buf bytes.Buffer
	bodies := []string{`{}`, `{"jsonrpc":"2.0","method":"ui/show","params":{"id":"é"}}`, ``}
	for _, b := range bodies {
		if err := jsonrpc.Write(&buf, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	r := jsonrpc.NewReader(&buf, 0)
	for _, want := range bodies {
		got, err := r.Read()
		if err != nil || string(got) != want {
			t.Fatalf("Read() = %q, %v, want %q", got, err, want)
		}
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantCode int
		wantKind string // request, notification, response
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ui/show","params":{}}`, 0, "request"},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"x"}`, 0, "request"},
		{"notification", `{"jsonrpc":"2.0","method":"ui/event","params":{}}`, 0, "notification"},
		{"response", `{"jsonrpc":"2.0","id":1,"result":{}}`, 0, "response"},
		{"invalid JSON", `{"jsonrpc":`, jsonrpc.CodeParseError, ""},
		{"trailing data", `{"jsonrpc":"2.0","method":"a"} {}`, jsonrpc.CodeParseError, ""},
		{"array", `[1]`, jsonrpc.CodeParseError, ""},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"a"}`, jsonrpc.CodeInvalidRequest, ""},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"a"}`, jsonrpc.CodeInvalidRequest, ""},
		{"nothing", `{"jsonrpc":"2.0"}`, jsonrpc.CodeInvalidRequest, ""},
		{"empty response", `{"jsonrpc":"2.0","id":3}`, jsonrpc.CodeInvalidRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := jsonrpc.Decode([]byte(tt.body))
			if tt.wantCode != 0 {
				if err == nil || err.Code != tt.wantCode {
					t.Fatalf("Decode() error = %v, want code %d", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode() error = %v", err)
			}
			kind := "response"
			switch {
			case m.IsRequest():
				kind = "request"
			case m.IsNotification():
				kind = "notification"
			}
			if kind != tt.wantKind {
				t.Errorf("Decode() kind = %s, want %s", kind, tt.wantKind)
			}
		})
	}
}

// FuzzReader feeds arbitrary streams to the framer: it must never panic,
// never return a body over its limit, and after a framing error it stops.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"Content-Length: 2\r\n\r\n{}",
		"Content-Length: 7\r\nContent-Type: application/json\r\n\r\n{\"a\":1}Content-Length: 0\r\n\r\n",
		"Content-Length: 10\r\n\r\n{}",
		"Content-Length: 1\r\n\r\n{}",
		"Content-Length: 99999999999999999999\r\n\r\n",
		"content-length:+3\r\n\r\nabc",
		"\r\n\r\n",
		"Content-Length: 2\n\n{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 64
		r := jsonrpc.NewReader(bytes.NewReader(data), limit)
		total := 0
		for {
			body, err := r.Read()
			if err != nil {
				if err != io.EOF && !errors.Is(err, jsonrpc.ErrFraming) {
					t.Fatalf("Read() error %v is neither io.EOF nor a framing error", err)
				}
				return
			}
			if len(body) > limit {
				t.Fatalf("Read() returned %d bytes, over the limit %d", len(body), limit)
			}
			total += len(body)
			if total > len(data) {
				t.Fatalf("Read() returned more body bytes (%d) than the stream has (%d)", total, len(data))
			}
			if _, derr := jsonrpc.Decode(body); derr != nil && derr.Message == "" {
				t.Fatal("Decode() error with no message")
			}
		}
	})
}
