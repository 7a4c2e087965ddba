package decode

import (
	"strings"
	"syscall"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// tenFieldsProto is B1's record in Protobuf: the same fields, amount as int64 cents
// (Protobuf has no decimal), kind an enum, note optional.
const tenFieldsProto = `syntax = "proto3"; package bench; import "google/protobuf/timestamp.proto";
enum Kind { CLICK = 0; VIEW = 1; BUY = 2; }
message Event { int64 id = 1; string name = 2; double score = 3; bool active = 4; google.protobuf.Timestamp ts = 5;
  optional string note = 6; int32 count = 7; int64 amount = 8; Kind kind = 9; repeated string tags = 10; }`

// tenFieldsDoc is B1's record as one JSON object (amount a decimal number).
const tenFieldsDoc = `{"id":123456789,"name":"customer-000042 (Ann Example, ann@example.com)","score":98.25,"active":true,"ts":"2023-12-17T00:00:00.123456Z",` +
	`"note":"first purchase after the spring campaign; gift wrap requested","count":17,"amount":-1234567.89,"kind":"BUY","tags":["web","promo-spring-2024","eu-west-1","returning-customer!!!"]}`

// tenFieldsConnectSchema is B1's record as a Kafka Connect schema (JsonConverter,
// schemas.enable): amount a Decimal written as a number (decimal.format NUMERIC), ts a
// Timestamp in milliseconds, kind a string.
const tenFieldsConnectSchema = `{"type":"struct","name":"bench.Event","optional":false,"fields":[{"type":"int64","optional":false,"field":"id"},` +
	`{"type":"string","optional":false,"field":"name"},{"type":"double","optional":false,"field":"score"},{"type":"boolean","optional":false,"field":"active"},` +
	`{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","field":"ts"},{"type":"string","optional":true,"field":"note"},` +
	`{"type":"int32","optional":false,"field":"count"},{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2","connect.decimal.precision":"12"},"field":"amount"},` +
	`{"type":"string","optional":false,"field":"kind"},{"type":"array","items":{"type":"string","optional":false},"optional":false,"field":"tags"}]}`

// tenFieldsJSONSchema is B1's record as a JSON Schema (2020-12).
const tenFieldsJSONSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},` +
	`"score":{"type":"number"},"active":{"type":"boolean"},"ts":{"type":"string","format":"date-time"},"note":{"type":["string","null"]},"count":{"type":"integer"},` +
	`"amount":{"type":"number"},"kind":{"type":"string","enum":["CLICK","VIEW","BUY"]},"tags":{"type":"array","items":{"type":"string"}}},` +
	`"required":["id","name","score","active","ts","count","amount","kind","tags"]}`

// BenchmarkFormats decodes B1's 10-field record per format through the trunk's calls
// (the DocumentSource's writer schema for the unframed JSON formats, then
// RecordDecoder.DecodeColumns into dense columns, an aliasing arena), Avro first as the
// baseline of the same run (`make bench`, BENCHMARKS.md "Formats"). Besides ns/op it
// reports cpu-ns/record (the process's CPU time, GC included, per record: the machine may
// be shared) and vs-avro, the format's records per CPU-second as a fraction of Avro's.
func BenchmarkFormats(b *testing.B) {
	avroWS := mustWriter(b, 1, tenFields)
	var avroCPU float64
	b.Run("avro", func(b *testing.B) {
		avroCPU = benchRecord(b, avroWS, append([]byte{0, 0, 0, 0, 1}, tenFieldsPayload(b, avroWS)...), nil, 0)
	})
	b.Run("protobuf", func(b *testing.B) {
		ws := mustProto(b, tenFieldsProto, nil)
		body := pbBody(b, ws, `{"id":"123456789","name":"customer-000042 (Ann Example, ann@example.com)","score":98.25,"active":true,
		 "ts":"2023-12-17T00:00:00.123456Z","note":"first purchase after the spring campaign; gift wrap requested","count":17,
		 "amount":"-123456789","kind":"BUY","tags":["web","promo-spring-2024","eu-west-1","returning-customer!!!"]}`)
		value := append(append([]byte{0, 0, 0, 0, 1}, 0), body...)
		benchRecord(b, ws, value, func(p []byte) []byte { _, rest, _ := ws.Message(p); return rest }, avroCPU)
	})
	// json, connect_json: the trunk's two steps per record, the writer schema (against the
	// table's columns: B1's record as Avro defines it), then the decode.
	b.Run("json", func(b *testing.B) {
		benchDocuments(b, NewJSONSource(nil, nil), avroWS, []byte(tenFieldsDoc), avroCPU)
	})
	b.Run("connect_json", func(b *testing.B) {
		benchDocuments(b, NewConnectSource(), avroWS, []byte(`{"schema":`+tenFieldsConnectSchema+`,"payload":`+
			strings.Replace(tenFieldsDoc, `"2023-12-17T00:00:00.123456Z"`, "1702771200123", 1)+`}`), avroCPU)
	})
	// json_schema: B1's schema (types, required, a date-time, a string enum: the one pass
	// checks it all); json_schema_typed: without the enum; json_schema_checked: with a
	// minimum, which only the validator checks (docs/formats.md, "JSON Schema": which
	// records the validator reads).
	for _, c := range []struct{ name, schema string }{
		{"json_schema", tenFieldsJSONSchema},
		{"json_schema_typed", strings.Replace(tenFieldsJSONSchema, `,"enum":["CLICK","VIEW","BUY"]`, "", 1)},
		{"json_schema_checked", strings.Replace(tenFieldsJSONSchema, `"count":{"type":"integer"}`, `"count":{"type":"integer","minimum":0}`, 1)},
	} {
		b.Run(c.name, func(b *testing.B) {
			ws, err := CompileJSONSchema(1, c.schema, nil)
			if err != nil || ws.DeltaErr != nil {
				b.Fatal(err, ws.DeltaErr)
			}
			benchRecord(b, ws, append([]byte{0, 0, 0, 0, 1}, tenFieldsDoc...), nil, avroCPU)
		})
	}
}

func benchDocuments(b *testing.B, src DocumentSource, table *WriterSchema, doc []byte, avroCPU float64) {
	ws, _, err := src.Writer(table.Delta, doc)
	if err != nil || ws.DeltaErr != nil {
		b.Fatal(err, ws.DeltaErr)
	}
	benchRecord(b, ws, doc, func(p []byte) []byte {
		w, body, err := src.Writer(table.Delta, p)
		if err != nil || w != ws {
			b.Fatal(err)
		}
		return body
	}, avroCPU)
}

// benchRecord decodes value (framed when it starts with 0) b.N times, body selecting the
// record body; it returns the CPU nanoseconds per record and reports them beside
// vs-avro (avroCPU / them) when avroCPU is set.
func benchRecord(b *testing.B, ws *WriterSchema, value []byte, body func([]byte) []byte, avroCPU float64) float64 {
	pq := mustParquet(b, ws.Delta, "none")
	d, err := CompileRecord(ws, ws.Delta, "none", pq)
	if err != nil {
		b.Fatal(err)
	}
	cols := make([]column.Column, d.Columns())
	leaves := column.Leaves(pq)
	var arena Arena
	arena.AliasPayloads()
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for i := 0; b.Loop(); i++ {
		if i%b1Batch == 0 {
			for c := range cols {
				cols[c].Reset(leaves[c])
			}
			arena.Reset()
		}
		payload := value
		if value[0] == 0 {
			var err error
			if _, payload, err = ParseFrame(value); err != nil {
				b.Fatal(err)
			}
		}
		if body != nil {
			payload = body(payload)
		}
		if err := d.DecodeColumns(&arena, payload, cols); err != nil {
			b.Fatal(err)
		}
	}
	cpu := float64(processCPU(b)-cpu0) / float64(b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(cpu, "cpu-ns/record")
	if avroCPU > 0 {
		b.ReportMetric(avroCPU/cpu, "vs-avro")
	}
	return cpu
}

// processCPU is the process's user + system CPU time in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
