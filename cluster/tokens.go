package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/getorrery/orrery/auth"
	jsstore "github.com/getorrery/orrery/store/jetstream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// tokensKey is the one key of the tokens bucket: the whole list, so that a
// create or revoke is one compare-and-set.
const tokensKey = "tokens"

// Tokens is the cluster's node tokens, kept as one key of a JetStream KV
// bucket: a token made on one node (or by orrery node token create with
// --nats) admits clients on every node, and a revoke ends its connections
// on all of them. It is an auth.Backend that answers loads from a copy a KV
// watch keeps current.
type Tokens struct {
	kv      jetstream.KeyValue
	nc      *nats.Conn
	bucket  string
	changed chan struct{}
	stop    func()

	mu   sync.Mutex // guards data and rev
	data []byte
	rev  uint64
}

// OpenTokens opens (or makes) the tokens bucket and starts watching it. A
// bucket that exists is used as it is, whatever replicas says, so a CLI
// never rewrites a cluster's settings. Close stops the watch.
func OpenTokens(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (*Tokens, error) {
	if replicas <= 0 {
		replicas = 1
	}
	kv, err := jsstore.UntilAnswered(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		kv, err := js.KeyValue(ctx, bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: bucket, Description: "Orrery node tokens (SHA-256 hashes)", History: 1,
				Storage: jetstream.FileStorage, Replicas: replicas,
			})
			if errors.Is(err, jetstream.ErrBucketExists) {
				kv, err = js.KeyValue(ctx, bucket) // another node made it first
			}
		}
		return kv, err
	})
	if err != nil {
		return nil, fmt.Errorf("tokens bucket %s: %w", bucket, err)
	}
	t := &Tokens{kv: kv, nc: js.Conn(), bucket: bucket, changed: make(chan struct{}, 1)}
	if err := t.Refresh(); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := kv.Watch(wctx, tokensKey, jetstream.IgnoreDeletes())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch tokens bucket %s: %w", bucket, err)
	}
	done := make(chan struct{})
	t.stop = func() {
		cancel()
		_ = w.Stop()
		<-done
	}
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e != nil {
				t.set(e.Value(), e.Revision())
			}
		}
	}()
	return t, nil
}

// set keeps a value seen at rev, unless a newer one is already kept.
func (t *Tokens) set(data []byte, rev uint64) {
	t.mu.Lock()
	if rev < t.rev {
		t.mu.Unlock()
		return
	}
	t.data, t.rev = data, rev
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// Refresh reads the key from the bucket's leader, for a lookup that
// missed in the copy (a replica, which a KV get may ask, can be behind).
// A bucket just made may not answer for a moment: the read tries again,
// for up to 10 s.
func (t *Tokens) Refresh() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := jsstore.LeaderEntry(ctx, t.nc, t.bucket, tokensKey)
	if err != nil {
		return fmt.Errorf("read tokens from bucket %s: %w", t.bucket, err)
	}
	if m != nil {
		t.set(m.Data, m.Seq)
	}
	return nil // nil m: never made, or purged: no tokens
}

// Load returns the list's bytes as last seen, and their revision.
func (t *Tokens) Load() ([]byte, uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.data, t.rev, nil
}

// Save writes the list if the key is still at version (0: not yet made).
func (t *Tokens) Save(data []byte, version uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var rev uint64
	var err error
	if version == 0 {
		rev, err = t.kv.Create(ctx, tokensKey, data)
	} else {
		rev, err = t.kv.Update(ctx, tokensKey, data, version)
	}
	// 10071 names the revision it found; 10164 is the same refusal while
	// the key's previous write is still being applied.
	var api *jetstream.APIError
	if errors.Is(err, jetstream.ErrKeyExists) || (errors.As(err, &api) && api.ErrorCode == 10164) {
		return fmt.Errorf("bucket %s: %w", t.bucket, auth.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("bucket %s: %w", t.bucket, err)
	}
	t.set(data, rev)
	return nil
}

// Changed is signalled whenever the list changes.
func (t *Tokens) Changed() <-chan struct{} { return t.changed }

// String names the bucket, for messages.
func (t *Tokens) String() string { return "the NATS KV bucket " + t.bucket }

// Close stops the watch.
func (t *Tokens) Close() {
	if t.stop != nil {
		t.stop()
	}
}

var (
	_ auth.Backend   = (*Tokens)(nil)
	_ auth.Refresher = (*Tokens)(nil)
	_ auth.Notifier  = (*Tokens)(nil)
)
