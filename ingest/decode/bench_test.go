package decode

import (
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
)

// tenFields is the benchmark record: long, string, double, boolean, timestamp-micros,
// nullable string, int, decimal on bytes, enum, array<string>.
const tenFields = `{"type":"record","name":"Event","namespace":"bench","fields":[
	{"name":"id","type":"long"},
	{"name":"name","type":"string"},
	{"name":"score","type":"double"},
	{"name":"active","type":"boolean"},
	{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
	{"name":"note","type":["null","string"]},
	{"name":"count","type":"int"},
	{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
	{"name":"kind","type":{"type":"enum","name":"Kind","symbols":["CLICK","VIEW","BUY"]}},
	{"name":"tags","type":{"type":"array","items":"string"}}]}`

func tenFieldsPayload(tb testing.TB, ws *WriterSchema) []byte {
	return mustMarshal(tb, ws.Avro, map[string]any{
		"id": int64(123456789), "name": "customer-000042", "score": 98.25, "active": true,
		"ts": time.UnixMicro(1702771200123456).UTC(), "note": "first purchase", "count": 17,
		"amount": rat(tb, "-1234567.89"), "kind": "BUY", "tags": []any{"web", "promo", "eu"},
	})
}

func BenchmarkDecode10Fields(b *testing.B) {
	ws := mustWriter(b, 1, tenFields)
	d, _ := mustCompile(b, ws, ws.Delta, "none")
	payload := tenFieldsPayload(b, ws)
	cols := make([][]parquet.Value, d.Columns())
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%4096 == 0 { // a flushed batch: reuse the column buffers
			for c := range cols {
				cols[c] = cols[c][:0]
			}
		}
		var err error
		if cols, err = d.Decode(payload, cols); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHambaMap(b *testing.B) {
	ws := mustWriter(b, 1, tenFields)
	payload := tenFieldsPayload(b, ws)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var m map[string]any
		if err := avro.Unmarshal(ws.Avro, payload, &m); err != nil {
			b.Fatal(err)
		}
	}
}
