package ingest

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// ackState is what the Delta log says of a dead letter's acknowledging commit
// (see HeaderCommitID).
type ackState int

const (
	// ackReal: the first commit after the dead letter's table version whose txn for its
	// ingestd.txn.app_id reaches ingestd.txn.version is the one it names. Also every dead
	// letter without ack headers (written before them), and one whose commits were removed
	// by log cleanup.
	ackReal ackState = iota
	// ackOrphan: that commit has another commitInfo.txnId: the flush that produced the dead
	// letter never committed, and a later flush handled the record again.
	ackOrphan
	// ackPending: no such commit yet; the flush may still be in flight.
	ackPending
)

func (s ackState) String() string {
	return [...]string{"real", "orphan", "pending"}[s]
}

// ackOfRecord reads a DLQ record's ack headers and table version; ok is false when it
// lacks any of them (a dead letter written before they existed).
func ackOfRecord(r *kgo.Record) (a ack, tableVersion int64, ok bool) {
	id, ok1 := header(r, HeaderCommitID)
	app, ok2 := header(r, HeaderTxnAppID)
	ver, ok3 := header(r, HeaderTxnVersion)
	tv, ok4 := header(r, HeaderTableVersion)
	if !ok1 || !ok2 || !ok3 || !ok4 || id == "" || app == "" {
		return ack{}, 0, false
	}
	v, err1 := strconv.ParseInt(ver, 10, 64)
	t, err2 := strconv.ParseInt(tv, 10, 64)
	if err1 != nil || err2 != nil {
		return ack{}, 0, false
	}
	return ack{commitID: id, txnAppID: app, txnVersion: v}, t, true
}

// txnMove is one commit's txn action for an appId of interest.
type txnMove struct {
	version    int64 // the commit's table version
	txnVersion int64
	commitID   string // the commit's commitInfo.txnId
}

// ackIndex holds, per appId, the txn moves of the commit JSON files read so far, in
// version order: read once per replay from the smallest table version its dead letters
// name, and extended (refresh) when a dead letter is pending.
type ackIndex struct {
	st    storage.Store
	apps  map[string]bool
	moves map[string][]txnMove
	first int64 // smallest commit JSON version present above the start (-1: none)
	last  int64 // largest commit JSON version read, or the start: versions <= last are not read
}

// newAckIndex reads the commits after the smallest table version of recs' dead letters
// that carry ack headers, keeping the txn moves of their appIds. With no such record it
// reads nothing.
func newAckIndex(ctx context.Context, st storage.Store, recs []*kgo.Record) (*ackIndex, error) {
	x := &ackIndex{st: st, apps: map[string]bool{}, moves: map[string][]txnMove{}, first: -1, last: -1}
	minTV := int64(-2)
	for _, r := range recs {
		a, tv, ok := ackOfRecord(r)
		if !ok {
			continue
		}
		x.apps[a.txnAppID] = true
		if minTV == -2 || tv < minTV {
			minTV = tv
		}
	}
	if len(x.apps) == 0 {
		return x, nil
	}
	x.last = minTV
	return x, x.refresh(ctx)
}

// refresh reads the commit JSON files after the last one read.
func (x *ackIndex) refresh(ctx context.Context) error {
	if len(x.apps) == 0 {
		return nil
	}
	for c, err := range deltawriter.Commits(ctx, x.st, x.last) {
		if err != nil {
			return fmt.Errorf("read the commits after version %d: %w", x.last, err)
		}
		if x.first < 0 {
			x.first = c.Version
		}
		for _, a := range c.Actions {
			if a.Txn != nil && x.apps[a.Txn.AppID] {
				x.moves[a.Txn.AppID] = append(x.moves[a.Txn.AppID], txnMove{version: c.Version, txnVersion: a.Txn.Version, commitID: c.TxnID})
			}
		}
		x.last = c.Version
	}
	return nil
}

// classify applies the acknowledgement rule: the first commit after the
// dead letter's table version that moves its txn appId to its txn version or past it
// decides. Without ack headers, or when commit files after its table version were removed
// by log cleanup, it is real.
func (x *ackIndex) classify(r *kgo.Record) ackState {
	a, tv, ok := ackOfRecord(r)
	if !ok {
		return ackReal
	}
	if x.first > tv+1 {
		return ackReal // commits tv+1 .. first-1 are gone: cannot tell
	}
	for _, m := range x.moves[a.txnAppID] {
		if m.version > tv && m.txnVersion >= a.txnVersion {
			if m.commitID == a.commitID {
				return ackReal
			}
			return ackOrphan
		}
	}
	return ackPending
}
