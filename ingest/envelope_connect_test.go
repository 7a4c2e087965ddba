package ingest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
)

// connectCapture reads change events Debezium 3.7.1 wrote through Kafka Connect's
// JsonConverter (ingest/decode/testdata/debezium/json-*.jsonl, described in
// decode's envelope_connect_test.go) as records of the harness's topic: key and value as
// the connector wrote them, a null value for a tombstone.
func connectCapture(t *testing.T, h *harness, name string) []*kgo.Record {
	t.Helper()
	f, err := os.Open("decode/testdata/debezium/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*kgo.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct{ Key, Value json.RawMessage }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Topic: h.topic, Partition: 0}
		if string(line.Key) != "null" {
			r.Key = line.Key
		}
		if string(line.Value) != "null" {
			r.Value = line.Value
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// connectJSONConfig is an upsert pipeline of Debezium's change events in Kafka Connect
// JSON (format connect_json, no registry), keyed by id with key_format kf.
func connectJSONConfig(h *harness, envelope, kf string) *config.Config {
	cfg := h.config()
	cfg.Format, cfg.SchemaRegistry = config.FormatConnectJSON, nil
	cfg.Table.Mode, cfg.Table.Key, cfg.Table.KeyFormat, cfg.Table.Envelope, cfg.Table.SequenceBy = config.ModeUpsert, []string{"id"}, kf, envelope, config.SequenceLSN
	cfg.Table.DeleteHorizon, cfg.Table.Deletes, cfg.Table.UpsertWrite = config.DefaultDeleteHorizon, config.DeletesHard, config.MergeOnRead
	cfg.Schema.AllowTableFeatures = []string{"timestampNtz"} // timestamp without time zone: io.debezium.time.MicroTimestamp
	return cfg
}

// connectDeps are the Deps of format connect_json: no registry, no framing, the records
// give their schemas.
func connectDeps(d *Deps) {
	d.Schemas, d.Framed, d.Documents = noSchemas{}, false, decode.NewConnectSource()
}

func (h *harness) produceRecords(recs ...*kgo.Record) {
	h.t.Helper()
	if err := h.producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) runConnect(cfg *config.Config, n int64) {
	h.t.Helper()
	m := h.startWith("connect", cfg, connectDeps)
	h.waitHandled(n, 30*time.Second, m)
	m.stop(h.t)
}

// The captured change events of a PostgreSQL table through JsonConverter (snapshot
// reads, an insert, an update, a delete whose before holds the key alone and its
// tombstone, a primary-key change, a transaction, a truncate) make an upsert table equal
// to the source: every column exact with Debezium's logical types (numeric(12,2) as a
// decimal, numeric as its text, timestamptz and timestamp in µs, date, time in µs, uuid
// and jsonb as text), _kafka_key the key payload's JSON text, the truncate the only dead
// letter, which keeps the record's JSON bytes and names no schema id.
func TestEnvelopeConnectJSONCaptured(t *testing.T) {
	h := newHarness(t, 1)
	recs := connectCapture(t, h, "json-envelope.jsonl")
	h.produceRecords(recs...)
	cfg := connectJSONConfig(h, config.EnvelopeDebezium, "connect_json")
	cfg.Table.KafkaColumns = []string{"key"}
	h.runConnect(cfg, int64(len(recs)))
	d := &dbzHarness{harness: h}
	if got, want := d.columns(), []string{"id integer", "amount decimal(12,2)", "price string", "at timestamp", "ts timestamp_ntz", "d date", "tm long",
		"u string", "j string", "note string", "_kafka_key string", "_source_lsn long"}; !slices.Equal(got, want) {
		t.Fatalf("columns\n got %v\nwant %v", got, want)
	}
	// As stored: decimals unscaled (amount scale 2), timestamps in µs since the epoch,
	// dates in days, times of day in µs since midnight.
	if got, want := d.rowsOf("id", "amount", "price", "at", "ts", "d", "tm", "u", "j", "note", "_kafka_key"), []string{
		`1 100 1.5 1767323045123456 1767323045654321 20455 3723456789 a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 {"a": [1, 2]} upd {"id":1}`,
		`4 9999999 123.456 -1 -618105599999999 -25567 86399999999 00000000-0000-0000-0000-000000000001 {"x": "é"} <nil> {"id":4}`,
		`5 <nil> <nil> <nil> <nil> <nil> <nil> <nil> <nil> tx2 {"id":5}`,
	}; !slices.Equal(got, want) {
		t.Fatalf("rows\n got %q\nwant %q", got, want)
	}
	dl := h.readTopicAll(h.dlq)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want the truncate's", len(dl))
	}
	headers := map[string]string{}
	for _, hd := range dl[0].Headers {
		headers[hd.Key] = string(hd.Value)
	}
	if headers["ingestd.error.reason"] != "unsupported_change" || headers["ingestd.error.field"] != "op" {
		t.Errorf("dead letter %v, want unsupported_change at op", headers)
	}
	if id, ok := headers["ingestd.error.schema_id"]; ok {
		t.Errorf("dead letter names schema id %s: Kafka Connect JSON has none", id)
	}
	if last := recs[len(recs)-1]; string(dl[0].Value) != string(last.Value) || string(dl[0].Key) != string(last.Key) {
		t.Errorf("dead letter value %.80s…, want the record's JSON %.80s…", dl[0].Value, last.Value)
	}
}

// ExtractNewRecordState's captured output (__op, __lsn, __source_ts_ms, __deleted "true"
// on deletes, tombstones after them) through JsonConverter: the same rows, without the
// "__" fields.
func TestEnvelopeConnectJSONFlattenedCaptured(t *testing.T) {
	h := newHarness(t, 1)
	recs := connectCapture(t, h, "json-flattened.jsonl")
	h.produceRecords(recs...)
	h.runConnect(connectJSONConfig(h, config.EnvelopeDebeziumFlattened, "connect_json"), int64(len(recs)))
	d := &dbzHarness{harness: h}
	if got, want := d.rowsOf("id", "amount", "note", "_source_lsn"), []string{"1 100 upd 30955936", "4 9999999 <nil> 30956192", "5 <nil> tx2 30956576"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	if got := d.deadLetters(); len(got) != 0 {
		t.Fatalf("dead letters %v, want none", got)
	}
}

// A tombstone alone deletes its key under key_format connect_json (Debezium's key with
// its schema) and json (schemas.enable=false: an object, or a bare number, read exactly);
// a key that names no id, or an id that is not an integer, is a missing_key dead letter
// naming the column. A Connect key may be a struct or, for a one-column key, a primitive.
func TestEnvelopeConnectJSONTombstoneKeys(t *testing.T) {
	for _, tc := range []struct {
		keyFormat string
		keys      []string // the tombstones' keys, for ids 1, 4 and 5
		bad       []string // keys that cannot be read
		want      []string
	}{
		{"connect_json",
			[]string{`{"schema":{"type":"int32","optional":false},"payload":1}`, // a primitive key (ExtractField$Key)
				`{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ID"}],"optional":false,"name":"p.public.t.Key"},"payload":{"ID":4}}`},
			[]string{`{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"other"}],"optional":false},"payload":{"other":5}}`,
				`{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],"optional":false},"payload":{"id":"five"}}`, `{"id":5}`},
			[]string{"unsupported_change:op", "missing_key:id", "missing_key:id", "missing_key:"}},
		{"json",
			[]string{`{"id":1}`, `4`},
			[]string{`{"id":5.5}`, `{"other":5}`, `{"id":9223372036854775808}`, `"x`},
			[]string{"unsupported_change:op", "missing_key:id", "missing_key:id", "missing_key:id", "missing_key:"}},
	} {
		t.Run(tc.keyFormat, func(t *testing.T) {
			h := newHarness(t, 1)
			var recs []*kgo.Record
			for _, r := range connectCapture(t, h, "json-envelope.jsonl") {
				if r.Value != nil { // the change events without their tombstones: 1, 4, 5 live
					recs = append(recs, r)
				}
			}
			for _, k := range append(slices.Clone(tc.keys), tc.bad...) {
				recs = slices.Insert(recs, len(recs)-1, &kgo.Record{Topic: h.topic, Key: []byte(k)}) // before the truncate
			}
			h.produceRecords(recs...)
			h.runConnect(connectJSONConfig(h, config.EnvelopeDebezium, tc.keyFormat), int64(len(recs)))
			d := &dbzHarness{harness: h}
			if got, want := d.rowsOf("id", "note"), []string{"5 tx2"}; !slices.Equal(got, want) {
				t.Errorf("rows %q, want %q (1 and 4 deleted by their tombstones)", got, want)
			}
			if got := d.deadLetters(); !slices.Equal(got, tc.want) {
				t.Errorf("dead letters %v, want %v", got, tc.want)
			}
		})
	}
}

// withExtraColumn is a captured change event whose Connect schema has one more optional
// string field in before and after (an ALTER TABLE … ADD COLUMN extra text), set to
// extra in after: a second writer schema, which Kafka Connect JSON names by no id.
func withExtraColumn(t *testing.T, value []byte, extra string) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	for _, f := range v["schema"].(map[string]any)["fields"].([]any) {
		if f := f.(map[string]any); f["field"] == "before" || f["field"] == "after" {
			f["fields"] = append(f["fields"].([]any), map[string]any{"type": "string", "optional": true, "field": "extra"})
		}
	}
	v["payload"].(map[string]any)["after"].(map[string]any)["extra"] = extra
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Two Connect schemas of one topic in one batch (a column added in the source): every
// Kafka Connect JSON writer schema has id 0, and each envelope is compiled and cached by
// its own writer schema key, so each event is split by its own schema; the table evolves.
func TestEnvelopeConnectJSONTwoSchemasInOneBatch(t *testing.T) {
	h := newHarness(t, 1)
	recs := connectCapture(t, h, "json-envelope.jsonl")
	first, second := recs[0], recs[2] // r of id 1, c of id 3
	second.Value = withExtraColumn(t, second.Value, "added")
	third := *recs[3] // u of id 1, first schema again
	h.produceRecords(first, second, &third)
	h.runConnect(connectJSONConfig(h, config.EnvelopeDebezium, "connect_json"), 3)
	d := &dbzHarness{harness: h}
	if got, want := d.rowsOf("id", "note", "extra"), []string{"1 upd <nil>", "3 <nil> added"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	if got := d.deadLetters(); len(got) != 0 {
		t.Fatalf("dead letters %v, want none", got)
	}
}

// connectNullDeletes is the captured flattened events as ExtractNewRecordState writes them
// with its default delete.tombstone.handling.mode (tombstone) through JsonConverter: each
// delete is one record {"schema": <the row's optional struct>, "payload": null}, the Connect form
// of a null value, and no other tombstone follows it.
func connectNullDeletes(t *testing.T, recs []*kgo.Record) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for _, r := range recs {
		if r.Value == nil {
			continue
		}
		var v struct {
			Schema  map[string]any `json:"schema"`
			Payload map[string]any `json:"payload"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if v.Payload["__deleted"] == "true" {
			var fields []any
			for _, f := range v.Schema["fields"].([]any) {
				if name := f.(map[string]any)["field"].(string); len(name) < 2 || name[:2] != "__" {
					fields = append(fields, f)
				}
			}
			v.Schema["fields"], v.Schema["optional"] = fields, true // the row's struct, as before and after have it
			b, err := json.Marshal(map[string]any{"schema": v.Schema, "payload": nil})
			if err != nil {
				t.Fatal(err)
			}
			r.Value = b
		}
		out = append(out, r)
	}
	return out
}

// A Kafka Connect JSON value whose payload is null is a tombstone, as JsonConverter reads
// it: it deletes its key in an upsert table, is a delete row in a changelog, and is
// neither a dead letter nor a halt (it is not a row with NULL key columns). Under a
// schema that is not optional JsonConverter refuses a null payload: a decode_error dead
// letter, and its key (4) stays.
func TestEnvelopeConnectJSONNullPayloadDeletes(t *testing.T) {
	for _, mode := range []string{config.ModeUpsert, config.ModeChangelog} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, 1)
			recs := connectNullDeletes(t, connectCapture(t, h, "json-flattened.jsonl"))
			if len(recs) != 9 {
				t.Fatalf("%d records, want 9 (two deletes without their tombstones)", len(recs))
			}
			recs = append(recs, &kgo.Record{Topic: h.topic, Key: []byte(`{"id":4}`),
				Value: []byte(`{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false},"payload":null}`)})
			h.produceRecords(recs...)
			cfg := connectJSONConfig(h, config.EnvelopeDebeziumFlattened, "connect_json")
			cfg.Table.Mode = mode
			h.runConnect(cfg, int64(len(recs)))
			d := &dbzHarness{harness: h}
			want := []string{"1 100 upd 30955936", "4 9999999 <nil> 30956192", "5 <nil> tx2 30956576"}
			if mode == config.ModeChangelog {
				// every change; each delete a row of its key alone
				want = []string{"1 100 upd 30955936", "1 1234 one 30953960", "2 -5 <nil> 30953960", "2 <nil> <nil> <nil>",
					"3 9999999 <nil> 30955720", "3 <nil> <nil> <nil>", "4 9999999 <nil> 30956192", "5 <nil> tx 30956440", "5 <nil> tx2 30956576"}
			}
			if got := d.rowsOf("id", "amount", "note", "_source_lsn"); !slices.Equal(got, want) {
				t.Errorf("rows\n got %q\nwant %q", got, want)
			}
			if got, want := d.deadLetters(), []string{"decode_error:"}; !slices.Equal(got, want) {
				t.Errorf("dead letters %v, want %v", got, want)
			}
		})
	}
}
