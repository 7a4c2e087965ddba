package parquetenc_test

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
)

// encodeRows makes n rows of deltatest.AllTypesSchema that exercise every path of the encoder:
// nulls at every level, low-cardinality strings, integers and longs (dictionary), a
// binary and a date column that look low-cardinality for their first 1,024 values and
// then are all distinct (dictionary abandoned for PLAIN once it passes DictMaxBytes),
// lists and maps (repetition levels, dictionary under them),
// -0.0/+0.0, negative decimals, and enough rows for several pages per column.
func encodeRows(t *testing.T, n int) []map[string]any {
	words := []string{"", "héllo", "NEW", "PAID", "🙂 smile", "x"}
	width := deltawriter.DecimalBytes(25)
	rows := make([]map[string]any, n)
	for i := range rows {
		r := map[string]any{"id": int64(i) - int64(n/2)}
		if i%7 != 3 {
			r["i"] = int32((i*7919)%40 - 20)
		}
		if i%5 != 1 {
			r["s"] = words[(i*31)%len(words)]
		}
		if i%11 != 2 {
			switch i % 4 {
			case 0:
				r["d"] = math.Copysign(0, -1)
			case 1:
				r["d"] = 0.0
			default:
				r["d"] = float64(i%1000)/8 - 60
			}
		}
		if i%3 != 0 {
			r["b"] = i%2 == 0
		}
		r["ts"] = int64(i)*1_000_003 - 5_000_000_000
		if i%17 != 0 {
			if i < parquetenc.DictProbe {
				r["day"] = int32(i % 3)
			} else {
				r["day"] = int32(i%40000 - 20000)
			}
		}
		r["dec10"] = int64(i%50-25) * 3
		if i%19 != 4 {
			r["dec25"] = deltatest.FLBA(t, fmt.Sprint(int64(i)*123_456_789-9_000_000_000), width)
		}
		if i < parquetenc.DictProbe {
			r["bin"] = []byte{byte(i % 4), 1}
		} else {
			r["bin"] = []byte(fmt.Sprintf("bin-%09d", i))
		}
		if i%13 != 5 {
			st := map[string]any{}
			if i%2 == 0 {
				st["x"] = int64(i * 3)
			}
			if i%3 != 1 {
				st["y"] = words[i%len(words)]
			}
			r["st"] = st
		}
		if i%9 != 6 {
			arr := []any{}
			for k := range i % 4 {
				if (i+k)%5 == 0 {
					arr = append(arr, nil)
				} else {
					arr = append(arr, words[(i+k)%len(words)])
				}
			}
			r["arr"] = arr
		}
		if i%8 != 7 {
			var m []deltawriter.MapEntry
			for k := range i % 3 {
				var v any
				if k != 1 {
					v = int64(i + k)
				}
				m = append(m, deltawriter.MapEntry{Key: fmt.Sprintf("k%d", k), Value: v})
			}
			r["m"] = m
		}
		rows[i] = r
	}
	return rows
}

// referenceFile writes cols with parquet-go's own writer (GenericWriter's column writers,
// DataPage V1, SNAPPY).
func referenceFile(t *testing.T, schema *parquet.Schema, cols [][]parquet.Value) []byte {
	t.Helper()
	var buf bytes.Buffer
	pw := parquet.NewGenericWriter[any](&buf, schema, parquet.DataPageVersion(1), parquet.Compression(&parquet.Snappy))
	for i, c := range cols {
		if _, err := pw.ColumnWriters()[i].WriteRowValues(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestEncodeParquetFileMatchesParquetGo(t *testing.T) {
	// small pages and dictionaries so that 20,000 rows need several of each
	const n = 20_000
	defer func(p, d int) { *parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = p, d }(*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes)
	*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = 32<<10, 64<<10
	pq, cols := allTypesColumns(t, n)
	ref := referenceFile(t, pq, cols)
	want := readRows(t, ref)
	if len(want) != n {
		t.Fatalf("reference file has %d rows", len(want))
	}
	refFile, err := parquet.OpenFile(bytes.NewReader(ref), int64(len(ref)))
	if err != nil {
		t.Fatal(err)
	}
	refChunks := refFile.Metadata().RowGroups[0].Columns

	for _, codec := range []compress.Codec{parquetenc.Snappy(), parquetenc.Zstd(), &parquet.Uncompressed} {
		t.Run(codec.String(), func(t *testing.T) {
			enc, sums, err := parquetenc.Encode(pq, deltatest.Levelled(cols), n, codec)
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Clone(enc.Bytes())
			enc.Release()
			if dir := os.Getenv("INGESTD_KEEP_ENCODE"); dir != "" { // for a pyarrow / Spark comparison
				_ = os.WriteFile(filepath.Join(dir, "ingestd-"+codec.String()+".parquet"), data, 0o644)
				_ = os.WriteFile(filepath.Join(dir, "reference.parquet"), ref, 0o644)
			}
			md := checkRows(t, data, want).Metadata()
			if md.NumRows != n || len(md.RowGroups) != 1 || md.CreatedBy != "ingestd version (build )" {
				t.Fatalf("footer: %d rows, %d row groups, created by %q", md.NumRows, len(md.RowGroups), md.CreatedBy)
			}
			if !reflect.DeepEqual(md.Schema, refFile.Metadata().Schema) {
				t.Errorf("schema\n got %+v\nwant %+v", md.Schema, refFile.Metadata().Schema)
			}
			dictCols := map[string]bool{}
			for i, c := range md.RowGroups[0].Columns {
				path := strings.Join(c.MetaData.PathInSchema, ".")
				rc := refChunks[i].MetaData
				if c.MetaData.NumValues != rc.NumValues || c.MetaData.Statistics.NullCount != rc.Statistics.NullCount {
					t.Errorf("%s: %d values %d nulls, parquet-go %d values %d nulls", path,
						c.MetaData.NumValues, c.MetaData.Statistics.NullCount, rc.NumValues, rc.Statistics.NullCount)
				}
				if int64(sums[i].Nulls) != c.MetaData.Statistics.NullCount {
					t.Errorf("%s: summary has %d nulls, footer %d", path, sums[i].Nulls, c.MetaData.Statistics.NullCount)
				}
				if c.MetaData.Codec != codec.CompressionCodec() {
					t.Errorf("%s: codec %v", path, c.MetaData.Codec)
				}
				switch c.MetaData.Type {
				case format.Int32, format.Int64, format.ByteArray:
					if !bytes.Equal(c.MetaData.Statistics.MinValue, rc.Statistics.MinValue) || !bytes.Equal(c.MetaData.Statistics.MaxValue, rc.Statistics.MaxValue) {
						t.Errorf("%s: min/max %x/%x, parquet-go %x/%x", path, c.MetaData.Statistics.MinValue, c.MetaData.Statistics.MaxValue,
							rc.Statistics.MinValue, rc.Statistics.MaxValue)
					}
				}
				pages := 0
				for _, es := range c.MetaData.EncodingStats {
					if es.PageType == format.DataPage {
						pages += int(es.Count)
					}
					if es.PageType == format.DataPage && es.Encoding == format.RLEDictionary {
						dictCols[path] = true
						if c.MetaData.DictionaryPageOffset == 0 || c.MetaData.DictionaryPageOffset >= c.MetaData.DataPageOffset {
							t.Errorf("%s: dictionary page at %d, data at %d", path, c.MetaData.DictionaryPageOffset, c.MetaData.DataPageOffset)
						}
					}
				}
				if path == "id" && pages < 2 {
					t.Errorf("id: %d data pages, want several", pages)
				}
			}
			gotDict := slices.Sorted(func(yield func(string) bool) {
				for k := range dictCols {
					if !yield(k) {
						return
					}
				}
			})
			if w := []string{"arr.list.element", "dec10", "i", "m.key_value.key", "s", "st.y"}; !reflect.DeepEqual(gotDict, w) {
				t.Errorf("dictionary-encoded columns %v, want %v", gotDict, w)
			}
			// Footer bounds parquet-go does not compare like the Delta stats: -0.0 min and
			// +0.0 max for the double column, signed decimal bytes.
			for i, c := range md.RowGroups[0].Columns {
				switch strings.Join(c.MetaData.PathInSchema, ".") {
				case "d":
					if lo, hi := c.MetaData.Statistics.MinValue, c.MetaData.Statistics.MaxValue; len(lo) != 8 ||
						math.Float64frombits(leUint64(lo)) != 2.0/8-60 || math.Float64frombits(leUint64(hi)) != 999.0/8-60 {
						t.Errorf("d bounds %x %x", lo, hi)
					}
				case "dec25":
					lo := new(big.Int).SetBytes(c.MetaData.Statistics.MinValue)
					if lo.Cmp(new(big.Int).SetBytes(deltatest.FLBA(t, "-9000000000", deltawriter.DecimalBytes(25)))) != 0 ||
						!bytes.Equal(c.MetaData.Statistics.MaxValue, deltatest.FLBA(t, fmt.Sprint(int64(n-1)*123_456_789-9_000_000_000), deltawriter.DecimalBytes(25))) {
						t.Errorf("dec25 bounds %x %x (column %d)", c.MetaData.Statistics.MinValue, c.MetaData.Statistics.MaxValue, i)
					}
				case "b":
					if c.MetaData.Statistics.MinValue != nil {
						t.Errorf("boolean column has bounds")
					}
				}
			}
		})
	}
}

func leUint64(b []byte) uint64 {
	var x uint64
	for i := 7; i >= 0; i-- {
		x = x<<8 | uint64(b[i])
	}
	return x
}

func TestEncodeZeroBoundsAndNaN(t *testing.T) {
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[
{"name":"z","type":"double","nullable":true,"metadata":{}},
{"name":"f","type":"float","nullable":true,"metadata":{}}]}`)
	pq, _ := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	cols, err := deltawriter.RowsToColumns(pq, []map[string]any{{"z": 0.0, "f": float32(1)}, {"z": math.Copysign(0, -1), "f": float32(math.NaN())}})
	if err != nil {
		t.Fatal(err)
	}
	enc, _, err := parquetenc.Encode(pq, deltatest.Levelled(cols), 2, parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Release()
	f, err := parquet.OpenFile(bytes.NewReader(enc.Bytes()), int64(len(enc.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Metadata().RowGroups[0].Columns {
		st := c.MetaData.Statistics
		switch c.MetaData.PathInSchema[0] {
		case "z":
			if math.Float64bits(math.Float64frombits(leUint64(st.MinValue))) != math.Float64bits(math.Copysign(0, -1)) ||
				math.Float64bits(math.Float64frombits(leUint64(st.MaxValue))) != 0 {
				t.Errorf("z bounds %x %x, want -0.0 and +0.0", st.MinValue, st.MaxValue)
			}
		case "f":
			if st.MinValue != nil || st.MaxValue != nil {
				t.Errorf("f with NaN has bounds %x %x", st.MinValue, st.MaxValue)
			}
		}
	}
}

// A dictionary column whose first pages hold only nulls (the page is cut before the
// dictionary has an entry) encodes, and reads back exactly: the index bit width of such a
// page was once bits.Len(uint(-1)) = 64, which the RLE encoder refuses.
func TestEncodeDictionaryAfterNullOnlyPages(t *testing.T) {
	defer func(n int) { *parquetenc.PageTargetBytes = n }(*parquetenc.PageTargetBytes)
	*parquetenc.PageTargetBytes = 64
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	pq, _ := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	var rows []map[string]any
	for range 1000 {
		rows = append(rows, map[string]any{"s": nil})
	}
	for i := range 2000 {
		rows = append(rows, map[string]any{"s": []string{"a", "b"}[i%2]})
	}
	cols, err := deltawriter.RowsToColumns(pq, rows)
	if err != nil {
		t.Fatal(err)
	}
	enc, _, err := parquetenc.Encode(pq, deltatest.Levelled(cols), len(rows), parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Release()
	f, err := parquet.OpenFile(bytes.NewReader(enc.Bytes()), int64(len(enc.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	got := parquet.NewGenericReader[struct {
		S *string `parquet:"s,optional"`
	}](f)
	buf := make([]struct {
		S *string `parquet:"s,optional"`
	}, len(rows))
	n, _ := got.Read(buf)
	if n != len(rows) {
		t.Fatalf("read %d rows, want %d", n, len(rows))
	}
	for i, r := range buf {
		want := rows[i]["s"]
		if (want == nil) != (r.S == nil) || (r.S != nil && *r.S != want) {
			t.Fatalf("row %d: got %v, want %v", i, r.S, want)
		}
	}
}

// String bounds longer than MaxFooterBound are left out of the footer statistics (a
// 100 MB value would otherwise make the footer unreadable to pyarrow); short ones stay.
func TestEncodeOmitsLongFooterBounds(t *testing.T) {
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[
{"name":"long","type":"string","nullable":true,"metadata":{}},
{"name":"short","type":"string","nullable":true,"metadata":{}}]}`)
	pq, _ := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	big := strings.Repeat("x", parquetenc.MaxFooterBound+1)
	cols, err := deltawriter.RowsToColumns(pq, []map[string]any{{"long": big, "short": "a"}, {"long": "b", "short": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	enc, _, err := parquetenc.Encode(pq, deltatest.Levelled(cols), 2, parquetenc.Snappy())
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Release()
	f, err := parquet.OpenFile(bytes.NewReader(enc.Bytes()), int64(len(enc.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Metadata().RowGroups[0].Columns {
		st := c.MetaData.Statistics
		switch c.MetaData.PathInSchema[0] {
		case "long":
			if st.MinValue != nil || st.MaxValue != nil {
				t.Errorf("long: bounds of %d and %d bytes written", len(st.MinValue), len(st.MaxValue))
			}
		case "short":
			if string(st.MinValue) != "a" || string(st.MaxValue) != "c" {
				t.Errorf("short: bounds %q %q, want a and c", st.MinValue, st.MaxValue)
			}
		}
	}
}

// Runs of one long value (the previous-value shortcut of the dictionary pass), broken
// by nulls, short values and other long values of the same length, read back exactly,
// dictionary-encoded, with the right footer bounds.
func TestEncodeRepeatedLongValues(t *testing.T) {
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	pq, _ := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	long := []string{strings.Repeat("note-a ", 20), strings.Repeat("note-b ", 20), "123456789", "123456780"}
	var rows []map[string]any
	for i := range 5000 {
		switch {
		case i%97 == 5:
			rows = append(rows, map[string]any{"s": nil})
		case i%89 == 7:
			rows = append(rows, map[string]any{"s": "x"})
		default:
			rows = append(rows, map[string]any{"s": long[(i/10)%len(long)]}) // runs of 10
		}
	}
	cols, err := deltawriter.RowsToColumns(pq, rows)
	if err != nil {
		t.Fatal(err)
	}
	enc, _, err := parquetenc.EncodeWith(pq, deltatest.Levelled(cols), len(rows), parquetenc.Snappy(), 0)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Clone(enc.Bytes())
	enc.Release()
	got := readRows(t, data)
	for i := range rows {
		want, _ := rows[i]["s"].(string)
		null := rows[i]["s"] == nil
		if len(got[i]) != 1 || got[i][0].IsNull() != null || !null && string(got[i][0].ByteArray()) != want {
			t.Fatalf("row %d: read %v, want %#v", i, got[i], rows[i])
		}
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	md := f.Metadata().RowGroups[0].Columns[0].MetaData
	if md.DictionaryPageOffset == 0 {
		t.Errorf("column not dictionary-encoded")
	}
	if lo, hi := string(md.Statistics.MinValue), string(md.Statistics.MaxValue); lo != "123456780" || hi != "x" {
		t.Errorf("bounds %q %q, want 123456780 and x", lo, hi)
	}
}
