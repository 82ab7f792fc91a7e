package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ServePipe serves the request protocol on a Unix socket at path, one JSON
// object per line in each direction, until ctx ends or Close is called.
// The socket file is made with mode 0600: the file's permissions are its
// authentication, so a pipe needs no token. A stale socket left by a dead
// process is replaced; a live one is an error.
func (s *Server) ServePipe(ctx context.Context, path string) error {
	ln, err := ListenPipe(path)
	if err != nil {
		return err
	}
	return s.ServePipeListener(ctx, ln)
}

// ListenPipe makes the Unix socket at path with mode 0600. The socket is
// bound in a fresh directory only this user may enter, made 0600 there, and
// only then linked at path, so nobody can connect to it while it still has
// the umask's mode. Closing the listener removes path.
func ListenPipe(path string) (net.Listener, error) {
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("pipe %s is in use by another process: stop it, or pick another name with --pipe", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale pipe %s: %w", path, err)
	}
	private, err := os.MkdirTemp(filepath.Dir(path), ".p")
	if err != nil {
		return nil, fmt.Errorf("listen on pipe %s: %w", path, err)
	}
	defer os.RemoveAll(private)
	tmp := filepath.Join(private, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on pipe %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("make pipe %s private: %w", path, err)
	}
	// A link fails when path exists: a process that made it since the
	// check above keeps it. Where sockets cannot be linked, a rename does.
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			ln.Close()
			return nil, fmt.Errorf("pipe %s is in use by another process: stop it, or pick another name with --pipe", path)
		}
		if err := os.Rename(tmp, path); err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen on pipe %s: %w", path, err)
		}
	}
	return &pipeListener{UnixListener: ln, addr: &net.UnixAddr{Name: path, Net: "unix"}}, nil
}

// pipeListener is a socket bound under another name and moved to addr: its
// Addr is addr, and Close removes addr's file.
type pipeListener struct {
	*net.UnixListener
	addr   *net.UnixAddr
	remove sync.Once
}

// Addr returns the socket's path.
func (l *pipeListener) Addr() net.Addr { return l.addr }

// Close stops listening and removes the socket file, once.
func (l *pipeListener) Close() error {
	err := l.UnixListener.Close()
	l.remove.Do(func() { os.Remove(l.addr.Name) })
	return err
}

// ServePipeListener serves pipe connections accepted from ln.
func (s *Server) ServePipeListener(ctx context.Context, ln net.Listener) error {
	go func() {
		select {
		case <-ctx.Done():
		case <-s.ctx.Done():
		}
		ln.Close()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || s.ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept on pipe: %w", err)
		}
		if !s.track() {
			nc.Close()
			return nil
		}
		go func() {
			defer s.wg.Done()
			t := newPipeTransport(nc, s.cfg.MaxMessageBytes)
			s.serveConn(ctx, t, peer{pipe: true})
		}()
	}
}

// pipeTransport is one pipe connection: lines in, lines out.
type pipeTransport struct {
	nc  net.Conn
	br  *bufio.Reader
	max int64

	mu sync.Mutex // guards bw, used by the writer and by close
	bw *bufio.Writer
}

func newPipeTransport(nc net.Conn, max int64) *pipeTransport {
	return &pipeTransport{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), bw: bufio.NewWriterSize(nc, 64<<10), max: max}
}

func (t *pipeTransport) kind() string { return "pipe" }

// interrupt ends the read; close then tells the peer why.
func (t *pipeTransport) interrupt(error) { t.nc.SetReadDeadline(time.Now()) }

// read returns the next non-empty line. A line over the size limit is
// skipped and answered as a bad message.
func (t *pipeTransport) read(ctx context.Context) ([]byte, error) {
	for {
		line, err := readLine(t.br, t.max)
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			return line, nil
		}
	}
}

// readLine reads one line of at most max bytes. A longer line is consumed
// and reported as a bad message.
func readLine(br *bufio.Reader, max int64) ([]byte, error) {
	var line []byte
	tooBig := false
	for {
		part, err := br.ReadSlice('\n')
		if !tooBig {
			// The newline ending the line does not count against the limit.
			if int64(len(line)+len(bytes.TrimSuffix(part, []byte("\n")))) > max {
				tooBig, line = true, nil
			} else {
				line = append(line, part...)
			}
		}
		switch {
		case err == nil:
			if tooBig {
				return nil, &badMessage{fmt.Sprintf("the line is over the %d-byte limit: send smaller requests", max)}
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0 && !tooBig:
			return line, nil
		default:
			return nil, err
		}
	}
}

func (t *pipeTransport) write(msgs [][]byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		t.bw.Write(m)
		t.bw.WriteByte('\n')
	}
	return t.bw.Flush()
}

func (t *pipeTransport) abort() { t.nc.Close() }

func (t *pipeTransport) close(code closeCode, reason string) {
	if code != closeNormal && reason != "" {
		// Tell the peer why, as a last line it can read.
		t.mu.Lock()
		t.nc.SetWriteDeadline(time.Now().Add(time.Second))
		line, _ := json.Marshal(struct {
			T      string `json:"t"`
			Code   int    `json:"code"`
			Reason string `json:"reason"`
		}{"close", int(code), reason})
		t.bw.Write(append(line, '\n'))
		t.bw.Flush()
		t.mu.Unlock()
	}
	t.nc.Close()
}
