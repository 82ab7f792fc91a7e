// Package tui is Orrery's terminal UI, the host's own screen that bare
// `orrery` opens: a thread that streams in the middle, the composer at the
// bottom, panes, a band and a footer that extensions and the agent fill
// with live surfaces and components, consent prompts drawn in the host's own
// style, and steering and cancel from the keyboard.
//
// It talks to a kernel only through the Go client (package client): it
// attaches to a session, folds its frames into a client.State and draws
// what the state holds. Every piece of text from an agent, an extension or a
// tool passes through termtext.Strip before it is drawn.
package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
)

// FrameInterval is the shortest time between two draws of new frames: a
// fast stream is coalesced into at most one draw per interval, so the
// screen never falls behind the log.
const FrameInterval = time.Second / 60

// Options configure the TUI.
type Options struct {
	// Client is the connection to the kernel. The TUI does not close it.
	Client *client.Client
	// Session is the session to open, redrawn from its log; empty starts
	// a new one (or opens the picker with Resume).
	Session string
	// Resume opens the session picker when Session is empty.
	Resume bool
	// Host is set when this screen is the host's own (bare orrery on an
	// embedded kernel): links open here. Attached to a kernel elsewhere,
	// a link is only shown as a notice naming its target.
	Host bool
	// Workspace is the directory @mentions complete against.
	Workspace string
	// Local is set when the kernel runs on this machine though this
	// screen is not its host (bare orrery on a data dir another process
	// holds): new sessions ask to work in Workspace, and when the kernel
	// refuses that directory they work in the kernel's own, saying why.
	Local bool
	// Model names the model new sessions use ("" for the kernel's default).
	Model string
	// Logger receives the TUI's logs; nil discards them. It must not write
	// to the terminal the TUI draws on.
	Logger *slog.Logger
	// Graphics is the terminal's graphics protocol (DetectGraphics): with
	// one, image surfaces in panes are drawn as pictures; without, as
	// their alt.
	Graphics string
}

// Run runs the TUI on in and out until the person quits or ctx ends.
func Run(ctx context.Context, opts Options, in io.Reader, out io.Writer, extra ...tea.ProgramOption) error {
	m := New(opts)
	popts := append([]tea.ProgramOption{tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out)}, extra...)
	p := tea.NewProgram(m, popts...)
	m.send = p.Send
	_, err := p.Run()
	m.close()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run the terminal UI: %w", err)
	}
	return m.err
}

// Model is the TUI's bubbletea model. Build it with New.
type Model struct {
	opts Options
	log  *slog.Logger
	send func(tea.Msg)
	ctx  context.Context
	stop context.CancelFunc

	session string
	feed    *feed
	state   *client.State
	order   map[string]int
	stopped map[string]bool // extension ids the kernel said stopped
	// agentCommands are the slash commands the session's agent advertises
	// (orrery.commands), the latest list.
	agentCommands []agentCommand
	binder        binder

	scr   screen
	input composer

	runID      string
	cancelSent bool
	// runStart is when the run in flight started (as this screen saw it),
	// and usage what its last orrery.usage said: the status line's clock,
	// model and tokens. ticking is set while a tick of that clock is due.
	runStart time.Time
	// history is the attached session's head when it was attached;
	// replaying is set while a frame up to it is applied.
	history   uint64
	replaying bool
	usage     struct {
		Model       string `json:"model"`
		TotalTokens int64  `json:"totalTokens"`
	}
	ticking bool
	// disconnected is set once the connection to the kernel is lost for
	// good; reconnecting while the stream is getting it back.
	disconnected, reconnecting bool
	// draftKept is set once Ctrl-C put a draft away. Any other key clears
	// it.
	draftKept bool
	// quitBy is until when a second Ctrl-C quits: a first one with no run
	// and no draft only says so (quitWithin).
	quitBy    time.Time
	lastApply time.Time
	applyDue  bool
	// OnDraw, when set, is called after each draw with the time the oldest
	// frame in it arrived (zero when the draw had no new frame).
	OnDraw  func(arrived time.Time)
	drawnAt time.Time

	// images are the pictures on the terminal now; imagesDirty is set by a
	// draw that wants others.
	images      []imagePlacement
	imagesDirty bool
	expiring    bool // an info notice was added: its expiry is to be scheduled

	err error
}

// New returns a model for opts. Run drives it; tests may drive it
// directly with Update and View.
func New(opts Options) *Model {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	m := &Model{
		opts: opts, log: log, ctx: ctx, stop: stop,
		state: client.NewState(), order: map[string]int{}, stopped: map[string]bool{},
		send: func(tea.Msg) {},
	}
	if opts.Client != nil {
		// Read when called: the sender is the program's, set after New.
		opts.Client.SetOnReconnect(func(session string, lost error) { m.send(reconnectMsg{session: session, lost: lost}) })
	}
	m.scr = screen{
		width: 80, height: 24,
		dismissed: map[string]bool{}, cursor: map[string]int{},
		md: &markdown{}, graphics: opts.Graphics,
	}
	m.input.hpos = 0
	m.updateStatus()
	return m
}

// SetSender sets how the model's background work (the frame feed, replies)
// reaches it: a program's Send. Run sets it.
func (m *Model) SetSender(send func(tea.Msg)) { m.send = send }

func (m *Model) close() {
	m.stop()
	if m.feed != nil {
		m.feed.close()
	}
}

// Messages of the model.
type (
	// wakeMsg says frames wait in the feed of generation gen.
	wakeMsg struct{ gen int }
	// applyMsg is the deferred draw of frames that came early.
	applyMsg struct{ gen int }
	// attachedMsg is a session attached.
	attachedMsg struct {
		session string
		feed    *feed
		// history is the session's head when it was attached: frames up
		// to it are the past, replayed.
		history uint64
	}
	// noticeMsg is a line for the person.
	noticeMsg struct{ text string }
	// listMsg replaces the listing drawn under the thread.
	listMsg struct{ lines []string }
	// sessionsMsg opens the picker.
	sessionsMsg struct{ list []protocol.SessionSummary }
	// sentMsg is a run.send answered.
	sentMsg struct {
		reply  protocol.RunSendReply
		notice string // what to tell the person about the send, if anything
	}
	// feedErrMsg is a stream that failed for good.
	feedErrMsg struct{ err error }
	// reconnectMsg is the session's stream losing its connection (lost is
	// why) or getting it back (lost is nil).
	reconnectMsg struct {
		session string
		lost    error
	}
	// sendFailedMsg is a prompt the kernel did not take, and why.
	sendFailedMsg struct {
		text string
		err  error
	}
)

// Init starts by attaching (or opening the picker).
func (m *Model) Init() tea.Cmd {
	var cmd tea.Cmd
	switch {
	case m.opts.Session != "":
		cmd = m.attachCmd(m.opts.Session)
	case m.opts.Resume:
		cmd = m.sessionsCmd()
	default:
		cmd = m.newSessionCmd(m.opts.Model)
	}
	if m.opts.Graphics != GraphicsNone {
		return tea.Batch(cmd, imageTick())
	}
	return cmd
}

// imageTickMsg makes sure pictures a draw placed reach the terminal even
// when no other message follows the draw.
type imageTickMsg struct{}

// imageInterval is how often the pictures are checked.
const imageInterval = 200 * time.Millisecond

func imageTick() tea.Cmd {
	return tea.Tick(imageInterval, func(time.Time) tea.Msg { return imageTickMsg{} })
}

// Update handles one message; when the last draw placed pictures other
// than those on the terminal, it also draws them.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg.(type) {
	case imageTickMsg:
		cmd = imageTick()
	case noticeExpiryMsg:
		if m.expireNotices(time.Now()) {
			cmd = tea.Tick(time.Second, func(time.Time) tea.Msg { return noticeExpiryMsg{} })
		}
	default:
		_, cmd = m.update(msg)
	}
	if m.expiring {
		// An info notice was added: its line goes once its time is up. The
		// tick goes in a batch the program runs on its own, so that this
		// command never blocks whoever runs it for the tick's length.
		m.expiring = false
		cmds := []tea.Cmd{tea.Tick(infoFor, func(time.Time) tea.Msg { return noticeExpiryMsg{} })}
		if cmd != nil {
			cmds = append(cmds, cmd)
		}
		cmd = func() tea.Msg { return tea.BatchMsg(cmds) }
	}
	if m.imagesDirty {
		m.imagesDirty = false
		m.images = append(m.images[:0], m.scr.images...)
		seq := imageSequence(m.opts.Graphics, m.images, true)
		return m, tea.Batch(cmd, tea.Raw(seq))
	}
	return m, cmd
}

// feed carries frames from a stream's reader goroutine to the model,
// coalescing them: the reader appends, and wakes the model only when it is
// not already due to take them.
type feed struct {
	gen    int
	stream *client.Stream
	cancel context.CancelFunc

	mu      sync.Mutex // guards the fields below
	frames  []client.Frame
	arrived time.Time // when the oldest waiting frame arrived
	woke    bool
	err     error
}

var feedGen struct {
	sync.Mutex
	n int
}

func nextGen() int {
	feedGen.Lock()
	defer feedGen.Unlock()
	feedGen.n++
	return feedGen.n
}

func (f *feed) close() {
	f.cancel()
	f.stream.Close()
}

// push adds a frame and reports whether the model must be woken.
func (f *feed) push(fr client.Frame) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.frames) == 0 {
		f.arrived = time.Now()
	}
	f.frames = append(f.frames, fr)
	if f.woke {
		return false
	}
	f.woke = true
	return true
}

// take returns every waiting frame and when the oldest arrived.
func (f *feed) take() ([]client.Frame, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fr, at, err := f.frames, f.arrived, f.err
	f.frames, f.woke = nil, false
	return fr, at, err
}

// read runs on its own goroutine: it reads the stream until it ends.
func (f *feed) read(ctx context.Context, send func(tea.Msg)) {
	for {
		fr, err := f.stream.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, client.ErrClosed) {
				send(feedErrMsg{err: err})
			}
			return
		}
		if f.push(fr) {
			send(wakeMsg{gen: f.gen})
		}
	}
}

// Push hands frames to the model as the stream reader does; benchmarks
// and tests use it to feed a model without a connection. It returns the
// message to give Update, or nil when a wake is already due.
func (m *Model) Push(frames ...client.Frame) tea.Msg {
	if m.feed == nil {
		m.feed = &feed{gen: nextGen(), cancel: func() {}}
	}
	wake := false
	for _, fr := range frames {
		if m.feed.push(fr) {
			wake = true
		}
	}
	if wake {
		return applyMsg{gen: m.feed.gen}
	}
	return nil
}

func (m *Model) update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.scr.width, m.scr.height = msg.Width, msg.Height
		return m, nil
	case wakeMsg:
		if m.feed == nil || msg.gen != m.feed.gen {
			return m, nil
		}
		if wait := FrameInterval - time.Since(m.lastApply); wait > 0 {
			if !m.applyDue {
				m.applyDue = true
				gen := msg.gen
				return m, tea.Tick(wait, func(time.Time) tea.Msg { return applyMsg{gen: gen} })
			}
			return m, nil
		}
		m.apply()
		return m, m.clock()
	case applyMsg:
		if m.feed != nil && msg.gen == m.feed.gen {
			m.applyDue = false
			m.apply()
		}
		return m, m.clock()
	case clockMsg:
		m.ticking = false
		m.updateStatus()
		return m, m.clock()
	case attachedMsg:
		if m.feed != nil {
			m.feed.close()
		}
		m.resetSession(msg.session)
		m.feed, m.history = msg.feed, msg.history
		go msg.feed.read(m.ctx, m.send)
		return m, nil
	case noticeMsg:
		m.notice(msg.text)
		return m, nil
	case filesMsg:
		m.completeFiles(msg)
		return m, nil
	case listMsg:
		m.scr.list = msg.lines
		m.scr.scroll = 0
		return m, nil
	case sessionsMsg:
		m.scr.picker = &picker{sessions: msg.list}
		return m, nil
	case sentMsg:
		if msg.reply.Target == protocol.TargetSteer {
			m.info("steered the run in flight")
		}
		if msg.notice != "" {
			m.notice(msg.notice)
		}
		return m, nil
	case reconnectMsg:
		if msg.session != m.session {
			return m, nil
		}
		if msg.lost != nil {
			if !m.reconnecting {
				m.reconnecting = true
				m.notice("the connection to the kernel is lost (" + termtext.StripLine(msg.lost.Error()) + "): reconnecting; what you type is kept")
			}
		} else if m.reconnecting || m.disconnected {
			m.reconnecting, m.disconnected = false, false
			m.info("reconnected: the session goes on where it was")
		}
		m.updateStatus()
		return m, nil
	case feedErrMsg:
		m.disconnected, m.reconnecting = true, false
		m.fail("the connection to the kernel is lost (" + termtext.StripLine(msg.err.Error()) + "): restart orrery to reconnect")
		m.updateStatus()
		return m, nil
	case sendFailedMsg:
		// The prompt is never lost: it goes back into the composer, or,
		// when something was typed since, stays in the history, where
		// sending put it.
		kept := "the prompt is back in the composer: Enter sends it again"
		if strings.TrimSpace(m.input.String()) == "" {
			m.input.set(msg.text)
		} else {
			kept = "the prompt is in the history: ↑ brings it back"
		}
		why := termtext.StripLine(msg.err.Error())
		if unreachable(msg.err) {
			m.disconnected = true
			why = "the kernel cannot be reached (" + why + ")"
		}
		m.fail("could not send: " + why + "; " + kept)
		m.updateStatus()
		return m, nil
	case tea.PasteMsg:
		if m.scr.focus != "" && m.pasteInto(msg.Content) {
			return m, nil
		}
		m.input.insert(msg.Content)
		return m, nil
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, nil
}

// View draws the screen.
func (m *Model) View() tea.View {
	m.scr.input = m.input.lines(max(1, m.scr.width-2), m.scr.focus == "" && m.scr.picker == nil && m.scr.consent == nil)
	v := tea.NewView(m.scr.draw())
	if m.opts.Graphics != GraphicsNone && !samePlacements(m.images, m.scr.images) {
		m.imagesDirty = true
	}
	v.AltScreen = true
	v.WindowTitle = "orrery"
	if m.OnDraw != nil {
		m.OnDraw(m.drawnAt)
		m.drawnAt = time.Time{}
	}
	return v
}

// Screen returns what View draws, as plain text: escape sequences
// removed. Tests compare it.
func (m *Model) Screen() string {
	m.scr.input = m.input.lines(max(1, m.scr.width-2), m.scr.focus == "" && m.scr.picker == nil && m.scr.consent == nil)
	return termtext.Strip(m.scr.draw())
}

// resetSession empties what the model holds for a new session.
func (m *Model) resetSession(id string) {
	if m.session != "" && m.session != id {
		// Notices were about the session left: they do not follow into
		// this one (those said while the first one opened stay).
		m.scr.notices = nil
	}
	m.session = id
	m.state = client.NewState()
	m.order = map[string]int{}
	m.binder = binder{}
	m.agentCommands = nil
	m.scr.messages, m.scr.nodes, m.scr.surfaces, m.scr.kept = nil, nil, nil, nil
	m.scr.toolStatus = nil
	m.scr.consent, m.scr.list, m.scr.picker = nil, nil, nil
	m.scr.question = nil
	m.scr.dismissed = map[string]bool{}
	m.scr.edits = nil
	m.scr.focus, m.scr.scroll = "", 0
	m.scr.running, m.runID, m.cancelSent = false, "", false
	m.updateStatus()
}

// apply folds every waiting frame in and redraws once.
func (m *Model) apply() {
	frames, arrived, _ := m.feed.take()
	m.lastApply = time.Now()
	if len(frames) == 0 {
		return
	}
	if m.drawnAt.IsZero() {
		m.drawnAt = arrived
	}
	docChanged := false
	// Runs of STATE_DELTA are applied as one patch: the reducer decodes
	// and encodes the whole document once per patch, so a pane that
	// streams 1,000 chunks a second costs one pass per draw, not one per
	// chunk. Ops apply in the same order; if the joined patch fails, each
	// delta is applied alone, as it would have been.
	var deltas []*protocol.StateDelta
	flush := func() {
		switch len(deltas) {
		case 0:
			return
		case 1:
			m.applyEvent(deltas[0])
		default:
			var ops []protocol.PatchOp
			for _, d := range deltas {
				ops = append(ops, d.Delta...)
			}
			if err := m.state.ApplyEvent(&protocol.StateDelta{Delta: ops}); err != nil {
				for _, d := range deltas {
					m.applyEvent(d)
				}
			}
		}
		deltas = deltas[:0]
	}
	for _, f := range frames {
		m.replaying = f.Seq != 0 && f.Seq <= m.history
		ev := f.Event
		if ev == nil {
			var err error
			if ev, err = protocol.DecodeEvent(f.Data); err != nil {
				continue // unknown to this client: skip it
			}
		}
		if d, ok := ev.(*protocol.StateDelta); ok {
			deltas = append(deltas, d)
			docChanged = true
			continue
		}
		flush()
		if _, ok := ev.(*protocol.StateSnapshot); ok {
			// A turn's snapshot starts the surfaces anew: keep what the
			// calls before it showed.
			m.keepSurfaces()
		}
		m.applyEvent(ev)
		switch e := ev.(type) {
		case *protocol.StateSnapshot:
			docChanged = true
		case *protocol.ToolCallResult:
			var o struct{ Status string }
			if json.Unmarshal(e.Orrery().Outcome, &o) == nil {
				if m.scr.toolStatus == nil {
					m.scr.toolStatus = map[string]string{}
				}
				m.scr.toolStatus[e.ToolCallID] = o.Status
			}
		case *protocol.RunStarted:
			if m.replaying {
				m.dropPastNotices() // only the last run's failure is news
			}
			m.scr.running, m.runID, m.cancelSent = true, e.RunID, false
			m.runStart = time.Now()
			m.usage.Model, m.usage.TotalTokens = "", 0
		case *protocol.RunFinished:
			m.runEnded()
			if e.Outcome != nil && e.Outcome.Type == "cancelled" {
				m.supersede("cancelling the run")
				m.info("the run was cancelled")
			}
		case *protocol.RunError:
			m.runEnded()
			m.fail("the run failed: " + termtext.StripLine(e.Message))
		case *protocol.Custom:
			m.custom(e)
		}
	}
	flush()
	m.replaying = false
	m.scr.messages = m.state.Messages()
	if docChanged {
		m.readDoc()
	}
	m.updateStatus()
}

func (m *Model) applyEvent(ev protocol.Event) {
	if err := m.state.ApplyEvent(ev); err != nil {
		m.log.Warn("apply frame", "type", ev.Header().Type, "err", err)
	}
}

func (m *Model) runEnded() {
	m.scr.running, m.runID, m.cancelSent = false, "", false
	m.scr.consent = nil
	m.scr.question = nil
}

// custom handles Orrery's own events; unknown names are ignored.
func (m *Model) custom(e *protocol.Custom) {
	switch e.Name {
	case usageEvent:
		_ = json.Unmarshal(e.Value, &m.usage)
	case inputRequestedEvent:
		m.askInput(e.Value)
	case inputResolvedEvent:
		m.inputResolved(e.Value)
	case commandsEvent:
		m.agentCommands = parseCommands(e.Value)
	case "orrery.placed":
		var p struct {
			ID    string `json:"id"`
			Owner string `json:"owner"`
		}
		if json.Unmarshal(e.Value, &p) == nil {
			id := "placed:" + p.Owner + ":" + p.ID
			if _, ok := m.order[id]; !ok {
				m.order[id] = len(m.order) + 1
			}
		}
	case "orrery.consent.requested":
		var c consentReq
		if json.Unmarshal(e.Value, &c) == nil && c.Request != "" {
			m.scr.consent, m.scr.consentChoice = &c, denyChoice(&c)
			m.scr.consentScroll, m.scr.consentNudge = 0, false
		}
	case "orrery.consent.resolved":
		var r struct {
			Request, Outcome, Option string
		}
		if json.Unmarshal(e.Value, &r) == nil && m.scr.consent != nil && m.scr.consent.Request == r.Request {
			m.scr.consent = nil
			m.supersede("answered ") // the log's word replaces this screen's
			m.info("consent " + termtext.StripLine(r.Outcome))
		}
	case "orrery.notice":
		var n struct {
			Ext   string `json:"ext"`
			Level string `json:"level"`
			Text  string `json:"text"`
			State string `json:"state"`
		}
		if json.Unmarshal(e.Value, &n) == nil {
			who := "orrery"
			if n.Ext != "" {
				who = "ext:" + n.Ext
				if n.State == "stopped" {
					m.stopped[n.Ext] = true
				} else if n.State != "" {
					delete(m.stopped, n.Ext)
				}
			}
			switch text := termtext.StripLine(who) + ": " + termtext.StripLine(n.Text); n.Level {
			case "error":
				m.fail(text)
			case "warn", "warning":
				m.notice(text)
			default:
				m.info(text)
			}
		}
	}
}

// keepSurfaces keeps the surfaces the shared state holds now, by id, for
// the calls that showed them (screen.kept).
func (m *Model) keepSurfaces() {
	raw := m.state.Shared()
	if raw == nil {
		return
	}
	var d struct {
		Surfaces map[string]json.RawMessage `json:"surfaces"`
	}
	if json.Unmarshal(raw, &d) != nil {
		return
	}
	if m.scr.kept == nil {
		m.scr.kept = map[string]json.RawMessage{}
	}
	for id, sf := range d.Surfaces {
		m.scr.kept[id] = sf
	}
}

// readDoc rereads the placed nodes and this turn's surfaces.
func (m *Model) readDoc() {
	var d doc
	if raw := m.state.Shared(); raw != nil {
		if err := json.Unmarshal(raw, &d); err != nil {
			m.log.Warn("read the shared state", "err", err)
			return
		}
	}
	m.scr.nodes = parseNodes(&d, &m.binder, m.order, m.stopped)
	m.scr.surfaces = d.Surfaces
	if m.scr.focus != "" && m.scr.nodeByID(m.scr.focus) == nil {
		m.scr.focus = ""
	}
}

// A notice's level. An info line goes by itself after infoFor; a
// warning (yellow !) and an error (red ✗) stay until the person sends a
// prompt or opens another session. The last few of each stay drawn.
const (
	levelInfo = iota
	levelWarn
	levelError
)

// infoFor is how long an info notice stays.
const infoFor = 6 * time.Second

// notice is a line for the person under the thread.
type notice struct {
	text  string
	level int
	until time.Time // an info line's end
	past  bool      // raised by a frame of the replayed log
}

// supersede removes the notices that start with prefix: what this screen
// said it was doing, once the log says it is done.
func (m *Model) supersede(prefix string) {
	m.scr.notices = slices.DeleteFunc(m.scr.notices, func(n notice) bool { return strings.HasPrefix(n.text, prefix) })
}

// dropPastNotices removes the notices the replayed log raised.
func (m *Model) dropPastNotices() {
	m.scr.notices = slices.DeleteFunc(m.scr.notices, func(n notice) bool { return n.past })
}

// notice adds a warning: a mistake the person can fix, or a hint.
func (m *Model) notice(s string) { m.addNotice(s, levelWarn) }

// info adds a line that goes by itself: what was done.
func (m *Model) info(s string) { m.addNotice(s, levelInfo) }

// fail adds an error: what went wrong and could not be done.
func (m *Model) fail(s string) { m.addNotice(s, levelError) }

func (m *Model) addNotice(s string, level int) {
	if m.replaying && level != levelError {
		// The past's info and warnings were for then; its errors stay
		// until a later run of the past (dropPastNotices) or a dismissal.
		return
	}
	n := notice{text: s, level: level, past: m.replaying}
	if level == levelInfo {
		n.until = time.Now().Add(infoFor)
		m.expiring = true
	}
	m.scr.notices = append(m.scr.notices, n)
	if len(m.scr.notices) > 4 {
		m.scr.notices = m.scr.notices[len(m.scr.notices)-4:]
	}
	m.scr.scroll = 0
}

// noticeExpiryMsg comes when an info notice's time is up.
type noticeExpiryMsg struct{}

// expireNotices drops the info lines whose time is up, and says whether
// any is left to expire.
func (m *Model) expireNotices(now time.Time) bool {
	left := false
	m.scr.notices = slices.DeleteFunc(m.scr.notices, func(n notice) bool {
		if n.level != levelInfo {
			return false
		}
		if now.Before(n.until) {
			left = true
			return false
		}
		return true
	})
	return left
}

func (m *Model) updateStatus() {
	state := "idle"
	if m.scr.running {
		state = "running"
	}
	if m.scr.consent != nil || m.scr.question != nil {
		state = "waiting for your answer"
	}
	if m.scr.running && state == "running" {
		since := time.Since(m.runStart)
		state = spinnerFrame(since) + " running " + since.Truncate(time.Second).String()
		if m.usage.TotalTokens > 0 {
			state += fmt.Sprintf(" · %d tokens", m.usage.TotalTokens)
		}
		if m.usage.Model != "" {
			// A model named by a path (a script) by its file's name.
			state += " · " + termtext.StripLine(path.Base(m.usage.Model))
		}
	}
	sess := m.session
	if sess == "" {
		sess = "no session"
	}
	where := "attached"
	if m.opts.Host {
		where = "host"
	}
	if m.reconnecting {
		where = "reconnecting"
	}
	if m.disconnected {
		where = "disconnected"
	}
	m.scr.status = fmt.Sprintf("orrery · %s · %s · %s · /ui /sessions /new /cost · F6 panes", sess, where, state)
}

// attachCmd attaches to session from its first frame, so the whole log
// redraws the screen.
func (m *Model) attachCmd(session string) tea.Cmd {
	cl := m.opts.Client
	ctx := m.ctx
	return func() tea.Msg {
		since := uint64(0)
		sctx, cancel := context.WithCancel(ctx)
		// The head before attaching tells the past from what happens now,
		// so that replaying the log raises no stale notices. Without it
		// (an old kernel) every frame counts as new.
		var history uint64
		if r, err := cl.Read(sctx, session, 0, 1); err == nil {
			history = r.Head
		}
		st, err := cl.Attach(sctx, session, &since)
		if err != nil {
			cancel()
			return noticeMsg{"could not open session " + session + ": " + termtext.StripLine(err.Error())}
		}
		return attachedMsg{session: session, feed: &feed{gen: nextGen(), stream: st, cancel: cancel}, history: history}
	}
}

func (m *Model) newSessionCmd(model string) tea.Cmd {
	cl := m.opts.Client
	ctx := m.ctx
	cwd := m.opts.Workspace
	if !m.opts.Host && !m.opts.Local {
		// This machine's directory means nothing to a kernel elsewhere:
		// the session works in the kernel's own.
		cwd = ""
	}
	local := !m.opts.Host && m.opts.Local && cwd != ""
	return func() tea.Msg {
		id, err := cl.NewSession(ctx, protocol.SessionNew{Cwd: cwd, Model: model})
		var refused *client.RequestError
		if err != nil && local && errors.As(err, &refused) {
			// The kernel does not take this directory: work in its own.
			if id, err2 := cl.NewSession(ctx, protocol.SessionNew{Model: model}); err2 == nil {
				why := noticeMsg{"this session works in the kernel's own directory, not " + termtext.StripLine(cwd) + ": " + termtext.StripLine(refused.Message)}
				return tea.BatchMsg{func() tea.Msg { return why }, m.attachCmd(id)}
			}
		}
		if err != nil {
			return noticeMsg{"could not start a session: " + termtext.StripLine(err.Error())}
		}
		return m.attachCmd(id)()
	}
}

func (m *Model) sessionsCmd() tea.Cmd {
	cl := m.opts.Client
	ctx := m.ctx
	return func() tea.Msg {
		list, err := cl.Sessions(ctx)
		if err != nil {
			return noticeMsg{"could not list the sessions: " + termtext.StripLine(err.Error())}
		}
		return sessionsMsg{list: list}
	}
}

// do sends one request in the background; a refusal becomes a notice.
func (m *Model) do(what string, req protocol.Request, ok string) tea.Cmd {
	cl := m.opts.Client
	ctx := m.ctx
	return func() tea.Msg {
		if _, err := cl.Do(ctx, req); err != nil {
			return noticeMsg{what + ": " + termtext.StripLine(err.Error())}
		}
		if ok == "" {
			return nil
		}
		return noticeMsg{ok}
	}
}

// samePlacements reports whether two draws place the same pictures.
func samePlacements(a, b []imagePlacement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].node != b[i].node || a[i].row != b[i].row || a[i].col != b[i].col ||
			a[i].cols != b[i].cols || a[i].rows != b[i].rows || len(a[i].data) != len(b[i].data) {
			return false
		}
	}
	return true
}

// usageEvent is the kernel's event of a model call's usage, which run.send
// asks for (usageEvents).
const usageEvent = "orrery.usage"

// clockMsg ticks the status line's clock while a run is in flight.
type clockMsg struct{}

// spinnerInterval is how often the status line's spinner turns (and its
// clock is read) while a run is in flight.
const spinnerInterval = 100 * time.Millisecond

// spinner is the status line's spinner, one frame per spinnerInterval.
var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// spinnerFrame is the spinner's frame a run in flight for d shows.
func spinnerFrame(d time.Duration) string {
	return spinner[int(d/spinnerInterval)%len(spinner)]
}

// clock returns the next tick of the status line's spinner and clock while
// a run is in flight and none is due, else nil.
func (m *Model) clock() tea.Cmd {
	if !m.scr.running || m.ticking {
		return nil
	}
	m.ticking = true
	return tea.Tick(spinnerInterval, func(time.Time) tea.Msg { return clockMsg{} })
}

// unreachable reports whether err says the kernel could not be reached
// at all, rather than that it refused the request.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.Is(err, client.ErrConnectionLost) || errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &op)
}
