package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// debeziumEnvelopeSchema is the value schema Debezium 2.7's Postgres connector registers
// through Kafka Connect's AvroConverter for table public.customers (id integer primary
// key, name text, email text) under topic prefix pg: subject pg.public.customers-value.
const debeziumEnvelopeSchema = `{"type":"record","name":"Envelope","namespace":"pg.public.customers","fields":[
  {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
    {"name":"id","type":"int"},
    {"name":"name","type":["null","string"],"default":null},
    {"name":"email","type":["null","string"],"default":null}],
    "connect.name":"pg.public.customers.Value"}],"default":null},
  {"name":"after","type":["null","Value"],"default":null},
  {"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql","fields":[
    {"name":"version","type":"string"},
    {"name":"connector","type":"string"},
    {"name":"name","type":"string"},
    {"name":"ts_ms","type":"long"},
    {"name":"snapshot","type":[{"type":"string","connect.version":1,"connect.parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"connect.default":"false","connect.name":"io.debezium.data.Enum"},"null"],"default":"false"},
    {"name":"db","type":"string"},
    {"name":"sequence","type":["null","string"],"default":null},
    {"name":"ts_us","type":["null","long"],"default":null},
    {"name":"ts_ns","type":["null","long"],"default":null},
    {"name":"schema","type":"string"},
    {"name":"table","type":"string"},
    {"name":"txId","type":["null","long"],"default":null},
    {"name":"lsn","type":["null","long"],"default":null},
    {"name":"xmin","type":["null","long"],"default":null}],
    "connect.name":"io.debezium.connector.postgresql.Source"}},
  {"name":"transaction","type":["null",{"type":"record","name":"block","namespace":"event","fields":[
    {"name":"id","type":"string"},
    {"name":"total_order","type":"long"},
    {"name":"data_collection_order","type":"long"}],
    "connect.version":1,"connect.name":"event.block"}],"default":null},
  {"name":"op","type":"string"},
  {"name":"ts_ms","type":["null","long"],"default":null},
  {"name":"ts_us","type":["null","long"],"default":null},
  {"name":"ts_ns","type":["null","long"],"default":null}],
  "connect.version":2,"connect.name":"pg.public.customers.Envelope"}`

// debeziumFlattenedSchema is the same table's value after ExtractNewRecordState with
// add.fields=op,lsn,source.ts_ms and delete.handling.mode=rewrite.
const debeziumFlattenedSchema = `{"type":"record","name":"Value","namespace":"pg.public.customers","fields":[
  {"name":"id","type":"int"},
  {"name":"name","type":["null","string"],"default":null},
  {"name":"email","type":["null","string"],"default":null},
  {"name":"__op","type":["null","string"],"default":null},
  {"name":"__lsn","type":["null","long"],"default":null},
  {"name":"__source_ts_ms","type":["null","long"],"default":null},
  {"name":"__deleted","type":["null","string"],"default":null}],
  "connect.name":"pg.public.customers.Value"}`

// dc is one Debezium change: op with the row (id, name) of after (before for d, the key
// alone: REPLICA IDENTITY DEFAULT), at an LSN; or a tombstone of key id.
type dc struct {
	op   string
	id   int32
	name string
	lsn  int64
	tomb bool
}

// The batches both tables receive (the flattened one without the truncate, which
// ExtractNewRecordState drops): a snapshot, streaming changes, a delete and its
// tombstone, a primary-key change (delete of 3 and create of 30 at one LSN); after a
// restart, snapshot reads older than the streamed changes of their keys (stale), a late
// create of a deleted key older than its delete (stays deleted) and a newer update.
var debeziumBatches = [][]dc{
	{{op: "r", id: 1, name: "ann", lsn: 100}, {op: "r", id: 2, name: "bob", lsn: 100}, {op: "r", id: 3, name: "cy", lsn: 100},
		{op: "c", id: 4, name: "dan", lsn: 110}, {op: "u", id: 1, name: "anne", lsn: 120},
		{op: "d", id: 2, lsn: 130}, {id: 2, tomb: true},
		{op: "d", id: 3, lsn: 140}, {id: 3, tomb: true}, {op: "c", id: 30, name: "cy", lsn: 140},
		{op: "t", lsn: 145}},
	{{op: "r", id: 1, name: "snap", lsn: 100}, {op: "r", id: 4, name: "snap", lsn: 105}, {op: "c", id: 2, name: "bob-late", lsn: 125},
		{op: "u", id: 4, name: "dana", lsn: 150}, {op: "c", id: 5, name: "eve", lsn: 160}, {op: "d", id: 5, lsn: 161}}, // 5: no tombstone
}

// The tables after each batch: id name email _source_lsn _op (table.envelope_columns:
// [op]; the flattened table has no _op: <nil>), sorted.
var debeziumWant = [][]string{
	{"1 anne anne@example.com 120 u", "30 cy cy@example.com 140 c", "4 dan dan@example.com 110 c"},
	{"1 anne anne@example.com 120 u", "30 cy cy@example.com 140 c", "4 dana dana@example.com 150 u"},
}

// TestDebeziumEnvelope runs two upsert tables on the real broker and registry, one of
// Debezium's change events and one of their flattened form, ordered by source.lsn, and
// reads them with delta-rs after each batch and with Spark at the end (the daemon is
// restarted between batches: the second runs on a key index rebuilt from the table).
func TestDebeziumEnvelope(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	type table struct {
		envelope, topic, dlq, path string
		schema                     avro.Schema
		id                         int
		produced                   int64
	}
	var tables []*table
	for _, env := range []struct{ name, schema, extra string }{
		{"debezium", debeziumEnvelopeSchema, ", envelope_columns: [op]"}, {"debezium_flattened", debeziumFlattenedSchema, ""}} {
		tb := &table{envelope: env.name, topic: createTopic(t, s, "pg.public.customers."+env.name, 1), path: filepath.Join(root, env.name)}
		tb.dlq = createTopic(t, s, "pg.public.customers."+env.name+".dlq", 1)
		ss, err := reg.CreateSchema(context.Background(), tb.topic+"-value", sr.Schema{Schema: env.schema, Type: sr.TypeAvro})
		if err != nil {
			t.Fatal(err)
		}
		tb.id, tb.schema = ss.ID, avro.MustParse(env.schema)
		writePipeline(t, cfgDir, env.name, fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true, mode: upsert, key: [id], key_format: string, envelope: %s, sequence_by: source.lsn%s}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: 1000, max_bytes: 16MiB, max_age: 500ms}
`, env.name, s.brokers, tb.topic, env.name, time.Now().UnixNano(), s.registry, tb.path, env.name, env.extra, tb.dlq))
		tables = append(tables, tb)
	}
	for b, batch := range debeziumBatches {
		for _, tb := range tables {
			tb.produced += produceDebezium(t, cl, tb.topic, tb.id, tb.schema, tb.envelope, batch)
		}
		d := startDaemon(t, cfgDir)
		waitFor(t, d, 60*time.Second, fmt.Sprintf("batch %d to be committed", b+1), func() bool {
			for _, tb := range tables {
				if handled(t, tb.path) < tb.produced {
					return false
				}
			}
			return true
		})
		if code := d.stop(t); code != 0 {
			t.Fatalf("ingestd exited %d after batch %d", code, b+1)
		}
		cols := []string{"id", "name", "email", "_source_lsn", "_op"}
		for _, tb := range tables {
			want := debeziumWant[b]
			wantCols := []string{"_op", "_source_lsn", "email", "id", "name"}
			if tb.envelope == "debezium_flattened" {
				want = make([]string, len(want))
				for i, r := range debeziumWant[b] {
					want[i] = r[:strings.LastIndexByte(r, ' ')] + " <nil>"
				}
				wantCols = wantCols[1:]
			}
			rs := readDeltaRS(t, python, tb.path)
			if rs.Unsupported != "" {
				t.Fatalf("%s: delta-rs cannot read the table: %s", tb.envelope, rs.Unsupported)
			}
			if got := caseRowsOf(rs.Rows, cols); !slices.Equal(got, want) {
				t.Errorf("%s after batch %d: delta-rs reads %q, want %q", tb.envelope, b+1, got, want)
			}
			if b < len(debeziumBatches)-1 {
				continue // Spark reads the final tables (its reads take most of the test's time)
			}
			var sp sparkRead
			spark.call(t, map[string]any{"op": "read", "path": tb.path}, &sp)
			if got := caseRowsOf(sp.Rows, cols); !slices.Equal(got, want) {
				t.Errorf("%s after batch %d: Spark reads %q, want %q", tb.envelope, b+1, got, want)
			}
			if got := caseColumnsOf(sp.Rows); !slices.Equal(got, wantCols) {
				t.Errorf("%s: Spark reads columns %v, want %v (the row's, the sequence and the envelope columns asked for)", tb.envelope, got, wantCols)
			}
		}
	}
	// The truncate is the one dead letter, with its reason.
	for _, tb := range tables {
		var got []string
		for _, r := range readDLQ(t, s, tb.dlq) {
			got = append(got, r.headers["ingestd.error.reason"]+":"+r.headers["ingestd.error.field"])
		}
		want := []string{"unsupported_change:op"}
		if tb.envelope == "debezium_flattened" {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: dead letters %v, want %v", tb.envelope, got, want)
		}
	}
}

// caseColumnsOf is the sorted column names of the first row.
func caseColumnsOf(rows []map[string]any) []string {
	var out []string
	if len(rows) > 0 {
		for c := range rows[0] {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// produceDebezium writes changes to partition 0 of topic in order as Debezium would (the
// Kafka key the id as text, the value Confluent-framed with schema id id in envelope's
// form; a flattened topic gets no truncate) and returns how many records it wrote.
func produceDebezium(t *testing.T, cl *kgo.Client, topic string, id int, schema avro.Schema, envelope string, changes []dc) int64 {
	t.Helper()
	var recs []*kgo.Record
	for _, c := range changes {
		if c.op == "t" && envelope != "debezium" {
			continue
		}
		r := &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "%d", c.id)}
		if !c.tomb {
			var v map[string]any
			if envelope == "debezium" {
				v = debeziumValue(c)
			} else {
				v = flattenedValue(c)
			}
			body, err := avro.Marshal(schema, v)
			if err != nil {
				t.Fatal(err)
			}
			var hdr sr.ConfluentHeader
			framed, err := hdr.AppendEncode(nil, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Value = append(framed, body...)
		}
		if c.op == "t" {
			r.Key = nil
		}
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return int64(len(recs))
}

// debeziumRow is c's row as the envelope's Value record: for a d, the key alone.
func debeziumRow(c dc) map[string]any {
	row := map[string]any{"id": c.id, "name": nil, "email": nil}
	if c.name != "" {
		row["name"] = map[string]any{"string": c.name}
		row["email"] = map[string]any{"string": c.name + "@example.com"}
	}
	return row
}

func debeziumValue(c dc) map[string]any {
	snapshot := "false"
	if c.op == "r" {
		snapshot = "true"
	}
	v := map[string]any{"before": nil, "after": nil, "transaction": nil, "op": c.op,
		"ts_ms": map[string]any{"long": 1733400001000 + c.lsn}, "ts_us": nil, "ts_ns": nil,
		"source": map[string]any{"version": "2.7.3.Final", "connector": "postgresql", "name": "pg", "ts_ms": 1733400000000 + c.lsn,
			"snapshot": map[string]any{"string": snapshot}, "db": "shop", "sequence": nil, "ts_us": nil, "ts_ns": nil,
			"schema": "public", "table": "customers", "txId": map[string]any{"long": int64(780)}, "lsn": map[string]any{"long": c.lsn}, "xmin": nil}}
	row := map[string]any{"pg.public.customers.Value": debeziumRow(c)}
	switch c.op {
	case "c", "r", "u":
		v["after"] = row
	case "d":
		v["before"] = row
	}
	return v
}

func flattenedValue(c dc) map[string]any {
	v := debeziumRow(c)
	v["__op"] = map[string]any{"string": c.op}
	v["__lsn"] = map[string]any{"long": c.lsn}
	v["__source_ts_ms"] = map[string]any{"long": 1733400000000 + c.lsn}
	v["__deleted"] = map[string]any{"string": fmt.Sprint(c.op == "d")}
	return v
}
