package deltawriter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// checkpointRows is the checkpoint writer's former row builder, kept as the reference
// the columnar builder is checked against: the rows of a checkpoint of s (protocol,
// metaData, txns, domains, live adds and unexpired tombstones) as generic trees for
// shredRows. One addition over the former writer: remove.baseRowId and
// remove.defaultRowCommitVersion are written when set (Spark's RemoveFile has them).
func checkpointRows(s *Snapshot, now time.Time) ([]map[string]any, int, error) {
	p := s.Protocol
	proto := map[string]any{"minReaderVersion": int32(p.MinReaderVersion), "minWriterVersion": int32(p.MinWriterVersion)}
	if p.MinReaderVersion >= 3 {
		proto["readerFeatures"] = strAnys(p.ReaderFeatures)
	}
	if p.MinWriterVersion >= 7 {
		proto["writerFeatures"] = strAnys(p.WriterFeatures)
	}
	m := s.Metadata
	md := map[string]any{
		"id": m.ID, "schemaString": m.SchemaString,
		"format":           map[string]any{"provider": m.Format.Provider, "options": strMapOrEmpty(m.Format.Options)},
		"partitionColumns": strAnys(m.PartitionColumns),
		"configuration":    strMapOrEmpty(m.Configuration),
	}
	if m.Name != "" {
		md["name"] = m.Name
	}
	if m.Description != "" {
		md["description"] = m.Description
	}
	if m.CreatedTime != nil {
		md["createdTime"] = *m.CreatedTime
	}
	rows := []map[string]any{{"protocol": proto}, {"metaData": md}}
	for _, id := range slices.Sorted(maps.Keys(s.txns)) {
		t := s.txns[id]
		row := map[string]any{"appId": t.AppID, "version": t.Version}
		if t.LastUpdated != nil {
			row["lastUpdated"] = *t.LastUpdated
		}
		rows = append(rows, map[string]any{"txn": row})
	}
	for _, d := range slices.Sorted(maps.Keys(s.domains)) {
		dm := s.domains[d]
		rows = append(rows, map[string]any{"domainMetadata": map[string]any{"domain": dm.Domain, "configuration": dm.Configuration, "removed": false}})
	}
	numAdds := 0
	for _, a := range s.Files.All() {
		row := map[string]any{
			"path": a.Path, "partitionValues": partitionEntries(a.PartitionValues), "size": a.Size,
			"modificationTime": a.ModificationTime, "dataChange": a.DataChange,
		}
		if a.Stats != "" {
			row["stats"] = a.Stats
		}
		if a.Tags != nil {
			row["tags"] = a.Tags
		}
		if a.DeletionVector != nil {
			row["deletionVector"] = dvRow(a.DeletionVector)
		}
		if a.BaseRowID != nil {
			row["baseRowId"] = *a.BaseRowID
		}
		if a.DefaultRowCommitVersion != nil {
			row["defaultRowCommitVersion"] = *a.DefaultRowCommitVersion
		}
		rows = append(rows, map[string]any{"add": row})
		numAdds++
	}
	retention, err := s.Metadata.DurationProperty("delta.deletedFileRetentionDuration", 7*24*time.Hour)
	if err != nil {
		return nil, 0, err
	}
	cutoff := now.Add(-retention).UnixMilli()
	for _, r := range s.tombstones.all() { // in key order
		if r.DeletionTimestamp != nil && *r.DeletionTimestamp < cutoff {
			continue // expired tombstone
		}
		row := map[string]any{"path": r.Path, "dataChange": r.DataChange}
		if r.DeletionTimestamp != nil {
			row["deletionTimestamp"] = *r.DeletionTimestamp
		}
		if r.ExtendedFileMetadata != nil {
			row["extendedFileMetadata"] = *r.ExtendedFileMetadata
		}
		if r.PartitionValues != nil {
			row["partitionValues"] = partitionEntries(r.PartitionValues)
		}
		if r.Size != nil {
			row["size"] = *r.Size
		}
		if r.DeletionVector != nil {
			row["deletionVector"] = dvRow(r.DeletionVector)
		}
		if r.BaseRowID != nil {
			row["baseRowId"] = *r.BaseRowID
		}
		if r.DefaultRowCommitVersion != nil {
			row["defaultRowCommitVersion"] = *r.DefaultRowCommitVersion
		}
		rows = append(rows, map[string]any{"remove": row})
	}
	return rows, numAdds, nil
}

func strAnys(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

func strMapOrEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func partitionEntries(pv map[string]*string) []mapEntry {
	out := make([]mapEntry, 0, len(pv))
	for _, k := range slices.Sorted(maps.Keys(pv)) {
		var v any
		if pv[k] != nil {
			v = *pv[k]
		}
		out = append(out, mapEntry{Key: k, Value: v})
	}
	return out
}

func dvRow(d *deltalog.DeletionVector) map[string]any {
	row := map[string]any{"storageType": d.StorageType, "pathOrInlineDv": d.PathOrInlineDv,
		"sizeInBytes": d.SizeInBytes, "cardinality": d.Cardinality}
	if d.Offset != nil {
		row["offset"] = *d.Offset
	}
	if d.MaxRowIndex != nil {
		row["maxRowIndex"] = *d.MaxRowIndex
	}
	return row
}

func ptr[T any](v T) *T { return &v }

// richSnapshot has every kind of checkpoint action and every optional field both set
// and unset: table features, named metadata, txns with and without lastUpdated,
// domains, partitioned adds with a null partition value, tags, deletion vectors with
// and without offset, row tracking fields, and tombstones expired, unexpired and
// without deletionTimestamp at now.
func richSnapshot(now time.Time) *Snapshot {
	s := emptySnapshot()
	s.Version = 42
	s.Protocol = deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
		ReaderFeatures: []string{"deletionVectors"},
		WriterFeatures: []string{"deletionVectors", "domainMetadata", "rowTracking"}}
	s.Metadata = deltalog.Metadata{ID: "0b9e1a4c-1f6e-4d3b-9d67-3c2f0a0e9b11", Name: "orders", Description: "the orders",
		Format:           deltalog.Format{Provider: "parquet", Options: map[string]string{"o2": "v2", "o1": "v1"}},
		SchemaString:     `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"p","type":"string","nullable":true,"metadata":{}}]}`,
		PartitionColumns: []string{"p", "q"},
		Configuration:    map[string]string{"delta.deletedFileRetentionDuration": "interval 2 days", "delta.checkpointInterval": "10"},
		CreatedTime:      ptr(int64(1_700_000_000_000))}
	for _, x := range []deltalog.Txn{{AppID: "b-app", Version: 7, LastUpdated: ptr(int64(1_700_000_000_001))}, {AppID: "a-app", Version: 3}} {
		s.txns[x.AppID], s.Txns[x.AppID] = x, x.Version
	}
	s.domains["delta.rowTracking"] = deltalog.DomainMetadata{Domain: "delta.rowTracking", Configuration: `{"rowIdHighWaterMark":99}`}
	s.domains["a.domain"] = deltalog.DomainMetadata{Domain: "a.domain", Configuration: ""}
	adds := []deltalog.Add{
		{Path: "p=x/q=1/f1.parquet", PartitionValues: map[string]*string{"q": ptr("1"), "p": ptr("x")}, Size: 10, ModificationTime: 11, DataChange: true,
			Stats: `{"numRecords":1}`, BaseRowID: ptr(int64(0)), DefaultRowCommitVersion: ptr(int64(5))},
		{Path: "p=__HIVE_DEFAULT_PARTITION__/q=/f2.parquet", PartitionValues: map[string]*string{"p": nil, "q": ptr("")}, Size: 20, ModificationTime: 21,
			Tags: map[string]string{"t2": "b", "t1": "a"}, DeletionVector: &deltalog.DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^", Offset: ptr(int32(4)), SizeInBytes: 40, Cardinality: 6, MaxRowIndex: ptr(int64(9))}},
		{Path: "f3.parquet", Size: 30, ModificationTime: 31, DataChange: true, Tags: map[string]string{},
			DeletionVector: &deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", SizeInBytes: 40, Cardinality: 6}},
	}
	s.Files = NewFileSet(adds...)
	recent, old := now.Add(-time.Hour).UnixMilli(), now.Add(-72*time.Hour).UnixMilli()
	removes := []deltalog.Remove{
		{Path: "r1.parquet", DeletionTimestamp: &recent, DataChange: true, ExtendedFileMetadata: ptr(true),
			PartitionValues: map[string]*string{"p": ptr("x"), "q": nil}, Size: ptr(int64(100)), BaseRowID: ptr(int64(7)), DefaultRowCommitVersion: ptr(int64(2))},
		{Path: "r2-expired.parquet", DeletionTimestamp: &old, DataChange: true},
		{Path: "r3.parquet", ExtendedFileMetadata: ptr(false), PartitionValues: map[string]*string{},
			DeletionVector: &deltalog.DeletionVector{StorageType: "p", PathOrInlineDv: "s3://b/dv.bin", Offset: ptr(int32(1)), SizeInBytes: 3, Cardinality: 2}},
	}
	for _, r := range removes {
		s.tombstones.put(deltalog.FileKey(r.Path, r.DeletionVector), r)
	}
	return s
}

// minimalSnapshot is a (1,2) table with nil collections in its metadata and no files.
func minimalSnapshot() *Snapshot {
	s := emptySnapshot()
	s.Version = 10
	s.Protocol = deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	s.Metadata = deltalog.Metadata{ID: "id-1", Format: deltalog.Format{Provider: "parquet"}, SchemaString: `{"type":"struct","fields":[]}`}
	return s
}

// fullColumn returns column i of b with the null rows of the other actions in place.
func fullColumn(b *checkpointColumns, i int) []parquet.Value {
	var out []parquet.Value
	for _, sec := range b.sections {
		if i >= sec.first && i < sec.end {
			out = append(out, b.cols[i]...)
			continue
		}
		for _, v := range b.nullRun(sec.rows) {
			out = append(out, v.Level(v.RepetitionLevel(), v.DefinitionLevel(), i))
		}
	}
	return out
}

func levelString(col []parquet.Value) []string {
	out := make([]string, len(col))
	for i, v := range col {
		out[i] = fmt.Sprintf("r%d d%d c%d %v null=%v %q", v.RepetitionLevel(), v.DefinitionLevel(), v.Column(), v.Kind(), v.IsNull(), v.String())
	}
	return out
}

// TestCheckpointColumnsMatchRowShredding checks the columnar checkpoint builder value by
// value (kind, levels, column, content) against shredding the generic rows of the former
// writer, for snapshots covering every action kind and optional field.
func TestCheckpointColumnsMatchRowShredding(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for name, s := range map[string]*Snapshot{"rich": richSnapshot(now), "minimal": minimalSnapshot()} {
		t.Run(name, func(t *testing.T) {
			rows, numAdds, err := checkpointRows(s, now)
			if err != nil {
				t.Fatal(err)
			}
			want, err := shredRows(checkpointSchema, rows)
			if err != nil {
				t.Fatal(err)
			}
			got, err := buildCheckpointColumns(s, now, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.rows != len(rows) || got.numAdds != numAdds {
				t.Errorf("rows %d adds %d, want %d %d", got.rows, got.numAdds, len(rows), numAdds)
			}
			for i, path := range checkpointSchema.Columns() {
				if g, w := levelString(fullColumn(got, i)), levelString(want[i]); !slices.Equal(g, w) {
					t.Errorf("column %v:\n got %q\nwant %q", path, g, w)
				}
			}
			// The buffers are reused: a second build into them gives the same columns.
			first := make([][]string, len(got.cols))
			for i := range got.cols {
				first[i] = levelString(fullColumn(got, i))
			}
			got.release()
			again, err := buildCheckpointColumns(s, now, got, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range again.cols {
				if g := levelString(fullColumn(again, i)); !slices.Equal(g, first[i]) {
					t.Errorf("column %d after reuse: %q, want %q", i, g, first[i])
				}
			}
		})
	}
}

// TestCheckpointRoundTrip writes the checkpoint of richSnapshot and reads it back: the
// reader gets the same protocol, metadata, txns, domains, files and unexpired tombstones,
// and _last_checkpoint reports the version, the row count and the add count.
func TestCheckpointRoundTrip(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := richSnapshot(now)
	st := newStore(t)
	if err := writeCheckpoint(ctx, st, s, now); err != nil {
		t.Fatal(err)
	}
	got, err := readCheckpoint(ctx, st, s.Version, []string{fmt.Sprintf("%020d.checkpoint.parquet", s.Version)})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Protocol, s.Protocol) {
		t.Errorf("protocol %+v, want %+v", got.Protocol, s.Protocol)
	}
	if !reflect.DeepEqual(got.Metadata, s.Metadata) {
		t.Errorf("metadata %+v, want %+v", got.Metadata, s.Metadata)
	}
	if !reflect.DeepEqual(got.txns, s.txns) || !reflect.DeepEqual(got.Txns, s.Txns) {
		t.Errorf("txns %v, want %v", got.Txns, s.Txns)
	}
	if !reflect.DeepEqual(got.domains, s.domains) {
		t.Errorf("domains %+v, want %+v", got.domains, s.domains)
	}
	wantFiles := maps.Collect(s.Files.All())
	for k, a := range wantFiles {
		if a.PartitionValues == nil {
			a.PartitionValues = map[string]*string{} // written as {} (Spark's form)
		}
		wantFiles[k] = a
	}
	if !reflect.DeepEqual(maps.Collect(got.Files.All()), wantFiles) {
		t.Errorf("files\n got %+v\nwant %+v", maps.Collect(got.Files.All()), wantFiles)
	}
	wantTomb := s.Tombstones()
	delete(wantTomb, "r2-expired.parquet")
	if gotTomb := got.Tombstones(); !reflect.DeepEqual(gotTomb, wantTomb) {
		t.Errorf("tombstones\n got %+v\nwant %+v", gotTomb, wantTomb)
	}
	b, err := st.Get(ctx, lastCheckpointPath)
	if err != nil {
		t.Fatal(err)
	}
	data, err := st.Get(ctx, checkpointPath(s.Version))
	if err != nil {
		t.Fatal(err)
	}
	// 2 + 2 txns + 2 domains + 3 adds + 2 unexpired tombstones.
	want := fmt.Sprintf(`{"version":42,"size":11,"sizeInBytes":%d,"numOfAddFiles":3}`, len(data))
	if string(b) != want {
		t.Errorf("_last_checkpoint %s, want %s", b, want)
	}
	if !bytes.HasPrefix(data, []byte("PAR1")) {
		t.Errorf("checkpoint does not start with PAR1")
	}
}

// TestSnapshotImmutableAfterCommits: a snapshot handed out by Snapshot does not change
// when later commits advance the table (they advance a copy of it), while commits that
// nobody observed in between advance the cached one in place.
func TestSnapshotImmutableAfterCommits(t *testing.T) {
	ctx := context.Background()
	tbl, _ := Open(ctx, newStore(t))
	createTable(t, tbl, nil)
	for i := 1; i <= 3; i++ {
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(i - 1), Adds: []deltalog.Add{fakeAdd(fmt.Sprint("a", i))},
			Txns: []deltalog.Txn{{AppID: "app", Version: int64(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	s3, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 4; i <= 6; i++ {
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(i - 1), Adds: []deltalog.Add{fakeAdd(fmt.Sprint("a", i))},
			Txns: []deltalog.Txn{{AppID: "app", Version: int64(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if s3.Version != 3 || s3.Files.Len() != 3 || s3.Txns["app"] != 3 || len(s3.txns) != 1 {
		t.Errorf("snapshot 3 changed: version %d files %d txns %v", s3.Version, s3.Files.Len(), s3.Txns)
	}
	s6, _ := tbl.Snapshot(ctx)
	if s6 == s3 || s6.Version != 6 || s6.Files.Len() != 6 || s6.Txns["app"] != 6 {
		t.Errorf("snapshot 6: version %d files %d txns %v", s6.Version, s6.Files.Len(), s6.Txns)
	}
}

// TestBackgroundCheckpoints: with WithBackgroundCheckpoints every due checkpoint is
// handed to one goroutine; after Close the newest due one is written and readable on
// its own, and commits after Close write their checkpoints before returning.
func TestBackgroundCheckpoints(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, _ := Open(ctx, st, WithBackgroundCheckpoints())
	createTable(t, tbl, map[string]string{deltalog.PropCheckpointInterval: "2"})
	for i := 1; i <= 20; i++ {
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(i - 1), Adds: []deltalog.Add{fakeAdd(fmt.Sprint("f", i))},
			Txns: []deltalog.Txn{{AppID: "app", Version: int64(i)}}}); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			if _, err := tbl.Snapshot(ctx); err != nil { // hand snapshots out meanwhile
				t.Fatal(err)
			}
		}
	}
	if err := tbl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readLastCheckpoint(ctx, st); got != 20 {
		t.Fatalf("_last_checkpoint version %d after Close, want 20", got)
	}
	cp, err := readCheckpoint(ctx, st, 20, []string{fmt.Sprintf("%020d.checkpoint.parquet", 20)})
	if err != nil {
		t.Fatal(err)
	}
	if cp.Files.Len() != 20 || cp.Txns["app"] != 20 {
		t.Errorf("checkpoint 20: %d files, txns %v", cp.Files.Len(), cp.Txns)
	}
	for i := 21; i <= 22; i++ {
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(i - 1), Adds: []deltalog.Add{fakeAdd(fmt.Sprint("f", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := readLastCheckpoint(ctx, st); got != 22 {
		t.Errorf("_last_checkpoint version %d right after commit 22 (after Close), want 22", got)
	}
	// Close with an ended context while nothing runs is not an error.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := tbl.Close(done); err != nil {
		t.Errorf("Close when idle: %v", err)
	}
}

// TestSortYielding: the yielding merge sort orders keys like slices.Sort for lengths
// around its run size, and yields.
func TestSortYielding(t *testing.T) {
	for _, n := range []int{0, 1, sortRun - 1, sortRun, sortRun + 1, 3*sortRun + 7, 8 * sortRun} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%08d", (i*7919)%(n+1))
		}
		want := slices.Sorted(slices.Values(keys))
		yields := 0
		got := sortYielding(slices.Clone(keys), func() { yields++ })
		if !slices.Equal(got, want) {
			t.Errorf("n=%d: not sorted like slices.Sort", n)
		}
		if n > sortRun && yields < n/sortRun {
			t.Errorf("n=%d: %d yields", n, yields)
		}
	}
}

// TestBackgroundCheckpointWaitsForForeground: a background checkpoint pauses at its
// yields while a Snapshot or Commit call is in flight, is written once none is, and a
// Close whose context ends meanwhile cancels it.
func TestBackgroundCheckpointWaitsForForeground(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, _ := Open(ctx, st, WithBackgroundCheckpoints())
	createTable(t, tbl, map[string]string{deltalog.PropCheckpointInterval: "2"})
	commit := func(v int) {
		t.Helper()
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(v - 1), Adds: []deltalog.Add{fakeAdd(fmt.Sprint("f", v))}}); err != nil {
			t.Fatal(err)
		}
	}
	commit(1)
	call := tbl.fg.enter() // a Snapshot or Commit of another goroutine, in flight
	commit(2)              // checkpoint 2 falls due
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := tbl.cp.wait(short, false)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for checkpoint 2 while a call is in flight: %v, want it still held back", err)
	}
	if got := readLastCheckpoint(ctx, st); got != -1 {
		t.Fatalf("_last_checkpoint version %d while a call is in flight, want none", got)
	}
	tbl.fg.exit(call)
	tbl.WaitCheckpoints()
	if got := readLastCheckpoint(ctx, st); got != 2 {
		t.Fatalf("_last_checkpoint version %d once no call is in flight, want 2", got)
	}

	commit(3)
	call = tbl.fg.enter()
	commit(4) // checkpoint 4 falls due, held back
	ended, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := tbl.Close(ended); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close while checkpoint 4 is held back: %v, want the deadline", err)
	}
	tbl.fg.exit(call)
	if err := tbl.cp.wait(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := readLastCheckpoint(ctx, st); got != 2 {
		t.Errorf("_last_checkpoint version %d after the cancelled checkpoint 4, want 2", got)
	}
}

// slowStatStore makes each Stat take delay once slow is set: a Snapshot call that finds
// no new commit Stats its version, so it stays in flight that long.
type slowStatStore struct {
	*storage.Local
	slow  atomic.Bool
	delay time.Duration
}

func (s *slowStatStore) Stat(ctx context.Context, p string) (storage.FileInfo, error) {
	if s.slow.Load() {
		time.Sleep(s.delay)
	}
	return s.Local.Stat(ctx, p)
}

// TestBackgroundCheckpointNotStarvedByOverlappingCalls: readers whose Snapshot calls
// overlap, so that some call is always in flight, still let a background checkpoint
// through; it waits for the calls in flight at each yield, not for a moment with none.
func TestBackgroundCheckpointNotStarvedByOverlappingCalls(t *testing.T) {
	ctx := context.Background()
	st := &slowStatStore{Local: newStore(t), delay: 5 * time.Millisecond}
	tbl, _ := Open(ctx, st, WithBackgroundCheckpoints())
	createTable(t, tbl, map[string]string{deltalog.PropCheckpointInterval: "2"})
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: 0, Adds: []deltalog.Add{fakeAdd("f1")}}); err != nil {
		t.Fatal(err)
	}
	st.slow.Store(true)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := tbl.Snapshot(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	defer func() { close(stop); readers.Wait() }()
	time.Sleep(20 * time.Millisecond) // the readers overlap
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: 1, Adds: []deltalog.Add{fakeAdd("f2")}}); err != nil {
		t.Fatal(err) // checkpoint 2 falls due
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tbl.cp.wait(wctx, false); err != nil {
		t.Fatalf("waiting for checkpoint 2 while readers overlap: %v, want it written", err)
	}
	if got := readLastCheckpoint(ctx, st.Local); got != 2 {
		t.Errorf("_last_checkpoint version %d, want 2", got)
	}
}
