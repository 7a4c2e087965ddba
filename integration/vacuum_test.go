package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// vacuumOut mirrors maintenance.VacuumResult's JSON.
type vacuumOut struct {
	DryRun bool `json:"dryRun"`
	Files  []struct {
		Path  string `json:"path"`
		Size  int64  `json:"size"`
		IsDir bool   `json:"isDir"`
	} `json:"files"`
	Bytes        int64 `json:"bytes"`
	Deleted      int   `json:"deleted"`
	StartVersion int64 `json:"startVersion"`
	EndVersion   int64 `json:"endVersion"`
}

func (v vacuumOut) paths() []string {
	var out []string
	for _, f := range v.Files {
		out = append(out, f.Path)
	}
	return out
}

func vacuumCLI(t *testing.T, uri string, args ...string) vacuumOut {
	t.Helper()
	out, err := runCLI(t, append([]string{"table", "vacuum", "--table", uri, "--json"}, args...)...)
	if err != nil {
		t.Fatalf("ingestd table vacuum %v: %v\n%s", args, err, out)
	}
	var v vacuumOut
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("vacuum output %q: %v", out, err)
	}
	return v
}

// tableFiles lists every non-hidden file under the table root (store-relative), with the
// store's listing, recursively.
func tableFiles(t *testing.T, st storage.Store) []string {
	t.Helper()
	var out []string
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := st.List(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name, "_") || strings.HasPrefix(e.Name, ".") {
				continue
			}
			p := e.Name
			if dir != "" {
				p = dir + "/" + e.Name
			}
			if e.IsDir {
				walk(p)
			} else {
				out = append(out, p)
			}
		}
	}
	walk("")
	sort.Strings(out)
	return out
}

// liveFiles are the decoded paths of the table's live add actions, sorted.
func liveFiles(t *testing.T, st storage.Store) ([]string, int64) {
	t.Helper()
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range snap.Files.All() {
		out = append(out, deltalog.CanonicalPath(a.Path))
	}
	sort.Strings(out)
	return out, snap.Version
}

func sortedRows(t *testing.T, rows []map[string]any) []string {
	t.Helper()
	var out []string
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	sort.Strings(out)
	return out
}

// crashLeftovers writes 300 orders into the table at uri through `ingestd run`, with a
// flush killed (kill -9) after its Parquet file was written and before its commit landed.
// On a local table the log directory is made immutable (chattr +i) while the daemon
// runs: snapshot reads and the data file upload succeed, the commit's link(2) fails, so
// the flush is stuck between upload and commit when it is killed; the directory is then
// made writable again and a restart finishes the job. On an object store (local false),
// where the log cannot be frozen, the leftover of such a crash is planted: a copy of a
// live data file under a new part name, uploaded through the store like a flush's. It
// returns the orders and the orphaned files (store-relative), at least one.
func crashLeftovers(t *testing.T, s stack, name, uri string, st storage.Store, local bool) ([]order, []string) {
	t.Helper()
	ctx := context.Background()
	topic := createTopic(t, s, name, 1)
	dlq := createTopic(t, s, name+".dlq", 1)
	cfgDir := filepath.Join(t.TempDir(), "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "bronze", pipelineYAMLAtBatch(name, s, topic, uri, "evolve", dlq, "{max_records: 50, max_bytes: 64MiB, max_age: 200ms}"))
	orders := produce(t, s, topic, 200, 0, 1)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "200 orders committed", func() bool { return handledAt(t, uri) == 200 })
	if local {
		live, _ := liveFiles(t, st)
		logDir := filepath.Join(strings.TrimPrefix(uri, "file://"), "_delta_log")
		chattr := func(flag string) {
			if out, err := exec.Command("chattr", flag, logDir).CombinedOutput(); err != nil {
				t.Fatalf("chattr %s %s: %v %s (the crash needs an immutable log directory)", flag, logDir, err, out)
			}
		}
		chattr("+i")
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", logDir).Run() })
		orders = append(orders, produce(t, s, topic, 100, 0, 201)...)
		waitFor(t, d, time.Minute, "a data file written for the blocked commit", func() bool {
			for _, f := range tableFiles(t, st) {
				if !slices.Contains(live, f) {
					return true
				}
			}
			return false
		})
		d.kill9(t)
		chattr("-i")
		d = startDaemon(t, cfgDir)
		waitFor(t, d, time.Minute, "300 orders committed after the crash", func() bool { return handledAt(t, uri) == 300 })
	} else {
		live, _ := liveFiles(t, st)
		b, err := st.Get(ctx, live[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutIfAbsent(ctx, "part-00000-0b0c3a2e-dead-4000-8000-00000000c0de-c000.snappy.parquet", b); err != nil {
			t.Fatal(err)
		}
		orders = append(orders, produce(t, s, topic, 100, 0, 201)...)
		waitFor(t, d, time.Minute, "300 orders committed", func() bool { return handledAt(t, uri) == 300 })
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	live, _ := liveFiles(t, st)
	var orphans []string
	for _, f := range tableFiles(t, st) {
		if !slices.Contains(live, f) {
			orphans = append(orphans, f)
		}
	}
	if len(orphans) == 0 {
		t.Fatal("no orphaned data file: the test did not exercise a crash between upload and commit")
	}
	t.Logf("leftovers of the crashed flush: %v", orphans)
	return orders, orphans
}

// checkVacuumed runs vacuum --retain 0s --force (dry run, then for real) and checks that
// exactly the orphans go and every live file stays.
func checkVacuumed(t *testing.T, uri string, st storage.Store, orphans []string) vacuumOut {
	t.Helper()
	live, _ := liveFiles(t, st)
	dry := vacuumCLI(t, uri, "--retain", "0s", "--force", "--dry-run")
	if !slices.Equal(dry.paths(), orphans) || !dry.DryRun {
		t.Fatalf("vacuum --dry-run lists %v, want the orphans %v", dry.paths(), orphans)
	}
	listed := slices.DeleteFunc(slices.Clone(orphans), func(p string) bool { return strings.HasPrefix(path.Base(p), ".tmp-") }) // listings hide temporary files
	if got := tableFiles(t, st); len(got) != len(live)+len(listed) {
		t.Fatalf("the dry run deleted files: %d left, want %d", len(got), len(live)+len(listed))
	}
	res := vacuumCLI(t, uri, "--retain", "0s", "--force")
	if !slices.Equal(res.paths(), orphans) || res.Deleted != len(orphans) {
		t.Fatalf("vacuum deleted %d: %v, want the orphans %v", res.Deleted, res.paths(), orphans)
	}
	if got := tableFiles(t, st); !slices.Equal(got, live) {
		t.Fatalf("after vacuum the table holds %v, want exactly the live files %v", got, live)
	}
	return res
}

// TestVacuumCrashLeftovers: a flush killed between its upload and its commit leaves an
// orphaned Parquet file; `ingestd table vacuum` lists (dry run) exactly what Spark's
// VACUUM … RETAIN 0 HOURS DRY RUN lists on a copy, then deletes it and no live file; Spark
// and delta-rs read the same rows before and after; the retention check refuses a short
// retention with the fix; a file Spark removed stays while inside the retention (time
// travel to before the removal still reads) and goes once past it.
func TestVacuumCrashLeftovers(t *testing.T) {
	began := time.Now()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while the table is written
	dir := t.TempDir()
	table := filepath.Join(dir, "bronze")
	st, err := storage.NewLocal(table)
	if err != nil {
		t.Fatal(err)
	}
	orders, orphans := crashLeftovers(t, s, "orders-vacuum", table, st, true)
	t.Logf("%s: crash leftovers written", time.Since(began).Round(time.Second))
	before := readTable(t, s, table)
	checkOrders(t, "bronze before vacuum", before, orders, false)
	var sparkBefore sparkRead
	spark.call(t, map[string]any{"op": "read", "path": table}, &sparkBefore)
	if len(sparkBefore.Rows) != len(orders) {
		t.Fatalf("Spark reads %d rows before vacuum, want %d", len(sparkBefore.Rows), len(orders))
	}

	t.Logf("%s: Spark read the table", time.Since(began).Round(time.Second))
	// Spark's dry run on a copy lists the same files.
	cp := filepath.Join(dir, "copy")
	if err := os.CopyFS(cp, os.DirFS(table)); err != nil {
		t.Fatal(err)
	}
	spark.call(t, map[string]any{"op": "sql", "query": "SET spark.databricks.delta.retentionDurationCheck.enabled = false"}, nil)
	var sparkDry []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("VACUUM delta.`%s` RETAIN 0 HOURS DRY RUN", cp)}, &sparkDry)
	var sparkPaths []string
	for _, r := range sparkDry {
		p, _ := r["path"].(string)
		rel := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(p, "file:"), "//"), cp+"/")
		sparkPaths = append(sparkPaths, rel)
	}
	sort.Strings(sparkPaths)
	if !slices.Equal(sparkPaths, orphans) {
		t.Fatalf("Spark's VACUUM DRY RUN lists %v (%v), ingestd's orphans are %v", sparkPaths, sparkDry, orphans)
	}

	// The retention check: exact message, exit 2, nothing deleted.
	out, err := runCLI(t, "table", "vacuum", "--table", table, "--retain", "1h")
	var ce *cliError
	wantErr := "ingestd table vacuum: vacuum file://" + table + ": --retain 1h0m0s is shorter than the table's delta.deletedFileRetentionDuration (168h0m0s, the default): files that readers of versions inside that window, or flushes in flight, still need could be deleted; use --retain 168h0m0s or longer, or add --force if no writer is running and no reader needs older versions: retention shorter than the table's delta.deletedFileRetentionDuration\n"
	if !errors.As(err, &ce) || ce.err.(*exec.ExitError).ExitCode() != 2 || ce.stderr != wantErr {
		t.Fatalf("vacuum --retain 1h: %v, output %q\n want exit 2 and %q", err, out, wantErr)
	}

	// A writer killed mid-write leaves its hidden temporary file, which no listing shows:
	// one two days old goes with the orphans (a younger one could be a write in flight).
	stale := ".tmp-2718281828"
	if err := os.WriteFile(filepath.Join(table, stale), []byte("half a Parquet file"), 0o644); err != nil {
		t.Fatal(err)
	}
	twoDays := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(filepath.Join(table, stale), twoDays, twoDays); err != nil {
		t.Fatal(err)
	}
	orphans = append([]string{stale}, orphans...)
	res := checkVacuumed(t, table, st, orphans)
	if _, err := os.Stat(filepath.Join(table, stale)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stale temporary file is still there after vacuum: %v", err)
	}
	// VACUUM START / END like Spark's on a local table.
	start, err := deltawriter.ReadCommit(context.Background(), st, res.StartVersion)
	if err != nil {
		t.Fatal(err)
	}
	ci := start.Actions[0].CommitInfo
	if ci["operation"] != "VACUUM START" || fmt.Sprint(ci["operationParameters"]) != "map[defaultRetentionMillis:604800000 retentionCheckEnabled:false specifiedRetentionMillis:0]" ||
		fmt.Sprint(ci["operationMetrics"]) != fmt.Sprintf("map[numFilesToDelete:%d sizeOfDataToDelete:%d]", len(orphans), res.Bytes) {
		t.Errorf("VACUUM START commit: %v", ci)
	}
	var hist []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("DESCRIBE HISTORY delta.`%s` LIMIT 2", table)}, &hist)
	var got []string
	for _, h := range hist {
		got = append(got, fmt.Sprintf("%v %v %v %v", h["version"], h["operation"], h["operationParameters"], h["operationMetrics"]))
	}
	want := []string{
		fmt.Sprintf("%d VACUUM END map[status:COMPLETED] map[numDeletedFiles:%d numVacuumedDirectories:1]", res.EndVersion, len(orphans)),
		fmt.Sprintf("%d VACUUM START map[defaultRetentionMillis:604800000 retentionCheckEnabled:false specifiedRetentionMillis:0] map[numFilesToDelete:%d sizeOfDataToDelete:%d]", res.StartVersion, len(orphans), res.Bytes),
	}
	if !slices.Equal(got, want) {
		t.Errorf("Spark's DESCRIBE HISTORY:\n got %q\nwant %q", got, want)
	}
	after := readTable(t, s, table)
	if !slices.Equal(sortedRows(t, after.Rows), sortedRows(t, before.Rows)) {
		t.Error("delta-rs reads other rows after vacuum")
	}
	var sparkAfter sparkRead
	spark.call(t, map[string]any{"op": "read", "path": table}, &sparkAfter)
	if !slices.Equal(sortedRows(t, sparkAfter.Rows), sortedRows(t, sparkBefore.Rows)) {
		t.Error("Spark reads other rows after vacuum")
	}

	t.Logf("%s: vacuumed, both readers read the same rows", time.Since(began).Round(time.Second))
	// Removed files: Spark deletes rows (its files are rewritten and removed); inside the
	// retention they stay and time travel reads them; past it they go.
	_, vBefore := liveFiles(t, st)
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("DELETE FROM delta.`%s` WHERE order_id <= 10", table)}, nil)
	del, err := deltawriter.ReadCommit(context.Background(), st, vBefore+1)
	if err != nil {
		t.Fatal(err)
	}
	var removed []string
	for _, a := range del.Actions {
		if a.Remove != nil {
			removed = append(removed, deltalog.CanonicalPath(a.Remove.Path))
		}
	}
	sort.Strings(removed)
	if len(removed) == 0 {
		t.Fatalf("Spark's DELETE removed no file: %v", del.Actions)
	}
	if got := vacuumCLI(t, table, "--dry-run"); len(got.Files) != 0 {
		t.Fatalf("vacuum inside the retention would delete %v", got.paths())
	}
	kept := vacuumCLI(t, table)
	if kept.Deleted != 0 {
		t.Fatalf("vacuum inside the retention deleted %v", kept.paths())
	}
	var tt []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("SELECT count(*) AS n FROM delta.`%s` VERSION AS OF %d", table, vBefore)}, &tt)
	if fmt.Sprint(tt) != "[map[n:300]]" {
		t.Fatalf("time travel to version %d after vacuum: %v, want 300 rows", vBefore, tt)
	}
	later := time.Now().Add(8 * 24 * time.Hour).UTC().Format(time.RFC3339)
	gone := vacuumCLI(t, table, "--now", later, "--force") // a later now needs --force, as a shorter --retain does
	if !slices.Equal(gone.paths(), removed) || gone.Deleted != len(removed) {
		t.Fatalf("vacuum 8 days later deleted %v, want the removed files %v", gone.paths(), removed)
	}
	if d := readTable(t, s, table); len(d.Rows) != 290 {
		t.Errorf("delta-rs reads %d rows after the DELETE and vacuum, want 290", len(d.Rows))
	}
	desc, err := runCLI(t, "table", "describe", "--table", table)
	if err != nil || !strings.Contains(desc, fmt.Sprintf("last VACUUM:       version %d at ", gone.EndVersion)) || !strings.Contains(desc, fmt.Sprintf("(VACUUM END COMPLETED, numDeletedFiles=%d)", len(removed))) {
		t.Errorf("table describe: %v\n%s", err, desc)
	}
}

// TestVacuumCrashLeftoversS3 is the crash-and-vacuum part on the S3 emulator: the
// orphaned file is found through S3's listing and LastModified, deleted, and no live
// file; delta-rs reads the same rows before and after; no VACUUM START/END commits (Spark
// does not log vacuums on s3).
func TestVacuumCrashLeftoversS3(t *testing.T) {
	s := need(t)
	o := needStore(t, "s3")
	uri := o.base + "/vacuum/orders"
	st := o.open(t, "vacuum/orders")
	orders, orphans := crashLeftovers(t, s, "orders-vacuum-s3", uri, st, false)
	before := readTableAt(t, s, o, uri)
	checkOrders(t, "s3 bronze before vacuum", before, orders, false)
	_, v := liveFiles(t, st)
	res := checkVacuumed(t, uri, st, orphans)
	if res.StartVersion != -1 || res.EndVersion != -1 {
		t.Errorf("vacuum on S3 committed VACUUM START/END at %d/%d; Spark does not log vacuums on s3", res.StartVersion, res.EndVersion)
	}
	if _, v2 := liveFiles(t, st); v2 != v {
		t.Errorf("vacuum on S3 moved the table from version %d to %d", v, v2)
	}
	after := readTableAt(t, s, o, uri)
	if !slices.Equal(sortedRows(t, after.Rows), sortedRows(t, before.Rows)) {
		t.Error("delta-rs reads other rows after vacuum on S3")
	}

	// OPTIMIZE on the same S3 table: one commit that
	// removes every live file and adds the compacted one, all dataChange false, no txn and
	// no metaData; delta-rs reads the same rows.
	live, _ := liveFiles(t, st)
	if len(live) < 2 {
		t.Fatalf("the S3 table has %d live files; the OPTIMIZE check needs at least 2", len(live))
	}
	r := runOptimize(t, "--table", uri, "--min-files", "2")
	if r.err != nil {
		t.Fatalf("ingestd table optimize on S3: %v", r.err)
	}
	c, err := deltawriter.ReadCommit(context.Background(), st, optimizeVersion(t, r.out))
	if err != nil {
		t.Fatal(err)
	}
	var removes, adds int
	for _, a := range c.Actions {
		switch {
		case a.Remove != nil:
			removes++
			if a.Remove.DataChange {
				t.Errorf("OPTIMIZE on S3: remove %s has dataChange true", a.Remove.Path)
			}
		case a.Add != nil:
			adds++
			if a.Add.DataChange {
				t.Errorf("OPTIMIZE on S3: add %s has dataChange true", a.Add.Path)
			}
		case a.Txn != nil || a.Metadata != nil:
			t.Errorf("OPTIMIZE on S3 committed a txn or metaData action: %+v", a)
		}
	}
	if removes != len(live) || adds != 1 {
		t.Errorf("OPTIMIZE on S3: %d removes and %d adds, want %d and 1", removes, adds, len(live))
	}
	optimized := readTableAt(t, s, o, uri)
	if !slices.Equal(sortedRows(t, optimized.Rows), sortedRows(t, before.Rows)) {
		t.Error("delta-rs reads other rows after OPTIMIZE on S3")
	}
}
