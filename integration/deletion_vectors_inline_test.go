package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// inlineDVFiles is more data files with a deletion vector in one scan than delta-rs
// (1.x) has blocking threads (512) to load vectors stored in files with.
const inlineDVFiles = 700

// TestDeletionVectorsInlineManyFiles: 700 data files of 3 rows each, then one DELETE
// commit of DeleteRows deleting the middle row of each: every vector (one row, 34 bytes)
// is stored inline, no deletion vector file is written, and delta-rs (QueryBuilder) and
// Spark both count and sum exactly the remaining rows. With those vectors in files
// instead, delta-rs's scan stalls on its exhausted blocking thread pool, hence the
// timeout on its read.
func TestDeletionVectorsInlineManyFiles(t *testing.T) {
	t.Parallel() // own temp dir; waits on Spark
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "dvinline")
	tbl := createDVTable(t, root, true)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := snap.DataFileSchema()
	if err != nil {
		t.Fatal(err)
	}
	p := "a"
	adds := make([]deltalog.Add, inlineDVFiles)
	for i := range adds {
		adds[i] = dvWriteFile(t, tbl, snap, pq, p, rowIDs(int64(3*i), int64(3*i+3)))
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Adds: adds, Operation: "WRITE", EngineInfo: "ingestd/test"}); err != nil {
		t.Fatal(err)
	}
	dels := make([]deltawriter.RowDeletes, len(adds))
	for i, a := range adds {
		dels[i] = deltawriter.RowDeletes{Add: a, Rows: []uint64{1}}
	}
	_, newAdds := commitDeletes(t, tbl, dels, false)
	if len(newAdds) != inlineDVFiles {
		t.Fatalf("%d adds with a deletion vector, want %d", len(newAdds), inlineDVFiles)
	}
	for _, a := range newAdds {
		if dv := a.DeletionVector; dv.StorageType != "i" || dv.Offset != nil || dv.SizeInBytes != 34 || dv.Cardinality != 1 {
			t.Fatalf("descriptor %s, want inline, 34 bytes, 1 row", jsonString(dv))
		}
	}
	if m, _ := filepath.Glob(filepath.Join(root, "deletion_vector_*.bin")); len(m) != 0 {
		t.Fatalf("deletion vector files written: %v", m)
	}

	// Ids 0..2099; id 3i+1 deleted in file i.
	wantN, wantSum := 2*inlineDVFiles, 0
	for id := range 3 * inlineDVFiles {
		if id%3 != 1 {
			wantSum += id
		}
	}
	want := fmt.Sprintf("%d %d", wantN, wantSum)

	rctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(rctx, python, "-c", `
import sys
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
r = pa.table(QueryBuilder().register("t", DeltaTable(sys.argv[1])).execute("SELECT count(*) AS n, sum(id) AS s FROM t").read_all()).to_pylist()[0]
print(r["n"], r["s"])
`, root)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if rctx.Err() != nil {
		t.Fatalf("delta-rs did not finish count(*) within 45 s (a scan stalled loading deletion vectors): %s", stderr.String())
	}
	if err != nil {
		t.Fatalf("delta-rs count: %v\n%s", err, stderr.String())
	}
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("delta-rs: count and sum %s, want %s", got, want)
	}

	var rows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT count(*) AS n, sum(id) AS s FROM delta.`" + root + "`"}, &rows)
	if len(rows) != 1 || fmt.Sprint(rows[0]["n"], " ", rows[0]["s"]) != want {
		t.Errorf("Spark: %v, want n s = %s", rows, want)
	}
}
