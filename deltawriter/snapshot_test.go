package deltawriter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

func newStore(t *testing.T) *storage.Local {
	t.Helper()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func writeCommits(t *testing.T, st storage.Store, commits ...string) {
	t.Helper()
	for v, c := range commits {
		if err := st.Put(context.Background(), commitPath(int64(v)), []byte(strings.TrimSpace(c)+"\n")); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	testProtocol = `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}`
	testMeta1    = `{"metaData":{"id":"11111111-1111-4111-8111-111111111111","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"a\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{},"createdTime":1}}`
	testMeta2    = `{"metaData":{"id":"11111111-1111-4111-8111-111111111111","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"a\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}},{\"name\":\"b\",\"type\":\"string\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{"delta.appendOnly":"true"},"createdTime":1}}`
)

func add(path string) string {
	return fmt.Sprintf(`{"add":{"path":%q,"partitionValues":{},"size":10,"modificationTime":5,"dataChange":true}}`, path)
}
func remove(path string) string {
	return fmt.Sprintf(`{"remove":{"path":%q,"deletionTimestamp":7,"dataChange":true}}`, path)
}
func txn(app string, v int64) string { return fmt.Sprintf(`{"txn":{"appId":%q,"version":%d}}`, app, v) }

func TestSnapshotReconstruction(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	writeCommits(t, st,
		strings.Join([]string{`{"commitInfo":{"timestamp":1,"operation":"CREATE TABLE"}}`, testProtocol, testMeta1, add("f1"), add("f2"), txn("app-0", 10)}, "\n"),
		strings.Join([]string{txn("app-0", 12), txn("app-1", 3), add("f3"), remove("f1")}, "\n"),
		strings.Join([]string{testMeta2, add("f1"), remove("f2"), txn("app-0", 11)}, "\n"), // txn: last wins, even lower
		strings.Join([]string{`{"futureAction":{"x":1}}`, add("f4")}, "\n"),
	)
	tbl, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 3 {
		t.Errorf("Version = %d, want 3", s.Version)
	}
	if got := fmt.Sprint(s.Txns); got != "map[app-0:11 app-1:3]" {
		t.Errorf("Txns = %s", got)
	}
	var files []string
	for p := range s.Files.All() {
		files = append(files, p)
	}
	if got := strings.Join(sorted(files), ","); got != "f1,f3,f4" {
		t.Errorf("Files = %s, want f1,f3,f4", got)
	}
	if s.Schema.String() != "struct<a:long,b:string>" || s.Metadata.Configuration["delta.appendOnly"] != "true" {
		t.Errorf("metadata not replaced: %s %v", s.Schema, s.Metadata.Configuration)
	}
	if _, ok := s.tombstones.get("f2"); !ok {
		t.Errorf("f2 tombstone missing")
	}
	if _, ok := s.tombstones.get("f1"); ok {
		t.Errorf("f1 re-added but still a tombstone")
	}

	// Incremental advance sees a new commit.
	writeCommits(t, st, "", "", "", "", add("f5"))
	s2, err := tbl.Snapshot(ctx)
	if err != nil || s2.Version != 4 || s2.Files.Len() != 4 || s.Files.Len() != 3 {
		t.Fatalf("advance: version %d files %d (old snapshot %d files), %v", s2.Version, s2.Files.Len(), s.Files.Len(), err)
	}
}

func sorted(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

func TestSnapshotErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("not found", func(t *testing.T) {
		tbl, err := Open(ctx, newStore(t))
		if err != nil {
			t.Fatal(err)
		}
		s, err := tbl.Snapshot(ctx)
		if !errors.Is(err, ErrTableNotFound) || s == nil || s.Version != -1 {
			t.Fatalf("Snapshot = %+v, %v; want Version -1 and ErrTableNotFound", s, err)
		}
	})
	t.Run("gap", func(t *testing.T) {
		st := newStore(t)
		writeCommits(t, st, testProtocol+"\n"+testMeta1, add("a"), add("b"))
		_ = os.Remove(filepath.Join(st.Root(), commitPath(1)))
		if _, err := Open(ctx, st); err == nil || !strings.Contains(err.Error(), "commit 1 is missing") {
			t.Fatalf("Open with a gap: %v", err)
		}
	})
	t.Run("no metadata", func(t *testing.T) {
		st := newStore(t)
		writeCommits(t, st, testProtocol+"\n"+add("a"))
		if _, err := Open(ctx, st); err == nil || !strings.Contains(err.Error(), "no metaData") {
			t.Fatalf("Open without metaData: %v", err)
		}
	})
	t.Run("unknown reader feature", func(t *testing.T) {
		st := newStore(t)
		writeCommits(t, st, `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["someFutureFeature"],"writerFeatures":["someFutureFeature"]}}`+"\n"+testMeta1)
		_, err := Open(ctx, st)
		if !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), `"someFutureFeature"`) {
			t.Fatalf("Open: %v", err)
		}
	})
}

// copyTable copies a test table so tests can delete parts of its log.
func copyTable(t *testing.T, name string) *storage.Local {
	t.Helper()
	src := filepath.Join(kernelTestdata(t), "data", name)
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("delta-kernel-rs test table %s: %v", name, err)
	}
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := storage.NewLocal(dst)
	return st
}

func TestKernelTables(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		table   string
		drop    []int64 // commits to delete first (forces the checkpoint path)
		version int64
		schema  string
		files   int
		txns    string
	}{
		{table: "table-without-dv-small", version: 0, schema: "struct<value:long>", files: 1, txns: "map[]"},
		{table: "basic_partitioned", version: 1, schema: "struct<letter:string,number:long,a_float:double>", files: 6, txns: "map[]"},
		{table: "app-txn-no-checkpoint", version: 1, schema: "struct<id:string,value:integer,modified:string>", files: 4, txns: "map[my-app:3 my-app2:2]"},
		{table: "app-txn-checkpoint", version: 1, schema: "struct<id:string,value:integer,modified:string>", files: 4, txns: "map[my-app:3 my-app2:2]"},
		// delta-rs checkpoint (map groups named "entries"), JSON commits removed:
		{table: "app-txn-checkpoint", drop: []int64{0, 1}, version: 1, schema: "struct<id:string,value:integer,modified:string>", files: 4, txns: "map[my-app:3 my-app2:2]"},
		// delta.setTransactionRetentionDuration = 1 day: every txn with a lastUpdated is
		// long expired today; new_app_0 has none and never expires.
		{table: "app-txn-with-last-updated", version: 3, schema: "struct<a:long,b:long>", files: 4, txns: "map[new_app_0:1]"},
		{table: "with_checkpoint_no_last_checkpoint", version: 3, schema: "struct<letter:string,int:long,date:date>", files: 1, txns: "map[]"},
		// Spark checkpoint at 2 found by listing (no _last_checkpoint), commits 0-2 removed:
		{table: "with_checkpoint_no_last_checkpoint", drop: []int64{0, 1, 2}, version: 3, schema: "struct<letter:string,int:long,date:date>", files: 1, txns: "map[]"},
	} {
		t.Run(fmt.Sprintf("%s-drop%v", tc.table, tc.drop), func(t *testing.T) {
			st := copyTable(t, tc.table)
			for _, v := range tc.drop {
				if err := os.Remove(filepath.Join(st.Root(), commitPath(v))); err != nil {
					t.Fatal(err)
				}
			}
			tbl, err := Open(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			s, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if s.Version != tc.version || s.Schema.String() != tc.schema || s.Files.Len() != tc.files || fmt.Sprint(s.Txns) != tc.txns {
				t.Fatalf("got version %d schema %s files %d txns %v; want %d %s %d %s",
					s.Version, s.Schema, s.Files.Len(), s.Txns, tc.version, tc.schema, tc.files, tc.txns)
			}
			for p, a := range s.Files.All() {
				if a.Size <= 0 || a.Path != p {
					t.Errorf("file %s: %+v", p, a)
				}
			}
			if err := s.CheckWritable(); err != nil {
				t.Errorf("CheckWritable: %v", err)
			}
		})
	}
}

func removeFile(st *storage.Local, p string) error {
	return os.Remove(filepath.Join(st.Root(), filepath.FromSlash(p)))
}

// listRecorder is a local store that records its listings: (dir, after) pairs, after ""
// for a full List.
type listRecorder struct {
	*storage.Local
	calls []string
}

func (r *listRecorder) List(ctx context.Context, dir string) ([]storage.FileInfo, error) {
	r.calls = append(r.calls, dir+" (full)")
	return r.Local.List(ctx, dir)
}

func (r *listRecorder) ListFrom(ctx context.Context, dir, after string) ([]storage.FileInfo, error) {
	r.calls = append(r.calls, dir+" after "+after)
	return storage.ListFrom(ctx, r.Local, dir, after)
}

// A full load lists _delta_log from the version _last_checkpoint names, not its whole
// history; without a readable checkpoint there it lists everything.
func TestLoadListsFromLastCheckpoint(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, _ := Open(ctx, st)
	createTable(t, tbl, map[string]string{deltalog.PropCheckpointInterval: "3"})
	for i := 1; i <= 7; i++ {
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(i - 1), Adds: []deltalog.Add{fakeAdd(fmt.Sprintf("f%d", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	rec := &listRecorder{Local: st}
	s, err := loadSnapshot(ctx, rec, time.Now())
	if err != nil || s.Version != 7 || s.Files.Len() != 7 {
		t.Fatalf("load: version %d, %d files, %v; want 7, 7", s.Version, s.Files.Len(), err)
	}
	if got, want := fmt.Sprint(rec.calls), "[_delta_log after 00000000000000000006]"; got != want {
		t.Fatalf("listings %s, want %s", got, want)
	}
	// The checkpoint _last_checkpoint names is gone: the whole log is listed, and the
	// older checkpoint (3) is used.
	if err := removeFile(st, checkpointPath(6)); err != nil {
		t.Fatal(err)
	}
	rec.calls = nil
	s, err = loadSnapshot(ctx, rec, time.Now())
	if err != nil || s.Version != 7 || s.Files.Len() != 7 {
		t.Fatalf("load without checkpoint 6: version %d, %d files, %v", s.Version, s.Files.Len(), err)
	}
	if got, want := fmt.Sprint(rec.calls), "[_delta_log after 00000000000000000006 _delta_log after ]"; got != want {
		t.Fatalf("listings %s, want %s", got, want)
	}
}

// A _last_checkpoint that names a checkpoint that is gone is recovered from (the whole
// log listed, the older checkpoint used, every file there) with one warning naming the
// table, the version and why, and one WithStaleLastCheckpoint call per full load; a
// table whose named checkpoint is there loads without either.
func TestStaleLastCheckpointWarnsAndCounts(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, _ := Open(ctx, st)
	createTable(t, tbl, map[string]string{deltalog.PropCheckpointInterval: "3"})
	for i := 1; i <= 7; i++ {
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(i - 1), Adds: []deltalog.Add{fakeAdd(fmt.Sprintf("f%d", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	open := func() (*bytes.Buffer, *[]int64, *Snapshot) {
		var logs bytes.Buffer
		var named []int64
		tb, err := Open(ctx, st, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithStaleLastCheckpoint(func(v int64) { named = append(named, v) }))
		if err != nil {
			t.Fatal(err)
		}
		s, err := tb.Snapshot(ctx)
		if err != nil || s.Version != 7 || s.Files.Len() != 7 {
			t.Fatalf("load: %v, %v", s, err)
		}
		return &logs, &named, s
	}
	logs, named, _ := open()
	if logs.Len() != 0 || len(*named) != 0 {
		t.Fatalf("a sound table: warnings %q, stale calls %v", logs, *named)
	}
	if err := removeFile(st, checkpointPath(6)); err != nil {
		t.Fatal(err)
	}
	logs, named, _ = open()
	if fmt.Sprint(*named) != "[6]" {
		t.Errorf("stale calls %v, want [6]", *named)
	}
	want := `level=WARN msg="_delta_log/_last_checkpoint names a checkpoint that is missing or unreadable; recovering by listing the whole log" table=` +
		st.URI() + ` last_checkpoint_version=6 err="no checkpoint of version 6 in _delta_log"`
	if got := strings.TrimSpace(logs.String()); !strings.Contains(got, want) || strings.Count(got, "\n") != 0 {
		t.Errorf("log %q, want one line containing %q", got, want)
	}
}

// TestSnapshotTombstonesCopiedOnWrite: a snapshot handed out keeps its tombstones while
// later commits add and supersede tombstones in the table's next snapshots, which share
// the map until they change it.
func TestSnapshotTombstonesCopiedOnWrite(t *testing.T) {
	ctx := context.Background()
	tbl, _ := Open(ctx, newStore(t))
	createTable(t, tbl, nil)
	commit := func(c Commit) *Snapshot { t.Helper(); return commitLatest(t, tbl, c) }
	rm := func(p string) deltalog.Remove {
		ts := int64(5)
		return deltalog.Remove{Path: p, DeletionTimestamp: &ts, DataChange: true}
	}
	keys := func(s *Snapshot) []string { return slices.Sorted(maps.Keys(s.Tombstones())) }
	commit(Commit{Adds: []deltalog.Add{fakeAdd("a"), fakeAdd("b")}})
	s2 := commit(Commit{Removes: []deltalog.Remove{rm("a")}})
	s3 := commit(Commit{Adds: []deltalog.Add{fakeAdd("c")}}) // no tombstone changes: shares s2's
	s4 := commit(Commit{Removes: []deltalog.Remove{rm("b")}})
	s5 := commit(Commit{Adds: []deltalog.Add{fakeAdd("a")}}) // a is live again: no longer a tombstone
	for _, c := range []struct {
		s    *Snapshot
		want []string
	}{{s2, []string{"a"}}, {s3, []string{"a"}}, {s4, []string{"a", "b"}}, {s5, []string{"b"}}} {
		if got := keys(c.s); !slices.Equal(got, c.want) {
			t.Errorf("version %d tombstones %v, want %v", c.s.Version, got, c.want)
		}
	}
	if got := s5.Files.Len(); got != 2 {
		t.Errorf("version 5: %d live files, want 2 (c, a)", got)
	}
}

// TestSnapshotTombstonesSharedUnderCheckpoints: with background checkpoints every two
// versions (the checkpoint goroutine reads the tombstones of the snapshot it writes) and
// a reader taking snapshots meanwhile, commits that remove and re-add files leave every
// snapshot handed out with the tombstones of its version. Run with -race: a write to a
// map another snapshot shares shows as a race with the checkpoint or the reader.
func TestSnapshotTombstonesSharedUnderCheckpoints(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, _ := Open(ctx, st, WithBackgroundCheckpoints())
	defer tbl.Close(ctx)
	createTable(t, tbl, map[string]string{deltalog.PropCheckpointInterval: "2"})
	ts := time.Now().UnixMilli() // within the retention: checkpoints keep them
	rm := func(p string) deltalog.Remove {
		return deltalog.Remove{Path: p, DeletionTimestamp: &ts, DataChange: true}
	}

	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			_ = s.Tombstones()
		}
	}()

	want := map[int64][]string{}
	held := map[int64]*Snapshot{}
	tomb := map[string]bool{}
	for v := int64(1); v <= 40; v++ {
		var c Commit
		f := fmt.Sprintf("f%d", v%7) // paths come back: a re-added path stops being a tombstone
		switch v % 3 {
		case 0: // no tombstone change
			c.Adds = []deltalog.Add{fakeAdd(fmt.Sprintf("g%d", v))}
		case 1:
			c.Adds = []deltalog.Add{fakeAdd(f)}
			delete(tomb, f)
		case 2:
			c.Removes = []deltalog.Remove{rm(f)}
			tomb[f] = true
		}
		c.ReadVersion = v - 1
		if _, err := tbl.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
		want[v] = slices.Sorted(maps.Keys(tomb))
		if v%2 == 1 || v%5 == 0 {
			s, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held[s.Version] = s
		}
	}
	close(stop)
	<-readerDone
	tbl.WaitCheckpoints()
	for v, s := range held {
		if got := slices.Sorted(maps.Keys(s.Tombstones())); !slices.Equal(got, want[v]) {
			t.Errorf("snapshot %d tombstones %v, want %v", v, got, want[v])
		}
	}
	if len(held) != 24 {
		t.Errorf("%d snapshots held, want 24", len(held))
	}
}

// TestSnapshotExpiresTombstonesAtCheckpoints: when a checkpoint falls due, the table's
// cached snapshot drops the tombstones past delta.deletedFileRetentionDuration, as the
// checkpoint does, and keeps the others; a snapshot handed out before keeps all of its
// tombstones, and a fresh load from the checkpoint holds the same ones.
func TestSnapshotExpiresTombstonesAtCheckpoints(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	tbl, _ := Open(ctx, st, WithClock(func() time.Time { return now }))
	createTable(t, tbl, map[string]string{deltalog.PropCheckpointInterval: "5", deltalog.PropDeletedFileRetention: "interval 1 day"})
	at := func(age time.Duration) *int64 { ms := now.Add(-age).UnixMilli(); return &ms }
	commit := func(c Commit) { t.Helper(); commitLatest(t, tbl, c) }
	for _, p := range []string{"old", "recent", "undated", "edge"} {
		commit(Commit{Adds: []deltalog.Add{fakeAdd(p)}})
	}
	commit(Commit{Removes: []deltalog.Remove{
		{Path: "old", DeletionTimestamp: at(25 * time.Hour), DataChange: true},
		{Path: "recent", DeletionTimestamp: at(time.Hour), DataChange: true},
		{Path: "undated", DataChange: true},
		{Path: "edge", DeletionTimestamp: at(24 * time.Hour), DataChange: true},
	}}) // version 5: a checkpoint
	before, err := tbl.Snapshot(ctx)
	if err != nil || before.Version != 5 {
		t.Fatalf("snapshot after the checkpoint's commit: version %d, %v", before.Version, err)
	}
	want := []string{"edge", "recent", "undated"} // "edge" is exactly at the cutoff: kept, as the checkpoint keeps it
	if got := slices.Sorted(maps.Keys(before.Tombstones())); !slices.Equal(got, want) {
		t.Errorf("cached snapshot's tombstones %v, want %v", got, want)
	}
	loaded, err := Open(ctx, st, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := loaded.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(fresh.Tombstones())); !slices.Equal(got, want) {
		t.Errorf("tombstones loaded from the checkpoint %v, want %v", got, want)
	}
	// A snapshot handed out before the checkpoint's commit keeps what it had.
	now = now.Add(2 * time.Hour) // "recent" and "edge" are now 3 and 26 hours old
	held, _ := tbl.Snapshot(ctx)
	commit(Commit{Adds: []deltalog.Add{fakeAdd("a6")}})
	for v := 7; v <= 10; v++ {
		commit(Commit{Adds: []deltalog.Add{fakeAdd(fmt.Sprintf("a%d", v))}})
	} // version 10: a checkpoint
	after, _ := tbl.Snapshot(ctx)
	if got := slices.Sorted(maps.Keys(after.Tombstones())); !slices.Equal(got, []string{"recent", "undated"}) {
		t.Errorf("tombstones at version %d: %v, want [recent undated]", after.Version, got)
	}
	if got := slices.Sorted(maps.Keys(held.Tombstones())); !slices.Equal(got, want) {
		t.Errorf("the snapshot held from version %d changed: tombstones %v, want %v", held.Version, got, want)
	}
}

// commitLatest commits c on tbl's latest snapshot and returns the snapshot after it.
func commitLatest(t *testing.T, tbl *Table, c Commit) *Snapshot {
	t.Helper()
	ctx := context.Background()
	s, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.ReadVersion = s.Version
	if _, err := tbl.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	if s, err = tbl.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
