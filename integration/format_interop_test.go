package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// interopProduced is what produce_interop.py prints: per format, one entry per record in
// produce order, with the schema id and the hex of the bytes before the body (magic byte,
// schema id and, for Protobuf, the message-index array) as the serializer wrote them.
type interopProduced struct {
	Protobuf   []interopFrame `json:"protobuf"`
	JSONSchema []interopFrame `json:"json_schema"`
	Avro       []interopFrame `json:"avro"`
}

type interopFrame struct {
	ID     int    `json:"id"`
	Prefix string `json:"prefix"`
}

// Records framed by serializers ingestd did not write, and plain JSON messages another
// Kafka-to-Delta ingester ships as test data, each into its own table by one `ingestd run`:
//
//   - Protobuf: confluent-kafka's ProtobufSerializer (Python) writes two records of
//     interop.Order, the second message of its .proto file (index array [1], bytes 02 02),
//     and one of the nested interop.Order.Line ([1, 0], bytes 04 02 00); the file imports
//     google/protobuf/timestamp.proto. Under evolve the Line record adds its columns.
//   - JSON Schema: confluent-kafka's JSONSerializer registers its draft-07 schema itself and
//     frames two documents (date-time with an offset, date, number, array, nested object,
//     a nullable string).
//   - Avro: confluent-kafka's AvroSerializer (fastavro) registers its schema and frames two
//     records (decimal(12,3), timestamp-micros before the epoch, date, nested record, enum,
//     a nullable double, bytes).
//   - JSON: kafka-delta-ingest's web_requests-100.json (100 messages, sent as they are) into
//     its own test table (its web_requests _delta_log: nested meta struct, status integer,
//     partitioned by date), which ingestd appends to without changing its schema.
//
// The serializers' frames are checked byte for byte (magic, the registry's id, the index
// arrays); no record is a dead letter; delta-rs reads every table's schema and exact rows,
// and Spark reads all four tables in one UNION ALL query with exact values.
func TestFormatInterop(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	pbTopic, jsTopic, avTopic := createTopic(t, s, "interop.pb", 1), createTopic(t, s, "interop.js", 1), createTopic(t, s, "interop.avro", 1)
	kdiTopic := createTopic(t, s, "interop.kdi", 1)
	dlq := createTopic(t, s, "interop.dlq", 1)

	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "produce_interop.py"),
		"--brokers", s.brokers, "--registry", s.registry, "--protobuf", pbTopic, "--json-schema", jsTopic, "--avro", avTopic)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("produce_interop.py: %v\n%s", err, stderr.String())
	}
	var produced interopProduced
	if err := json.Unmarshal(out, &produced); err != nil {
		t.Fatalf("parse produce_interop.py output %q: %v", out, err)
	}
	// The frames are the serializers' own: magic 0, the id the registry gave the subject's
	// schema, and the index arrays of a message that is not the file's first.
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for name, topic := range map[string]string{"protobuf": pbTopic, "json_schema": jsTopic, "avro": avTopic} {
		ss, err := reg.SchemaByVersion(ctx, topic+"-value", -1)
		if err != nil {
			t.Fatalf("the registry's schema of %s: %v", topic, err)
		}
		ids[name] = ss.ID
	}
	hdr := func(id int) string { return fmt.Sprintf("00%08x", id) }
	checkFrames := func(name string, got []interopFrame, tails ...string) {
		var want []string
		for _, tail := range tails {
			want = append(want, fmt.Sprintf("%d:%s%s", ids[name], hdr(ids[name]), tail))
		}
		var g []string
		for _, f := range got {
			g = append(g, fmt.Sprintf("%d:%s", f.ID, f.Prefix))
		}
		if !slices.Equal(g, want) {
			t.Fatalf("%s frames %v, want %v", name, g, want)
		}
	}
	checkFrames("protobuf", produced.Protobuf, "0202", "0202", "040200")
	checkFrames("json_schema", produced.JSONSchema, "", "")
	checkFrames("avro", produced.Avro, "", "")

	// kafka-delta-ingest's messages, one value each, as its README plays them onto the topic.
	kdiFile := filepath.Join(repoRoot, "integration", "testdata", "kafka-delta-ingest", "web_requests-100.json")
	kdiLines := readLines(t, kdiFile)
	var recs []*kgo.Record
	for _, l := range kdiLines {
		recs = append(recs, &kgo.Record{Topic: kdiTopic, Value: []byte(l)})
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	kdiTable := filepath.Join(dir, "kdi")
	mustMkdir(t, filepath.Join(kdiTable, "_delta_log"))
	logFile := filepath.Join(repoRoot, "integration", "testdata", "kafka-delta-ingest", "web_requests", "_delta_log", "00000000000000000000.json")
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kdiTable, "_delta_log", "00000000000000000000.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	pipeline := func(name, format, topic, policy, extra string, create bool) {
		writePipeline(t, cfgDir, name, fmt.Sprintf(`name: %s
format: %s
%s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
table: {uri: "file://%s", create: %t}
schema: {policy: %s, on_incompatible: dead_letter}
dead_letter: {topic: %s}
batch: {max_records: 2000, max_age: 300ms}
`, name, format, extra, s.brokers, topic, name, time.Now().UnixNano(), filepath.Join(dir, name), create, policy, dlq))
	}
	registry := fmt.Sprintf("schema_registry: {url: %q}", s.registry)
	// The Line record's columns are drift for the Order table: evolve adds them. The other
	// tables take every record without a schema change, so any drift is a dead letter.
	pipeline("pb", "protobuf", pbTopic, "evolve", registry, true)
	pipeline("js", "json_schema", jsTopic, "dead_letter", registry, true)
	pipeline("avro", "avro", avTopic, "dead_letter", registry, true)
	pipeline("kdi", "json", kdiTopic, "dead_letter", "", false)
	d := startDaemon(t, cfgDir)
	counts := map[string]int64{"pb": 3, "js": 2, "avro": 2, "kdi": int64(len(kdiLines))}
	waitFor(t, d, time.Minute, "every record to be handled", func() bool {
		for name, n := range counts {
			if handled(t, filepath.Join(dir, name)) != n {
				return false
			}
		}
		return true
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	for _, r := range readDLQ(t, s, dlq) {
		t.Errorf("dead letter from %s@%s: %s at %s: %s", r.headers["__connect.errors.topic"], r.headers["__connect.errors.offset"],
			r.headers["ingestd.error.reason"], r.headers["ingestd.error.field"], r.headers["ingestd.error.message"])
	}

	// kafka-delta-ingest's table keeps its schema; meta.kafka and date are what its own
	// transforms fill, so here they are NULL (date in the null partition).
	type kdiMsg struct {
		Meta struct {
			Producer struct {
				Timestamp string `json:"timestamp"`
			} `json:"producer"`
		} `json:"meta"`
		Method    string `json:"method"`
		SessionID string `json:"session_id"`
		Status    int    `json:"status"`
		URL       string `json:"url"`
		UUID      string `json:"uuid"`
	}
	var kdiSpark, kdiRS []string
	for _, l := range kdiLines {
		var m kdiMsg
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		js := func(v string) string { b, _ := json.Marshal(v); return string(b) }
		kdiSpark = append(kdiSpark, fmt.Sprintf(`{"meta":{"producer":{"timestamp":%s},"kafka":null},"method":%s,"session_id":%s,"status":%d,"url":%s,"uuid":%s,"date":null}`,
			js(m.Meta.Producer.Timestamp), js(m.Method), js(m.SessionID), m.Status, js(m.URL), js(m.UUID)))
		kdiRS = append(kdiRS, fmt.Sprintf(`{"date":null,"meta":{"kafka":null,"producer":{"timestamp":%s}},"method":%s,"session_id":%s,"status":%d,"url":%s,"uuid":%s}`,
			js(m.Meta.Producer.Timestamp), js(m.Method), js(m.SessionID), m.Status, js(m.URL), js(m.UUID)))
	}

	// Spark: every table's rows as to_json text (nulls kept, timestamps to the microsecond
	// in UTC), in one query.
	sparkWant := map[string][]string{
		"pb": {
			`{"id":1,"at":"2024-05-01 10:00:00.123456Z","lines":[{"sku":"a","qty":2},{"sku":"b","qty":-7}],"first":{"sku":"a","qty":2},"note":"","kind":"RETAIL","delta":-3,"sku":null,"qty":null}`,
			`{"id":2,"at":null,"lines":[],"first":null,"note":null,"kind":"KIND_UNSPECIFIED","delta":0,"sku":null,"qty":null}`,
			`{"id":null,"at":null,"lines":null,"first":null,"note":null,"kind":null,"delta":null,"sku":"solo","qty":9}`,
		},
		"js": {
			`{"at":"2024-05-01 10:00:00.250000Z","day":"2024-05-01","id":10,"loc":{"lat":52.52,"lon":13.405},"note":"é","ok":true,"sensor":"s-1","tags":["a","b"],"value":21.5}`,
			`{"at":null,"day":null,"id":11,"loc":null,"note":null,"ok":null,"sensor":"s-2","tags":null,"value":null}`,
		},
		"avro": {
			`{"id":20,"amount":-123456789.125,"at":"2024-05-01 10:00:00.654321Z","day":"2024-02-29","payer":{"name":"Zoë","iban":"DE00"},"method":"SEPA","fee":0.25,"raw":"AP8="}`,
			`{"id":21,"amount":0.001,"at":"1969-12-31 23:59:59.999999Z","day":"1970-01-01","payer":{"name":"","iban":null},"method":"CASH","fee":null,"raw":""}`,
		},
		"kdi": kdiSpark,
	}
	var union []string
	for _, name := range []string{"pb", "js", "avro", "kdi"} {
		union = append(union, fmt.Sprintf("SELECT '%s' AS t, to_json(struct(*), map('timestampFormat', 'yyyy-MM-dd HH:mm:ss.SSSSSSXXX', 'ignoreNullFields', 'false')) AS j FROM delta.`%s`",
			name, filepath.Join(dir, name)))
	}
	var spRows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": strings.Join(union, " UNION ALL ")}, &spRows)
	sparkGot := map[string][]string{}
	for _, r := range spRows {
		name, _ := r["t"].(string)
		j, _ := r["j"].(string)
		sparkGot[name] = append(sparkGot[name], j)
	}
	for name, want := range sparkWant {
		sameSorted(t, "Spark "+name, sparkGot[name], want)
	}

	// delta-rs: the schema as it maps it to Arrow and the rows (timestamps as µs since the
	// epoch, decimals as exact text, binary as hex).
	rsWant := map[string]struct {
		schema string
		rows   []string
	}{
		"pb": {"id int64, at timestamp[us, tz=UTC], lines list<element: struct<sku: string, qty: int32>>, first struct<sku: string, qty: int32>, note string, kind string, delta int32, sku string, qty int32", []string{
			`{"at":1714557600123456,"delta":-3,"first":{"qty":2,"sku":"a"},"id":1,"kind":"RETAIL","lines":[{"qty":2,"sku":"a"},{"qty":-7,"sku":"b"}],"note":"","qty":null,"sku":null}`,
			`{"at":null,"delta":0,"first":null,"id":2,"kind":"KIND_UNSPECIFIED","lines":[],"note":null,"qty":null,"sku":null}`,
			`{"at":null,"delta":null,"first":null,"id":null,"kind":null,"lines":null,"note":null,"qty":9,"sku":"solo"}`,
		}},
		"js": {"at timestamp[us, tz=UTC], day date32[day], id int64, loc struct<lat: double, lon: double>, note string, ok bool, sensor string, tags list<element: string>, value double", []string{
			`{"at":1714557600250000,"day":"2024-05-01","id":10,"loc":{"lat":52.52,"lon":13.405},"note":"é","ok":true,"sensor":"s-1","tags":["a","b"],"value":21.5}`,
			`{"at":null,"day":null,"id":11,"loc":null,"note":null,"ok":null,"sensor":"s-2","tags":null,"value":null}`,
		}},
		"avro": {"id int64, amount decimal128(12, 3), at timestamp[us, tz=UTC], day date32[day], payer struct<name: string, iban: string>, method string, fee double, raw binary", []string{
			`{"amount":"-123456789.125","at":1714557600654321,"day":"2024-02-29","fee":0.25,"id":20,"method":"SEPA","payer":{"iban":"DE00","name":"Zoë"},"raw":"00ff"}`,
			`{"amount":"0.001","at":-1,"day":"1970-01-01","fee":null,"id":21,"method":"CASH","payer":{"iban":null,"name":""},"raw":""}`,
		}},
		"kdi": {"meta struct<producer: struct<timestamp: string>, kafka: struct<offset: int64, topic: string, partition: int32>>, method string, session_id string, status int32, url string, uuid string, date string", kdiRS},
	}
	for name, want := range rsWant {
		got := readTable(t, s, filepath.Join(dir, name))
		if got.Unsupported != "" {
			t.Fatalf("delta-rs cannot read %s: %s", name, got.Unsupported)
		}
		if g := got.schemaText(); g != want.schema {
			t.Errorf("delta-rs schema of %s: %s, want %s", name, g, want.schema)
		}
		var rows []string
		for _, r := range got.Rows {
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, string(b))
		}
		sameSorted(t, "delta-rs "+name, rows, want.rows)
	}
}

// readLines returns the non-empty lines of a file.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameSorted fails the test unless got and want hold the same strings, in any order.
func sameSorted(t *testing.T, who string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if slices.Equal(g, w) {
		return
	}
	t.Errorf("%s: %d rows, want %d", who, len(g), len(w))
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			t.Errorf("%s row %d:\n got %s\nwant %s", who, i, a, b)
		}
	}
}
