package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/maintenance"
)

// bigFiles is the live files of the generated table: a checkpoint of this size spans
// two row groups of the streaming writer.
const bigFiles = 100_000

// optParts is the partitions OPTIMIZE compacts (about 200 files each).
const optParts = 15

// TestBigTableReadBack generates a partitioned table of 100,000 live files with the
// benchmark's generator (cmd/benchbig: 1-row files, a checkpoint, a tail of commits,
// 2,000 tombstones of which 1,000 expired (the checkpoint keeps the 1,000 others), 100
// orphans), compacts optParts of its 500 partitions with `ingestd table optimize --where`
// (about 3,000 files into one per partition), writes a checkpoint of the OPTIMIZE commit
// with ingestd (streamed, two row groups), VACUUMs it with the table's 7-day retention,
// and reads it back: ingestd's snapshot from that checkpoint (live files, tombstones); a
// dry-run VACUUM past the retention (the files OPTIMIZE removed, now deletable);
// delta-rs' file list (every file present on disk), its row total and a compacted and an
// untouched partition read in full; Spark's row count and the same two partitions
// scanned. Counts and sums are exact; a row OPTIMIZE loses or duplicates, a live file
// or one inside the retention deleted by VACUUM, or a checkpoint row lost or misread,
// fails one of them.
func TestBigTableReadBack(t *testing.T) {
	t.Parallel()
	began := time.Now()
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while the table is generated
	ctx := context.Background()
	table := filepath.Join(t.TempDir(), "big")
	lay := genBigTable(t, table, 500)
	t.Logf("%s: generated", time.Since(began).Round(time.Second))

	tbl := openTable(t, table)
	before, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Files (of one row each) per partition as generated, round-robin over 500 dates: the
	// first optParts dates are compacted, the last is left alone.
	perPart := map[string]int64{}
	for _, a := range before.Files.All() {
		perPart[*a.PartitionValues["date"]]++
	}
	dates := make([]string, 0, len(perPart))
	for d := range perPart {
		dates = append(dates, d)
	}
	sort.Strings(dates)
	if len(dates) != 500 {
		t.Fatalf("generated %d partitions, want 500", len(dates))
	}
	compacted, untouched := dates[0], dates[len(dates)-1]
	inRange := map[string]bool{}
	var optFiles int64
	for _, d := range dates[:optParts] {
		inRange[d] = true
		optFiles += perPart[d]
	}
	compactedPaths := map[string]bool{} // the files OPTIMIZE must remove
	for _, a := range before.Files.All() {
		if inRange[*a.PartitionValues["date"]] {
			compactedPaths[a.Path] = true
		}
	}
	if optFiles < 2000 || optFiles > 5000 {
		t.Fatalf("generated %d files in %s..%s, want 2,000 to 5,000", optFiles, dates[0], dates[optParts-1])
	}

	// OPTIMIZE through the CLI, as a user would, on optParts partitions: their 1-row files
	// (far under the 256 MiB target) become one file per partition.
	where := fmt.Sprintf("date >= '%s' AND date <= '%s'", dates[0], dates[optParts-1])
	optBegan := time.Now()
	opt := runOptimize(t, table, "--where", where, "--json")
	if opt.err != nil {
		t.Fatalf("ingestd table optimize --where %q: %v", where, opt.err)
	}
	var optRes maintenance.OptimizeResult
	if err := json.Unmarshal([]byte(opt.out), &optRes); err != nil {
		t.Fatalf("optimize --json: %v: %s", err, opt.out)
	}
	if optRes.ReadVersion != before.Version || optRes.Version != before.Version+1 || len(optRes.Partitions) != optParts || len(optRes.Dropped) != 0 ||
		optRes.FilesRemoved != int(optFiles) || optRes.FilesAdded != optParts || optRes.RowsWritten != optFiles {
		t.Fatalf("OPTIMIZE read %d, committed %d: %d partitions (%d dropped), %d files removed, %d added, %d rows written; want %d, %d: %d, 0, %d, %d, %d",
			optRes.ReadVersion, optRes.Version, len(optRes.Partitions), len(optRes.Dropped), optRes.FilesRemoved, optRes.FilesAdded, optRes.RowsWritten,
			before.Version, before.Version+1, optParts, optFiles, optParts, optFiles)
	}
	t.Logf("%s: OPTIMIZE compacted %d files of %d partitions into %d in %s (RSS %d MiB)", time.Since(began).Round(time.Second),
		optRes.FilesRemoved, optParts, optRes.FilesAdded, time.Since(optBegan).Round(100*time.Millisecond), opt.maxRSS/1024)
	live := int64(bigFiles) - optFiles + optParts

	// ingestd's checkpoint of the OPTIMIZE commit (its removes become tombstones), then
	// VACUUM with the table's retention (7 days): it deletes the expired tombstones and
	// the orphans, and none of the files OPTIMIZE removed a moment ago.
	v, res := checkpointAndVacuum(t, tbl, optRes.Version, lay, compactedPaths)
	for p := range compactedPaths {
		if _, err := os.Stat(filepath.Join(table, filepath.FromSlash(p))); err != nil {
			t.Fatalf("file removed by OPTIMIZE inside the retention: %v", err)
		}
	}
	// A fresh load reads the checkpoint just written (plus the two VACUUM commits).
	again := openTable(t, table)
	snap, err := again.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int64(snap.Files.Len()) != live || snap.Version != v+2 || len(snap.Tombstones()) != lay.Retained+int(optFiles) {
		t.Fatalf("reloaded: version %d (checkpoint %d), %d files, %d tombstones; want %d, %d files, %d tombstones",
			snap.Version, v, snap.Files.Len(), len(snap.Tombstones()), v+2, live, lay.Retained+int(optFiles))
	}
	for _, a := range snap.Files.All() {
		if compactedPaths[a.Path] {
			t.Fatalf("%s is live after OPTIMIZE removed it", a.Path)
		}
	}
	t.Logf("%s: checkpoint %d written, VACUUM deleted %d (%d expired tombstones, %d orphans), kept the %d files OPTIMIZE removed; %d live files, %d tombstones",
		time.Since(began).Round(time.Second), v, res.Deleted, lay.Expired, lay.Orphans, optFiles, live, len(snap.Tombstones()))

	// Past the retention (a dry run 7 days and 2 hours on), VACUUM would delete exactly the
	// files OPTIMIZE removed and the generator's retained tombstones (removed an hour
	// before the generation).
	later := time.Now().Add(7*24*time.Hour + 2*time.Hour)
	dry, err := maintenance.Vacuum(ctx, again, maintenance.VacuumOptions{Retain: -1, DryRun: true, Now: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	var dryCompacted int
	for _, f := range dry.Files {
		if compactedPaths[f.Path] {
			dryCompacted++
		}
	}
	if len(dry.Files) != lay.Retained+int(optFiles) || dryCompacted != int(optFiles) {
		t.Fatalf("VACUUM past the retention would delete %d files, %d of them removed by OPTIMIZE; want %d, %d", len(dry.Files), dryCompacted, lay.Retained+int(optFiles), optFiles)
	}
	t.Logf("VACUUM dry run at %s would delete %d files: the %d OPTIMIZE removed and %d retained tombstones", later.Format(time.RFC3339), len(dry.Files), dryCompacted, lay.Retained)

	// delta-rs: the snapshot from ingestd's checkpoint, every live file present after the
	// VACUUM, the total rows from the files' stats, and a compacted and an untouched
	// partition read in full.
	rs := exec.Command(python, "-c", `
import json, os, sys
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
uris = dt.file_uris()
missing = sum(1 for u in uris if not os.path.exists(u.removeprefix("file://")))
total = pc.sum(pa.table(dt.get_add_actions()).column("num_records")).as_py()
parts = []
for d in sys.argv[2:]:
    # Pruned during log replay: a filter on the dataset would set up all the fragments.
    t = dt.to_pyarrow_dataset(file_pruning_predicate=[("date", "=", d)]).to_table(columns=["id"])
    parts.append({"files": len(dt.file_uris(file_pruning_predicate=[("date", "=", d)])), "rows": t.num_rows, "sum": pc.sum(t["id"]).as_py()})
print(json.dumps({"version": dt.version(), "files": len(uris), "missing": missing, "total": total, "parts": parts}))
sys.stdout.flush()
os._exit(0)
`, table, compacted, untouched)
	rs.Stderr = os.Stderr
	out, err := rs.Output()
	if err != nil {
		t.Fatalf("delta-rs: %v", err)
	}
	type part struct{ Files, Rows, Sum int64 }
	var got struct {
		Version, Files, Missing, Total int64
		Parts                          []part
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("delta-rs: %v: %s", err, out)
	}
	// Every generated row has id 7.
	pc, pu := perPart[compacted], perPart[untouched]
	wantParts := []part{{1, pc, 7 * pc}, {pu, pu, 7 * pu}}
	if got.Version != snap.Version || got.Files != live || got.Missing != 0 || got.Total != bigFiles || fmt.Sprint(got.Parts) != fmt.Sprint(wantParts) {
		// Errorf: Spark reads the table too, so that both readers report a defect.
		t.Errorf("delta-rs reads %+v; want version %d, %d files, none missing, %d rows, %s and %s (files, rows, sum) %v",
			got, snap.Version, live, bigFiles, compacted, untouched, wantParts)
	}
	t.Logf("%s: delta-rs read the table: %+v", time.Since(began).Round(time.Second), got)

	// Spark: the row count from the checkpoint's stats (Delta answers count(*) from
	// numRecords), and the compacted and the untouched partition scanned.
	var total, rows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("SELECT count(*) AS n FROM delta.`%s`", table)}, &total)
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf(
		"SELECT date, count(*) AS p, sum(id) AS s FROM delta.`%s` WHERE date IN ('%s', '%s') GROUP BY date ORDER BY date", table, compacted, untouched)}, &rows)
	want := fmt.Sprintf("[map[n:%d]] [map[date:%s p:%d s:%d] map[date:%s p:%d s:%d]]", bigFiles, compacted, pc, 7*pc, untouched, pu, 7*pu)
	if g := fmt.Sprint(total, " ", rows); g != want {
		t.Fatalf("Spark: %s; want %s", g, want)
	}
	t.Logf("%s: Spark read the table: %s", time.Since(began).Round(time.Second), want)
}

// bigLayout is what cmd/benchbig gen reports of a generated table.
type bigLayout struct{ Live, Expired, Retained, Orphans int }

// genBigTable generates at dir a table of bigFiles live one-row files (id 7) in
// partitions partitions (0: unpartitioned) with the benchmark's generator, and checks
// its report: 1,000 expired tombstones, 1,000 retained, 100 orphans.
func genBigTable(t *testing.T, dir string, partitions int) bigLayout {
	t.Helper()
	gen := exec.Command("go", "run", "./cmd/benchbig", "gen", "-dir", dir, "-files", fmt.Sprint(bigFiles), "-partitions", fmt.Sprint(partitions))
	gen.Dir = repoRoot
	gen.Stderr = os.Stderr
	out, err := gen.Output()
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	var lay bigLayout
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
	return lay
}

// TestBigTableUnpartitionedReadBack is TestBigTableReadBack's table without partitions:
// `ingestd table optimize` compacts all of its 100,000 one-row files into one file, then
// ingestd checkpoints it (100,000 + 1,000 tombstones in the checkpoint) and VACUUMs it
// with the table's 7-day retention, and the table is read back by ingestd (one live
// file, the tombstones), delta-rs (every row, from the one file) and Spark (count and
// sum scanned). A row OPTIMIZE loses or duplicates, a checkpoint row lost, or a file
// inside the retention deleted fails it.
func TestBigTableUnpartitionedReadBack(t *testing.T) {
	t.Parallel()
	began := time.Now()
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	table := filepath.Join(t.TempDir(), "big")
	lay := genBigTable(t, table, 0)
	t.Logf("%s: generated", time.Since(began).Round(time.Second))
	tbl := openTable(t, table)
	before, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	removed := map[string]bool{}
	for _, a := range before.Files.All() {
		removed[a.Path] = true
	}

	opt := runOptimize(t, table, "--json")
	if opt.err != nil {
		t.Fatalf("ingestd table optimize: %v", opt.err)
	}
	var optRes maintenance.OptimizeResult
	if err := json.Unmarshal([]byte(opt.out), &optRes); err != nil {
		t.Fatalf("optimize --json: %v: %s", err, opt.out)
	}
	if optRes.ReadVersion != before.Version || optRes.Version != before.Version+1 || len(optRes.Partitions) != 1 ||
		optRes.FilesRemoved != bigFiles || optRes.FilesAdded != 1 || optRes.RowsWritten != bigFiles {
		t.Fatalf("OPTIMIZE read %d, committed %d: %d partitions, %d files removed, %d added, %d rows written; want %d, %d: 1, %d, 1, %d",
			optRes.ReadVersion, optRes.Version, len(optRes.Partitions), optRes.FilesRemoved, optRes.FilesAdded, optRes.RowsWritten,
			before.Version, before.Version+1, bigFiles, bigFiles)
	}
	t.Logf("%s: OPTIMIZE compacted %d files into %d in %s (RSS %d MiB)", time.Since(began).Round(time.Second),
		optRes.FilesRemoved, optRes.FilesAdded, opt.wall.Round(100*time.Millisecond), opt.maxRSS/1024)

	v, res := checkpointAndVacuum(t, tbl, optRes.Version, lay, removed)
	snap, err := openTable(t, table).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Files.Len() != 1 || snap.Version != v+2 || len(snap.Tombstones()) != lay.Retained+bigFiles {
		t.Fatalf("reloaded: version %d (checkpoint %d), %d files, %d tombstones; want %d, 1 file, %d tombstones",
			snap.Version, v, snap.Files.Len(), len(snap.Tombstones()), v+2, lay.Retained+bigFiles)
	}
	t.Logf("%s: checkpoint %d written, VACUUM deleted %d; 1 live file, %d tombstones", time.Since(began).Round(time.Second), v, res.Deleted, len(snap.Tombstones()))

	// delta-rs: the snapshot from ingestd's checkpoint, the row total from the stats, and
	// the whole table read.
	rs := exec.Command(python, "-c", `
import json, os, sys
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
uris = dt.file_uris()
missing = sum(1 for u in uris if not os.path.exists(u.removeprefix("file://")))
total = pc.sum(pa.table(dt.get_add_actions()).column("num_records")).as_py()
t = dt.to_pyarrow_table(columns=["id"])
print(json.dumps({"version": dt.version(), "files": len(uris), "missing": missing, "total": total, "rows": t.num_rows, "sum": pc.sum(t["id"]).as_py()}))
sys.stdout.flush()
os._exit(0)
`, table)
	rs.Stderr = os.Stderr
	out, err := rs.Output()
	if err != nil {
		t.Fatalf("delta-rs: %v", err)
	}
	var got struct{ Version, Files, Missing, Total, Rows, Sum int64 }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("delta-rs: %v: %s", err, out)
	}
	want := struct{ Version, Files, Missing, Total, Rows, Sum int64 }{snap.Version, 1, 0, bigFiles, bigFiles, 7 * bigFiles}
	if got != want {
		t.Errorf("delta-rs reads %+v; want %+v", got, want)
	}
	t.Logf("%s: delta-rs read the table: %+v", time.Since(began).Round(time.Second), got)

	var rows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("SELECT count(*) AS n, sum(id) AS s FROM delta.`%s`", table)}, &rows)
	if g, w := fmt.Sprint(rows), fmt.Sprintf("[map[n:%d s:%d]]", bigFiles, 7*bigFiles); g != w {
		t.Fatalf("Spark: %s; want %s", g, w)
	}
	t.Logf("%s: Spark read the table: %v", time.Since(began).Round(time.Second), rows)
}

// checkpointAndVacuum writes ingestd's checkpoint of the OPTIMIZE commit optVersion (its
// removes become tombstones), then VACUUMs with the table's retention (7 days), which
// must delete exactly the generator's expired tombstones and orphans and none of the
// files OPTIMIZE removed (removed: their paths) a moment ago. It returns the checkpoint's
// version and VACUUM's result.
func checkpointAndVacuum(t *testing.T, tbl *deltawriter.Table, optVersion int64, lay bigLayout, removed map[string]bool) (int64, maintenance.VacuumResult) {
	t.Helper()
	ctx := context.Background()
	v, err := tbl.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != optVersion {
		t.Fatalf("checkpoint at %d, want the OPTIMIZE commit %d", v, optVersion)
	}
	res, err := maintenance.Vacuum(ctx, tbl, maintenance.VacuumOptions{Retain: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != lay.Expired+lay.Orphans || len(res.Files) != lay.Expired+lay.Orphans {
		t.Fatalf("VACUUM deleted %d of %d files, want %d", res.Deleted, len(res.Files), lay.Expired+lay.Orphans)
	}
	for _, f := range res.Files {
		if removed[f.Path] {
			t.Fatalf("VACUUM deleted %s, removed by OPTIMIZE inside the retention", f.Path)
		}
	}
	return v, res
}
