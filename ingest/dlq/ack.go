package dlq

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// AckState is what the Delta log says of a dead letter's acknowledging commit
// (see HeaderCommitID).
type AckState int

const (
	// AckReal: the first commit after the dead letter's table version whose txn for its
	// ingestd.txn.app_id reaches ingestd.txn.version is the one it names. Also every dead
	// letter without ack headers (written before them), and one whose commits were removed
	// by log cleanup.
	AckReal AckState = iota
	// AckOrphan: that commit has another commitInfo.txnId: the flush that produced the dead
	// letter never committed, and a later flush handled the record again.
	AckOrphan
	// AckPending: no such commit yet; the flush may still be in flight.
	AckPending
)

func (s AckState) String() string {
	return [...]string{"real", "orphan", "pending"}[s]
}

// ParamGroupOffsetTxns is the commitInfo.operationParameters key under which a commit
// names the txns it moves to a position taken from the Kafka group offset (a JSON object
// of appId → last offset covered): the progress of dead-letter-only flushes made while
// the table did not exist and recorded by a group offset commit only, before a restart.
// Dead letters at or before that position were acknowledged so: they are real.
const ParamGroupOffsetTxns = "ingestd.groupOffsetTxns"

// FormatGroupOffsetTxns encodes the value of ParamGroupOffsetTxns.
func FormatGroupOffsetTxns(m map[string]int64) string {
	b, _ := json.Marshal(m) // map[string]int64 always encodes
	return string(b)
}

// txnMove is one commit's txn action for an appId of interest.
type txnMove struct {
	version    int64 // the commit's table version
	txnVersion int64
	commitID   string // the commit's commitInfo.txnId
	fromGroup  int64  // the position ParamGroupOffsetTxns gives the appId, -1: none
}

// AckIndex holds, per appId, the txn moves of the commit JSON files read so far, in
// version order: read once per replay from the smallest table version its dead letters
// name, and extended (Refresh) when a dead letter is pending. The zero value knows no
// commits: every dead letter with ack headers is pending.
type AckIndex struct {
	st    storage.Store
	apps  map[string]bool
	moves map[string][]txnMove
	first int64 // smallest commit JSON version present above the start (-1: none)
	last  int64 // largest commit JSON version read, or the start: versions <= last are not read
	// group holds, per source txn appId, the Kafka group offset of its partition (the next
	// offset to read): the progress of dead-letter-only flushes made before the table
	// existed (docs/architecture.md, Exactly-once, 7). SetGroupOffsets.
	group map[string]int64
}

// SetGroupOffsets gives the index the pipeline's committed Kafka group offsets by txn
// appId (the next offset to read of each source partition). A dead letter written before
// the table existed (table version -1) whose txn no commit has moved yet is then real when
// the group offset is past its txn version: a dead-letter-only flush commits the group
// offset only after the broker acknowledged its dead letters, so that flush completed and
// no later flush handles the record again. Without this, such dead letters stay pending
// until the pipeline creates the table, which it does only with a record that fits.
func (x *AckIndex) SetGroupOffsets(byAppID map[string]int64) { x.group = byAppID }

// NewAckIndex reads the table's commits after the smallest table version of recs' dead
// letters that carry ack headers, keeping the txn moves of their appIds (an AckScope of
// recs). With no such record it reads nothing. Errors: AckScope.Index's.
func NewAckIndex(ctx context.Context, st storage.Store, recs []*kgo.Record) (*AckIndex, error) {
	var s AckScope
	for _, r := range recs {
		s.Add(r)
	}
	return s.Index(ctx, st)
}

// AckScope collects, one dead letter at a time, what an AckIndex must read: the txn
// appIds the dead letters name and the smallest table version they were checked
// against. It keeps one entry per distinct appId (a source or replay partition), never
// the records, so a dead-letter topic of any size is indexed in bounded memory. The zero
// value is empty and ready.
type AckScope struct {
	apps  map[string]bool
	minTV int64
}

// Add takes r's ack headers into the scope; a record without them changes nothing.
func (s *AckScope) Add(r *kgo.Record) {
	a, tv, ok := AckOf(r)
	if !ok {
		return
	}
	if s.apps == nil {
		s.apps, s.minTV = map[string]bool{}, tv
	}
	s.apps[a.TxnAppID] = true
	s.minTV = min(s.minTV, tv)
}

// Index reads the table's commits after the scope's smallest table version, keeping the
// txn moves of its appIds. An empty scope reads nothing. Errors: listing or reading the
// log (wrapped store errors), or a commit that does not parse.
func (s *AckScope) Index(ctx context.Context, st storage.Store) (*AckIndex, error) {
	x := &AckIndex{st: st, apps: map[string]bool{}, moves: map[string][]txnMove{}, first: -1, last: -1}
	if len(s.apps) == 0 {
		return x, nil
	}
	for app := range s.apps {
		x.apps[app] = true
	}
	x.last = s.minTV
	return x, x.Refresh(ctx)
}

// Refresh reads the commits after the last one read.
func (x *AckIndex) Refresh(ctx context.Context) error {
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
		fromGroup := groupOffsetTxns(c.Actions)
		for _, a := range c.Actions {
			if a.Txn != nil && x.apps[a.Txn.AppID] {
				m := txnMove{version: c.Version, txnVersion: a.Txn.Version, commitID: c.TxnID, fromGroup: -1}
				if off, ok := fromGroup[a.Txn.AppID]; ok {
					m.fromGroup = off
				}
				x.moves[a.Txn.AppID] = append(x.moves[a.Txn.AppID], m)
			}
		}
		x.last = c.Version
	}
	return nil
}

// groupOffsetTxns reads ParamGroupOffsetTxns of a commit's commitInfo (nil: none, or
// unreadable, which counts as none).
func groupOffsetTxns(actions []deltalog.Action) map[string]int64 {
	var m map[string]int64
	for _, a := range actions {
		if a.CommitInfo == nil {
			continue
		}
		if ps, ok := a.CommitInfo["operationParameters"].(map[string]any); ok {
			if s, ok := ps[ParamGroupOffsetTxns].(string); ok {
				_ = json.Unmarshal([]byte(s), &m)
			}
		}
	}
	return m
}

// Classify applies the acknowledgement rule: the first commit after the dead letter's
// table version that moves its txn appId to its txn version or past it decides: real when
// it is the commit the dead letter names, or when it moved the txn from a group offset
// position at or past the dead letter (ParamGroupOffsetTxns: the record was not read
// again after a restart); orphan otherwise. Without such a commit, a dead letter written
// before the table existed is real when the group offset is past it (SetGroupOffsets),
// else pending. Without ack headers, or when commit files after its table version were
// removed by log cleanup, it is real.
func (x *AckIndex) Classify(r *kgo.Record) AckState {
	a, tv, ok := AckOf(r)
	if !ok {
		return AckReal
	}
	if x.first > tv+1 {
		return AckReal // commits tv+1 .. first-1 are gone: cannot tell
	}
	for _, m := range x.moves[a.TxnAppID] {
		if m.version > tv && m.txnVersion >= a.TxnVersion {
			if m.commitID == a.CommitID || m.fromGroup >= a.TxnVersion {
				return AckReal
			}
			return AckOrphan
		}
	}
	if g, ok := x.group[a.TxnAppID]; ok && tv < 0 && a.TxnVersion < g {
		return AckReal // acknowledged by the group offset before the table existed (SetGroupOffsets)
	}
	return AckPending
}
