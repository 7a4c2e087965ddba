package maintenance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// logTable makes a table of versions 0..12 (one add each from 1) with classic checkpoints
// at 5 and 10, written by deltawriter, and .crc files at 3 and 11; commits up to oldTo
// (and their .crc) are 40 days old, the rest new.
func logTable(t *testing.T, conf string, oldTo int64) (string, *deltawriter.Table) {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	st, _ := storage.NewLocal(root)
	schema, _ := jsonString(schemaJSON)
	writeLog(t, st, `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"t1","format":{"provider":"parquet","options":{}},"schemaString":`+schema+`,"partitionColumns":[],"configuration":{"delta.checkpointInterval":"5"`+conf+`},"createdTime":1}}`)
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 12; v++ {
		got, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: v - 1, Adds: []deltalog.Add{{Path: fmt.Sprintf("f%d.parquet", v), Size: 1, ModificationTime: 1, DataChange: true}}})
		if err != nil || got != v {
			t.Fatalf("commit %d: %d, %v", v, got, err)
		}
	}
	for _, v := range []int{3, 11} {
		if err := st.Put(ctx, fmt.Sprintf("_delta_log/%020d.crc", v), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-40 * 24 * time.Hour)
	ents, _ := os.ReadDir(filepath.Join(root, "_delta_log"))
	for _, e := range ents {
		f, ok := parseLogName(e.Name())
		if ok && f.version <= oldTo {
			if err := os.Chtimes(filepath.Join(root, "_delta_log", e.Name()), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root, tbl
}

func logNames(t *testing.T, root string) []string {
	return dirNames(t, filepath.Join(root, "_delta_log"))
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestCleanupLog(t *testing.T) {
	ctx := context.Background()
	root, tbl := logTable(t, "", 7)
	res, err := CleanupLog(ctx, tbl, LogCleanupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for v := 0; v <= 4; v++ {
		want = append(want, fmt.Sprintf("_delta_log/%020d.json", v))
		if v == 3 {
			want = append(want, fmt.Sprintf("_delta_log/%020d.crc", v))
		}
	}
	slices.Sort(want)
	slices.Sort(res.Deleted)
	if res.Checkpoint != 5 || !slices.Equal(res.Deleted, want) || res.Retention != DefaultLogRetention {
		t.Fatalf("cleanup: checkpoint %d, retention %s, deleted %v; want 5, 720h, %v", res.Checkpoint, res.Retention, res.Deleted, want)
	}
	// Commits 5..7 are expired too, but 8 is not: checkpoint 10 is not reachable from an
	// expired prefix, so checkpoint 5 stays the start, and every version from 5 on reads.
	names := logNames(t, root)
	for _, n := range []string{"00000000000000000005.checkpoint.parquet", "00000000000000000005.json", "00000000000000000010.checkpoint.parquet", "_last_checkpoint", "00000000000000000011.crc"} {
		if !slices.Contains(names, n) {
			t.Errorf("%s was deleted; log now %v", n, names)
		}
	}
	fresh, err := deltawriter.Open(ctx, tbl.Store())
	if err != nil {
		t.Fatal(err)
	}
	s, err := fresh.Snapshot(ctx)
	if err != nil || s.Version != 12 || s.Files.Len() != 12 {
		t.Fatalf("snapshot after cleanup: version %d, %d files, %v", s.Version, s.Files.Len(), err)
	}
	// A second run finds nothing more to do.
	if res, err := CleanupLog(ctx, fresh, LogCleanupOptions{}); err != nil || len(res.Deleted) != 0 {
		t.Fatalf("second cleanup: %v, %v", res.Deleted, err)
	}
}

func TestCleanupLogUpToNewestExpiredCheckpoint(t *testing.T) {
	_, tbl := logTable(t, "", 10)
	res, err := CleanupLog(context.Background(), tbl, LogCleanupOptions{})
	if err != nil || res.Checkpoint != 10 || len(res.Deleted) != 10+1+1 { // 0..9 json, 3.crc, 5.checkpoint
		t.Fatalf("cleanup: checkpoint %d, deleted %v, %v", res.Checkpoint, res.Deleted, err)
	}
}

func TestCleanupLogKeeps(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf string
		o    LogCleanupOptions
	}{
		{"replay hold longer than the files' age", "", LogCleanupOptions{MinRetention: 41 * 24 * time.Hour}},
		{"replay hold forever", "", LogCleanupOptions{MinRetention: -1}},
		{"delta.enableExpiredLogCleanup=false", `,"delta.enableExpiredLogCleanup":"false"`, LogCleanupOptions{}},
		{"delta.logRetentionDuration longer", `,"delta.logRetentionDuration":"interval 6 weeks"`, LogCleanupOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, tbl := logTable(t, tc.conf, 10)
			before := logNames(t, root)
			res, err := CleanupLog(context.Background(), tbl, tc.o)
			if err != nil || len(res.Deleted) != 0 || !slices.Equal(logNames(t, root), before) {
				t.Fatalf("cleanup deleted %v (%v)", res.Deleted, err)
			}
		})
	}
}
