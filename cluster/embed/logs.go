package embed

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// SlogLogs passes an embedded server's log lines to log: its warnings and
// errors as such, its notices (the start-up banner, routes made and lost)
// at debug level, so that a node's log says what its NATS server had to
// say about trouble without its chatter.
func SlogLogs(log *slog.Logger) *Logs { return &Logs{log: log} }

// Logs is a nats-server Logger writing to a slog.Logger.
type Logs struct{ log *slog.Logger }

func (l *Logs) emit(level slog.Level, format string, v ...any) {
	if l.log.Enabled(context.Background(), level) {
		l.log.Log(context.Background(), level, "nats: "+fmt.Sprintf(format, v...))
	}
}

// Noticef logs at debug level.
func (l *Logs) Noticef(format string, v ...any) { l.emit(slog.LevelDebug, format, v...) }

// Warnf logs a warning.
func (l *Logs) Warnf(format string, v ...any) { l.emit(slog.LevelWarn, format, v...) }

// Fatalf logs an error: the server stops itself after it.
func (l *Logs) Fatalf(format string, v ...any) { l.emit(slog.LevelError, format, v...) }

// Errorf logs an error. A route the server cannot reach (a member that is
// down) it tries again every second, each time with an error: the first
// is a warning, the others debug lines.
func (l *Logs) Errorf(format string, v ...any) {
	if strings.Contains(format, "trying to connect to route") {
		level := slog.LevelDebug
		if len(v) > 0 && fmt.Sprint(v[0]) == "1" {
			level = slog.LevelWarn
		}
		l.emit(level, format, v...)
		return
	}
	l.emit(slog.LevelError, format, v...)
}

// Debugf logs at debug level.
func (l *Logs) Debugf(format string, v ...any) { l.emit(slog.LevelDebug, format, v...) }

// Tracef logs at debug level.
func (l *Logs) Tracef(format string, v ...any) { l.emit(slog.LevelDebug-4, format, v...) }
