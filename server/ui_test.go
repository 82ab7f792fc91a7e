package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/ui"
)

func TestUIRequests(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "offline", DebugActor: true})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "orrery.toml")
	srv := server.New(server.Config{Kernel: k, SaveConfig: func(key, value string) error { return config.Set(cfgPath, key, value) }})
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
	if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "todo", Placement: "pane.left", Surface: json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		body       string
		wantStatus int
		wantBody   string
	}{
		{`{"t":"ui.move","id":"1","session":"ui","node":"placed:agent:todo","placement":"band"}`, 200, "{}"},
		{`{"t":"ui.move","id":"2","session":"ui","node":"placed:agent:todo","placement":"sidebar"}`, 400, "sidebar"},
		{`{"t":"ui.move","id":"3","session":"nope","node":"placed:agent:todo","placement":"band"}`, 404, "unknown session"},
		{`{"t":"ui.move","id":"4","node":"placed:agent:todo","placement":"band"}`, 400, "session is missing"},
		{`{"t":"ui.save","id":"s1","session":"ui","node":"placed:agent:todo"}`, 200, "{}"},
		{`{"t":"ui.save","id":"s2","session":"ui","node":"placed:agent:nope"}`, 400, "nothing is placed"},
		{`{"t":"ui.hide","id":"5","session":"ui","node":"todo"}`, 400, "not a placed node"},
		{`{"t":"ui.hide","id":"6","session":"ui","node":"placed:agent:todo"}`, 200, "{}"},
		{`{"t":"ui.hide","id":"7","session":"ui","node":"placed:agent:todo"}`, 400, "nothing to hide"},
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
	saved, err := os.ReadFile(cfgPath)
	if err != nil || !strings.Contains(string(saved), "[ui.placements.todo]\nplacement = \"band\"") {
		t.Errorf("config after ui.save = %q, %v, want todo's placement band", saved, err)
	}
	// show (with its baseline snapshot), move and hide each log a STATE_DELTA and a CUSTOM.
	for deadline := time.Now().Add(5 * time.Second); s.Head() < 7 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	frames, _, err := s.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range frames {
		if f.Type == "CUSTOM" {
			var c struct{ Name string }
			json.Unmarshal(f.Data, &c)
			names = append(names, c.Name)
		}
	}
	if got := strings.Join(names, " "); got != "orrery.placed orrery.placed orrery.unplaced" {
		t.Errorf("custom events = %s, want placed (show), placed (move), unplaced (hide)", got)
	}
}
