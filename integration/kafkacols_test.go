package integration

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter"
)

// TestKafkaColumnsC36: the Kafka key and headers as columns, on the real broker and
// registry. Sinks crashed on null keys, kept one of two headers with the same key, or
// mangled header bytes that are not UTF-8 (Azure Event Grid's 0xA1 type prefix), and
// kafka-delta-ingest users asked for the key and headers for years
// (delta-io/kafka-delta-ingest#6, apache/flink-connector-kafka#258). One topic is read by
// three pipelines, one per table.key_format (bytes under dead_letter, string under halt,
// avro under evolve with on_incompatible dead_letter, and column mapping name, so the key
// struct is written and read through physical names), each into its own table with every
// Kafka column. Partition 3 holds ten filler records (offsets 0..9, null keys, no
// headers), then:
//   - 10: key null, no headers: _kafka_key NULL, _kafka_headers an empty map;
//   - 11: key empty, header trace-id=abc: an empty key (not NULL), {trace-id: 616263};
//   - 12: key k1, headers x-tag=tag1, x-tag=tag2, other=null: {x-tag: tag2, other:
//     NULL};
//   - 13: key FF FE 00 (not UTF-8), headers aeg-event-type=A1 0C "Notification" and
//     bin=00 FF, kept byte for byte; under key_format string a key_decode_error;
//   - 14: a Confluent-framed OrderKey{order_id: 42}: the struct {order_id: 42} under avro;
//   - 15: key {} (JSON, no magic byte): a key_decode_error under avro, though its value
//     decodes;
//   - 16: a value schema with a field named _kafka_offset: kafka_column_collision
//     (dead-lettered by bytes and avro, the halt of string).
//
// Under avro, keys that are not framed Avro (11, 12, 13, 15) are key_decode_errors. Every
// row is read back by delta-rs and by Spark and compared exactly (_kafka_topic,
// _kafka_partition 3, _kafka_offset, _kafka_timestamp in a non-UTC zone); the dead letters
// keep the original key and headers byte for byte, in order, repeats included, before
// ingestd's own headers.
func TestKafkaColumnsC36(t *testing.T) {
	// The daemon and the readers run in a zone that is not UTC: _kafka_timestamp must not move.
	t.Setenv("TZ", "Asia/Kolkata")
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	topic := createTopic(t, s, "c36-orders", 4)
	dlqs := map[string]string{}
	for _, f := range []string{"bytes", "string", "avro"} {
		dlqs[f] = topic + "." + f + ".dlq"
		createTopicNamed(t, s, dlqs[f], 1)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	register := func(subject, text string) (int, avro.Schema) {
		ss, err := reg.CreateSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeAvro})
		if err != nil {
			t.Fatalf("register %s: %v", subject, err)
		}
		sch, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		return ss.ID, sch
	}
	valueID, valueSchema := register(topic+"-value",
		`{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"},{"name":"customer","type":"string"}]}`)
	keyID, _ := register(topic+"-key", `{"type":"record","name":"OrderKey","fields":[{"name":"order_id","type":"long"}]}`)
	clashID, clashSchema := register(topic+"-value-clash",
		`{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"},{"name":"customer","type":"string"},{"name":"_kafka_offset","type":"long"}]}`)
	frame := func(id int, body []byte) []byte {
		b := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], uint32(id))
		return append(b, body...)
	}
	value := func(off int64) []byte {
		body, err := avro.Marshal(valueSchema, map[string]any{"order_id": off, "customer": fmt.Sprintf("c%d", off)})
		if err != nil {
			t.Fatal(err)
		}
		return frame(valueID, body)
	}
	avroKey := frame(keyID, []byte{0x54}) // order_id 42: zig-zag varint 0x54, framed with this registry's id
	h := func(k string, v []byte) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: v} }
	aeg, _ := hex.DecodeString("A10C4E6F74696669636174696F6E")
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for off := int64(0); off < 10; off++ {
		recs = append(recs, &kgo.Record{Value: value(off)})
	}
	recs = append(recs,
		&kgo.Record{Key: nil, Value: value(10)},
		&kgo.Record{Key: []byte{}, Value: value(11), Headers: []kgo.RecordHeader{h("trace-id", []byte("abc"))}},
		&kgo.Record{Key: []byte("k1"), Value: value(12), Headers: []kgo.RecordHeader{h("x-tag", []byte("tag1")), h("x-tag", []byte("tag2")), h("other", nil)}},
		&kgo.Record{Key: []byte{0xFF, 0xFE, 0x00}, Value: value(13), Headers: []kgo.RecordHeader{h("aeg-event-type", aeg), h("bin", []byte{0x00, 0xFF})}},
		&kgo.Record{Key: avroKey, Value: value(14)},
		&kgo.Record{Key: []byte("{}"), Value: value(15)})
	clashBody, err := avro.Marshal(clashSchema, map[string]any{"order_id": int64(16), "customer": "c16", "_kafka_offset": int64(999)})
	if err != nil {
		t.Fatal(err)
	}
	recs = append(recs, &kgo.Record{Key: []byte("k16"), Value: frame(clashID, clashBody), Headers: []kgo.RecordHeader{h("x", []byte("1"))}})
	for i, r := range recs {
		r.Topic, r.Partition = topic, 3
		r.Timestamp = base.Add(time.Duration(i)*time.Second + 123*time.Millisecond)
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(100))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d landed at offset %d: the topic must be fresh", i, r.Offset)
		}
	}

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "pipelines")
	mustMkdir(t, cfgDir)
	tables := map[string]string{}
	policies := map[string]string{"bytes": "{policy: dead_letter, on_incompatible: halt}", "string": "{policy: halt, on_incompatible: halt}",
		"avro": "{policy: evolve, on_incompatible: dead_letter}"}
	for f, policy := range policies {
		tables[f] = filepath.Join(dir, "orders_"+f)
		writePipeline(t, cfgDir, "c36-"+f, fmt.Sprintf(`name: c36-%s
kafka: {brokers: [%q], topics: [%s], group: c36-%s-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table:
  uri: "file://%s"
  create: true
  kafka_columns: [key, headers, topic, partition, offset, timestamp]
  key_format: %s%s
schema: %s
dead_letter: {topic: %s}
batch: {max_records: 1000, max_age: 1s}
`, f, s.brokers, topic, f, time.Now().UnixNano(), s.registry, tables[f], f, map[string]string{"avro": "\n  column_mapping: name"}[f], policy, dlqs[f]))
	}
	d := startDaemon(t, cfgDir)
	// bytes and avro handle all 17 records (16 dead-lettered); string halts at 16, after 15.
	// The string pipeline's txn can reach 15 before its halt at 16 is recorded, so the wait
	// also takes the halt's report in /readyz (its exact text is asserted below).
	waitFor(t, d, 60*time.Second, "every pipeline to handle its records", func() bool {
		if rz, _ := d.readyz(t); !anyHalted(rz) {
			return false
		}
		for f, tbl := range tables {
			want := "16"
			if f == "string" {
				want = "15"
			}
			if v, ok := txnVersions(t, tbl)[fmt.Sprintf("c36-%s-%s-3", f, topic)]; !ok || fmt.Sprint(v) != want {
				return false
			}
		}
		return true
	})
	rz, _ := d.readyz(t)
	var haltedAt string
	for _, p := range rz.Pipelines {
		for _, hp := range p.Halted {
			haltedAt += fmt.Sprintf("%s %s/%d@%d %s %s;", p.Pipeline, hp.Topic, hp.Partition, hp.Offset, hp.Reason, hp.Field)
		}
	}
	if want := fmt.Sprintf("c36-string %s/3@16 kafka_column_collision _kafka_offset;", topic); haltedAt != want {
		t.Errorf("halted partitions: %q, want %q", haltedAt, want)
	}

	// The expected rows, per format, by offset (binary as hex, timestamps in µs).
	ts := func(off int64) int64 {
		return base.Add(time.Duration(off)*time.Second + 123*time.Millisecond).UnixMicro()
	}
	row := func(off int64, key any, headers map[string]any) string {
		b, err := json.Marshal(map[string]any{"order_id": off, "customer": fmt.Sprintf("c%d", off),
			"_kafka_key": key, "_kafka_headers": headers, "_kafka_topic": topic, "_kafka_partition": 3,
			"_kafka_offset": off, "_kafka_timestamp": ts(off)})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	empty := map[string]any{}
	hdrs := map[int64]map[string]any{
		11: {"trace-id": "616263"},
		12: {"x-tag": hex.EncodeToString([]byte("tag2")), "other": nil},
		13: {"aeg-event-type": "a10c4e6f74696669636174696f6e", "bin": "00ff"},
	}
	hdrOf := func(off int64) map[string]any {
		if m, ok := hdrs[off]; ok {
			return m
		}
		return empty
	}
	want := map[string][]string{}
	for off := int64(0); off < 10; off++ {
		for _, f := range []string{"bytes", "string", "avro"} {
			want[f] = append(want[f], row(off, nil, empty))
		}
	}
	want["bytes"] = append(want["bytes"], row(10, nil, empty), row(11, "", hdrOf(11)), row(12, "6b31", hdrOf(12)),
		row(13, "fffe00", hdrOf(13)), row(14, hex.EncodeToString(avroKey), empty), row(15, "7b7d", empty))
	want["string"] = append(want["string"], row(10, nil, empty), row(11, "", hdrOf(11)), row(12, "k1", hdrOf(12)), row(15, "{}", empty))
	stringDLQ := map[int64]string{13: "key_decode_error _kafka_key"}
	if utf8.Valid(avroKey) { // the framed key is text unless this registry's id has a byte ≥ 0x80
		want["string"] = append(want["string"], row(14, string(avroKey), empty))
	} else {
		stringDLQ[14] = "key_decode_error _kafka_key"
	}
	want["avro"] = append(want["avro"], row(10, nil, empty), row(14, map[string]any{"order_id": 42}, empty))
	for f, tbl := range tables {
		rs := readDeltaRS(t, python, tbl)
		sameJSONRows(t, f+" table, delta-rs", rs.Rows, want[f])
		var sp sparkRead
		spark.call(t, map[string]any{"op": "read", "path": tbl}, &sp)
		sameJSONRows(t, f+" table, Spark", sp.Rows, want[f])
		types := map[string]string{}
		for _, c := range sp.Schema {
			types[c.Name] = fmt.Sprintf("%s %v", c.Type, c.Nullable)
		}
		keyType := map[string]string{"bytes": "binary true", "string": "string true", "avro": "struct<order_id:bigint> true"}[f]
		wantTypes := map[string]string{"order_id": "bigint true", "customer": "string true", "_kafka_key": keyType,
			"_kafka_headers": "map<string,binary> true", "_kafka_topic": "string true", "_kafka_partition": "int true",
			"_kafka_offset": "bigint true", "_kafka_timestamp": "timestamp true"}
		if fmt.Sprint(types) != fmt.Sprint(wantTypes) {
			t.Errorf("%s table, Spark schema %v, want %v", f, types, wantTypes)
		}
	}
	if snap, err := openTable(t, tables["avro"]).Snapshot(context.Background()); err != nil || snap.ColumnMapping != "name" {
		t.Errorf("avro table: column mapping %v (%v), want name", snap.ColumnMapping, err)
	}
	// valueContainsNull is what lets `other` be NULL rather than X''.
	if tbl := openTable(t, tables["bytes"]); !strings.Contains(mustJSON(t, tbl), `"name":"_kafka_headers","type":{"type":"map","keyType":"string","valueType":"binary","valueContainsNull":true}`) {
		t.Errorf("_kafka_headers is not map<string, binary> with valueContainsNull: %s", mustJSON(t, tbl))
	}

	// Dead letters: offset → reason, and the original key and headers, in order.
	wantDLQ := map[string]map[int64]string{
		"bytes":  {16: "kafka_column_collision _kafka_offset"},
		"string": stringDLQ,
		"avro": {11: "key_decode_error _kafka_key", 12: "key_decode_error _kafka_key", 13: "key_decode_error _kafka_key",
			15: "key_decode_error _kafka_key", 16: "kafka_column_collision _kafka_offset"},
	}
	for f, dq := range dlqs {
		got := map[int64]string{}
		for _, r := range readRawTopic(t, s, dq) {
			off := mustAtoi(t, header(r, "__connect.errors.offset"))
			got[int64(off)] = header(r, "ingestd.error.reason") + " " + header(r, "ingestd.error.field")
			src := recs[off]
			if string(r.Key) != string(src.Key) || (r.Key == nil) != (src.Key == nil) || string(r.Value) != string(src.Value) {
				t.Errorf("%s DLQ offset %d: key %x value %x, want the original key %x value %x", f, off, r.Key, r.Value, src.Key, src.Value)
			}
			if len(r.Headers) < len(src.Headers) {
				t.Fatalf("%s DLQ offset %d: %d headers, want the %d original ones first", f, off, len(r.Headers), len(src.Headers))
			}
			for i, sh := range src.Headers {
				gh := r.Headers[i]
				if gh.Key != sh.Key || string(gh.Value) != string(sh.Value) || (gh.Value == nil) != (sh.Value == nil) {
					t.Errorf("%s DLQ offset %d: header %d is %q=%x (nil %v), want the original %q=%x (nil %v)", f, off, i, gh.Key, gh.Value, gh.Value == nil, sh.Key, sh.Value, sh.Value == nil)
				}
			}
			if next := r.Headers[len(src.Headers)].Key; next != "__connect.errors.topic" {
				t.Errorf("%s DLQ offset %d: header after the originals is %q, want ingestd's (__connect.errors.topic)", f, off, next)
			}
			if got[int64(off)] == "kafka_column_collision _kafka_offset" {
				msg := header(r, "__connect.errors.exception.message")
				if !strings.Contains(msg, "field _kafka_offset long collides with Kafka column _kafka_offset, which ingestd fills from the record (table.kafka_columns)") {
					t.Errorf("%s DLQ offset %d: message does not name the collision: %s", f, off, msg)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(wantDLQ[f]) {
			t.Errorf("%s DLQ: %v, want %v", f, got, wantDLQ[f])
		}
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("ingestd exit code %d", code)
	}
}

// sameJSONRows compares rows (json.Number values) with want (JSON objects), as sets.
func sameJSONRows(t *testing.T, who string, rows []map[string]any, want []string) {
	t.Helper()
	var got []string
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	sort.Strings(got)
	w := append([]string(nil), want...)
	for i := range w { // re-marshal for the same key order and number form
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(w[i]))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(m)
		w[i] = string(b)
	}
	sort.Strings(w)
	if strings.Join(got, "\n") != strings.Join(w, "\n") {
		t.Errorf("%s: rows\n%s\nwant\n%s", who, strings.Join(got, "\n"), strings.Join(w, "\n"))
	}
}

func mustJSON(t *testing.T, tbl *deltawriter.Table) string {
	t.Helper()
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := snap.Schema.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readRawTopic reads every record of a topic up to its end offsets, as franz-go gives
// them (headers in order, nil values kept).
func readRawTopic(t *testing.T, s stack, topic string) []*kgo.Record {
	t.Helper()
	cl := kafkaClient(t, s, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for int64(len(out)) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d records", topic, len(out), total)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// An existing table without the configured Kafka columns (or with one of another type) is
// refused at start-up, before any byte is written, naming each column and the fix.
func TestKafkaColumnsExistingTableRefused(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "kcol-refuse", 1)
	dir := t.TempDir()
	tbl := filepath.Join(dir, "orders")
	mustMkdir(t, tbl)
	createInteropTable(t, tbl, `{"type":"struct","fields":[{"name":"order_id","type":"long","nullable":true,"metadata":{}},
{"name":"_kafka_offset","type":"integer","nullable":true,"metadata":{}}]}`, nil)
	cfgDir := filepath.Join(dir, "pipelines")
	mustMkdir(t, cfgDir)
	y := strings.Replace(pipelineYAML("kcol-refuse", s, topic, tbl, "dead_letter", topic+".dlq", ""),
		"create: true}", "create: true, kafka_columns: [topic, offset]}", 1)
	writePipeline(t, cfgDir, "kcol-refuse", y)
	d := startDaemon(t, cfgDir)
	// Its only pipeline failed at start-up: the process exits 1, the log names the problem.
	select {
	case err := <-d.done:
		d.done <- err
		if err == nil {
			t.Fatal("ingestd exited 0 with its only pipeline refused")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ingestd did not fail within 30 s")
	}
	logs, err := os.ReadFile(d.logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	msg := string(logs)
	for _, w := range []string{"refuse table file://" + tbl,
		"column _kafka_topic is missing (add it: ALTER TABLE … ADD COLUMNS (_kafka_topic STRING), or remove topic from table.kafka_columns)",
		"column _kafka_offset is integer, but ingestd writes long there (remove offset from table.kafka_columns, or use another table)"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q\n lacks %q", msg, w)
		}
	}
	if v := openTableVersion(t, tbl); v != 0 {
		t.Errorf("table version %d after the refusal, want 0 (nothing written)", v)
	}
}

func openTableVersion(t *testing.T, path string) int64 {
	t.Helper()
	snap, err := openTable(t, path).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version
}

// TestKafkaPartitionAsPartitionColumn: a table ingestd creates partitioned by the Kafka
// column _kafka_partition (identity): one directory per source partition, partitionValues
// as the protocol serialises an integer, and both readers see every row with its
// partition and offset.
func TestKafkaPartitionAsPartitionColumn(t *testing.T) {
	s := need(t)
	python := s.python
	topic := createTopic(t, s, "kcol-part", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs := produceOrderIDs(ctx, t, s, topic, 12, 3, nil)
	dir := t.TempDir()
	tbl := filepath.Join(dir, "orders")
	cfgDir := filepath.Join(dir, "pipelines")
	mustMkdir(t, cfgDir)
	y := strings.Replace(pipelineYAML("kcol-part", s, topic, tbl, "dead_letter", topic+".dlq", ""),
		"create: true}", "create: true, partition_by: [_kafka_partition], kafka_columns: [partition, offset]}", 1)
	writePipeline(t, cfgDir, "kcol-part", y)
	createTopicNamed(t, s, topic+".dlq", 1)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 45*time.Second, "12 records handled", func() bool { return handled(t, tbl) == 12 })
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	var want []string
	for _, r := range recs {
		want = append(want, fmt.Sprintf(`{"_kafka_offset":%d,"_kafka_partition":%d,"order_id":%d}`, r.Offset, r.Partition, r.Offset*3+int64(r.Partition)))
	}
	rs := readDeltaRS(t, python, tbl)
	sameJSONRows(t, "delta-rs", rs.Rows, want)
	snap, err := openTable(t, tbl).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(snap.Metadata.PartitionColumns) != "[_kafka_partition]" {
		t.Errorf("partition columns %v", snap.Metadata.PartitionColumns)
	}
	seen := map[string]bool{} // a flush writes one file per partition value; records may span flushes
	for _, a := range snap.Files.All() {
		pv := a.PartitionValues["_kafka_partition"]
		dirOK := strings.HasPrefix(a.Path, "_kafka_partition="+deref(pv)+"/")
		seen[fmt.Sprintf("%v %v", deref(pv), dirOK)] = true
	}
	var got []string
	for k := range seen {
		got = append(got, k)
	}
	sort.Strings(got)
	if strings.Join(got, ",") != "0 true,1 true,2 true" {
		t.Errorf("files (partition value, in its directory): %v, want one per source partition", got)
	}
}

// TestKafkaAvroKeyFromSubject: key_format avro, and the batch that creates the table has
// only null keys: the _kafka_key struct is typed from the latest schema of subject
// <topic>-key on the real registry, and the rows' keys are NULL.
func TestKafkaAvroKeyFromSubject(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "kcol-subject", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	text := `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"}]}`
	ss, err := reg.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.CreateSchema(ctx, topic+"-key", sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"OrderKey","fields":[{"name":"region","type":"string"},{"name":"n","type":"int"}]}`}); err != nil {
		t.Fatal(err)
	}
	sch := avro.MustParse(text)
	var recs []*kgo.Record
	for i := int64(0); i < 2; i++ {
		body, _ := avro.Marshal(sch, map[string]any{"order_id": i})
		v := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(v[1:], uint32(ss.ID))
		recs = append(recs, &kgo.Record{Topic: topic, Value: append(v, body...)})
	}
	if err := kafkaClient(t, s).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tbl := filepath.Join(dir, "orders")
	cfgDir := filepath.Join(dir, "pipelines")
	mustMkdir(t, cfgDir)
	createTopicNamed(t, s, topic+".dlq", 1)
	writePipeline(t, cfgDir, "kcol-subject", strings.Replace(pipelineYAML("kcol-subject", s, topic, tbl, "dead_letter", topic+".dlq", ""),
		"create: true}", "create: true, kafka_columns: [key], key_format: avro}", 1))
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 45*time.Second, "2 records handled", func() bool { return handled(t, tbl) == 2 })
	d.stop(t)
	if got, want := mustJSON(t, openTable(t, tbl)), `{"name":"_kafka_key","type":{"type":"struct","fields":[{"name":"region","type":"string","nullable":true,"metadata":{}},{"name":"n","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}`; !strings.Contains(got, want) {
		t.Errorf("schema %s\nlacks %s", got, want)
	}
	sameJSONRows(t, "delta-rs", readDeltaRS(t, s.python, tbl).Rows, []string{`{"_kafka_key":null,"order_id":0}`, `{"_kafka_key":null,"order_id":1}`})
}

// TestKafkaColumnsReplay: a dead-lettered record replayed after `table alter` lands with
// the Kafka columns of its original record (source topic, partition, offset, key and
// headers), not those of its dead-letter copy.
func TestKafkaColumnsReplay(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "kcol-rp", 1) // no "-replay-" in topic or pipeline: handled() skips replay txns by that infix
	dlqTopic := topic + ".dlq"
	createTopicNamed(t, s, dlqTopic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	v1 := `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"}]}`
	v2 := `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"},{"name":"channel","type":"string"}]}`
	var recs []*kgo.Record
	for i, text := range []string{v1, v2} {
		ss, err := reg.CreateSchema(ctx, fmt.Sprintf("%s-v%d", topic, i+1), sr.Schema{Schema: text, Type: sr.TypeAvro})
		if err != nil {
			t.Fatal(err)
		}
		body, err := avro.Marshal(avro.MustParse(text), map[string]any{"order_id": int64(i), "channel": "web"})
		if err != nil {
			t.Fatal(err)
		}
		v := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(v[1:], uint32(ss.ID))
		recs = append(recs, &kgo.Record{Topic: topic, Value: append(v, body...)})
	}
	recs[1].Key = []byte("k1")
	recs[1].Headers = []kgo.RecordHeader{{Key: "h1", Value: []byte("a")}, {Key: "h1", Value: []byte("b")}, {Key: "n"}}
	if err := kafkaClient(t, s).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tbl := filepath.Join(dir, "orders")
	cfgDir := filepath.Join(dir, "pipelines")
	mustMkdir(t, cfgDir)
	cfg := filepath.Join(cfgDir, "kcol-rp.yaml")
	writePipeline(t, cfgDir, "kcol-rp", strings.Replace(pipelineYAML("kcol-rp", s, topic, tbl, "dead_letter", dlqTopic, ""),
		"create: true}", "create: true, kafka_columns: [key, headers, topic, partition, offset]}", 1))
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 45*time.Second, "2 records handled", func() bool { return handled(t, tbl) == 2 })
	d.stop(t)
	if out, err := runCLI(t, "table", "alter", "--config", cfg, "--add-column", "channel STRING"); err != nil {
		t.Fatalf("table alter: %v\n%s", err, out)
	}
	replay(t, cfg)
	sameJSONRows(t, "delta-rs", readDeltaRS(t, s.python, tbl).Rows, []string{
		fmt.Sprintf(`{"_kafka_headers":{},"_kafka_key":null,"_kafka_offset":0,"_kafka_partition":0,"_kafka_topic":%q,"channel":null,"order_id":0}`, topic),
		fmt.Sprintf(`{"_kafka_headers":{"h1":"62","n":null},"_kafka_key":"6b31","_kafka_offset":1,"_kafka_partition":0,"_kafka_topic":%q,"channel":"web","order_id":1}`, topic),
	})
}

// TestKafkaTimestampGeneratedPartition: a Kafka column as the source of a generated
// partition column (e.g. DATE(_kafka_timestamp)). The records' timestamps
// straddle a UTC midnight (the daemon's TZ is not UTC): event_date is the UTC date of
// _kafka_timestamp, the table is partitioned by it, one directory per date.
func TestKafkaTimestampGeneratedPartition(t *testing.T) {
	s := need(t)
	python := s.python
	topic := createTopic(t, s, "kcol-tsgen", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC) // 4 records on 11-30, 4 on 12-01 (UTC)
	recs := produceOrderIDs(ctx, t, s, topic, 8, 2, func(i int64) time.Time { return base.Add(time.Duration(i) * 30 * time.Minute) })
	dir := t.TempDir()
	tbl := filepath.Join(dir, "orders")
	cfgDir := filepath.Join(dir, "pipelines")
	mustMkdir(t, cfgDir)
	y := strings.Replace(pipelineYAML("kcol-tsgen", s, topic, tbl, "dead_letter", topic+".dlq", ""),
		"create: true}", `create: true, partition_by: [event_date], kafka_columns: [offset, timestamp], generated_columns: {event_date: "DATE(_kafka_timestamp)"}}`, 1)
	writePipeline(t, cfgDir, "kcol-tsgen", y)
	createTopicNamed(t, s, topic+".dlq", 1)
	t.Setenv("TZ", "America/Los_Angeles") // the daemon's zone: event_date stays the UTC date
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 45*time.Second, "8 records handled", func() bool { return handled(t, tbl) == 8 })
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	var want []string
	for _, r := range recs {
		day := r.Timestamp.UTC().Format(time.DateOnly) // a partition column: delta-rs reads it back as the date's text
		want = append(want, fmt.Sprintf(`{"_kafka_offset":%d,"_kafka_timestamp":%d,"event_date":%q,"order_id":%d}`,
			r.Offset, r.Timestamp.UnixMicro(), day, r.Offset*2+int64(r.Partition)))
	}
	sameJSONRows(t, "delta-rs", readDeltaRS(t, python, tbl).Rows, want)
	snap, err := openTable(t, tbl).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Schema.FieldByKey("event_date"); got == nil || got.Metadata["delta.generationExpression"] != "DATE(_kafka_timestamp)" {
		t.Errorf("event_date field %+v, want a generated column", got)
	}
	dates := map[string]bool{}
	for _, a := range snap.Files.All() {
		pv := deref(a.PartitionValues["event_date"])
		if !strings.HasPrefix(a.Path, "event_date="+pv+"/") {
			t.Errorf("file %s not in its partition directory (pv %q)", a.Path, pv)
		}
		dates[pv] = true
	}
	if len(dates) != 2 || !dates["2026-11-30"] || !dates["2026-12-01"] {
		t.Errorf("partition values %v, want 2026-11-30 and 2026-12-01", dates)
	}
}

// produceOrderIDs registers Order{order_id: long} under <topic>-value on the real registry
// and produces n Confluent-framed records to topic, record i (order_id i) to partition
// i % parts, stamped ts(i) when ts is set; it returns them with their offsets.
func produceOrderIDs(ctx context.Context, t *testing.T, s stack, topic string, n int64, parts int32, ts func(int64) time.Time) []*kgo.Record {
	t.Helper()
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	text := `{"type":"record","name":"Order","fields":[{"name":"order_id","type":"long"}]}`
	ss, err := reg.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	sch := avro.MustParse(text)
	var recs []*kgo.Record
	for i := int64(0); i < n; i++ {
		body, err := avro.Marshal(sch, map[string]any{"order_id": i})
		if err != nil {
			t.Fatal(err)
		}
		v := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(v[1:], uint32(ss.ID))
		r := &kgo.Record{Topic: topic, Partition: int32(i % int64(parts)), Value: append(v, body...)}
		if ts != nil {
			r.Timestamp = ts(i)
		}
		recs = append(recs, r)
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// anyHalted reports whether a pipeline of rz reports a halted partition.
func anyHalted(rz readyz) bool {
	for _, p := range rz.Pipelines {
		if len(p.Halted) > 0 {
			return true
		}
	}
	return false
}
