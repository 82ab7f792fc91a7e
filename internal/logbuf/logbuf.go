// Package logbuf provides a buffer that several goroutines may write to at
// once, for tests that capture a server's or a process's logs and print
// them when they fail.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer is a goroutine-safe bytes.Buffer. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
