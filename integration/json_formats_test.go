package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// Plain JSON, Kafka Connect JSON and JSON Schema on the real broker and registry. Plain JSON (format json) takes its
// columns from a schema file (a decimal, a timestamp, an array) and, under evolve, adds a
// top-level key the file lacks with its inferred type (a key whose type does not fit the
// new column is incompatible: dead-lettered by on_incompatible); a wrong JSON type,
// invalid JSON and a repeated key are dead letters naming the field. Kafka Connect JSON (format
// connect_json, as JsonConverter writes with schemas.enable) evolves when its embedded
// schema gains a field. JSON Schema (format json_schema, a customer.json reference in
// Apicurio, records framed by franz-go's sr.Serde) evolves with its subject's v2, and a
// record that does not match its schema is a dead letter naming the property. Spark and
// delta-rs read the tables back with exact values.
func TestJSONFormats(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	plainTopic, connTopic, jsTopic := createTopic(t, s, "json", 1), createTopic(t, s, "connect", 1), createTopic(t, s, "jsonschema", 1)
	dlq := createTopic(t, s, "json.dlq", 1)

	plain := []string{
		`{"id": 1, "amount": 12345678901.25, "at": "2024-05-01T12:00:00.123456+02:00", "tags": ["a", "b"]}`,
		`{"id": 9007199254740993, "amount": -0.01, "at": null, "tags": []}`,
		`{"id": 3, "amount": "12.5"}`,                            // a string for a decimal: decode_error at amount
		`{"id": 4, "amount": 1.0, "channel": "web", "n": 7}`,     // two new columns under evolve
		`{"id": 5, "amount": 2`,                                  // invalid JSON
		`{"id": 6, "id": 7}`,                                     // a repeated key
		`{"id": 8, "channel": "app", "n": 18446744073709551615}`, // n infers double here, long above: incompatible
	}
	connSchema := func(extra string) string {
		return `{"type":"struct","name":"shop.orders.Value","optional":false,"fields":[
 {"type":"int64","optional":false,"field":"id"},
 {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"total"},
 {"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"ts"}` + extra + `]}`
	}
	conn := []string{
		`{"schema": ` + connSchema("") + `, "payload": {"id": 1, "total": "MDk=", "ts": 1714557600123}}`,
		`{"schema": ` + connSchema(`,{"type":"string","optional":true,"field":"region"}`) + `, "payload": {"id": 2, "total": null, "ts": null, "region": "eu"}}`,
	}
	var recs []*kgo.Record
	for _, v := range plain {
		recs = append(recs, &kgo.Record{Topic: plainTopic, Value: []byte(v)})
	}
	for _, v := range conn {
		recs = append(recs, &kgo.Record{Topic: connTopic, Value: []byte(v)})
	}
	// JSON Schema through the registry: a customer.json reference, and a v2 that adds a
	// property; records framed by franz-go's sr.Serde.
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	const customer = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"cid":{"type":"integer"}},"required":["cid"]}`
	order := func(extra string) string {
		return `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"id":{"type":"integer"},` +
			`"at":{"type":"string","format":"date-time"},"customer":{"$ref":"customer.json"}` + extra + `},"required":["id"]}`
	}
	if _, err := reg.CreateSchema(ctx, jsTopic+"-customer", sr.Schema{Schema: customer, Type: sr.TypeJSON}); err != nil {
		t.Fatalf("register customer.json: %v", err)
	}
	jsRefs := []sr.SchemaReference{{Name: "customer.json", Subject: jsTopic + "-customer", Version: 1}}
	jv1, err := reg.CreateSchema(ctx, jsTopic+"-value", sr.Schema{Schema: order(""), Type: sr.TypeJSON, References: jsRefs})
	if err != nil {
		t.Fatalf("register order v1: %v", err)
	}
	// v2 under a subject of its own: Apicurio's default rule calls a property added to an
	// open object a narrowing, and the evolution is the guard's to decide here.
	jv2, err := reg.CreateSchema(ctx, jsTopic+"-value-v2", sr.Schema{Schema: order(`,"channel":{"type":["string","null"]}`), Type: sr.TypeJSON, References: jsRefs})
	if err != nil {
		t.Fatalf("register order v2: %v", err)
	}
	var serde sr.Serde
	type (
		jsV1 map[string]any
		jsV2 map[string]any
	)
	serde.Register(jv1.ID, jsV1{}, sr.EncodeFn(func(v any) ([]byte, error) { return json.Marshal(v) }))
	serde.Register(jv2.ID, jsV2{}, sr.EncodeFn(func(v any) ([]byte, error) { return json.Marshal(v) }))
	for _, v := range []any{
		jsV1{"id": 1, "at": "2024-05-01T10:00:00.5Z", "customer": map[string]any{"cid": 7}},
		jsV1{"id": "two"}, // does not match its schema: a dead letter
		jsV2{"id": 3, "channel": "web"},
	} {
		b, err := serde.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: jsTopic, Value: b})
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	if err := os.WriteFile(filepath.Join(cfgDir, "orders.avsc"), []byte(`{"type":"record","name":"O","fields":[
 {"name":"id","type":"long"},
 {"name":"amount","type":["null",{"type":"bytes","logicalType":"decimal","precision":14,"scale":2}]},
 {"name":"at","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
 {"name":"tags","type":["null",{"type":"array","items":"string"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pipeline := func(name, format, topic, extra string) {
		writePipeline(t, cfgDir, name, fmt.Sprintf(`name: %s
format: %s
%s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
table: {uri: "file://%s", create: true}
schema: {policy: evolve, on_incompatible: dead_letter}
dead_letter: {topic: %s}
batch: {max_records: 2000, max_age: 300ms}
`, name, format, extra, s.brokers, topic, name, time.Now().UnixNano(), filepath.Join(dir, name), dlq))
	}
	pipeline("plain", "json", plainTopic, "avro_schema_file: orders.avsc")
	pipeline("conn", "connect_json", connTopic, "")
	pipeline("js", "json_schema", jsTopic, fmt.Sprintf("schema_registry: {url: %q}", s.registry))
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "every record to be handled", func() bool {
		return handled(t, filepath.Join(dir, "plain")) == int64(len(plain)) && handled(t, filepath.Join(dir, "conn")) == int64(len(conn)) &&
			handled(t, filepath.Join(dir, "js")) == 3
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	var dead []string
	for _, r := range readDLQ(t, s, dlq) {
		dead = append(dead, r.headers["__connect.errors.offset"]+":"+r.headers["ingestd.error.reason"]+"@"+r.headers["ingestd.error.field"]+"#"+r.headers["ingestd.error.schema_id"])
	}
	slices.Sort(dead)
	if got, want := strings.Join(dead, " "), fmt.Sprintf("1:decode_error@id#%d 2:decode_error@amount# 4:decode_error@# 5:decode_error@id# 6:schema_mismatch@n#", jv1.ID); got != want {
		t.Errorf("dead letters %s", got)
	}

	plainWant := map[string]string{
		"1":                `{"amount":"12345678901.25","at":"2024-05-01 10:00:00.123456","channel":null,"n":null,"tags":["a","b"]}`,
		"9007199254740993": `{"amount":"-0.01","at":null,"channel":null,"n":null,"tags":[]}`,
		"4":                `{"amount":"1.00","at":null,"channel":"web","n":7,"tags":null}`,
	}
	var rows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT CAST(id AS STRING) AS id, CAST(amount AS STRING) AS amount, date_format(at, 'yyyy-MM-dd HH:mm:ss.SSSSSS') AS at, tags, channel, n FROM delta.`" + filepath.Join(dir, "plain") + "`"}, &rows)
	sameRowMap(t, "Spark plain", rowsByKey(t, rows), plainWant)
	connWant := map[string]string{
		"1": `{"region":null,"total":"123.45","ts":"2024-05-01 10:00:00.123000"}`,
		"2": `{"region":"eu","total":null,"ts":null}`,
	}
	rows = nil
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT CAST(id AS STRING) AS id, CAST(total AS STRING) AS total, date_format(ts, 'yyyy-MM-dd HH:mm:ss.SSSSSS') AS ts, region FROM delta.`" + filepath.Join(dir, "conn") + "`"}, &rows)
	sameRowMap(t, "Spark connect", rowsByKey(t, rows), connWant)
	jsWant := map[string]string{
		"1": `{"at":"2024-05-01 10:00:00.500000","channel":null,"cid":"7"}`,
		"3": `{"at":null,"channel":"web","cid":null}`,
	}
	rows = nil
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT CAST(id AS STRING) AS id, date_format(at, 'yyyy-MM-dd HH:mm:ss.SSSSSS') AS at, CAST(customer.cid AS STRING) AS cid, channel FROM delta.`" + filepath.Join(dir, "js") + "`"}, &rows)
	sameRowMap(t, "Spark json_schema", rowsByKey(t, rows), jsWant)

	// delta-rs gives timestamps as microseconds; its rows pass through float64 JSON numbers
	// in readTable, so the id above 2^53 is checked by Spark only.
	plainWant["1"] = strings.Replace(plainWant["1"], `"at":"2024-05-01 10:00:00.123456"`, `"at":1714557600123456`, 1)
	delete(plainWant, "9007199254740993")
	connWant["1"] = strings.Replace(connWant["1"], `"ts":"2024-05-01 10:00:00.123000"`, `"ts":1714557600123000`, 1)
	for name, want := range map[string]string{
		"plain": "id int64, amount decimal128(14, 2), at timestamp[us, tz=UTC], tags list<element: string>, channel string, n int64",
		"conn":  "id int64, total decimal128(10, 2), ts timestamp[us, tz=UTC], region string",
		"js":    "at timestamp[us, tz=UTC], customer struct<cid: int64>, id int64, channel string",
	} {
		got := readTable(t, s, filepath.Join(dir, name))
		if got.Unsupported != "" {
			t.Fatalf("delta-rs cannot read %s: %s", name, got.Unsupported)
		}
		if g := got.schemaText(); g != want {
			t.Errorf("delta-rs schema of %s: %s, want %s", name, g, want)
		}
		byID := rowsByKey(t, got.Rows)
		if name == "plain" {
			if len(byID) != 3 {
				t.Errorf("delta-rs plain: %d rows, want 3", len(byID))
			}
			delete(byID, "9.007199254740992e+15")
			sameRowMap(t, "delta-rs plain", byID, plainWant)
		} else if name == "conn" {
			sameRowMap(t, "delta-rs connect", byID, connWant)
		} else if len(byID) != 2 {
			t.Errorf("delta-rs json_schema: %d rows, want 2", len(byID))
		}
	}
}
