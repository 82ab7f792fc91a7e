package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/getorrery/orrery/protocol"
)

// authorize adds the bearer token, if any, to an HTTP request.
func (c *Client) authorize(h http.Header) {
	if c.opts.Token != "" {
		h.Set("Authorization", "Bearer "+c.opts.Token)
	}
}

// health checks that the kernel answers GET /healthz.
func (c *Client) health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("dial %s: %w", c.base, err)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("dial %s: %w (is orrery serve running there?)", c.base, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("dial %s: GET /healthz answered %s: is this an Orrery kernel?", c.base, resp.Status)
	}
	return nil
}

// control sends one request to POST /control and returns the reply value.
func (c *Client) control(ctx context.Context, kind string, body []byte) (json.RawMessage, error) {
	// The client declares itself as on GET /events: the server acts with
	// its name (a hub seat) and what it draws (consent).
	target := c.base + "/control"
	q := url.Values{}
	if c.opts.Client != "" {
		q.Set("client", c.opts.Client)
	}
	if len(c.opts.Draws) > 0 {
		q.Set("draws", strings.Join(c.opts.Draws, ","))
	}
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	req.Header.Set("Content-Type", "application/json")
	c.authorize(req.Header)
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxFrameBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: read the reply: %w", kind, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, statusError(kind, resp.StatusCode, resp.Status, data)
	}
	return json.RawMessage(data), nil
}

// statusError turns a non-2xx answer into a *RequestError with the
// server's sentence, or the status when the body has none.
func statusError(kind string, code int, status string, body []byte) error {
	var eb protocol.ErrorBody
	if json.Unmarshal(body, &eb) != nil || eb.Error == "" {
		eb.Error = "the server answered " + status
	}
	return &RequestError{Request: kind, Status: code, Message: eb.Error}
}

// sseConn is one GET /events response a Stream reads.
type sseConn struct {
	body      io.ReadCloser
	closeOnce sync.Once
}

func (c *sseConn) close() { c.closeOnce.Do(func() { c.body.Close() }) }

// openEvents opens GET /events for s, resuming after since when given.
func (c *Client) openEvents(ctx context.Context, s *Stream, since *uint64) (*sseConn, error) {
	q := url.Values{"session": {s.session}}
	if since != nil {
		q.Set("since", strconv.FormatUint(*since, 10))
	}
	if s.coalesce {
		q.Set("coalesce", "1")
	}
	if c.opts.Client != "" {
		q.Set("client", c.opts.Client)
	}
	if len(c.opts.Draws) > 0 {
		q.Set("draws", strings.Join(c.opts.Draws, ","))
	}
	// The request lives as long as the stream: ctx only bounds the wait for
	// the response headers.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, c.base+"/events?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("attach %s: %w", s.session, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	c.authorize(req.Header)
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.opts.HTTPClient.Do(req)
		done <- result{resp, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		go func() {
			if r := <-done; r.resp != nil {
				r.resp.Body.Close()
			}
		}()
		return nil, fmt.Errorf("attach %s: %w", s.session, ctx.Err())
	}
	if r.err != nil {
		return nil, fmt.Errorf("attach %s: %w", s.session, r.err)
	}
	if r.resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(r.resp.Body, 64<<10))
		r.resp.Body.Close()
		return nil, statusError("attach "+s.session, r.resp.StatusCode, r.resp.Status, data)
	}
	return &sseConn{body: r.resp.Body}, nil
}

// readSSE reads c's events and hands each frame to s until the stream
// ends, then tells s why.
func (c *Client) readSSE(s *Stream, conn *sseConn) {
	idle := time.AfterFunc(c.opts.IdleTimeout, conn.close)
	defer idle.Stop()
	r := newSSEReader(conn.body, c.opts.MaxFrameBytes)
	for {
		data, err := r.next(func() { idle.Reset(c.opts.IdleTimeout) })
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the server ended the event stream")
			}
			s.lost(conn, fmt.Errorf("event stream: %w", err))
			conn.close()
			return
		}
		if !s.deliver(conn, data) {
			conn.close()
			return
		}
	}
}

// sseReader parses Server-Sent Events: it returns each event's data,
// joining several data lines with "\n", and skips comments, ids and
// events without data.
type sseReader struct {
	br   *bufio.Reader
	max  int64
	line []byte
}

func newSSEReader(r io.Reader, max int64) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the data of the next event. seen is called for every line
// read, keepalive comments included.
func (r *sseReader) next(seen func()) ([]byte, error) {
	var data []byte
	has := false
	for {
		line, err := r.readLine()
		if err != nil {
			return nil, err
		}
		if seen != nil {
			seen()
		}
		if len(line) == 0 {
			if has {
				return data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(field) != "data" {
			continue
		}
		if has {
			data = append(data, '\n')
		}
		data = append(data, value...)
		has = true
		if int64(len(data)) > r.max {
			return nil, fmt.Errorf("an event is over the %d-byte limit", r.max)
		}
	}
}

// readLine returns one line without its LF or CRLF; the result is valid
// until the next call.
func (r *sseReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		part, err := r.br.ReadSlice('\n')
		r.line = append(r.line, part...)
		if int64(len(r.line)) > r.max {
			return nil, fmt.Errorf("a line is over the %d-byte limit", r.max)
		}
		switch {
		case err == nil:
			line := r.line[:len(r.line)-1]
			return bytes.TrimSuffix(line, []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}
