package kernel

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
)

// DefaultCheckpointEvery is how many frames a session logs between two
// checkpoints when Config.CheckpointEvery is 0.
const DefaultCheckpointEvery = 1024

// checkpointBudget bounds what checkpoints cost against the log they
// save reading: a periodic or end-of-run checkpoint waits until the frames
// logged since the last one weigh checkpointBudget times that checkpoint,
// so checkpoints add at most 1/checkpointBudget to the bytes a session
// writes, however large its state is against its traffic (one answer
// streamed for a million tokens).
const checkpointBudget = 4

// checkpointMagic and checkpointVersion open every encoded checkpoint; one
// with another magic or version is ignored, never trusted over the log.
const (
	checkpointMagic   = "ORCK"
	checkpointVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpoint is a session's reduced state right after frame head: every
// field load rebuilds from the log. It is taken on the actor (taking it
// copies slices and maps but no document: documents are never changed in
// place) and encoded and written off it.
type checkpoint struct {
	session     string
	head        uint64
	headSum     uint64 // fnv64a of the data of the frame at head; 0 at head 0
	headData    []byte // on load, that frame's data as the log holds it
	state       []byte
	snapshotted bool
	messages    []protocol.Message
	hidden      []string
	runs        []uint64 // hashes of every run id used, sorted
	openRun     string   // the run the log shows open, or ""
	open        openSet  // what openRun left open
	ext         map[string]json.RawMessage
}

// checkpointMeta is the JSON part of an encoded checkpoint.
type checkpointMeta struct {
	Session     string                     `json:"session"`
	Head        uint64                     `json:"head"`
	HeadSum     uint64                     `json:"headSum"`
	Snapshotted bool                       `json:"snapshotted,omitempty"`
	Messages    []protocol.Message         `json:"messages"`
	Hidden      []string                   `json:"hidden,omitempty"`
	OpenRun     string                     `json:"openRun,omitempty"`
	Open        openSetJSON                `json:"open,omitzero"`
	Ext         map[string]json.RawMessage `json:"ext,omitempty"`
}

type openSetJSON struct {
	Texts          []string          `json:"texts,omitempty"`
	Calls          []string          `json:"calls,omitempty"`
	ReasoningMsgs  []string          `json:"reasoningMsgs,omitempty"`
	ReasoningSpans []string          `json:"reasoningSpans,omitempty"`
	Steps          []string          `json:"steps,omitempty"`
	Subagents      []string          `json:"subagents,omitempty"`
	Owner          map[string]string `json:"owner,omitempty"`
}

func (o openSet) clone() openSet {
	return openSet{
		texts: slices.Clone(o.texts), calls: slices.Clone(o.calls), reasoningMsgs: slices.Clone(o.reasoningMsgs),
		reasoningSpans: slices.Clone(o.reasoningSpans), steps: slices.Clone(o.steps), subagents: slices.Clone(o.subagents),
		owner: cloneMap(o.owner),
	}
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return nil
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// encode returns the checkpoint as stored: the magic and version, a CRC-32C
// of the rest, the state document and the run hashes verbatim, then the
// other fields as JSON.
func (c *checkpoint) encode() ([]byte, error) {
	meta, err := json.Marshal(checkpointMeta{
		Session: c.session, Head: c.head, HeadSum: c.headSum, Snapshotted: c.snapshotted,
		Messages: nonNil(c.messages), Hidden: c.hidden, OpenRun: c.openRun, Ext: c.ext,
		Open: openSetJSON{Texts: c.open.texts, Calls: c.open.calls, ReasoningMsgs: c.open.reasoningMsgs,
			ReasoningSpans: c.open.reasoningSpans, Steps: c.open.steps, Subagents: c.open.subagents, Owner: c.open.owner},
	})
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	out := make([]byte, 0, 9+2*binary.MaxVarintLen64+len(c.state)+8*len(c.runs)+len(meta))
	out = append(out, checkpointMagic...)
	out = append(out, checkpointVersion, 0, 0, 0, 0)
	out = binary.AppendUvarint(out, uint64(len(c.state)))
	out = append(out, c.state...)
	out = binary.AppendUvarint(out, uint64(len(c.runs)))
	for _, h := range c.runs {
		out = binary.BigEndian.AppendUint64(out, h)
	}
	out = append(out, meta...)
	binary.BigEndian.PutUint32(out[5:9], crc32.Checksum(out[9:], castagnoli))
	return out, nil
}

// errCheckpoint is why a stored checkpoint was not used.
var errCheckpoint = errors.New("checkpoint not usable")

// decodeCheckpoint reads what encode wrote. Anything else (another magic
// or version, a bad checksum, a truncated or garbled body, another
// session's checkpoint, a head that disagrees with the row's) is an error
// wrapping errCheckpoint.
func decodeCheckpoint(session string, sc store.Checkpoint) (*checkpoint, error) {
	b := sc.Data
	switch {
	case len(b) < 9 || string(b[:4]) != checkpointMagic:
		return nil, fmt.Errorf("%w: not a checkpoint", errCheckpoint)
	case b[4] != checkpointVersion:
		return nil, fmt.Errorf("%w: format version %d, this kernel reads %d", errCheckpoint, b[4], checkpointVersion)
	case binary.BigEndian.Uint32(b[5:9]) != crc32.Checksum(b[9:], castagnoli):
		return nil, fmt.Errorf("%w: checksum mismatch", errCheckpoint)
	}
	b = b[9:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, fmt.Errorf("%w: truncated state", errCheckpoint)
	}
	c := &checkpoint{state: bytes.Clone(b[k : k+int(n)])}
	b = b[k+int(n):]
	n, k = binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k)/8 {
		return nil, fmt.Errorf("%w: truncated run ids", errCheckpoint)
	}
	b = b[k:]
	c.runs = make([]uint64, n)
	for i := range c.runs {
		c.runs[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	b = b[8*n:]
	var meta checkpointMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("%w: %v", errCheckpoint, err)
	}
	if meta.Session != session || meta.Head != sc.Head || !json.Valid(c.state) {
		return nil, fmt.Errorf("%w: it is of session %q at seq %d, stored as %q at seq %d", errCheckpoint, meta.Session, meta.Head, session, sc.Head)
	}
	c.session, c.head, c.headSum, c.snapshotted = meta.Session, meta.Head, meta.HeadSum, meta.Snapshotted
	c.messages, c.hidden, c.openRun, c.ext = meta.Messages, meta.Hidden, meta.OpenRun, meta.Ext
	o := meta.Open
	c.open = openSet{texts: o.Texts, calls: o.Calls, reasoningMsgs: o.ReasoningMsgs, reasoningSpans: o.ReasoningSpans,
		steps: o.Steps, subagents: o.Subagents, owner: o.Owner}
	return c, nil
}

// frameSum is the fingerprint of a frame's data a checkpoint keeps of its
// head frame, so a checkpoint of another log (a restored or repaired file)
// is never applied to this one.
func frameSum(data []byte) uint64 {
	h := fnv.New64a()
	h.Write(data)
	return h.Sum64()
}

// runSet is the set of run ids a session has used, kept as 64-bit hashes:
// 8 bytes a run in memory and in a checkpoint. Two ids that share a hash
// (about one chance in 2^64 per pair) would make the second look reused.
type runSet map[uint64]struct{}

func runHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

func (r runSet) has(id string) bool {
	_, ok := r[runHash(id)]
	return ok
}

func (r runSet) add(id string) { r[runHash(id)] = struct{}{} }

func (r runSet) sorted() []uint64 {
	out := make([]uint64, 0, len(r))
	for h := range r {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// checkpointEvery is how many frames go between two periodic checkpoints,
// or 0 when the kernel writes none.
func (k *Kernel) checkpointEvery() int {
	if _, ok := k.cfg.Store.(store.Checkpointer); !ok || k.cfg.CheckpointEvery < 0 {
		return 0
	}
	if k.cfg.CheckpointEvery == 0 {
		return DefaultCheckpointEvery
	}
	return k.cfg.CheckpointEvery
}

// takeCheckpoint captures the session's state right after its last frame
// sequenced. Runs on the actor (or in load, before it starts).
func (s *Session) takeCheckpoint() *checkpoint {
	s.assertActor()
	c := &checkpoint{
		session: s.id, head: s.head, state: s.state.doc, snapshotted: s.snapshotted,
		messages: s.transcript.snapshot(), runs: s.runIDs.sorted(), ext: cloneMap(s.extState),
	}
	if s.head > 0 {
		c.headSum = frameSum(s.lastData)
	}
	for id := range s.transcript.hidden {
		c.hidden = append(c.hidden, id)
	}
	slices.Sort(c.hidden)
	switch c.openRun = s.info.OpenRun; {
	case c.openRun == "":
	case s.run != nil && s.run.id == c.openRun:
		c.open = s.run.open.clone()
	default:
		c.open = s.orphan.clone()
	}
	s.ckptFrames, s.ckptBytes = 0, 0
	return c
}

// restore sets the session's state from c. Runs in load, before the actor
// starts.
func (s *Session) restore(c *checkpoint) {
	s.head, s.lastData = c.head, c.headData
	s.state.doc = c.state
	s.snapshotted = c.snapshotted
	s.transcript = transcript{}
	for _, m := range c.messages {
		s.transcript.add(m)
	}
	for _, id := range c.hidden {
		if s.transcript.hidden == nil {
			s.transcript.hidden = make(map[string]bool)
		}
		s.transcript.hidden[id] = true
	}
	s.runIDs = make(runSet, len(c.runs))
	for _, h := range c.runs {
		s.runIDs[h] = struct{}{}
	}
	s.extState = c.ext
	s.orphan = openSet{}
	if c.openRun != "" && c.openRun == s.info.OpenRun {
		s.orphan = c.open
	}
}

// noteFrame counts a sequenced frame towards the next checkpoint and takes
// one when enough were logged since the last. Runs on the actor.
func (s *Session) noteFrame(data []byte) {
	s.lastData = data
	s.ckptFrames++
	s.ckptBytes += int64(len(data))
}

// maybeCheckpoint writes a checkpoint when one is due: at least
// Config.CheckpointEvery frames since the last one (any number when
// runEnded), weighing checkpointBudget times the last checkpoint's size.
// Runs on the actor.
func (s *Session) maybeCheckpoint(runEnded bool) {
	s.assertActor()
	if s.Following() {
		return // the owner checkpoints the session
	}
	every := s.k.checkpointEvery()
	if every == 0 || s.ckptFrames == 0 || (!runEnded && s.ckptFrames < every) {
		return
	}
	if s.ckptBytes < s.ckpt.lastSize.Load()*checkpointBudget {
		return
	}
	s.checkpointNow()
}

// checkpointNow takes a checkpoint and has it written once every frame it
// reflects is committed. Runs on the actor.
func (s *Session) checkpointNow() {
	s.assertActor()
	if s.Following() {
		return
	}
	c := s.takeCheckpoint()
	s.commits.push(commitItem{then: func() { s.ckpt.submit(s, c) }})
}

// checkpointWriter encodes and writes a session's checkpoints off the actor,
// one at a time; a checkpoint taken while one is being written waits, and a
// newer one replaces it, so a slow store gets the latest state and no queue.
type checkpointWriter struct {
	lastSize atomic.Int64 // bytes of the last checkpoint written or read

	mu      sync.Mutex // guards next, running and idle
	next    *checkpoint
	running bool
	idle    chan struct{} // closed when the writer stops; nil while none ran
}

// submit has c written, after the one being written if any.
func (w *checkpointWriter) submit(s *Session, c *checkpoint) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next = c
	if w.running {
		return
	}
	w.running = true
	w.idle = make(chan struct{})
	go w.loop(s)
}

func (w *checkpointWriter) loop(s *Session) {
	for {
		w.mu.Lock()
		c := w.next
		w.next = nil
		if c == nil {
			w.running = false
			close(w.idle)
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		s.writeCheckpoint(c)
	}
}

// wait returns once every checkpoint submitted so far is written.
func (w *checkpointWriter) wait() {
	w.mu.Lock()
	idle := w.idle
	w.mu.Unlock()
	if idle != nil {
		<-idle
	}
}

// writeCheckpoint encodes c and saves it. A failure is logged and changes
// nothing else: the log is the truth, and the next load scans a little more.
func (s *Session) writeCheckpoint(c *checkpoint) {
	cp, ok := s.k.cfg.Store.(store.Checkpointer)
	if !ok || s.broken.Load() {
		return
	}
	data, err := c.encode()
	if err == nil {
		err = cp.SaveCheckpoint(context.Background(), s.id, store.Checkpoint{Head: c.head, Data: data})
	}
	if err != nil {
		s.k.log.Warn("write checkpoint; the session will load from the one before", "session", s.id, "seq", c.head, "err", err)
		return
	}
	s.ckpt.lastSize.Store(int64(len(data)))
}

// loadCheckpoint returns the session's latest usable checkpoint, or nil
// when it has none or none that fits its log: one ahead of the log's head,
// or whose head frame is not the log's, is ignored.
func (s *Session) loadCheckpoint(ctx context.Context) *checkpoint {
	cp, ok := s.k.cfg.Store.(store.Checkpointer)
	if !ok || s.k.cfg.CheckpointEvery < 0 {
		return nil
	}
	sc, err := cp.LoadCheckpoint(ctx, s.id)
	if errors.Is(err, store.ErrNoCheckpoint) {
		return nil
	}
	if err != nil {
		s.k.log.Warn("read checkpoint; rebuilding the session from its log", "session", s.id, "err", err)
		return nil
	}
	c, err := decodeCheckpoint(s.id, sc)
	if err == nil && c.head > s.info.Head {
		err = fmt.Errorf("%w: it is at seq %d, the log ends at %d", errCheckpoint, c.head, s.info.Head)
	}
	if err == nil && c.head > 0 {
		var frames []store.Frame
		frames, err = s.k.cfg.Store.Read(ctx, s.id, c.head-1, 1)
		switch {
		case err != nil:
		case len(frames) != 1 || frames[0].Seq != c.head || frameSum(frames[0].Data) != c.headSum:
			err = fmt.Errorf("%w: its frame %d is not the log's", errCheckpoint, c.head)
		default:
			c.headData = frames[0].Data
		}
	}
	if err != nil {
		s.k.log.Warn("ignoring the session's checkpoint; rebuilding it from its log", "session", s.id, "err", err)
		return nil
	}
	s.ckpt.lastSize.Store(int64(len(sc.Data)))
	return c
}
