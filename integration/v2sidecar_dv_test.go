package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestV2SidecarDeletionVectors: a table with deletion vectors and the v2Checkpoint
// feature, partitioned by p ("a" and "b c"), 6 files of 5 rows; ingestd deletes rows of
// two of them (deletion vectors), checkpoints with 3 file actions per sidecar (6 adds
// and 2 tombstones: 3 sidecars), then deletes more rows (merged with a vector in the
// checkpoint), appends, and checkpoints again. Spark and delta-rs read exactly the
// remaining rows after each step.
func TestV2SidecarDeletionVectors(t *testing.T) {
	t.Parallel() // waits on Spark; own temp dir
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "v2dv")
	createDVTable(t, root, true)
	tbl, err := deltawriter.Open(ctx, mustStore(t, root), deltawriter.WithV2SidecarFiles(3))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proto := deltawriter.UpgradeProtocol(snap.Protocol, deltalog.FeatureV2Checkpoint)
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Protocol: &proto, Operation: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
	var files []deltalog.Add
	want := map[string][]int64{}
	for i := range 6 {
		p := []string{"a", "b c"}[i%2]
		ids := rowIDs(int64(10*i), int64(10*i+5))
		files = append(files, dvAppend(t, tbl, p, ids))
		want[p] = append(want[p], ids...)
	}
	_, adds := commitDeletes(t, tbl, []deltawriter.RowDeletes{
		{Add: files[0], Rows: []uint64{0, 4}},
		{Add: files[1], Rows: []uint64{2}},
	}, false)
	want["a"] = dropIDs(want["a"], 0, 4)
	want["b c"] = dropIDs(want["b c"], 12)
	cp := func(wantSidecars int) {
		t.Helper()
		v, err := tbl.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		top, _ := filepath.Glob(filepath.Join(root, "_delta_log", fmt.Sprintf("%020d.checkpoint.*.json", v)))
		if len(top) == 0 {
			t.Fatalf("no top-level checkpoint at %d", v)
		}
		// Version 10 also gets the table's automatic checkpoint (delta.checkpointInterval 10).
		for _, p := range top {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(data), `{"sidecar":`); n != wantSidecars || strings.Contains(string(data), `{"add":`) {
				t.Fatalf("checkpoint %d: %d sidecar actions, want %d, and no add inline:\n%s", v, n, wantSidecars, data)
			}
		}
	}
	cp(3)
	checkIDs(t, spark, python, root, want, "V2 checkpoint with deletion vectors")

	var dv0 deltalog.Add
	for _, a := range adds {
		if a.Path == files[0].Path {
			dv0 = a
		}
	}
	commitDeletes(t, tbl, []deltawriter.RowDeletes{{Add: dv0, Rows: []uint64{1}}, {Add: files[2], Rows: []uint64{0}}}, false)
	want["a"] = dropIDs(want["a"], 1, 20)
	dvAppend(t, tbl, "b c", []int64{100, 101})
	want["b c"] = append(want["b c"], 100, 101)
	checkIDs(t, spark, python, root, want, "commits after the V2 checkpoint")
	cp(4) // 7 adds, 4 tombstones
	checkIDs(t, spark, python, root, want, "second V2 checkpoint")
}
