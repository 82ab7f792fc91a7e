package sqlite

import "github.com/getorrery/orrery/store"

// CommitTogether commits the requests in one group commit, as the writer
// does with appends queued while its previous commit was in flight, and
// returns each request's own error. Nothing else may append meanwhile.
func (l *Log) CommitTogether(reqs ...[]store.Batch) []error {
	rs := make([]*appendReq, len(reqs))
	for i, b := range reqs {
		rs[i] = &appendReq{batches: b}
	}
	return l.commitAll(rs)
}

// SetWALLimits sets how many bytes of frames go between two checkpoints of
// the WAL and how large the WAL may grow before the writer checkpoints it
// itself, until the test ends.
func SetWALLimits(t interface{ Cleanup(func()) }, every uint64, max int64) {
	e, m := walEvery, walMax
	walEvery, walMax = every, max
	t.Cleanup(func() { walEvery, walMax = e, m })
}
