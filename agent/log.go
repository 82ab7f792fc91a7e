package agent

import (
	"context"
	"log/slog"
)

type runKey struct{}

// WithRun returns ctx naming the run it belongs to. The kernel runs every
// turn under it, with WithSession.
func WithRun(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, runKey{}, id)
}

// RunFrom returns the run WithRun put in ctx, or "".
func RunFrom(ctx context.Context) string {
	id, _ := ctx.Value(runKey{}).(string)
	return id
}

// LogHandler returns a handler that adds to each record logged with a
// context (InfoContext …) the session and run that context names
// (WithSession, WithRun) as the attributes "session" and "run", unless
// the record or the logger already has them. So every line a run or a
// request logs can be found by its ids, whichever package logged it.
func LogHandler(next slog.Handler) slog.Handler {
	return &logHandler{next: next}
}

type logHandler struct {
	next slog.Handler
	// hasSession and hasRun say that the logger's own attributes (With)
	// already hold them.
	hasSession, hasRun bool
	// grouped: attributes added now would land in a group (WithGroup),
	// where they would not be found as the top-level ids.
	grouped bool
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil || h.grouped {
		return h.next.Handle(ctx, r)
	}
	session, run := "", ""
	if !h.hasSession {
		session = SessionFrom(ctx)
	}
	if !h.hasRun {
		run = RunFrom(ctx)
	}
	if session == "" && run == "" {
		return h.next.Handle(ctx, r)
	}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "session":
			session = ""
		case "run":
			run = ""
		}
		return session != "" || run != ""
	})
	if session != "" {
		r.AddAttrs(slog.String("session", session))
	}
	if run != "" {
		r.AddAttrs(slog.String("run", run))
	}
	return h.next.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(attrs)
	if !h.grouped {
		for _, a := range attrs {
			c.hasSession = c.hasSession || a.Key == "session"
			c.hasRun = c.hasRun || a.Key == "run"
		}
	}
	return &c
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	c.grouped = c.grouped || name != ""
	return &c
}
