package cluster

import (
	"encoding/json"
	"fmt"

	"github.com/getorrery/orrery/protocol"
	"github.com/nats-io/nats.go"
)

// listChange is one change to the session list, as a node tells the
// others: like the list itself on one node, nothing of it is durable (a
// client that reconnects reads the list again).
type listChange struct {
	Node    string                  `json:"node"`
	Kind    string                  `json:"kind"`
	Session protocol.SessionSummary `json:"session"`
}

func (m *Member) changesSubject() string { return m.Log.Prefix() + ".sessions.changed" }

// SessionChanged tells the other nodes of a change to the session list
// made here (a session created, retitled, running, ended, its cost), so
// that /api/live on every node shows every node's sessions.
func (m *Member) SessionChanged(kind string, sum protocol.SessionSummary) {
	data, err := json.Marshal(listChange{Node: m.Leases.Node().ID, Kind: kind, Session: sum})
	if err == nil {
		err = m.NC.Publish(m.changesSubject(), data)
	}
	if err != nil {
		m.logger().Warn("tell the cluster of a session-list change", "session", sum.ID, "err", err)
	}
}

// WatchChanges calls fn, on one goroutine, with each session-list change
// another node reports, until stop is called.
func (m *Member) WatchChanges(fn func(kind string, sum protocol.SessionSummary)) (stop func(), err error) {
	self := m.Leases.Node().ID
	sub, err := m.NC.Subscribe(m.changesSubject(), func(msg *nats.Msg) {
		var c listChange
		if json.Unmarshal(msg.Data, &c) != nil || c.Node == self || c.Session.ID == "" || c.Kind == "" {
			return
		}
		fn(c.Kind, c.Session)
	})
	if err != nil {
		return nil, fmt.Errorf("watch the cluster's session-list changes: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
