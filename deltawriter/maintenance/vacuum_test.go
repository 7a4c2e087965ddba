package maintenance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

const schemaJSON = `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},{"name":"p","type":"string","nullable":true,"metadata":{}},{"name":"_kafka_partition","type":"integer","nullable":true,"metadata":{}}]}`

// writeLog writes raw commit JSON files (one string per version).
func writeLog(t *testing.T, st storage.Store, commits ...string) {
	t.Helper()
	for v, c := range commits {
		if err := st.PutIfAbsent(context.Background(), fmt.Sprintf("_delta_log/%020d.json", v), []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
}

// touch creates a table file with the given age.
func touch(t *testing.T, root, rel string, age time.Duration) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	mt := time.Now().Add(-age)
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
}

func exists(root, rel string) bool {
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	return err == nil
}

// vacuumTable builds a partitioned table (p, _kafka_partition) with live files, removed
// files inside and past a 1-hour retention, deletion vectors, and leftovers: orphan files
// old and new, hidden files and an empty partition directory.
func vacuumTable(t *testing.T) (string, *deltawriter.Table) {
	t.Helper()
	root := t.TempDir()
	st, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.Add(-2 * time.Hour).UnixMilli()
	recent := now.Add(-10 * time.Minute).UnixMilli()
	schema, _ := jsonString(schemaJSON)
	writeLog(t, st,
		`{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors"]}}
{"metaData":{"id":"t1","format":{"provider":"parquet","options":{}},"schemaString":`+schema+`,"partitionColumns":["p","_kafka_partition"],"configuration":{"delta.deletedFileRetentionDuration":"interval 1 hours","delta.enableDeletionVectors":"true"},"createdTime":1}}`,
		`{"add":{"path":"p=a/_kafka_partition=0/live%20one.parquet","partitionValues":{"p":"a","_kafka_partition":"0"},"size":10,"modificationTime":1,"dataChange":true}}
{"add":{"path":"p=a/_kafka_partition=0/dv.parquet","partitionValues":{"p":"a","_kafka_partition":"0"},"size":10,"modificationTime":1,"dataChange":true,"deletionVector":{"storageType":"u","pathOrInlineDv":"ab^-aqEH.-t@S}K{vb[*k^","offset":1,"sizeInBytes":36,"cardinality":2}}}
{"add":{"path":"p=b/_kafka_partition=1/gone-old.parquet","partitionValues":{"p":"b","_kafka_partition":"1"},"size":10,"modificationTime":1,"dataChange":true}}
{"add":{"path":"p=b/_kafka_partition=1/gone-recent.parquet","partitionValues":{"p":"b","_kafka_partition":"1"},"size":10,"modificationTime":1,"dataChange":true}}`,
		fmt.Sprintf(`{"remove":{"path":"p=b/_kafka_partition=1/gone-old.parquet","deletionTimestamp":%d,"dataChange":true}}
{"remove":{"path":"p=b/_kafka_partition=1/gone-recent.parquet","deletionTimestamp":%d,"dataChange":true}}`, old, recent),
	)
	for _, f := range []string{
		"p=a/_kafka_partition=0/live one.parquet", "p=a/_kafka_partition=0/dv.parquet",
		"ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", // the live DV
		"p=b/_kafka_partition=1/gone-old.parquet", "p=b/_kafka_partition=1/gone-recent.parquet",
		"part-00000-orphan-old.parquet", "p=a/_kafka_partition=0/orphan-old.parquet",
		"deletion_vector_0b0c3a2e-0000-4000-8000-000000000000.bin", // unreferenced DV
		"_hidden/x.parquet", ".hidden.parquet", "p=a/.part-x.crc", "_delta_log/junk.json",
	} {
		touch(t, root, f, 3*time.Hour)
	}
	touch(t, root, "part-00001-orphan-new.parquet", time.Minute) // a flush in flight
	if err := os.MkdirAll(filepath.Join(root, "p=c", "_kafka_partition=2"), 0o755); err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return root, tbl
}

func jsonString(s string) (string, error) {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`, nil
}

func TestVacuum(t *testing.T) {
	ctx := context.Background()
	root, tbl := vacuumTable(t)
	want := []VacuumFile{
		{Path: "deletion_vector_0b0c3a2e-0000-4000-8000-000000000000.bin", Size: 10},
		{Path: "p=a/_kafka_partition=0/orphan-old.parquet", Size: 10},
		{Path: "p=b/_kafka_partition=1/gone-old.parquet", Size: 10},
		{Path: "p=c", IsDir: false}, // placeholder, replaced below
		{Path: "part-00000-orphan-old.parquet", Size: 10},
	}
	want[3] = VacuumFile{Path: "p=c/_kafka_partition=2", IsDir: true}
	slices.SortFunc(want, func(a, b VacuumFile) int { return strings.Compare(a.Path, b.Path) })

	dry, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dry.Files, want) {
		t.Fatalf("dry run files\n got %+v\nwant %+v", dry.Files, want)
	}
	if dry.Bytes != 40 || dry.Retention != time.Hour || dry.StartVersion != -1 {
		t.Errorf("dry run: bytes %d retention %s start %d, want 40, 1h, -1", dry.Bytes, dry.Retention, dry.StartVersion)
	}
	for _, f := range want[:len(want)-1] {
		if !f.IsDir && !exists(root, f.Path) {
			t.Errorf("dry run deleted %s", f.Path)
		}
	}

	res, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1, EngineInfo: "ingestd/test"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Files, want) || res.Deleted != len(want) {
		t.Fatalf("vacuum files %+v deleted %d, want %+v", res.Files, res.Deleted, want)
	}
	for _, f := range want {
		if exists(root, f.Path) {
			t.Errorf("%s still exists after vacuum", f.Path)
		}
	}
	for _, f := range []string{
		"p=a/_kafka_partition=0/live one.parquet", "p=a/_kafka_partition=0/dv.parquet",
		"ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", "p=b/_kafka_partition=1/gone-recent.parquet",
		"part-00001-orphan-new.parquet", "_hidden/x.parquet", ".hidden.parquet", "p=a/.part-x.crc", "_delta_log/junk.json", "p=c",
	} {
		if !exists(root, f) {
			t.Errorf("vacuum deleted %s, which it must keep", f)
		}
	}
	// p=c/_kafka_partition=2 was empty: deleted; p=c had a (empty) child when listed: kept
	// until the next vacuum, like Spark.
	if res.StartVersion != 3 || res.EndVersion != 4 {
		t.Fatalf("VACUUM START/END at versions %d/%d, want 3/4", res.StartVersion, res.EndVersion)
	}
	start, err := deltawriter.ReadCommit(ctx, tbl.Store(), 3)
	if err != nil {
		t.Fatal(err)
	}
	ci := start.Actions[0].CommitInfo
	if len(start.Actions) != 1 || ci["operation"] != "VACUUM START" ||
		fmt.Sprint(ci["operationParameters"]) != "map[defaultRetentionMillis:3600000 retentionCheckEnabled:true]" ||
		fmt.Sprint(ci["operationMetrics"]) != "map[numFilesToDelete:5 sizeOfDataToDelete:40]" {
		t.Errorf("VACUUM START commit: %v", start.Actions)
	}
	end, err := deltawriter.ReadCommit(ctx, tbl.Store(), 4)
	if err != nil {
		t.Fatal(err)
	}
	ci = end.Actions[0].CommitInfo
	// 7 directories listed: root, ab, p=a, p=a/_kafka_partition=0, p=b, p=b/…=1, p=c, p=c/…=2 (+root) = 8.
	if len(end.Actions) != 1 || ci["operation"] != "VACUUM END" ||
		fmt.Sprint(ci["operationParameters"]) != "map[status:COMPLETED]" ||
		fmt.Sprint(ci["operationMetrics"]) != "map[numDeletedFiles:5 numVacuumedDirectories:8]" {
		t.Errorf("VACUUM END commit: %v", end.Actions)
	}

	// Past the retention of the recent tombstone (2 h later), it goes too; p=c now empty.
	later, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1, DryRun: true, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(later.Files)
	if got != "[{p=b/_kafka_partition=1/gone-recent.parquet 10 false} {p=c 0 true} {part-00001-orphan-new.parquet 10 false}]" {
		t.Errorf("vacuum 2 h later would delete %s", got)
	}
}

func TestVacuumRetentionCheck(t *testing.T) {
	ctx := context.Background()
	root, tbl := vacuumTable(t)
	_, err := Vacuum(ctx, tbl, VacuumOptions{Retain: 30 * time.Minute})
	want := `vacuum file://` + root + `: --retain 30m0s is shorter than the table's delta.deletedFileRetentionDuration ("interval 1 hours" = 1h0m0s): files that readers of versions inside that window, or flushes in flight, still need could be deleted; use --retain 1h0m0s or longer, or add --force if no writer is running and no reader needs older versions: retention shorter than the table's delta.deletedFileRetentionDuration`
	if err == nil || err.Error() != want || !errors.Is(err, ErrRetentionTooShort) {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
	if !exists(root, "part-00000-orphan-old.parquet") {
		t.Fatal("a refused vacuum deleted a file")
	}
	// A dry run deletes nothing: it lists what the shorter retention would delete.
	dry, err := Vacuum(ctx, tbl, VacuumOptions{Retain: 30 * time.Minute, DryRun: true})
	if err != nil || dry.Retention != 30*time.Minute || dry.TableRetention != time.Hour || len(dry.Files) == 0 {
		t.Fatalf("dry run with a short retention: %+v, %v", dry, err)
	}
	if !exists(root, "part-00000-orphan-old.parquet") {
		t.Fatal("a dry run deleted a file")
	}
	if v, _ := deltawriter.CommitVersions(ctx, tbl.Store()); len(v) != 3 {
		t.Fatalf("a refused vacuum committed: versions %v", v)
	}
	// --force with 0s: everything unreferenced goes, the in-flight file too.
	res, err := Vacuum(ctx, tbl, VacuumOptions{Retain: 0, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if exists(root, "part-00001-orphan-new.parquet") || exists(root, "p=b/_kafka_partition=1/gone-recent.parquet") {
		t.Errorf("vacuum --retain 0s --force kept unreferenced files: %+v", res.Files)
	}
	start, _ := deltawriter.ReadCommit(ctx, tbl.Store(), res.StartVersion)
	if p := fmt.Sprint(start.Actions[0].CommitInfo["operationParameters"]); p != "map[defaultRetentionMillis:3600000 retentionCheckEnabled:false specifiedRetentionMillis:0]" {
		t.Errorf("VACUUM START parameters %s", p)
	}
}

func TestVacuumRefusesUnwritableTable(t *testing.T) {
	root := t.TempDir()
	st, _ := storage.NewLocal(root)
	schema, _ := jsonString(schemaJSON)
	writeLog(t, st, `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["vacuumProtocolCheck"],"writerFeatures":["vacuumProtocolCheck","someFutureFeature"]}}
{"metaData":{"id":"t1","format":{"provider":"parquet","options":{}},"schemaString":`+schema+`,"partitionColumns":[],"configuration":{},"createdTime":1}}`)
	touch(t, root, "orphan.parquet", 30*24*time.Hour)
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Vacuum(context.Background(), tbl, VacuumOptions{Retain: -1})
	if !errors.Is(err, deltawriter.ErrUnsupportedFeature) || !strings.Contains(err.Error(), `"someFutureFeature"`) {
		t.Fatalf("vacuum of a table with an unknown writer feature: %v", err)
	}
	if !exists(root, "orphan.parquet") {
		t.Fatal("refused vacuum deleted a file")
	}
}

func TestDVPath(t *testing.T) {
	// PROTOCOL.md, "Deletion Vector Descriptor Schema", the example descriptor.
	got, ok := dvPath(&deltalog.DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^"})
	if !ok || got != "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin" {
		t.Fatalf("dvPath = %q, %v", got, ok)
	}
	if _, ok := dvPath(&deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"}); ok {
		t.Error("an inline DV has a path")
	}
}

// BenchmarkVacuumDryRun measures listing and diffing a local table of 2,000 live files
// and 2,000 orphans in 20 partition directories (docs/performance.md).
func BenchmarkVacuumDryRun(b *testing.B) {
	root := b.TempDir()
	st, _ := storage.NewLocal(root)
	schema, _ := jsonString(schemaJSON)
	var adds strings.Builder
	old := time.Now().Add(-30 * 24 * time.Hour)
	for i := 0; i < 2000; i++ {
		dir := fmt.Sprintf("p=%d/_kafka_partition=0", i%20)
		fmt.Fprintf(&adds, `{"add":{"path":"%s/live-%d.parquet","partitionValues":{"p":"%d","_kafka_partition":"0"},"size":10,"modificationTime":1,"dataChange":true}}`+"\n", dir, i, i%20)
		for _, name := range []string{fmt.Sprintf("live-%d.parquet", i), fmt.Sprintf("orphan-%d.parquet", i)} {
			p := filepath.Join(root, dir, name)
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			_ = os.WriteFile(p, []byte("x"), 0o644)
			_ = os.Chtimes(p, old, old)
		}
	}
	ctx := context.Background()
	_ = st.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(`{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"t1","format":{"provider":"parquet","options":{}},"schemaString":`+schema+`,"partitionColumns":["p","_kafka_partition"],"configuration":{},"createdTime":1}}
`+adds.String()))
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1, DryRun: true})
		if err != nil || len(res.Files) != 2000 {
			b.Fatalf("%d files, %v", len(res.Files), err)
		}
	}
}

// pagesOnly hides the local store's ListNamePages: VACUUM lists with ListPages, sizes and
// times included, as on the object stores.
type pagesOnly struct{ storage.Store }

// TestVacuumListPages runs the dry run of TestVacuum through ListPages (no NameLister):
// the same files.
func TestVacuumListPages(t *testing.T) {
	ctx := context.Background()
	root, _ := vacuumTable(t)
	st, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, pagesOnly{st})
	if err != nil {
		t.Fatal(err)
	}
	dry, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "[{deletion_vector_0b0c3a2e-0000-4000-8000-000000000000.bin 10 false} {p=a/_kafka_partition=0/orphan-old.parquet 10 false} {p=b/_kafka_partition=1/gone-old.parquet 10 false} {p=c/_kafka_partition=2 0 true} {part-00000-orphan-old.parquet 10 false}]"
	if got := fmt.Sprint(dry.Files); got != want || dry.Bytes != 40 || dry.Dirs != 8 {
		t.Fatalf("dry run through ListPages: files %s, bytes %d, dirs %d\nwant %s, 40, 8", got, dry.Bytes, dry.Dirs, want)
	}
}

// heapStore is a local store that, before handing each listing page to its caller,
// collects garbage and records the heap in use: the most VACUUM holds while it lists.
type heapStore struct {
	*storage.Local
	peak uint64
}

func (h *heapStore) ListNamePages(ctx context.Context, dir string, fn func([]storage.FileInfo) error) error {
	return h.Local.ListNamePages(ctx, dir, h.measured(fn))
}

// ListNamePagesTemps is the listing VACUUM uses on a local store (storage.TempLister).
func (h *heapStore) ListNamePagesTemps(ctx context.Context, dir string, fn func([]storage.FileInfo) error, temp func(string)) error {
	return h.Local.ListNamePagesTemps(ctx, dir, h.measured(fn), temp)
}

func (h *heapStore) measured(fn func([]storage.FileInfo) error) func([]storage.FileInfo) error {
	return func(page []storage.FileInfo) error {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		h.peak = max(h.peak, m.HeapAlloc)
		return fn(page)
	}
}

// TestVacuumListingMemoryBounded runs a dry run on a table of one live file, one old
// orphan and n recent unreferenced files (a flush in flight: listed, kept) for n = 5,000
// and 50,000: the heap VACUUM holds while listing grows by less than 1 MiB (holding the
// 45,000 more entries of the root directory would take several MiB), and the result is
// the one old orphan both times.
func TestVacuumListingMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 55,000 files")
	}
	ctx := context.Background()
	peak := map[int]uint64{}
	for _, n := range []int{5000, 50000} {
		root, local := oneLiveFileTable(t)
		touch(t, root, "orphan-old.parquet", 30*24*time.Hour)
		for i := range n {
			if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("part-%06d-in-flight.parquet", i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		hs := &heapStore{Local: local}
		tbl, err := deltawriter.Open(ctx, hs)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(res.Files); got != "[{orphan-old.parquet 10 false}]" || res.Dirs != 1 {
			t.Fatalf("n=%d: files %s, dirs %d; want [{orphan-old.parquet 10 false}], 1", n, got, res.Dirs)
		}
		peak[n] = hs.peak
	}
	grew := int64(peak[50000]) - int64(peak[5000])
	t.Logf("heap while listing: %d B at 5,000 files, %d B at 50,000", peak[5000], peak[50000])
	if grew > 1<<20 {
		t.Fatalf("heap while listing grew by %d B from 5,000 to 50,000 files, want < 1 MiB", grew)
	}
}

// churnStore is a local store whose root listing, after its first page, runs between:
// a writer creating and removing files while VACUUM lists. With fail set, the listing
// fails after its first page instead.
type churnStore struct {
	*storage.Local
	between func()
	fail    bool
}

func (c *churnStore) ListNamePages(ctx context.Context, dir string, fn func([]storage.FileInfo) error) error {
	return c.Local.ListNamePages(ctx, dir, c.churned(dir, fn))
}

// ListNamePagesTemps is the listing VACUUM uses on a local store (storage.TempLister).
func (c *churnStore) ListNamePagesTemps(ctx context.Context, dir string, fn func([]storage.FileInfo) error, temp func(string)) error {
	return c.Local.ListNamePagesTemps(ctx, dir, c.churned(dir, fn), temp)
}

func (c *churnStore) churned(dir string, fn func([]storage.FileInfo) error) func([]storage.FileInfo) error {
	pages := 0
	return func(page []storage.FileInfo) error {
		if pages++; dir == "" && pages == 2 {
			if c.fail {
				return errors.New("connection reset")
			}
			c.between()
			c.between = func() {}
		}
		return fn(page)
	}
}

// oneLiveFileTable is an unpartitioned table on local disk (its root and store) whose one
// live file, live.parquet, is 30 days old.
func oneLiveFileTable(t *testing.T) (root string, local *storage.Local) {
	t.Helper()
	root = t.TempDir()
	local, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := jsonString(schemaJSON)
	writeLog(t, local, `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"t1","format":{"provider":"parquet","options":{}},"schemaString":`+schema+`,"partitionColumns":[],"configuration":{},"createdTime":1}}
{"add":{"path":"live.parquet","partitionValues":{},"size":10,"modificationTime":1,"dataChange":true}}`)
	touch(t, root, "live.parquet", 30*24*time.Hour)
	return root, local
}

// churnTable is a table of one live file and 2,500 orphans 30 days old on a churnStore.
func churnTable(t *testing.T) (root string, cs *churnStore, tbl *deltawriter.Table) {
	t.Helper()
	root, local := oneLiveFileTable(t)
	for i := range 2500 {
		touch(t, root, fmt.Sprintf("orphan-%04d.parquet", i), 30*24*time.Hour)
	}
	cs = &churnStore{Local: local, between: func() {}}
	tbl, err := deltawriter.Open(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	return root, cs, tbl
}

// rootNames lists the names in root, sorted.
func rootNames(t *testing.T, root string) []string { return dirNames(t, root) }

// TestVacuumListingChurn: files created while VACUUM lists the root page by page (a
// flush landing: young) are kept, orphans removed meanwhile do not fail it, and every
// other old orphan is deleted; the live file and the log stay.
func TestVacuumListingChurn(t *testing.T) {
	ctx := context.Background()
	root, cs, tbl := churnTable(t)
	var young []string
	cs.between = func() {
		for i := range 200 {
			name := fmt.Sprintf("young-%04d.parquet", i)
			if err := os.WriteFile(filepath.Join(root, name), []byte("0123456789"), 0o644); err != nil {
				t.Fatal(err)
			}
			young = append(young, name)
		}
		for i := range 300 {
			if err := os.Remove(filepath.Join(root, fmt.Sprintf("orphan-%04d.parquet", i*8))); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(young) != 200 {
		t.Fatalf("the churn ran for %d files, want 200", len(young))
	}
	want := append([]string{"_delta_log", "live.parquet"}, young...)
	slices.Sort(want)
	if got := rootNames(t, root); !slices.Equal(got, want) {
		t.Errorf("after vacuum: %d entries (first %v), want %d: the log, live.parquet and the 200 young files", len(got), got[:min(5, len(got))], len(want))
	}
	for _, f := range res.Files {
		if strings.HasPrefix(f.Path, "young-") || f.Path == "live.parquet" {
			t.Errorf("vacuum chose %s", f.Path)
		}
	}
	if res.Deleted != len(res.Files) || len(res.Files) < 2200 || len(res.Files) > 2500 {
		t.Errorf("vacuum deleted %d of %d candidates, want all of 2,200 to 2,500", res.Deleted, len(res.Files))
	}
}

// TestVacuumListingFailsMidway: a listing that fails after its first page fails VACUUM
// before any delete: the 2,500 orphans are all still there.
func TestVacuumListingFailsMidway(t *testing.T) {
	ctx := context.Background()
	root, cs, tbl := churnTable(t)
	cs.fail = true
	if _, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1}); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("vacuum with a listing failing midway: %v, want the listing's error", err)
	}
	if got := len(rootNames(t, root)); got != 2502 {
		t.Errorf("after the failed vacuum: %d entries in the root, want 2,502 (nothing deleted)", got)
	}
}

// hiddenTemps is a store that can delete but whose listings do not report temporary files
// (no storage.TempLister).
type hiddenTemps struct {
	storage.Store
	storage.Deleter
}

// TestVacuumKeepsDirectoryInUse: an empty-looking directory that holds an in-flight
// ".tmp-" file is not empty when VACUUM deletes it: it is kept and left out of the result,
// the truly empty one is deleted, and VACUUM END says COMPLETED. The local store's own
// listing reports the in-flight file (storage.TempLister), so its dry run leaves the
// directory out at once; through a store that cannot (hiddenTemps: as for a file written
// after the listing) the directory looks empty until its delete fails.
func TestVacuumKeepsDirectoryInUse(t *testing.T) {
	ctx := context.Background()
	root, local := oneLiveFileTable(t)
	for _, d := range []string{"empty", "inflight"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "inflight", ".tmp-123456"), []byte("half a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	touch(t, root, "orphan.parquet", 30*24*time.Hour)
	direct, err := deltawriter.Open(ctx, local)
	if err != nil {
		t.Fatal(err)
	}
	if dry, err := Vacuum(ctx, direct, VacuumOptions{Retain: -1, DryRun: true}); err != nil || !slices.Equal(vacuumPaths(dry.Files), []string{"empty/", "orphan.parquet"}) {
		t.Fatalf("dry run on the local store lists %v (%v), want empty/ and the orphan: inflight/ holds a write in flight", vacuumPaths(dry.Files), err)
	}
	tbl, err := deltawriter.Open(ctx, hiddenTemps{local, local})
	if err != nil {
		t.Fatal(err)
	}
	dry, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := vacuumPaths(dry.Files); !slices.Equal(got, []string{"empty/", "inflight/", "orphan.parquet"}) {
		t.Fatalf("dry run lists %v, want both directories (they look empty) and the orphan", got)
	}
	res, err := Vacuum(ctx, tbl, VacuumOptions{Retain: -1})
	if err != nil {
		t.Fatalf("vacuum: %v (a directory in use must be kept, not fail VACUUM)", err)
	}
	if got := vacuumPaths(res.Files); !slices.Equal(got, []string{"empty/", "orphan.parquet"}) || res.Deleted != 2 {
		t.Errorf("vacuum deleted %d: %v, want 2: empty/ and orphan.parquet", res.Deleted, got)
	}
	if got := rootNames(t, root); !slices.Equal(got, []string{"_delta_log", "inflight", "live.parquet"}) {
		t.Errorf("after vacuum the root holds %v, want _delta_log, inflight and live.parquet", got)
	}
	end, err := local.Get(ctx, fmt.Sprintf("_delta_log/%020d.json", res.EndVersion))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(end), `"operation":"VACUUM END","operationMetrics":{"numDeletedFiles":"2","numVacuumedDirectories":"3"},"operationParameters":{"status":"COMPLETED"}`) {
		t.Errorf("VACUUM END commit: %s, want status COMPLETED", end)
	}
}

// vacuumPaths lists the paths of files, directories with a trailing "/".
func vacuumPaths(files []VacuumFile) []string {
	var out []string
	for _, f := range files {
		if f.IsDir {
			out = append(out, f.Path+"/")
		} else {
			out = append(out, f.Path)
		}
	}
	return out
}
