package deltawriter

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// v2Snapshot is bigRichSnapshot(now, n) on a table with the v2Checkpoint feature.
func v2Snapshot(now time.Time, n int) *Snapshot {
	s := bigRichSnapshot(now, n)
	s.Protocol.ReaderFeatures = append(s.Protocol.ReaderFeatures, deltalog.FeatureV2Checkpoint)
	s.Protocol.WriterFeatures = append(s.Protocol.WriterFeatures, deltalog.FeatureV2Checkpoint)
	return s
}

// v2CheckpointName returns the one UUID-named checkpoint of version v in st.
func v2CheckpointName(t *testing.T, st storage.Store, v int64) string {
	t.Helper()
	l, err := listLog(context.Background(), st, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.checkpoints[v]) != 1 || len(l.checkpoints[v][0]) != 1 {
		t.Fatalf("checkpoints of version %d: %v, want one file", v, l.checkpoints[v])
	}
	name := l.checkpoints[v][0][0]
	if !strings.HasPrefix(name, fmt.Sprintf("%020d.checkpoint.", v)) || !strings.HasSuffix(name, ".json") || !isUUID(name[32:68]) {
		t.Fatalf("checkpoint %s is not <v>.checkpoint.<uuid>.json", name)
	}
	return name
}

// TestV2CheckpointSidecarsRoundTrip writes the V2 checkpoint of a snapshot of 303 adds
// (partition values with nulls, stats, tags, inline and file deletion vectors, row
// tracking fields) and 37 tombstones (one expired), 302 txns and 2 domains, with 120 file
// actions per sidecar and row groups of 64 rows: 339 file actions in 3 sidecars of 120,
// 120 and 99 rows (2, 2 and 2 row groups), add and remove columns only. Read back, it
// gives the snapshot entry by entry (files, unexpired tombstones, txns, domains,
// protocol, metadata) and the same files and tombstones as the classic checkpoint of
// the same snapshot; the top-level file holds checkpointMetadata, protocol, metaData,
// the txns, the domains and the 3 sidecar actions, and _last_checkpoint counts them.
func TestV2CheckpointSidecarsRoundTrip(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	defer func(r int) { cpChunkRows = r }(cpChunkRows)
	cpChunkRows = 64
	s := v2Snapshot(now, 300)
	st := newStore(t)
	w := checkpointWriter{sidecarFiles: 120}
	if err := w.write(ctx, st, s, now); err != nil {
		t.Fatal(err)
	}
	name := v2CheckpointName(t, st, s.Version)
	got, err := readCheckpoint(ctx, st, s.Version, []string{name})
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
	gotFiles := maps.Collect(got.Files.All())
	if len(gotFiles) != 303 || len(wantFiles) != 303 {
		t.Errorf("%d files read, %d in the snapshot; want 303", len(gotFiles), len(wantFiles))
	}
	for k, a := range wantFiles {
		if g, ok := gotFiles[k]; !ok || !reflect.DeepEqual(g, a) {
			t.Errorf("file %s\n got %+v\nwant %+v", k, g, a)
		}
	}
	wantTomb := s.Tombstones()
	delete(wantTomb, "r2-expired.parquet")
	if gotTomb := got.Tombstones(); len(gotTomb) != 36 || !reflect.DeepEqual(gotTomb, wantTomb) {
		t.Errorf("%d tombstones\n got %+v\nwant %+v", len(gotTomb), gotTomb, wantTomb)
	}

	// The classic checkpoint of the same snapshot reads back the same.
	cst := newStore(t)
	v2p := s.Protocol
	s.Protocol = deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors", "domainMetadata", "rowTracking"}}
	err = writeCheckpoint(ctx, cst, s, now)
	s.Protocol = v2p
	if err != nil {
		t.Fatal(err)
	}
	classic, err := readCheckpoint(ctx, cst, s.Version, []string{fmt.Sprintf("%020d.checkpoint.parquet", s.Version)})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(maps.Collect(classic.Files.All()), gotFiles) || !reflect.DeepEqual(classic.Tombstones(), got.Tombstones()) {
		t.Errorf("the V2 checkpoint's files and tombstones differ from the classic checkpoint's")
	}

	top, err := st.Get(ctx, logDir+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	actions, err := deltalog.ParseCommit(bytes.NewReader(top))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var sidecars []deltalog.Sidecar
	for _, a := range actions {
		switch {
		case a.CheckpointMetadata != nil:
			kinds = append(kinds, fmt.Sprintf("checkpointMetadata %d", a.CheckpointMetadata.Version))
		case a.Protocol != nil:
			kinds = append(kinds, "protocol")
		case a.Metadata != nil:
			kinds = append(kinds, "metaData")
		case a.Txn != nil:
			if kinds[len(kinds)-1] != "txn" {
				kinds = append(kinds, "txn")
			}
		case a.DomainMetadata != nil:
			kinds = append(kinds, "domainMetadata "+a.DomainMetadata.Domain)
		case a.Sidecar != nil:
			kinds = append(kinds, "sidecar")
			sidecars = append(sidecars, *a.Sidecar)
		default:
			kinds = append(kinds, "other")
		}
	}
	wantKinds := []string{"checkpointMetadata 42", "protocol", "metaData", "txn", "domainMetadata a.domain", "domainMetadata delta.rowTracking", "sidecar", "sidecar", "sidecar"}
	if !slices.Equal(kinds, wantKinds) || len(actions) != 3+302+2+3 {
		t.Fatalf("top-level actions %v (%d), want %v (310)", kinds, len(actions), wantKinds)
	}
	ents, err := st.List(ctx, sidecarDir)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	var sidecarBytes int64
	for _, e := range ents {
		listed = append(listed, e.Name)
	}
	wantRows := []int64{120, 120, 99}
	for i, sc := range sidecars {
		if !strings.HasSuffix(sc.Path, ".parquet") || !isUUID(strings.TrimSuffix(sc.Path, ".parquet")) || !slices.Contains(listed, sc.Path) {
			t.Errorf("sidecar %q: want <uuid>.parquet in %v", sc.Path, listed)
			continue
		}
		data, err := st.Get(ctx, sidecarDir+"/"+sc.Path)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := st.Stat(ctx, sidecarDir+"/"+sc.Path)
		if err != nil {
			t.Fatal(err)
		}
		if sc.SizeInBytes != int64(len(data)) || sc.ModificationTime != fi.ModTime.UnixMilli() {
			t.Errorf("sidecar %s: sizeInBytes %d, modificationTime %d; want %d, %d", sc.Path, sc.SizeInBytes, sc.ModificationTime, len(data), fi.ModTime.UnixMilli())
		}
		sidecarBytes += sc.SizeInBytes
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		var fields []string
		for _, fl := range f.Schema().Fields() {
			fields = append(fields, fl.Name())
		}
		if f.NumRows() != wantRows[i] || len(f.RowGroups()) != 2 || !slices.Equal(fields, []string{"add", "remove"}) {
			t.Errorf("sidecar %d: %d rows in %d row groups, columns %v; want %d rows, 2 row groups, [add remove]", i, f.NumRows(), len(f.RowGroups()), fields, wantRows[i])
		}
	}
	if len(listed) != 3 {
		t.Errorf("_sidecars holds %v, want the 3 sidecars", listed)
	}
	lc, err := st.Get(ctx, lastCheckpointPath)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"version":42,"size":%d,"sizeInBytes":%d,"numOfAddFiles":303}`, 310+339, int64(len(top))+sidecarBytes)
	if string(lc) != want {
		t.Errorf("_last_checkpoint %s, want %s", lc, want)
	}
}

// TestV2CheckpointSmallInline: a V2 table with at most min(v2InlineFiles, the sidecar
// size) file actions keeps them in the top-level JSON file and writes no sidecar.
func TestV2CheckpointSmallInline(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := v2Snapshot(now, 0) // 3 adds, 2 unexpired tombstones
	st := newStore(t)
	w := checkpointWriter{sidecarFiles: 5}
	if err := w.write(ctx, st, s, now); err != nil {
		t.Fatal(err)
	}
	name := v2CheckpointName(t, st, s.Version)
	if ents, err := st.List(ctx, sidecarDir); err != nil || len(ents) != 0 {
		t.Fatalf("_sidecars: %v (%v), want nothing", ents, err)
	}
	got, err := readCheckpoint(ctx, st, s.Version, []string{name})
	if err != nil || got.Files.Len() != 3 || got.tombstones.len() != 2 {
		t.Fatalf("read back: %v; want 3 files, 2 tombstones", err)
	}
	top, _ := st.Get(ctx, logDir+"/"+name)
	if n := strings.Count(string(top), `{"add":`); n != 3 || strings.Contains(string(top), `"sidecar"`) {
		t.Fatalf("top-level file has %d adds inline (want 3) or a sidecar:\n%s", n, top)
	}
	// One file action more than a sidecar holds: sidecars.
	w.sidecarFiles = 4
	if err := w.write(ctx, st, s, now); err != nil {
		t.Fatal(err)
	}
	if ents, err := st.List(ctx, sidecarDir); err != nil || len(ents) != 2 {
		t.Fatalf("_sidecars with 4 file actions per sidecar: %v (%v), want 2", ents, err)
	}
}

// heapStore is a local store that samples the live heap (after a GC) every heapEvery
// bytes written through Create and at each PutIfAbsent, keeping the highest.
type heapStore struct {
	*storage.Local
	peak uint64
}

const heapEvery = 1 << 20

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func (h *heapStore) sample() { h.peak = max(h.peak, liveHeap()) }

func (h *heapStore) Create(ctx context.Context, p string) (storage.Writer, error) {
	w, err := h.Local.Create(ctx, p)
	if err != nil {
		return nil, err
	}
	return &heapWriter{Writer: w, h: h}, nil
}

func (h *heapStore) PutIfAbsent(ctx context.Context, p string, data []byte) error {
	h.sample()
	return h.Local.PutIfAbsent(ctx, p, data)
}

type heapWriter struct {
	storage.Writer
	h     *heapStore
	since int
}

func (w *heapWriter) Write(p []byte) (int, error) {
	if w.since += len(p); w.since >= heapEvery {
		w.since = 0
		w.h.sample()
	}
	return w.Writer.Write(p)
}

func (w *heapWriter) Close() error {
	w.h.sample()
	return w.Writer.Close()
}

// TestV2CheckpointMemoryBounded writes the V2 checkpoint of a snapshot of 200,003 live
// files and 22,225 tombstones: the live heap beside the snapshot, sampled after a GC
// every MiB written and before the top-level file, stays under 40 MiB (a chunk of
// cpChunkRows rows and one encoded row group), where the same snapshot with its file
// actions inline in one JSON file holds more than that (the former form, kept for small
// tables).
func TestV2CheckpointMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 200,000-file snapshot")
	}
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := v2Snapshot(now, 200_000)
	const bound = 40 << 20
	grew := func(inline int) uint64 {
		defer func(n int) { v2InlineFiles = n }(v2InlineFiles)
		v2InlineFiles = inline
		local := newStore(t)
		h := &heapStore{Local: local}
		base := liveHeap()
		var w checkpointWriter
		if err := w.write(ctx, h, s, now); err != nil {
			t.Fatal(err)
		}
		if h.peak < base {
			return 0
		}
		return h.peak - base
	}
	side := grew(1000)
	inline := grew(1 << 30)
	t.Logf("heap beside the snapshot: %.1f MiB with sidecars, %.1f MiB inline", float64(side)/(1<<20), float64(inline)/(1<<20))
	if side >= bound {
		t.Errorf("V2 checkpoint with sidecars held %d B beside the snapshot, want < %d", side, bound)
	}
	if inline < bound {
		t.Errorf("inline V2 checkpoint held %d B beside the snapshot, want >= %d (the control)", inline, bound)
	}
	runtime.KeepAlive(s)
}

// TestCheckpointSidecars reads the sidecar names of Spark's V2 checkpoints, JSON and
// Parquet (the delta-kernel-rs conformance tables with one sidecar each), and of
// ingestd's classic checkpoint (none: it has no sidecar column).
func TestCheckpointSidecars(t *testing.T) {
	ctx := context.Background()
	src := kernelTestdata(t)
	for _, tc := range []struct{ table, checkpoint, want string }{
		{"v2-json-sidecars-struct-stats-only", "00000000000000000005.checkpoint.99cabe18-f541-4a52-b8fb-3f488d113032.json",
			"00000000000000000005.checkpoint.0000000001.0000000001.aec23d5c-e86d-4012-adcc-d4f08ad67230.parquet"},
		{"v2-parquet-sidecars-struct-stats-only", "00000000000000000005.checkpoint.f376503f-80c5-44c4-a353-a741181e8197.parquet",
			"00000000000000000005.checkpoint.0000000001.0000000001.014cb627-30e0-46dd-a539-09d3247e9b7d.parquet"},
	} {
		got, err := CheckpointSidecars(ctx, mustLocal(t, src+"/data/"+tc.table), tc.checkpoint)
		if err != nil || !slices.Equal(got, []string{tc.want}) {
			t.Errorf("%s: %v (%v), want [%s]", tc.table, got, err, tc.want)
		}
	}
	st := newStore(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if err := writeCheckpoint(ctx, st, richSnapshot(now), now); err != nil {
		t.Fatal(err)
	}
	if got, err := CheckpointSidecars(ctx, st, "00000000000000000042.checkpoint.parquet"); err != nil || got != nil {
		t.Errorf("classic checkpoint: %v (%v), want none", got, err)
	}
}

// TestBackgroundV2Checkpoints: on a v2Checkpoint table with WithBackgroundCheckpoints and
// 3 file actions per sidecar, the checkpoint goroutine writes the V2 checkpoints while
// commits and snapshots go on; after Close the one of version 20 names 7 sidecars (20
// files), all present, and a fresh load from it alone gives the 20 files and txn 20.
func TestBackgroundV2Checkpoints(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, err := Open(ctx, st, WithBackgroundCheckpoints(), WithV2SidecarFiles(3))
	if err != nil {
		t.Fatal(err)
	}
	p, m := newTableMetadata("t", testSchema(), nil, map[string]string{deltalog.PropCheckpointInterval: "5"})
	p = UpgradeProtocol(p, deltalog.FeatureV2Checkpoint)
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: &p, Metadata: &m, Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(i - 1), Adds: []deltalog.Add{fakeAdd(fmt.Sprint("f", i))},
			Txns: []deltalog.Txn{{AppID: "app", Version: int64(i)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := tbl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readLastCheckpoint(ctx, st); got != 20 {
		t.Fatalf("_last_checkpoint version %d after Close, want 20", got)
	}
	name := v2CheckpointName(t, st, 20)
	refs, err := CheckpointSidecars(ctx, st, name)
	if err != nil || len(refs) != 7 {
		t.Fatalf("checkpoint 20 names sidecars %v (%v), want 7", refs, err)
	}
	for _, r := range refs {
		if _, err := st.Stat(ctx, sidecarDir+"/"+r); err != nil {
			t.Errorf("sidecar %s: %v", r, err)
		}
	}
	for v := int64(0); v <= 20; v++ {
		if err := st.Delete(ctx, commitPath(v)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := loadSnapshot(ctx, st, time.Now())
	if err != nil {
		t.Fatalf("load from checkpoint 20 alone: %v", err)
	}
	if s.Version != 20 || s.Files.Len() != 20 || s.Txns["app"] != 20 {
		t.Fatalf("load from checkpoint 20 alone: version %d, %d files, txns %v; want 20, 20, app=20", s.Version, s.Files.Len(), s.Txns)
	}
}
