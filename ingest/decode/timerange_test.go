package decode

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestAvroTimeRange: Avro date and timestamp values are written only within Delta's range
// (PROTOCOL.md, "Primitive Types": 0001-01-01 to 9999-12-31T23:59:59.999999, in UTC for
// timestamp). Its ends decode exactly; one unit past either end is a decode_error at the
// field, by the inline steps and by the compiled readers alike (a file holding such a
// value has statistics Spark and delta-rs cannot read).
func TestAvroTimeRange(t *testing.T) {
	const fields = `[
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
		{"name":"ntz","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}]},
		{"name":"ms","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"lms","type":["null",{"type":"long","logicalType":"local-timestamp-millis"}]},
		{"name":"d","type":{"type":"int","logicalType":"date"}},
		{"name":"tsa","type":{"type":"array","items":{"type":"long","logicalType":"timestamp-micros"}}},
		{"name":"da","type":{"type":"array","items":["null",{"type":"int","logicalType":"date"}]}}]`
	ws := mustWriter(t, 1, `{"type":"record","name":"r","fields":`+fields+`}`)
	if got := ws.Delta.String(); got != "struct<ts:timestamp,ntz:timestamp_ntz,ms:timestamp,lms:timestamp_ntz,d:date,tsa:array<timestamp>,da:array<date>>" {
		t.Fatalf("Delta schema %s", got)
	}
	// The same binary encoding without the logical types, to write any long or int.
	raw := avro.MustParse(strings.NewReplacer(
		`,"logicalType":"timestamp-micros"`, "", `,"logicalType":"local-timestamp-micros"`, "",
		`,"logicalType":"timestamp-millis"`, "", `,"logicalType":"local-timestamp-millis"`, "",
		`,"logicalType":"date"`, "").Replace(`{"type":"record","name":"r","fields":` + fields + `}`))
	const (
		minUs, maxUs     = deltalog.TimestampMinMicros, deltalog.TimestampMaxMicros // -62135596800000000, 253402300799999999
		minMs, maxMs     = -62135596800000, 253402300799999                         // 0001-01-01T00:00:00.000Z, 9999-12-31T23:59:59.999Z
		minDay, maxDay   = -719162, 2932896                                         // 0001-01-01, 9999-12-31
		usPast, usBefore = maxUs + 1, minUs - 1
	)
	record := func(ts, ntz, ms, lms int64, d int32, tsa []int64, da []any) map[string]any {
		return map[string]any{"ts": ts, "ntz": map[string]any{"long": ntz}, "ms": ms, "lms": map[string]any{"long": lms},
			"d": d, "tsa": tsa, "da": da}
	}
	ends := [][]byte{
		mustMarshal(t, raw, record(minUs, maxUs, minMs, maxMs, minDay, []int64{minUs, maxUs}, []any{map[string]any{"int": int32(maxDay)}, nil})),
		mustMarshal(t, raw, record(maxUs, minUs, maxMs, minMs, maxDay, []int64{}, []any{map[string]any{"int": int32(minDay)}})),
	}
	// Every column of a writer's own Delta schema is nullable: a set value is at
	// definition level 1, a list item at 3 (a null item at 2, an empty list 1).
	want := map[string][]string{
		"ts":               {"0/1:-62135596800000000", "0/1:253402300799999999"},
		"ntz":              {"0/1:253402300799999999", "0/1:-62135596800000000"},
		"ms":               {"0/1:-62135596800000000", "0/1:253402300799999000"},
		"lms":              {"0/1:253402300799999000", "0/1:-62135596800000000"},
		"d":                {"0/1:-719162", "0/1:2932896"},
		"tsa.list.element": {"0/3:-62135596800000000", "1/3:253402300799999999", "0/1:null"},
		"da.list.element":  {"0/3:2932896", "1/2:null", "0/3:-719162"},
	}
	valid := record(0, 0, 0, 0, 0, []int64{0}, []any{map[string]any{"int": int32(0)}})
	past := []struct {
		field string
		v     any
		path  string
		msg   string
	}{
		{"ts", int64(usPast), "ts", "timestamp 253402300800000000 µs since the epoch (10000-01-01T00:00:00Z) is outside Delta's range"},
		{"ts", int64(usBefore), "ts", "timestamp -62135596800000001 µs since the epoch (0000-12-31T23:59:59.999999Z) is outside Delta's range"},
		{"ntz", map[string]any{"long": int64(usPast)}, "ntz", "timestamp 253402300800000000 µs"},
		{"ms", int64(maxMs + 1), "ms", "timestamp 253402300800000 ms since the epoch (10000-01-01T00:00:00Z) is outside Delta's range"},
		{"lms", map[string]any{"long": int64(minMs - 1)}, "lms", "timestamp -62135596800001 ms since the epoch (0000-12-31T23:59:59.999Z)"},
		{"d", int32(maxDay + 1), "d", "date 2932897 days since 1970-01-01 (10000-01-01) is outside Delta's range 0001-01-01..9999-12-31"},
		{"d", int32(minDay - 1), "d", "date -719163 days since 1970-01-01 (0000-12-31) is outside Delta's range"},
		{"tsa", []int64{0, usPast}, "tsa[]", "timestamp 253402300800000000 µs"},
		{"da", []any{nil, map[string]any{"int": int32(minDay - 1)}}, "da[]", "date -719163 days"},
	}
	for _, inline := range []bool{true, false} {
		pq := mustParquet(t, ws.Delta, "none")
		d, err := compile(ws, ws.Delta, "none", pq, inline)
		if err != nil {
			t.Fatal(err)
		}
		cols := make([][]parquet.Value, d.Columns())
		for i, p := range ends {
			if cols, err = decodeCase(t, d, p, cols); err != nil {
				t.Fatalf("inline %v: record %d at Delta's range ends: %v", inline, i, err)
			}
		}
		if got := renderCols(pq, cols); !reflect.DeepEqual(got, want) {
			t.Errorf("inline %v: values at the ends\n got %v\nwant %v", inline, got, want)
		}
		for _, c := range past {
			r := make(map[string]any, len(valid))
			for k, v := range valid {
				r[k] = v
			}
			r[c.field] = c.v
			_, err := decodeCase(t, d, mustMarshal(t, raw, r), make([][]parquet.Value, d.Columns()))
			if ReasonOf(err) != ReasonDecodeError || FieldOf(err) != c.path || !strings.Contains(fmt.Sprint(err), c.msg) {
				t.Errorf("inline %v: %s = %v: %v, want decode_error at %s with %q", inline, c.field, c.v, err, c.path, c.msg)
			}
		}
	}
}
