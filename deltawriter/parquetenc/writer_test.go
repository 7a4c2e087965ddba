package parquetenc_test

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go"

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
