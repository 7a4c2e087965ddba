package deltawriter

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// dvTable creates a table a long with deletion vectors on and commits one data file per
// entry of files, file i holding the values files[i] in order. It returns the table and
// the adds in the order of files.
func dvTable(t *testing.T, st storage.Store, conf map[string]string, files ...[]int64) (*Table, []deltalog.Add) {
	t.Helper()
	ctx := context.Background()
	tbl, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if conf == nil {
		conf = map[string]string{}
	}
	sd, _, err := PrepareSchemaChange(nil, SchemaChange{Schema: testSchema(), Properties: conf, Enable: []string{deltalog.FeatureDeletionVectors}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: sd.Protocol, Metadata: sd.Metadata, Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
	var adds []deltalog.Add
	for _, vals := range files {
		adds = append(adds, appendRows(t, tbl, vals))
	}
	return tbl, adds
}

// appendRows commits one data file of the values vals of column a.
func appendRows(t *testing.T, tbl *Table, vals []int64) deltalog.Add {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := snap.DataFileSchema()
	if err != nil {
		t.Fatal(err)
	}
	col := physicalName(snap.Schema.Fields[0], snap.ColumnMapping)
	rows := make([]map[string]any, len(vals))
	for i, v := range vals {
		rows[i] = map[string]any{col: v}
	}
	cols, err := RowsToColumns(pq, rows)
	if err != nil {
		t.Fatal(err)
	}
	a, err := WriteDataFile(ctx, tbl.Store(), pq, cols, len(rows), snap.FileOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: snap.Version, Adds: []deltalog.Add{a}}); err != nil {
		t.Fatal(err)
	}
	return a
}

func seq(from, to int64) []int64 {
	var out []int64
	for v := from; v < to; v++ {
		out = append(out, v)
	}
	return out
}

// tableValues reads every live value of column a (deletion vectors applied), sorted.
func tableValues(t *testing.T, tbl *Table) []int64 {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	col := physicalName(snap.Schema.Fields[0], snap.ColumnMapping)
	var out []int64
	for _, a := range snap.Files.All() {
		if _, err := snap.ReadDataFile(ctx, tbl.Store(), a, func(r map[string]any) error {
			out = append(out, r[col].(int64))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

func without(vals []int64, drop ...int64) []int64 {
	return slices.DeleteFunc(slices.Clone(vals), func(v int64) bool { return slices.Contains(drop, v) })
}

func dvRows(t *testing.T, st storage.Store, dv *deltalog.DeletionVector) []uint64 {
	t.Helper()
	d, err := ReadDeletionVector(context.Background(), st, dv)
	if err != nil {
		t.Fatal(err)
	}
	if d == nil {
		return nil
	}
	return d.bm.ToArray()
}

// RFC 32's test vector, and the inverse of z85Decode on a UUID.
func TestZ85Encode(t *testing.T) {
	if got := z85Encode([]byte{0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B}); got != "HelloWorld" {
		t.Fatalf("z85Encode = %q, want HelloWorld", got)
	}
	u, _ := hex.DecodeString("d2c639aa8816431aaaf6d3fe2512ff61")
	enc := z85Encode(u)
	// PROTOCOL.md, "Deletion Vector Descriptor Schema", example 1: prefix "ab" + this UUID.
	if enc != "^-aqEH.-t@S}K{vb[*k^" {
		t.Fatalf("z85Encode(uuid) = %q", enc)
	}
	if back, err := z85Decode(enc); err != nil || hex.EncodeToString(back) != "d2c639aa8816431aaaf6d3fe2512ff61" {
		t.Fatalf("round trip: %x, %v", back, err)
	}
}

// One DeleteRows over a fresh file: the DV file's bytes (version, size, bitmap, CRC), the
// descriptor, the remove and the add, exactly.
func TestDeleteRowsWritesDVFile(t *testing.T) {
	setInlineDVMax(t, 0)
	ctx := context.Background()
	st := newStore(t)
	tbl, adds := dvTable(t, st, nil, seq(100, 140))
	now := time.UnixMilli(1_700_000_000_123)
	removes, newAdds, err := DeleteRows(ctx, st, []RowDeletes{{Add: adds[0], Rows: []uint64{39, 0, 5, 5}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(removes) != 1 || len(newAdds) != 1 {
		t.Fatalf("%d removes, %d adds", len(removes), len(newAdds))
	}
	dv := newAdds[0].DeletionVector
	if dv == nil || dv.StorageType != "u" || dv.Offset == nil || *dv.Offset != 1 || dv.Cardinality != 3 || dv.SizeInBytes != 38 || dv.MaxRowIndex != nil || len(dv.PathOrInlineDv) != 20 {
		t.Fatalf("descriptor %s", jsonOf(t, dv))
	}
	name, err := dvPath(st, dv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, "deletion_vector_") || !isUUID(strings.TrimSuffix(strings.TrimPrefix(name, "deletion_vector_"), ".bin")) {
		t.Fatalf("DV file name %q", name)
	}
	file, err := st.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// version 1 | size 38 (BE) | magic 1681511377 (LE) | 1 bucket (8 bytes LE) | key 0 |
	// Roaring: cookie 12346, 1 container, key 0 cardinality-1 2, offset 16, values 0 5 39 |
	// CRC-32 (BE).
	bitmap := "d1d33964" + "0100000000000000" + "00000000" + "3a300000" + "01000000" + "00000200" + "10000000" + "000005002700"
	want := "01" + "00000026" + bitmap
	if got := hex.EncodeToString(file[:len(file)-4]); got != want {
		t.Fatalf("DV file\n got %s\nwant %s", got, want)
	}
	raw, _ := hex.DecodeString(bitmap)
	if crc := binary.BigEndian.Uint32(file[len(file)-4:]); crc != crc32.ChecksumIEEE(raw) {
		t.Fatalf("CRC %08x, want %08x", crc, crc32.ChecksumIEEE(raw))
	}
	if got := dvRows(t, st, dv); !slices.Equal(got, []uint64{0, 5, 39}) {
		t.Fatalf("rows read back %v", got)
	}

	rm := removes[0]
	if rm.Path != adds[0].Path || !rm.DataChange || rm.DeletionTimestamp == nil || *rm.DeletionTimestamp != 1_700_000_000_123 ||
		rm.ExtendedFileMetadata == nil || !*rm.ExtendedFileMetadata || rm.Size == nil || *rm.Size != adds[0].Size ||
		rm.Stats != adds[0].Stats || rm.DeletionVector != nil || rm.PartitionValues == nil {
		t.Fatalf("remove %s", jsonOf(t, rm))
	}
	na := newAdds[0]
	if na.Path != adds[0].Path || na.Size != adds[0].Size || na.ModificationTime != adds[0].ModificationTime || !na.DataChange {
		t.Fatalf("add %s", jsonOf(t, na))
	}
	if na.Stats != `{"maxValues":{"a":139},"minValues":{"a":100},"nullCount":{"a":0},"numRecords":40,"tightBounds":false}` {
		t.Fatalf("stats %s (was %s)", na.Stats, adds[0].Stats)
	}

	// Committed: the snapshot holds the file once, under its new DV, and reads 37 rows.
	snap, _ := tbl.Snapshot(ctx)
	v, err := tbl.Commit(ctx, Commit{ReadVersion: snap.Version, Operation: "DELETE", Removes: removes, Adds: newAdds})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ = tbl.Snapshot(ctx)
	if snap.Files.Len() != 1 || snap.Version != v {
		t.Fatalf("%d live files at version %d", snap.Files.Len(), snap.Version)
	}
	if !snap.Files.Has(deltalog.FileKey(na.Path, dv)) {
		t.Fatalf("live files %v: the new (path, dv) is missing", slices.Collect(maps.Keys(maps.Collect(snap.Files.All()))))
	}
	if got, want := tableValues(t, tbl), without(seq(100, 140), 100, 105, 139); !slices.Equal(got, want) {
		t.Fatalf("live values %v, want %v", got, want)
	}
	if _, ok := snap.Tombstones()[deltalog.FileKey(adds[0].Path, nil)]; !ok {
		t.Fatal("the old add is no tombstone")
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Merges: with an existing inline DV (rows 3, 4, 7, 11, 18, 29, as in PROTOCOL.md's
// example 3, whose bytes are in the older native format Spark no longer writes) and with an existing on-disk DV written by an earlier DeleteRows; two bitmaps in one
// file at their offsets; a file whose rows all go is only removed; a call that deletes
// nothing new returns nothing.
func TestDeleteRowsMerges(t *testing.T) {
	setInlineDVMax(t, 0)
	ctx := context.Background()
	st := newStore(t)
	// The inline DV is given to the first file by a commit of its own (as a reader would
	// find a Spark table), on a table with the feature on.
	tbl, adds := dvTable(t, st, nil, seq(0, 40), seq(1000, 1010), seq(2000, 2003))
	bm := roaring64.BitmapOf(3, 4, 7, 11, 18, 29)
	inlineBytes, err := encodeBitmapArray(bm)
	if err != nil || len(inlineBytes) != 44 {
		t.Fatalf("inline bitmap: %d bytes, %v", len(inlineBytes), err)
	}
	inline := &deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: z85Encode(inlineBytes), SizeInBytes: 44, Cardinality: 6}
	withInline := adds[0]
	withInline.DeletionVector = inline
	snap, _ := tbl.Snapshot(ctx)
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: snap.Version, Removes: []deltalog.Remove{{Path: adds[0].Path, DataChange: true}}, Adds: []deltalog.Add{withInline}}); err != nil {
		t.Fatal(err)
	}
	if got := dvRows(t, st, inline); !slices.Equal(got, []uint64{3, 4, 7, 11, 18, 29}) {
		t.Fatalf("inline DV reads %v", got)
	}

	removes, newAdds, err := DeleteRows(ctx, st, []RowDeletes{
		{Add: withInline, Rows: []uint64{4, 30}}, // 4 already deleted
		{Add: adds[1], Rows: []uint64{9}},        // fresh
		{Add: adds[2], Rows: []uint64{0, 1, 2}},  // every row: removed only
	}, time.UnixMilli(5))
	if err != nil {
		t.Fatal(err)
	}
	if len(removes) != 3 || len(newAdds) != 2 {
		t.Fatalf("%d removes, %d adds", len(removes), len(newAdds))
	}
	if removes[0].DeletionVector != inline || removes[2].Path != adds[2].Path {
		t.Fatalf("removes %s", jsonOf(t, removes))
	}
	d0, d1 := newAdds[0].DeletionVector, newAdds[1].DeletionVector
	if d0.PathOrInlineDv != d1.PathOrInlineDv {
		t.Fatalf("two DV files in one call: %q, %q", d0.PathOrInlineDv, d1.PathOrInlineDv)
	}
	if *d0.Offset != 1 || *d1.Offset != 1+4+d0.SizeInBytes+4 || d0.Cardinality != 7 || d1.Cardinality != 1 {
		t.Fatalf("descriptors %s %s", jsonOf(t, d0), jsonOf(t, d1))
	}
	name, _ := dvPath(st, d0)
	file, _ := st.Get(ctx, name)
	if int32(len(file)) != *d1.Offset+4+d1.SizeInBytes+4 {
		t.Fatalf("DV file of %d bytes, descriptors end at %d", len(file), *d1.Offset+4+d1.SizeInBytes+4)
	}
	if got := dvRows(t, st, d0); !slices.Equal(got, []uint64{3, 4, 7, 11, 18, 29, 30}) {
		t.Fatalf("merged with inline: %v", got)
	}
	if got := dvRows(t, st, d1); !slices.Equal(got, []uint64{9}) {
		t.Fatalf("fresh: %v", got)
	}
	snap, _ = tbl.Snapshot(ctx)
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: snap.Version, Removes: removes, Adds: newAdds}); err != nil {
		t.Fatal(err)
	}
	want := append(without(seq(0, 40), 3, 4, 7, 11, 18, 29, 30), seq(1000, 1009)...)
	if got := tableValues(t, tbl); !slices.Equal(got, want) {
		t.Fatalf("live values %v\nwant %v", got, want)
	}

	// Merge with the on-disk DV just written.
	removes, newAdds, err = DeleteRows(ctx, st, []RowDeletes{{Add: newAdds[1], Rows: []uint64{0, 9}}}, time.UnixMilli(6))
	if err != nil {
		t.Fatal(err)
	}
	if len(newAdds) != 1 || removes[0].DeletionVector.UniqueID() != d1.UniqueID() || newAdds[0].DeletionVector.Cardinality != 2 {
		t.Fatalf("removes %s adds %s", jsonOf(t, removes), jsonOf(t, newAdds))
	}
	if got := dvRows(t, st, newAdds[0].DeletionVector); !slices.Equal(got, []uint64{0, 9}) {
		t.Fatalf("merged with on-disk: %v", got)
	}

	// Nothing new: no action, no file.
	before, _ := st.List(ctx, "")
	removes, newAdds, err = DeleteRows(ctx, st, []RowDeletes{{Add: withInline, Rows: []uint64{3, 29}}}, time.UnixMilli(7))
	after, _ := st.List(ctx, "")
	if err != nil || removes != nil || newAdds != nil || len(after) != len(before) {
		t.Fatalf("nothing new: %v %v %v, %d → %d entries", removes, newAdds, err, len(before), len(after))
	}
	removes, newAdds, err = DeleteRows(ctx, st, nil, time.UnixMilli(7))
	if err != nil || removes != nil || newAdds != nil {
		t.Fatalf("empty: %v %v %v", removes, newAdds, err)
	}
}

func TestDeleteRowsErrors(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	_, adds := dvTable(t, st, nil, seq(0, 10))
	before, _ := st.List(ctx, "")
	if _, _, err := DeleteRows(ctx, st, []RowDeletes{{Add: adds[0], Rows: []uint64{10}}}, time.Now()); err == nil ||
		!strings.Contains(err.Error(), "row 10 is beyond the file's 10 records") {
		t.Errorf("row past the end: %v", err)
	}
	if _, _, err := DeleteRows(ctx, st, []RowDeletes{{Add: adds[0], Rows: []uint64{1}}, {Add: adds[0], Rows: []uint64{2}}}, time.Now()); err == nil ||
		!strings.Contains(err.Error(), "two entries for data file") {
		t.Errorf("two entries: %v", err)
	}
	if after, _ := st.List(ctx, ""); len(after) != len(before) {
		t.Errorf("a failed call wrote files: %d → %d entries", len(before), len(after))
	}
	// Without stats, numRecords comes from the footer and is written into the stats.
	noStats := adds[0]
	noStats.Stats = ""
	_, na, err := DeleteRows(ctx, st, []RowDeletes{{Add: noStats, Rows: []uint64{2}}}, time.Now())
	if err != nil || len(na) != 1 || na[0].Stats != `{"numRecords":10,"tightBounds":false}` {
		t.Fatalf("no stats: %v %s", err, jsonOf(t, na))
	}
	if _, _, err := DeleteRows(ctx, st, []RowDeletes{{Add: noStats, Rows: []uint64{10}}}, time.Now()); err == nil ||
		!strings.Contains(err.Error(), "beyond the file's 10 records") {
		t.Errorf("no stats, row past the end: %v", err)
	}
}

// The commit of DeleteRows' actions against concurrent commits: a winner that removed the
// file (OPTIMIZE) or gave it another DV makes ours fail with ErrConcurrentDelete; an
// append does not. Adds with a DV are refused on a table without the feature.
func TestDeleteRowsCommitConflicts(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		winner func(t *testing.T, w *Table, a deltalog.Add)
		want   error
	}{
		{"winner removed the file", func(t *testing.T, w *Table, a deltalog.Add) {
			snap, _ := w.Snapshot(ctx)
			if _, err := w.Commit(ctx, Commit{ReadVersion: snap.Version, Operation: "OPTIMIZE",
				Removes: []deltalog.Remove{{Path: a.Path, DataChange: false}}, Adds: []deltalog.Add{fakeAdd("compacted")}}); err != nil {
				t.Fatal(err)
			}
		}, ErrConcurrentDelete},
		{"winner gave the file another DV", func(t *testing.T, w *Table, a deltalog.Add) {
			r, ad, err := DeleteRows(ctx, w.Store(), []RowDeletes{{Add: a, Rows: []uint64{7}}}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			snap, _ := w.Snapshot(ctx)
			if _, err := w.Commit(ctx, Commit{ReadVersion: snap.Version, Removes: r, Adds: ad}); err != nil {
				t.Fatal(err)
			}
		}, ErrConcurrentDelete},
		{"winner appended", func(t *testing.T, w *Table, a deltalog.Add) {
			appendRows(t, w, []int64{99})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			tbl, adds := dvTable(t, st, nil, seq(0, 10))
			read, _ := tbl.Snapshot(ctx)
			removes, newAdds, err := DeleteRows(ctx, st, []RowDeletes{{Add: adds[0], Rows: []uint64{1}}}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			other, err := Open(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			tc.winner(t, other, adds[0])
			_, err = tbl.Commit(ctx, Commit{ReadVersion: read.Version, Removes: removes, Adds: newAdds})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got, want := tableValues(t, tbl), append(without(seq(0, 10), 1), 99); !slices.Equal(got, want) {
					t.Fatalf("values %v, want %v", got, want)
				}
				return
			}
			var cde *ConcurrentDeleteError
			if !errors.Is(err, tc.want) || !errors.As(err, &cde) || len(cde.Paths) != 1 || cde.Paths[0] != adds[0].Path {
				t.Fatalf("commit: %v", err)
			}
		})
	}

	t.Run("table without the feature", func(t *testing.T) {
		st := newStore(t)
		tbl, err := Open(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		createTable(t, tbl, nil)
		a := appendRows(t, tbl, seq(0, 10))
		removes, newAdds, err := DeleteRows(ctx, st, []RowDeletes{{Add: a, Rows: []uint64{1}}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		_, err = tbl.Commit(ctx, Commit{ReadVersion: 1, Removes: removes, Adds: newAdds})
		if !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), "delta.enableDeletionVectors=true") {
			t.Fatalf("commit: %v", err)
		}
	})
}

// A checkpoint carries the DVs: the table loaded from the checkpoint alone (the JSON
// commits before it deleted) has the same files, DVs and live rows.
func TestDeletionVectorsInCheckpoint(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, adds := dvTable(t, st, map[string]string{deltalog.PropCheckpointInterval: "3"}, seq(0, 10), seq(10, 20))
	removes, newAdds, err := DeleteRows(ctx, st, []RowDeletes{{Add: adds[0], Rows: []uint64{0, 9}}, {Add: adds[1], Rows: []uint64{5}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := tbl.Commit(ctx, Commit{ReadVersion: 2, Removes: removes, Adds: newAdds})
	if err != nil || v != 3 {
		t.Fatalf("commit %d: %v", v, err)
	}
	want, _ := tbl.Snapshot(ctx)
	for i := 0; i <= 3; i++ {
		if err := os.Remove(filepath.Join(st.Root(), commitPath(int64(i)))); err != nil {
			t.Fatal(err)
		}
	}
	fresh, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fresh.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if jsonOf(t, got.Files) != jsonOf(t, want.Files) {
		t.Fatalf("files from the checkpoint\n%s\nwant\n%s", jsonOf(t, got.Files), jsonOf(t, want.Files))
	}
	if vals, want := tableValues(t, fresh), without(seq(0, 20), 0, 9, 15); !slices.Equal(vals, want) {
		t.Fatalf("values %v, want %v", vals, want)
	}
	for _, r := range removes {
		if _, ok := got.Tombstones()[deltalog.FileKey(r.Path, r.DeletionVector)]; !ok {
			t.Errorf("tombstone of %s missing from the checkpoint", r.Path)
		}
	}
}

// Turning deletion vectors on through PrepareSchemaChange: the protocol gains
// deletionVectors as a reader and writer feature, legacy versions listing the features
// they implied, and delta.enableDeletionVectors becomes true; CheckDeletes says when
// that is needed.
func TestEnableDeletionVectors(t *testing.T) {
	ctx := context.Background()
	cm := `,"delta.columnMapping.mode":"name","delta.columnMapping.maxColumnId":"1"`
	field := `{\"name\":\"a\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}`
	cmField := `{\"name\":\"a\",\"type\":\"long\",\"nullable\":true,\"metadata\":{\"delta.columnMapping.id\":1,\"delta.columnMapping.physicalName\":\"col-a\"}}`
	for _, tc := range []struct {
		name, protocol, conf, field string
		want                        deltalog.Protocol
	}{
		{"legacy (1,2)", `{"minReaderVersion":1,"minWriterVersion":2}`, "", field,
			deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"},
				WriterFeatures: []string{"appendOnly", "invariants", "deletionVectors"}}},
		{"legacy (1,4)", `{"minReaderVersion":1,"minWriterVersion":4}`, "", field,
			deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"},
				WriterFeatures: []string{"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "deletionVectors"}}},
		{"legacy (2,5)", `{"minReaderVersion":2,"minWriterVersion":5}`, cm, cmField,
			deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"columnMapping", "deletionVectors"},
				WriterFeatures: []string{"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping", "deletionVectors"}}},
		{"writer features (1,7)", `{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["appendOnly","invariants"]}`, "", field,
			deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"},
				WriterFeatures: []string{"appendOnly", "invariants", "deletionVectors"}}},
		{"feature lists (3,7)", `{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["timestampNtz"],"writerFeatures":["timestampNtz","domainMetadata"]}`, "", field,
			deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz", "deletionVectors"},
				WriterFeatures: []string{"timestampNtz", "domainMetadata", "deletionVectors"}}},
		{"feature present, property unset", `{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors"]}`, "", field,
			deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			meta := `{"metaData":{"id":"11111111-1111-4111-8111-111111111111","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[` +
				tc.field + `]}","partitionColumns":[],"configuration":{"delta.checkpointInterval":"100"` + tc.conf + `},"createdTime":1}}`
			writeCommits(t, st, `{"protocol":`+tc.protocol+`}`+"\n"+meta)
			tbl, err := Open(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			enable, err := snap.CheckDeletes(DeleteWithDeletionVectors)
			if err != nil || !enable {
				t.Fatalf("CheckDeletes = %v, %v; want enable", enable, err)
			}
			if enable, err := snap.CheckDeletes(DeleteByRewrite); err != nil || enable {
				t.Fatalf("CheckDeletes(rewrite) = %v, %v", enable, err)
			}
			sd, _, err := PrepareSchemaChange(snap, SchemaChange{Enable: []string{deltalog.FeatureDeletionVectors}})
			if err != nil {
				t.Fatal(err)
			}
			gotP := snap.Protocol
			if sd.Protocol != nil {
				gotP = *sd.Protocol
			}
			if jsonOf(t, gotP) != jsonOf(t, tc.want) {
				t.Fatalf("protocol %s\nwant %s", jsonOf(t, gotP), jsonOf(t, tc.want))
			}
			if sd.Metadata == nil || sd.Metadata.Configuration[deltalog.PropEnableDeletionVectors] != "true" || sd.Metadata.SchemaString != snap.Metadata.SchemaString {
				t.Fatalf("metadata %s", jsonOf(t, sd.Metadata))
			}
			if _, err := tbl.Commit(ctx, Commit{ReadVersion: 0, Protocol: sd.Protocol, Metadata: sd.Metadata, Operation: "SET TBLPROPERTIES"}); err != nil {
				t.Fatal(err)
			}
			snap, _ = tbl.Snapshot(ctx)
			if enable, err := snap.CheckDeletes(DeleteWithDeletionVectors); err != nil || enable || !snap.DeletionVectorsEnabled() {
				t.Fatalf("after enabling: CheckDeletes = %v, %v", enable, err)
			}
			// Deletes now commit.
			a := appendRows(t, tbl, seq(0, 5))
			r, ad, err := DeleteRows(ctx, st, []RowDeletes{{Add: a, Rows: []uint64{2}}}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.Commit(ctx, Commit{ReadVersion: snap.Version + 1, Removes: r, Adds: ad}); err != nil {
				t.Fatal(err)
			}
			if got := tableValues(t, tbl); !slices.Equal(got, []int64{0, 1, 3, 4}) {
				t.Fatalf("values %v", got)
			}
		})
	}

	// A new table gets the feature and the property on create.
	sd, _, err := PrepareSchemaChange(nil, SchemaChange{Schema: testSchema(), Enable: []string{deltalog.FeatureDeletionVectors}})
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(t, sd.Protocol); got != `{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["appendOnly","invariants","deletionVectors"]}` ||
		sd.Metadata.Configuration[deltalog.PropEnableDeletionVectors] != "true" {
		t.Fatalf("create: %s %v", got, sd.Metadata.Configuration)
	}
}

// CheckDeletes refuses append-only tables, tables with the change data feed, and, for
// deletion vectors, tables that turned them off; a table that does not exist needs them
// enabled.
func TestCheckDeletesRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		conf      map[string]string
		mode      DeleteMode
		wantError string
	}{
		{map[string]string{"delta.appendOnly": "true"}, DeleteWithDeletionVectors, "delta.appendOnly=true"},
		{map[string]string{"delta.appendOnly": "TRUE"}, DeleteByRewrite, "delta.appendOnly=true"},
		{map[string]string{"delta.enableChangeDataFeed": "true"}, DeleteWithDeletionVectors, "delta.enableChangeDataFeed=true"},
		{map[string]string{"delta.enableChangeDataFeed": "true"}, DeleteByRewrite, "delta.enableChangeDataFeed=true"},
		{map[string]string{"delta.enableDeletionVectors": "false"}, DeleteWithDeletionVectors, "delta.enableDeletionVectors=false"},
		{map[string]string{"delta.enableDeletionVectors": "false"}, DeleteByRewrite, ""},
		{map[string]string{"delta.appendOnly": "false", "delta.enableChangeDataFeed": "false"}, DeleteByRewrite, ""},
	} {
		tbl, err := Open(ctx, newStore(t))
		if err != nil {
			t.Fatal(err)
		}
		createTable(t, tbl, tc.conf)
		snap, _ := tbl.Snapshot(ctx)
		_, err = snap.CheckDeletes(tc.mode)
		if tc.wantError == "" {
			if err != nil {
				t.Errorf("%v %v: %v", tc.conf, tc.mode, err)
			}
			continue
		}
		if !errors.Is(err, ErrDeletesRefused) || !strings.Contains(err.Error(), tc.wantError) {
			t.Errorf("%v %v: %v", tc.conf, tc.mode, err)
		}
	}
	empty := emptySnapshot()
	if enable, err := empty.CheckDeletes(DeleteWithDeletionVectors); !enable || err != nil {
		t.Errorf("no table: %v %v", enable, err)
	}
}

// Copy-on-write: the file rewritten without the rows asked and without those its DV
// deletes; in its partition directory with its partition values; nothing when no row
// remains; rows past the end refused.
func TestRewriteWithoutRows(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, adds := dvTable(t, st, nil, seq(0, 10), seq(10, 13))
	r, ad, err := DeleteRows(ctx, st, []RowDeletes{{Add: adds[0], Rows: []uint64{0, 1}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: 2, Removes: r, Adds: ad}); err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	now := time.UnixMilli(1_700_000_000_000)
	rm, na, err := snap.RewriteWithoutRows(ctx, st, ad[0], []uint64{1, 5, 9}, now)
	if err != nil {
		t.Fatal(err)
	}
	if rm.Path != adds[0].Path || rm.DeletionVector == nil || rm.DeletionVector.UniqueID() != ad[0].DeletionVector.UniqueID() || !rm.DataChange ||
		*rm.DeletionTimestamp != now.UnixMilli() || *rm.Size != adds[0].Size {
		t.Fatalf("remove %s", jsonOf(t, rm))
	}
	if na == nil || na.Path == adds[0].Path || na.DeletionVector != nil || !na.DataChange ||
		na.Stats != `{"numRecords":6,"minValues":{"a":2},"maxValues":{"a":8},"nullCount":{"a":0}}` {
		t.Fatalf("add %s", jsonOf(t, na))
	}
	rm2, na2, err := snap.RewriteWithoutRows(ctx, st, adds[1], []uint64{0, 1, 2}, now)
	if err != nil || na2 != nil || rm2.Path != adds[1].Path {
		t.Fatalf("every row: %s %v %v", jsonOf(t, rm2), na2, err)
	}
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: snap.Version, Removes: []deltalog.Remove{rm, rm2}, Adds: []deltalog.Add{*na}}); err != nil {
		t.Fatal(err)
	}
	if got := tableValues(t, tbl); !slices.Equal(got, []int64{2, 3, 4, 6, 7, 8}) {
		t.Fatalf("values %v", got)
	}
	snap, _ = tbl.Snapshot(ctx)
	if _, _, err := snap.RewriteWithoutRows(ctx, st, *na, []uint64{6}, now); err == nil || !strings.Contains(err.Error(), "row 6 is beyond the file's 6 rows") {
		t.Fatalf("past the end: %v", err)
	}

	// A partitioned table: the new file stays in the partition directory.
	pst := newStore(t)
	ptbl, err := Open(ctx, pst)
	if err != nil {
		t.Fatal(err)
	}
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "a", Type: deltalog.Long, Nullable: true}, {Name: "p", Type: deltalog.String, Nullable: true}}}
	psd, fo, err := PrepareSchemaChange(nil, SchemaChange{Schema: schema, PartitionColumns: []string{"p"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ptbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: psd.Protocol, Metadata: psd.Metadata}); err != nil {
		t.Fatal(err)
	}
	psnap, _ := ptbl.Snapshot(ctx)
	pq, _ := psnap.DataFileSchema()
	cols, err := RowsToColumns(pq, []map[string]any{{"a": int64(1)}, {"a": int64(2)}})
	if err != nil {
		t.Fatal(err)
	}
	fo.Dir, fo.PartitionValues = "p=x y", map[string]*string{"p": ptrTo("x y")}
	pa, err := WriteDataFile(ctx, pst, pq, cols, 2, fo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ptbl.Commit(ctx, Commit{ReadVersion: 0, Adds: []deltalog.Add{pa}}); err != nil {
		t.Fatal(err)
	}
	psnap, _ = ptbl.Snapshot(ctx)
	_, pna, err := psnap.RewriteWithoutRows(ctx, pst, pa, []uint64{0}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pna.Path, "p=x%20y/part-") || *pna.PartitionValues["p"] != "x y" || pna.Stats != `{"numRecords":1,"minValues":{"a":2},"maxValues":{"a":2},"nullCount":{"a":0}}` {
		t.Fatalf("partitioned add %s", jsonOf(t, pna))
	}
}

// setInlineDVMax moves DeleteRows' inline cut-off for the test t.
func setInlineDVMax(t *testing.T, n int) {
	old := inlineDVMaxBytes
	inlineDVMaxBytes = n
	t.Cleanup(func() { inlineDVMaxBytes = old })
}

// Inline vectors as Spark writes them (testdata/delta-kernel-rs/data/cdf-table-with-dv,
// versions 3 and 4): the bitmap of rows {0, 1, 4, 5} (40 bytes) and of {0, 5} (36
// bytes) encode to exactly Spark's pathOrInlineDv and decode back. An unaligned bitmap
// (one row: 34 bytes) is zero-padded to 36 bytes (45 characters) with sizeInBytes 34; a
// Spark string whose last group overflows 32 bits decodes to its low 32 bits.
func TestInlineDVZ85(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		rows []uint64
		z85  string
		size int32
	}{
		{[]uint64{0, 1, 4, 5}, "^Bg9^0rr910000000000iXQKl0rr91000935c8Xg000311onP9", 40},
		{[]uint64{0, 5}, "^Bg9^0rr910000000000iXQKl0rr91000315c8Xg000f5", 36},
		{[]uint64{7}, "^Bg9^0rr910000000000iXQKl0rr91000005c8Xg2lj-7", 34},
	} {
		data, err := encodeBitmapArray(roaring64.BitmapOf(c.rows...))
		if err != nil {
			t.Fatal(err)
		}
		dv := inlineDV(data, int64(len(c.rows)))
		want := deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: c.z85, SizeInBytes: c.size, Cardinality: int64(len(c.rows))}
		if dv.Offset != nil || *dv != want {
			t.Fatalf("rows %v: descriptor %s, want %s", c.rows, jsonOf(t, dv), jsonOf(t, want))
		}
		if got := dvRows(t, nil, &want); !slices.Equal(got, c.rows) {
			t.Fatalf("%s reads %v, want %v", c.z85, got, c.rows)
		}
		b, _ := json.Marshal(dv)
		if !bytes.Contains(b, []byte(`"storageType":"i"`)) || bytes.Contains(b, []byte("offset")) {
			t.Fatalf("JSON %s: an inline descriptor has no offset", b)
		}
	}
	// 34 bytes of one row padded with 00 00: the last group is 4 bytes 07 00 00 00.
	if b, err := z85Decode("2lj-7"); err != nil || hex.EncodeToString(b) != "07000000" {
		t.Fatalf("2lj-7 = %x, %v", b, err)
	}
	// Version 5 of the same Spark table: "##093" is 84·85⁴+… = 0x1086eb2d8.
	b, err := z85Decode("^Bg9^0rr910000000000iXQKl0rr91000005c8Xg##093")
	if err != nil || hex.EncodeToString(b[32:]) != "086eb2d8" {
		t.Fatalf("overflowing group: %x, %v", b, err)
	}
	rows, err := ReadDeletionVector(ctx, nil, &deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: "^Bg9^0rr910000000000iXQKl0rr91000005c8Xg##093", SizeInBytes: 34, Cardinality: 1})
	if err != nil || !slices.Equal(rows.bm.ToArray(), []uint64{0x6e08}) {
		t.Fatalf("Spark's version 5 vector: %v, %v", rows, err)
	}
}

// DeleteRows at the default cut-off: a one-row vector goes inline (no file is written); in
// one call with a vector over the cut-off, only that one goes to a file.
func TestDeleteRowsInline(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, adds := dvTable(t, st, nil, seq(0, 40), seq(0, 3000))
	before, _ := st.List(ctx, "")
	removes, newAdds, err := DeleteRows(ctx, st, []RowDeletes{{Add: adds[0], Rows: []uint64{7}}}, time.UnixMilli(5))
	if err != nil {
		t.Fatal(err)
	}
	after, _ := st.List(ctx, "")
	want := deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: "^Bg9^0rr910000000000iXQKl0rr91000005c8Xg2lj-7", SizeInBytes: 34, Cardinality: 1}
	if len(newAdds) != 1 || len(removes) != 1 || *newAdds[0].DeletionVector != want || len(after) != len(before) {
		t.Fatalf("adds %s, %d → %d store entries", jsonOf(t, newAdds), len(before), len(after))
	}
	snap, _ := tbl.Snapshot(ctx)
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: snap.Version, Removes: removes, Adds: newAdds}); err != nil {
		t.Fatal(err)
	}

	// Every other row of the 3,000-row file: 1,500 values, 3,032 bytes, over 2 KiB. The
	// inline one gets a second row and stays inline.
	var many []uint64
	for r := uint64(0); r < 3000; r += 2 {
		many = append(many, r)
	}
	removes, newAdds, err = DeleteRows(ctx, st, []RowDeletes{{Add: newAdds[0], Rows: []uint64{8}}, {Add: adds[1], Rows: many}}, time.UnixMilli(6))
	if err != nil {
		t.Fatal(err)
	}
	d0, d1 := newAdds[0].DeletionVector, newAdds[1].DeletionVector
	if d0.StorageType != "i" || d0.SizeInBytes != 36 || d0.Offset != nil || removes[0].DeletionVector.UniqueID() != want.UniqueID() {
		t.Fatalf("small vector %s", jsonOf(t, d0))
	}
	if d1.StorageType != "u" || d1.SizeInBytes != 3032 || d1.Offset == nil || *d1.Offset != 1 || d1.Cardinality != 1500 {
		t.Fatalf("large vector %s", jsonOf(t, d1))
	}
	if got := dvRows(t, st, d0); !slices.Equal(got, []uint64{7, 8}) {
		t.Fatalf("small vector reads %v", got)
	}
	if got := dvRows(t, st, d1); !slices.Equal(got, many) {
		t.Fatalf("large vector reads %d rows", len(got))
	}
	snap, _ = tbl.Snapshot(ctx)
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: snap.Version, Removes: removes, Adds: newAdds}); err != nil {
		t.Fatal(err)
	}
	if got := len(tableValues(t, tbl)); got != 38+1500 {
		t.Fatalf("%d live rows, want %d", got, 38+1500)
	}
}
