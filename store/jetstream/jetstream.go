// Package jetstream is a store.Log kept in NATS JetStream, so that several
// Orrery nodes can share one log.
//
// All sessions' frames are in one stream, one subject per session
// (prefix.log.f.<session>). JetStream numbers messages across the whole
// stream, so each frame carries its session seq in the Orrery-Seq header,
// and the last message of each append carries what store.Session reports
// besides (the open run, the cost so far). Every append is fenced: it names
// the stream sequence of the session's last message
// (Nats-Expected-Last-Subject-Sequence over prefix.log.*.<session>), so a
// second writer is refused, never merged, and a retried publish is found
// by its Nats-Msg-Id. The frames of one batch go in one atomic batch
// publish. Reads use direct get, which any replica answers.
//
// Session records are a KV bucket (prefix_sessions), checkpoints an object
// store (prefix_checkpoints). A cost added without frames is a message of
// its own on prefix.log.c.<session>, rolled up so only the latest stays.
//
// Durability: JetStream writes each message to the OS at once but fsyncs
// only every sync_interval (two minutes by default). With one server, an
// OS crash or power loss can lose what was acknowledged in that time; a
// process crash loses nothing. With three replicas an append is
// acknowledged once a majority holds it, so losing one machine loses
// nothing; losing power to all of them at once can.
package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/getorrery/orrery/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Config is how a Log lays itself out in JetStream.
type Config struct {
	// Prefix names the stream (upper-cased), buckets and subjects:
	// "orrery" when empty.
	Prefix string
	// Replicas is how many servers hold each message: 1 when zero; 3 in a
	// three-server cluster.
	Replicas int
	// Timeout bounds each operation on JetStream whose context has no
	// deadline, its tries again included: 30 s when zero, so that an
	// append waits out the election of a stream's new leader.
	Timeout time.Duration
	// CloseConn makes Close close the connection too.
	CloseConn bool
}

// Header names the log writes on its messages.
const (
	hdrSeq      = "Orrery-Seq"       // the frame's session seq; on a cost record, the head
	hdrType     = "Orrery-Type"      // the frame's AG-UI type
	hdrRun      = "Orrery-Run"       // the frame's run
	hdrOpenRun  = "Orrery-Open-Run"  // the session's open run after this append
	hdrCost     = "Orrery-Cost"      // the session's MicroUSD after this append
	hdrHeadSseq = "Orrery-Head-Sseq" // on a cost record: the stream seq of the head frame
	hdrWriter   = "Orrery-Writer"    // on an append's last message: the Log that wrote it
)

// maxAtomic is the most messages JetStream takes in one atomic batch.
const maxAtomic = 1000

// Log is a store.Log and store.Checkpointer on JetStream.
type Log struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config
	n   names

	sessions    jetstream.KeyValue
	checkpoints jetstream.ObjectStore
	atomic      chan struct{} // bounds atomic batches in flight (the server allows 50 a stream)
	writer      string        // this Log's id, in its messages' ids
	replies     *replies

	mu     sync.Mutex
	closed bool
	ops    sync.WaitGroup
	tails  map[string]*tail
	known  map[string]bool
}

// tail is what the log knows of a session's end, for its appends.
type tail struct {
	mu sync.Mutex // held through an append of the session
	tailState
	idx spanIndex
}

// tailState is the end of a session's log.
type tailState struct {
	loaded   bool
	head     uint64 // seq of the last frame
	headSseq uint64 // its stream sequence
	last     uint64 // stream sequence of the session's last message of either kind
	openRun  string
	cost     int64
}

// spanIndex is where a session's recent frames are in the stream, so that
// a read from near the head starts without a search.
type spanIndex struct {
	mu    sync.Mutex
	spans []span
}

// span is a run of frames with consecutive seqs at consecutive stream
// sequences, as one atomic batch writes them.
type span struct {
	seq, sseq, n uint64
}

const maxSpans = 64

// maxTails bounds the tails kept; past it, idle ones are dropped and read
// again from the stream when next needed.
const maxTails = 4096

// Open makes sure the stream and buckets exist, laid out as cfg says, and
// returns the Log on nc. A stream that exists with other replicas is
// updated to cfg's.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (_ *Log, err error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "orrery"
	}
	if err := validPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	l := &Log{nc: nc, js: js, cfg: cfg, n: newNames(cfg.Prefix), atomic: make(chan struct{}, 32), writer: nuid.Next(),
		tails: make(map[string]*tail), known: make(map[string]bool)}
	if l.replies, err = newReplies(nc); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.replies.sub.Unsubscribe()
		}
	}()
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	_, err = createStream(ctx, js, jetstream.StreamConfig{
		Name:        l.n.stream,
		Description: "Orrery session frames, one subject a session",
		Subjects:    []string{l.n.frames + "*", l.n.costs + "*"},
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Retention:   jetstream.LimitsPolicy,
		// Dedup ids are kept in memory: a short window bounds them.
		Duplicates:         time.Minute,
		AllowDirect:        true,
		AllowRollup:        true,
		AllowAtomicPublish: true,
		RePublish:          &jetstream.RePublish{Source: l.n.frames + "*", Destination: l.n.live + "{{wildcard(1)}}"},
	})
	if err != nil {
		return nil, fmt.Errorf("jetstream: stream %s: %w", l.n.stream, err)
	}
	l.sessions, err = UntilAnswered(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: l.n.sessions, Description: "Orrery session records", History: 1,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("jetstream: bucket %s: %w", l.n.sessions, err)
	}
	l.checkpoints, err = UntilAnswered(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: l.n.checkpoints, Description: "Orrery session checkpoints",
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("jetstream: object store %s: %w", l.n.checkpoints, err)
	}
	return l, nil
}

// LiveSubject is the subject JetStream republishes a session's frames to
// once they are stored, for nodes that deliver them live.
func (l *Log) LiveSubject(session string) string { return l.n.live + Token(session) }

func (l *Log) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.cfg.Timeout)
}

// begin counts an operation in, or fails with store.ErrClosed.
func (l *Log) begin() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return store.ErrClosed
	}
	l.ops.Add(1)
	return nil
}

// record is a session's entry in the sessions bucket.
type record struct {
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Model   string    `json:"model"`
	Cwd     string    `json:"cwd"`
	Created time.Time `json:"created"`
}

// CreateSession records a new, empty session.
func (l *Log) CreateSession(ctx context.Context, s store.Session) error {
	if err := l.begin(); err != nil {
		return err
	}
	defer l.ops.Done()
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	data, err := json.Marshal(record{ID: s.ID, Title: s.Title, Model: s.Model, Cwd: s.Cwd, Created: s.Created.UTC()})
	if err != nil {
		return err
	}
	// A bucket whose stream has no leader yet (a cluster just formed, or
	// a server lost) answers nothing for a moment, and tries again; a
	// refusal is "exists" only if the record there is not the one an
	// earlier try, whose answer was lost, wrote.
	tries := 0
	_, err = UntilAnswered(ctx, func(ctx context.Context) (uint64, error) {
		tries++
		rev, err := l.sessions.Create(ctx, Token(s.ID), data)
		if errors.Is(err, jetstream.ErrKeyExists) && tries > 1 {
			if r, _, gerr := l.getRecord(ctx, s.ID); gerr == nil {
				if again, _ := json.Marshal(r); bytes.Equal(again, data) {
					return 0, nil
				}
			}
		}
		return rev, err
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("create session %s: %w", s.ID, store.ErrSessionExists)
	}
	if err != nil {
		return fmt.Errorf("create session %s: %w", s.ID, classify(err))
	}
	l.mu.Lock()
	l.known[s.ID] = true
	l.mu.Unlock()
	return nil
}

// getRecord reads a session's record and its revision.
func (l *Log) getRecord(ctx context.Context, id string) (record, uint64, error) {
	var value []byte
	var rev uint64
	e, err := l.sessions.Get(ctx, Token(id))
	switch {
	case err == nil:
		value, rev = e.Value(), e.Revision()
	case errors.Is(err, jetstream.ErrKeyNotFound):
		// A replica may answer a get before it has the record another
		// node just made: ask the bucket's leader before saying no.
		m, err := LeaderEntry(ctx, l.nc, l.n.sessions, Token(id))
		if err != nil {
			return record{}, 0, fmt.Errorf("session %s: %w", id, classify(err))
		}
		if m == nil {
			return record{}, 0, fmt.Errorf("session %s: %w", id, store.ErrUnknownSession)
		}
		value, rev = m.Data, m.Seq
	default:
		return record{}, 0, fmt.Errorf("session %s: %w", id, classify(err))
	}
	var r record
	if err := json.Unmarshal(value, &r); err != nil {
		return record{}, 0, fmt.Errorf("session %s: its record does not decode (%v): %w", id, err, store.ErrDamaged)
	}
	return r, rev, nil
}

// ensureKnown fails with store.ErrUnknownSession unless the session was
// created. Sessions are never deleted, so a yes is kept.
func (l *Log) ensureKnown(ctx context.Context, id string) error {
	l.mu.Lock()
	ok := l.known[id]
	l.mu.Unlock()
	if ok {
		return nil
	}
	if _, _, err := l.getRecord(ctx, id); err != nil {
		return err
	}
	l.mu.Lock()
	l.known[id] = true
	l.mu.Unlock()
	return nil
}

// Session returns the record of one session, its head as the stream's
// leader has it: a replica may not yet have the frames just appended, and
// a node taking a session over must start from its real end.
func (l *Log) Session(ctx context.Context, id string) (store.Session, error) {
	if err := l.begin(); err != nil {
		return store.Session{}, err
	}
	defer l.ops.Done()
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	r, _, err := l.getRecord(ctx, id)
	if err != nil {
		return store.Session{}, err
	}
	t, _, err := l.leaderTail(ctx, id)
	if err != nil {
		return store.Session{}, err
	}
	return session(r, t), nil
}

func session(r record, t tailState) store.Session {
	return store.Session{ID: r.ID, Title: r.Title, Model: r.Model, Cwd: r.Cwd, Created: r.Created,
		Head: t.head, OpenRun: t.openRun, MicroUSD: t.cost}
}

// Sessions lists every session, newest first.
func (l *Log) Sessions(ctx context.Context) ([]store.Session, error) {
	if err := l.begin(); err != nil {
		return nil, err
	}
	defer l.ops.Done()
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	toks, err := l.sessionKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", classify(err))
	}
	out := make([]store.Session, len(toks))
	errs := make([]error, len(toks))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, tok := range toks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id, err := sessionOf(tok)
			if err == nil {
				var r record
				if r, _, err = l.getRecord(ctx, id); err == nil {
					var t tailState
					if t, _, err = l.leaderTail(ctx, id); err == nil {
						out[i] = session(r, t)
					}
				}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	slices.SortStableFunc(out, func(a, b store.Session) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

// sessionKeys are the keys of the sessions bucket as its stream's leader
// has them. (A KV key listing is a consumer that a replica may serve
// before it has the records just made.)
func (l *Log) sessionKeys(ctx context.Context) ([]string, error) {
	st, err := l.js.Stream(ctx, "KV_"+l.n.sessions)
	if err != nil {
		return nil, err
	}
	prefix := "$KV." + l.n.sessions + "."
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, err
	}
	toks := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		toks = append(toks, strings.TrimPrefix(subj, prefix))
	}
	return toks, nil
}

// UpdateSession stores a session's title and model.
func (l *Log) UpdateSession(ctx context.Context, s store.Session) error {
	if err := l.begin(); err != nil {
		return err
	}
	defer l.ops.Done()
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	for {
		r, rev, err := l.getRecord(ctx, s.ID)
		if err != nil {
			return err
		}
		r.Title, r.Model = s.Title, s.Model
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = l.sessions.Update(ctx, Token(s.ID), data, rev)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("update session %s: %w", s.ID, classify(err))
		}
		// Another update came between: read it and apply ours on top.
	}
}

// readTail reads the end of a session's log from the stream, as any
// replica has it (a reader's view, which may lag the leader a moment).
func (l *Log) readTail(ctx context.Context, id string) (tailState, error) {
	m, err := l.directGet(ctx, directReq{LastFor: l.n.any + Token(id)})
	return l.tailFrom(id, m, err)
}

// leaderTail reads the end of a session's log from the stream's leader:
// what the next append is fenced against.
func (l *Log) leaderTail(ctx context.Context, id string) (tailState, stored, error) {
	m, err := leaderLast(ctx, l.nc, l.n.stream, l.n.any+Token(id))
	st, err := l.tailFrom(id, m, err)
	return st, m, err
}

// LastMessage is the last message on a subject, as LeaderLast reads it.
type LastMessage struct {
	Data   []byte
	Header nats.Header
	Seq    uint64    // its stream sequence: a KV entry's revision
	Time   time.Time // when the stream stored it
}

// LeaderLast returns the last message on subject in stream, as the
// stream's leader has it: what a reader needs that must not be answered by
// a replica that is behind (a direct get, which a KV get is, may be). It
// returns nil when the subject has no message.
func LeaderLast(ctx context.Context, nc *nats.Conn, stream, subject string) (*LastMessage, error) {
	m, err := leaderLast(ctx, nc, stream, subject)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &LastMessage{Data: m.data, Header: m.hdr, Seq: m.sseq, Time: m.time}, nil
}

// LeaderEntry returns the current value of key in the KV bucket, as the
// bucket's leader has it (a KV get may be answered by a replica that is
// behind): the value, its revision (Seq) and when it was written (Time).
// It returns nil when the key has no value, or was deleted or purged.
func LeaderEntry(ctx context.Context, nc *nats.Conn, bucket, key string) (*LastMessage, error) {
	m, err := LeaderLast(ctx, nc, "KV_"+bucket, "$KV."+bucket+"."+key)
	if err != nil || m == nil || m.Header.Get("KV-Operation") != "" {
		return nil, err
	}
	return m, nil
}

// leaderLast is the last message on subject in stream as the stream's
// leader has it (the stream's message API, which only the leader answers),
// or errNotFound.
func leaderLast(ctx context.Context, nc *nats.Conn, stream, subject string) (stored, error) {
	body, err := json.Marshal(directReq{LastFor: subject})
	if err != nil {
		return stored{}, err
	}
	// A stream that lost its leader (a server died) answers nothing until
	// it elects another, a few seconds later: ask again until ctx ends.
	reply, err := UntilAnswered(ctx, func(ctx context.Context) (*nats.Msg, error) {
		return nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	})
	if err != nil {
		return stored{}, fmt.Errorf("read stream %s: %w", stream, err)
	}
	var resp struct {
		Error   *apiError `json:"error"`
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return stored{}, fmt.Errorf("read stream %s: %q: %w", stream, reply.Data, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == errNoMessage {
			return stored{}, errNotFound
		}
		return stored{}, resp.Error
	}
	if resp.Message == nil {
		return stored{}, fmt.Errorf("read stream %s: an answer without a message", stream)
	}
	hdr := nats.Header{}
	if len(resp.Message.Header) > 0 {
		if hdr, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return stored{}, fmt.Errorf("read stream %s: headers of seq %d: %w", stream, resp.Message.Seq, err)
		}
	}
	return stored{sseq: resp.Message.Seq, subject: resp.Message.Subject, hdr: hdr, data: resp.Message.Data, time: resp.Message.Time}, nil
}

// tailFrom reads a tail out of a session's last message.
func (l *Log) tailFrom(id string, m stored, err error) (tailState, error) {
	if errors.Is(err, errNotFound) {
		return tailState{loaded: true}, nil
	}
	if err != nil {
		return tailState{}, fmt.Errorf("session %s: read its head: %w", id, classify(err))
	}
	head, err := strconv.ParseUint(m.hdr.Get(hdrSeq), 10, 64)
	if err != nil {
		return tailState{}, fmt.Errorf("session %s: its last message (stream seq %d) has no %s header: %w", id, m.sseq, hdrSeq, store.ErrDamaged)
	}
	cost, _ := strconv.ParseInt(m.hdr.Get(hdrCost), 10, 64)
	headSseq := m.sseq
	if m.subject != l.n.frames+Token(id) {
		headSseq, _ = strconv.ParseUint(m.hdr.Get(hdrHeadSseq), 10, 64)
	}
	return tailState{loaded: true, head: head, headSseq: headSseq, last: m.sseq, openRun: m.hdr.Get(hdrOpenRun), cost: cost}, nil
}

// spansOf returns the session's span index.
func (l *Log) spansOf(id string) *spanIndex {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.tails[id]
	if !ok {
		t = &tail{}
		l.tails[id] = t
	}
	return &t.idx
}

// tailOf returns the session's tail, locked.
func (l *Log) tailOf(id string) *tail {
	l.mu.Lock()
	t, ok := l.tails[id]
	if !ok {
		if len(l.tails) >= maxTails {
			for k, old := range l.tails {
				if old.mu.TryLock() {
					delete(l.tails, k)
					old.mu.Unlock()
					break
				}
			}
		}
		t = &tail{}
		l.tails[id] = t
	}
	l.mu.Unlock()
	t.mu.Lock()
	return t
}

// Append logs each batch with one fenced publish: an atomic batch when it
// has more than one frame. Sessions are written in parallel; the batches
// of one session in order.
func (l *Log) Append(ctx context.Context, batches ...store.Batch) error {
	if err := l.begin(); err != nil {
		return err
	}
	defer l.ops.Done()
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	var order []string
	bySession := make(map[string][]store.Batch)
	for _, b := range batches {
		if _, ok := bySession[b.Session]; !ok {
			order = append(order, b.Session)
		}
		bySession[b.Session] = append(bySession[b.Session], b)
	}
	if len(order) == 1 {
		return l.appendSession(ctx, order[0], bySession[order[0]])
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, id := range order {
		wg.Go(func() { errs[i] = l.appendSession(ctx, id, bySession[id]) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (l *Log) appendSession(ctx context.Context, id string, batches []store.Batch) error {
	if err := l.ensureKnown(ctx, id); err != nil {
		return fmt.Errorf("append to session %s: %w", id, err)
	}
	t := l.tailOf(id)
	defer t.mu.Unlock()
	var errs []error
	for _, b := range batches {
		if len(b.Frames) == 0 && b.CostDelta == 0 {
			continue
		}
		if !t.loaded {
			st, _, err := l.leaderTail(ctx, id)
			if err != nil {
				errs = append(errs, fmt.Errorf("append to session %s: %w", id, err))
				continue
			}
			t.tailState = st
		}
		if err := checkSeqs(b, t.head); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := l.publishBatch(ctx, id, b, t); err != nil {
			t.loaded = false // learn the truth again before the next append
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkSeqs reports whether b's frames follow head, one by one.
func checkSeqs(b store.Batch, head uint64) error {
	for i, f := range b.Frames {
		if want := head + uint64(i) + 1; f.Seq != want {
			return fmt.Errorf("append to session %s: frame %d of the batch has seq %d, want %d: %w", b.Session, i, f.Seq, want, store.ErrSeqConflict)
		}
	}
	return nil
}

// publishBatch writes b after t and advances t. A publish that times out
// or finds no server is tried again, after reading where the session
// stands: the fence and the message id keep a retry from writing twice.
func (l *Log) publishBatch(ctx context.Context, id string, b store.Batch, t *tail) error {
	for start := 0; ; {
		end := min(len(b.Frames), start+maxAtomic)
		chunk := store.Batch{Session: b.Session, Frames: b.Frames[start:end]}
		if end == len(b.Frames) {
			chunk.CostDelta = b.CostDelta
		}
		if err := l.publishChunk(ctx, id, chunk, t); err != nil {
			return err
		}
		if end == len(b.Frames) {
			return nil
		}
		start = end
	}
}

// publishChunk writes at most maxAtomic frames, or a cost record when it
// has none.
func (l *Log) publishChunk(ctx context.Context, id string, b store.Batch, t *tail) error {
	tok := Token(id)
	openRun := t.openRun
	for _, f := range b.Frames {
		switch f.Type {
		case "RUN_STARTED":
			openRun = f.Run
		case "RUN_FINISHED", "RUN_ERROR":
			openRun = ""
		}
	}
	cost := t.cost + b.CostDelta
	msgs := make([]*nats.Msg, 0, max(1, len(b.Frames)))
	for _, f := range b.Frames {
		if len(f.Data) > 0 && int64(len(f.Data)) > l.nc.MaxPayload()-4096 {
			return fmt.Errorf("append to session %s seq %d: a frame of %d bytes is more than the NATS server's max_payload (%d) allows: raise max_payload", id, f.Seq, len(f.Data), l.nc.MaxPayload())
		}
		m := &nats.Msg{Subject: l.n.frames + tok, Data: f.Data, Header: nats.Header{}}
		m.Header.Set(hdrSeq, strconv.FormatUint(f.Seq, 10))
		m.Header.Set(hdrType, f.Type)
		if f.Run != "" {
			m.Header.Set(hdrRun, f.Run)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		m := &nats.Msg{Subject: l.n.costs + tok, Header: nats.Header{}}
		m.Header.Set(hdrSeq, strconv.FormatUint(t.head, 10))
		m.Header.Set(hdrHeadSseq, strconv.FormatUint(t.headSseq, 10))
		m.Header.Set("Nats-Rollup", "sub")
		msgs = append(msgs, m)
	}
	first, last := msgs[0], msgs[len(msgs)-1]
	first.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(t.last, 10))
	first.Header.Set("Nats-Expected-Last-Subject-Sequence-Subject", l.n.any+tok)
	if len(b.Frames) > 0 {
		// The id names this writer too: another writer's batch at the same
		// seq is not a duplicate of ours but a conflict, which the fence
		// reports.
		first.Header.Set("Nats-Msg-Id", tok+":"+strconv.FormatUint(b.Frames[0].Seq, 10)+":"+l.writer)
	}
	if openRun != "" {
		last.Header.Set(hdrOpenRun, openRun)
	}
	last.Header.Set(hdrCost, strconv.FormatInt(cost, 10))
	last.Header.Set(hdrWriter, l.writer)
	// look reads what the stream's leader holds last for the session:
	// this very append (a publish whose answer was lost), or whether
	// anything was written after the tail this append follows.
	look := func() (sseq uint64, ours, moved bool, err error) {
		now, m, err := l.leaderTail(ctx, id)
		if err != nil {
			return 0, false, false, err
		}
		ours = len(b.Frames) > 0 && now.head == b.Frames[len(b.Frames)-1].Seq && m.hdr.Get(hdrWriter) == l.writer
		return now.last, ours, now.last != t.last, nil
	}

	var ack pubAck
	var err error
retry:
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		ack, err = l.publish(actx, msgs)
		cancel()
		if attempt > 0 && errors.Is(err, store.ErrSeqConflict) {
			// Refused after a try whose answer was lost: that try may be
			// what the fence now holds.
			if sseq, ours, _, lerr := look(); lerr == nil && ours {
				ack, err = pubAck{Sequence: sseq}, nil
			}
		}
		if err == nil || !transient(err) {
			break
		}
		// The publish may or may not have landed: look. A stream whose
		// leader was lost elects another within seconds (a node that
		// ran a NATS server died): meanwhile every publish fails the same
		// way, so try until the append's deadline.
		select {
		case <-ctx.Done():
			return fmt.Errorf("append to session %s: %w (and then %w)", id, err, ctx.Err())
		case <-time.After(time.Duration(min(50<<min(attempt, 4), 500)) * time.Millisecond):
		}
		sseq, ours, moved, lerr := look()
		switch {
		case lerr != nil:
		case ours:
			ack, err = pubAck{Sequence: sseq}, nil
			break retry
		case moved:
			return fmt.Errorf("append to session %s: another writer wrote after stream seq %d: %w", id, t.last, store.ErrSeqConflict)
		}
	}
	if err != nil {
		return fmt.Errorf("append to session %s seq %d..: %w", id, firstSeq(b, t), err)
	}
	n := uint64(len(b.Frames))
	if n > 0 {
		t.head = b.Frames[n-1].Seq
		t.headSseq = ack.Sequence
		t.idx.add(span{seq: b.Frames[0].Seq, sseq: ack.Sequence - n + 1, n: n})
	}
	t.last, t.openRun, t.cost = ack.Sequence, openRun, cost
	return nil
}

func firstSeq(b store.Batch, t *tail) uint64 {
	if len(b.Frames) > 0 {
		return b.Frames[0].Seq
	}
	return t.head
}

func (x *spanIndex) add(s span) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if k := len(x.spans); k > 0 {
		p := &x.spans[k-1]
		if p.seq+p.n == s.seq && p.sseq+p.n == s.sseq {
			p.n += s.n
			return
		}
	}
	if len(x.spans) == maxSpans {
		x.spans = append(x.spans[:0], x.spans[1:]...)
	}
	x.spans = append(x.spans, s)
}

// find returns frame seq's stream sequence when a span holds it, or else
// bounds on it: it is at least lo and, when hi > 0, at most hi.
func (x *spanIndex) find(seq uint64) (sseq, lo, hi uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	lo = 1
	for _, s := range x.spans {
		switch {
		case seq >= s.seq && seq < s.seq+s.n:
			return s.sseq + (seq - s.seq), 0, 0
		case s.seq+s.n-1 < seq:
			lo = max(lo, s.sseq+s.n)
		case s.seq > seq && (hi == 0 || s.sseq-1 < hi):
			hi = s.sseq - 1
		}
	}
	return 0, lo, hi
}

// pubAck is JetStream's answer to a publish.
type pubAck struct {
	Stream    string    `json:"stream"`
	Sequence  uint64    `json:"seq"`
	Duplicate bool      `json:"duplicate,omitempty"`
	BatchSize uint64    `json:"count,omitempty"`
	Error     *apiError `json:"error,omitempty"`
}

type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("jetstream: %s (error %d)", e.Description, e.ErrCode)
}

// JetStream error codes the log tells apart.
const (
	errWrongLastSequence      = 10071
	errWrongLastSeqConstant   = 10164
	errInsufficientResources  = 10023
	errStorageExceeded        = 10047
	errAtomicDuplicateMessage = 10201
	errStoreFailed            = 10077
	errNoMessage              = 10037
)

// publish sends msgs, the last one as a request, and reads the ack. More
// than one message is an atomic batch.
func (l *Log) publish(ctx context.Context, msgs []*nats.Msg) (pubAck, error) {
	if len(msgs) > 1 {
		select {
		case l.atomic <- struct{}{}:
			defer func() { <-l.atomic }()
		case <-ctx.Done():
			return pubAck{}, ctx.Err()
		}
		id := nuid.Next()
		for i, m := range msgs {
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		}
		msgs[len(msgs)-1].Header.Set("Nats-Batch-Commit", "1")
		for _, m := range msgs[:len(msgs)-1] {
			if err := l.nc.PublishMsg(m); err != nil {
				return pubAck{}, fmt.Errorf("publish: %w", err)
			}
		}
	}
	reply, err := l.nc.RequestMsgWithContext(ctx, msgs[len(msgs)-1])
	if err != nil {
		return pubAck{}, fmt.Errorf("publish: %w", err)
	}
	var ack pubAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return pubAck{}, fmt.Errorf("publish: an ack that does not decode (%q): %w", reply.Data, err)
	}
	if ack.Error != nil {
		return pubAck{}, ack.Error.classify()
	}
	if ack.Sequence == 0 {
		return pubAck{}, fmt.Errorf("publish: an ack without a stream sequence: %q", reply.Data)
	}
	return ack, nil
}

// classify maps a JetStream refusal onto the store's errors.
func (e *apiError) classify() error {
	switch e.ErrCode {
	case errWrongLastSequence:
		return fmt.Errorf("%w: another writer appended to the session first (%s)", store.ErrSeqConflict, e.Description)
	case errWrongLastSeqConstant:
		// In a cluster the leader refuses a fenced publish while the
		// subject's previous one is still being applied, which can be just
		// after that one was acknowledged: look, and try again.
		return fmt.Errorf("%w: the session's previous append is still being applied (%s)", errRetry, e.Description)
	case errAtomicDuplicateMessage:
		return fmt.Errorf("%w: the batch was already written (%s)", errRetry, e.Description)
	case errInsufficientResources, errStorageExceeded:
		return fmt.Errorf("%w: %w", e, syscall.ENOSPC)
	case errStoreFailed:
		return fmt.Errorf("%w: %w", e, syscall.EIO)
	}
	return e
}

// attemptTimeout bounds one try of a publish, which is tried again when
// it gets no answer.
const attemptTimeout = 2 * time.Second

// errRetry marks a publish whose outcome is learnt by reading the tail.
var errRetry = errors.New("look again")

// transient reports whether err leaves the outcome of a publish unknown,
// so that reading the tail and trying again is right.
func transient(err error) bool {
	return errors.Is(err, errRetry) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrConnectionReconnecting)
}

// classify keeps an error's meaning and adds what a user can do about a
// cluster that does not answer.
func classify(err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("%w: no JetStream server answered; is the NATS cluster up, with JetStream enabled, and a majority of its servers reachable?", err)
	case errors.Is(err, nats.ErrConnectionClosed):
		return fmt.Errorf("%w: %w", err, store.ErrClosed)
	}
	return err
}

// locate returns the stream sequence to read a session's frames after
// since from: the stream sequence of frame since (so the next message on
// the subject after it is since+1), or 0 to read from the start. ok is
// false when the session has no frame since.
func (l *Log) locate(ctx context.Context, id string, since uint64) (sseq uint64, ok bool, err error) {
	if since == 0 {
		return 0, true, nil
	}
	var lo, hi uint64 = 1, 0
	l.mu.Lock()
	t := l.tails[id]
	l.mu.Unlock()
	if t != nil {
		if sseq, lo, hi = t.idx.find(since); sseq != 0 {
			return sseq, true, nil
		}
	}
	// Bound the search by the session's head.
	end, err := l.readTail(ctx, id)
	if err != nil {
		return 0, false, err
	}
	switch {
	case since > end.head:
		return 0, false, nil
	case since == end.head:
		return end.headSseq, true, nil
	}
	if hi == 0 || hi > end.headSseq-1 {
		hi = end.headSseq - 1
	}
	// Each frame takes at least one stream sequence, so frame since is
	// at least (head-since) before the head's.
	hi = min(hi, end.headSseq-(end.head-since))
	subj := l.n.frames + Token(id)
	for lo <= hi {
		mid := lo + (hi-lo)/2
		m, err := l.directGet(ctx, directReq{Seq: mid, NextFor: subj})
		if errors.Is(err, errNotFound) {
			hi = mid - 1
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("session %s: find frame %d: %w", id, since, classify(err))
		}
		seq, perr := strconv.ParseUint(m.hdr.Get(hdrSeq), 10, 64)
		if perr != nil {
			return 0, false, fmt.Errorf("session %s: the message at stream seq %d has no %s header: %w", id, m.sseq, hdrSeq, store.ErrDamaged)
		}
		switch {
		case seq == since:
			return m.sseq, true, nil
		case seq < since:
			lo = m.sseq + 1
		default:
			hi = min(mid, m.sseq) - 1
		}
	}
	return 0, false, fmt.Errorf("session %s: frame %d is missing from stream %s though the head is %d: %w", id, since, l.n.stream, end.head, store.ErrDamaged)
}

// page is how many frames one direct get batch asks for.
const page = 256

// Read returns up to limit frames of a session with seq > since.
func (l *Log) Read(ctx context.Context, session string, since uint64, limit int) ([]store.Frame, error) {
	out := []store.Frame{}
	err := l.scan(ctx, session, since, limit, true, func(f store.Frame) error {
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Scan calls fn with each frame of a session with seq > since, in order,
// a page at a time.
func (l *Log) Scan(ctx context.Context, session string, since uint64, fn func(store.Frame) error) error {
	return l.scan(ctx, session, since, 0, false, fn)
}

func (l *Log) scan(ctx context.Context, id string, since uint64, limit int, own bool, fn func(store.Frame) error) error {
	if err := l.begin(); err != nil {
		return err
	}
	defer l.ops.Done()
	if err := l.ensureKnown(ctx, id); err != nil {
		return err
	}
	rctx, cancel := l.withTimeout(ctx)
	defer cancel()
	sseq, ok, err := l.locate(rctx, id, since)
	if err != nil || !ok {
		return err
	}
	subj := l.n.frames + Token(id)
	next, done := since+1, 0
	for limit <= 0 || done < limit {
		want := page
		if limit > 0 {
			want = min(want, limit-done)
		}
		var lastSseq uint64
		n, more, err := l.directBatch(rctx, directReq{Seq: sseq + 1, NextFor: subj, Batch: want}, func(m stored) error {
			seq, err := strconv.ParseUint(m.hdr.Get(hdrSeq), 10, 64)
			if err != nil || seq != next {
				return fmt.Errorf("session %s: stream seq %d holds frame %q where frame %d belongs: %w", id, m.sseq, m.hdr.Get(hdrSeq), next, store.ErrDamaged)
			}
			data := m.data
			if own && data == nil {
				data = []byte{}
			}
			if err := fn(store.Frame{Seq: seq, Type: m.hdr.Get(hdrType), Run: m.hdr.Get(hdrRun), Data: data}); err != nil {
				return err
			}
			next++
			lastSseq = m.sseq
			return nil
		})
		done += n
		if lastSseq != 0 {
			// Remember where the page ended: a reader that comes back for
			// what follows (a follower, a client resuming) starts there
			// without a search.
			l.spansOf(id).add(span{seq: next - 1, sseq: lastSseq, n: 1})
		}
		if err != nil {
			return err
		}
		if n == 0 || !more {
			return nil
		}
		sseq = lastSseq
	}
	return nil
}

// checkpoint metadata keys.
const (
	metaHead = "head"
	metaSseq = "sseq"
)

// SaveCheckpoint replaces the session's checkpoint with c. The object
// store writes the new one in full before it names it, so a crash leaves
// the old one or c.
func (l *Log) SaveCheckpoint(ctx context.Context, id string, c store.Checkpoint) error {
	if err := l.begin(); err != nil {
		return err
	}
	defer l.ops.Done()
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	if err := l.ensureKnown(ctx, id); err != nil {
		return err
	}
	sseq, ok, err := l.locate(ctx, id, c.Head)
	if err != nil {
		return fmt.Errorf("save checkpoint of session %s: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("save checkpoint of session %s at seq %d: %w", id, c.Head, store.ErrCheckpointAhead)
	}
	meta := jetstream.ObjectMeta{Name: Token(id), Metadata: map[string]string{
		metaHead: strconv.FormatUint(c.Head, 10), metaSseq: strconv.FormatUint(sseq, 10)}}
	if _, err := l.checkpoints.Put(ctx, meta, bytes.NewReader(c.Data)); err != nil {
		return fmt.Errorf("save checkpoint of session %s: %w", id, classify(err))
	}
	return nil
}

// LoadCheckpoint returns the session's checkpoint, or store.ErrNoCheckpoint.
func (l *Log) LoadCheckpoint(ctx context.Context, id string) (store.Checkpoint, error) {
	if err := l.begin(); err != nil {
		return store.Checkpoint{}, err
	}
	defer l.ops.Done()
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	if err := l.ensureKnown(ctx, id); err != nil {
		return store.Checkpoint{}, err
	}
	r, err := l.checkpoints.Get(ctx, Token(id))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return store.Checkpoint{}, fmt.Errorf("session %s: %w", id, store.ErrNoCheckpoint)
	}
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("load checkpoint of session %s: %w", id, classify(err))
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("load checkpoint of session %s: %w", id, classify(err))
	}
	info, err := r.Info()
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("load checkpoint of session %s: %w", id, err)
	}
	head, err := strconv.ParseUint(info.Metadata[metaHead], 10, 64)
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("load checkpoint of session %s: no head in its metadata: %w", id, store.ErrDamaged)
	}
	if sseq, err := strconv.ParseUint(info.Metadata[metaSseq], 10, 64); err == nil && head > 0 {
		l.spansOf(id).add(span{seq: head, sseq: sseq, n: 1})
	}
	if data == nil {
		data = []byte{}
	}
	return store.Checkpoint{Head: head, Data: data}, nil
}

// Close waits for the calls in flight and releases the log; every call
// after it fails with store.ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	was := l.closed
	l.closed = true
	l.mu.Unlock()
	if was {
		return nil
	}
	l.ops.Wait()
	l.replies.sub.Unsubscribe()
	if l.cfg.CloseConn {
		l.nc.Close()
	}
	return nil
}

// FrameOf reads the frame a live (republished) message carries.
func FrameOf(m *nats.Msg) (store.Frame, error) {
	seq, err := strconv.ParseUint(m.Header.Get(hdrSeq), 10, 64)
	if err != nil {
		return store.Frame{}, fmt.Errorf("live message on %s has no %s header", m.Subject, hdrSeq)
	}
	data := m.Data
	if data == nil {
		data = []byte{}
	}
	return store.Frame{Seq: seq, Type: m.Header.Get(hdrType), Run: m.Header.Get(hdrRun), Data: data}, nil
}

// Prefix is the prefix of the log's stream, bucket and subject names.
func (l *Log) Prefix() string { return l.cfg.Prefix }

// createStream is CreateOrUpdateStream, tried until JetStream answers.
func createStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	return UntilAnswered(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.CreateOrUpdateStream(ctx, cfg) })
}

// UntilAnswered calls try until it succeeds, fails for good, or ctx
// ends, each call with a deadline of its own: 1 s, then a second more a
// try, up to 5 s. It tries again while JetStream gives no answer at all (a
// request made while the servers are still making their routes, or to a
// stream electing a new leader, can be lost), is not up yet (no
// responders, no response from the stream, error 10008), or cannot yet
// place a new stream's replicas (error 10005, "no suitable peers": a
// cluster just formed, or a server restarting). try must be safe to
// repeat: what it makes is made once.
func UntilAnswered[T any](ctx context.Context, try func(ctx context.Context) (T, error)) (T, error) {
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, time.Duration(min(n, 5))*time.Second)
		v, err := try(actx)
		cancel()
		var api *jetstream.APIError
		switch {
		case err == nil, ctx.Err() != nil:
			return v, err
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout),
			errors.Is(err, jetstream.ErrNoStreamResponse):
		case errors.As(err, &api) && (api.ErrorCode == 10005 || api.ErrorCode == 10008):
		default:
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
