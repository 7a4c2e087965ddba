package ingest

import (
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/rowfill"
)

// change is one change of a planKeyed test: key, sequence, delete flag; row -1 is a
// tombstone (no row); fromPos: a snapshot read without its sequence
// (rowfill.Change.SeqFromPosition).
type change struct {
	key     string
	seq     int64
	delete  bool
	row     int
	fromPos bool
}

// plan runs planKeyed over changes in batch order on an unpartitioned flush of rows rows;
// it returns the plan and the changes as planned, in batch order.
func plan(t *testing.T, ordered bool, rows int, table map[string]stored, cs ...change) (keyedPlan, []rowfill.Change) {
	t.Helper()
	return planWith(t, ordered, false, rows, table, cs...)
}

// planWith is plan with soft deletes when soft.
func planWith(t *testing.T, ordered, soft bool, rows int, table map[string]stored, cs ...change) (keyedPlan, []rowfill.Change) {
	t.Helper()
	var out []rowfill.Change
	pos := make([]int32, len(cs))
	for i, c := range cs {
		out = append(out, rowfill.Change{Key: []byte(c.key), Seq: c.seq, Delete: c.delete, Row: c.row, SeqFromPosition: c.fromPos, Rec: &kgo.Record{Offset: int64(i)}})
		pos[len(cs)-1-i] = int32(i)
	}
	// planKeyed takes the changes in any order: reversed here, so that the batch order comes from pos.
	in := slices.Clone(out)
	slices.Reverse(in)
	p := planKeyed(in, pos, ordered, true, soft, map[*rowfill.PartitionFile]int{nil: rows}, func(k []byte) stored { return table[string(k)] })
	slices.Reverse(in) // batch order, with the sequences planKeyed gave tombstones and snapshot reads
	return p, in
}

// kept lists the rows of the unpartitioned file the plan keeps live (its delete markers
// aside: markers lists those).
func kept(p keyedPlan) []int {
	var out []int
	for j, k := range p.keep[nil] {
		if k && !slices.Contains(p.markers[nil], j) {
			out = append(out, j)
		}
	}
	return out
}

// Insert, delete, insert of one key in one batch: the last insert is the row
// (memiiso/debezium-server-iceberg#661 kept the first).
func TestKeyedInsertDeleteInsertKeepsLast(t *testing.T) {
	p, _ := plan(t, false, 3, nil,
		change{key: "1", row: 0}, change{key: "1", delete: true, row: 1}, change{key: "1", row: 2})
	if got := kept(p); !slices.Equal(got, []int{2}) {
		t.Fatalf("kept rows %v, want [2] (hallo)", got)
	}
	if p.superseded != 2 || p.upserts != 1 || len(p.marks) != 0 {
		t.Fatalf("superseded %d upserts %d marks %v, want 2, 1, none", p.superseded, p.upserts, p.marks)
	}
}

// Two updates of one key in one batch: the later wins (apache/iceberg#13547), and over a
// stored row the stored row is marked deleted (delta-io/delta#218 failed the MERGE).
func TestKeyedSameKeyTwiceLastWins(t *testing.T) {
	p, _ := plan(t, true, 2, nil, change{key: "1", seq: 1, row: 0}, change{key: "1", seq: 2, row: 1})
	if got := kept(p); !slices.Equal(got, []int{1}) {
		t.Fatalf("kept rows %v, want [1] ({1,b})", got)
	}
	table := map[string]stored{"1": {locs: []rowLoc{{"part-a.parquet", 0}}, seq: 2, found: true}}
	p, _ = plan(t, false, 2, table, change{key: "1", row: 0}, change{key: "1", row: 1})
	if got := kept(p); !slices.Equal(got, []int{1}) {
		t.Fatalf("second batch kept rows %v, want [1] ({1,d})", got)
	}
	if want := map[string][]uint64{"part-a.parquet": {0}}; !maps.EqualFunc(p.marks, want, slices.Equal) {
		t.Fatalf("marks %v, want %v", p.marks, want)
	}
}

// A delete with sequence 5 of a key the table lacks is remembered: a later insert with
// sequence 3 is stale, one with 6 is written (apache/spark#55993, apache/hudi#4880).
func TestKeyedLateInsertAfterDeleteIsStale(t *testing.T) {
	p, _ := plan(t, true, 1, nil, change{key: "1", seq: 5, delete: true, row: 0})
	if len(kept(p)) != 0 || len(p.deletes) != 1 || p.deletes[0].seq != 5 || string(p.deletes[0].key) != "1" {
		t.Fatalf("kept %v deletes %+v, want none and the delete of key 1 at 5 remembered", kept(p), p.deletes)
	}
	// The table has no row of key 1: the delete's own row is kept as a marker (deleted in
	// the same commit), which carries the delete's sequence across restarts.
	if !slices.Equal(p.markers[nil], []int{0}) || !p.keep[nil][0] {
		t.Fatalf("markers %v keep %v, want row 0 kept as the delete's marker", p.markers[nil], p.keep[nil])
	}
	table := map[string]stored{"1": {seq: 5, deleted: true, found: true}}
	p, _ = plan(t, true, 1, table, change{key: "1", seq: 3, row: 0})
	if len(kept(p)) != 0 || p.stale != 1 {
		t.Fatalf("late insert: kept %v stale %d, want none and 1", kept(p), p.stale)
	}
	p, _ = plan(t, true, 1, table, change{key: "1", seq: 6, row: 0})
	if got := kept(p); !slices.Equal(got, []int{0}) || p.stale != 0 {
		t.Fatalf("newer insert: kept %v stale %d, want [0] and 0", got, p.stale)
	}
}

// Insert then delete of one key in one batch: nothing is written (lance-format/lance-flink#74).
func TestKeyedInsertThenDeleteWritesNothing(t *testing.T) {
	p, _ := plan(t, false, 2, nil, change{key: "7", row: 0}, change{key: "7", delete: true, row: 1})
	if len(kept(p)) != 0 || p.upserts != 0 {
		t.Fatalf("kept %v upserts %d, want no row 7", kept(p), p.upserts)
	}
}

// Equal sequences: the later record wins, every run (airbytehq/airbyte#4160); a lower
// sequence later in the batch loses to a higher one earlier.
func TestKeyedEqualSequencesLaterRecordWins(t *testing.T) {
	for range 20 {
		p, _ := plan(t, true, 2, nil, change{key: "6", seq: 10, row: 0}, change{key: "6", seq: 10, delete: true, row: 1})
		if len(kept(p)) != 0 {
			t.Fatalf("kept %v, want row 6 deleted (the later record)", kept(p))
		}
	}
	p, _ := plan(t, true, 2, nil, change{key: "6", seq: 11, row: 0}, change{key: "6", seq: 10, delete: true, row: 1})
	if got := kept(p); !slices.Equal(got, []int{0}) {
		t.Fatalf("kept %v, want [0]: the delete's sequence 10 is older than the insert's 11", got)
	}
}

// Upsert configured: insert, update, delete of one key in one commit leave no row and
// mark nothing when the table lacks the key (apache/iceberg#17542 appended all three).
func TestKeyedInsertUpdateDeleteLeavesNothing(t *testing.T) {
	p, _ := plan(t, false, 2, nil, change{key: "1", row: 0}, change{key: "1", row: 1}, change{key: "1", delete: true, row: -1})
	if len(kept(p)) != 0 || len(p.marks) != 0 || p.superseded != 2 {
		t.Fatalf("kept %v marks %v superseded %d, want nothing, nothing, 2", kept(p), p.marks, p.superseded)
	}
}

// A tombstone under sequence_by deletes what is current at its position: it takes the
// greatest sequence of its key seen before it, so an earlier insert loses to it and a later
// one wins over it.
func TestKeyedTombstoneTakesTheCurrentSequence(t *testing.T) {
	table := map[string]stored{"1": {locs: []rowLoc{{"f", 3}}, seq: 8, found: true}}
	p, _ := plan(t, true, 1, table, change{key: "1", seq: 9, row: 0}, change{key: "1", delete: true, row: -1})
	if len(kept(p)) != 0 || p.deleted != 1 || len(p.deletes) != 1 || p.deletes[0].seq != 9 {
		t.Fatalf("kept %v deleted %d deletes %+v, want no row, the stored row deleted, remembered at 9", kept(p), p.deleted, p.deletes)
	}
	if want := map[string][]uint64{"f": {3}}; !maps.EqualFunc(p.marks, want, slices.Equal) {
		t.Fatalf("marks %v, want %v", p.marks, want)
	}
	p, _ = plan(t, true, 1, table, change{key: "1", delete: true, row: -1}, change{key: "1", seq: 8, row: 0})
	if got := kept(p); !slices.Equal(got, []int{0}) {
		t.Fatalf("insert after the tombstone: kept %v, want [0]", got)
	}
}

// Keys are decided independently; stored duplicates of a key are all marked.
func TestKeyedManyKeysAndStoredDuplicates(t *testing.T) {
	table := map[string]stored{
		"a": {locs: []rowLoc{{"f1", 0}, {"f2", 4}}, found: true},
		"b": {locs: []rowLoc{{"f1", 1}}, found: true},
	}
	p, _ := plan(t, false, 3, table, change{key: "a", row: 0}, change{key: "b", delete: true, row: 1}, change{key: "c", row: 2})
	if got := kept(p); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("kept %v, want [0 2]", got)
	}
	want := map[string][]uint64{"f1": {0, 1}, "f2": {4}}
	for k := range p.marks {
		slices.Sort(p.marks[k])
	}
	if !maps.EqualFunc(p.marks, want, slices.Equal) || p.marked != 3 || p.deleted != 1 || p.upserts != 2 {
		t.Fatalf("marks %v marked %d deleted %d upserts %d, want %v, 3, 1, 2", p.marks, p.marked, p.deleted, p.upserts, want)
	}
}

// A winning delete newer than the stored row it deletes keeps a row of the flush carrying
// its sequence as a marker (the stored row carries an older one): the delete's own row,
// or for a tombstone the row whose sequence it took; a tombstone whose sequence is the
// table's needs none (the stored row it marks carries it).
func TestKeyedDeleteNewerThanTheStoredRowKeepsAMarker(t *testing.T) {
	table := map[string]stored{"1": {locs: []rowLoc{{"f", 3}}, seq: 7, found: true}}
	p, _ := plan(t, true, 1, table, change{key: "1", seq: 9, delete: true, row: 0})
	if !slices.Equal(p.markers[nil], []int{0}) || len(kept(p)) != 0 || len(p.deletes) != 1 || p.deletes[0].seq != 9 {
		t.Fatalf("op d at 9 over a row at 7: markers %v kept %v deletes %+v, want its row 0 as the marker, remembered at 9", p.markers[nil], kept(p), p.deletes)
	}
	p, _ = plan(t, true, 2, table, change{key: "1", seq: 9, row: 0}, change{key: "1", delete: true, row: -1}, change{key: "1", seq: 8, row: 1})
	if !slices.Equal(p.markers[nil], []int{0}) || len(kept(p)) != 0 || p.deletes[0].seq != 9 {
		t.Fatalf("tombstone after an update at 9: markers %v kept %v deletes %+v, want the update's row 0 as the marker, remembered at 9", p.markers[nil], kept(p), p.deletes)
	}
	p, _ = plan(t, true, 1, table, change{key: "1", seq: 5, row: 0}, change{key: "1", delete: true, row: -1})
	if len(p.markers[nil]) != 0 || len(kept(p)) != 0 || p.deletes[0].seq != 7 {
		t.Fatalf("tombstone at the table's 7: markers %v kept %v deletes %+v, want no marker, remembered at 7", p.markers[nil], kept(p), p.deletes)
	}
	if want := map[string][]uint64{"f": {3}}; !maps.EqualFunc(p.marks, want, slices.Equal) {
		t.Fatalf("marks %v, want %v", p.marks, want)
	}
}

// A snapshot read without its sequence takes the greatest sequence of its key seen before
// it: the stored row's (replaced), a remembered delete's (the key comes back), an earlier
// change's in the batch (and a later change below it loses), minSeq when nothing is
// known; a tombstone after it takes the same (and deletes the stored row, which carries it).
func TestKeyedSnapshotReadTakesTheSequenceBeforeIt(t *testing.T) {
	table := map[string]stored{
		"1": {locs: []rowLoc{{"part-a.parquet", 4}}, seq: 200, found: true},
		"2": {seq: 300, deleted: true, found: true},
		"4": {locs: []rowLoc{{"part-a.parquet", 5}}, seq: 100, found: true},
	}
	p, out := plan(t, true, 7, table,
		change{key: "1", row: 0, fromPos: true},
		change{key: "2", row: 1, fromPos: true},
		change{key: "3", seq: 100, row: 2}, change{key: "3", row: 3, fromPos: true}, change{key: "3", seq: 50, row: 4},
		change{key: "4", row: 5, fromPos: true}, change{key: "4", delete: true, row: -1},
		change{key: "5", row: 6, fromPos: true})
	if got, want := kept(p), []int{0, 1, 3, 6}; !slices.Equal(got, want) {
		t.Fatalf("kept rows %v, want %v", got, want)
	}
	var seqs []int64
	for _, c := range out {
		seqs = append(seqs, c.Seq)
	}
	if want := []int64{200, 300, 100, 100, 50, 100, 100, minSeq}; !slices.Equal(seqs, want) {
		t.Fatalf("sequences %v, want %v", seqs, want)
	}
	if got, want := p.marks, map[string][]uint64{"part-a.parquet": {4, 5}}; !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("marks %v, want %v", got, want)
	}
	if p.stale != 0 || p.superseded != 3 || p.upserts != 4 || p.deleted != 1 {
		t.Fatalf("stale %d superseded %d upserts %d deleted %d, want 0, 3, 4, 1", p.stale, p.superseded, p.upserts, p.deleted)
	}
	if got, want := p.deletes, []keyedDelete{{key: []byte("4"), seq: 100}}; len(got) != 1 || string(got[0].key) != "4" || got[0].seq != want[0].seq {
		t.Fatalf("deletes %v, want %v", got, want)
	}
	if got := p.markers[nil]; len(got) != 0 {
		t.Fatalf("markers %v, want none (the stored row the tombstone marks carries its sequence, 100)", got)
	}
}
