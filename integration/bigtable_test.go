package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/maintenance"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// bigFiles is the live files of the generated table: a checkpoint of this size spans
// two row groups of the streaming writer.
const bigFiles = 100_000

// TestBigTableReadBack generates a partitioned table of 100,000 live files with the
// benchmark's generator (cmd/benchbig: 1-row files, a checkpoint, a tail of commits,
// 2,000 tombstones of which 1,000 expired (the checkpoint keeps the 1,000 others), 100 orphans), writes a checkpoint of its
// latest version with ingestd (streamed, two row groups), VACUUMs it, and reads it back:
// ingestd's snapshot from that checkpoint; delta-rs' file list (every file present on
// disk) and one partition read in full; Spark's row count and the same partition
// scanned. Counts and sums are exact; a live file deleted by VACUUM, or a checkpoint
// row lost or misread, fails one of them.
func TestBigTableReadBack(t *testing.T) {
	t.Parallel()
	began := time.Now()
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while the table is generated
	ctx := context.Background()
	table := filepath.Join(t.TempDir(), "big")
	gen := exec.Command("go", "run", "./cmd/benchbig", "gen", "-dir", table, "-files", fmt.Sprint(bigFiles), "-partitions", "500")
	gen.Dir = repoRoot
	gen.Stderr = os.Stderr
	out, err := gen.Output()
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	var lay struct {
		Live, Expired, Retained, Orphans int
	}
	if err := json.Unmarshal(out, &struct {
		Live     *int `json:"liveFiles"`
		Expired  *int `json:"tombstonesExpired"`
		Retained *int `json:"tombstonesRetained"`
		Orphans  *int `json:"orphans"`
	}{&lay.Live, &lay.Expired, &lay.Retained, &lay.Orphans}); err != nil {
		t.Fatalf("generate: %v: %s", err, out)
	}
	if lay.Live != bigFiles || lay.Expired != 1000 || lay.Retained != 1000 || lay.Orphans != 100 {
		t.Fatalf("generated %+v", lay)
	}
	t.Logf("%s: generated", time.Since(began).Round(time.Second))

	st, err := storage.NewLocal(table)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tbl.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := maintenance.Vacuum(ctx, tbl, maintenance.VacuumOptions{Retain: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != lay.Expired+lay.Orphans || len(res.Files) != lay.Expired+lay.Orphans {
		t.Fatalf("VACUUM deleted %d of %d files, want %d", res.Deleted, len(res.Files), lay.Expired+lay.Orphans)
	}
	// A fresh load reads the checkpoint just written (plus the two VACUUM commits).
	again, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := again.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Files.Len() != bigFiles || snap.Version != v+2 || len(snap.Tombstones()) != lay.Retained {
		t.Fatalf("reloaded: version %d (checkpoint %d), %d files, %d tombstones", snap.Version, v, snap.Files.Len(), len(snap.Tombstones()))
	}
	t.Logf("%s: checkpoint %d written, VACUUM deleted %d", time.Since(began).Round(time.Second), v, res.Deleted)

	// One partition: the generator spreads files over 500 dates round-robin.
	var part string
	var inPart int64
	for _, a := range snap.Files.All() {
		if part == "" {
			part = *a.PartitionValues["date"]
		}
		if *a.PartitionValues["date"] == part {
			inPart++
		}
	}

	// delta-rs: the snapshot from ingestd's checkpoint, every live file present after the
	// VACUUM, and one partition's files read in full.
	rs := exec.Command(python, "-c", `
import json, os, sys
import pyarrow.compute as pc
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
uris = dt.file_uris()
missing = sum(1 for u in uris if not os.path.exists(u.removeprefix("file://")))
t = dt.to_pyarrow_table(partitions=[("date", "=", sys.argv[2])], columns=["id"])
print(json.dumps({"version": dt.version(), "files": len(uris), "missing": missing, "rows": t.num_rows, "sum": pc.sum(t["id"]).as_py()}))
sys.stdout.flush()
os._exit(0)
`, table, part)
	rs.Stderr = os.Stderr
	out, err = rs.Output()
	if err != nil {
		t.Fatalf("delta-rs: %v", err)
	}
	var got struct{ Version, Files, Missing, Rows, Sum int64 }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("delta-rs: %v: %s", err, out)
	}
	if got.Version != snap.Version || got.Files != bigFiles || got.Missing != 0 || got.Rows != inPart || got.Sum != 7*inPart {
		t.Fatalf("delta-rs reads %+v; want version %d, %d files, none missing, %d rows of sum %d in %s", got, snap.Version, bigFiles, inPart, 7*inPart, part)
	}
	t.Logf("%s: delta-rs read the table", time.Since(began).Round(time.Second))

	// Spark: the row count from the checkpoint's stats (Delta answers count(*) from
	// numRecords), and one partition's files scanned.
	var total, rows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("SELECT count(*) AS n FROM delta.`%s`", table)}, &total)
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("SELECT count(*) AS p, sum(id) AS s FROM delta.`%s` WHERE date = '%s'", table, part)}, &rows)
	if len(total) != 1 || fmt.Sprint(total[0]["n"]) != fmt.Sprint(bigFiles) || len(rows) != 1 ||
		fmt.Sprint(rows[0]["p"]) != fmt.Sprint(inPart) || fmt.Sprint(rows[0]["s"]) != fmt.Sprint(7*inPart) {
		t.Fatalf("Spark: %v %v; want n=%d, p=%d, s=%d", total, rows, bigFiles, inPart, 7*inPart)
	}
	t.Logf("%s: Spark read the table", time.Since(began).Round(time.Second))
}
