package hub

import (
	"fmt"
	"sort"
)

// Join gives an agent that starts during the run, such as a sub-agent of
// the task tool, a mailbox at addr (an agent:// address) until it leaves.
// Agents that run at one address at once share its mailbox: each Join
// counts one, and the mailbox is released at the last Leave. An address
// that has a mailbox for the hub's life (a crew's agent, AddAgent) keeps
// it whoever joins and leaves.
func (h *Hub) Join(addr string) error {
	a, err := ParseAddress(addr)
	if err != nil {
		return err
	}
	if a.Scheme != SchemeAgent {
		return fmt.Errorf("join %s: only an agent:// address gets a mailbox when its agent starts", addr)
	}
	addr = a.String()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.boxes[addr]; !ok {
		h.boxes[addr] = nil
	}
	h.holders[addr]++
	h.ended.remove(addr)
	return nil
}

// Leave says that an agent that joined at addr has ended, however it
// ended. When no other agent that joined runs there, and the address has
// no mailbox for the hub's life, the hub releases it:
//   - its mailbox and its topic subscriptions go; what the mailbox still
//     held is logged at Info as undelivered (count and senders), not
//     delivered anywhere;
//   - every send waiting for a reply from it fails at once with an error
//     wrapping ErrAgentEnded;
//   - later traffic to it is refused with ErrAgentEnded while the hub
//     remembers it (Options.RememberEnded), and with ErrUnknownAddress
//     after.
//
// Retained topic values it published stay. Leave on an address that did
// not join does nothing.
func (h *Hub) Leave(addr string) {
	addr, err := canonical(addr)
	if err != nil {
		return
	}
	h.mu.Lock()
	n, ok := h.holders[addr]
	if !ok {
		h.mu.Unlock()
		return
	}
	if n > 1 {
		h.holders[addr] = n - 1
		h.mu.Unlock()
		return
	}
	delete(h.holders, addr)
	if h.pinned[addr] {
		h.mu.Unlock()
		return
	}
	r := h.releaseLocked(addr)
	h.mu.Unlock()
	h.finish(r)
}

// RemoveCrew ends a crew that AddCrew registered, when its run is over:
// its name may be registered again, and each of its agents' mailboxes is
// released as Leave releases one (at once, or at the last Leave of an
// agent that still runs there). Removing a crew that is not there does
// nothing.
func (h *Hub) RemoveCrew(name string) {
	h.mu.Lock()
	c := h.crews[name]
	if c == nil {
		h.mu.Unlock()
		return
	}
	delete(h.crews, name)
	var rs []released
	for _, a := range c.agents {
		addr := Agent(name, a)
		delete(h.pinned, addr)
		if h.holders[addr] == 0 {
			rs = append(rs, h.releaseLocked(addr))
		}
	}
	h.mu.Unlock()
	for _, r := range rs {
		h.finish(r)
	}
}

// released is what releasing a mailbox leaves to do outside the lock.
type released struct {
	addr     string
	left     []Message
	stranded []*pending
}

// releaseLocked drops addr's mailbox, its subscriptions and the sends
// waiting on it, and remembers it as ended.
func (h *Hub) releaseLocked(addr string) released {
	r := released{addr: addr, left: h.boxes[addr]}
	delete(h.boxes, addr)
	h.unsubscribeAllLocked(addr)
	for id, p := range h.waiting {
		if p.to == addr {
			r.stranded = append(r.stranded, p)
			delete(h.waiting, id)
		}
	}
	h.ended.add(addr)
	return r
}

// finish fails the sends that waited on a released mailbox and logs what
// it still held.
func (h *Hub) finish(r released) {
	for _, p := range r.stranded {
		p.answer <- answerMsg{err: ErrAgentEnded}
	}
	if len(r.left) > 0 {
		seen := make(map[string]bool)
		var senders []string
		for _, m := range r.left {
			if !seen[m.From] {
				seen[m.From] = true
				senders = append(senders, m.From)
			}
		}
		sort.Strings(senders)
		h.log.Info("hub: an agent ended with messages it never read; they are undelivered",
			"address", r.addr, "count", len(r.left), "senders", senders)
	}
}

// endedSet remembers the latest addresses released by Leave, up to a
// fixed number: adding one past it forgets the oldest.
type endedSet struct {
	at   map[string]uint64 // address → the sequence number it was added at
	ring []string          // ring[seq % len(ring)] was added at seq
	next uint64            // the sequence number of the next add
}

func newEndedSet(size int) endedSet {
	return endedSet{at: make(map[string]uint64), ring: make([]string, size)}
}

func (s *endedSet) add(addr string) {
	if len(s.ring) == 0 {
		return
	}
	i := s.next % uint64(len(s.ring))
	if old := s.ring[i]; old != "" {
		if at, ok := s.at[old]; ok && at+uint64(len(s.ring)) == s.next {
			delete(s.at, old) // not added again since: its time is up
		}
	}
	s.ring[i] = addr
	s.at[addr] = s.next
	s.next++
}

func (s *endedSet) has(addr string) bool {
	_, ok := s.at[addr]
	return ok
}

// remove forgets addr; its slot in the ring is skipped when it comes round.
func (s *endedSet) remove(addr string) { delete(s.at, addr) }
