package decode

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

func TestParseFrame(t *testing.T) {
	for _, c := range []struct {
		name    string
		value   []byte
		id      int
		payload []byte
		reason  string
	}{
		{name: "empty", value: []byte{}, reason: ReasonTooShort},
		{name: "three zero bytes", value: []byte{0, 0, 0}, reason: ReasonTooShort},
		{name: "four bytes", value: []byte{0, 0, 0, 1}, reason: ReasonTooShort},
		{name: "json text", value: []byte(`{"order_id":1}`), reason: ReasonBadMagic},
		{name: "magic 1", value: []byte{1, 0, 0, 0, 1, 2}, reason: ReasonBadMagic},
		{name: "header only", value: []byte{0, 0, 0, 0, 0x65}, id: 101, payload: []byte{}},
		{name: "id 201 and a 5-byte body", value: []byte{0, 0, 0, 0, 0xC9, 0x04, 0x06, 'B', 'o', 'b'}, id: 201, payload: []byte{0x04, 0x06, 'B', 'o', 'b'}},
		{name: "id 0", value: []byte{0, 0, 0, 0, 0, 2}, id: 0, payload: []byte{2}},
		{name: "largest id", value: []byte{0, 0xff, 0xff, 0xff, 0xff}, id: 1<<32 - 1, payload: []byte{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, payload, err := ParseFrame(c.value)
			if c.reason != "" {
				var e *Error
				if !errors.As(err, &e) || e.Reason != c.reason {
					t.Fatalf("ParseFrame error = %v, want reason %s", err, c.reason)
				}
				return
			}
			if err != nil || id != c.id || !bytes.Equal(payload, c.payload) {
				t.Fatalf("ParseFrame = %d, %x, %v; want %d, %x", id, payload, err, c.id, c.payload)
			}
		})
	}
}

func field(name string, t deltalog.DataType, nullable bool) *deltalog.StructField {
	return &deltalog.StructField{Name: name, Type: t, Nullable: nullable}
}

func structOf(fs ...*deltalog.StructField) *deltalog.StructType {
	return &deltalog.StructType{Fields: fs}
}

// Every record decodes with its own writer schema (Customer v1, id 201, and v2, id 202,
// which adds age and tier, into one wider table): columns the writer lacks are NULL, never
// Avro defaults (tier's "std"); names match case-insensitively, keeping the table's
// spelling (v1's ID and Name fill id and name).
func TestDecodeOlderWriterIntoWiderTable(t *testing.T) {
	v1 := mustWriter(t, 201, `{"type":"record","name":"Customer","fields":[{"name":"ID","type":"long"},{"name":"Name","type":"string"}]}`)
	v2 := mustWriter(t, 202, `{"type":"record","name":"Customer","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},
		{"name":"age","type":["null","int"],"default":null},{"name":"tier","type":"string","default":"std"}]}`)
	table := structOf(field("id", deltalog.Long, true), field("name", deltalog.String, true), field("age", deltalog.Integer, true),
		field("tier", deltalog.String, true), field("address", structOf(field("city", deltalog.String, true)), true))
	d1, pq := mustCompile(t, v1, table, "none")
	d2, _ := mustCompile(t, v2, table, "none")

	var cols [][]parquet.Value
	var err error
	cols, err = decodeCase(t, d2, mustMarshal(t, v2.Avro, map[string]any{"id": int64(1), "name": "Ann", "age": 41, "tier": "gold"}), cols)
	if err != nil {
		t.Fatal(err)
	}
	id, payload, err := ParseFrame([]byte{0, 0, 0, 0, 0xC9, 0x04, 0x06, 'B', 'o', 'b'})
	if err != nil || id != 201 {
		t.Fatalf("frame: %d %v", id, err)
	}
	if cols, err = decodeCase(t, d1, payload, cols); err != nil {
		t.Fatalf("decode v1 with v1: %v", err)
	}
	// Decoding the v1 body with the v2 schema would run past its end.
	before := colLens(cols)
	if cols, err = decodeCase(t, d2, payload, cols); ReasonOf(err) != ReasonTruncated {
		t.Fatalf("decode v1 with v2: %v, want truncated", err)
	}
	if !slices.Equal(colLens(cols), before) {
		t.Fatalf("failed decode left a partial row: %v -> %v", before, colLens(cols))
	}
	got, _ := readColumns(t, writeParquet(t, pq, cols))
	want := map[string][]string{
		"id":           {"0/1:1", "0/1:2"},
		"name":         {`0/1:"Ann"`, `0/1:"Bob"`},
		"age":          {"0/1:41", "0/0:null"},
		"tier":         {`0/1:"gold"`, "0/0:null"},
		"address.city": {"0/0:null", "0/0:null"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("columns\n got %q\nwant %q", got, want)
	}
}

// Lossless upcasts, skipped writer fields (complex ones before matched ones), column
// mapping physical names, and decimal rescaling.
func TestDecodeUpcastsSkipsAndColumnMapping(t *testing.T) {
	w := mustWriter(t, 7, `{"type":"record","name":"R","fields":[
		{"name":"dropped","type":{"type":"array","items":{"type":"record","name":"D","fields":[{"name":"a","type":"string"},{"name":"m","type":{"type":"map","values":["null","long"]}}]}}},
		{"name":"seq","type":"int"},
		{"name":"ratio","type":"float"},
		{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":5,"scale":2}},
		{"name":"big","type":{"type":"fixed","name":"F","size":8,"logicalType":"decimal","precision":18,"scale":0}},
		{"name":"day","type":{"type":"int","logicalType":"date"}},
		{"name":"n","type":"int"},
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"alsoDropped","type":["null","string","double"]}
	]}`)
	md := func(id int, phys string) map[string]any {
		return map[string]any{deltalog.MetaColumnMappingID: float64(id), deltalog.MetaColumnMappingPhysicalName: phys}
	}
	table := structOf(
		&deltalog.StructField{Name: "SEQ", Type: deltalog.Long, Nullable: true, Metadata: md(1, "col-1")},
		&deltalog.StructField{Name: "ratio", Type: deltalog.Double, Nullable: true, Metadata: md(2, "col-2")},
		&deltalog.StructField{Name: "amount", Type: deltalog.DecimalType{Precision: 10, Scale: 4}, Nullable: true, Metadata: md(3, "col-3")},
		&deltalog.StructField{Name: "big", Type: deltalog.DecimalType{Precision: 38, Scale: 2}, Nullable: true, Metadata: md(4, "col-4")},
		&deltalog.StructField{Name: "day", Type: deltalog.TimestampNtz, Nullable: true, Metadata: md(5, "col-5")},
		&deltalog.StructField{Name: "n", Type: deltalog.Double, Nullable: true, Metadata: md(6, "col-6")},
		&deltalog.StructField{Name: "ts", Type: deltalog.Timestamp, Nullable: true, Metadata: md(7, "col-7")},
	)
	d, pq := mustCompile(t, w, table, deltalog.ColumnMappingName)
	rec := map[string]any{
		"dropped": []any{map[string]any{"a": "x", "m": map[string]any{"k": int64(5), "z": nil}}},
		"seq":     -3, "ratio": float32(0.1), "amount": rat(t, "-123.45"), "big": rat(t, "-999999999999999999"),
		"day": mustDate(t, "2023-12-17"), "n": 2147483647, "ts": mustTime(t, "2023-12-17T00:00:00.123Z"), "alsoDropped": 1.5,
	}
	cols, err := decodeCase(t, d, mustMarshal(t, w.Avro, rec), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readColumns(t, writeParquet(t, pq, cols))
	want := map[string][]string{
		"col-1": {"0/1:-3"},
		"col-2": {"0/1:0.10000000149011612"}, // float32(0.1) widened exactly
		"col-3": {"0/1:-1234500"},
		"col-4": {"0/1:" + twos(t, "-99999999999999999900", 16)},
		"col-5": {"0/1:1702771200000000"},
		"col-6": {"0/1:2.147483647e+09"},
		"col-7": {"0/1:1702771200123000"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("columns\n got %q\nwant %q", got, want)
	}
}

func TestCompileRejects(t *testing.T) {
	prim := func(avroType string, col deltalog.DataType) (string, *deltalog.StructType) {
		return `{"type":"record","name":"R","fields":[{"name":"f","type":` + avroType + `}]}`, structOf(field("f", col, true))
	}
	type tc struct {
		name   string
		writer string
		table  *deltalog.StructType
		reason string
		field  string
	}
	var cases []tc
	for _, c := range []struct {
		name, avro string
		col        deltalog.DataType
	}{
		{"long into int", `"long"`, deltalog.Integer},
		{"int into short", `"int"`, deltalog.Short},
		{"string into long", `"string"`, deltalog.Long},
		{"long into string", `"long"`, deltalog.String},
		{"double into float", `"double"`, deltalog.Float},
		{"long into double", `"long"`, deltalog.Double},
		{"bytes into string", `"bytes"`, deltalog.String},
		{"timestamp into long", `{"type":"long","logicalType":"timestamp-micros"}`, deltalog.Long},
		{"long into timestamp", `"long"`, deltalog.Timestamp},
		{"timestamp into timestamp_ntz", `{"type":"long","logicalType":"timestamp-micros"}`, deltalog.TimestampNtz},
		{"local timestamp into timestamp", `{"type":"long","logicalType":"local-timestamp-micros"}`, deltalog.Timestamp},
		{"date into timestamp", `{"type":"int","logicalType":"date"}`, deltalog.Timestamp},
		{"date into int", `{"type":"int","logicalType":"date"}`, deltalog.Integer},
		{"decimal scale down", `{"type":"bytes","logicalType":"decimal","precision":10,"scale":3}`, deltalog.DecimalType{Precision: 10, Scale: 2}},
		{"decimal integer digits down", `{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}`, deltalog.DecimalType{Precision: 11, Scale: 4}},
		{"int into small decimal", `"int"`, deltalog.DecimalType{Precision: 9, Scale: 0}},
		{"record into string", `{"type":"record","name":"X","fields":[{"name":"a","type":"int"}]}`, deltalog.String},
		{"string into struct", `"string"`, structOf(field("a", deltalog.Integer, true))},
		{"array into map", `{"type":"array","items":"string"}`, &deltalog.MapType{KeyType: deltalog.String, ValueType: deltalog.String, ValueContainsNull: true}},
		{"union into scalar", `["long","string"]`, deltalog.Long},
	} {
		w, tbl := prim(c.avro, c.col)
		cases = append(cases, tc{c.name, w, tbl, ReasonSchemaMismatch, "f"})
	}
	cases = append(cases,
		tc{"nested array element field", `{"type":"record","name":"R","fields":[{"name":"items","type":{"type":"array","items":{"type":"record","name":"I","fields":[{"name":"qty","type":"long"}]}}}]}`,
			structOf(field("items", &deltalog.ArrayType{ElementType: structOf(field("qty", deltalog.Integer, true)), ContainsNull: true}, true)), ReasonSchemaMismatch, "items[].qty"},
		tc{"nested map value field", `{"type":"record","name":"R","fields":[{"name":"m","type":{"type":"map","values":{"type":"record","name":"V","fields":[{"name":"v","type":"string"}]}}}]}`,
			structOf(field("m", &deltalog.MapType{KeyType: deltalog.String, ValueType: structOf(field("v", deltalog.Long, true)), ValueContainsNull: true}, true)), ReasonSchemaMismatch, "m{}.v"},
		tc{"union branch without member", `{"type":"record","name":"R","fields":[{"name":"u","type":["long","string","double"]}]}`,
			structOf(field("u", structOf(field("member0", deltalog.Long, true), field("member1", deltalog.String, true)), true)), ReasonSchemaMismatch, "u.member2"},
		tc{"two writer fields for one column", `{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"B","type":"long"},{"name":"b","type":"long"}]}`,
			structOf(field("a", deltalog.Long, true), field("b", deltalog.Long, true)), ReasonUnsupportedType, "b"},
		tc{"NOT NULL column missing from writer", `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`,
			structOf(field("a", deltalog.Long, true), field("b", deltalog.Long, false)), ReasonNotNullViolation, "b"},
		tc{"recursive writer", `{"type":"record","name":"N","fields":[{"name":"next","type":["null","N"]}]}`,
			structOf(field("next", deltalog.Long, true)), ReasonUnsupportedType, "next"},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws, err := ParseWriterSchema(1, c.writer)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(ws, c.table, "none", mustParquet(t, c.table, "none"))
			if ReasonOf(err) != c.reason || FieldOf(err) != c.field {
				t.Fatalf("Compile error = %v (reason %q, field %q), want reason %q field %q", err, ReasonOf(err), FieldOf(err), c.reason, c.field)
			}
		})
	}
}

func TestDecodeNotNullViolation(t *testing.T) {
	w := mustWriter(t, 3, `{"type":"record","name":"R","fields":[{"name":"a","type":["null","long"]},
		{"name":"items","type":{"type":"array","items":{"type":"record","name":"I","fields":[{"name":"qty","type":["null","int"]}]}}},
		{"name":"m","type":{"type":"map","values":["null","string"]}}]}`)
	table := structOf(field("a", deltalog.Long, false),
		field("items", &deltalog.ArrayType{ElementType: structOf(field("qty", deltalog.Integer, false)), ContainsNull: true}, true),
		field("m", &deltalog.MapType{KeyType: deltalog.String, ValueType: deltalog.String, ValueContainsNull: false}, true))
	d, pq := mustCompile(t, w, table, "none")
	good := map[string]any{"a": int64(1), "items": []any{map[string]any{"qty": 1}}, "m": map[string]any{"k": "v"}}
	cols, err := decodeCase(t, d, mustMarshal(t, w.Avro, good), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := colLens(cols)
	for _, c := range []struct {
		rec   map[string]any
		field string
	}{
		{map[string]any{"a": nil, "items": []any{}, "m": map[string]any{}}, "a"},
		{map[string]any{"a": int64(2), "items": []any{map[string]any{"qty": 1}, map[string]any{"qty": nil}}, "m": map[string]any{}}, "items[].qty"},
		{map[string]any{"a": int64(2), "items": []any{}, "m": map[string]any{"k": nil}}, "m{}"},
	} {
		cols, err = decodeCase(t, d, mustMarshal(t, w.Avro, c.rec), cols)
		if ReasonOf(err) != ReasonNotNullViolation || FieldOf(err) != c.field {
			t.Errorf("decode %v: %v, want not_null_violation at %s", c.rec, err, c.field)
		}
		if !slices.Equal(colLens(cols), before) {
			t.Errorf("partial row left behind: %v -> %v", before, colLens(cols))
		}
	}
	got, n := readColumns(t, writeParquet(t, pq, cols))
	if n != 1 || got["a"][0] != "0/1:1" {
		t.Fatalf("file after rejected rows: %d rows %q", n, got)
	}
}

func TestDecodeTopLevelNullableRecord(t *testing.T) {
	w := mustWriter(t, 4, `["null",{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}]`)
	d, _ := mustCompile(t, w, w.Delta, "none")
	cols, err := decodeCase(t, d, []byte{0}, nil)
	if !errors.Is(err, ErrNullRecord) || len(cols[0]) != 0 {
		t.Fatalf("null record: %v %v", cols, err)
	}
	if cols, err = decodeCase(t, d, []byte{2, 4}, cols); err != nil || render(cols[0][0]) != "0/1:2" {
		t.Fatalf("record branch: %v %v", cols, err)
	}
	if _, err = decodeCase(t, d, []byte{0, 0}, cols); ReasonOf(err) != ReasonTrailingBytes {
		t.Fatalf("null record with trailing bytes: %v", err)
	}
	if _, err = decodeCase(t, d, []byte{4}, cols); ReasonOf(err) != ReasonDecodeError {
		t.Fatalf("bad top-level index: %v", err)
	}
}

// malformedSchema: id long, n int, name string, ok boolean, tags array<string>,
// u [null,string], e enum{A,B}, ts timestamp-millis, dec bytes decimal(4,2), f float.
const malformedSchema = `{"type":"record","name":"M","fields":[
	{"name":"id","type":"long"},{"name":"n","type":"int"},{"name":"name","type":"string"},{"name":"ok","type":"boolean"},
	{"name":"tags","type":{"type":"array","items":"string"}},{"name":"u","type":["null","string"]},
	{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
	{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}},
	{"name":"f","type":"float"}]}`

var malformedParts = []struct{ name, hex string }{
	{"id", "02"}, {"n", "04"}, {"name", "046162"}, {"ok", "01"}, {"tags", "02027800"}, {"u", "00"},
	{"e", "02"}, {"ts", "0a"}, {"dec", "0264"}, {"f", "0000803f"},
}

func buildMalformed(t testing.TB, override map[string]string, cut int) []byte {
	var out []byte
	for _, p := range malformedParts {
		h := p.hex
		if o, ok := override[p.name]; ok {
			h = o
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	if cut > 0 {
		out = out[:len(out)-cut]
	}
	return out
}

func TestDecodeMalformed(t *testing.T) {
	w := mustWriter(t, 5, malformedSchema)
	d, _ := mustCompile(t, w, w.Delta, "none")
	valid := buildMalformed(t, nil, 0)
	cols, err := decodeCase(t, d, valid, nil)
	if err != nil {
		t.Fatalf("valid payload: %v", err)
	}
	before := colLens(cols)
	for _, c := range []struct {
		name     string
		override map[string]string
		payload  []byte
		cut      int
		reason   string
		field    string
	}{
		{name: "empty body", payload: []byte{}, reason: ReasonTruncated, field: "id"},
		{name: "one byte of the body", payload: []byte{2}, reason: ReasonTruncated, field: "n"},
		{name: "float cut short", cut: 2, reason: ReasonTruncated, field: "f"},
		{name: "trailing byte", payload: append(append([]byte(nil), valid...), 0), reason: ReasonTrailingBytes},
		{name: "varint longer than 10 bytes", override: map[string]string{"id": "ffffffffffffffffff8001"}, reason: ReasonDecodeError, field: "id"},
		{name: "varint beyond 64 bits", override: map[string]string{"id": "ffffffffffffffffff02"}, reason: ReasonDecodeError, field: "id"},
		{name: "int beyond 32 bits", override: map[string]string{"n": "ffffffff1f"}, reason: ReasonDecodeError, field: "n"},
		{name: "negative string length", override: map[string]string{"name": "01"}, reason: ReasonDecodeError, field: "name"},
		{name: "string longer than input", override: map[string]string{"name": "feffffff0f"}, reason: ReasonDecodeError, field: "name"},
		{name: "boolean 2", override: map[string]string{"ok": "02"}, reason: ReasonDecodeError, field: "ok"},
		{name: "block count beyond input", override: map[string]string{"tags": "feffffff0f"}, reason: ReasonDecodeError, field: "tags"},
		{name: "block count min int64", override: map[string]string{"tags": "ffffffffffffffffff01"}, reason: ReasonDecodeError, field: "tags"},
		{name: "negative block size", override: map[string]string{"tags": "010102780000"}, reason: ReasonDecodeError, field: "tags"},
		{name: "block size mismatch", override: map[string]string{"tags": "0106027800"}, reason: ReasonDecodeError, field: "tags"},
		{name: "negative item string length", override: map[string]string{"tags": "020100"}, reason: ReasonDecodeError, field: "tags[]"},
		{name: "union index 2", override: map[string]string{"u": "04"}, reason: ReasonDecodeError, field: "u"},
		{name: "union index -1", override: map[string]string{"u": "01"}, reason: ReasonDecodeError, field: "u"},
		{name: "enum index 2", override: map[string]string{"e": "04"}, reason: ReasonDecodeError, field: "e"},
		{name: "enum index -1", override: map[string]string{"e": "01"}, reason: ReasonDecodeError, field: "e"},
		{name: "timestamp-millis overflows micros", override: map[string]string{"ts": "feffffffffffffffff01"}, reason: ReasonDecodeError, field: "ts"},
		{name: "decimal beyond precision", override: map[string]string{"dec": "042710"}, reason: ReasonDecodeError, field: "dec"},
		{name: "decimal of 40 bytes", override: map[string]string{"dec": "50" + hex.EncodeToString(bytes.Repeat([]byte{0x7f}, 40))}, reason: ReasonDecodeError, field: "dec"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.payload
			if p == nil {
				p = buildMalformed(t, c.override, c.cut)
			}
			got, err := decodeCase(t, d, p, cols)
			if ReasonOf(err) != c.reason || FieldOf(err) != c.field {
				t.Fatalf("Decode(%x) error = %v (reason %q field %q), want %q at %q", p, err, ReasonOf(err), FieldOf(err), c.reason, c.field)
			}
			if !slices.Equal(colLens(got), before) {
				t.Fatalf("not rolled back: %v -> %v", before, colLens(got))
			}
		})
	}
	// Invalid UTF-8 in a string is malformed Avro (a Delta string column holds UTF-8:
	// delta-rs cannot read a file that holds such a value): decode_error at the field,
	// rolled back (TestDecodeInvalidUTF8 has every kind of string).
	before = colLens(cols)
	bad := buildMalformed(t, map[string]string{"name": "04fffe"}, 0)
	got, err := decodeCase(t, d, bad, cols)
	if ReasonOf(err) != ReasonDecodeError || FieldOf(err) != "name" ||
		err.Error() != "decode: decode_error at name: string of 2 bytes is not valid UTF-8 (invalid byte 0xff at offset 0)" {
		t.Fatalf("invalid utf-8: %v", err)
	}
	if !slices.Equal(colLens(got), before) {
		t.Fatalf("invalid utf-8: not rolled back: %v -> %v", before, colLens(got))
	}
}

// The values appended must not alias the payload: the caller may reuse its buffer.
func TestDecodeCopiesBytes(t *testing.T) {
	w := mustWriter(t, 5, malformedSchema)
	d, pq := mustCompile(t, w, w.Delta, "none")
	p := buildMalformed(t, nil, 0)
	cols, err := decodeCase(t, d, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	clear(p)
	lc, _ := pq.Lookup("name")
	if got := render(cols[lc.ColumnIndex][0]); got != `0/1:"ab"` {
		t.Fatalf("name after clearing the payload = %s", got)
	}
}
