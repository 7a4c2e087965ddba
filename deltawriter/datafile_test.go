package deltawriter

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

var (
	ts0 = time.Date(2024, 3, 1, 12, 34, 56, 789123000, time.UTC)
	ts1 = time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// flba returns the n-byte big-endian two's complement of the decimal string's unscaled value.
// computeStats validates cols and returns the stats JSON of a file holding them: the
// summaries of parquetenc.Summarize, as WriteColumns derives stats from Encode's.
func computeStats(schema *parquet.Schema, cols []column.Column, numRows int, opts FileOptions) (string, error) {
	sums, err := parquetenc.Summarize(schema, cols, numRows)
	if err != nil {
		return "", err
	}
	return statsFromSummaries(schema, cols, sums, numRows, opts)
}

func allTypesRows(t *testing.T) []map[string]any {
	n := DecimalBytes(25)
	return []map[string]any{
		{"id": int64(1), "i": int32(-7), "s": "héllo", "d": 1.5, "b": true, "ts": ts0.UnixMicro(),
			"day": int32(ts0.Unix() / 86400), "dec10": int64(12345), "dec25": deltatest.FLBA(t, "-98765432109876543210123", n),
			"bin": []byte{0, 1, 2}, "st": map[string]any{"x": int64(1), "y": "a"},
			"arr": []any{"a", nil, "b"}, "m": []mapEntry{{"k1", int64(1)}, {"k2", nil}}},
		{"id": int64(2), "i": int32(0), "s": "", "d": -0.25, "b": false, "ts": ts1.UnixMicro(),
			"day": int32(0), "dec10": int64(-1), "dec25": deltatest.FLBA(t, "1", n),
			"bin": []byte{}, "st": map[string]any{"x": nil, "y": nil},
			"arr": []any{}, "m": []mapEntry{}},
		{"id": int64(3)},
	}
}

const wantAllTypesStats = `{"numRecords":3,` +
	`"minValues":{"id":1,"i":-7,"s":"","d":-0.25,"ts":"1969-12-31T23:59:59.999Z","day":"1970-01-01","dec10":-0.01,"dec25":-98765432109876543210.123,"st":{"x":1,"y":"a"}},` +
	`"maxValues":{"id":3,"i":0,"s":"héllo","d":1.5,"ts":"2024-03-01T12:34:56.789Z","day":"2024-03-01","dec10":123.45,"dec25":0.001,"st":{"x":1,"y":"a"}},` +
	`"nullCount":{"id":0,"i":1,"s":1,"d":1,"b":1,"ts":1,"day":1,"dec10":1,"dec25":1,"bin":1,"st":{"x":2,"y":2},"arr":1,"m":1}}`

func TestWriteAllTypesTable(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	if dir := os.Getenv("INGESTD_KEEP_TABLE"); dir != "" { // for integration/testdata/read_table.py
		root = dir
	}
	st, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := deltalog.ParseSchema(deltatest.AllTypesSchema)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	p, m := newTableMetadata("all_types", schema, nil, nil)
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: &p, Metadata: &m, Operation: "CREATE TABLE", EngineInfo: "ingestd/test"}); err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pqSchema, err := ParquetSchema(snap.Schema, snap.ColumnMapping)
	if err != nil {
		t.Fatal(err)
	}
	rows := allTypesRows(t)
	cols, err := shredRows(pqSchema, rows)
	if err != nil {
		t.Fatal(err)
	}
	add, err := WriteDataFile(ctx, st, pqSchema, cols, len(rows), snap.FileOptions())
	if err != nil {
		t.Fatal(err)
	}
	if add.Stats != wantAllTypesStats {
		t.Errorf("stats\n got %s\nwant %s", add.Stats, wantAllTypesStats)
	}
	if !strings.HasPrefix(add.Path, "part-00000-") || !strings.HasSuffix(add.Path, "-c000.snappy.parquet") || len(add.Path) != len("part-00000--c000.snappy.parquet")+36 {
		t.Errorf("path %s", add.Path)
	}
	fi, err := os.Stat(filepath.Join(root, add.Path))
	if err != nil || fi.Size() != add.Size || !add.DataChange || add.ModificationTime != fi.ModTime().UnixMilli() {
		t.Fatalf("add %+v vs file %v, %v", add, fi, err)
	}
	v, err := tbl.Commit(ctx, Commit{ReadVersion: snap.Version, Adds: []deltalog.Add{add},
		Txns: []deltalog.Txn{{AppID: "test-topic-0", Version: 2}}, OperationParameters: map[string]string{"mode": "Append"}, EngineInfo: "ingestd/test"})
	if err != nil || v != 1 {
		t.Fatalf("commit: %d, %v", v, err)
	}

	// Read the file back with parquet-go.
	data, err := os.ReadFile(filepath.Join(root, add.Path))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	checkFooter(t, f)
	var got []map[string]any
	if err := readParquetRows(data, func(r map[string]any) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"id": int64(1), "i": int64(-7), "s": "héllo", "d": 1.5, "b": true, "ts": ts0.UnixMicro(),
			"day": ts0.Unix() / 86400, "dec10": int64(12345), "dec25": deltatest.FLBA(t, "-98765432109876543210123", 11),
			"bin": "\x00\x01\x02", "st": map[string]any{"x": int64(1), "y": "a"},
			"arr": []any{"a", nil, "b"}, "m": map[string]any{"k1": int64(1), "k2": nil}},
		{"id": int64(2), "i": int64(0), "s": "", "d": -0.25, "b": false, "ts": ts1.UnixMicro(),
			"day": int64(0), "dec10": int64(-1), "dec25": deltatest.FLBA(t, "1", 11),
			"bin": "", "st": map[string]any{"x": nil, "y": nil},
			"arr": []any{}, "m": map[string]any{}},
		{"id": int64(3), "i": nil, "s": nil, "d": nil, "b": nil, "ts": nil, "day": nil, "dec10": nil, "dec25": nil,
			"bin": nil, "st": nil, "arr": nil, "m": nil},
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("row %d\n got %#v\nwant %#v", i, got[i], want[i])
		}
	}
	// parquet-go's own reconstruction agrees on the zero values (no zero-as-NULL trap).
	r := parquet.NewGenericReader[map[string]any](f, f.Schema())
	maps := []map[string]any{{}, {}, {}}
	if n, _ := r.Read(maps); n != 3 || maps[1]["i"] != int32(0) || maps[1]["s"] != "" || maps[1]["b"] != false || maps[2]["i"] != nil {
		t.Errorf("parquet-go reader: %d rows, row1 %v, row2 %v", n, maps[1], maps[2])
	}
}

func checkFooter(t *testing.T, f *parquet.File) {
	t.Helper()
	md := f.Metadata()
	if md.NumRows != 3 {
		t.Errorf("NumRows %d", md.NumRows)
	}
	types := map[string]string{}
	for _, c := range md.RowGroups[0].Columns {
		path := strings.Join(c.MetaData.PathInSchema, ".")
		if c.MetaData.Codec != format.Snappy {
			t.Errorf("%s codec %v", path, c.MetaData.Codec)
		}
		if len(c.MetaData.EncodingStats) == 0 {
			t.Errorf("%s: no encoding stats to check the page version", path)
		}
		for _, es := range c.MetaData.EncodingStats {
			if es.PageType == format.DataPageV2 {
				t.Errorf("%s has a DataPage V2", path)
			}
		}
	}
	for _, e := range md.Schema {
		if e.LogicalType.Value != nil {
			types[e.Name] = e.LogicalType.Value.String()
		}
		if e.Type.Valid && e.Name != "" {
			types[e.Name+".physical"] = e.Type.V.String()
		}
	}
	for k, want := range map[string]string{
		"ts": "TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)", "day": "DATE",
		"dec10": "DECIMAL(10,2)", "dec10.physical": "INT64",
		"dec25": "DECIMAL(25,3)", "dec25.physical": "FIXED_LEN_BYTE_ARRAY",
		"i.physical": "INT32", "arr": "LIST", "m": "MAP",
	} {
		if types[k] != want {
			t.Errorf("footer %s = %q, want %q", k, types[k], want)
		}
	}
}

func TestWriteDataFileValidation(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	schema, _ := deltalog.ParseSchema(deltatest.AllTypesSchema)
	pq, _ := ParquetSchema(schema, deltalog.ColumnMappingNone)
	cols, err := shredRows(pq, allTypesRows(t))
	if err != nil {
		t.Fatal(err)
	}
	opts := FileOptions{Schema: schema}
	short := append([][]parquet.Value(nil), cols...)
	idCol, _ := pq.Lookup("id")
	short[idCol.ColumnIndex] = short[idCol.ColumnIndex][:2]
	if _, err := WriteDataFile(ctx, st, pq, short, 3, opts); err == nil || !strings.Contains(err.Error(), "has 2 rows, want 3") {
		t.Errorf("short column: %v", err)
	}
	if _, err := WriteDataFile(ctx, st, pq, cols[:3], 3, opts); err == nil {
		t.Errorf("missing columns accepted")
	}
	bad := FileOptions{Schema: schema, Configuration: map[string]string{deltalog.PropCompressionCodec: "lzo"}}
	if _, err := WriteDataFile(ctx, st, pq, cols, 3, bad); err == nil || !strings.Contains(err.Error(), "lzo") {
		t.Errorf("unknown codec: %v", err)
	}
	if ents, _ := st.List(ctx, ""); len(ents) != 0 {
		t.Errorf("files written by failed calls: %v", ents)
	}
	zstd := FileOptions{Schema: schema, Configuration: map[string]string{deltalog.PropCompressionCodec: "zstd"}}
	add, err := WriteDataFile(ctx, st, pq, cols, 3, zstd)
	if err != nil || !strings.HasSuffix(add.Path, ".zstd.parquet") {
		t.Errorf("zstd: %v %v", add.Path, err)
	}
}

func TestStatsColumnMappingAndLimits(t *testing.T) {
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[
{"name":"a","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}},
{"name":"s","type":{"type":"struct","fields":[{"name":"b","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"col-3"}}]},"nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-2"}},
{"name":"f","type":"double","nullable":true,"metadata":{"delta.columnMapping.id":4,"delta.columnMapping.physicalName":"col-4"}}]}`)
	pq, err := ParquetSchema(schema, deltalog.ColumnMappingName)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 40)
	rows := []map[string]any{
		{"col-1": int64(5), "col-2": map[string]any{"col-3": long}, "col-4": 1.0},
		{"col-1": int64(-5), "col-2": map[string]any{"col-3": "abc"}, "col-4": nanValue()},
	}
	cols, err := shredRows(pq, rows)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		conf map[string]string
		want string
	}{
		{nil, `{"numRecords":2,"minValues":{"col-1":-5,"col-2":{"col-3":"abc"}},"maxValues":{"col-1":5,"col-2":{"col-3":"` + strings.Repeat("x", 32) + "\x7f" + `"}},"nullCount":{"col-1":0,"col-2":{"col-3":0},"col-4":0}}`},
		{map[string]string{deltalog.PropNumIndexedCols: "1"}, `{"numRecords":2,"minValues":{"col-1":-5},"maxValues":{"col-1":5},"nullCount":{"col-1":0}}`},
		{map[string]string{deltalog.PropStatsColumns: "s.b"}, `{"numRecords":2,"minValues":{"col-2":{"col-3":"abc"}},"maxValues":{"col-2":{"col-3":"` + strings.Repeat("x", 32) + "\x7f" + `"}},"nullCount":{"col-2":{"col-3":0}}}`},
	} {
		got, err := computeStats(pq, deltatest.Levelled(cols), 2, FileOptions{Schema: schema, ColumnMapping: deltalog.ColumnMappingName, Configuration: tc.conf})
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal([]byte(got), &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("conf %v\n got %s\nwant %s", tc.conf, got, tc.want)
		}
	}
	// Field ids land in the file under column mapping.
	var ids []int
	for _, f := range pq.Fields() {
		ids = append(ids, f.ID())
	}
	if !reflect.DeepEqual(ids, []int{1, 2, 4}) {
		t.Errorf("field ids %v", ids)
	}
}

func nanValue() float64 { z := 0.0; return z / z }

func TestStatsHelpers(t *testing.T) {
	for _, tc := range []struct {
		unscaled string
		scale    int
		want     string
	}{
		{"12345", 2, "123.45"}, {"-1", 2, "-0.01"}, {"100", 2, "1.00"}, {"0", 3, "0.000"},
		{"-98765432109876543210123", 3, "-98765432109876543210.123"}, {"7", 0, "7"},
	} {
		u, _ := new(big.Int).SetString(tc.unscaled, 10)
		if got := formatDecimal(u, tc.scale); got != tc.want {
			t.Errorf("formatDecimal(%s, %d) = %s, want %s", tc.unscaled, tc.scale, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in, min, max string
	}{
		{"abc", "abc", "abc"},
		{"abcdef", "abc", "abc\x7f"},
		{"abc\u00e9f", "abc", "abc\U0010FFFF"},
		{"ééééé", "ééé", "ééé\U0010FFFF"},
	} {
		mx, _ := truncateMax(tc.in, 3)
		if mn := truncateMin(tc.in, 3); mn != tc.min || mx != tc.max {
			t.Errorf("truncate(%q) = %q, %q; want %q, %q", tc.in, mn, mx, tc.min, tc.max)
		}
		if mx < tc.in {
			t.Errorf("truncated max %q sorts before %q", mx, tc.in)
		}
	}
	if _, ok := truncateMax("abc\U0010FFFFz", 3); ok {
		t.Errorf("no bound exists after U+10FFFF")
	}
	for _, b := range [][]byte{{0xff}, {0x80, 0}, {0x7f, 0xff}} {
		u := unscaled(parquet.FixedLenByteArrayValue(b))
		want := new(big.Int).SetBytes(b)
		if b[0]&0x80 != 0 {
			want.Sub(want, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
		if u.Cmp(want) != 0 {
			t.Errorf("unscaled(%x) = %s", b, u)
		}
	}
}
