package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// stepStore is a local store that counts the steps of the writes it sees (each Create,
// each Close of a created file, each PutIfAbsent, each Put) and fails step failAt (from
// 1; 0: never), as a writer killed at that point would stop.
type stepStore struct {
	*storage.Local
	steps  []string
	failAt int
}

func (s *stepStore) step(what string) error {
	s.steps = append(s.steps, what)
	if len(s.steps) == s.failAt {
		return errCrash
	}
	return nil
}

func (s *stepStore) Create(ctx context.Context, p string) (storage.Writer, error) {
	if err := s.step("create " + p); err != nil {
		return nil, err
	}
	w, err := s.Local.Create(ctx, p)
	if err != nil {
		return nil, err
	}
	return &stepWriter{Writer: w, s: s, p: p}, nil
}

func (s *stepStore) PutIfAbsent(ctx context.Context, p string, data []byte) error {
	if err := s.step("putIfAbsent " + p); err != nil {
		return err
	}
	return s.Local.PutIfAbsent(ctx, p, data)
}

func (s *stepStore) Put(ctx context.Context, p string, data []byte) error {
	if err := s.step("put " + p); err != nil {
		return err
	}
	return s.Local.Put(ctx, p, data)
}

type stepWriter struct {
	storage.Writer
	s *stepStore
	p string
}

func (w *stepWriter) Close() error {
	if err := w.s.step("close " + w.p); err != nil {
		_ = w.Writer.Abort()
		return err
	}
	return w.Writer.Close()
}

// TestV2CheckpointCrashAtEachStep: a V2 checkpoint of a 9-file table at 2 file actions
// per sidecar takes 5 sidecars (create, close each), the top-level file and
// _last_checkpoint. Failing at each of those 12 steps in turn (a fresh table each time):
// the table reopens at its version with its 9 files, the next checkpoint (after one more
// commit) succeeds and reopens with 10 files from it, and log cleanup 31 days on
// deletes only sidecars no checkpoint references, keeping every one the checkpoints left
// in _delta_log reference; the table still reopens with 10 files.
func TestV2CheckpointCrashAtEachStep(t *testing.T) {
	ctx := context.Background()
	schema, _ := jsonString(schemaJSON)
	setup := func(t *testing.T) (string, *stepStore, *deltawriter.Table) {
		root := t.TempDir()
		local, err := storage.NewLocal(root)
		if err != nil {
			t.Fatal(err)
		}
		st := &stepStore{Local: local}
		adds := ""
		for i := range 9 {
			adds += fmt.Sprintf("\n"+`{"add":{"path":"p=a%%2Fb%%20c/f0-%d.parquet","partitionValues":{"p":"a/b c"},"size":1,"modificationTime":1,"dataChange":true,"tags":{"k":"v"}}}`, i)
		}
		writeLog(t, local, `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["v2Checkpoint"],"writerFeatures":["v2Checkpoint"]}}
{"metaData":{"id":"t1","format":{"provider":"parquet","options":{}},"schemaString":`+schema+`,"partitionColumns":["p"],"configuration":{"delta.checkpointInterval":"1000"},"createdTime":1}}`+adds)
		tbl, err := deltawriter.Open(ctx, st, deltawriter.WithV2SidecarFiles(2))
		if err != nil {
			t.Fatal(err)
		}
		return root, st, tbl
	}
	load := func(t *testing.T, root string, wantV int64, wantFiles int) {
		t.Helper()
		local, err := storage.NewLocal(root)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := deltawriter.Open(ctx, local)
		if err != nil {
			t.Fatal(err)
		}
		s, err := fresh.Snapshot(ctx)
		if err != nil || s.Version != wantV || s.Files.Len() != wantFiles {
			t.Fatalf("reopened: %v; want version %d, %d files", err, wantV, wantFiles)
		}
		var a deltalog.Add
		for _, f := range s.Files.All() {
			if strings.HasSuffix(f.Path, "/f0-3.parquet") {
				a = f
			}
		}
		if a.Path != "p=a%2Fb%20c/f0-3.parquet" || a.PartitionValues["p"] == nil || *a.PartitionValues["p"] != "a/b c" || a.Tags["k"] != "v" {
			t.Fatalf("reopened: file f0-3 %+v", a)
		}
	}

	_, st, tbl := setup(t)
	if _, err := tbl.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	all := st.steps
	if len(all) != 12 {
		t.Fatalf("a checkpoint takes steps %v, want 12", all)
	}
	for k := 1; k <= len(all); k++ {
		t.Run(fmt.Sprintf("fail at %s", strings.SplitN(all[k-1], " ", 2)[0]+fmt.Sprint(k)), func(t *testing.T) {
			root, st, tbl := setup(t)
			st.failAt = k
			if _, err := tbl.Checkpoint(ctx); !errors.Is(err, errCrash) {
				t.Fatalf("checkpoint failing at step %d (%s): %v", k, all[k-1], err)
			}
			st.failAt = 0
			load(t, root, 0, 9)
			v, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 0, Adds: []deltalog.Add{{Path: "p=a%2Fb%20c/g.parquet", PartitionValues: map[string]*string{"p": ptr("a/b c")}, Size: 1, ModificationTime: 1, DataChange: true}}})
			if err != nil || v != 1 {
				t.Fatalf("commit: %d, %v", v, err)
			}
			if v, err := tbl.Checkpoint(ctx); err != nil || v != 1 {
				t.Fatalf("next checkpoint: %d, %v", v, err)
			}
			lc, err := st.Get(ctx, "_delta_log/_last_checkpoint")
			if err != nil || !strings.HasPrefix(string(lc), `{"version":1,`) {
				t.Fatalf("_last_checkpoint %s (%v), want version 1", lc, err)
			}
			load(t, root, 1, 10)
			if _, err := CleanupLog(ctx, tbl, LogCleanupOptions{Now: func() time.Time { return time.Now().Add(31 * 24 * time.Hour) }}); err != nil {
				t.Fatal(err)
			}
			used := map[string]bool{}
			for _, n := range logNames(t, root) {
				if !strings.Contains(n, ".checkpoint.") {
					continue
				}
				refs, err := deltawriter.CheckpointSidecars(ctx, st, n)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range refs {
					used["_delta_log/_sidecars/"+r] = true
				}
			}
			left := sidecarPaths(t, root)
			if len(used) != 5 || len(left) != 5 {
				t.Fatalf("after cleanup: sidecars %v, referenced %v; want the 5 of checkpoint 1", left, used)
			}
			for _, p := range left {
				if !used[p] {
					t.Errorf("unreferenced sidecar %s kept", p)
				}
			}
			load(t, root, 1, 10)
		})
	}
}
