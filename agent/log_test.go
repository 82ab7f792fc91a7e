package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent"
)

// TestLogHandler adds the context's session and run to a line, once, and
// never over what the line or its logger already says.
func TestLogHandler(t *testing.T) {
	ctx := agent.WithRun(agent.WithSession(context.Background(), "ses_1"), "run_1")
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want string
	}{
		{"a line logged with the run's context", func(l *slog.Logger) { l.InfoContext(ctx, "m", "k", 1) }, `{"k":1,"msg":"m","run":"run_1","session":"ses_1"}`},
		{"a line without a context", func(l *slog.Logger) { l.Info("m") }, `{"msg":"m"}`},
		{"a context with a session only", func(l *slog.Logger) {
			l.WarnContext(agent.WithSession(context.Background(), "ses_2"), "m")
		}, `{"msg":"m","session":"ses_2"}`},
		{"the line's own session wins", func(l *slog.Logger) { l.InfoContext(ctx, "m", "session", "ses_other") }, `{"msg":"m","run":"run_1","session":"ses_other"}`},
		{"the logger's own session wins", func(l *slog.Logger) { l.With("session", "ses_w").InfoContext(ctx, "m") }, `{"msg":"m","run":"run_1","session":"ses_w"}`},
		{"within a group nothing is added", func(l *slog.Logger) { l.WithGroup("g").InfoContext(ctx, "m", "k", 1) }, `{"g":{"k":1},"msg":"m"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			l := slog.New(agent.LogHandler(slog.NewJSONHandler(&b, &slog.HandlerOptions{
				ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
					if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
						return slog.Attr{}
					}
					return a
				},
			})))
			tt.log(l)
			var got map[string]any
			if err := json.Unmarshal(b.Bytes(), &got); err != nil {
				t.Fatalf("%q: %v", b.String(), err)
			}
			norm, _ := json.Marshal(got)
			if string(norm) != tt.want {
				t.Errorf("logged %s, want %s", norm, tt.want)
			}
			if n := strings.Count(b.String(), `"session"`); n > 1 {
				t.Errorf("logged session %d times: %s", n, b.String())
			}
		})
	}
}
