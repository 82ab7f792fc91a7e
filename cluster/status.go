package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jsstore "github.com/getorrery/orrery/store/jetstream"
	"github.com/nats-io/nats.go/jetstream"
)

// Status is what `orrery node status` shows of a cluster: the nodes alive,
// which sessions each owns, and the health of the stream and buckets that
// hold the log.
type Status struct {
	// Prefix names the cluster's stream and buckets.
	Prefix string `json:"prefix"`
	// Nodes are the nodes whose heartbeat has not expired, by name.
	Nodes []NodeStatus `json:"nodes"`
	// Leases are the sessions owned now, by session.
	Leases []LeaseStatus `json:"leases"`
	// Streams are the log's stream and the buckets beside it.
	Streams []StreamStatus `json:"streams"`
}

// NodeStatus is one node alive.
type NodeStatus struct {
	Node
	// Seen is when its last heartbeat was stored.
	Seen time.Time `json:"seen"`
	// Sessions is how many session leases name it.
	Sessions int `json:"sessions"`
}

// LeaseStatus is one session's owner.
type LeaseStatus struct {
	Session string `json:"session"`
	Node    Node   `json:"node"`
	// Renewed is when the lease was last taken or renewed.
	Renewed time.Time `json:"renewed"`
}

// StreamStatus is the health of one JetStream stream (a KV bucket and an
// object store are streams too).
type StreamStatus struct {
	Name     string       `json:"name"`
	Replicas int          `json:"replicas"`
	Leader   string       `json:"leader,omitempty"`
	Peers    []PeerStatus `json:"peers,omitempty"`
	Messages uint64       `json:"messages"`
	Bytes    uint64       `json:"bytes"`
	Problem  string       `json:"problem,omitempty"` // why it is unhealthy; "" when healthy
}

// PeerStatus is one replica of a stream, other than its leader.
type PeerStatus struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	Offline bool   `json:"offline"`
	Lag     uint64 `json:"lag"`
}

// Healthy reports whether every stream has a leader and every replica is
// current: the cluster can lose a server without losing a write.
func (s Status) Healthy() bool {
	for _, st := range s.Streams {
		if st.Problem != "" {
			return false
		}
	}
	return true
}

// ReadStatus reads the status of the cluster whose stream and buckets are
// named by prefix ("orrery" when empty).
func ReadStatus(ctx context.Context, js jetstream.JetStream, prefix string) (Status, error) {
	if prefix == "" {
		prefix = "orrery"
	}
	s := Status{Prefix: prefix, Nodes: []NodeStatus{}, Leases: []LeaseStatus{}}
	streams := append(jsstore.StreamNames(prefix),
		"KV_"+prefix+"_leases", "KV_"+prefix+"_leases_nodes", "KV_"+prefix+"_tokens")
	for i, name := range streams {
		st, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			if i == 0 {
				return s, fmt.Errorf("no stream %s in this NATS: no node has used it yet, or the prefix is not %q ([nats] prefix)", name, prefix)
			}
			continue
		}
		if err != nil {
			return s, fmt.Errorf("stream %s: %w", name, err)
		}
		s.Streams = append(s.Streams, streamStatus(st.CachedInfo()))
	}

	nodes, err := js.KeyValue(ctx, prefix+"_leases_nodes")
	if err != nil {
		return s, fmt.Errorf("the nodes bucket: %w", err)
	}
	byID := map[string]int{}
	if err := eachEntry(ctx, nodes, func(e jetstream.KeyValueEntry) error {
		var n Node
		if err := json.Unmarshal(e.Value(), &n); err != nil {
			return fmt.Errorf("node %s's heartbeat does not decode: %w", e.Key(), err)
		}
		byID[n.ID] = len(s.Nodes)
		s.Nodes = append(s.Nodes, NodeStatus{Node: n, Seen: e.Created()})
		return nil
	}); err != nil {
		return s, err
	}
	leases, err := js.KeyValue(ctx, prefix+"_leases")
	if err != nil {
		return s, fmt.Errorf("the leases bucket: %w", err)
	}
	if err := eachEntry(ctx, leases, func(e jetstream.KeyValueEntry) error {
		var n Node
		if err := json.Unmarshal(e.Value(), &n); err != nil {
			return fmt.Errorf("the lease %s does not decode: %w", e.Key(), err)
		}
		session, err := jsstore.SessionOfToken(e.Key())
		if err != nil {
			session = e.Key()
		}
		if i, ok := byID[n.ID]; ok {
			s.Nodes[i].Sessions++
			n.Addr = s.Nodes[i].Addr // a lease names its node; the heartbeat says where it serves
		}
		s.Leases = append(s.Leases, LeaseStatus{Session: session, Node: n, Renewed: e.Created()})
		return nil
	}); err != nil {
		return s, err
	}
	slices.SortFunc(s.Nodes, func(a, b NodeStatus) int { return strings.Compare(a.Name+a.ID, b.Name+b.ID) })
	slices.SortFunc(s.Leases, func(a, b LeaseStatus) int { return strings.Compare(a.Session, b.Session) })
	return s, nil
}

// eachEntry calls fn with every live key's latest entry.
func eachEntry(ctx context.Context, kv jetstream.KeyValue, fn func(jetstream.KeyValueEntry) error) error {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("read bucket %s: %w", kv.Bucket(), err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("read bucket %s: %w", kv.Bucket(), ctx.Err())
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return nil // nil marks the end of the values there are now
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

// streamStatus judges one stream's info.
func streamStatus(info *jetstream.StreamInfo) StreamStatus {
	st := StreamStatus{Name: info.Config.Name, Replicas: max(1, info.Config.Replicas), Messages: info.State.Msgs, Bytes: info.State.Bytes}
	c := info.Cluster
	if c == nil {
		return st
	}
	st.Leader = c.Leader
	var problems []string
	if c.Leader == "" {
		problems = append(problems, "no leader: writes wait until a majority of its servers is back")
	}
	for _, p := range c.Replicas {
		st.Peers = append(st.Peers, PeerStatus{Name: p.Name, Current: p.Current, Offline: p.Offline, Lag: p.Lag})
		switch {
		case p.Offline:
			problems = append(problems, "replica "+p.Name+" is offline")
		case !p.Current && p.Lag == 0:
			problems = append(problems, "replica "+p.Name+" is not current (not heard from: is its server down?)")
		case !p.Current:
			problems = append(problems, fmt.Sprintf("replica %s is %d operations behind", p.Name, p.Lag))
		}
	}
	st.Problem = strings.Join(problems, "; ")
	return st
}
