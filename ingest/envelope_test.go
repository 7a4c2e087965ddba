package ingest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
)

// testDebeziumEnvelope is the envelope Debezium 2.x's Postgres connector writes with
// Kafka Connect's AvroConverter for a table public.customers (id integer primary key,
// name text, email text), topic prefix pg.
const testDebeziumEnvelope = `{"type":"record","name":"Envelope","namespace":"pg.public.customers","fields":[
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

// testDebeziumFlattened is the same table's value after ExtractNewRecordState with
// add.fields=op,lsn,source.ts_ms and delete.handling.mode=rewrite, one "__" field moved
// between the row's own (a copied row).
const testDebeziumFlattened = `{"type":"record","name":"Value","namespace":"pg.public.customers","fields":[
  {"name":"id","type":"int"},
  {"name":"__op","type":["null","string"],"default":null},
  {"name":"name","type":["null","string"],"default":null},
  {"name":"email","type":["null","string"],"default":null},
  {"name":"__lsn","type":["null","long"],"default":null},
  {"name":"__source_ts_ms","type":["null","long"],"default":null},
  {"name":"__deleted","type":["null","string"],"default":null}],
  "connect.name":"pg.public.customers.Value"}`

// dbz is one Debezium change of the tests: op, the row (id, name; before's or after's),
// the LSN; tomb: a tombstone of key id; nolsn: source.lsn is null, as in an incremental
// snapshot's reads (flattened: __lsn and __source_ts_ms).
type dbz struct {
	op    string
	id    int32
	name  string
	lsn   int64
	tomb  bool
	nolsn bool
}

type dbzHarness struct {
	*harness
	env, flat     avro.Schema
	envID, flatID int
	// api encodes the envelopes: hamba/avro's default, or a fresh one for a second
	// version of the envelope (its codec cache would reuse the first version's encoder).
	api avro.API
}

func newDbzHarness(t *testing.T) *dbzHarness {
	h := &dbzHarness{harness: newHarness(t, 1), api: avro.DefaultConfig}
	for _, s := range []struct {
		text string
		sc   *avro.Schema
		id   *int
	}{{testDebeziumEnvelope, &h.env, &h.envID}, {testDebeziumFlattened, &h.flat, &h.flatID}} {
		id, _, err := h.reg.RegisterSchema("pg.public.customers-value", sr.Schema{Schema: s.text, Type: sr.TypeAvro})
		if err != nil {
			t.Fatal(err)
		}
		if *s.sc, err = avro.ParseWithCache(s.text, "", &avro.SchemaCache{}); err != nil {
			t.Fatal(err)
		}
		*s.id = id
	}
	return h
}

// dbzConfig is an upsert (or changelog) pipeline of Debezium envelopes keyed by id.
func (h *dbzHarness) dbzConfig(mode, envelope, seqBy string) *config.Config {
	cfg := h.config()
	cfg.Table.Mode, cfg.Table.Key, cfg.Table.KeyFormat, cfg.Table.Envelope, cfg.Table.SequenceBy = mode, []string{"id"}, "string", envelope, seqBy
	if mode == config.ModeUpsert {
		cfg.Table.DeleteHorizon, cfg.Table.Deletes, cfg.Table.UpsertWrite = config.DefaultDeleteHorizon, config.DeletesHard, config.MergeOnRead
	}
	return cfg
}

func (h *dbzHarness) frame(id int, body []byte) []byte {
	var hdr sr.ConfluentHeader
	framed, err := hdr.AppendEncode(nil, id, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return append(framed, body...)
}

// envelope encodes c as Debezium's envelope: c, u, r with after (u with before too, as
// under REPLICA IDENTITY FULL), d with before holding the key alone.
func (h *dbzHarness) envelope(c dbz) []byte {
	row := map[string]any{"id": c.id, "name": nil, "email": nil}
	if c.name != "" {
		row["name"] = map[string]any{"string": c.name}
		row["email"] = map[string]any{"string": c.name + "@example.com"}
	}
	src := map[string]any{"version": "2.7.3.Final", "connector": "postgresql", "name": "pg", "ts_ms": 1700000000000 + c.lsn,
		"snapshot": map[string]any{"string": "false"}, "db": "shop", "sequence": nil, "ts_us": nil, "ts_ns": nil,
		"schema": "public", "table": "customers", "txId": map[string]any{"long": int64(700)}, "lsn": map[string]any{"long": c.lsn}, "xmin": nil}
	if c.op == "r" {
		src["snapshot"] = map[string]any{"string": "true"}
	}
	if c.nolsn {
		src["lsn"], src["snapshot"] = nil, map[string]any{"string": "incremental"}
	}
	v := map[string]any{"before": nil, "after": nil, "source": src, "transaction": nil, "op": c.op,
		"ts_ms": map[string]any{"long": 1700000001000 + c.lsn}, "ts_us": nil, "ts_ns": nil}
	switch c.op {
	case "c", "r":
		v["after"] = map[string]any{"pg.public.customers.Value": row}
	case "u":
		v["before"] = map[string]any{"pg.public.customers.Value": map[string]any{"id": c.id, "name": map[string]any{"string": "old"}, "email": nil}}
		v["after"] = map[string]any{"pg.public.customers.Value": row}
	case "d":
		v["before"] = map[string]any{"pg.public.customers.Value": map[string]any{"id": c.id, "name": nil, "email": nil}}
	}
	body, err := h.api.Marshal(h.env, v)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.frame(h.envID, body)
}

// flattened encodes c as ExtractNewRecordState's output: a d is the key's row with
// __deleted "true".
func (h *dbzHarness) flattened(c dbz) []byte {
	v := map[string]any{"id": c.id, "name": nil, "email": nil, "__op": map[string]any{"string": c.op},
		"__lsn": map[string]any{"long": c.lsn}, "__source_ts_ms": map[string]any{"long": 1700000000000 + c.lsn},
		"__deleted": map[string]any{"string": "false"}}
	if c.name != "" {
		v["name"] = map[string]any{"string": c.name}
		v["email"] = map[string]any{"string": c.name + "@example.com"}
	}
	if c.op == "d" {
		v["__deleted"] = map[string]any{"string": "true"}
	}
	if c.nolsn {
		v["__lsn"], v["__source_ts_ms"] = nil, nil
	}
	body, err := avro.Marshal(h.flat, v)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.frame(h.flatID, body)
}

// send produces changes to partition 0 in order, each encoded by enc; a tombstone has
// a null value and the key id as text.
func (h *dbzHarness) send(enc func(dbz) []byte, changes ...dbz) {
	h.t.Helper()
	var out []*kgo.Record
	for _, c := range changes {
		r := &kgo.Record{Topic: h.topic, Partition: 0, Key: fmt.Appendf(nil, "%d", c.id)}
		if !c.tomb {
			r.Value = enc(c)
		}
		out = append(out, r)
	}
	if err := h.producer.ProduceSync(context.Background(), out...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// sendRaw produces one Confluent-framed envelope value v (a map of testDebeziumEnvelope).
func (h *dbzHarness) sendRaw(v map[string]any) {
	h.t.Helper()
	body, err := avro.Marshal(h.env, v)
	if err != nil {
		h.t.Fatal(err)
	}
	rec := &kgo.Record{Topic: h.topic, Partition: 0, Value: h.frame(h.envID, body)}
	if err := h.producer.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// run runs cfg until it handled n records in all, then stops it.
func (h *dbzHarness) run(cfg *config.Config, n int64) {
	h.t.Helper()
	m := h.startWith("dbz", cfg, nil)
	h.waitHandled(n, 30*time.Second, m)
	m.stop(h.t)
}

// rowsOf reads every live row of the table, formatted as cols (NULL as <nil>), sorted.
func (h *dbzHarness) rowsOf(cols ...string) []string {
	h.t.Helper()
	var out []string
	if err := h.liveRows(func(_ deltalog.Add, row map[string]any) error {
		var parts []string
		for _, c := range cols {
			parts = append(parts, fmt.Sprint(row[c]))
		}
		out = append(out, strings.Join(parts, " "))
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// columns are the table's columns as "name type".
func (h *dbzHarness) columns() []string {
	var out []string
	for _, f := range h.snapshot().Schema.Fields {
		out = append(out, fmt.Sprintf("%s %s", f.Name, f.Type))
	}
	return out
}

// deadLetters are the dead-letter topic's records as "reason:field".
func (h *dbzHarness) deadLetters() []string {
	return (&keyedHarness{harness: h.harness}).deadLetters()
}

func truncateEnvelope() map[string]any {
	return map[string]any{"before": nil, "after": nil, "transaction": nil, "op": "t", "ts_ms": nil, "ts_us": nil, "ts_ns": nil,
		"source": map[string]any{"version": "2.7.3.Final", "connector": "postgresql", "name": "pg", "ts_ms": int64(1700000000500),
			"snapshot": map[string]any{"string": "false"}, "db": "shop", "sequence": nil, "ts_us": nil, "ts_ns": nil,
			"schema": "public", "table": "customers", "txId": nil, "lsn": map[string]any{"long": int64(500)}, "xmin": nil}}
}

// Every operation of the envelope in one flush: r, c and u write after, d deletes by
// before's key (only the key set: REPLICA IDENTITY DEFAULT) with or without the
// tombstone after it, which changes nothing, m is skipped and counted, t is dead-lettered. The table's
// columns are the row's, not the envelope's.
func TestEnvelopeDebeziumOperations(t *testing.T) {
	h := newDbzHarness(t)
	h.send(h.envelope, dbz{op: "r", id: 1, name: "ann", lsn: 100}, dbz{op: "r", id: 2, name: "bob", lsn: 100},
		dbz{op: "c", id: 3, name: "cy", lsn: 110}, dbz{op: "u", id: 1, name: "anne", lsn: 120},
		dbz{op: "d", id: 2, lsn: 130}, dbz{id: 2, tomb: true},
		dbz{op: "c", id: 4, name: "dan", lsn: 131}, dbz{op: "d", id: 4, lsn: 132}) // 4: tombstones.on.delete=false
	msg := truncateEnvelope()
	msg["op"] = "m"
	h.sendRaw(msg)
	h.sendRaw(truncateEnvelope())
	h.run(h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN), 10)
	if got, want := h.rowsOf("id", "name", "email"), []string{"1 anne anne@example.com", "3 cy cy@example.com"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if got, want := h.columns(), []string{"id integer", "name string", "email string", "_source_lsn long"}; !slices.Equal(got, want) {
		t.Fatalf("columns %v, want %v (the after record's, and the sequence)", got, want)
	}
	if got, want := h.deadLetters(), []string{"unsupported_change:op"}; !slices.Equal(got, want) {
		t.Fatalf("dead letters %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(h.metrics.RecordsSkipped.WithLabelValues("orders", "debezium_message")); got != 1 {
		t.Fatalf("debezium_message skipped %v, want 1", got)
	}
}

// Ordered by source.lsn: a snapshot read (r) that arrives after a streaming update with
// a higher LSN is stale, in the same flush and in a later one; equal LSNs go to the
// later record.
func TestEnvelopeDebeziumSnapshotReadNeverWinsOverANewerLSN(t *testing.T) {
	h := newDbzHarness(t)
	cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
	h.send(h.envelope, dbz{op: "u", id: 1, name: "new", lsn: 200}, dbz{op: "r", id: 1, name: "snap", lsn: 150},
		dbz{op: "u", id: 2, name: "first", lsn: 300}, dbz{op: "u", id: 2, name: "second", lsn: 300})
	h.run(cfg, 4)
	h.send(h.envelope, dbz{op: "r", id: 1, name: "snap2", lsn: 199}, dbz{op: "r", id: 2, name: "snap", lsn: 250})
	h.run(cfg, 6)
	if got, want := h.rowsOf("id", "name"), []string{"1 new", "2 second"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "stale")); got != 2 {
		t.Fatalf("stale changes %v, want 2 (the snapshot reads of flush 2)", got)
	}
	if got := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "superseded")); got != 2 {
		t.Fatalf("superseded changes %v, want 2 (flush 1: the snapshot read of 1, the first update of 2)", got)
	}
	if got, want := h.rowsOf("id", "_source_lsn"), []string{"1 200", "2 300"}; !slices.Equal(got, want) {
		t.Fatalf("sequences %v, want %v", got, want)
	}
}

// A primary-key change is a delete of the old key, its tombstone and a create of the new
// key at one LSN: only the new key is left, in one flush and across flushes.
func TestEnvelopeDebeziumPrimaryKeyChange(t *testing.T) {
	h := newDbzHarness(t)
	cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
	h.send(h.envelope, dbz{op: "c", id: 1, name: "ann", lsn: 100}, dbz{op: "c", id: 5, name: "eve", lsn: 101})
	h.run(cfg, 2)
	h.send(h.envelope, dbz{op: "d", id: 1, lsn: 300}, dbz{id: 1, tomb: true}, dbz{op: "c", id: 10, name: "ann", lsn: 300},
		dbz{op: "d", id: 5, lsn: 301}, dbz{id: 5, tomb: true}, dbz{op: "c", id: 50, name: "eve", lsn: 301})
	h.run(cfg, 8)
	if got, want := h.rowsOf("id", "name"), []string{"10 ann", "50 eve"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	// A late create of the old key, older than its delete, stays deleted.
	h.send(h.envelope, dbz{op: "c", id: 1, name: "late", lsn: 250})
	h.run(cfg, 9)
	if got, want := h.rowsOf("id", "name"), []string{"10 ann", "50 eve"}; !slices.Equal(got, want) {
		t.Fatalf("rows after a late create %v, want %v", got, want)
	}
}

// A topic whose delete events were compacted away keeps the tombstones: under upsert
// they delete their key.
func TestEnvelopeDebeziumTombstoneAloneDeletes(t *testing.T) {
	h := newDbzHarness(t)
	cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
	h.send(h.envelope, dbz{op: "c", id: 1, name: "ann", lsn: 100}, dbz{op: "c", id: 2, name: "bob", lsn: 101})
	h.run(cfg, 2)
	h.send(h.envelope, dbz{id: 1, tomb: true})
	h.run(cfg, 3)
	if got, want := h.rowsOf("id", "name"), []string{"2 bob"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

// A changelog of envelopes: every change a row with its operation and its LSN as
// sequence; a delete's row is before's (the key alone); the tombstone after it is no row.
func TestEnvelopeDebeziumChangelog(t *testing.T) {
	h := newDbzHarness(t)
	h.send(h.envelope, dbz{op: "r", id: 1, name: "ann", lsn: 100}, dbz{op: "u", id: 1, name: "anne", lsn: 120},
		dbz{op: "d", id: 1, lsn: 130}, dbz{id: 1, tomb: true})
	h.run(h.dbzConfig(config.ModeChangelog, config.EnvelopeDebezium, config.SequenceLSN), 4)
	want := []string{"1 <nil> delete 130", "1 ann upsert 100", "1 anne upsert 120"}
	if got := h.rowsOf("id", "name", "_change_operation", "_change_sequence"); !slices.Equal(got, want) {
		t.Fatalf("changelog rows %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(h.metrics.RecordsSkipped.WithLabelValues("orders", "tombstone")); got != 1 {
		t.Fatalf("tombstones skipped %v, want 1", got)
	}
}

// The flattened form: __deleted "true" deletes, __lsn orders (a late older update is
// stale), the "__" fields are no columns (one sits between the row's own fields).
func TestEnvelopeDebeziumFlattened(t *testing.T) {
	h := newDbzHarness(t)
	cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebeziumFlattened, config.SequenceLSN)
	h.send(h.flattened, dbz{op: "r", id: 1, name: "ann", lsn: 100}, dbz{op: "c", id: 2, name: "bob", lsn: 110},
		dbz{op: "u", id: 1, name: "anne", lsn: 120}, dbz{op: "d", id: 2, lsn: 130}, dbz{id: 2, tomb: true},
		dbz{op: "u", id: 1, name: "stale", lsn: 115}, dbz{op: "c", id: 3, name: "cy", lsn: 140})
	h.run(cfg, 7)
	if got, want := h.rowsOf("id", "name", "email"), []string{"1 anne anne@example.com", "3 cy cy@example.com"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if got, want := h.columns(), []string{"id integer", "name string", "email string", "_source_lsn long"}; !slices.Equal(got, want) {
		t.Fatalf("columns %v, want %v (no __ fields; the sequence)", got, want)
	}
}

// The schema guard compares the row's schema with the table: under dead_letter, an
// envelope whose after record has a column more is dead-lettered as a new column, and one
// with the same row (a new envelope schema id) is written.
func TestEnvelopeDebeziumGuardComparesTheRow(t *testing.T) {
	h := newDbzHarness(t)
	cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
	cfg.Schema.Policy = config.PolicyDeadLetter
	cfg.Schema.OnIncompatible = config.PolicyDeadLetter
	h.send(h.envelope, dbz{op: "c", id: 1, name: "ann", lsn: 100})
	h.run(cfg, 1)
	wider := strings.Replace(testDebeziumEnvelope, `{"name":"email","type":["null","string"],"default":null}]`,
		`{"name":"email","type":["null","string"],"default":null},{"name":"phone","type":["null","string"],"default":null}]`, 1)
	id, _, err := h.reg.RegisterSchema("pg.public.customers-value", sr.Schema{Schema: wider, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := avro.ParseWithCache(wider, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	h.env, h.envID, h.api = ws, id, avro.Config{}.Freeze()
	h.send(h.envelope, dbz{op: "c", id: 2, name: "bob", lsn: 110})
	h.run(cfg, 2)
	if got, want := h.rowsOf("id", "name"), []string{"1 ann"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if got, want := h.deadLetters(), []string{"schema_mismatch:phone"}; !slices.Equal(got, want) {
		t.Fatalf("dead letters %v, want %v", got, want)
	}
}

// Soft deletes keep the delete event's before row (the key alone under REPLICA IDENTITY
// DEFAULT) flagged with its LSN; the tombstone after it, in the same flush or a later
// one, leaves it so.
func TestEnvelopeDebeziumSoftDeletes(t *testing.T) {
	h := newDbzHarness(t)
	cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
	cfg.Table.Deletes = config.DeletesSoft
	h.send(h.envelope, dbz{op: "c", id: 1, name: "ann", lsn: 100}, dbz{op: "d", id: 1, lsn: 110}, dbz{id: 1, tomb: true},
		dbz{op: "c", id: 2, name: "bob", lsn: 100}, dbz{op: "d", id: 2, lsn: 120})
	h.run(cfg, 5)
	want := []string{"1 <nil> true 110 110", "2 <nil> true 120 120"}
	if got := h.rowsOf("id", "name", "_deleted", "_deleted_sequence", "_source_lsn"); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	h.send(h.envelope, dbz{id: 2, tomb: true})
	h.run(cfg, 6)
	if got := h.rowsOf("id", "name", "_deleted", "_deleted_sequence", "_source_lsn"); !slices.Equal(got, want) {
		t.Fatalf("rows after a later tombstone %v, want %v", got, want)
	}
}

// A table without the column an envelope sequence is stored in is refused at start-up,
// naming the column and the fix, and nothing is written.
func TestEnvelopeDebeziumRefusesTableWithoutTheSequenceColumn(t *testing.T) {
	h := newDbzHarness(t)
	h.send(h.envelope, dbz{op: "c", id: 1, name: "ann", lsn: 100})
	h.run(h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, ""), 1)
	version := h.snapshot().Version
	m := h.startWith("dbz", h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN), nil)
	err := m.stopped(t, 20*time.Second, "the pipeline kept running on a table without _source_lsn")
	want := "table.sequence_by source.lsn fills columns the table lacks: _source_lsn BIGINT (fix: ALTER TABLE <table> ADD COLUMNS (_source_lsn BIGINT)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run = %v, want a refusal holding %q", err, want)
	}
	if v := h.snapshot().Version; v != version {
		t.Fatalf("table at version %d, want %d (nothing written)", v, version)
	}
}

// table.envelope_columns: a changelog keeps each change's op, LSN and timestamps as
// columns (the LSN once, also the sequence), after the row's.
func TestEnvelopeDebeziumEnvelopeColumns(t *testing.T) {
	h := newDbzHarness(t)
	cfg := h.dbzConfig(config.ModeChangelog, config.EnvelopeDebezium, config.SequenceLSN)
	cfg.Table.EnvelopeColumns = []string{config.EnvelopeTsMs, config.EnvelopeLSN, config.EnvelopeOp, config.EnvelopeSourceTsMs}
	h.send(h.envelope, dbz{op: "r", id: 1, name: "ann", lsn: 100}, dbz{op: "u", id: 1, name: "anne", lsn: 120}, dbz{op: "d", id: 1, lsn: 130})
	h.run(cfg, 3)
	want := []string{
		"1 ann upsert r 100 1700000000100 1700000001100",
		"1 anne upsert u 120 1700000000120 1700000001120",
		"1 <nil> delete d 130 1700000000130 1700000001130",
	}
	slices.Sort(want)
	if got := h.rowsOf("id", "name", "_change_operation", "_op", "_source_lsn", "_source_ts_ms", "_ts_ms"); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	want = []string{"id integer", "name string", "email string", "_source_lsn long", "_op string", "_source_ts_ms long", "_ts_ms long",
		"_change_operation string", "_change_sequence long"}
	if got := h.columns(); !slices.Equal(got, want) {
		t.Fatalf("columns %v, want %v", got, want)
	}
}

// A changelog of the flattened form keeps a tombstone as a delete row: with
// ExtractNewRecordState's delete.handling.mode drop it is the only record of the delete.
func TestEnvelopeDebeziumFlattenedChangelogKeepsTombstones(t *testing.T) {
	h := newDbzHarness(t)
	h.send(h.flattened, dbz{op: "c", id: 1, name: "ann", lsn: 100}, dbz{id: 1, tomb: true})
	h.run(h.dbzConfig(config.ModeChangelog, config.EnvelopeDebeziumFlattened, config.SequenceLSN), 2)
	want := []string{"1 <nil> delete <nil>", "1 ann upsert 100"}
	if got := h.rowsOf("id", "name", "_change_operation", "_change_sequence"); !slices.Equal(got, want) {
		t.Fatalf("changelog rows %v, want %v", got, want)
	}
}

// Public bug reports, with Debezium's envelope. An upsert table given c{id:1}, u{id:1},
// d{id:1} in one flush ends empty (no row appended per change); a delete followed by its
// tombstone deletes the row once and the tombstone, never decoded, changes nothing.
func TestEnvelopeDebeziumPublicCases(t *testing.T) {
	t.Run("create update delete in one flush leave no row", func(t *testing.T) {
		h := newDbzHarness(t)
		h.send(h.envelope, dbz{op: "c", id: 1, name: "v1", lsn: 10}, dbz{op: "u", id: 1, name: "v2", lsn: 11}, dbz{op: "d", id: 1, lsn: 12})
		h.run(h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN), 3)
		if got := h.rowsOf("id", "name"); len(got) != 0 {
			t.Fatalf("rows %v, want none", got)
		}
		if got := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "superseded")); got != 2 {
			t.Fatalf("superseded changes %v, want 2 (c and u, replaced by d in the flush)", got)
		}
	})
	t.Run("delete then tombstone deletes once", func(t *testing.T) {
		h := newDbzHarness(t)
		cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
		h.send(h.envelope, dbz{op: "c", id: 1, name: "ann", lsn: 10}, dbz{op: "c", id: 2, name: "bob", lsn: 11})
		h.run(cfg, 2)
		h.send(h.envelope, dbz{op: "d", id: 1, lsn: 20}, dbz{id: 1, tomb: true})
		h.run(cfg, 4)
		if got, want := h.rowsOf("id", "name"), []string{"2 bob"}; !slices.Equal(got, want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
		if got := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "deleted")); got != 1 {
			t.Fatalf("deleted %v, want 1: the tombstone after the delete deletes nothing more", got)
		}
		if got := h.deadLetters(); len(got) != 0 {
			t.Fatalf("dead letters %v, want none", got)
		}
	})
}
