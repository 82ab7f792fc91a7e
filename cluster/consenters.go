package cluster

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	jsstore "github.com/getorrery/orrery/store/jetstream"
	"github.com/nats-io/nats.go"
)

// consenters carries counts of the clients that draw consent between
// nodes: a node that follows a session tells its owner how many of its
// clients could answer a question, again every third of a lease while
// there are any, and the owner counts a report for a lease. So the owner
// puts a question when a client on any node can answer it, and denies it
// at once when none can, as on one node.
type consenters struct {
	mu   sync.Mutex
	sent map[string]int                     // this node's counts, by session
	got  map[string]map[string]consentersAt // others' counts, by session and node
	sub  *nats.Subscription
	stop chan struct{}
	done chan struct{}
}

type consentersAt struct {
	n  int
	at time.Time
}

type consentersReport struct {
	Session string `json:"session"`
	Node    string `json:"node"`
	N       int    `json:"n"`
}

func (m *Member) consentersSubject(node string) string {
	return m.Log.Prefix() + ".node." + jsstore.Token(node) + ".consenters"
}

// Start starts taking other nodes' consenter counts and renewing this
// node's; Stop stops.
func (m *Member) Start() error {
	c := &consenters{sent: map[string]int{}, got: map[string]map[string]consentersAt{},
		stop: make(chan struct{}), done: make(chan struct{})}
	sub, err := m.NC.Subscribe(m.consentersSubject(m.Leases.Node().ID), func(msg *nats.Msg) {
		var r consentersReport
		if json.Unmarshal(msg.Data, &r) != nil || r.Session == "" {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		byNode := c.got[r.Session]
		if r.N <= 0 {
			delete(byNode, r.Node)
			if len(byNode) == 0 {
				delete(c.got, r.Session)
			}
			return
		}
		if byNode == nil {
			byNode = map[string]consentersAt{}
			c.got[r.Session] = byNode
		}
		byNode[r.Node] = consentersAt{n: r.N, at: time.Now()}
	})
	if err != nil {
		return err
	}
	c.sub = sub
	m.consenters = c
	go m.renewConsenters()
	return nil
}

// Stop stops what Start started.
func (m *Member) Stop() {
	if c := m.consenters; c != nil {
		close(c.stop)
		<-c.done
		c.sub.Unsubscribe()
	}
}

func (m *Member) renewConsenters() {
	c := m.consenters
	defer close(c.done)
	tick := time.NewTicker(m.Leases.TTL() / 3)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		c.mu.Lock()
		sent := make(map[string]int, len(c.sent))
		for s, n := range c.sent {
			sent[s] = n
		}
		c.mu.Unlock()
		for s, n := range sent {
			m.sendConsenters(s, n)
		}
	}
}

// sendConsenters tells the session's owner this node's count.
func (m *Member) sendConsenters(session string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), m.Leases.TTL()/3)
	defer cancel()
	owner, err := m.owner(ctx, session)
	if err != nil || owner == nil {
		return
	}
	data, _ := json.Marshal(consentersReport{Session: session, Node: m.Leases.Node().ID, N: n})
	err = m.NC.Publish(m.consentersSubject(owner.ID), data)
	if err == nil {
		// Sent before the client that drew consent hears back, so that
		// whatever it asks for next finds the owner counting it.
		err = m.NC.FlushWithContext(ctx)
	}
	if err != nil {
		m.logger().Warn("tell a session's owner of the clients here that draw consent", "session", session, "err", err)
	}
}

// ReportConsenters records how many clients that draw consent follow the
// session here, and tells its owner, waiting at most a third of a lease.
func (m *Member) ReportConsenters(session string, n int) {
	c := m.consenters
	if c == nil {
		return
	}
	c.mu.Lock()
	if n > 0 {
		c.sent[session] = n
	} else {
		delete(c.sent, session)
	}
	c.mu.Unlock()
	m.sendConsenters(session, n)
}

// Consenters is how many clients that draw consent other nodes report for
// the session, within a lease.
func (m *Member) Consenters(session string) int {
	c := m.consenters
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for node, r := range c.got[session] {
		if time.Since(r.at) > m.Leases.TTL() {
			delete(c.got[session], node)
			continue
		}
		total += r.n
	}
	return total
}
