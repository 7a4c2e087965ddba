package decode

// Decoder-level tests of the cases in ../shared/cases/CASES.md assigned to the decoder
// (issue 4): C02, C07, C15, C18, C19, C20, C21, C27. Each uses the case's exact schema ids,
// schemas, bytes and values. The guard/pipeline parts of each case are tested elsewhere.

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
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

// C02: old schema ids keep arriving after v2 is registered. Each record decodes with the
// schema of the id in its own frame; decoding Bob's 5-byte v1 body with v2 ("latest") runs
// past its end and is refused, never misread.
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
		"tier": {`0/1:"gold"`, "0/0:null"}, // C19: no Avro default "std"
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

// C07: long → int narrowing. 3000000010 never becomes -1294967286.
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

// C15: an enum symbol added. The writer's own symbol list decodes RECTANGLE; the column
// stays string and the two writers map to the same Delta type.
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

// C18: int/date is a date (19708 → 2023-12-17), widens to timestamp_ntz at midnight, and is
// never reinterpreted as micros.
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

// C19: fields the writer did not send are NULL (no Avro defaults), identically on first
// load, retry and replay; the decoder reads exactly the writer's bytes.
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

// C20: unknown id 999 is permanent and negatively cached with a TTL; 503s and HTML pages
// for id 102 are transient and never cached; after recovery offs 2–1002 decode normally.
func TestCaseC20UnknownIDAndRegistryOutage(t *testing.T) {
	const order = `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"},{"name":"status","type":"string"},{"name":"dt","type":"string"}]}`
	fake, cl := newCountingRegistry(t)
	fake.SeedSchema("orders-value", 1, 101, sr.Schema{Schema: order})
	fake.SeedSchema("orders-value", 2, 102, sr.Schema{Schema: order})
	reg := NewRegistry(cl, WithNegativeTTL(30*time.Second))
	now := time.Unix(1_700_000_000, 0)
	reg.now = func() time.Time { return now }
	table := structOf(field("order_id", deltalog.Long, true), field("status", deltalog.String, true), field("dt", deltalog.String, true))
	p := newFramedPipeline(t, reg, table)
	frame := func(id byte, orderID int64) []byte {
		body := mustMarshal(t, mustWriter(t, 1, order).Avro, map[string]any{"order_id": orderID, "status": "NEW", "dt": "2024-05-01"})
		return append([]byte{0, 0, 0, 0, id}, body...)
	}
	unknown := append([]byte{0, 0, 0, 0x03, 0xE7}, frame(101, 9)[5:]...) // id 999

	if _, err := p.handle(frame(101, 0)); err != nil {
		t.Fatalf("off 0: %v", err)
	}
	for i := 0; i < 3; i++ { // off 1, then the same id again within the TTL
		id, err := p.handle(unknown)
		if id != 999 || ReasonOf(err) != ReasonSchemaNotFound || errors.Is(err, ErrTransient) {
			t.Fatalf("id 999 lookup %d: %d %v, want permanent schema_not_found", i, id, err)
		}
	}
	if n := fake.requests("/schemas/ids/999"); n != 1 {
		t.Fatalf("%d requests for id 999 within the TTL, want 1", n)
	}
	now = now.Add(31 * time.Second)
	if _, err := p.handle(unknown); ReasonOf(err) != ReasonSchemaNotFound || fake.requests("/schemas/ids/999") != 2 {
		t.Fatalf("after the TTL: %v, %d requests (want 2)", err, fake.requests("/schemas/ids/999"))
	}

	// Outage for id 102: 503 and a proxy's HTML page alternate.
	var calls atomic.Int64
	fake.fail.Store(func(w http.ResponseWriter, r *http.Request) bool {
		if calls.Add(1)%2 == 0 {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>maintenance</html>"))
			return true
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	rowsBefore := colLens(p.cols)
	for i := 0; i < 6; i++ { // the partition is paused and retried; each retry asks again
		if _, err := p.handle(frame(102, 2)); !errors.Is(err, ErrTransient) || ReasonOf(err) != "" {
			t.Fatalf("outage retry %d: %v, want transient with no reason code", i, err)
		}
	}
	if n := fake.requests("/schemas/ids/102"); n != 6 {
		t.Fatalf("%d requests during the outage, want 6 (nothing cached)", n)
	}
	if !slices.Equal(colLens(p.cols), rowsBefore) {
		t.Fatal("rows appended during the outage")
	}
	fake.fail.Store(func(http.ResponseWriter, *http.Request) bool { return false })
	for off := int64(2); off <= 1002; off++ {
		if _, err := p.handle(frame(102, off)); err != nil {
			t.Fatalf("off %d after recovery: %v", off, err)
		}
	}
	if n := fake.requests("/schemas/ids/102"); n != 7 {
		t.Fatalf("%d requests for id 102 in all, want 7 (one after recovery)", n)
	}
	got := p.rows()["order_id"]
	if len(got) != 1002 || got[0] != "0/1:0" || got[1] != "0/1:2" || got[1001] != "0/1:1002" {
		t.Fatalf("order_id column: %d values, first %q, last %q", len(got), got[:2], got[len(got)-1])
	}
}

// C21: poison pills. Offsets 1–4 fail with four distinct reasons, nothing partial is left,
// and offsets 0 and 5 decode.
func TestCaseC21PoisonPills(t *testing.T) {
	const order = `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"},{"name":"status","type":"string"},{"name":"dt","type":"string"}]}`
	fake, cl := newCountingRegistry(t)
	fake.SeedSchema("orders-value", 1, 101, sr.Schema{Schema: order})
	table := structOf(field("order_id", deltalog.Long, true), field("status", deltalog.String, true), field("dt", deltalog.String, true))
	p := newFramedPipeline(t, NewRegistry(cl), table)
	msgs := [][]byte{
		mustHex(t, "0000000065 02 064e4557 14323032342d30352d3031"), // {1,"NEW","2024-05-01"}
		[]byte(`{"order_id":1}`),
		{0, 0, 0},
		{0, 0, 0, 0, 0x65, 0x02},
		mustHex(t, "0000000000 02 064e4557 14323032342d30352d3031"),
		mustHex(t, "0000000065 06 0850414944 14323032342d30352d3032"), // {3,"PAID","2024-05-02"}
	}
	wantReasons := []string{"", ReasonBadMagic, ReasonTooShort, ReasonTruncated, ReasonSchemaNotFound, ""}
	for off, v := range msgs {
		before := colLens(p.cols)
		_, err := p.handle(v)
		if ReasonOf(err) != wantReasons[off] || (wantReasons[off] == "") != (err == nil) {
			t.Fatalf("off %d: %v, want reason %q", off, err, wantReasons[off])
		}
		if err != nil && !slices.Equal(colLens(p.cols), before) {
			t.Fatalf("off %d left a partial row", off)
		}
		if errors.Is(err, ErrTransient) {
			t.Fatalf("off %d is transient: %v", off, err)
		}
	}
	if FieldOf(func() error { _, err := p.handle(msgs[3]); return err }()) != "status" {
		t.Fatal("truncated body does not name field status")
	}
	want := map[string][]string{
		"order_id": {"0/1:1", "0/1:3"},
		"status":   {`0/1:"NEW"`, `0/1:"PAID"`},
		"dt":       {`0/1:"2024-05-01"`, `0/1:"2024-05-02"`},
	}
	if got := p.rows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n got %q\nwant %q", got, want)
	}
	if n := fake.requests("/schemas/ids/0"); n != 0 {
		t.Fatalf("id 0 reached the registry %d times", n)
	}
}

// C27: a null-typed field carries no data (not in ToDelta, consumes no bytes, never
// written); an all-null nullable field keeps its writer type.
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
