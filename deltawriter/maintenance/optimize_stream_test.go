package maintenance

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// allTypesRow is row i of file f of the all-types table: every type, nulls at every
// level (a null struct, list, map, element and map value, and null leaves), negative
// decimals of both layouts, and values whose extremes lie in different files.
func allTypesRow(t *testing.T, f, i int) map[string]any {
	id := int64(f*1000 + i)
	r := map[string]any{"id": id}
	if i%7 != 3 {
		r["i"] = int32((int(id)*7919)%4000 - 2000)
	}
	if i%5 != 1 {
		r["s"] = fmt.Sprintf("%c-value-%04d-é", 'a'+rune((f*31+i)%26), id%997)
	}
	if f == 6 && i == 3 { // past the footer's bound: the row group cannot be copied
		r["s"] = strings.Repeat("~", parquetenc.MaxFooterBound+1)
	}
	if i%11 != 2 {
		r["d"] = float64(id%1000)/8 - 60
	}
	if i%3 != 0 {
		r["b"] = i%2 == 0
	}
	r["ts"] = id*1_000_003 - 5_000_000_000
	if i%17 != 0 {
		r["day"] = int32(id%400) - 200
	}
	r["dec10"] = id*13 - 20_000
	if i%13 != 4 {
		r["dec25"] = deltatest.FLBA(t, fmt.Sprintf("%d00000000000000000", id-6_000), deltawriter.DecimalBytes(25))
	}
	if i%9 != 5 {
		r["bin"] = []byte{byte(id), byte(id >> 8), 0}
	}
	switch i % 6 {
	case 0:
	case 1:
		r["st"] = map[string]any{"x": nil, "y": nil}
	default:
		r["st"] = map[string]any{"x": id * 3, "y": fmt.Sprintf("y%d", id%50)}
	}
	switch i % 5 {
	case 0:
	case 1:
		r["arr"] = []any{}
	default:
		r["arr"] = []any{fmt.Sprintf("t%d", id%20), nil, "z"}
	}
	switch i % 4 {
	case 0:
	case 1:
		r["m"] = []deltawriter.MapEntry{}
	default:
		r["m"] = []deltawriter.MapEntry{{Key: "k1", Value: id}, {Key: "k2", Value: nil}}
	}
	return r
}

// OPTIMIZE reads ingestd's files column by column and streams its output in row groups:
// with small row groups, a bin of 12 files (three with deletion vectors) becomes one file
// of several row groups holding exactly the live rows, with the add.stats a single
// WriteDataFile of those rows gives (exact numRecords, nullCount, minValues and maxValues
// over every row group), and in each row group the footer statistics the encoder writes
// for that row group's rows, byte for byte, whether its chunks were encoded, copied whole
// or made of copied pages. Decoded, or with every row group that may be copied copied as
// its encoded chunks (all but the three with deleted rows and the one holding a string
// past the footer's bound).
func TestOptimizeStreamsColumns(t *testing.T) {
	// the small files' chunks are copied as pages here, whatever their size
	defer func(v int64) { minCopiedChunkBytes = v }(minCopiedChunkBytes)
	minCopiedChunkBytes = 0
	for _, tc := range []struct {
		name               string
		rowGroup, copyFrom int64
		copiedGroups       int // row groups holding a source's chunk bytes; -1: not checked
		groups             int // output row groups; 0: not checked
	}{
		// small output row groups (one that holds a single source row group re-encoded has
		// its source's bytes again: the encoder is deterministic)
		{"decoded", 48 << 10, 1 << 40, -1, 0},
		// two output row groups for the rows decoded, the others are the copies: the file
		// holding the long string copies its dictionary-free leaves as pages, so the
		// files with deleted rows (read last, every leaf decoded) start a row group; that
		// file's row group, alone, is its source's bytes again
		{"copied", 1 << 40, 1, 9, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(n, c int64) { rowGroupBytes, copyRowGroupBytes = n, c }(rowGroupBytes, copyRowGroupBytes)
			rowGroupBytes, copyRowGroupBytes = tc.rowGroup, tc.copyFrom
			optimizeAllTypes(t, tc.copiedGroups, tc.groups)
		})
	}
}

func optimizeAllTypes(t *testing.T, copiedGroups, groups int) {
	ctx := context.Background()
	schema, err := deltalog.ParseSchema(deltatest.AllTypesSchema)
	if err != nil {
		t.Fatal(err)
	}
	tbl, pq, fo := createDVTable(t, t.TempDir(), schema)
	const files = 12
	sizes := []int{300, 40, 700, 5, 300, 1200, 90, 300, 300, 1, 450, 300}
	dels := map[int][]uint64{1: {0, 39}, 5: {3, 4, 5, 600, 1199}, 10: {7}}
	var adds []deltalog.Add
	var live []map[string]any
	for f := 0; f < files; f++ {
		rows := make([]map[string]any, sizes[f])
		deleted := map[uint64]bool{}
		for _, d := range dels[f] {
			deleted[d] = true
		}
		for i := range rows {
			rows[i] = allTypesRow(t, f, i)
			if !deleted[uint64(i)] {
				live = append(live, rows[i])
			}
		}
		vals, err := deltawriter.RowsToColumns(pq, rows)
		if err != nil {
			t.Fatal(err)
		}
		// the decoder's forms: dense words and bytes until a column's first null
		a, err := deltawriter.WriteColumns(ctx, tbl.Store(), pq, deltatest.ColumnsOf(pq, vals), len(rows), fo)
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, a)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 0, Adds: adds}); err != nil {
		t.Fatal(err)
	}
	var rd []deltawriter.RowDeletes
	for f, d := range dels {
		rd = append(rd, deltawriter.RowDeletes{Add: adds[f], Rows: d})
	}
	removes, dvAdds, err := deltawriter.DeleteRows(ctx, tbl.Store(), rd, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 1, Operation: "DELETE", Removes: removes, Adds: dvAdds}); err != nil {
		t.Fatal(err)
	}
	before := liveRows(t, tbl)
	if len(before) != len(live) {
		t.Fatalf("%d live rows before, want %d", len(before), len(live))
	}
	snap, _ := tbl.Snapshot(ctx)
	for _, a := range snap.Files.All() {
		r, err := snap.OpenDataFile(ctx, tbl.Store(), a, pq)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Columnar() {
			t.Fatalf("%s is read row by row", a.Path)
		}
	}

	res, err := Optimize(ctx, tbl, OptimizeOptions{MinFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved != files || res.FilesAdded != 1 || res.RowsWritten != int64(len(live)) || res.DeletionVectorsRemoved != 3 {
		t.Fatalf("result %+v", res)
	}
	after := liveRows(t, tbl)
	if len(after) != len(before) {
		t.Fatalf("%d live rows after, %d before", len(after), len(before))
	}
	for i := range before {
		if after[i] != before[i] {
			t.Fatalf("row %d\n got %s\nwant %s", i, after[i], before[i])
		}
	}
	snap, _ = tbl.Snapshot(ctx)
	var out deltalog.Add
	for _, a := range snap.Files.All() {
		out = a
	}
	// the stats of one file of the live rows, written whole
	if want := wholeFileStats(t, pq, live, fo); out.Stats != want {
		t.Errorf("stats\n got %s\nwant %s", out.Stats, want)
	}
	data, err := tbl.Store().Get(ctx, deltalog.CanonicalPath(out.Path))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.NumRows() != int64(len(live)) || len(f.RowGroups()) < 3 || (groups > 0 && len(f.RowGroups()) != groups) {
		t.Fatalf("%d rows in %d row groups, want %d rows in several", f.NumRows(), len(f.RowGroups()), len(live))
	}
	checkRowGroupStats(t, tbl, snap, out, pq, fo, f.Metadata().RowGroups)
	// a copied row group holds its source's chunk bytes: the source file's one row group
	var sources [][]byte
	for _, a := range adds {
		src, err := tbl.Store().Get(ctx, deltalog.CanonicalPath(a.Path))
		if err != nil {
			t.Fatal(err)
		}
		sf, err := parquet.OpenFile(bytes.NewReader(src), int64(len(src)))
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, src[4:4+sf.Metadata().RowGroups[0].TotalCompressedSize])
	}
	copied := 0
	for k, rg := range f.Metadata().RowGroups {
		if int(rg.Ordinal) != k {
			t.Errorf("row group %d has ordinal %d", k, rg.Ordinal)
		}
		for _, src := range sources {
			if bytes.Equal(data[rg.FileOffset:rg.FileOffset+rg.TotalCompressedSize], src) {
				copied++
			}
		}
	}
	if copiedGroups >= 0 && copied != copiedGroups {
		t.Errorf("%d row groups copied, want %d", copied, copiedGroups)
	}
}

var _ storage.Store = (*deltatest.MemStore)(nil)

// checkRowGroupStats checks the footer statistics of every column chunk of out (row
// groups rgs, decoded, copied as chunks or as pages) against those the encoder writes for
// the same rows in one row group: null count, minimum and maximum byte for byte.
func checkRowGroupStats(t *testing.T, tbl *deltawriter.Table, snap *deltawriter.Snapshot, out deltalog.Add, pq *parquet.Schema, fo deltawriter.FileOptions, rgs []format.RowGroup) {
	t.Helper()
	ctx := context.Background()
	var rows []map[string]any
	if _, err := snap.ReadDataFile(ctx, tbl.Store(), out, func(r map[string]any) error {
		if m, ok := r["m"].(map[string]any); ok { // a map is read as a Go map, written from entries
			es := []deltawriter.MapEntry{}
			for k, v := range m {
				es = append(es, deltawriter.MapEntry{Key: k, Value: v})
			}
			r["m"] = es
		}
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	at := 0
	for k, rg := range rgs {
		part := rows[at : at+int(rg.NumRows)]
		at += int(rg.NumRows)
		vals, err := deltawriter.RowsToColumns(pq, part)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := deltawriter.WriteColumns(ctx, deltatest.NewMemStore(&buf), pq, []column.Column(deltatest.Levelled(vals)), len(part), fo); err != nil {
			t.Fatal(err)
		}
		wf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(wf.Metadata().RowGroups); n != 1 {
			t.Fatalf("row group %d's rows encoded in %d row groups", k, n)
		}
		want := wf.Metadata().RowGroups[0]
		for l := range rg.Columns {
			g, w := rg.Columns[l].MetaData.Statistics, want.Columns[l].MetaData.Statistics
			if !reflect.DeepEqual(g, w) {
				t.Errorf("row group %d leaf %v: statistics %+v, the encoder's %+v", k, rg.Columns[l].MetaData.PathInSchema, g, w)
			}
		}
	}
	if at != len(rows) {
		t.Fatalf("%d rows in the row groups, %d read", at, len(rows))
	}
}
