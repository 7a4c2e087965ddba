package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/ingest/decode"
)

// cdcRecord is one Debezium record read back: key and value decoded through the registry
// (value nil: a tombstone), with the schema ids of their Confluent frames.
type cdcRecord struct {
	keyID, valueID int
	key, value     map[string]any
}

// decodeCDC decodes Confluent-framed Avro keys and values (magic byte 0, 4-byte schema
// id) with ingestd's own frame parser and registry client, which fetches each id from
// the registry's ccompat API.
func decodeCDC(t *testing.T, reg *decode.Registry, recs []topicRecord) []cdcRecord {
	t.Helper()
	dec := func(b []byte) (int, map[string]any) {
		id, payload, err := decode.ParseFrame(b)
		if err != nil {
			t.Fatalf("frame %x: %v", b, err)
		}
		ws, err := reg.Schema(context.Background(), id)
		if err != nil {
			t.Fatalf("schema %d from the registry's ccompat API: %v", id, err)
		}
		var v map[string]any
		if err := avro.Unmarshal(ws.Avro, payload, &v); err != nil {
			t.Fatalf("decode with schema %d: %v", id, err)
		}
		return id, v
	}
	out := make([]cdcRecord, 0, len(recs))
	for _, r := range recs {
		var c cdcRecord
		c.keyID, c.key = dec(r.key)
		if r.value != nil {
			c.valueID, c.value = dec(r.value)
		}
		out = append(out, c)
	}
	return out
}

// cdcRow is a before/after image of the smoke tables in comparable form: the union
// wrapper (the record's full name) removed, numeric(10,2) as its decimal string.
func cdcRow(t *testing.T, v any, recordName string) map[string]any {
	t.Helper()
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)[recordName].(map[string]any)
	if !ok {
		t.Fatalf("row image %#v: want a union branch %s", v, recordName)
	}
	out := map[string]any{}
	for k, x := range m {
		if r, ok := x.(*big.Rat); ok {
			x = r.FloatString(2)
		}
		out[k] = x
	}
	return out
}

// smokeRow is a row of the smoke tables (id int, name text, price numeric(10,2), at
// timestamptz, ok bool) as Debezium's Avro carries it: timestamptz as
// io.debezium.time.ZonedTimestamp (ISO-8601 in UTC, microseconds), numeric as decimal.
func smokeRow(id int, name, price, at, ok any) map[string]any {
	return map[string]any{"id": id, "name": name, "price": price, "at": at, "ok": ok}
}

// TestDebeziumSmoke runs PostgreSQL (the stack's) → Debezium on a Kafka Connect worker
// started by the test → the stack's broker and registry, and checks the exact records:
// r for the rows present before the connector starts, then c/u/d and the tombstone after
// each delete, with `before` empty on update and key-only on delete under REPLICA
// IDENTITY DEFAULT and full under FULL; keys and values in the Confluent framing with ids
// the registry's ccompat API serves under <topic>-key/-value. It also checks the value
// schema Debezium registers for a table of many PostgreSQL types, and one record of that
// table through Connect's JSON converter, against testdata/debezium (rewrite them with
// INGESTD_UPDATE_DEBEZIUM_SAMPLES=1). Last, it kills the worker (SIGKILL) and starts it
// again: the connector streams on from its committed offset, with no second snapshot.
func TestDebeziumSmoke(t *testing.T) {
	t.Parallel() // own database, slots, topics and worker
	s := need(t)
	pg := needPostgres(t)
	needConnect(t)
	start := time.Now()
	db := createPGDatabase(t, pg)
	db.exec(t, `
		CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2), at timestamptz, ok bool);
		CREATE TABLE items_full (id int PRIMARY KEY, name text, price numeric(10,2), at timestamptz, ok bool);
		ALTER TABLE items_full REPLICA IDENTITY FULL;
		INSERT INTO items VALUES (1, 'one', 1.50, '2026-01-02 03:04:05.123456+00', true);
		INSERT INTO items_full VALUES (1, 'one', 1.50, '2026-01-02 03:04:05.123456+00', true);
		`+cdcTypesDDL)
	w := startConnect(t, s.brokers, s.registry)
	restReady := time.Since(start)

	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	avroPrefix, jsonPrefix := "cdc"+suffix, "cdcj"+suffix
	avroName, jsonName := "smoke-avro-"+suffix, "smoke-json-"+suffix
	w.PutConnector(t, avroName, debeziumConnector(db, avroName, avroPrefix,
		[]string{"public.items", "public.items_full", "public.types"}, w.avroConverter(t), nil))
	w.PutConnector(t, jsonName, debeziumConnector(db, jsonName, jsonPrefix, []string{"public.types"}, jsonConverter(), nil))
	w.WaitStreaming(t, avroName, db, debeziumSlot(avroName), 90*time.Second)
	w.WaitStreaming(t, jsonName, db, debeziumSlot(jsonName), 90*time.Second)
	streaming := time.Since(start)

	db.exec(t, `
		INSERT INTO items VALUES (2, 'two', 2.25, '2026-01-02 03:04:06+00', false), (3, 'three', 3.00, NULL, NULL);
		UPDATE items SET price = 2.75, ok = true WHERE id = 2;
		DELETE FROM items WHERE id = 3;
		INSERT INTO items_full VALUES (2, 'two', 2.25, '2026-01-02 03:04:06+00', false), (3, 'three', 3.00, NULL, NULL);
		UPDATE items_full SET price = 2.75, ok = true WHERE id = 2;
		DELETE FROM items_full WHERE id = 3;
		`+cdcTypesInsert)
	committed := time.Now()

	cl, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	reg := decode.NewRegistry(cl)
	ctx := context.Background()
	var firstRecord time.Duration
	var itemsKeyID int
	for _, tc := range []struct {
		table        string
		updateBefore map[string]any // the update's before image
		deleteBefore map[string]any // the delete's before image
	}{
		// DEFAULT: no before image on update; the key alone (other columns null) on delete.
		{"items", nil, smokeRow(3, nil, nil, nil, nil)},
		// FULL: the whole old row both times.
		{"items_full", smokeRow(2, "two", "2.25", "2026-01-02T03:04:06.000000Z", false), smokeRow(3, "three", "3.00", nil, nil)},
	} {
		topic := avroPrefix + ".public." + tc.table
		raw := readTopicN(t, s.brokers, topic, 6, 60*time.Second)
		if firstRecord == 0 {
			firstRecord = time.Since(committed)
		}
		recs := decodeCDC(t, reg, raw)
		keyID, err := reg.LatestID(ctx, topic+"-key")
		if err != nil {
			t.Fatalf("subject %s-key: %v", topic, err)
		}
		if tc.table == "items" {
			itemsKeyID = keyID
		}
		valueID, err := reg.LatestID(ctx, topic+"-value")
		if err != nil {
			t.Fatalf("subject %s-value: %v", topic, err)
		}
		ws, err := reg.Schema(ctx, valueID)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ws.Avro.(*avro.RecordSchema).FullName(), topic+".Envelope"; got != want {
			t.Errorf("%s: value schema %s, want %s", tc.table, got, want)
		}
		rowName := topic + ".Value"
		type want struct {
			key           int
			op            string
			before, after map[string]any
		}
		wants := []want{
			{1, "r", nil, smokeRow(1, "one", "1.50", "2026-01-02T03:04:05.123456Z", true)},
			{2, "c", nil, smokeRow(2, "two", "2.25", "2026-01-02T03:04:06.000000Z", false)},
			{3, "c", nil, smokeRow(3, "three", "3.00", nil, nil)},
			{2, "u", tc.updateBefore, smokeRow(2, "two", "2.75", "2026-01-02T03:04:06.000000Z", true)},
			{3, "d", tc.deleteBefore, nil},
			{3, "", nil, nil}, // tombstone
		}
		if len(recs) != len(wants) {
			t.Fatalf("%s: %d records, want %d", tc.table, len(recs), len(wants))
		}
		var txID any
		for i, r := range recs {
			wn := wants[i]
			if r.keyID != keyID || !reflect.DeepEqual(r.key, map[string]any{"id": wn.key}) {
				t.Errorf("%s record %d: key %v (schema %d), want {id:%d} (schema %d, %s-key)", tc.table, i, r.key, r.keyID, wn.key, keyID, topic)
			}
			if wn.op == "" {
				if r.value != nil {
					t.Errorf("%s record %d: value %v, want a tombstone", tc.table, i, r.value)
				}
				continue
			}
			if r.valueID != valueID {
				t.Errorf("%s record %d: value schema %d, want %d (%s-value)", tc.table, i, r.valueID, valueID, topic)
			}
			v := r.value
			src, _ := v["source"].(map[string]any)
			before, after := cdcRow(t, v["before"], rowName), cdcRow(t, v["after"], rowName)
			if v["op"] != wn.op || !reflect.DeepEqual(before, wn.before) || !reflect.DeepEqual(after, wn.after) {
				t.Errorf("%s record %d: op %v before %v after %v\nwant op %s before %v after %v", tc.table, i, v["op"], before, after, wn.op, wn.before, wn.after)
			}
			if src["db"] != db.name || src["schema"] != "public" || src["table"] != tc.table || src["connector"] != "postgresql" || src["name"] != avroPrefix {
				t.Errorf("%s record %d: source %v", tc.table, i, src)
			}
			// Snapshot reads are marked (first/true/last...), streamed changes "false"; the
			// four streamed changes come from one transaction.
			if snap, _ := src["snapshot"].(string); (wn.op == "r") != (snap != "false" && snap != "") {
				t.Errorf("%s record %d: op %s with source.snapshot %q", tc.table, i, wn.op, snap)
			}
			if wn.op != "r" {
				if txID == nil {
					txID = src["txId"]
				} else if src["txId"] != txID {
					t.Errorf("%s record %d: txId %v, want %v (one transaction)", tc.table, i, src["txId"], txID)
				}
			}
		}
	}

	// The many-types table: the registered value schema, and one JSON-converter record.
	typesTopic := avroPrefix + ".public.types"
	raw := readTopicN(t, s.brokers, typesTopic, 1, 60*time.Second)
	recs := decodeCDC(t, reg, raw)
	if recs[0].value["op"] != "c" {
		t.Fatalf("types: op %v, want c", recs[0].value["op"])
	}
	ss, err := cl.SchemaByVersion(ctx, typesTopic+"-value", -1)
	if err != nil {
		t.Fatal(err)
	}
	if ss.ID != recs[0].valueID {
		t.Errorf("types: record schema %d, %s-value latest %d", recs[0].valueID, typesTopic, ss.ID)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(ss.Schema.Schema), "", "  "); err != nil {
		t.Fatalf("types value schema: %v", err)
	}
	checkDebeziumSample(t, "types-value.avsc", strings.ReplaceAll(pretty.String(), avroPrefix, "cdc")+"\n")

	jraw := readTopicN(t, s.brokers, jsonPrefix+".public.types", 1, 60*time.Second)
	checkDebeziumSample(t, "types-json.json", normalizeJSONRecord(t, jraw[0], jsonPrefix, db.name))
	// Killed and started again, the worker finds its connectors and their offsets in its
	// topics: it streams on from the slot without a second snapshot (no r) and without the
	// test registering anything again. Killed before it committed an offset past the
	// snapshot, it would take the snapshot again.
	w.WaitSnapshotCommitted(t, avroName, 30*time.Second)
	w.Kill(t)
	db.exec(t, `INSERT INTO items VALUES (4, 'four', 4.00, NULL, true)`)
	restart := time.Now()
	w.Start(t)
	w.WaitStreaming(t, avroName, db, debeziumSlot(avroName), 90*time.Second)
	streamingAgain := time.Since(restart)
	topic := avroPrefix + ".public.items"
	// Row 4's key: the frame of the items key schema, then Avro int 4 (zigzag: 0x08).
	key4 := string([]byte{0, byte(itemsKeyID >> 24), byte(itemsKeyID >> 16), byte(itemsKeyID >> 8), byte(itemsKeyID), 0x08})
	raw = readTopicUntil(t, s.brokers, topic, 60*time.Second, func(recs []topicRecord) bool {
		return len(recs) > 0 && string(recs[len(recs)-1].key) == key4
	})
	after := decodeCDC(t, reg, raw[6:])
	last := after[len(after)-1]
	if got := cdcRow(t, last.value["after"], topic+".Value"); last.value["op"] != "c" || !reflect.DeepEqual(got, smokeRow(4, "four", "4.00", nil, true)) {
		t.Errorf("after the restart: op %v after %v, want c of row 4", last.value["op"], got)
	}
	for i, r := range after {
		// Changes committed before the kill may come again (at least once), a snapshot may not.
		if op := r.value["op"]; r.value != nil && op == "r" {
			t.Errorf("after the restart, record %d: op r (a second snapshot)", 6+i)
		}
	}
	t.Logf("timings: worker REST up %v, both connectors streaming %v (from the test's start), first record %v after the commit",
		restReady.Round(time.Millisecond), streaming.Round(time.Millisecond), firstRecord.Round(time.Millisecond))
	t.Logf("after SIGKILL: streaming again %v after the start, %d records after the first 6", streamingAgain.Round(time.Millisecond), len(after))
}

// cdcTypesDDL is a table of many PostgreSQL types, for the schema and JSON samples in
// testdata/debezium.
const cdcTypesDDL = `
	CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
	CREATE TABLE types (
		id bigint PRIMARY KEY,
		c_int2 int2, c_int4 int4, c_int8 int8,
		c_numeric numeric, c_numeric_10_2 numeric(10,2), c_numeric_5 numeric(5),
		c_real real, c_double double precision,
		c_bool bool, c_text text, c_varchar varchar(20), c_char char(3), c_bytea bytea,
		c_date date, c_time time, c_timetz timetz, c_timestamp timestamp, c_timestamp_3 timestamp(3),
		c_timestamptz timestamptz,
		c_uuid uuid, c_json json, c_jsonb jsonb, c_enum mood,
		c_int_array int[], c_text_array text[], c_interval interval,
		c_not_null text NOT NULL DEFAULT 'x');`

const cdcTypesInsert = `
	INSERT INTO types VALUES (1, 1, 2, 3, 123.456, 12.34, 12345, 1.5, 2.25,
		true, 'text', 'varchar', 'abc', '\x0102ff',
		'2026-01-02', '03:04:05.123456', '03:04:05.123456+02', '2026-01-02 03:04:05.123456', '2026-01-02 03:04:05.123',
		'2026-01-02 03:04:05.123456+00',
		'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": 1}', '{"b": [1, 2]}', 'happy',
		'{1,2,3}', '{"x","y"}', '1 day 02:03:04.5', 'y');`

// normalizeJSONRecord renders a JSON-converter record as {"key":…,"value":…} with what
// changes from run to run fixed: the topic prefix as "cdcj", the database as "cdcdb",
// and the LSNs, transaction id and times as 0.
func normalizeJSONRecord(t *testing.T, r topicRecord, prefix, dbName string) string {
	t.Helper()
	var key, value map[string]any
	for _, x := range []struct {
		b []byte
		v *map[string]any
	}{{r.key, &key}, {r.value, &value}} {
		d := json.NewDecoder(bytes.NewReader(x.b))
		d.UseNumber() // int64 values (microseconds) stay exact
		if err := d.Decode(x.v); err != nil {
			t.Fatalf("JSON record %s: %v", x.b, err)
		}
	}
	payload, _ := value["payload"].(map[string]any)
	src, _ := payload["source"].(map[string]any)
	if payload == nil || src == nil {
		t.Fatalf("JSON value without payload.source: %s", r.value)
	}
	for _, k := range []string{"ts_ms", "ts_us", "ts_ns"} {
		payload[k], src[k] = 0, 0
	}
	src["txId"], src["lsn"], src["sequence"] = 0, 0, `[null,"0"]`
	b, err := json.MarshalIndent(map[string]any{"key": key, "value": value}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out := strings.ReplaceAll(string(b), prefix, "cdcj")
	return strings.ReplaceAll(out, dbName, "cdcdb") + "\n"
}

// checkDebeziumSample compares got with testdata/debezium/name, or rewrites the file
// when INGESTD_UPDATE_DEBEZIUM_SAMPLES=1.
func checkDebeziumSample(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "debezium", name)
	if os.Getenv("INGESTD_UPDATE_DEBEZIUM_SAMPLES") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("%s differs from what Debezium produced (rewrite with INGESTD_UPDATE_DEBEZIUM_SAMPLES=1 if the change is expected):\n%s",
			path, firstDiff(string(want), got))
	}
}

// firstDiff names the first differing line of two texts.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  file: %s\n  got:  %s", i+1, x, y)
		}
	}
	return ""
}
