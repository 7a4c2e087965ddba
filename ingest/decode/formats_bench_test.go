package decode

import (
	"testing"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// tenFieldsProto is B1's record in Protobuf: the same fields, amount as int64 cents
// (Protobuf has no decimal), kind an enum, note optional.
const tenFieldsProto = `syntax = "proto3"; package bench; import "google/protobuf/timestamp.proto";
enum Kind { CLICK = 0; VIEW = 1; BUY = 2; }
message Event { int64 id = 1; string name = 2; double score = 3; bool active = 4; google.protobuf.Timestamp ts = 5;
  optional string note = 6; int32 count = 7; int64 amount = 8; Kind kind = 9; repeated string tags = 10; }`

// BenchmarkFormats decodes B1's 10-field record per format through the trunk's call
// (RecordDecoder.DecodeColumns into dense columns, an aliasing arena), Avro first as the
// baseline of the same run (`make bench`, BENCHMARKS.md "Formats").
func BenchmarkFormats(b *testing.B) {
	avroWS := mustWriter(b, 1, tenFields)
	b.Run("avro", func(b *testing.B) {
		benchRecord(b, avroWS, append([]byte{0, 0, 0, 0, 1}, tenFieldsPayload(b, avroWS)...), nil)
	})
	b.Run("protobuf", func(b *testing.B) {
		ws := mustProto(b, tenFieldsProto, nil)
		body := pbBody(b, ws, `{"id":"123456789","name":"customer-000042 (Ann Example, ann@example.com)","score":98.25,"active":true,
		 "ts":"2023-12-17T00:00:00.123456Z","note":"first purchase after the spring campaign; gift wrap requested","count":17,
		 "amount":"-123456789","kind":"BUY","tags":["web","promo-spring-2024","eu-west-1","returning-customer!!!"]}`)
		value := append(append([]byte{0, 0, 0, 0, 1}, 0), body...)
		benchRecord(b, ws, value, func(p []byte) []byte { _, rest, _ := ws.Message(p); return rest })
	})
	// json: the trunk's two steps per record, the writer schema (JSONSource.Writer against
	// the table's columns), then the decode; the table is B1's record as Avro defines it.
	const doc = `{"id":123456789,"name":"customer-000042 (Ann Example, ann@example.com)","score":98.25,"active":true,"ts":"2023-12-17T00:00:00.123456Z",` +
		`"note":"first purchase after the spring campaign; gift wrap requested","count":17,"amount":-1234567.89,"kind":"BUY","tags":["web","promo-spring-2024","eu-west-1","returning-customer!!!"]}`
	b.Run("json", func(b *testing.B) {
		src := NewJSONSource(nil, nil)
		ws, _, err := src.Writer(avroWS.Delta, []byte(doc))
		if err != nil || ws.DeltaErr != nil {
			b.Fatal(err, ws.DeltaErr)
		}
		benchRecord(b, ws, []byte(doc), func(p []byte) []byte {
			if w, body, err := src.Writer(avroWS.Delta, p); err != nil || w != ws {
				b.Fatal(err)
			} else {
				p = body
			}
			return p
		})
	})
}

func benchRecord(b *testing.B, ws *WriterSchema, value []byte, body func([]byte) []byte) {
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
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
