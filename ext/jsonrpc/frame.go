// Package jsonrpc speaks JSON-RPC 2.0 framed with Content-Length headers,
// as the Language Server Protocol does: each message is a header block
// ("Content-Length: N\r\n", optionally "Content-Type: …\r\n", then "\r\n")
// followed by exactly N bytes of JSON. Both the extension host (package ext)
// and the Go SDK (package ext/sdk) use it, so it depends on nothing of
// Orrery's.
package jsonrpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// DefaultMaxBody is the largest message body a Reader accepts when its
// limit is zero: 4 MiB, room for a 64 KiB structure and 256 KiB of data
// many times over.
const DefaultMaxBody = 4 << 20

// maxHeaderLine bounds one header line, and maxHeaders the lines of one
// header block, so a peer that never ends its headers is refused early.
const (
	maxHeaderLine = 1024
	maxHeaders    = 8
)

// ErrFraming is wrapped by every error that means the stream can no longer
// be read: a malformed header, a missing or bad Content-Length, a body over
// the limit, or a body cut short. After one, the peer must be dropped: the
// next message's start cannot be found.
var ErrFraming = errors.New("jsonrpc: framing broken")

// FramingError says what was wrong with a message's framing.
type FramingError struct {
	// Msg says what was wrong and what the peer must send instead.
	Msg string
}

func (e *FramingError) Error() string { return e.Msg }

// Unwrap makes errors.Is(err, ErrFraming) true.
func (e *FramingError) Unwrap() error { return ErrFraming }

func framing(format string, args ...any) error {
	return &FramingError{Msg: fmt.Sprintf(format, args...)}
}

// Reader reads framed message bodies. It is not safe for concurrent use.
type Reader struct {
	r       *bufio.Reader
	maxBody int
}

// NewReader returns a Reader on r that refuses bodies over maxBody bytes
// (DefaultMaxBody when maxBody <= 0).
func NewReader(r io.Reader, maxBody int) *Reader {
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	return &Reader{r: bufio.NewReaderSize(r, 4096), maxBody: maxBody}
}

// Read returns the next message's body. It returns io.EOF when the stream
// ends cleanly between messages, and an error wrapping ErrFraming when the
// framing is broken.
func (r *Reader) Read() ([]byte, error) {
	length := -1
	for i := 0; ; i++ {
		line, err := r.line()
		if err != nil {
			if err == io.EOF && i == 0 {
				return nil, io.EOF
			}
			if err == io.EOF {
				return nil, framing("the stream ended inside a header block: end each header block with an empty line (\\r\\n)")
			}
			return nil, err
		}
		if line == "" {
			if i == 0 {
				return nil, framing("a message starts with an empty line: send \"Content-Length: N\\r\\n\\r\\n\" then N bytes of JSON")
			}
			break
		}
		if i >= maxHeaders {
			return nil, framing("a header block has more than %d lines: send only Content-Length (and Content-Type)", maxHeaders)
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, framing("header line %q has no colon: send \"Content-Length: N\\r\\n\\r\\n\" then N bytes of JSON", clip(line))
		}
		value = strings.TrimSpace(value)
		switch {
		case strings.EqualFold(strings.TrimSpace(name), "Content-Length"):
			if length >= 0 {
				return nil, framing("a header block has two Content-Length lines: send one")
			}
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 || strings.HasPrefix(value, "+") {
				return nil, framing("Content-Length %q is not a whole number of bytes: send the body's length in bytes", clip(value))
			}
			if n > r.maxBody {
				return nil, framing("a message of %d bytes is over the limit of %d: send smaller messages (split data, or patch instead of set)", n, r.maxBody)
			}
			length = n
		case strings.EqualFold(strings.TrimSpace(name), "Content-Type"):
			// Any type is taken: the body is read as UTF-8 JSON.
		default:
			return nil, framing("header %q is unknown: send only Content-Length (and Content-Type)", clip(name))
		}
	}
	if length < 0 {
		return nil, framing("a header block has no Content-Length: send \"Content-Length: N\\r\\n\\r\\n\" before each body")
	}
	body := make([]byte, length)
	if n, err := io.ReadFull(r.r, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, framing("the stream ended %d bytes into a body of %d: Content-Length must be the body's exact length in bytes", n, length)
		}
		return nil, fmt.Errorf("read body: %w", err)
	}
	return body, nil
}

// line reads one header line without its CRLF. A bare LF is refused: the
// framing is CRLF, and a stray LF usually means the body length was wrong.
func (r *Reader) line() (string, error) {
	var b []byte
	for {
		c, err := r.r.ReadByte()
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				return "", framing("the stream ended inside a header line: end each header line with \\r\\n")
			}
			return "", err
		}
		if c == '\n' {
			if len(b) == 0 || b[len(b)-1] != '\r' {
				return "", framing("header line %q ends with a bare \\n: end header lines with \\r\\n (a wrong Content-Length before it also causes this)", clip(string(b)))
			}
			return string(b[:len(b)-1]), nil
		}
		if len(b) >= maxHeaderLine {
			return "", framing("a header line is longer than %d bytes: send \"Content-Length: N\\r\\n\\r\\n\" then N bytes of JSON (a wrong Content-Length before it also causes this)", maxHeaderLine)
		}
		b = append(b, c)
	}
}

// clip shortens s for an error message and quotes nothing itself.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Write writes one framed message with body to w in a single Write call.
func Write(w io.Writer, body []byte) error {
	buf := make([]byte, 0, len(body)+32)
	buf = append(buf, "Content-Length: "...)
	buf = strconv.AppendInt(buf, int64(len(body)), 10)
	buf = append(buf, "\r\n\r\n"...)
	buf = append(buf, body...)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write message: %w", err)
	}
	return nil
}
