package deltawriter

import (
	"iter"

	"github.com/google/btree"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// tombstoneSet is a snapshot's remove actions not superseded by an add, keyed like its
// Files (deltalog.FileKey), in key order. It is a copy-on-write B-tree: clones share its
// nodes until either changes them, so advancing a handed-out snapshot by a commit that
// removes files copies the few nodes it changes, not the set (tombstones stay for
// delta.deletedFileRetentionDuration, 7 days by default: 10⁵ and more on a table whose
// commits rewrite files, as keyed tables' do). The zero value is empty.
type tombstoneSet struct {
	t *btree.BTreeG[tombstone]
}

// tombstone is one entry: its key and its remove action (never modified once in a set).
type tombstone struct {
	key string
	r   *deltalog.Remove
}

func tombLess(a, b tombstone) bool { return a.key < b.key }

func (ts *tombstoneSet) len() int {
	if ts.t == nil {
		return 0
	}
	return ts.t.Len()
}

// get returns the tombstone of key k and whether there is one.
func (ts *tombstoneSet) get(k string) (deltalog.Remove, bool) {
	if ts.t == nil {
		return deltalog.Remove{}, false
	}
	e, ok := ts.t.Get(tombstone{key: k})
	if !ok {
		return deltalog.Remove{}, false
	}
	return *e.r, true
}

// put sets the tombstone of key k to r.
func (ts *tombstoneSet) put(k string, r deltalog.Remove) {
	if ts.t == nil {
		ts.t = btree.NewG(overDegree, tombLess)
	}
	ts.t.ReplaceOrInsert(tombstone{key: k, r: &r})
}

// del drops the tombstone of key k, if any. A key that is not there changes nothing (a
// B-tree delete would copy the nodes on its path first).
func (ts *tombstoneSet) del(k string) {
	if ts.t != nil && ts.t.Has(tombstone{key: k}) {
		ts.t.Delete(tombstone{key: k})
	}
}

// clone returns a set that can be changed without changing ts (and the other way round).
func (ts *tombstoneSet) clone() tombstoneSet {
	if ts.t == nil {
		return tombstoneSet{}
	}
	return tombstoneSet{t: ts.t.Clone()}
}

// all yields the tombstones in key order.
func (ts *tombstoneSet) all() iter.Seq2[string, deltalog.Remove] {
	return func(yield func(string, deltalog.Remove) bool) {
		if ts.t == nil {
			return
		}
		ts.t.Ascend(func(e tombstone) bool { return yield(e.key, *e.r) })
	}
}

// expired reports whether remove r is past the retention that ends at cutoff (Unix ms):
// its deletionTimestamp is before it. A remove without one never expires (PROTOCOL.md,
// "Add File and Remove File").
func expired(r *deltalog.Remove, cutoff int64) bool {
	return r.DeletionTimestamp != nil && *r.DeletionTimestamp < cutoff
}

// expire drops the tombstones expired at cutoff (Unix ms) and returns how many it
// dropped. O(tombstones).
func (ts *tombstoneSet) expire(cutoff int64) int {
	if ts.t == nil {
		return 0
	}
	var gone []string
	ts.t.Ascend(func(e tombstone) bool {
		if expired(e.r, cutoff) {
			gone = append(gone, e.key)
		}
		return true
	})
	for _, k := range gone {
		ts.t.Delete(tombstone{key: k})
	}
	return len(gone)
}
