package deltawriter

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
)

// The Delta stats of dense columns hold the exact values (the levelled path's are
// checked against Spark elsewhere): bounds of every mapped type, -0.0/+0.0 and no bounds
// for a column holding NaN, at definition levels 1 and 2.
func TestWriteColumnsDenseStats(t *testing.T) {
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[
{"name":"i","type":"integer","nullable":true,"metadata":{}},
{"name":"l","type":"long","nullable":true,"metadata":{}},
{"name":"d","type":"double","nullable":true,"metadata":{}},
{"name":"f","type":"float","nullable":true,"metadata":{}},
{"name":"b","type":"boolean","nullable":true,"metadata":{}},
{"name":"day","type":"date","nullable":true,"metadata":{}},
{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
{"name":"dec","type":"decimal(9,2)","nullable":true,"metadata":{}},
{"name":"st","type":{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`)
	pq, err := ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	rows := []map[string]any{
		{"i": int32(math.MinInt32), "l": int64(7), "d": 0.0, "f": float32(math.NaN()), "b": true, "day": int32(19000), "ts": int64(1_700_000_000_123_456), "dec": int32(-12345), "st": map[string]any{"x": int64(-1)}},
		{"i": int32(5), "l": int64(math.MaxInt64), "d": math.Copysign(0, -1), "f": float32(1), "b": false, "day": int32(-1), "ts": int64(-1), "dec": int32(99), "st": map[string]any{"x": int64(3)}},
	}
	vals, err := shredRows(pq, rows)
	if err != nil {
		t.Fatal(err)
	}
	cols := deltatest.ColumnsOf(pq, vals)
	for i := range cols {
		if !cols[i].IsDense() {
			t.Fatalf("column %d is not dense", i)
		}
	}
	var buf bytes.Buffer
	add, err := WriteColumns(context.Background(), deltatest.NewMemStore(&buf), pq, cols, 2, FileOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"numRecords":2,` +
		`"minValues":{"i":-2147483648,"l":7,"d":0,"day":"1969-12-31","ts":"1969-12-31T23:59:59.999Z","dec":-123.45,"st":{"x":-1}},` +
		`"maxValues":{"i":5,"l":9223372036854775807,"d":0,"day":"2022-01-08","ts":"2023-11-14T22:13:20.123Z","dec":0.99,"st":{"x":3}},` +
		`"nullCount":{"i":0,"l":0,"d":0,"f":0,"b":0,"day":0,"ts":0,"dec":0,"st":{"x":0}}}`
	if add.Stats != want {
		t.Fatalf("stats\n got %s\nwant %s", add.Stats, want)
	}
}

// The Delta stats and footer bounds of byte-form columns hold the exact values, as the
// levelled pass gives them (the file and stats JSON of WriteColumns are WriteDataFile's):
// strings truncated to 32 UTF-16 code units (a surrogate pair kept whole) with the max's
// tie-breaker U+007F or U+10FFFF, no Delta bounds when a bound is not valid UTF-8 or no
// max exists, no footer bounds past parquetenc.MaxFooterBound bytes; binary gets footer bounds
// only; PLAIN and dictionary-encoded.
func TestWriteColumnsDenseStringStats(t *testing.T) {
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[
{"name":"s","type":"string","nullable":true,"metadata":{}},
{"name":"bin","type":"binary","nullable":true,"metadata":{}}]}`)
	pq, err := ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	a32, e32, emoji16 := strings.Repeat("a", 32), strings.Repeat("é", 32), "a"+strings.Repeat("😀", 16)
	for _, c := range []struct {
		name           string
		vals           []string
		min, max       string // Delta bounds of s; "" for none
		footLo, footHi string // footer bounds of s and bin
		noFooter       bool
	}{
		{"plain", []string{"b", "", "a", "ab"}, `""`, `"b"`, "", "b", false},
		{"invalid-utf8-max", []string{"a", "\xff\xfe", "b"}, "", "", "a", "\xff\xfe", false},
		{"invalid-utf8-min", []string{"\x80", "\xc3", "\xc3\xa9"}, "", "", "\x80", "\xc3\xa9", false},
		{"ascii-past-prefix", []string{strings.Repeat("a", 40)}, `"` + a32 + `"`, `"` + a32 + "\u007f" + `"`, strings.Repeat("a", 40), strings.Repeat("a", 40), false},
		{"two-byte-past-prefix", []string{strings.Repeat("é", 40)}, `"` + e32 + `"`, `"` + e32 + "\U0010FFFF" + `"`, strings.Repeat("é", 40), strings.Repeat("é", 40), false},
		{"surrogate-pair-at-cut", []string{"a" + strings.Repeat("😀", 20)}, `"` + emoji16 + `"`, `"` + emoji16 + "\U0010FFFF" + `"`, "a" + strings.Repeat("😀", 20), "a" + strings.Repeat("😀", 20), false},
		{"no-max-after-U+10FFFF", []string{strings.Repeat("\U0010FFFF", 40), "b"}, "", "", "b", strings.Repeat("\U0010FFFF", 40), false},
		{"all-empty", []string{"", "", ""}, `""`, `""`, "", "", false},
		{"past-footer-bound", []string{"m", strings.Repeat("z", parquetenc.MaxFooterBound+1), "a"}, `"a"`, `"` + strings.Repeat("z", 32) + "\u007f" + `"`, "", "", true},
		{"at-footer-bound", []string{"m", strings.Repeat("z", parquetenc.MaxFooterBound)}, `"m"`, `"` + strings.Repeat("z", 32) + "\u007f" + `"`, "m", strings.Repeat("z", parquetenc.MaxFooterBound), false},
		// 1,200 rows of three values: dictionary-encoded, bounds from the entries
		{"dictionary", slices.Repeat([]string{"kiwi", "apple", "zucchini-and-more"}, 400), `"apple"`, `"zucchini-and-more"`, "apple", "zucchini-and-more", false},
	} {
		rows := make([]map[string]any, len(c.vals))
		for i, v := range c.vals {
			rows[i] = map[string]any{"s": v, "bin": []byte(v)}
		}
		vals, err := shredRows(pq, rows)
		if err != nil {
			t.Fatal(err)
		}
		cols := deltatest.ColumnsOf(pq, vals)
		for i := range cols {
			if !cols[i].IsDense() || cols[i].Len() != len(c.vals) || len(cols[i].Values) != 0 {
				t.Fatalf("%s: column %d is not in the byte form", c.name, i)
			}
		}
		var lbuf, dbuf bytes.Buffer
		ladd, err := WriteDataFile(context.Background(), deltatest.NewMemStore(&lbuf), pq, vals, len(c.vals), FileOptions{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		add, err := WriteColumns(context.Background(), deltatest.NewMemStore(&dbuf), pq, cols, len(c.vals), FileOptions{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		mins, maxs := `{}`, `{}`
		if c.min != "" {
			mins, maxs = `{"s":`+c.min+`}`, `{"s":`+c.max+`}`
		}
		want := fmt.Sprintf(`{"numRecords":%d,"minValues":%s,"maxValues":%s,"nullCount":{"s":0,"bin":0}}`, len(c.vals), mins, maxs)
		if add.Stats != want {
			t.Errorf("%s: stats\n got %s\nwant %s", c.name, add.Stats, want)
		}
		if add.Stats != ladd.Stats || !bytes.Equal(dbuf.Bytes(), lbuf.Bytes()) {
			t.Errorf("%s: WriteColumns wrote stats %s and %d bytes, WriteDataFile %s and %d", c.name, add.Stats, dbuf.Len(), ladd.Stats, lbuf.Len())
		}
		f, err := parquet.OpenFile(bytes.NewReader(dbuf.Bytes()), int64(dbuf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		for _, cc := range f.Metadata().RowGroups[0].Columns {
			st := cc.MetaData.Statistics
			lo, hi := string(st.MinValue), string(st.MaxValue)
			if c.noFooter && (st.MinValue != nil || st.MaxValue != nil) || !c.noFooter && (lo != c.footLo || hi != c.footHi || st.MinValue == nil) {
				t.Errorf("%s: footer bounds of %v: %q %q, want %q %q (none: %v)", c.name, cc.MetaData.PathInSchema, lo, hi, c.footLo, c.footHi, c.noFooter)
			}
			if dict := cc.MetaData.DictionaryPageOffset != 0; dict != (c.name == "dictionary") {
				t.Errorf("%s: %v dictionary-encoded %v", c.name, cc.MetaData.PathInSchema, dict)
			}
		}
	}
}
