package decode

// Decoder-level tests of failures other Kafka/Avro pipelines reported in public, as the
// decoder meets them: writer schemas that change under a running topic (this file), and
// records the decoder cannot read (unreadable_records_test.go). Each test gives the exact
// schema ids, schemas, bytes and values it feeds in, the values it expects, and the report
// it comes from; the schema guard's and the pipeline's side of the same failures are tested
// in schemaguard and integration. The test names keep a case label (C02, C07, …) so that
// the three levels of one failure can be found together.

import (
	"bytes"
	"context"
	"encoding/hex"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// framedPipeline is the decoder half of a pipeline: frame → registry (by the frame's own
// id, never "latest") → decoder compiled per (id, table) → one row appended.
type framedPipeline struct {
	t     testing.TB
	reg   *Registry
	table *deltalog.StructType
	pq    *parquet.Schema
	decs  map[int]*Decoder
	cols  [][]parquet.Value
}

func newFramedPipeline(t testing.TB, reg *Registry, table *deltalog.StructType) *framedPipeline {
	return &framedPipeline{t: t, reg: reg, table: table, pq: mustParquet(t, table, "none"), decs: map[int]*Decoder{}}
}

// handle decodes one Kafka value and returns the schema id and the error (nil: a row).
func (p *framedPipeline) handle(value []byte) (int, error) {
	id, payload, err := ParseFrame(value)
	if err != nil {
		return 0, err
	}
	d, ok := p.decs[id]
	if !ok {
		ws, err := p.reg.Schema(context.Background(), id)
		if err != nil {
			return id, err
		}
		if d, err = Compile(ws, p.table, "none", p.pq); err != nil {
			return id, err
		}
		p.decs[id] = d
	}
	p.cols, err = decodeCase(p.t, d, payload, p.cols)
	return id, err
}

func (p *framedPipeline) rows() map[string][]string {
	got, _ := readColumns(p.t, writeParquet(p.t, p.pq, p.cols))
	return got
}

// TestCaseC02OldSchemaIDsAfterNewVersion: producers still on an old schema keep sending
// after a new version is registered. A consumer that decoded every record with the latest
// schema read old bodies with the wrong layout and failed with end-of-input errors
// (apache/hudi#1971). Customer v1 (id 201: id long, name string) and v2 (id 202: v1 + age
// [null,int], tier string default "std"); off 0 is v2 {1,"Ann",41,"gold"}, off 1 is v1
// {2,"Bob"}, whose whole value is 00 00 00 00 C9 04 06 42 6F 62. Each record decodes with
// the schema of the id in its own frame: rows (1,Ann,41,gold) and (2,Bob,NULL,NULL), one
// registry request per id. Bob's 5-byte body read with the v2 decoder runs past its end:
// truncated at age, nothing appended.
func TestCaseC02OldSchemaIDsAfterNewVersion(t *testing.T) {
	const v1 = `{"type":"record","name":"Customer","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`
	const v2 = `{"type":"record","name":"Customer","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},
		{"name":"age","type":["null","int"],"default":null},{"name":"tier","type":"string","default":"std"}]}`
	fake, cl := newCountingRegistry(t)
	fake.SeedSchema("customers-value", 1, 201, sr.Schema{Schema: v1})
	fake.SeedSchema("customers-value", 2, 202, sr.Schema{Schema: v2})
	reg := NewRegistry(cl)

	ws2, err := reg.Schema(context.Background(), 202)
	if err != nil {
		t.Fatal(err)
	}
	if got := ws2.Delta.String(); got != "struct<id:long,name:string,age:integer,tier:string>" {
		t.Fatalf("v2 in Delta = %s", got)
	}
	// Bronze table after off 0 evolved it: customers(id, name) + age int, tier string.
	table := structOf(field("id", deltalog.Long, true), field("name", deltalog.String, true),
		field("age", deltalog.Integer, true), field("tier", deltalog.String, true))
	off0 := mustHex(t, "00 000000CA 02 06416e6e 02 52 08676f6c64") // v2 {1,"Ann",age 41,tier "gold"}
	if want := mustMarshal(t, ws2.Avro, map[string]any{"id": int64(1), "name": "Ann", "age": 41, "tier": "gold"}); !bytes.Equal(off0[5:], want) {
		t.Fatalf("hand-encoded off 0 %x, hamba %x", off0[5:], want)
	}
	off1 := mustHex(t, "00 00 00 00 C9 04 06 42 6F 62") // v1 {2,"Bob"}, verbatim from the case

	p := newFramedPipeline(t, reg, table)
	for i, v := range [][]byte{off0, off1} {
		if _, err := p.handle(v); err != nil {
			t.Fatalf("off %d: %v", i, err)
		}
	}
	want := map[string][]string{
		"id":   {"0/1:1", "0/1:2"},
		"name": {`0/1:"Ann"`, `0/1:"Bob"`},
		"age":  {"0/1:41", "0/0:null"},
		"tier": {`0/1:"gold"`, "0/0:null"}, // NULL, not the Avro default "std"
	}
	if got := p.rows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n got %q\nwant %q", got, want)
	}
	// Swapping in "decode with latest" must fail: Bob's body read with v2.
	latest := p.decs[202]
	before := colLens(p.cols)
	cols, err := decodeCase(t, latest, off1[5:], p.cols)
	if ReasonOf(err) != ReasonTruncated || FieldOf(err) != "age" {
		t.Fatalf("v1 body with the v2 decoder: %v, want truncated at age", err)
	}
	if !slices.Equal(colLens(cols), before) {
		t.Fatalf("partial row left: %v -> %v", before, colLens(cols))
	}
	if n := fake.requests("/schemas/ids/201") + fake.requests("/schemas/ids/202"); n != 2 {
		t.Fatalf("%d registry requests, want one per id", n)
	}
}

// TestCaseC07LongToIntNarrowing: a field changed from long to int, and old records were
// narrowed without a check, so 3000000010 became -1294967286 (Axual/ksml#417). Reading v1
// (id 701: seq long) and v2 (id 702: seq int): into a bigint column both are exact
// (3000000010 and 42); v1 into an int column does not compile (schema_mismatch at seq,
// naming long and integer), and v1's bytes through v2's decoder are a decode_error, never a
// wrapped int.
func TestCaseC07LongToIntNarrowing(t *testing.T) {
	v1 := mustWriter(t, 701, `{"type":"record","name":"Reading","fields":[{"name":"seq","type":"long"}]}`)
	v2 := mustWriter(t, 702, `{"type":"record","name":"Reading","fields":[{"name":"seq","type":"int"}]}`)
	p1 := mustHex(t, "94 f8 82 ad 16") // zigzag(3000000010) = 6000000020
	p2 := mustHex(t, "54")             // zigzag(42) = 84
	if want := mustMarshal(t, v1.Avro, map[string]any{"seq": int64(3000000010)}); !bytes.Equal(p1, want) {
		t.Fatalf("v1 bytes %x, hamba %x", p1, want)
	}

	// Variant A: readings(seq bigint) from v1; both rows accepted, the int upcast.
	bigint := structOf(field("seq", deltalog.Long, true))
	d1, pq := mustCompile(t, v1, bigint, "none")
	d2, _ := mustCompile(t, v2, bigint, "none")
	cols, err := decodeCase(t, d1, p1, nil)
	if err == nil {
		cols, err = decodeCase(t, d2, p2, cols)
	}
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readColumns(t, writeParquet(t, pq, cols))
	if want := []string{"0/1:3000000010", "0/1:42"}; !reflect.DeepEqual(got["seq"], want) {
		t.Fatalf("variant A seq = %q, want %q", got["seq"], want)
	}

	// Variant B: readings(seq int) from v2; replaying v1 cannot compile against it.
	intTable := structOf(field("seq", deltalog.Integer, true))
	_, err = Compile(v1, intTable, "none", mustParquet(t, intTable, "none"))
	if ReasonOf(err) != ReasonSchemaMismatch || FieldOf(err) != "seq" || !strings.Contains(err.Error(), "long") || !strings.Contains(err.Error(), "integer") {
		t.Fatalf("v1 into seq int: %v, want schema_mismatch at seq naming long and integer", err)
	}
	// The v2 decoder never wraps v1's bytes into an int: it refuses them.
	dInt, _ := mustCompile(t, v2, intTable, "none")
	if cols, err = decodeCase(t, dInt, p1, nil); ReasonOf(err) != ReasonDecodeError || len(cols[0]) != 0 {
		t.Fatalf("v1 bytes through the int decoder: %v %v", cols, err)
	}
	// After widening to bigint (bronze with type widening) the replayed v1 row is exact.
	if cols, err = decodeCase(t, d1, p1, nil); err != nil || cols[0][0].Int64() != 3000000010 {
		t.Fatalf("v1 after widening: %v %v", cols, err)
	}
}

// TestCaseC15EnumSymbolAdded: a writer enum gains a symbol. A Go Avro library refused the
// reader/writer pair instead of resolving it (hamba/avro#340). v1 (id 1501) is enum
// Shape[CIRCLE] with default CIRCLE, v2 (id 1502) Shape[CIRCLE,RECTANGLE]: both map to a
// string column, and index 0 under v1 and index 1 under v2 decode to "CIRCLE" and
// "RECTANGLE" (each record with its writer's own symbols). Index 1 under v1 is a
// decode_error at kind, never the default.
func TestCaseC15EnumSymbolAdded(t *testing.T) {
	v1 := mustWriter(t, 1501, `{"type":"record","name":"S","fields":[{"name":"kind","type":{"type":"enum","name":"Shape","symbols":["CIRCLE"],"default":"CIRCLE"}}]}`)
	v2 := mustWriter(t, 1502, `{"type":"record","name":"S","fields":[{"name":"kind","type":{"type":"enum","name":"Shape","symbols":["CIRCLE","RECTANGLE"]}}]}`)
	if v1.Delta.String() != "struct<kind:string>" || v2.Delta.String() != v1.Delta.String() {
		t.Fatalf("Delta types %s, %s; want struct<kind:string> twice", v1.Delta, v2.Delta)
	}
	table := structOf(field("kind", deltalog.String, true))
	d1, pq := mustCompile(t, v1, table, "none")
	d2, _ := mustCompile(t, v2, table, "none")
	cols, err := decodeCase(t, d1, []byte{0x00}, nil) // CIRCLE
	if err == nil {
		cols, err = decodeCase(t, d2, []byte{0x02}, cols) // RECTANGLE
	}
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readColumns(t, writeParquet(t, pq, cols))
	if want := []string{`0/1:"CIRCLE"`, `0/1:"RECTANGLE"`}; !reflect.DeepEqual(got["kind"], want) {
		t.Fatalf("kind = %q, want %q", got["kind"], want)
	}
	// Index 1 is only meaningful under v2: v1's decoder refuses it (never maps it to a default).
	if _, err := decodeCase(t, d1, []byte{0x02}, nil); ReasonOf(err) != ReasonDecodeError || FieldOf(err) != "kind" {
		t.Fatalf("index 1 under v1: %v", err)
	}
}

// TestCaseC18Date: an int/date value for 2023-12-17 came out as the integer 19708 (days
// since the epoch) in other readers (duckdb/duckdb-avro#10). v1 (id 1801) last_date
// int/date, v2 (1802) long/local-timestamp-micros, v3 (1803) long/timestamp-micros. 19708
// into a date column is DATE 2023-12-17 (Parquet logical type DATE); into a timestamp_ntz
// column (type widening) it is midnight, 1702771200000000 µs, the same as v2's value.
// Never lossless, so schema_mismatch at last_date: v3 into date or timestamp_ntz, v2 into
// date, a date into long or timestamp (19708 days must never become 19708 µs).
func TestCaseC18Date(t *testing.T) {
	rec := func(typ string) string {
		return `{"type":"record","name":"M","fields":[{"name":"last_date","type":` + typ + `}]}`
	}
	v1 := mustWriter(t, 1801, rec(`{"type":"int","logicalType":"date"}`))
	v2 := mustWriter(t, 1802, rec(`{"type":"long","logicalType":"local-timestamp-micros"}`))
	v3 := mustWriter(t, 1803, rec(`{"type":"long","logicalType":"timestamp-micros"}`))
	for _, c := range []struct {
		ws   *WriterSchema
		want string
	}{{v1, "struct<last_date:date>"}, {v2, "struct<last_date:timestamp_ntz>"}, {v3, "struct<last_date:timestamp>"}} {
		if got := c.ws.Delta.String(); got != c.want {
			t.Errorf("schema %d in Delta = %s, want %s", c.ws.ID, got, c.want)
		}
	}
	p1 := mustHex(t, "f8 b3 02") // zigzag(19708) = 39416
	p23 := mustMarshal(t, v2.Avro, map[string]any{"last_date": time.UnixMicro(1702771200000000).UTC()})

	// v1 into maint(last_date date): a DATE value of 19708 days = 2023-12-17.
	dateTable := structOf(field("last_date", deltalog.Date, true))
	d1, pq := mustCompile(t, v1, dateTable, "none")
	cols, err := decodeCase(t, d1, p1, nil)
	if err != nil {
		t.Fatal(err)
	}
	file := writeParquet(t, pq, cols)
	got, _ := readColumns(t, file)
	if want := []string{"0/1:19708"}; !reflect.DeepEqual(got["last_date"], want) {
		t.Fatalf("last_date = %q, want %q", got["last_date"], want)
	}
	lc, _ := pq.Lookup("last_date")
	if lt := lc.Node.Type().LogicalType(); lt == nil || lt.String() != "DATE" {
		t.Fatalf("last_date parquet logical type = %v, want DATE", lt)
	}
	if day := time.Unix(0, 0).UTC().AddDate(0, 0, int(cols[0][0].Int32())).Format(time.DateOnly); day != "2023-12-17" {
		t.Fatalf("19708 days = %s", day)
	}

	// Widened to timestamp_ntz: the v1 row reads 2023-12-17T00:00:00, v2 is stored as is.
	ntz := structOf(field("last_date", deltalog.TimestampNtz, true))
	d1n, pqn := mustCompile(t, v1, ntz, "none")
	d2n, _ := mustCompile(t, v2, ntz, "none")
	cols, err = decodeCase(t, d1n, p1, nil)
	if err == nil {
		cols, err = decodeCase(t, d2n, p23, cols)
	}
	if err != nil {
		t.Fatal(err)
	}
	got, _ = readColumns(t, writeParquet(t, pqn, cols))
	if want := []string{"0/1:1702771200000000", "0/1:1702771200000000"}; !reflect.DeepEqual(got["last_date"], want) {
		t.Fatalf("timestamp_ntz last_date = %q, want %q", got["last_date"], want)
	}

	// Not representable losslessly: v3 (UTC instant) into date or timestamp_ntz, v2 into
	// date, and a date into long or timestamp (19708 days must never become 19708 µs).
	for _, c := range []struct {
		ws  *WriterSchema
		col deltalog.DataType
	}{{v3, deltalog.Date}, {v3, deltalog.TimestampNtz}, {v2, deltalog.Date}, {v1, deltalog.Long}, {v1, deltalog.Timestamp}} {
		tbl := structOf(field("last_date", c.col, true))
		if _, err := Compile(c.ws, tbl, "none", mustParquet(t, tbl, "none")); ReasonOf(err) != ReasonSchemaMismatch || FieldOf(err) != "last_date" {
			t.Errorf("schema %d into %s: %v, want schema_mismatch at last_date", c.ws.ID, c.col, err)
		}
	}
}

// TestCaseC19MissingFieldsAreNull: a reader-schema default was not applied for a missing
// field in one library (fastavro/fastavro#485), and a Go decoder read stray bytes for a
// field the writer lacked (hamba/avro#452). ingestd writes NULL for every table column the
// writer did not send, never an Avro default. Customer v1 (id 1901: id, name) and v2 (1902:
// + country string default "Argentina", address [null,string]); the table has all four.
// v1's {5,"Eve"} (0a 06 457665) decoded three times (first load, retry, replay) gives
// country and address NULL each time; v2's {6,"Max","Chile",null} gives "Chile". The v1
// decoder reads exactly those 5 bytes: one more is trailing_bytes; the first byte alone is
// truncated at name, and the first 4 a decode_error at name (its length runs past them).
func TestCaseC19MissingFieldsAreNull(t *testing.T) {
	v1 := mustWriter(t, 1901, `{"type":"record","name":"Customer","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`)
	v2 := mustWriter(t, 1902, `{"type":"record","name":"Customer","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},
		{"name":"country","type":"string","default":"Argentina"},{"name":"address","type":["null","string"],"default":null}]}`)
	table := structOf(field("id", deltalog.Long, true), field("name", deltalog.String, true),
		field("country", deltalog.String, true), field("address", deltalog.String, true))
	d1, pq := mustCompile(t, v1, table, "none")
	d2, _ := mustCompile(t, v2, table, "none")
	eve := mustHex(t, "0a 06 457665") // {5,"Eve"}
	var cols [][]parquet.Value
	var err error
	for i := 0; i < 3; i++ { // first load, retry, replay
		if cols, err = decodeCase(t, d1, eve, cols); err != nil {
			t.Fatal(err)
		}
	}
	if cols, err = decodeCase(t, d2, mustMarshal(t, v2.Avro, map[string]any{"id": int64(6), "name": "Max", "country": "Chile", "address": nil}), cols); err != nil {
		t.Fatal(err)
	}
	got, _ := readColumns(t, writeParquet(t, pq, cols))
	want := map[string][]string{
		"id":      {"0/1:5", "0/1:5", "0/1:5", "0/1:6"},
		"name":    {`0/1:"Eve"`, `0/1:"Eve"`, `0/1:"Eve"`, `0/1:"Max"`},
		"country": {"0/0:null", "0/0:null", "0/0:null", `0/1:"Chile"`},
		"address": {"0/0:null", "0/0:null", "0/0:null", "0/0:null"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n got %q\nwant %q", got, want)
	}
	// Exactly 5 bytes: one more is trailing, one fewer is truncated (no stray reads).
	if _, err := decodeCase(t, d1, append(bytes.Clone(eve), 0), nil); ReasonOf(err) != ReasonTrailingBytes {
		t.Fatalf("6 bytes: %v", err)
	}
	if _, err := decodeCase(t, d1, eve[:1], nil); ReasonOf(err) != ReasonTruncated || FieldOf(err) != "name" {
		t.Fatalf("1 byte: %v", err)
	}
	if _, err := decodeCase(t, d1, eve[:4], nil); ReasonOf(err) != ReasonDecodeError || FieldOf(err) != "name" {
		t.Fatalf("4 bytes (string length beyond the input): %v", err)
	}
}

// TestCaseC27NullTypedFieldAndAllNullColumn: writers that inferred a column's type from a
// batch whose values were all null created a Null-typed column that Delta rejects
// (delta-io/delta-rs#3891). Order v2 (id 2702): order_id long, note [null,string], legacy
// null. ToDelta gives struct<order_id:long,note:string>: legacy (type null) carries no
// data, consumes no bytes and is never written, and note is a nullable string from the
// writer schema even though the first 100 records (ids 1–100) all have note null. The 101st,
// {101,"gift"} (ca01 02 0867696674), lands "gift"; a legacy column the table has from
// elsewhere stays NULL on every row.
func TestCaseC27NullTypedFieldAndAllNullColumn(t *testing.T) {
	v2 := mustWriter(t, 2702, `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"},
		{"name":"note","type":["null","string"],"default":null},{"name":"legacy","type":"null"}]}`)
	if got := v2.Delta.String(); got != "struct<order_id:long,note:string>" {
		t.Fatalf("v2 in Delta = %s, want struct<order_id:long,note:string>", got)
	}
	if f := v2.Delta.Field("note"); f == nil || !f.Nullable {
		t.Fatal("note is not nullable")
	}
	// The table after batch 1 evolved it; a stray `legacy` column from elsewhere stays NULL.
	table := structOf(field("order_id", deltalog.Long, true), field("note", deltalog.String, true), field("legacy", deltalog.String, true))
	d, pq := mustCompile(t, v2, table, "none")
	var cols [][]parquet.Value
	var err error
	for id := int64(1); id <= 100; id++ { // batch 1: every note null
		payload := mustMarshal(t, v2.Avro, map[string]any{"order_id": id, "note": nil, "legacy": nil})
		if len(payload) != 2 && id < 64 { // order_id (1 byte for ids < 64) + union index 0; legacy: 0 bytes
			t.Fatalf("payload %x", payload)
		}
		if cols, err = decodeCase(t, d, payload, cols); err != nil {
			t.Fatal(err)
		}
	}
	gift := mustHex(t, "ca01 02 0867696674") // {101, "gift", null}
	if cols, err = decodeCase(t, d, gift, cols); err != nil {
		t.Fatal(err)
	}
	got, n := readColumns(t, writeParquet(t, pq, cols))
	if n != 101 || got["order_id"][100] != "0/1:101" || got["note"][100] != `0/1:"gift"` {
		t.Fatalf("%d rows, last %q %q", n, got["order_id"][100], got["note"][100])
	}
	for i := 0; i < 100; i++ {
		if got["note"][i] != "0/0:null" {
			t.Fatalf("row %d note = %s", i, got["note"][i])
		}
	}
	for i, v := range got["legacy"] {
		if v != "0/0:null" {
			t.Fatalf("row %d legacy = %s", i, v)
		}
	}
}
