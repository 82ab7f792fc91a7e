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
