package decode

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
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

// tenFieldsPayload is the B1 record body: 195 bytes, 200 framed.
func tenFieldsPayload(tb testing.TB, ws *WriterSchema) []byte {
	b := mustMarshal(tb, ws.Avro, map[string]any{
		"id": int64(123456789), "name": "customer-000042 (Ann Example, ann@example.com)", "score": 98.25, "active": true,
		"ts": time.UnixMicro(1702771200123456).UTC(), "note": "first purchase after the spring campaign; gift wrap requested", "count": 17,
		"amount": rat(tb, "-1234567.89"), "kind": "BUY", "tags": []any{"web", "promo-spring-2024", "eu-west-1", "returning-customer!!!"},
	})
	if len(b)+FrameHeaderLen != 200 {
		tb.Fatalf("B1 record is %d bytes framed, want 200", len(b)+FrameHeaderLen)
	}
	return b
}

// b1Batch is the number of records per flushed batch in the B1 benchmarks.
const b1Batch = 4096

// b1Event is the B1 record as a Go struct for hamba's struct (codegen-free reflection) path.
type b1Event struct {
	ID     int64     `avro:"id"`
	Name   string    `avro:"name"`
	Score  float64   `avro:"score"`
	Active bool      `avro:"active"`
	TS     time.Time `avro:"ts"`
	Note   *string   `avro:"note"`
	Count  int32     `avro:"count"`
	Amount *big.Rat  `avro:"amount"`
	Kind   string    `avro:"kind"`
	Tags   []string  `avro:"tags"`
}

// BenchmarkB1 is the decoder benchmark of BENCHMARKS.md (B1, `make bench`): the 10-field
// record, framed, decoded per record by ingestd's compiled decoder into column values, and
// by hamba/avro into map[string]any and into a struct, in one run. Run with GOMAXPROCS=1.
func BenchmarkB1(b *testing.B) {
	ws := mustWriter(b, 1, tenFields)
	value := append([]byte{0, 0, 0, 0, 1}, tenFieldsPayload(b, ws)...)
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	}
	// ingestd: the pipeline's path, an arena aliasing the payloads (Arena.AliasPayloads:
	// no copy of the record). Column buffers and the arena are reused for every batch of
	// 4,096 records, the arena reset once the batch's values are dropped. ingestd-copy: the
	// same with a copying arena (what the pipeline did before it aliased payloads).
	b.Run("ingestd", func(b *testing.B) { benchArena(b, ws, value, true, report) })
	b.Run("ingestd-copy", func(b *testing.B) { benchArena(b, ws, value, false, report) })
	// ingestd-dense: ingestd through DecodeColumns into columns Reset from
	// column.Leaves (the typed column path): the six fixed-width columns (id, score,
	// active, ts, count, amount) are dense words, the three string and enum columns
	// (name, note, kind) the byte form; tags (a list) is levelled.
	// ingestd-dense-fixed: the same with the BYTE_ARRAY columns levelled (the path before
	// the byte form), so that the difference to ingestd-dense is the byte form alone.
	// ingestd-columns-levelled: the same call into levelled columns (column.Levelled).
	// The -copy variants use a copying arena (the record is copied at its first levelled
	// byte value, here tags' first item).
	b.Run("ingestd-dense", func(b *testing.B) { benchColumns(b, ws, value, denseAll, true, report) })
	b.Run("ingestd-dense-fixed", func(b *testing.B) { benchColumns(b, ws, value, denseFixed, true, report) })
	b.Run("ingestd-columns-levelled", func(b *testing.B) { benchColumns(b, ws, value, denseNone, true, report) })
	b.Run("ingestd-dense-copy", func(b *testing.B) { benchColumns(b, ws, value, denseAll, false, report) })
	b.Run("ingestd-columns-levelled-copy", func(b *testing.B) { benchColumns(b, ws, value, denseNone, false, report) })
	// ingestd-noarena: Decode, whose copies are never reused (one 64 KiB chunk per ~400
	// records); column buffers are reused as above.
	b.Run("ingestd-noarena", func(b *testing.B) {
		d, _ := mustCompile(b, ws, ws.Delta, "none")
		cols := make([][]parquet.Value, d.Columns())
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%b1Batch == 0 {
				for c := range cols {
					cols[c] = cols[c][:0]
				}
			}
			_, payload, err := ParseFrame(value)
			if err != nil {
				b.Fatal(err)
			}
			if cols, err = d.Decode(payload, cols); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("hamba-map", func(b *testing.B) {
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		for b.Loop() {
			_, payload, err := ParseFrame(value)
			if err != nil {
				b.Fatal(err)
			}
			var m map[string]any
			if err := avro.Unmarshal(ws.Avro, payload, &m); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("hamba-struct", func(b *testing.B) {
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		var e b1Event
		for b.Loop() {
			_, payload, err := ParseFrame(value)
			if err != nil {
				b.Fatal(err)
			}
			e = b1Event{}
			if err := avro.Unmarshal(ws.Avro, payload, &e); err != nil {
				b.Fatal(err)
			}
		}
		if e.Kind != "BUY" || len(e.Tags) != 4 || e.Amount.FloatString(2) != "-1234567.89" {
			b.Fatalf("struct decoded as %+v", e)
		}
		report(b)
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

// benchArena is BenchmarkB1's ingestd case: value decoded per record through a reused
// arena, aliasing the payload (alias) or copying it.
func benchArena(b *testing.B, ws *WriterSchema, value []byte, alias bool, report func(*testing.B)) {
	d, _ := mustCompile(b, ws, ws.Delta, "none")
	cols := make([][]parquet.Value, d.Columns())
	var arena Arena
	if alias {
		arena.AliasPayloads()
	}
	// Steady state: one batch decoded before timing starts (b.Loop resets the timer and
	// the allocation counters on its first call) sizes the column buffers and the arena.
	for range b1Batch {
		_, payload, _ := ParseFrame(value)
		var err error
		if cols, err = d.DecodeWith(&arena, payload, cols); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%b1Batch == 0 { // a flushed batch: reuse the column buffers and the arena
			for c := range cols {
				cols[c] = cols[c][:0]
			}
			arena.Reset()
		}
		_, payload, err := ParseFrame(value)
		if err != nil {
			b.Fatal(err)
		}
		if cols, err = d.DecodeWith(&arena, payload, cols); err != nil {
			b.Fatal(err)
		}
	}
	report(b)
}

// denseMode is which columns benchColumns starts dense.
type denseMode int

const (
	denseAll   denseMode = iota // every Denseable leaf (column.Column.Reset)
	denseFixed                  // the fixed-width ones; BYTE_ARRAY leaves levelled
	denseNone                   // none (column.Levelled)
)

// benchColumns is benchArena through DecodeColumns (an aliasing arena, or a copying
// one): into columns Reset from the decoder's leaves for every batch, dense as mode
// says.
func benchColumns(b *testing.B, ws *WriterSchema, value []byte, mode denseMode, alias bool, report func(*testing.B)) {
	d, _ := mustCompile(b, ws, ws.Delta, "none")
	cols := make([]column.Column, d.Columns())
	var arena Arena
	if alias {
		arena.AliasPayloads()
	}
	reset := func() {
		for c := range cols {
			if l := d.leaves[c]; mode == denseAll || (mode == denseFixed && l.Kind != parquet.ByteArray) {
				cols[c].Reset(l)
			} else {
				cols[c] = column.Levelled(cols[c].Values[:0])
			}
		}
		arena.Reset()
	}
	reset()
	for range b1Batch { // steady state, as in benchArena
		_, payload, _ := ParseFrame(value)
		if err := d.DecodeColumns(&arena, payload, cols); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%b1Batch == 0 {
			reset()
		}
		_, payload, err := ParseFrame(value)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.DecodeColumns(&arena, payload, cols); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	for c := range cols {
		if cols[c].IsDense() {
			n++
		}
	}
	if want := map[denseMode]int{denseAll: 9, denseFixed: 6, denseNone: 0}[mode]; n != want {
		b.Fatalf("%d dense columns, want %d", n, want)
	}
	report(b)
}

// BenchmarkValidText: validText beside utf8.Valid, which it hands strings of 64 bytes and
// more to, on ASCII strings of the benchmark records' lengths (a tag, a name, the 1 KB
// record's note) and on both sides of that threshold. ns/op per string.
func BenchmarkValidText(b *testing.B) {
	note := strings.Repeat("first purchase after the spring campaign; gift wrap requested. ", 15)
	var sink bool
	for _, n := range []int{12, 45, 63, 64, 873} {
		s := []byte(note[:n])
		b.Run(fmt.Sprintf("validText/%d", n), func(b *testing.B) {
			for b.Loop() {
				sink = validText(s)
			}
		})
		b.Run(fmt.Sprintf("utf8.Valid/%d", n), func(b *testing.B) {
			for b.Loop() {
				sink = utf8.Valid(s)
			}
		})
	}
	_ = sink
}
