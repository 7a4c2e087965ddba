package ingest

import (
	"maps"
	"slices"
	"testing"
)

// Soft deletes keep the deleted key's row: a delete_when row is kept itself (the row stage
// flagged it); a tombstone keeps the flush's row carrying the values it deletes, flagged
// with the delete's sequence; over a stored row with no row in the flush, the stored row
// is marked and copied flagged. Nothing is remembered apart from the row (no deletes, no
// markers).
func TestKeyedSoftDeletePlan(t *testing.T) {
	// delete_when row over a stored row (sequence_by).
	table := map[string]stored{"1": {locs: []rowLoc{{"a.parquet", 3}}, seq: 5, found: true}}
	p, _ := planWith(t, true, true, 1, table, change{key: "1", seq: 9, delete: true, row: 0})
	if got := kept(p); !slices.Equal(got, []int{0}) || p.deleted != 1 || p.upserts != 0 || len(p.flags) != 0 || len(p.copies) != 0 || len(p.deletes) != 0 {
		t.Fatalf("delete_when: kept %v deleted %d upserts %d flags %v copies %v deletes %v; want [0] 1 0 none", got, p.deleted, p.upserts, p.flags, p.copies, p.deletes)
	}
	if want := map[string][]uint64{"a.parquet": {3}}; !maps.EqualFunc(p.marks, want, slices.Equal) {
		t.Fatalf("delete_when marks %v, want %v", p.marks, want)
	}
	// tombstone after an upsert of the flush: the upsert's row is kept and flagged with the
	// sequence the tombstone took (its own, 7).
	p, _ = planWith(t, true, true, 1, table, change{key: "1", seq: 7, row: 0}, change{key: "1", delete: true, row: -1})
	if got := kept(p); !slices.Equal(got, []int{0}) || len(p.flags) != 1 || p.flags[0] != (softFlag{row: 0, seq: 7}) || len(p.copies) != 0 {
		t.Fatalf("tombstone after upsert: kept %v flags %v copies %v; want [0], {row 0 seq 7}, none", got, p.flags, p.copies)
	}
	// tombstone alone over a stored row: the stored row is marked and copied with the
	// stored sequence (the tombstone's).
	p, _ = planWith(t, true, true, 0, table, change{key: "1", delete: true, row: -1})
	if want := map[string]map[uint64]int64{"a.parquet": {3: 5}}; !maps.EqualFunc(p.copies, want, maps.Equal) || p.deleted != 1 {
		t.Fatalf("tombstone alone: copies %v deleted %d, want %v, 1", p.copies, p.deleted, want)
	}
	if want := map[string][]uint64{"a.parquet": {3}}; !maps.EqualFunc(p.marks, want, slices.Equal) {
		t.Fatalf("tombstone alone marks %v, want %v", p.marks, want)
	}
	// a tombstone of an unknown key keeps nothing.
	p, _ = planWith(t, true, true, 0, nil, change{key: "2", delete: true, row: -1})
	if len(p.copies) != 0 || len(p.flags) != 0 || p.deleted != 0 || len(p.marks) != 0 {
		t.Fatalf("unknown key: copies %v flags %v deleted %d marks %v; want nothing", p.copies, p.flags, p.deleted, p.marks)
	}
	// An older change does not overwrite a newer soft delete (the soft-deleted row holds
	// sequence 9 in the table).
	table = map[string]stored{"1": {locs: []rowLoc{{"b.parquet", 0}}, seq: 9, found: true}}
	p, _ = planWith(t, true, true, 1, table, change{key: "1", seq: 8, row: 0})
	if got := kept(p); len(got) != 0 || p.stale != 1 || len(p.marks) != 0 {
		t.Fatalf("older change: kept %v stale %d marks %v; want none, 1, none", got, p.stale, p.marks)
	}
	// Without sequence_by a tombstone's sequence is its offset (3, its batch position
	// here), and it keeps the last row before it.
	p, _ = planWith(t, false, true, 2, nil, change{key: "4", row: 0}, change{key: "4", row: 1}, change{key: "5", delete: true, row: -1}, change{key: "4", delete: true, row: -1})
	if got := kept(p); !slices.Equal(got, []int{1}) || len(p.flags) != 1 || p.flags[0] != (softFlag{row: 1, seq: 3}) {
		t.Fatalf("unordered: kept %v flags %v; want [1], {row 1 seq 3}", got, p.flags)
	}
}
