package ingest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// The conflict paths of an upsert commit (docs/keyed-tables.md, "Other writers, OPTIMIZE
// and VACUUM"): another writer commits between the flush's read of the table and its
// commit (hooks.beforeCommit runs it, so the order is fixed), the commit loses, and the
// flush is rebuilt on the new snapshot, whose changes the key index reads before the keys
// are looked up again.

// otherTable is a second writer's handle on the harness's table and its snapshot.
func (h *keyedHarness) otherTable(ctx context.Context) (storage.Store, *deltawriter.Table, *deltawriter.Snapshot, error) {
	st, err := storage.Open("file://" + h.tableDir)
	if err != nil {
		return nil, nil, nil, err
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		return nil, nil, nil, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return st, tbl, snap, nil
}

// rowOf returns the live data file of the table holding id's live row and the row's
// position in it (the file must have no deletion vector: positions are counted over the
// rows read).
func rowOf(ctx context.Context, st storage.Store, snap *deltawriter.Snapshot, id int64) (deltalog.Add, uint64, error) {
	for _, add := range snap.Files.All() {
		if add.DeletionVector != nil {
			continue
		}
		var pos, at uint64
		found := false
		if _, err := snap.ReadDataFile(ctx, st, add, func(row map[string]any) error {
			if row["id"].(int64) == id && !found {
				at, found = pos, true
			}
			pos++
			return nil
		}); err != nil {
			return deltalog.Add{}, 0, err
		}
		if found {
			return add, at, nil
		}
	}
	return deltalog.Add{}, 0, fmt.Errorf("no file without a deletion vector holds id %d", id)
}

// onCommit returns a hooks.beforeCommit that runs winner once, before the n-th commit
// attempt (1-based) of the pipeline, and counts the attempts in calls. A failing winner
// fails the test.
func onCommit(t *testing.T, n int32, calls *atomic.Int32, winner func(ctx context.Context) error) func(int) error {
	return func(int) error {
		if calls.Add(1) == n {
			if err := winner(context.Background()); err != nil {
				t.Errorf("the other writer's commit: %v", err)
			}
		}
		return nil
	}
}

// A winner that re-marked the file our commit marks (a DELETE of another key of that
// file, as Spark's DELETE with deletion vectors writes it: remove and add of the file with
// a new vector) makes our commit ErrConcurrentDelete. The rebuilt flush marks its row in
// the file as the winner left it: both deletes hold, one conflict, one live row per key.
// Without the conflict our commit's remove/add of the file would replace the winner's
// deletion vector and bring key 2 back.
func TestKeyedConflictWinnerReMarkedOurFile(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(false)
	h.send(keyedRec{id: 1, v: "a", op: "c"}, keyedRec{id: 2, v: "b", op: "c"}, keyedRec{id: 3, v: "c", op: "c"})
	var calls atomic.Int32
	var winnerVersion atomic.Int64
	winner := func(ctx context.Context) error {
		st, tbl, snap, err := h.otherTable(ctx)
		if err != nil {
			return err
		}
		add, row, err := rowOf(ctx, st, snap, 2)
		if err != nil {
			return err
		}
		removes, adds, err := deltawriter.DeleteRows(ctx, st, []deltawriter.RowDeletes{{Add: add, Rows: []uint64{row}}}, time.Now())
		if err != nil {
			return err
		}
		v, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Removes: removes, Adds: adds, Operation: "DELETE", ReadsData: true})
		winnerVersion.Store(v)
		return err
	}
	m := h.startHooked("keyed", cfg, nil, func(hk *hooks) { hk.beforeCommit = onCommit(t, 2, &calls, winner) })
	h.waitHandled(3, 30*time.Second, m)
	h.send(keyedRec{id: 1, v: "b", op: "u"})
	h.waitHandled(4, 30*time.Second, m)
	m.stop(t)

	if got, want := h.rows(), map[int64]string{1: "b", 3: "c"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v (the winner's delete of 2 and our update of 1)", got, want)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d commit attempts, want 3 (the first flush, the one that lost, its rebuild)", n)
	}
	if v := winnerVersion.Load(); v != 1 {
		t.Fatalf("the winner committed version %d, want 1", v)
	}
	if n := testutil.ToFloat64(h.metrics.CommitConflicts.WithLabelValues("orders")); n != 1 {
		t.Fatalf("ingestd_delta_commit_conflicts_total = %v, want 1", n)
	}
	if n := testutil.ToFloat64(h.metrics.KeyedRowsMarked.WithLabelValues("orders")); n != 1 {
		t.Fatalf("ingestd_keyed_rows_marked_deleted_total = %v, want 1 (the row of key 1, marked once by the commit that landed)", n)
	}
	snap := h.snapshot()
	if snap.Version != 2 || snap.Files.Len() != 2 {
		t.Fatalf("table version %d with %d files, want version 2 with the first file and the rebuilt flush's", snap.Version, snap.Files.Len())
	}
	var marked int64
	for _, add := range snap.Files.All() {
		if add.DeletionVector != nil {
			marked += add.DeletionVector.Cardinality
		}
	}
	if marked != 2 {
		t.Fatalf("%d rows marked deleted in the table, want 2 (key 2 by the winner, key 1's old row by us)", marked)
	}
}

// winnerRow is a row of testKeyedRow as another writer writes it in its own data file.
type winnerRow struct {
	ID  int64   `parquet:"id"`
	V   *string `parquet:"v,optional"`
	Seq int64   `parquet:"seq"`
	Op  string  `parquet:"op"`
}

// appendWinner commits, as another writer (Spark's INSERT or a MERGE that did not find
// the row), a new data file holding rows, with dataChange true.
func (h *keyedHarness) appendWinner(ctx context.Context, name string, rows ...winnerRow) (int64, error) {
	_, tbl, snap, err := h.otherTable(ctx)
	if err != nil {
		return -1, err
	}
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rows); err != nil {
		return -1, err
	}
	if err := os.WriteFile(filepath.Join(h.tableDir, name), buf.Bytes(), 0o644); err != nil {
		return -1, err
	}
	lo, hi := rows[0].ID, rows[0].ID
	for _, r := range rows {
		lo, hi = min(lo, r.ID), max(hi, r.ID)
	}
	stats := fmt.Sprintf(`{"numRecords":%d,"minValues":{"id":%d},"maxValues":{"id":%d},"nullCount":{"id":0}}`, len(rows), lo, hi)
	add := deltalog.Add{Path: name, PartitionValues: map[string]*string{}, Size: int64(buf.Len()),
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: stats}
	return tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Adds: []deltalog.Add{add}, Operation: "WRITE"})
}

// A winner that appended a row of a key our flush upserts makes our commit
// ErrConcurrentAppend (ConflictOnDataChange). The rebuilt flush finds both live rows of
// the key (ours from before and the winner's) and marks both: one live row per key, ours.
// Without the conflict our commit would mark only the row it had looked up, and the
// winner's row of key 1 would stay live beside ours.
func TestKeyedConflictWinnerAppendedOurKey(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(false)
	h.send(keyedRec{id: 1, v: "a", op: "c"}, keyedRec{id: 2, v: "b", op: "c"})
	var calls atomic.Int32
	w := "w"
	winner := func(ctx context.Context) error {
		_, err := h.appendWinner(ctx, "part-00000-winner.snappy.parquet", winnerRow{ID: 1, V: &w, Seq: 0, Op: "c"})
		return err
	}
	m := h.startHooked("keyed", cfg, nil, func(hk *hooks) { hk.beforeCommit = onCommit(t, 2, &calls, winner) })
	h.waitHandled(2, 30*time.Second, m)
	h.send(keyedRec{id: 1, v: "c", op: "u"})
	h.waitHandled(3, 30*time.Second, m)
	m.stop(t)

	if got, want := h.rows(), map[int64]string{1: "c", 2: "b"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v", got, want)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d commit attempts, want 3 (the first flush, the one that lost, its rebuild)", n)
	}
	if n := testutil.ToFloat64(h.metrics.CommitConflicts.WithLabelValues("orders")); n != 1 {
		t.Fatalf("ingestd_delta_commit_conflicts_total = %v, want 1", n)
	}
	if n := testutil.ToFloat64(h.metrics.KeyedRowsMarked.WithLabelValues("orders")); n != 2 {
		t.Fatalf("ingestd_keyed_rows_marked_deleted_total = %v, want 2 (key 1's first row and the winner's)", n)
	}
	snap := h.snapshot()
	if snap.Version != 2 {
		t.Fatalf("table version %d, want 2 (ours, the winner's, our rebuilt flush)", snap.Version)
	}
	for _, add := range snap.Files.All() {
		if add.Path == "part-00000-winner.snappy.parquet" && (add.DeletionVector == nil || add.DeletionVector.Cardinality != 1) {
			t.Fatalf("the winner's file has deletion vector %+v, want one deleting its row", add.DeletionVector)
		}
	}
}

// With table.sequence_by the rebuilt flush decides again against the winner's row: a
// winner that wrote key 1 with a newer sequence than our change makes ours stale, and the
// winner's row is left alone.
func TestKeyedConflictWinnerNewerSequenceMakesOursStale(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(true)
	h.send(keyedRec{id: 1, v: "a", seq: 1, op: "c"}, keyedRec{id: 2, v: "b", seq: 1, op: "c"})
	var calls atomic.Int32
	w := "w"
	winner := func(ctx context.Context) error {
		// The winner's MERGE updated key 1 to sequence 9: it marks the old row and appends its own.
		st, tbl, snap, err := h.otherTable(ctx)
		if err != nil {
			return err
		}
		add, row, err := rowOf(ctx, st, snap, 1)
		if err != nil {
			return err
		}
		removes, adds, err := deltawriter.DeleteRows(ctx, st, []deltawriter.RowDeletes{{Add: add, Rows: []uint64{row}}}, time.Now())
		if err != nil {
			return err
		}
		if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Removes: removes, Adds: adds, Operation: "DELETE", ReadsData: true}); err != nil {
			return err
		}
		_, err = h.appendWinner(ctx, "part-00000-winner.snappy.parquet", winnerRow{ID: 1, V: &w, Seq: 9, Op: "u"})
		return err
	}
	m := h.startHooked("keyed", cfg, nil, func(hk *hooks) { hk.beforeCommit = onCommit(t, 2, &calls, winner) })
	h.waitHandled(2, 30*time.Second, m)
	h.send(keyedRec{id: 1, v: "late", seq: 5, op: "u"}, keyedRec{id: 2, v: "b1", seq: 2, op: "u"}, keyedRec{id: 2, v: "b2", seq: 3, op: "u"})
	h.waitHandled(5, 30*time.Second, m)
	m.stop(t)

	if got, want := h.rows(), map[int64]string{1: "w", 2: "b2"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v (our seq 5 of key 1 is older than the winner's 9)", got, want)
	}
	if n := testutil.ToFloat64(h.metrics.CommitConflicts.WithLabelValues("orders")); n != 1 {
		t.Fatalf("ingestd_delta_commit_conflicts_total = %v, want 1", n)
	}
	if n := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "stale")); n != 1 {
		t.Fatalf("ingestd_keyed_changes_total{outcome=stale} = %v, want 1 (key 1 after the rebuild)", n)
	}
	if n := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "superseded")); n != 1 {
		t.Fatalf("ingestd_keyed_changes_total{outcome=superseded} = %v, want 1 (key 2's seq 2, counted once although the flush was decided twice)", n)
	}
}

// Two upsert pipelines ordered by a sequence write one table from two topics, each with
// its own key index. B's index learns A's delete of key 1 when it refreshes on A's commit
// (the row A marked is a remembered delete, as a restarted B would read it), so B's older
// change of key 1 is stale: the delete holds. Both pipelines' other keys are written.
func TestKeyedTwoPipelinesOneTableRememberEachOthersDeletes(t *testing.T) {
	h := newKeyedHarness(t, 1)
	adm := kadm.NewClient(h.producer)
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "rows-b"); err != nil {
		t.Fatal(err)
	}
	cfgA := h.keyedConfig(true)
	cfgB := h.keyedConfig(true)
	cfgB.Name, cfgB.AppID, cfgB.Kafka.Topics, cfgB.Kafka.Group = "rows-b", "rows-b", []string{"rows-b"}, "ingestd-rows-b"
	b := h.startWith("b", cfgB, nil)
	// Two flushes of B: the first creates the table, the second builds B's index on it.
	h.sendTo("rows-b", keyedRec{id: 1, v: "b1", seq: 10, op: "c"})
	h.waitHandled(1, 30*time.Second, b)
	h.sendTo("rows-b", keyedRec{id: 20, v: "b20", seq: 11, op: "c"})
	h.waitHandled(2, 30*time.Second, b)
	a := h.startWith("a", cfgA, nil)
	h.send(keyedRec{id: 1, seq: 50, op: "d"}, keyedRec{id: 10, v: "a10", seq: 51, op: "c"})
	h.waitHandled(4, 30*time.Second, a, b)
	if got, want := h.rows(), map[int64]string{10: "a10", 20: "b20"}; !maps.Equal(got, want) {
		t.Fatalf("after A's delete of 1: table rows %v, want %v", got, want)
	}
	h.sendTo("rows-b", keyedRec{id: 1, v: "late", seq: 40, op: "u"}, keyedRec{id: 21, v: "b21", seq: 41, op: "c"})
	h.waitHandled(6, 30*time.Second, a, b)
	a.stop(t)
	b.stop(t)
	if got, want := h.rows(), map[int64]string{10: "a10", 20: "b20", 21: "b21"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v (B's seq 40 of key 1 is older than A's delete at 50)", got, want)
	}
	if n := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("rows-b", "stale")); n != 1 {
		t.Fatalf("B's ingestd_keyed_changes_total{outcome=stale} = %v, want 1", n)
	}
}
