package embed_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/getorrery/orrery/cluster/embed"
)

// The embedded server's lines reach the node's log at a level that fits:
// trouble as warnings and errors, a route retried every second once.
func TestSlogLogs(t *testing.T) {
	tests := []struct {
		name string
		log  func(l *embed.Logs)
		want string // the level logged, "" for nothing at info
	}{
		{"notice", func(l *embed.Logs) { l.Noticef("Server is ready") }, ""},
		{"warning", func(l *embed.Logs) { l.Warnf("JetStream has not established contact with a meta leader") }, "WARN"},
		{"error", func(l *embed.Logs) { l.Errorf("JetStream out of %s", "disk") }, "ERROR"},
		{"route first try", func(l *embed.Logs) {
			l.Errorf("Error trying to connect to route (attempt %v): %v", 1, "connection refused")
		}, "WARN"},
		{"route later tries", func(l *embed.Logs) {
			l.Errorf("Error trying to connect to route (attempt %v): %v", 7, "connection refused")
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.log(embed.SlogLogs(slog.New(slog.NewTextHandler(&buf, nil))))
			got := ""
			if _, rest, ok := strings.Cut(buf.String(), "level="); ok {
				got, _, _ = strings.Cut(rest, " ")
			}
			if got != tt.want {
				t.Errorf("logged %q, want level %q", buf.String(), tt.want)
			}
			if got != "" && !strings.Contains(buf.String(), "nats: ") {
				t.Errorf("logged %q, want it marked as the NATS server's", buf.String())
			}
		})
	}
}
