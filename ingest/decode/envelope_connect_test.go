package decode

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// testdata/debezium/json-*.jsonl hold what Debezium 3.7.1.Final (PostgreSQL connector,
// pgoutput) on Kafka Connect 4.4.0 wrote through JsonConverter with schemas.enable=true
// for key and value, one record a line as {"key": …, "value": …} (null for a tombstone's
// value), for a table with REPLICA IDENTITY DEFAULT and skipped.operations=none:
//
//	create table t (id int primary key, amount numeric(12,2), price numeric,
//	  at timestamptz, ts timestamp, d date, tm time, u uuid, j jsonb, note text);
//	insert into t values (1, 12.34, 1.5, '2026-01-02 03:04:05.123456+00',
//	  '2026-01-02 03:04:05.654321', '2026-01-02', '01:02:03.456789',
//	  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}', 'one'),
//	  (2, -0.05, null, …);                                     -- snapshot: r, r
//	insert into t values (3, 99999.99, 123.456, '1969-12-31 23:59:59.999999+00',
//	  '1950-06-01 00:00:00.000001', '1900-01-01', '23:59:59.999999',
//	  '00000000-0000-0000-0000-000000000001', '{"x": "é"}', null);  -- c
//	update t set amount = 1.00, note = 'upd' where id = 1;     -- u
//	delete from t where id = 2;                                -- d (before: the key alone), tombstone
//	update t set id = 4 where id = 3;                          -- d of 3, tombstone, c of 4
//	begin; insert into t (id, note) values (5, 'tx');
//	  update t set note = 'tx2' where id = 5; commit;          -- c, u
//	select pg_logical_emit_message(true, 'ingestd', 'hello');  -- m (topic <prefix>.message)
//	truncate t;                                                -- t
//
// json-envelope.jsonl is the table's topic, json-message.jsonl the message topic,
// json-flattened.jsonl the table's topic through ExtractNewRecordState (add.fields
// op,lsn,source.ts_ms; delete.tombstone.handling.mode rewrite-with-tombstone; it drops
// the truncate), and json-plain-keys.txt the keys of a third connector with
// key.converter.schemas.enable=false.

type jsonCaptured struct {
	Key   json.RawMessage `json:"key"`
	Value json.RawMessage `json:"value"`
}

func readJSONCapture(t *testing.T, name string) []jsonCaptured {
	t.Helper()
	f, err := os.Open("testdata/debezium/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []jsonCaptured
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r jsonCaptured
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if string(r.Value) == "null" {
			r.Value = nil
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// connectChange opens one Connect JSON change event as the flush does: its writer schema
// from the record, its payload transcoded to the derived Avro schema's binary, the
// envelope compiled from that schema and the binary split.
func connectChange(t *testing.T, src *ConnectSource, kind string, value []byte) (*Envelope, EnvelopeChange) {
	t.Helper()
	ws, payload, err := src.Writer(nil, value)
	if err != nil {
		t.Fatal(err)
	}
	env, err := NewEnvelope(kind, ws)
	if err != nil {
		t.Fatalf("compile the %s envelope of a Connect JSON record: %v", kind, err)
	}
	body, err := ws.Transcode(payload)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := env.Split(body)
	if err != nil {
		t.Fatalf("split: %v", err)
	}
	return env, ch
}

// TestConnectJSONEnvelopeCaptured opens every captured Connect JSON change event: the
// envelope compiles although the derived Avro schema names before and after apart, each
// event's op and LSN are the record's, a delete's row is its before image (the key
// alone), and the rows decode with Debezium's logical types to the exact values
// PostgreSQL holds (numeric(12,2) and numeric as decimals, timestamptz and timestamp in
// µs, date in days, time in µs, uuid and jsonb as text).
func TestConnectJSONEnvelopeCaptured(t *testing.T) {
	recs := readJSONCapture(t, "json-envelope.jsonl")
	src := NewConnectSource()
	var ops []string
	var lsns []int64
	var row *WriterSchema
	var d *Decoder
	var pq *parquet.Schema
	var cols [][]parquet.Value
	for i, r := range recs {
		if r.Value == nil {
			continue // a tombstone
		}
		env, ch := connectChange(t, src, EnvelopeDebezium, r.Value)
		var doc struct {
			Payload struct {
				Source struct{ LSN int64 } `json:"source"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(r.Value, &doc); err != nil {
			t.Fatal(err)
		}
		if !ch.HasLSN || ch.LSN != doc.Payload.Source.LSN || doc.Payload.Source.LSN == 0 {
			t.Errorf("record %d: LSN %d (%v), the record's source.lsn is %d", i, ch.LSN, ch.HasLSN, doc.Payload.Source.LSN)
		}
		ops = append(ops, string(ch.Op))
		if ch.Row == nil {
			continue
		}
		if row == nil {
			row = env.Row
			if row.FormatName() != FormatConnectJSON || row.body != nil || row.DeltaErr != nil {
				t.Fatalf("row writer schema: format %s, transcoder %v, %v; want connect_json rows decoded as Avro", row.FormatName(), row.body, row.DeltaErr)
			}
			if got, want := row.Delta.String(), "struct<id:integer,amount:decimal(12,2),price:string,at:timestamp,ts:timestamp_ntz,d:date,tm:long,u:string,j:string,note:string>"; got != want {
				t.Fatalf("row schema\n got %s\nwant %s", got, want)
			}
			d, pq = mustCompile(t, row, row.Delta, "none")
			cols = make([][]parquet.Value, d.Columns())
		}
		var err error
		if cols, err = decodeCase(t, d, ch.Row, cols); err != nil {
			t.Fatalf("record %d: decode the row: %v", i, err)
		}
		lsns = append(lsns, ch.LSN)
	}
	if got, want := strings.Join(ops, ""), "rrcuddccut"; got != want {
		t.Errorf("ops %q, want %q", got, want)
	}
	want := map[string][]string{
		"id":     {"0/1:1", "0/1:2", "0/1:3", "0/1:1", "0/1:2", "0/1:3", "0/1:4", "0/1:5", "0/1:5"},
		"amount": {"0/1:1234", "0/1:-5", "0/1:9999999", "0/1:100", "0/0:null", "0/0:null", "0/1:9999999", "0/0:null", "0/0:null"},
		"price":  {`0/1:"1.5"`, "0/0:null", `0/1:"123.456"`, `0/1:"1.5"`, "0/0:null", "0/0:null", `0/1:"123.456"`, "0/0:null", "0/0:null"},
		"at":     {"0/1:1767323045123456", "0/0:null", "0/1:-1", "0/1:1767323045123456", "0/0:null", "0/0:null", "0/1:-1", "0/0:null", "0/0:null"},
		"ts":     {"0/1:1767323045654321", "0/0:null", "0/1:-618105599999999", "0/1:1767323045654321", "0/0:null", "0/0:null", "0/1:-618105599999999", "0/0:null", "0/0:null"},
		"d":      {"0/1:20455", "0/0:null", "0/1:-25567", "0/1:20455", "0/0:null", "0/0:null", "0/1:-25567", "0/0:null", "0/0:null"},
		"tm":     {"0/1:3723456789", "0/0:null", "0/1:86399999999", "0/1:3723456789", "0/0:null", "0/0:null", "0/1:86399999999", "0/0:null", "0/0:null"},
		"u": {`0/1:"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`, "0/0:null", `0/1:"00000000-0000-0000-0000-000000000001"`, `0/1:"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`,
			"0/0:null", "0/0:null", `0/1:"00000000-0000-0000-0000-000000000001"`, "0/0:null", "0/0:null"},
		"j":    {`0/1:"{\"a\": [1, 2]}"`, "0/0:null", `0/1:"{\"x\": \"é\"}"`, `0/1:"{\"a\": [1, 2]}"`, "0/0:null", "0/0:null", `0/1:"{\"x\": \"é\"}"`, "0/0:null", "0/0:null"},
		"note": {`0/1:"one"`, "0/0:null", "0/0:null", `0/1:"upd"`, "0/0:null", "0/0:null", "0/0:null", `0/1:"tx"`, `0/1:"tx2"`},
	}
	got := renderCols(pq, cols)
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s: %v\n want %v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d columns, want %d: %v", len(got), len(want), got)
	}
	for i := 1; i < len(lsns); i++ {
		if lsns[i] < lsns[i-1] && i > 2 { // the snapshot reads share one LSN
			t.Errorf("LSNs %v: not ascending after the snapshot", lsns)
		}
	}

	_, m := connectChange(t, src, EnvelopeDebezium, readJSONCapture(t, "json-message.jsonl")[0].Value)
	if m.Op != OpMessage || m.Row != nil {
		t.Errorf("logical decoding message: op %q, row %x; want m without a row", m.Op, m.Row)
	}
}

// TestConnectJSONEnvelopeMatchesAvro opens the same three change events captured through
// Apicurio's AvroConverter and through JsonConverter (testdata/debezium, events 4-6 of
// TestDebeziumCaptured: 31 columns of Debezium's and Connect's logical types, among them
// Decimal with a scale, VariableScaleDecimal, MicroTimestamp, ZonedTimestamp, Date,
// MicroTime, Json and Uuid): the rows have the same Delta schema and decode to the same
// values.
func TestConnectJSONEnvelopeMatchesAvro(t *testing.T) {
	avroValues, connectValues := dbzCapture(t)
	aws := dbzCaptureSchema(t, 105)
	aenv, err := NewEnvelope(EnvelopeDebezium, aws)
	if err != nil {
		t.Fatal(err)
	}
	ad, apq := mustCompile(t, aenv.Row, aenv.Row.Delta, "none")
	src := NewConnectSource()
	var jd *Decoder
	var jpq *parquet.Schema
	acols, jcols := make([][]parquet.Value, ad.Columns()), [][]parquet.Value(nil)
	for e := 4; e < 7; e++ {
		_, payload, err := ParseFrame(avroValues[e])
		if err != nil {
			t.Fatal(err)
		}
		ach, err := aenv.Split(payload)
		if err != nil || ach.Op != OpCreate {
			t.Fatalf("Avro event %d: op %q, %v", e, ach.Op, err)
		}
		if acols, err = decodeCase(t, ad, ach.Row, acols); err != nil {
			t.Fatal(err)
		}
		jenv, jch := connectChange(t, src, EnvelopeDebezium, connectValues[e])
		if jch.Op != OpCreate {
			t.Fatalf("Connect JSON event %d: op %q", e, jch.Op)
		}
		if jd == nil {
			if g, w := jenv.Row.Delta.String(), aenv.Row.Delta.String(); g != w {
				t.Fatalf("Connect JSON row\n%s\nAvro row\n%s", g, w)
			}
			jd, jpq = mustCompile(t, jenv.Row, jenv.Row.Delta, "none")
			jcols = make([][]parquet.Value, jd.Columns())
		}
		if jcols, err = decodeCase(t, jd, jch.Row, jcols); err != nil {
			t.Fatal(err)
		}
	}
	a, j := renderCols(apq, acols), renderCols(jpq, jcols)
	if len(a) != 31 || !reflect.DeepEqual(a, j) {
		t.Errorf("rows differ:\nConnect JSON %v\nAvro         %v", j, a)
	}
	for col, want := range map[string][]string{ // a few against the source's values (TestDebeziumCaptured has all)
		"n_10_2": {"0/1:-1234567", "0/1:0", "0/0:null"},
		"n_var":  {`0/1:"-12.345"`, `0/1:"0.005"`, `0/1:"12000"`},
		"ts":     {"0/1:-1", "0/1:1700000000123456", "0/0:null"},
		"tstz":   {"0/1:1796538600123456", "0/1:-1", "0/0:null"},
		"d":      {"0/1:-1", "0/1:2932896", "0/0:null"},
		"t":      {"0/1:86399999999", "0/1:0", "0/0:null"},
		"u":      {`0/1:"7b3ad5b4-1c1e-4c2b-9c6a-2f0d8f6c1e11"`, `0/1:"00000000-0000-0000-0000-000000000000"`, "0/0:null"},
		"jb":     {`0/1:"{\"b\": 1}"`, `0/1:"null"`, "0/0:null"},
	} {
		if !reflect.DeepEqual(j[col], want) {
			t.Errorf("%s: %v, want %v", col, j[col], want)
		}
	}
}

// TestConnectJSONEnvelopeFlattened opens ExtractNewRecordState's captured output: __op,
// __deleted (a string) and __lsn make the change, and the row is the record without its
// "__" fields.
func TestConnectJSONEnvelopeFlattened(t *testing.T) {
	src := NewConnectSource()
	var ops []string
	var ids []string
	for _, r := range readJSONCapture(t, "json-flattened.jsonl") {
		if r.Value == nil {
			continue
		}
		env, ch := connectChange(t, src, EnvelopeDebeziumFlattened, r.Value)
		if got := env.Row.Delta.String(); got != "struct<id:integer,amount:decimal(12,2),price:string,at:timestamp,ts:timestamp_ntz,d:date,tm:long,u:string,j:string,note:string>" {
			t.Fatalf("flattened row schema %s", got)
		}
		if !ch.HasLSN || ch.LSN == 0 || !ch.HasSourceTsMs {
			t.Errorf("op %c: LSN %d (%v), source ts %v", ch.Op, ch.LSN, ch.HasLSN, ch.HasSourceTsMs)
		}
		ops = append(ops, string(ch.Op))
		d, pq := mustCompile(t, env.Row, env.Row.Delta, "none")
		cols, err := decodeCase(t, d, ch.Row, make([][]parquet.Value, d.Columns()))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, renderCols(pq, cols)["id"][0]+" "+renderCols(pq, cols)["note"][0])
	}
	if got, want := strings.Join(ops, ""), "rrcuddccu"; got != want {
		t.Errorf("ops %q, want %q", got, want)
	}
	if got, want := strings.Join(ids, ","), `0/1:1 0/1:"one",0/1:2 0/0:null,0/1:3 0/0:null,0/1:1 0/1:"upd",0/1:2 0/0:null,0/1:3 0/0:null,0/1:4 0/0:null,0/1:5 0/1:"tx",0/1:5 0/1:"tx2"`; got != want {
		t.Errorf("rows\n got %s\nwant %s", got, want)
	}
}

// TestSameRowIgnoresRecordNames: before and after of one shape under other record names
// are one row type; a field of another name, type, logical type or Connect name is not.
func TestSameRowIgnoresRecordNames(t *testing.T) {
	row := func(name, fields string) string {
		return `{"type":"record","name":"` + name + `","fields":[` + fields + `]}`
	}
	base := `{"name":"id","type":"int"},{"name":"at","type":["null",{"type":"long","connect.name":"io.debezium.time.MicroTimestamp"}]},` +
		`{"name":"amount","type":["null",{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}]}`
	parse := func(text string) *WriterSchema {
		ws, err := ParseWriterSchema(1, text)
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	a := parse(row("r2", base)).Avro
	for _, c := range []struct {
		other string
		same  bool
	}{
		{row("r3", base), true},
		{row("r3", strings.Replace(base, `"id"`, `"key"`, 1)), false},
		{row("r3", strings.Replace(base, `"type":"int"`, `"type":"long"`, 1)), false},
		{row("r3", strings.Replace(base, "MicroTimestamp", "NanoTimestamp", 1)), false},
		{row("r3", strings.Replace(base, `"scale":2`, `"scale":3`, 1)), false},
		{row("r3", base+`,{"name":"note","type":"string"}`), false},
	} {
		if got := sameRow(a, parse(c.other).Avro); got != c.same {
			t.Errorf("sameRow(%s, %s) = %v, want %v", row("r2", base), c.other, got, c.same)
		}
	}
}
