package deltawriter

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// CommitEntry is one commit of a table's log: the actions of _delta_log/<version:020d>.json
// (PROTOCOL.md, "Delta Log Entries").
type CommitEntry struct {
	Version int64
	Actions []deltalog.Action
	// TxnID is the commit's commitInfo.txnId (CommitTxnID), "" when it has none: the id
	// its writer gave it (Commit.TxnID), which names it in dead-letter headers.
	TxnID string
}

// CommitTxnID returns commitInfo.txnId of a commit's actions: that of the first
// commitInfo action that has a string txnId, or "" when none does.
func CommitTxnID(actions []deltalog.Action) string {
	for _, a := range actions {
		if a.CommitInfo != nil {
			if id, ok := a.CommitInfo["txnId"].(string); ok {
				return id
			}
		}
	}
	return ""
}

// CommitVersions lists _delta_log of the table stored at st and returns the versions of
// the JSON commit files present, ascending. Versions may have gaps below the newest
// checkpoint (log cleanup removes old commits); other files (checkpoints, .crc, temp
// files) are ignored. It returns an error when the listing fails.
func CommitVersions(ctx context.Context, st storage.Store) ([]int64, error) {
	return commitVersionsAfter(ctx, st, -1)
}

// commitVersionsAfter is CommitVersions for the versions above after (-1: all), listing
// only the names after after's commit file (storage.ListFrom: a start-after key on object
// stores, so a replay does not list the whole log per refresh).
func commitVersionsAfter(ctx context.Context, st storage.Store, after int64) ([]int64, error) {
	from := ""
	if after >= 0 {
		from = fmt.Sprintf("%020d.json", after)
	}
	l, err := listLog(ctx, st, from)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, v := range slices.Sorted(maps.Keys(l.commits)) {
		if v > after {
			out = append(out, v)
		}
	}
	return out, nil
}

// ReadCommit reads and parses the commit file of version v of the table stored at st.
// It returns an error (wrapping the store's, e.g. a missing file) when the file cannot be
// read or parsed.
func ReadCommit(ctx context.Context, st storage.Store, v int64) (CommitEntry, error) {
	actions, err := readCommit(ctx, st, v)
	if err != nil {
		return CommitEntry{}, err
	}
	return CommitEntry{Version: v, Actions: actions, TxnID: CommitTxnID(actions)}, nil
}

// Commits yields, in version order, the commits of the table stored at st whose version
// is above after (-1: all) and whose JSON file is present when the iteration starts: one
// listing of _delta_log from after's commit file on, then each file read as it is reached
// (ReadCommit). A failure is yielded once, with a zero CommitEntry, and ends the
// iteration.
func Commits(ctx context.Context, st storage.Store, after int64) iter.Seq2[CommitEntry, error] {
	return func(yield func(CommitEntry, error) bool) {
		versions, err := commitVersionsAfter(ctx, st, after)
		if err != nil {
			yield(CommitEntry{}, err)
			return
		}
		for _, v := range versions {
			if v <= after {
				continue
			}
			e, err := ReadCommit(ctx, st, v)
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}

// Commits yields the commits of t above version after, in version order (see the
// package-level Commits).
func (t *Table) Commits(ctx context.Context, after int64) iter.Seq2[CommitEntry, error] {
	return Commits(ctx, t.store, after)
}
