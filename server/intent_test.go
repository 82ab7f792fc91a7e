package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/ui"
)

func TestUIIntentRequest(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "offline", DebugActor: true})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Kernel: k})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Close(ctx)
		hs.Close()
		k.Close(ctx)
		st.Close()
	})
	ctx := context.Background()
	s, err := k.CreateSession(ctx, kernel.SessionOptions{ID: "ui"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "todo", Placement: "pane.left",
		Structure: json.RawMessage(`{"type":"stack","children":[{"type":"text","value":"${/left} left"},{"type":"button","label":"Done","on":{"press":"done"}},{"type":"button","label":"Docs","href":"https://example.com/docs"}]}`),
		Data:      json.RawMessage(`{"left":3}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "plain", Placement: "band", Surface: json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		body       string
		wantStatus int
		wantBody   string
	}{
		{`{"t":"ui.intent","id":"1","session":"ui","node":"placed:agent:todo","action":"done"}`, 200, "{}"},
		{`{"t":"ui.intent","id":"2","session":"ui","node":"placed:agent:todo","action":"open","value":"https://example.com/docs"}`, 200, "{}"},
		{`{"t":"ui.intent","id":"3","session":"ui","node":"placed:agent:todo","action":"scroll"}`, 400, `declares no action \"scroll\"`},
		{`{"t":"ui.intent","id":"4","session":"ui","node":"placed:agent:plain","action":"done"}`, 400, "shows a surface, not a component"},
		{`{"t":"ui.intent","id":"5","session":"ui","node":"placed:agent:todo"}`, 400, "ui.intent needs node and action"},
		{`{"t":"ui.intent","id":"6","session":"ui","node":"todo","action":"done"}`, 400, "not a placed node"},
		{`{"t":"ui.intent","id":"7","session":"nope","node":"placed:agent:todo","action":"done"}`, 404, "unknown session"},
		{`{"t":"ui.intent","id":"8","session":"ui","node":"placed:agent:todo","action":"done","value":[1,2]}`, 200, "{}"},
	}
	for _, tt := range tests {
		resp, err := http.Post(hs.URL+"/control", "application/json", bytes.NewBufferString(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.wantBody) {
			t.Errorf("POST /control %s = %d %s, want %d containing %q", tt.body, resp.StatusCode, body, tt.wantStatus, tt.wantBody)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); s.Head() < info.Head && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	frames, _, err := s.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range frames {
		var c struct {
			Name  string
			Value struct{ Text string }
		}
		if f.Type == "CUSTOM" && json.Unmarshal(f.Data, &c) == nil && (c.Name == kernel.HostMessageEvent || c.Name == kernel.NoticeEvent) {
			got = append(got, c.Name+": "+c.Value.Text)
		}
	}
	want := []string{
		"orrery.host.message: [ext:ui] todo: done",
		"orrery.notice: link: https://example.com/docs (this client is not on the host's screen, so nothing was opened there; open it yourself)",
		"orrery.host.message: [ext:ui] todo: done [1,2]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
