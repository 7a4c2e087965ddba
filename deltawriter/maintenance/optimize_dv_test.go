package maintenance

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// createDVTable creates a table of schema with deletion vectors on at root and returns
// it with its data files' Parquet schema and options.
func createDVTable(t *testing.T, root string, schema *deltalog.StructType) (*deltawriter.Table, *parquet.Schema, deltawriter.FileOptions) {
	t.Helper()
	ctx := context.Background()
	tbl := openTable(t, root)
	sd, fo, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Schema: schema, Enable: []string{deltalog.FeatureDeletionVectors}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: sd.Protocol, Metadata: sd.Metadata}); err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	pq, _ := snap.DataFileSchema()
	return tbl, pq, fo
}

// dvFiles creates a table (a long) with deletion vectors on at root and commits one data
// file per entry of files, then deletes rows dels[i] of file i with DeleteRows in one
// commit. It returns the table.
func dvFiles(t *testing.T, root string, files [][]int64, dels [][]uint64) *deltawriter.Table {
	t.Helper()
	ctx := context.Background()
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "a", Type: deltalog.Long, Nullable: true}}}
	tbl, pq, fo := createDVTable(t, root, schema)
	var adds []deltalog.Add
	for _, vals := range files {
		rows := make([]map[string]any, len(vals))
		for i, v := range vals {
			rows[i] = map[string]any{"a": v}
		}
		cols, err := deltawriter.RowsToColumns(pq, rows)
		if err != nil {
			t.Fatal(err)
		}
		a, err := deltawriter.WriteDataFile(ctx, tbl.Store(), pq, cols, len(rows), fo)
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, a)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 0, Adds: adds}); err != nil {
		t.Fatal(err)
	}
	if dels == nil {
		return tbl
	}
	var rd []deltawriter.RowDeletes
	for i, d := range dels {
		if len(d) > 0 {
			rd = append(rd, deltawriter.RowDeletes{Add: adds[i], Rows: d})
		}
	}
	removes, newAdds, err := deltawriter.DeleteRows(ctx, tbl.Store(), rd, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 1, Operation: "DELETE", Removes: removes, Adds: newAdds}); err != nil {
		t.Fatal(err)
	}
	return tbl
}

func span(from, to int64) []int64 {
	var out []int64
	for v := from; v < to; v++ {
		out = append(out, v)
	}
	return out
}

// OPTIMIZE purges deleted rows: below MinFiles, a file whose DV deletes more than 5% of
// its rows is rewritten with a clean small file beside it, and the live rows stay the
// same; a second run has nothing to do. (The file whose every row the DELETE took was
// removed by DeleteRows already.)
func TestOptimizePurgesDeletedRows(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	tbl := dvFiles(t, root,
		[][]int64{span(0, 20), span(100, 103), span(200, 210)},
		[][]uint64{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {0, 1, 2}, nil})
	before := liveRows(t, tbl)
	if len(before) != 20 {
		t.Fatalf("%d live rows before", len(before))
	}
	snap, _ := tbl.Snapshot(ctx)
	res, err := Optimize(ctx, tbl, OptimizeOptions{MinFiles: 10})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Files.Len() != 2 || res.Version != snap.Version+1 || res.FilesRemoved != 2 || res.FilesAdded != 1 || res.DeletionVectorsRemoved != 1 || res.RowsWritten != 20 {
		t.Fatalf("result %+v", res)
	}
	if after := liveRows(t, openTable(t, root)); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("rows changed\nbefore %v\nafter  %v", before, after)
	}
	var removes, adds int
	for _, a := range commitActions(t, root, res.Version) {
		switch {
		case a.Remove != nil:
			removes++
			if a.Remove.DataChange {
				t.Errorf("remove %s with dataChange true", a.Remove.Path)
			}
		case a.Add != nil:
			adds++
			if n, _ := a.Add.NumRecords(); n != 20 || a.Add.DeletionVector != nil {
				t.Errorf("add with %d records, dv %v", n, a.Add.DeletionVector)
			}
		}
	}
	if removes != 2 || adds != 1 {
		t.Fatalf("%d removes, %d adds", removes, adds)
	}
	res, err = Optimize(ctx, tbl, OptimizeOptions{MinFiles: 10})
	if err != nil || res.Version != -1 {
		t.Fatalf("second run: %+v, %v", res, err)
	}
}

// Files whose deletion vector deletes every row (as another writer may leave them): they
// are removed, no file is written. A file with few deletes (1 of 100, under 5%) and too
// few small files: left alone.
func TestOptimizeDeadFilesAndLightDeletes(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	tbl := dvFiles(t, root, [][]int64{span(0, 2), span(10, 12)}, nil)
	snap, _ := tbl.Snapshot(ctx)
	var removes []deltalog.Remove
	var adds []deltalog.Add
	for _, a := range snap.Files.All() {
		removes = append(removes, deltalog.Remove{Path: a.Path, DataChange: true})
		a.DeletionVector = inlineDV(t, 0, 1)
		adds = append(adds, a)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Removes: removes, Adds: adds}); err != nil {
		t.Fatal(err)
	}
	if rows := liveRows(t, tbl); len(rows) != 0 {
		t.Fatalf("live rows %v", rows)
	}
	res, err := Optimize(ctx, tbl, OptimizeOptions{MinFiles: 10})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ = tbl.Snapshot(ctx)
	if res.FilesRemoved != 2 || res.FilesAdded != 0 || res.RowsWritten != 0 || res.DeletionVectorsRemoved != 2 || snap.Files.Len() != 0 {
		t.Fatalf("result %+v, %d files left", res, snap.Files.Len())
	}

	root = t.TempDir()
	tbl = dvFiles(t, root, [][]int64{span(0, 100), span(100, 110)}, [][]uint64{{7}, nil})
	res, err = Optimize(ctx, tbl, OptimizeOptions{MinFiles: 10})
	if err != nil || res.Version != -1 || len(res.Partitions) != 0 {
		t.Fatalf("light deletes: %+v, %v", res, err)
	}
}

// inlineDV is an inline deletion vector (storageType "i") deleting rows.
func inlineDV(t *testing.T, rows ...uint64) *deltalog.DeletionVector {
	t.Helper()
	var buf bytes.Buffer
	_ = binary.Write(&buf, binary.LittleEndian, uint32(1681511377))
	if _, err := roaring64.BitmapOf(rows...).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	for buf.Len()%4 != 0 {
		buf.WriteByte(0)
	}
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
	var z strings.Builder
	b := buf.Bytes()
	for i := 0; i < len(b); i += 4 {
		v := binary.BigEndian.Uint32(b[i:])
		var g [5]byte
		for j := 4; j >= 0; j-- {
			g[j] = alphabet[v%85]
			v /= 85
		}
		z.Write(g[:])
	}
	return &deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: z.String(), SizeInBytes: int32(len(b)), Cardinality: int64(len(rows))}
}
