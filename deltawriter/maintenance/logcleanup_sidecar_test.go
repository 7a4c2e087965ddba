package maintenance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// failTopStore is a local store whose PutIfAbsent of a V2 top-level checkpoint file fails
// while fail is set: a writer that dies after its sidecars, before its checkpoint.
type failTopStore struct {
	*storage.Local
	fail bool
}

var errCrash = errors.New("writer crashed")

func (f *failTopStore) PutIfAbsent(ctx context.Context, p string, data []byte) error {
	if f.fail && strings.Contains(p, ".checkpoint.") {
		return errCrash
	}
	return f.Local.PutIfAbsent(ctx, p, data)
}

// sidecarPaths lists _delta_log/_sidecars of root as paths relative to the table root.
func sidecarPaths(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, n := range dirNames(t, filepath.Join(root, "_delta_log", "_sidecars")) {
		out = append(out, "_delta_log/_sidecars/"+n)
	}
	return out
}

// v2SidecarTable writes on st the log of a v2Checkpoint table of five files (checkpoint
// interval 1000: only explicit checkpoints) and opens it with 2 file actions per sidecar;
// commit(v) commits version v, adding the file f<v>.parquet.
func v2SidecarTable(t *testing.T, st storage.Store) (tbl *deltawriter.Table, commit func(v int64)) {
	t.Helper()
	ctx := context.Background()
	schema, _ := jsonString(schemaJSON)
	adds := ""
	for i := range 5 {
		adds += fmt.Sprintf("\n"+`{"add":{"path":"f0-%d.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}`, i)
	}
	writeLog(t, st, `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["v2Checkpoint"],"writerFeatures":["v2Checkpoint"]}}
{"metaData":{"id":"t1","format":{"provider":"parquet","options":{}},"schemaString":`+schema+`,"partitionColumns":[],"configuration":{"delta.checkpointInterval":"1000"},"createdTime":1}}`+adds)
	tbl, err := deltawriter.Open(ctx, st, deltawriter.WithV2SidecarFiles(2))
	if err != nil {
		t.Fatal(err)
	}
	return tbl, func(v int64) {
		t.Helper()
		got, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: v - 1, Adds: []deltalog.Add{{Path: fmt.Sprintf("f%d.parquet", v), Size: 1, ModificationTime: 1, DataChange: true}}})
		if err != nil || got != v {
			t.Fatalf("commit %d: %d, %v", v, got, err)
		}
	}
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// TestCleanupLogV2Sidecars: on a v2Checkpoint table with 2 file actions per sidecar, a
// checkpoint at 0 writes 3 sidecars (A); a writer that fails between its sidecars and
// its top-level file at version 1 leaves 3 unreferenced sidecars (B) and no checkpoint:
// the table still loads, from checkpoint 0 plus commit 1. Log cleanup keeps B while it
// is younger than the retention (now, and 29 days on) and deletes exactly B past it
// (31 days on), keeping A, which checkpoint 0 references. After a checkpoint at 2
// (sidecars C) and a commit 3, cleanup 31 days on deletes commits 0 and 1, checkpoint 0
// and its sidecars A, and keeps C; the table loads from checkpoint 2.
func TestCleanupLogV2Sidecars(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	local, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	st := &failTopStore{Local: local}
	tbl, commit := v2SidecarTable(t, st)
	if v, err := tbl.Checkpoint(ctx); err != nil || v != 0 {
		t.Fatalf("checkpoint: %d, %v", v, err)
	}
	sideA := sidecarPaths(t, root)
	if len(sideA) != 3 {
		t.Fatalf("checkpoint 0 wrote sidecars %v, want 3", sideA)
	}
	commit(1)
	st.fail = true
	if _, err := tbl.Checkpoint(ctx); !errors.Is(err, errCrash) {
		t.Fatalf("checkpoint with the top-level write failing: %v, want %v", err, errCrash)
	}
	st.fail = false
	sideB := minus(sidecarPaths(t, root), sideA)
	if len(sideB) != 3 {
		t.Fatalf("the failed checkpoint left sidecars %v, want 3", sideB)
	}
	load := func(wantV int64, wantFiles int) {
		t.Helper()
		fresh, err := deltawriter.Open(ctx, local)
		if err != nil {
			t.Fatal(err)
		}
		s, err := fresh.Snapshot(ctx)
		if err != nil || s.Version != wantV || s.Files.Len() != wantFiles {
			t.Fatalf("reopened: version %d, %d files, %v; want %d, %d", s.Version, s.Files.Len(), err, wantV, wantFiles)
		}
	}
	load(1, 6)
	lc, err := local.Get(ctx, "_delta_log/_last_checkpoint")
	if err != nil || !strings.HasPrefix(string(lc), `{"version":0,`) {
		t.Fatalf("_last_checkpoint %s (%v), want version 0", lc, err)
	}

	now := time.Now()
	for _, days := range []int{0, 29} {
		res, err := CleanupLog(ctx, tbl, LogCleanupOptions{Now: func() time.Time { return now.Add(time.Duration(days) * 24 * time.Hour) }})
		if err != nil || len(res.Deleted) != 0 {
			t.Fatalf("cleanup %d days on: deleted %v (%v), want nothing", days, res.Deleted, err)
		}
	}
	later := func() time.Time { return now.Add(31 * 24 * time.Hour) }
	res, err := CleanupLog(ctx, tbl, LogCleanupOptions{Now: later})
	if err != nil || !slices.Equal(res.Deleted, sideB) || res.Checkpoint != -1 {
		t.Fatalf("cleanup 31 days on: checkpoint %d, deleted %v (%v); want -1, %v", res.Checkpoint, res.Deleted, err, sideB)
	}
	if got := sidecarPaths(t, root); !slices.Equal(got, sideA) {
		t.Fatalf("sidecars after cleanup %v, want %v", got, sideA)
	}
	load(1, 6)

	commit(2)
	if v, err := tbl.Checkpoint(ctx); err != nil || v != 2 {
		t.Fatalf("checkpoint: %d, %v", v, err)
	}
	sideC := minus(sidecarPaths(t, root), sideA)
	if len(sideC) != 4 { // 7 files, 2 per sidecar
		t.Fatalf("checkpoint 2 wrote sidecars %v, want 4", sideC)
	}
	commit(3)
	var cp0 string
	for _, n := range logNames(t, root) {
		if strings.HasPrefix(n, "00000000000000000000.checkpoint.") {
			cp0 = "_delta_log/" + n
		}
	}
	res, err = CleanupLog(ctx, tbl, LogCleanupOptions{Now: later})
	want := append([]string{"_delta_log/00000000000000000000.json", cp0, "_delta_log/00000000000000000001.json"}, sideA...)
	slices.Sort(want)
	if err != nil || res.Checkpoint != 2 || !slices.Equal(res.Deleted, want) {
		t.Fatalf("cleanup after checkpoint 2: checkpoint %d, deleted %v (%v); want 2, %v", res.Checkpoint, res.Deleted, err, want)
	}
	if got := sidecarPaths(t, root); !slices.Equal(got, sideC) {
		t.Fatalf("sidecars after cleanup %v, want %v", got, sideC)
	}
	load(3, 8)
}

// TestCleanupLogKeepsAbsoluteSidecarPaths: a sidecar action may name its file by an
// absolute URI (PROTOCOL.md, "Sidecar File Information": sidecar files always reside in
// the table's own _delta_log/_sidecars, writers are only encouraged to store the bare
// name). Checkpoint 1, kept by log cleanup (commit 1 is within the retention), names its
// 40-day-old sidecars by their file:// URIs, as another writer may: cleanup deletes
// commit 0 and keeps those sidecars, which a reader of version 1 needs.
func TestCleanupLogKeepsAbsoluteSidecarPaths(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	st, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	tbl, commit := v2SidecarTable(t, st)
	commit(1)
	if v, err := tbl.Checkpoint(ctx); err != nil || v != 1 {
		t.Fatalf("checkpoint: %d, %v", v, err)
	}
	side1 := sidecarPaths(t, root)
	var cp1 string
	for _, n := range logNames(t, root) {
		if strings.HasPrefix(n, "00000000000000000001.checkpoint.") {
			cp1 = filepath.Join(root, "_delta_log", n)
		}
	}
	data, err := os.ReadFile(cp1)
	if err != nil {
		t.Fatal(err)
	}
	abs := strings.ReplaceAll(string(data), `"sidecar":{"path":"`, `"sidecar":{"path":"`+st.URI()+`/_delta_log/_sidecars/`)
	if strings.Count(abs, st.URI()) != len(side1) || len(side1) != 3 {
		t.Fatalf("checkpoint 1 with absolute sidecar paths:\n%s\nwant 3 of them", abs)
	}
	if err := os.WriteFile(cp1, []byte(abs), 0o644); err != nil {
		t.Fatal(err)
	}
	commit(2)
	if v, err := tbl.Checkpoint(ctx); err != nil || v != 2 {
		t.Fatalf("checkpoint: %d, %v", v, err)
	}
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, p := range append([]string{"_delta_log/00000000000000000000.json"}, side1...) {
		if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(p)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	res, err := CleanupLog(ctx, tbl, LogCleanupOptions{})
	if err != nil || res.Checkpoint != 1 || !slices.Equal(res.Deleted, []string{"_delta_log/00000000000000000000.json"}) {
		t.Fatalf("cleanup: checkpoint %d, deleted %v (%v); want 1, commit 0 only", res.Checkpoint, res.Deleted, err)
	}
	for _, p := range side1 {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Errorf("sidecar %s of kept checkpoint 1: %v", p, err)
		}
	}
}

// countStore is a local store counting the reads of checkpoint files (Stat, Get or
// GetRange of a "<v>.checkpoint.*" path: CheckpointSidecars makes one Stat per file on a
// store with ranged reads).
type countStore struct {
	*storage.Local
	stats int
}

func (c *countStore) Stat(ctx context.Context, p string) (storage.FileInfo, error) {
	if strings.Contains(p, ".checkpoint.") {
		c.stats++
	}
	return c.Local.Stat(ctx, p)
}

// TestCleanupLogSidecarRefsCached: with a SidecarRefs kept across runs, log cleanup reads
// each checkpoint file once: 4 checkpoints on the first run, none on the second, the one
// new checkpoint on the third. A checkpoint file replaced in place (another writer's
// checkpoint of the same version, naming other sidecars) is read again, so the sidecar
// it now names is kept. Every run deletes the same old unreferenced sidecar as a run
// without the cache would.
func TestCleanupLogSidecarRefsCached(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	local, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	st := &countStore{Local: local}
	tbl, commit := v2SidecarTable(t, st)
	checkpointAt := func(v int64) {
		t.Helper()
		if v > 0 {
			commit(v)
		}
		if got, err := tbl.Checkpoint(ctx); err != nil || got != v {
			t.Fatalf("checkpoint: %d, %v", got, err)
		}
	}
	for v := range int64(4) {
		checkpointAt(v)
	}
	// The checkpoints' sidecars are old (their checkpoints are kept: the commits are
	// young), so every run must know which checkpoint names them; plus an old sidecar no
	// checkpoint names (a writer that failed before its top-level file), and another one
	// that the replaced checkpoint will name.
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, p := range sidecarPaths(t, root) {
		if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(p)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"orphan.parquet", "adopted.parquet"} {
		p := filepath.Join(root, "_delta_log", "_sidecars", n)
		if err := os.WriteFile(p, []byte("PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	cache := NewSidecarRefs()
	run := func(wantReads int, wantDeleted []string) {
		t.Helper()
		if _, err := tbl.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		before := st.stats
		res, err := CleanupLog(ctx, tbl, LogCleanupOptions{Sidecars: cache})
		if err != nil || !slices.Equal(res.Deleted, wantDeleted) {
			t.Fatalf("cleanup deleted %v (%v), want %v", res.Deleted, err, wantDeleted)
		}
		if got := st.stats - before; got != wantReads {
			t.Errorf("cleanup read %d checkpoint files, want %d", got, wantReads)
		}
	}
	// The first run reads the 4 checkpoints and deletes both unnamed sidecars; the
	// second reads none.
	run(4, []string{"_delta_log/_sidecars/adopted.parquet", "_delta_log/_sidecars/orphan.parquet"})
	run(0, nil)
	checkpointAt(4)
	run(1, nil)

	// Checkpoint 4's file replaced in place: it now also names adopted.parquet.
	for _, n := range []string{"orphan.parquet", "adopted.parquet"} {
		p := filepath.Join(root, "_delta_log", "_sidecars", n)
		if err := os.WriteFile(p, []byte("PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	var cp4 string
	for _, n := range logNames(t, root) {
		if strings.HasPrefix(n, "00000000000000000004.checkpoint.") {
			cp4 = filepath.Join(root, "_delta_log", n)
		}
	}
	data, err := os.ReadFile(cp4)
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, []byte(`{"sidecar":{"path":"adopted.parquet","sizeInBytes":4,"modificationTime":1}}`+"\n")...)
	if err := os.WriteFile(cp4, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run(1, []string{"_delta_log/_sidecars/orphan.parquet"})
	if _, err := os.Stat(filepath.Join(root, "_delta_log", "_sidecars", "adopted.parquet")); err != nil {
		t.Errorf("adopted.parquet, named by the replaced checkpoint 4: %v", err)
	}
}
