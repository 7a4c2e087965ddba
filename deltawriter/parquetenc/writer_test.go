package parquetenc_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
)

// rowRange cuts levelled columns to rows [from, to) (a row starts at repetition level 0).
func rowRange(cols [][]parquet.Value, from, to int) [][]parquet.Value {
	out := make([][]parquet.Value, len(cols))
	for i, c := range cols {
		row, start, end := -1, len(c), len(c)
		for j, v := range c {
			if v.RepetitionLevel() == 0 {
				row++
				if row == from {
					start = j
				}
				if row == to {
					end = j
					break
				}
			}
		}
		out[i] = c[start:end]
	}
	return out
}

// A file streamed in three row groups holds the rows of the one-row-group file Encode
// makes of the same values, with each row group's chunks and statistics where its footer
// says; the first row group's chunk bytes are Encode's for those rows.
func TestWriterRowGroups(t *testing.T) {
	const n = 9_000
	defer func(p, d int) { *parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = p, d }(*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes)
	*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = 32<<10, 64<<10
	pq, cols := allTypesColumns(t, n)
	enc, _, err := parquetenc.Encode(pq, deltatest.Levelled(cols), n, parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	want := readRows(t, bytes.Clone(enc.Bytes()))
	enc.Release()

	var buf bytes.Buffer
	w, err := parquetenc.NewWriter(&buf, pq, parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	cuts := []int{0, 1_000, 5_000, n}
	var firstNulls []int
	for k := 0; k+1 < len(cuts); k++ {
		part := rowRange(cols, cuts[k], cuts[k+1])
		sums, err := w.WriteRowGroup(deltatest.Levelled(part), cuts[k+1]-cuts[k])
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			for _, s := range sums {
				firstNulls = append(firstNulls, s.Nulls)
			}
		}
	}
	if w.NumRows() != n {
		t.Fatalf("NumRows %d", w.NumRows())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != w.Size() {
		t.Fatalf("Size %d, wrote %d", w.Size(), buf.Len())
	}
	data := buf.Bytes()
	md := checkRows(t, data, want).Metadata()
	if md.NumRows != n || len(md.RowGroups) != 3 {
		t.Fatalf("footer: %d rows, %d row groups", md.NumRows, len(md.RowGroups))
	}
	for k, rg := range md.RowGroups {
		if rg.NumRows != int64(cuts[k+1]-cuts[k]) {
			t.Errorf("row group %d: %d rows", k, rg.NumRows)
		}
		if k > 0 && rg.FileOffset != md.RowGroups[k-1].FileOffset+md.RowGroups[k-1].TotalCompressedSize {
			t.Errorf("row group %d at %d, previous ends at %d", k, rg.FileOffset, md.RowGroups[k-1].FileOffset+md.RowGroups[k-1].TotalCompressedSize)
		}
	}
	// the first row group is byte for byte the file Encode makes of its rows
	first := rowRange(cols, 0, 1_000)
	one, _, err := parquetenc.Encode(pq, deltatest.Levelled(first), 1_000, parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	defer one.Release()
	rg0 := md.RowGroups[0]
	if !bytes.Equal(data[4:4+rg0.TotalCompressedSize], one.Bytes()[4:4+rg0.TotalCompressedSize]) {
		t.Errorf("first row group differs from Encode's file of its rows")
	}
	for i, c := range rg0.Columns {
		if c.MetaData.Statistics.NullCount != int64(firstNulls[i]) {
			t.Errorf("column %d: footer %d nulls, summary %d", i, c.MetaData.Statistics.NullCount, firstNulls[i])
		}
	}
}

// A row group copied from another file keeps its chunks' bytes and metadata with the
// offsets moved: the file reads back as the source's rows, after a row group written
// before it, dictionary pages included.
func TestWriterCopyRowGroup(t *testing.T) {
	const n = 3_000
	defer func(p, d int) { *parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = p, d }(*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes)
	*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = 32<<10, 64<<10
	pq, cols := allTypesColumns(t, n)
	enc, _, err := parquetenc.Encode(pq, deltatest.Levelled(cols), n, parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	src := bytes.Clone(enc.Bytes())
	enc.Release()
	sf, err := parquet.OpenFile(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := parquetenc.NewWriter(&buf, pq, parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteRowGroup(deltatest.Levelled(rowRange(cols, 0, 10)), 10); err != nil {
		t.Fatal(err)
	}
	rg := sf.Metadata().RowGroups[0]
	if err := w.CopyRowGroup(bytes.NewReader(src), &rg); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := append(readRows(t, src)[:10:10], readRows(t, src)...)
	c := checkRows(t, buf.Bytes(), want).Metadata().RowGroups[1]
	if c.NumRows != n || c.Ordinal != 1 || !bytes.Equal(buf.Bytes()[c.FileOffset:c.FileOffset+c.TotalCompressedSize], src[4:4+rg.TotalCompressedSize]) {
		t.Fatalf("copied row group: %d rows, ordinal %d, bytes differ from the source's", c.NumRows, c.Ordinal)
	}
	dict := 0
	for i, cc := range c.Columns {
		if cc.MetaData.Statistics.NullCount != rg.Columns[i].MetaData.Statistics.NullCount ||
			!bytes.Equal(cc.MetaData.Statistics.MinValue, rg.Columns[i].MetaData.Statistics.MinValue) {
			t.Errorf("column %d: statistics differ from the source's", i)
		}
		if cc.MetaData.DictionaryPageOffset > 0 {
			dict++
		}
	}
	if dict == 0 {
		t.Errorf("no dictionary-encoded column copied")
	}
}

// A row group whose dictionary-free flat leaves are the pages of two files Encode made of
// its first and second halves, back to back, and whose other leaves are encoded from the
// values, reads back as the rows of the one file Encode makes of all of them; each copied
// chunk holds the pages of both halves, byte for byte. A copied chunk whose size is not
// its pages' is refused, with nothing written.
func TestWriterCopiedChunks(t *testing.T) {
	const n, half = 6_000, 2_500
	defer func(p int) { *parquetenc.PageTargetBytes = p }(*parquetenc.PageTargetBytes)
	*parquetenc.PageTargetBytes = 16 << 10 // several pages a chunk
	pq, cols := allTypesColumns(t, n)
	whole, _, err := parquetenc.Encode(pq, deltatest.Levelled(cols), n, parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	want := readRows(t, bytes.Clone(whole.Bytes()))
	whole.Release()
	var parts [2][]byte
	var mds [2]*format.FileMetaData
	for k, r := range [][2]int{{0, half}, {half, n}} {
		f, _, err := parquetenc.Encode(pq, deltatest.Levelled(rowRange(cols, r[0], r[1])), r[1]-r[0], parquetenc.Snappy())
		if err != nil {
			t.Fatal(err)
		}
		parts[k] = bytes.Clone(f.Bytes())
		f.Release()
		pf, err := parquet.OpenFile(bytes.NewReader(parts[k]), int64(len(parts[k])))
		if err != nil {
			t.Fatal(err)
		}
		mds[k] = pf.Metadata()
	}
	copied := make([]*parquetenc.CopiedChunk, len(pq.Columns()))
	nCopied := 0
	for i, path := range pq.Columns() {
		leaf, _ := pq.Lookup(path...)
		if leaf.MaxRepetitionLevel > 0 {
			continue
		}
		a, b := mds[0].RowGroups[0].Columns[i].MetaData, mds[1].RowGroups[0].Columns[i].MetaData
		if a.DictionaryPageOffset != 0 || b.DictionaryPageOffset != 0 {
			continue
		}
		c := &parquetenc.CopiedChunk{MetaData: a}
		c.Pages = append(append([]byte{}, parts[0][a.DataPageOffset:a.DataPageOffset+a.TotalCompressedSize]...),
			parts[1][b.DataPageOffset:b.DataPageOffset+b.TotalCompressedSize]...)
		c.MetaData.NumValues += b.NumValues
		c.MetaData.TotalCompressedSize += b.TotalCompressedSize
		c.MetaData.TotalUncompressedSize += b.TotalUncompressedSize
		c.MetaData.Statistics = format.Statistics{NullCount: a.Statistics.NullCount + b.Statistics.NullCount}
		copied[i] = c
		nCopied++
	}
	if nCopied < 3 || nCopied == len(copied) {
		t.Fatalf("%d of %d leaves copied: want some copied and some encoded", nCopied, len(copied))
	}

	var buf bytes.Buffer
	w, err := parquetenc.NewWriter(&buf, pq, parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	bad := *copied[slices.IndexFunc(copied, func(c *parquetenc.CopiedChunk) bool { return c != nil })]
	bad.MetaData.TotalCompressedSize++
	wrong := slices.Clone(copied)
	wrong[slices.IndexFunc(copied, func(c *parquetenc.CopiedChunk) bool { return c != nil })] = &bad
	if _, err := w.WriteRowGroupCopied(deltatest.Levelled(cols), n, wrong); err == nil || w.Size() != 4 {
		t.Fatalf("a copied chunk of the wrong size: %v, %d bytes written", err, w.Size())
	}
	sums, err := w.WriteRowGroupCopied(deltatest.Levelled(cols), n, copied)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	md := checkRows(t, data, want).Metadata()
	rg := md.RowGroups[0]
	if len(md.RowGroups) != 1 || rg.NumRows != n || rg.FileOffset != 4 {
		t.Fatalf("row groups %+v", md.RowGroups)
	}
	end := int64(4)
	for i, c := range rg.Columns {
		m := c.MetaData
		start := m.DataPageOffset
		if m.DictionaryPageOffset > 0 {
			start = m.DictionaryPageOffset
		}
		if start != end || c.FileOffset != start {
			t.Errorf("column %d starts at %d (file offset %d), want %d: chunks back to back in schema order", i, start, c.FileOffset, end)
		}
		end = start + m.TotalCompressedSize
		if copied[i] == nil {
			if sums[i].Nulls != int(m.Statistics.NullCount) {
				t.Errorf("column %d: summary nulls %d, footer %d", i, sums[i].Nulls, m.Statistics.NullCount)
			}
			continue
		}
		if !bytes.Equal(data[start:end], copied[i].Pages) || m.NumValues != n || m.Statistics.NullCount != copied[i].MetaData.Statistics.NullCount || sums[i] != (parquetenc.Summary{}) {
			t.Errorf("column %d: not the copied pages (%d bytes, %d values, %d nulls)", i, m.TotalCompressedSize, m.NumValues, m.Statistics.NullCount)
		}
	}
	if end != rg.FileOffset+rg.TotalCompressedSize {
		t.Errorf("chunks end at %d, row group at %d", end, rg.FileOffset+rg.TotalCompressedSize)
	}
}

// A row group made only of copied chunks, whose pages are DataPage V2 pages parquet-go
// wrote (two files, several pages a chunk), reads back as the two files' rows in order.
func TestWriterCopiedChunksV2(t *testing.T) {
	type row struct {
		ID   int64  `parquet:"id"`
		Note string `parquet:"note"`
	}
	var files [2][]byte
	var want []row
	for k := range files {
		rows := make([]row, 3_000)
		for i := range rows {
			rows[i] = row{ID: int64(k*10_000 + i), Note: fmt.Sprintf("note %d of file %d %x", i, k, i*2654435761)}
		}
		want = append(want, rows...)
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[row](&buf, parquet.DataPageVersion(2), parquet.PageBufferSize(8<<10), parquet.Compression(parquetenc.Snappy()))
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		files[k] = buf.Bytes()
	}
	schema := parquet.SchemaOf(row{})
	copied := make([]*parquetenc.CopiedChunk, 2)
	for _, data := range files {
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range f.Metadata().RowGroups[0].Columns {
			m := c.MetaData
			if m.DictionaryPageOffset != 0 {
				t.Fatalf("column %d has a dictionary page", i)
			}
			pages := 0
			for _, s := range m.EncodingStats {
				if s.PageType == format.DataPageV2 {
					pages += int(s.Count)
				}
			}
			if pages < 2 {
				t.Fatalf("column %d: %d DataPage V2 pages (%v)", i, pages, m.EncodingStats)
			}
			if copied[i] == nil {
				copied[i] = &parquetenc.CopiedChunk{MetaData: m}
				copied[i].MetaData.NumValues, copied[i].MetaData.TotalCompressedSize, copied[i].MetaData.TotalUncompressedSize = 0, 0, 0
			}
			cc := copied[i]
			cc.Pages = append(cc.Pages, data[m.DataPageOffset:m.DataPageOffset+m.TotalCompressedSize]...)
			cc.MetaData.NumValues += m.NumValues
			cc.MetaData.TotalCompressedSize += m.TotalCompressedSize
			cc.MetaData.TotalUncompressedSize += m.TotalUncompressedSize
			cc.MetaData.Statistics = format.Statistics{}
		}
	}
	var buf bytes.Buffer
	w, err := parquetenc.NewWriter(&buf, schema, parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteRowGroupCopied(make([]column.Column, 2), len(want), copied); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := parquet.Read[row](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%d rows read back, want %d (first %+v)", len(got), len(want), got[:min(1, len(got))])
	}
}
