package maintenance

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
)

// pagesRow is row i of file f: id (unique: dictionary-free), cat (4 values: dictionary),
// note (unique text, null every 13th row: dictionary-free), n (a double, NaN in file 3:
// no footer bounds).
func pagesRow(f, i int) map[string]any {
	id := int64(f*1000 + i)
	r := map[string]any{"id": id, "cat": fmt.Sprintf("cat-%d", (f+i)%4), "n": float64(id%777)/4 - 50}
	if i%13 != 7 {
		r["note"] = fmt.Sprintf("note %05d of file %02d: %x", i, f, id*2654435761)
	}
	if f == 3 && i == 5 {
		r["n"] = math.NaN()
	}
	return r
}

// row is pagesRow(f, i), with n below 0 written as 0.0 when zeroMin.
func (tc pagesCase) row(f, i int) map[string]any {
	r := pagesRow(f, i)
	if n, ok := r["n"].(float64); ok && tc.zeroMin && n < 0 {
		r["n"] = 0.0
	}
	return r
}

type pagesCase struct {
	name    string
	rows    []int        // rows per file
	zeroMin bool         // n below 0 is written as 0.0
	zstd    map[int]bool // files written with zstd (the table's codec is snappy)
	dels    map[int][]uint64
	copied  int // chunks written from copied pages
	groups  int // output row groups
	// minChunk is the smallest source chunk copied (minCopiedChunkBytes); 0 (copy the
	// small test files' chunks) unless set
	minChunk int64
}

// OPTIMIZE of small row groups copies the pages of their dictionary-free leaves (id,
// note, n) into the output chunk as they are and decodes the dictionary-encoded one
// (cat), in the same row group: the rows read back are the sources' rows, file after
// file, every value in order; a copied chunk's bytes are the sources' chunks back to
// back; its footer statistics and the add.stats are those of the rows. A leaf whose
// source chunks have another codec, or files with deletion vectors, are decoded.
func TestOptimizeCopiesPages(t *testing.T) {
	for _, tc := range []pagesCase{
		{name: "copied", rows: []int{200, 150, 300, 260, 90, 120}, copied: 3, groups: 1},
		// every source chunk has another codec: nothing copied
		{name: "other codec", rows: []int{200, 150, 300}, zstd: map[int]bool{0: true, 1: true, 2: true}, copied: 0, groups: 1},
		// the zstd files are the largest, read last: the snappy files' pages are copied
		// into a first row group, then every leaf is decoded
		{name: "codecs mixed", rows: []int{100, 110, 900, 950}, zstd: map[int]bool{2: true, 3: true}, copied: 3, groups: 2},
		// files with deletion vectors are read last and decoded
		{name: "deletion vectors", rows: []int{200, 150, 300, 260}, dels: map[int][]uint64{0: {3}, 2: {0, 299}}, copied: 3, groups: 2},
		{name: "all deletion vectors", rows: []int{200, 150}, dels: map[int][]uint64{0: {3}, 1: {1}}, copied: 0, groups: 1},
		// at the default threshold (16 KiB): chunks under it are decoded (many tiny files
		// would otherwise leave as many tiny pages): every chunk of files of 150–300 rows;
		// of files of about 1,000 rows, id and n (8 KB) but not note (about 35 KB)
		{name: "small chunks decoded", rows: []int{200, 150, 300}, minChunk: deltawriter.DefaultMinCopiedChunkBytes, copied: 0, groups: 1},
		{name: "large chunks copied", rows: []int{999, 998}, minChunk: deltawriter.DefaultMinCopiedChunkBytes, copied: 1, groups: 1},
		// n's minimum is 0.0, which the footers hold as -0.0: add.stats still says 0
		{name: "zero minimum", rows: []int{200, 150, 300}, zeroMin: true, copied: 3, groups: 1},
	} {
		t.Run(tc.name, func(t *testing.T) { optimizePages(t, tc) })
	}
}

func optimizePages(t *testing.T, tc pagesCase) {
	ctx := context.Background()
	defer func(f func(int)) { binWritten = f }(binWritten)
	defer func(v int64) { minCopiedChunkBytes = v }(minCopiedChunkBytes)
	minCopiedChunkBytes = tc.minChunk
	copied := -1
	binWritten = func(n int) { copied = n }
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "id", Type: deltalog.Long, Nullable: true}, {Name: "cat", Type: deltalog.String, Nullable: true},
		{Name: "note", Type: deltalog.String, Nullable: true}, {Name: "n", Type: deltalog.Double, Nullable: true}}}
	tbl, pq, fo := createDVTable(t, t.TempDir(), schema)
	var adds []deltalog.Add
	var all []map[string]any
	for f, n := range tc.rows {
		rows := make([]map[string]any, n)
		for i := range rows {
			rows[i] = tc.row(f, i)
		}
		vals, err := deltawriter.RowsToColumns(pq, rows)
		if err != nil {
			t.Fatal(err)
		}
		o := fo
		if tc.zstd[f] {
			o.Configuration = map[string]string{deltalog.PropCompressionCodec: "zstd"}
		}
		a, err := deltawriter.WriteColumns(ctx, tbl.Store(), pq, deltatest.ColumnsOf(pq, vals), n, o)
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, a)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 0, Adds: adds}); err != nil {
		t.Fatal(err)
	}
	deleted := map[[2]int]bool{}
	if len(tc.dels) > 0 {
		var rd []deltawriter.RowDeletes
		for f, d := range tc.dels {
			rd = append(rd, deltawriter.RowDeletes{Add: adds[f], Rows: d})
			for _, r := range d {
				deleted[[2]int{f, int(r)}] = true
			}
		}
		removes, dvAdds, err := deltawriter.DeleteRows(ctx, tbl.Store(), rd, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 1, Operation: "DELETE", Removes: removes, Adds: dvAdds}); err != nil {
			t.Fatal(err)
		}
	}
	for f, n := range tc.rows {
		for i := 0; i < n; i++ {
			if !deleted[[2]int{f, i}] {
				all = append(all, tc.row(f, i))
			}
		}
	}

	res, err := Optimize(ctx, tbl, OptimizeOptions{MinFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved != len(tc.rows) || res.FilesAdded != 1 || res.RowsWritten != int64(len(all)) {
		t.Fatalf("result %+v", res)
	}
	if copied != tc.copied {
		t.Errorf("%d chunks written from copied pages, want %d", copied, tc.copied)
	}
	snap, _ := tbl.Snapshot(ctx)
	var out deltalog.Add
	for _, a := range snap.Files.All() {
		out = a
	}

	// the rows, in file order: each source file's live rows in order, file after file
	var got []map[string]any
	if _, err := snap.ReadDataFile(ctx, tbl.Store(), out, func(r map[string]any) error {
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) {
		t.Fatalf("%d rows, want %d", len(got), len(all))
	}
	var order []int // source files in the output's order
	seen := map[int]bool{}
	for k, r := range got {
		id := r["id"].(int64)
		f, i := int(id/1000), int(id%1000)
		if !seen[f] {
			seen[f] = true
			order = append(order, f)
		} else if order[len(order)-1] != f {
			t.Fatalf("row %d: file %d's rows are not contiguous", k, f)
		}
		want := tc.row(f, i)
		if k > 0 && got[k-1]["id"].(int64)/1000 == id/1000 && got[k-1]["id"].(int64) >= id {
			t.Fatalf("row %d (id %d) after id %d", k, id, got[k-1]["id"])
		}
		for _, c := range []string{"id", "cat", "note"} {
			if r[c] != want[c] {
				t.Fatalf("row %d (id %d) %s = %v, want %v", k, id, c, r[c], want[c])
			}
		}
		if n, w := r["n"].(float64), want["n"].(float64); n != w && !(math.IsNaN(n) && math.IsNaN(w)) {
			t.Fatalf("row %d (id %d) n = %v, want %v", k, id, n, w)
		}
	}
	if len(order) != len(tc.rows) {
		t.Fatalf("rows of %d files, want %d", len(order), len(tc.rows))
	}

	// the add.stats of one file of these rows, written whole
	if want := wholeFileStats(t, pq, got, fo); out.Stats != want {
		t.Errorf("stats\n got %s\nwant %s", out.Stats, want)
	}

	data, err := tbl.Store().Get(ctx, deltalog.CanonicalPath(out.Path))
	if err != nil {
		t.Fatal(err)
	}
	md := openFooter(t, data)
	if len(md.RowGroups) != tc.groups {
		t.Fatalf("%d row groups, want %d", len(md.RowGroups), tc.groups)
	}
	if tc.copied == 0 {
		return
	}
	// the first row group copies id, note and n from the files of the snappy and
	// deletion-free files, in the output's order
	rg := md.RowGroups[0]
	leaf := map[string]int{} // the leaves' indexes by name
	for i, c := range pq.Columns() {
		leaf[c[0]] = i
	}
	var srcs []format.ColumnChunk // per leaf, the summed source chunk
	var pages [4][]byte
	var small [4]bool // a source chunk under tc.minChunk: the leaf is decoded
	rows := 0
	for _, f := range order {
		if tc.zstd[f] || len(tc.dels[f]) > 0 {
			break
		}
		src, err := tbl.Store().Get(ctx, deltalog.CanonicalPath(adds[f].Path))
		if err != nil {
			t.Fatal(err)
		}
		smd := openFooter(t, src)
		for l, c := range smd.RowGroups[0].Columns {
			if srcs == nil {
				srcs = make([]format.ColumnChunk, 4)
			}
			m := c.MetaData
			small[l] = small[l] || m.TotalUncompressedSize < tc.minChunk
			pages[l] = append(pages[l], src[m.DataPageOffset:m.DataPageOffset+m.TotalCompressedSize]...)
			srcs[l].MetaData.NumValues += m.NumValues
			srcs[l].MetaData.TotalUncompressedSize += m.TotalUncompressedSize
			if l == leaf["cat"] && m.DictionaryPageOffset == 0 {
				t.Fatalf("file %d: cat has no dictionary page", f)
			}
			if l != leaf["cat"] && m.DictionaryPageOffset != 0 {
				t.Fatalf("file %d: column %d has a dictionary page", f, l)
			}
		}
		rows += tc.rows[f]
	}
	if rg.NumRows != int64(rows) {
		t.Fatalf("row group 0 has %d rows, want %d", rg.NumRows, rows)
	}
	for l, c := range rg.Columns {
		m := c.MetaData
		chunk := data[m.DataPageOffset : m.DataPageOffset+m.TotalCompressedSize]
		if l == leaf["cat"] { // decoded and encoded again: with a dictionary
			if m.DictionaryPageOffset == 0 || bytes.Contains(pages[l], chunk) {
				t.Errorf("cat chunk: dictionary page at %d, copied", m.DictionaryPageOffset)
			}
			continue
		}
		if small[l] { // decoded and encoded again
			if bytes.Equal(chunk, pages[l]) {
				t.Errorf("column %d: its source chunks under %d bytes are copied", l, tc.minChunk)
			}
			continue
		}
		if !bytes.Equal(chunk, pages[l]) {
			t.Errorf("column %d: %d bytes of chunk, not the sources' %d bytes of pages", l, len(chunk), len(pages[l]))
		}
		if m.NumValues != srcs[l].MetaData.NumValues || m.TotalUncompressedSize != srcs[l].MetaData.TotalUncompressedSize ||
			m.DictionaryPageOffset != 0 || m.Codec != format.Snappy || c.FileOffset != m.DataPageOffset {
			t.Errorf("column %d metadata %+v", l, m)
		}
		// the statistics of the row group's rows
		var nulls int64
		var lo, hi []byte
		nan := false
		for _, r := range got[:rows] {
			var b []byte
			switch l {
			case leaf["id"]:
				b = binary.LittleEndian.AppendUint64(nil, uint64(r["id"].(int64)))
			case leaf["note"]:
				if r["note"] == nil {
					nulls++
					continue
				}
				b = []byte(r["note"].(string))
			case leaf["n"]:
				v := r["n"].(float64)
				nan = nan || math.IsNaN(v)
				b = binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
			}
			if lo == nil || lessBound(pq.Columns()[l][0], b, lo) {
				lo = b
			}
			if hi == nil || lessBound(pq.Columns()[l][0], hi, b) {
				hi = b
			}
		}
		if l == leaf["n"] && nan {
			lo, hi = nil, nil
		}
		// a zero bound is written -0.0 as a minimum and +0.0 as a maximum
		// (parquet-format, "Statistics")
		if l == leaf["n"] && !nan && math.Float64frombits(binary.LittleEndian.Uint64(lo)) == 0 {
			lo = binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.Copysign(0, -1)))
		}
		if l == leaf["n"] && !nan && math.Float64frombits(binary.LittleEndian.Uint64(hi)) == 0 {
			hi = binary.LittleEndian.AppendUint64(nil, 0)
		}
		st := m.Statistics
		if st.NullCount != nulls || !bytes.Equal(st.MinValue, lo) || !bytes.Equal(st.MaxValue, hi) {
			t.Errorf("column %d statistics null %d min %x max %x, want null %d min %x max %x", l, st.NullCount, st.MinValue, st.MaxValue, nulls, lo, hi)
		}
	}
}

// lessBound orders PLAIN bounds of the test's leaves: id a long, note a string, n a
// double.
func lessBound(leaf string, a, b []byte) bool {
	switch leaf {
	case "id":
		return int64(binary.LittleEndian.Uint64(a)) < int64(binary.LittleEndian.Uint64(b))
	case "n":
		return math.Float64frombits(binary.LittleEndian.Uint64(a)) < math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return bytes.Compare(a, b) < 0
}

func openFooter(t *testing.T, data []byte) *format.FileMetaData {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return f.Metadata()
}

// wholeFileStats is the add.stats of one data file of rows (schema pq, options fo),
// written whole by the pipeline's writer.
func wholeFileStats(t *testing.T, pq *parquet.Schema, rows []map[string]any, fo deltawriter.FileOptions) string {
	t.Helper()
	vals, err := deltawriter.RowsToColumns(pq, rows)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	want, err := deltawriter.WriteColumns(context.Background(), deltatest.NewMemStore(&buf), pq, []column.Column(deltatest.Levelled(vals)), len(rows), fo)
	if err != nil {
		t.Fatal(err)
	}
	return want.Stats
}
