package deltawriter

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestV2CheckpointEdgeSizes writes the V2 checkpoint of snapshots at the edges of the
// inline threshold and of the sidecar size, and reads each back: the files and the
// unexpired tombstones come back exactly, in the expected number of sidecars of the
// expected rows (a sidecar of exactly per rows, then none of 0 rows; per+1 rows: a
// second sidecar of 1 row), or inline with no sidecar. Also a table of no files at
// all, and one of tombstones only (in sidecars: only remove rows).
func TestV2CheckpointEdgeSizes(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	defer func(r, i int) { cpChunkRows, v2InlineFiles = r, i }(cpChunkRows, v2InlineFiles)
	cpChunkRows = 16
	n, files := 99, 1
	var base *Snapshot
	var src *cpSource
	for files%2 == 1 { // the cases below want an even number of file actions
		n++
		base = v2Snapshot(now, n)
		var err error
		if src, err = newCPSource(base, now); err != nil {
			t.Fatal(err)
		}
		files = src.numAdds + len(src.removeKeys)
		src.close()
	}
	tombOnly := v2Snapshot(now, n)
	tombOnly.Files = NewFileSet()
	tombs := files - src.numAdds
	empty := v2Snapshot(now, 0)
	empty.Files, empty.tombstones = NewFileSet(), tombstoneSet{}
	for _, c := range []struct {
		name         string
		s            *Snapshot
		per, inline  int
		wantSidecars []int64 // rows per sidecar; nil: inline
	}{
		{"inline at the threshold", base, 1 << 20, files, nil},
		{"one over the inline threshold", base, 1 << 20, files - 1, []int64{int64(files)}},
		{"exactly one sidecar", base, files, 1, []int64{int64(files)}},
		{"one over a sidecar", base, files - 1, 1, []int64{int64(files - 1), 1}},
		{"exactly two sidecars", base, files / 2, 1, []int64{int64(files / 2), int64(files / 2)}},
		{"one over two sidecars", base, files/2 - 1, 1, []int64{int64(files/2 - 1), int64(files/2 - 1), 2}},
		{"tombstones only", tombOnly, 4, 1, func() []int64 {
			var r []int64
			for n := tombs; n > 0; n -= 4 {
				r = append(r, int64(min(4, n)))
			}
			return r
		}()},
		{"no files", empty, 4, 1, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			v2InlineFiles = c.inline
			st := newStore(t)
			w := checkpointWriter{sidecarFiles: c.per}
			if err := w.write(ctx, st, c.s, now); err != nil {
				t.Fatal(err)
			}
			name := v2CheckpointName(t, st, c.s.Version)
			top, err := st.Get(ctx, logDir+"/"+name)
			if err != nil {
				t.Fatal(err)
			}
			actions, err := deltalog.ParseCommit(bytes.NewReader(top))
			if err != nil {
				t.Fatal(err)
			}
			var rows []int64
			for _, a := range actions {
				if a.Sidecar == nil {
					continue
				}
				data, err := st.Get(ctx, sidecarDir+"/"+a.Sidecar.Path)
				if err != nil {
					t.Fatal(err)
				}
				f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, f.NumRows())
			}
			if !reflect.DeepEqual(rows, c.wantSidecars) {
				t.Fatalf("sidecar rows %v, want %v", rows, c.wantSidecars)
			}
			ents, err := st.List(ctx, sidecarDir)
			if err != nil || len(ents) != len(c.wantSidecars) {
				t.Fatalf("_sidecars holds %d files (%v), want %d", len(ents), err, len(c.wantSidecars))
			}
			got, err := readCheckpoint(ctx, st, c.s.Version, []string{name})
			if err != nil {
				t.Fatal(err)
			}
			// Empty tags (and a tombstone's empty partition values) are written as none by the
			// inline JSON form: compare them as nil.
			want := maps.Collect(c.s.Files.All())
			for k, a := range want {
				if a.PartitionValues == nil {
					a.PartitionValues = map[string]*string{}
				}
				if len(a.Tags) == 0 {
					a.Tags = nil
				}
				want[k] = a
			}
			g := maps.Collect(got.Files.All())
			for k, a := range g {
				if len(a.Tags) == 0 {
					a.Tags = nil
				}
				g[k] = a
			}
			if len(g) != len(want) || (len(want) > 0 && !reflect.DeepEqual(g, want)) {
				t.Errorf("%d files read back, want %d equal", len(g), len(want))
			}
			wantTomb := map[string]deltalog.Remove{}
			src, _ := newCPSource(c.s, now)
			for _, k := range src.removeKeys {
				r, _ := c.s.tombstones.get(k)
				r.Stats, r.Tags = "", nil // not kept in checkpoints
				if len(r.PartitionValues) == 0 {
					r.PartitionValues = nil
				}
				wantTomb[k] = r
			}
			gotTomb := got.Tombstones()
			for k, r := range gotTomb {
				if len(r.Tags) == 0 {
					r.Tags = nil
				}
				if len(r.PartitionValues) == 0 {
					r.PartitionValues = nil
				}
				gotTomb[k] = r
			}
			src.close()
			if len(gotTomb) != len(wantTomb) || (len(wantTomb) > 0 && !reflect.DeepEqual(gotTomb, wantTomb)) {
				t.Errorf("%d tombstones read back, want %d equal", len(gotTomb), len(wantTomb))
			}
			lc, err := st.Get(ctx, lastCheckpointPath)
			if err != nil {
				t.Fatal(err)
			}
			if wantPrefix := fmt.Sprintf(`{"version":%d,`, c.s.Version); !bytes.HasPrefix(lc, []byte(wantPrefix)) {
				t.Errorf("_last_checkpoint %s", lc)
			}
		})
	}
}
