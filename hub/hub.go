package hub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"
)

// DefaultTimeout is how long a send waits for its reply when it names no
// timeout. Silence past it is a refusal.
const DefaultTimeout = 30 * time.Second

// Message is what the hub delivers.
type Message struct {
	// From is the sender's address; empty on the answer to a send, which
	// pairs by CorrelationID instead.
	From string `json:"from,omitempty"`
	// To is the address it was sent to, or empty for a topic relay.
	To string `json:"to,omitempty"`
	// Topic is set on a topic relay.
	Topic string `json:"topic,omitempty"`
	// Payload is carried as is.
	Payload json.RawMessage `json:"payload,omitempty"`
	// CorrelationID pairs a send with its reply.
	CorrelationID string `json:"correlationId,omitempty"`
	// ExpectsReply marks a send: the sender waits for a reply under its
	// own timeout.
	ExpectsReply bool `json:"expectsReply,omitempty"`
}

// Errors a caller branches on.
var (
	// ErrUnknownCorrelation is a reply to no send in flight.
	ErrUnknownCorrelation = errors.New("no send is waiting for that correlationId: it was answered, timed out, or never sent")
	// ErrTimeout is a send whose reply did not come in time.
	ErrTimeout = errors.New("no reply came in time, which counts as a refusal")
	// ErrUnknownAddress is a post or send to nobody the hub knows.
	ErrUnknownAddress = errors.New("nobody is at that address")
	// ErrAgentEnded is traffic to, or a reply awaited from, an agent whose
	// task has ended and whose mailbox the hub released (Leave). It is
	// distinct from ErrUnknownAddress for as long as the hub remembers the
	// address (Options.RememberEnded); after that the address is unknown.
	ErrAgentEnded = errors.New("the agent at that address has ended its task")
	// ErrMailboxFull is a post to a mailbox that already holds
	// Options.MailboxLimit messages: its agent is not reading it.
	ErrMailboxFull = errors.New("the agent is not reading its mailbox")
)

// RefusedError is traffic the links ACL refused. Missing describes the
// link the crew would have to declare.
type RefusedError struct {
	Crew     string
	From, To string
	Topic    string
	Missing  string
}

func (e *RefusedError) Error() string {
	what := "traffic from " + e.From + " to " + e.To
	if e.Topic != "" {
		what += " on topic " + e.Topic
	}
	return fmt.Sprintf("the links of crew %s refuse %s: it declares links and none covers this; add %s to its links", e.Crew, what, e.Missing)
}

// Link is one entry of a crew's links: the peer it may talk to, in which
// direction, and on which topics (none means any).
type Link struct {
	To            string   `toml:"to" json:"to"`
	Direction     string   `toml:"direction" json:"direction"`
	AllowedTopics []string `toml:"allowed_topics" json:"allowed_topics,omitempty"`
}

// The directions of a link, seen from the crew that declares it.
const (
	Bidirectional = "bidirectional"
	Outbound      = "outbound"
	Inbound       = "inbound"
)

// Validate checks a link's address and direction.
func (l Link) Validate() error {
	if _, err := ParseAddress(l.To); err != nil {
		return fmt.Errorf("link to: %w", err)
	}
	switch l.Direction {
	case "", Bidirectional, Outbound, Inbound:
		return nil
	}
	return fmt.Errorf("link to %s has direction %q: use bidirectional, outbound or inbound", l.To, l.Direction)
}

func (l Link) allows(dir, topic string) bool {
	d := l.Direction
	if d == "" {
		d = Bidirectional
	}
	if d != Bidirectional && d != dir {
		return false
	}
	return topic == "" || len(l.AllowedTopics) == 0 || slices.Contains(l.AllowedTopics, topic)
}

// matches reports whether the link's peer is a, or a's crew.
func (l Link) matches(a Address) bool {
	p, err := ParseAddress(l.To)
	if err != nil {
		return false
	}
	if p == a {
		return true
	}
	return p.Scheme == SchemeCrew && a.Scheme == SchemeAgent && p.Crew == a.Crew
}

// Hub routes messages between addresses. The zero Hub is not usable: make
// one with New or NewWithOptions. It is safe for concurrent use.
type Hub struct {
	log          *slog.Logger
	mailboxLimit int // 0: no limit

	mu       sync.Mutex // guards everything below
	crews    map[string]*crewInfo
	seats    map[string]func(Message)   // addresses that take delivery themselves
	boxes    map[string][]Message       // agents' mailboxes
	topics   map[string]map[string]bool // topic → subscriber addresses; no empty sets
	retained map[string]map[string]retainedMsg
	waiting  map[string]*pending // correlationId → the send waiting for it
	pinned   map[string]bool     // boxes that stay: crew agents and AddAgent's
	holders  map[string]int      // boxes of agents started by Join → how many run there
	ended    endedSet            // addresses released by Leave, the latest first to stay
}

// pending is a send waiting for its reply.
type pending struct {
	to     string         // the address it was sent to
	answer chan answerMsg // buffered: the one answer never blocks
}

// answerMsg is a reply, or why none will come.
type answerMsg struct {
	m   Message
	err error
}

type crewInfo struct {
	agents []string
	links  []Link
}

type retainedMsg struct {
	from    string
	payload json.RawMessage
}

// Defaults of Options.
const (
	// DefaultMailboxLimit is how many messages a mailbox holds before it
	// refuses more.
	DefaultMailboxLimit = 1000
	// DefaultRememberEnded is how many ended addresses the hub remembers,
	// to refuse traffic to them as ended rather than unknown.
	DefaultRememberEnded = 1024
)

// Options tune a hub. The zero Options are the defaults.
type Options struct {
	// MailboxLimit is how many messages one mailbox holds; a post past it
	// is refused with ErrMailboxFull. 0 means DefaultMailboxLimit; a
	// negative value means no limit.
	MailboxLimit int
	// RememberEnded is how many of the latest ended addresses (Leave) the
	// hub remembers; traffic to one of them is refused with ErrAgentEnded,
	// to an older one with ErrUnknownAddress. 0 means
	// DefaultRememberEnded; a negative value means none.
	RememberEnded int
	// Logger gets the messages a mailbox still held when its agent ended;
	// nil means slog.Default().
	Logger *slog.Logger
}

// New returns an empty hub with the default Options.
func New() *Hub { return NewWithOptions(Options{}) }

// NewWithOptions returns an empty hub tuned by o.
func NewWithOptions(o Options) *Hub {
	if o.MailboxLimit == 0 {
		o.MailboxLimit = DefaultMailboxLimit
	}
	if o.MailboxLimit < 0 {
		o.MailboxLimit = 0
	}
	if o.RememberEnded == 0 {
		o.RememberEnded = DefaultRememberEnded
	}
	if o.RememberEnded < 0 {
		o.RememberEnded = 0
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Hub{
		log:          o.Logger,
		mailboxLimit: o.MailboxLimit,
		crews:        make(map[string]*crewInfo),
		seats:        make(map[string]func(Message)),
		boxes:        make(map[string][]Message),
		topics:       make(map[string]map[string]bool),
		retained:     make(map[string]map[string]retainedMsg),
		waiting:      make(map[string]*pending),
		pinned:       make(map[string]bool),
		holders:      make(map[string]int),
		ended:        newEndedSet(o.RememberEnded),
	}
}

// AddCrew registers a crew, its agents (each gets a mailbox that stays
// until RemoveCrew) and its links. A name already registered is refused:
// two crews of one name would share their agents' mailboxes.
func (h *Hub) AddCrew(name string, agents []string, links []Link) error {
	for _, l := range links {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("crew %s: %w", name, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.crews[name]; ok {
		return fmt.Errorf("crew %s is already running on this kernel's hub: wait for its run to end, or give the crew another name", name)
	}
	h.crews[name] = &crewInfo{agents: slices.Clone(agents), links: slices.Clone(links)}
	for _, a := range agents {
		addr := Agent(name, a)
		if _, ok := h.boxes[addr]; !ok {
			h.boxes[addr] = nil
		}
		h.pinned[addr] = true
		h.ended.remove(addr)
	}
	return nil
}

// AddAgent makes sure addr has a mailbox. A new one stays for the hub's
// life, like a session's own agent's; a mailbox that is already there,
// such as a running sub-agent's (Join), is left as it is, to be released
// when its agent leaves.
func (h *Hub) AddAgent(addr string) error {
	addr, err := canonical(addr)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.boxes[addr]; !ok {
		h.boxes[addr] = nil
		h.pinned[addr] = true
		h.ended.remove(addr)
	}
	return nil
}

// Attach seats addr (a client or an extension): what the hub delivers to
// it is passed to deliver, outside the hub's lock. detach ends the seat
// and its subscriptions.
func (h *Hub) Attach(addr string, deliver func(Message)) (detach func(), err error) {
	a, err := ParseAddress(addr)
	if err != nil {
		return nil, err
	}
	if a.Scheme != SchemeClient && a.Scheme != SchemeExt {
		return nil, fmt.Errorf("only client:// and ext:// addresses take a seat, not %s", addr)
	}
	addr = a.String()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.seats[addr]; ok {
		return nil, fmt.Errorf("%s already has a seat: pick another name (--client NAME)", addr)
	}
	h.seats[addr] = deliver
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.seats, addr)
		h.unsubscribeAllLocked(addr)
	}, nil
}

// Check applies the links ACL to traffic from one address to another, on
// topic when it is a topic relay. It returns nil or a *RefusedError.
func (h *Hub) Check(from, to, topic string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.checkLocked(from, to, topic)
}

func (h *Hub) checkLocked(from, to, topic string) error {
	fa, err := ParseAddress(from)
	if err != nil {
		return err
	}
	ta, err := ParseAddress(to)
	if err != nil {
		return err
	}
	if fa.Crew != "" && fa.Crew == ta.Crew {
		return nil // inside one crew
	}
	if c := h.crews[fa.Crew]; fa.Crew != "" && c != nil && len(c.links) > 0 && !covered(c.links, ta, Outbound, topic) {
		return refusal(fa.Crew, from, to, topic, ta, Outbound)
	}
	if c := h.crews[ta.Crew]; ta.Crew != "" && c != nil && len(c.links) > 0 && !covered(c.links, fa, Inbound, topic) {
		return refusal(ta.Crew, from, to, topic, fa, Inbound)
	}
	return nil
}

func covered(links []Link, peer Address, dir, topic string) bool {
	for _, l := range links {
		if l.matches(peer) && l.allows(dir, topic) {
			return true
		}
	}
	return false
}

func refusal(crew, from, to, topic string, peer Address, dir string) *RefusedError {
	missing := fmt.Sprintf("{to = %q, direction = %q", peer.String(), dir)
	if topic != "" {
		missing += fmt.Sprintf(", allowed_topics = [%q]", topic)
	}
	missing += "}"
	return &RefusedError{Crew: crew, From: from, To: to, Topic: topic, Missing: missing}
}

// deliverLocked puts m in to's mailbox or returns its seat's callback. A
// crew's fan-out is all or nothing: one full mailbox refuses it.
func (h *Hub) deliverLocked(to string, m Message) (func(), error) {
	if seat, ok := h.seats[to]; ok {
		return func() { seat(m) }, nil
	}
	a, _ := ParseAddress(to)
	if a.Scheme == SchemeCrew {
		c := h.crews[a.Crew]
		if c == nil {
			return nil, fmt.Errorf("post to %s: %w (no crew %s runs here)", to, ErrUnknownAddress, a.Crew)
		}
		for _, name := range c.agents {
			if err := h.roomLocked(Agent(a.Crew, name)); err != nil {
				return nil, fmt.Errorf("post to %s: %w", to, err)
			}
		}
		for _, name := range c.agents {
			addr := Agent(a.Crew, name)
			h.boxes[addr] = append(h.boxes[addr], m)
		}
		return func() {}, nil
	}
	if _, ok := h.boxes[to]; !ok {
		if h.ended.has(to) {
			return nil, fmt.Errorf("deliver to %s: %w: its mailbox was released when it finished; delegate a new task to reach that role again", to, ErrAgentEnded)
		}
		return nil, fmt.Errorf("deliver to %s: %w", to, ErrUnknownAddress)
	}
	if err := h.roomLocked(to); err != nil {
		return nil, fmt.Errorf("deliver to %s: %w", to, err)
	}
	h.boxes[to] = append(h.boxes[to], m)
	return func() {}, nil
}

// roomLocked returns an error wrapping ErrMailboxFull when addr's mailbox
// holds as many messages as a mailbox may.
func (h *Hub) roomLocked(addr string) error {
	if n := len(h.boxes[addr]); h.mailboxLimit > 0 && n >= h.mailboxLimit {
		return fmt.Errorf("%w: %s has %d messages waiting, the most a mailbox holds; wait until it reads them (hub.inbox) or reach it another way", ErrMailboxFull, addr, n)
	}
	return nil
}

func canonical(addr string) (string, error) {
	a, err := ParseAddress(addr)
	if err != nil {
		return "", err
	}
	return a.String(), nil
}

// Post writes payload to one mailbox, or to a seat.
func (h *Hub) Post(from, to string, payload json.RawMessage) error {
	var err error
	if from, err = canonical(from); err != nil {
		return err
	}
	if to, err = canonical(to); err != nil {
		return err
	}
	h.mu.Lock()
	if err := h.checkLocked(from, to, ""); err != nil {
		h.mu.Unlock()
		return err
	}
	deliver, err := h.deliverLocked(to, Message{From: from, To: to, Payload: payload})
	h.mu.Unlock()
	if err != nil {
		return err
	}
	deliver()
	return nil
}

// NewCorrelationID returns a fresh correlation id.
func NewCorrelationID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "c-" + hex.EncodeToString(b[:])
}

// Send delivers payload to one address with expectsReply set and waits for
// the reply, up to timeout (0 means DefaultTimeout) or ctx's end. Silence
// is a refusal: it returns an error wrapping ErrTimeout. When the agent at
// to ends (Leave) before a reply, it returns an error wrapping
// ErrAgentEnded at once. correlationID may be empty, and then the hub
// picks one.
func (h *Hub) Send(ctx context.Context, from, to string, payload json.RawMessage, timeout time.Duration, correlationID string) (Message, error) {
	var err error
	if from, err = canonical(from); err != nil {
		return Message{}, err
	}
	if to, err = canonical(to); err != nil {
		return Message{}, err
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if correlationID == "" {
		correlationID = NewCorrelationID()
	}
	answer := make(chan answerMsg, 1)
	h.mu.Lock()
	if err := h.checkLocked(from, to, ""); err != nil {
		h.mu.Unlock()
		return Message{}, err
	}
	if _, dup := h.waiting[correlationID]; dup {
		h.mu.Unlock()
		return Message{}, fmt.Errorf("a send with correlationId %s is already waiting: use a fresh one", correlationID)
	}
	deliver, err := h.deliverLocked(to, Message{From: from, To: to, Payload: payload, CorrelationID: correlationID, ExpectsReply: true})
	if err != nil {
		h.mu.Unlock()
		return Message{}, err
	}
	h.waiting[correlationID] = &pending{to: to, answer: answer}
	h.mu.Unlock()
	deliver()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	forget := func() {
		h.mu.Lock()
		delete(h.waiting, correlationID)
		h.mu.Unlock()
	}
	select {
	case a := <-answer:
		if a.err != nil {
			return Message{CorrelationID: correlationID}, fmt.Errorf("send to %s (correlationId %s): %w before it replied; no reply will come, so do without it or ask an agent that runs", to, correlationID, a.err)
		}
		return a.m, nil
	case <-timer.C:
		forget()
		return Message{CorrelationID: correlationID}, fmt.Errorf("send to %s (correlationId %s): %w after %s", to, correlationID, ErrTimeout, timeout)
	case <-ctx.Done():
		forget()
		return Message{CorrelationID: correlationID}, ctx.Err()
	}
}

// Reply answers the send waiting under correlationID. A reply to no send
// in flight returns an error wrapping ErrUnknownCorrelation.
func (h *Hub) Reply(correlationID string, payload json.RawMessage) error {
	h.mu.Lock()
	p, ok := h.waiting[correlationID]
	delete(h.waiting, correlationID)
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("reply %s: %w", correlationID, ErrUnknownCorrelation)
	}
	p.answer <- answerMsg{m: Message{Payload: payload, CorrelationID: correlationID}}
	return nil
}

// PublishReport says where a publish went.
type PublishReport struct {
	// Delivered counts the subscribers that got it.
	Delivered int
	// Refused are the subscribers the links ACL kept it from.
	Refused []error
}

// Publish relays payload to every subscriber of topic that the links ACL
// lets it reach. With retainAs it is also kept, under that name, for those
// who subscribe later.
func (h *Hub) Publish(from, topic string, payload json.RawMessage, retainAs string) (PublishReport, error) {
	var rep PublishReport
	var err error
	if from, err = canonical(from); err != nil {
		return rep, err
	}
	if topic == "" {
		return rep, errors.New("publish needs a topic")
	}
	h.mu.Lock()
	if retainAs != "" {
		if h.retained[topic] == nil {
			h.retained[topic] = make(map[string]retainedMsg)
		}
		h.retained[topic][retainAs] = retainedMsg{from: from, payload: payload}
	}
	subs := make([]string, 0, len(h.topics[topic]))
	for s := range h.topics[topic] {
		subs = append(subs, s)
	}
	sort.Strings(subs)
	var deliveries []func()
	for _, s := range subs {
		if s == from {
			continue
		}
		if err := h.checkLocked(from, s, topic); err != nil {
			rep.Refused = append(rep.Refused, err)
			continue
		}
		d, err := h.deliverLocked(s, Message{From: from, Topic: topic, Payload: payload})
		if err != nil {
			rep.Refused = append(rep.Refused, err)
			continue
		}
		deliveries = append(deliveries, d)
	}
	h.mu.Unlock()
	for _, d := range deliveries {
		d()
	}
	rep.Delivered = len(deliveries)
	return rep, nil
}

// Subscribe opens a relay of topic to addr: later publishes reach it, and
// so do the values retained on the topic, now, when the ACL allows.
func (h *Hub) Subscribe(addr, topic string) error {
	var err error
	if addr, err = canonical(addr); err != nil {
		return err
	}
	if topic == "" {
		return errors.New("subscribe needs a topic")
	}
	h.mu.Lock()
	_, seated := h.seats[addr]
	_, boxed := h.boxes[addr]
	if !seated && !boxed {
		h.mu.Unlock()
		if h.ended.has(addr) {
			return fmt.Errorf("subscribe %s: %w", addr, ErrAgentEnded)
		}
		return fmt.Errorf("subscribe %s: %w", addr, ErrUnknownAddress)
	}
	if h.topics[topic] == nil {
		h.topics[topic] = make(map[string]bool)
	}
	h.topics[topic][addr] = true
	names := make([]string, 0, len(h.retained[topic]))
	for name := range h.retained[topic] {
		names = append(names, name)
	}
	sort.Strings(names)
	var deliveries []func()
	for _, name := range names {
		r := h.retained[topic][name]
		if h.checkLocked(r.from, addr, topic) != nil {
			continue
		}
		if d, err := h.deliverLocked(addr, Message{From: r.from, Topic: topic, Payload: r.payload}); err == nil {
			deliveries = append(deliveries, d)
		}
	}
	h.mu.Unlock()
	for _, d := range deliveries {
		d()
	}
	return nil
}

// Unsubscribe closes addr's relay of topic. Closing one that is not open
// does nothing.
func (h *Hub) Unsubscribe(addr, topic string) error {
	var err error
	if addr, err = canonical(addr); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if subs := h.topics[topic]; subs != nil {
		delete(subs, addr)
		if len(subs) == 0 {
			delete(h.topics, topic)
		}
	}
	return nil
}

// unsubscribeAllLocked closes every relay of a topic to addr.
func (h *Hub) unsubscribeAllLocked(addr string) {
	for topic, subs := range h.topics {
		delete(subs, addr)
		if len(subs) == 0 {
			delete(h.topics, topic)
		}
	}
}

// Take empties addr's mailbox and returns what it held, oldest first.
func (h *Hub) Take(addr string) ([]Message, error) {
	var err error
	if addr, err = canonical(addr); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	msgs, ok := h.boxes[addr]
	if !ok {
		if h.ended.has(addr) {
			return nil, fmt.Errorf("read the mailbox of %s: %w", addr, ErrAgentEnded)
		}
		return nil, fmt.Errorf("read the mailbox of %s: %w", addr, ErrUnknownAddress)
	}
	h.boxes[addr] = nil
	return msgs, nil
}
