package decode

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// richSchema covers every Avro type ingestd maps, nested records, arrays of records, maps
// of records, nullable unions both ways round, a multi-branch union and a null-typed field.
const richSchema = `{"type":"record","name":"Rich","namespace":"t","fields":[
 {"name":"b","type":"boolean"},
 {"name":"i","type":"int"},
 {"name":"l","type":"long"},
 {"name":"f","type":"float"},
 {"name":"d","type":"double"},
 {"name":"s","type":"string"},
 {"name":"by","type":"bytes"},
 {"name":"fx","type":{"type":"fixed","name":"F4","size":4}},
 {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
 {"name":"u","type":{"type":"string","logicalType":"uuid"}},
 {"name":"dt","type":{"type":"int","logicalType":"date"}},
 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"tsm","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"tsu","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"ltsm","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"ltsu","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"dec9","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"dec18","type":{"type":"fixed","name":"F8","size":8,"logicalType":"decimal","precision":18,"scale":4}},
 {"name":"dec38","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":10}},
 {"name":"ns","type":["null","string"]},
 {"name":"sn","type":["string","null"]},
 {"name":"multi","type":["null","long","string"]},
 {"name":"nested","type":{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"},{"name":"y","type":["null","string"]}]}},
 {"name":"onested","type":["null","Inner"]},
 {"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},
 {"name":"tags","type":{"type":"array","items":["null","string"]}},
 {"name":"m","type":{"type":"map","values":{"type":"record","name":"V","fields":[{"name":"v","type":"double"}]}}},
 {"name":"legacy","type":"null"}
]}`

func TestDecodeRoundTripEveryType(t *testing.T) {
	ws := mustWriter(t, 1, richSchema)
	d, pq := mustCompile(t, ws, ws.Delta, "none")
	ts := func(us int64) time.Time { return time.UnixMicro(us).UTC() }
	rows := []map[string]any{
		{ // values, negative decimals
			"b": true, "i": 42, "l": int64(-5), "f": float32(1.5), "d": -2.25, "s": "héllo", "by": []byte{0, 255},
			"fx": [4]byte{1, 2, 3, 4}, "e": "GREEN", "u": "6c0e4b2a-0000-4000-8000-000000000001",
			"dt": time.Date(2023, 12, 17, 0, 0, 0, 0, time.UTC), "tm": 1500 * time.Millisecond, "tu": 1500 * time.Microsecond,
			"tsm": ts(1702771200123000), "tsu": ts(1702771200123456), "ltsm": ts(1702771200123000), "ltsu": ts(1702771200123456),
			"dec9": rat(t, "-123.45"), "dec18": rat(t, "-0.0001"), "dec38": rat(t, "-12345678901234567890.0123456789"),
			"ns": "n", "sn": "x", "multi": int64(7),
			"nested":  map[string]any{"x": 1, "y": "y"},
			"onested": map[string]any{"t.Inner": map[string]any{"x": 7, "y": nil}},
			"items":   []any{map[string]any{"sku": "a", "qty": 1}, map[string]any{"sku": "b", "qty": -2}},
			"tags":    []any{"t1", nil, ""},
			"m":       map[string]any{"k1": map[string]any{"v": 0.5}},
			"legacy":  nil,
		},
		{ // zero values and empties: none of them may become NULL
			"b": false, "i": 0, "l": int64(0), "f": float32(0), "d": 0.0, "s": "", "by": []byte{},
			"fx": [4]byte{}, "e": "RED", "u": "", "dt": time.Unix(0, 0).UTC(), "tm": time.Duration(0), "tu": time.Duration(0),
			"tsm": ts(0), "tsu": ts(0), "ltsm": ts(0), "ltsu": ts(0),
			"dec9": rat(t, "0"), "dec18": rat(t, "0"), "dec38": rat(t, "0"),
			"ns": "", "sn": "", "multi": "",
			"nested": map[string]any{"x": 0, "y": ""}, "onested": nil,
			"items": []any{}, "tags": []any{}, "m": map[string]any{}, "legacy": nil,
		},
		{ // nulls
			"b": true, "i": -1, "l": int64(1) << 40, "f": float32(-0.25), "d": 1e300, "s": "s", "by": []byte{7},
			"fx": [4]byte{9, 9, 9, 9}, "e": "GREEN", "u": "u", "dt": time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC),
			"tm": time.Millisecond, "tu": time.Microsecond, "tsm": ts(-1000), "tsu": ts(-1), "ltsm": ts(-1000), "ltsu": ts(-1),
			"dec9": rat(t, "9999999.99"), "dec18": rat(t, "12345678901234.5678"), "dec38": rat(t, "0.0000000001"),
			"ns": nil, "sn": nil, "multi": nil,
			"nested": map[string]any{"x": -1, "y": nil}, "onested": map[string]any{"t.Inner": map[string]any{"x": 0, "y": ""}},
			"items": []any{map[string]any{"sku": "", "qty": 0}}, "tags": []any{nil},
			"m": map[string]any{"": map[string]any{"v": -1.0}}, "legacy": nil,
		},
	}
	var cols [][]parquet.Value
	for i, r := range rows {
		var err error
		cols, err = decodeCase(t, d, mustMarshal(t, ws.Avro, r), cols)
		if err != nil {
			t.Fatalf("decode row %d: %v", i, err)
		}
	}
	want := map[string][]string{
		"b":                      {"0/1:true", "0/1:false", "0/1:true"},
		"i":                      {"0/1:42", "0/1:0", "0/1:-1"},
		"l":                      {"0/1:-5", "0/1:0", "0/1:1099511627776"},
		"f":                      {"0/1:1.5", "0/1:0", "0/1:-0.25"},
		"d":                      {"0/1:-2.25", "0/1:0", "0/1:1e+300"},
		"s":                      {`0/1:"héllo"`, `0/1:""`, `0/1:"s"`},
		"by":                     {`0/1:"\x00\xff"`, `0/1:""`, `0/1:"\a"`},
		"fx":                     {`0/1:"\x01\x02\x03\x04"`, `0/1:"\x00\x00\x00\x00"`, `0/1:"\t\t\t\t"`},
		"e":                      {`0/1:"GREEN"`, `0/1:"RED"`, `0/1:"GREEN"`},
		"u":                      {`0/1:"6c0e4b2a-0000-4000-8000-000000000001"`, `0/1:""`, `0/1:"u"`},
		"dt":                     {"0/1:19708", "0/1:0", "0/1:-1"},
		"tm":                     {"0/1:1500", "0/1:0", "0/1:1"},
		"tu":                     {"0/1:1500", "0/1:0", "0/1:1"},
		"tsm":                    {"0/1:1702771200123000", "0/1:0", "0/1:-1000"},
		"tsu":                    {"0/1:1702771200123456", "0/1:0", "0/1:-1"},
		"ltsm":                   {"0/1:1702771200123000", "0/1:0", "0/1:-1000"},
		"ltsu":                   {"0/1:1702771200123456", "0/1:0", "0/1:-1"},
		"dec9":                   {"0/1:-12345", "0/1:0", "0/1:999999999"},
		"dec18":                  {"0/1:-1", "0/1:0", "0/1:123456789012345678"},
		"dec38":                  {"0/1:" + twos(t, "-123456789012345678900123456789", 16)[2:], "0/1:" + twos(t, "0", 16)[2:], "0/1:" + twos(t, "1", 16)[2:]},
		"ns":                     {`0/1:"n"`, `0/1:""`, "0/0:null"},
		"sn":                     {`0/1:"x"`, `0/1:""`, "0/0:null"},
		"multi.member0":          {"0/2:7", "0/1:null", "0/0:null"},
		"multi.member1":          {"0/1:null", `0/2:""`, "0/0:null"},
		"nested.x":               {"0/2:1", "0/2:0", "0/2:-1"},
		"nested.y":               {`0/2:"y"`, `0/2:""`, "0/1:null"},
		"onested.x":              {"0/2:7", "0/0:null", "0/2:0"},
		"onested.y":              {"0/1:null", "0/0:null", `0/2:""`},
		"items.list.element.sku": {`0/4:"a"`, `1/4:"b"`, "0/1:null", `0/4:""`},
		"items.list.element.qty": {"0/4:1", "1/4:-2", "0/1:null", "0/4:0"},
		"tags.list.element":      {`0/3:"t1"`, "1/2:null", `1/3:""`, "0/1:null", "0/2:null"},
		"m.key_value.key":        {`0/2:"k1"`, "0/1:null", `0/2:""`},
		"m.key_value.value.v":    {"0/4:0.5", "0/1:null", "0/4:-1"},
	}
	// dec38 is a FIXED_LEN_BYTE_ARRAY(16): rendered as hex.
	for i, v := range want["dec38"] {
		want["dec38"][i] = v[:4] + "0x" + v[4:]
	}
	if got := renderCols(pq, cols); !reflect.DeepEqual(got, want) {
		for k := range want {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Errorf("in memory %s:\n got %q\nwant %q", k, got[k], want[k])
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected column %s", k)
			}
		}
	}
	file := writeParquet(t, pq, cols)
	got, n := readColumns(t, file)
	if n != len(rows) {
		t.Fatalf("file has %d rows, want %d", n, len(rows))
	}
	for k := range want {
		if !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("from file %s:\n got %q\nwant %q", k, got[k], want[k])
		}
	}

	// The same file read back as maps: zeros stay zeros, nulls are nil.
	r := parquet.NewGenericReader[map[string]any](bytes.NewReader(file), pq)
	out := []map[string]any{{}, {}, {}}
	if k, _ := r.Read(out); k != 3 {
		t.Fatalf("read %d map rows", k)
	}
	for _, c := range []struct {
		row  int
		col  string
		want any
	}{
		{1, "i", int32(0)}, {1, "l", int64(0)}, {1, "b", false}, {1, "s", ""}, {1, "d", 0.0}, {1, "ns", ""},
		{2, "ns", nil}, {2, "sn", nil}, {0, "tsu", int64(1702771200123456)}, {0, "e", "GREEN"},
		{1, "onested", nil}, {2, "multi", nil},
	} {
		if got := out[c.row][c.col]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("map row %d %s = %#v, want %#v", c.row, c.col, got, c.want)
		}
	}
	if got := out[0]["items"]; !reflect.DeepEqual(got, []any{map[string]any{"qty": int32(1), "sku": "a"}, map[string]any{"qty": int32(-2), "sku": "b"}}) {
		t.Errorf("map row 0 items = %#v", got)
	}
}
