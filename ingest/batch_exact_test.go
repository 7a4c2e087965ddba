package ingest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
)

// The end-to-end benchmark's record (cmd/benche2e, 200 bytes as Avro) in each format:
// its Avro schema, Protobuf message and JSON Schema, and its values.
const (
	benchAvsc = `{"type":"record","name":"Event","namespace":"bench","fields":[{"name":"id","type":"long"},` +
		`{"name":"name","type":"string"},{"name":"score","type":"double"},{"name":"active","type":"boolean"},` +
		`{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},{"name":"note","type":["null","string"]},` +
		`{"name":"count","type":"int"},{"name":"amount","type":"double"},` +
		`{"name":"kind","type":{"type":"enum","name":"Kind","symbols":["CLICK","VIEW","BUY"]}},` +
		`{"name":"tags","type":{"type":"array","items":"string"}}]}`
	benchProto = `syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
enum Kind { CLICK = 0; VIEW = 1; BUY = 2; }
message Event {
  int64 id = 1; string name = 2; double score = 3; bool active = 4; google.protobuf.Timestamp ts = 5;
  optional string note = 6; int32 count = 7; double amount = 8; Kind kind = 9; repeated string tags = 10;
}`
	benchJSONSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{` +
		`"id":{"type":"integer"},"name":{"type":"string"},"score":{"type":"number"},"active":{"type":"boolean"},` +
		`"ts":{"type":"string","format":"date-time"},"note":{"type":["string","null"]},"count":{"type":"integer"},` +
		`"amount":{"type":"number"},"kind":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},` +
		`"required":["id","name","score","active","ts","count","amount","kind","tags"]}`
	benchConnectSchema = `{"type":"struct","name":"bench.Event","optional":false,"fields":[` +
		`{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":false,"field":"name"},` +
		`{"type":"double","optional":false,"field":"score"},{"type":"boolean","optional":false,"field":"active"},` +
		`{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"ts"},` +
		`{"type":"string","optional":true,"field":"note"},{"type":"int32","optional":false,"field":"count"},` +
		`{"type":"double","optional":false,"field":"amount"},{"type":"string","optional":false,"field":"kind"},` +
		`{"type":"array","items":{"type":"string","optional":false},"optional":false,"field":"tags"}]}`
	benchTS   = int64(1_796_131_462_828_123) // µs since the epoch: 2026-12-01T13:24:22.828123Z
	benchNote = "first purchase after the spring campaign; gift wra"
)

var benchTags = []string{"web", "promo-spring-2024", "eu-west-1", "returning-customer!!!"}

// benchEvent is the benchmark's record i.
type benchEvent struct {
	id           int64
	name         string
	score, amt   float64
	active       bool
	count, kind  int64
	kindName, ts string
}

func newBenchEvent(i int64) benchEvent {
	k := i % 3
	return benchEvent{id: 1_000_000_000_000 + i, name: fmt.Sprintf("customer-%012d (Ann Example, ann@example.com)", i),
		score: float64(i%10_000) / 100, amt: -1234567.89 + float64(i%100), active: i%2 == 0, count: 100 + i%7000,
		kind: k, kindName: []string{"CLICK", "VIEW", "BUY"}[k], ts: time.UnixMicro(benchTS).UTC().Format("2006-01-02T15:04:05.000000Z07:00")}
}

// json is the record as the benchmark's plain JSON: its fields in schema order; ts as
// RFC 3339 text (connect: epoch milliseconds, Connect's Timestamp).
func (e benchEvent) json(connect bool) []byte {
	b := append([]byte(`{"id":`), strconv.FormatInt(e.id, 10)...)
	b = fmt.Appendf(b, `,"name":%q,"score":`, e.name)
	b = strconv.AppendFloat(b, e.score, 'g', -1, 64)
	b = append(b, `,"active":`...)
	b = strconv.AppendBool(b, e.active)
	if connect {
		b = fmt.Appendf(b, `,"ts":%d`, benchTS/1000)
	} else {
		b = fmt.Appendf(b, `,"ts":%q`, e.ts)
	}
	b = fmt.Appendf(b, `,"note":%q,"count":%d,"amount":`, benchNote, e.count)
	b = strconv.AppendFloat(b, e.amt, 'g', -1, 64)
	b = fmt.Appendf(b, `,"kind":%q,"tags":["web","promo-spring-2024","eu-west-1","returning-customer!!!"]}`, e.kindName)
	return b
}

func (e benchEvent) avro(t *testing.T, s avro.Schema) []byte {
	b, err := avro.Marshal(s, map[string]any{"id": e.id, "name": e.name, "score": e.score, "active": e.active,
		"ts": time.UnixMicro(benchTS), "note": benchNote, "count": int(e.count), "amount": e.amt, "kind": e.kindName, "tags": benchTags})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// protobuf is the message after the frame's message indexes (fields in number order).
func (e benchEvent) protobuf() []byte {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(e.id))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, e.name)
	b = protowire.AppendTag(b, 3, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(e.score))
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, protowire.EncodeBool(e.active))
	ts := protowire.AppendTag(nil, 1, protowire.VarintType)
	ts = protowire.AppendVarint(ts, uint64(benchTS/1_000_000))
	ts = protowire.AppendTag(ts, 2, protowire.VarintType)
	ts = protowire.AppendVarint(ts, uint64(benchTS%1_000_000*1000))
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	b = protowire.AppendBytes(b, ts)
	b = protowire.AppendTag(b, 6, protowire.BytesType)
	b = protowire.AppendString(b, benchNote)
	b = protowire.AppendTag(b, 7, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(e.count))
	b = protowire.AppendTag(b, 8, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(e.amt))
	if e.kind != 0 {
		b = protowire.AppendTag(b, 9, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(e.kind))
	}
	for _, tag := range benchTags {
		b = protowire.AppendTag(b, 10, protowire.BytesType)
		b = protowire.AppendString(b, tag)
	}
	return b
}

// A batch is cut by its limits only: in every format, a pipeline with batch.max_records N
// commits k×N records in k commits of exactly N rows, each flushed by the record bound,
// when max_bytes holds N of them as decoded (the benchmark's 200-byte record, N = 5,000
// and max_bytes 12.8 MiB: the end-to-end benchmark's 50,000 and 128 MiB scaled by 1/10).
// Plain JSON's first batches used to be cut by the bytes bound at 4,928 and 4,912 rows:
// they were charged by the decoded-bytes ratio guessed for binary records (2.5; JSON
// measures 1.83), the second one too because its records were added while the first was
// decoded, before the ratio was measured.
func TestBatchesCutByTheirLimitsInEveryFormat(t *testing.T) {
	const (
		n        = 5000
		batches  = 4
		maxBytes = config.ByteSize(128 << 20 / 10)
	)
	for _, format := range []string{config.FormatAvro, config.FormatProtobuf, config.FormatJSONSchema, config.FormatJSON, config.FormatConnectJSON} {
		t.Run(format, func(t *testing.T) {
			h := newHarness(t, 4)
			cfg := h.config()
			cfg.Format = format
			cfg.Batch = config.Batch{MaxRecords: n, MaxBytes: maxBytes, MaxAge: 5 * time.Second} // the benchmark's max_age: a cut batch's rest waits for it
			if format == config.FormatConnectJSON {
				// Its records carry their schema (≈ 1 KB each): max_bytes as for records
				// of that size (the benchmark's 1 KB records get a quarter of the 200-byte
				// ones' max_records).
				cfg.Batch.MaxBytes = 4 * maxBytes
			}
			frame := func(sch sr.Schema, index ...int) func([]byte) []byte {
				id, _, err := h.reg.RegisterSchema("bench-value", sch)
				if err != nil {
					t.Fatal(err)
				}
				var hdr sr.ConfluentHeader
				return func(b []byte) []byte {
					out, err := hdr.AppendEncode(nil, id, index)
					if err != nil {
						t.Fatal(err)
					}
					return append(out, b...)
				}
			}
			var (
				value func(benchEvent) []byte
				tweak func(*Deps)
			)
			switch format {
			case config.FormatAvro:
				f, s := frame(sr.Schema{Schema: benchAvsc, Type: sr.TypeAvro}), avro.MustParse(benchAvsc)
				value = func(e benchEvent) []byte { return f(e.avro(t, s)) }
			case config.FormatProtobuf:
				f := frame(sr.Schema{Schema: benchProto, Type: sr.TypeProtobuf}, 0)
				value = func(e benchEvent) []byte { return f(e.protobuf()) }
			case config.FormatJSONSchema:
				f := frame(sr.Schema{Schema: benchJSONSchema, Type: sr.TypeJSON})
				value = func(e benchEvent) []byte { return f(e.json(false)) }
			case config.FormatJSON:
				file := filepath.Join(t.TempDir(), "bench.avsc")
				if err := os.WriteFile(file, []byte(benchAvsc), 0o644); err != nil {
					t.Fatal(err)
				}
				s, err := decode.StaticSchema(file)
				if err != nil {
					t.Fatal(err)
				}
				cfg.SchemaRegistry, cfg.AvroSchemaFile = nil, file
				value = func(e benchEvent) []byte { return e.json(false) }
				tweak = func(d *Deps) {
					d.Schemas, d.Framed, d.Documents = noSchemas{}, false, decode.NewJSONSource(s.Delta, kafkaColumns(cfg))
				}
			case config.FormatConnectJSON:
				cfg.SchemaRegistry = nil
				value = func(e benchEvent) []byte {
					return fmt.Appendf(nil, `{"schema":%s,"payload":%s}`, benchConnectSchema, e.json(true))
				}
				tweak = connectDeps
			}
			recs := make([]*kgo.Record, 0, batches*n)
			for i := range int64(batches * n) {
				recs = append(recs, &kgo.Record{Topic: h.topic, Partition: int32(i % 4), Value: value(newBenchEvent(i))})
			}
			h.produceRecords(recs...)
			m := h.startWith(format, cfg, tweak)
			h.waitHandled(batches*n, 60*time.Second, m)
			rows := commitRows(t, h.tableDir)
			if want := slices.Repeat([]int64{n}, batches); !slices.Equal(rows, want) {
				t.Fatalf("commits of %v rows, want %v (%d-byte records, decoded ratio %.3f)", rows, want, len(recs[0].Value), m.ratio())
			}
			for trig, want := range map[string]float64{"records": batches, "bytes": 0, "age": 0} {
				if got := testutil.ToFloat64(h.metrics.BatchFlushes.WithLabelValues("orders", trig)); got != want {
					t.Fatalf("%s-triggered flushes = %v, want %v", trig, got, want)
				}
			}
			t.Logf("%d-byte records, decoded ratio %.3f", len(recs[0].Value), m.ratio())
			m.stop(t)
		})
	}
}

// ratio is the member's measured decodedPerByte.
func (m *member) ratio() float64 {
	tok := m.p.acquireFlush()
	defer m.p.releaseFlush(tok)
	m.p.batchMu.Lock()
	defer m.p.batchMu.Unlock()
	return m.p.decodedPerByte
}

// commitRows is the number of rows each commit of the table at dir adds (the
// numRecords of its add actions' statistics), oldest first.
func commitRows(t *testing.T, dir string) []int64 {
	t.Helper()
	var out []int64
	for v := 0; ; v++ {
		b, err := os.ReadFile(filepath.Join(dir, "_delta_log", fmt.Sprintf("%020d.json", v)))
		if os.IsNotExist(err) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var rows int64
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var a struct {
				Add *struct {
					Stats string `json:"stats"`
				} `json:"add"`
			}
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				t.Fatalf("commit %d: %v", v, err)
			}
			if a.Add == nil {
				continue
			}
			var st struct {
				NumRecords *int64 `json:"numRecords"`
			}
			if err := json.Unmarshal([]byte(a.Add.Stats), &st); err != nil || st.NumRecords == nil {
				t.Fatalf("commit %d: add without numRecords (%v): %s", v, err, a.Add.Stats)
			}
			rows += *st.NumRecords
		}
		out = append(out, rows)
	}
}

// The records read while the first batch is decoded are charged by the guessed ratio
// (initialDecodedPerByte) too; once that flush has measured the real one, they are
// charged again by it, so the guess cuts the first batch only. Avro records of 201 bytes
// (measured ≈ 2.34 decoded bytes per raw byte, guessed 2.5) under a bytes bound between
// max_records of them at the two ratios: the first batch is cut by the bytes bound where
// the guess reaches it, every later one holds max_records (without the second charge, the
// second batch was cut where the first was).
func TestBatchesChargedAgainOnceMeasured(t *testing.T) {
	const (
		n     = 5000
		bound = 4_500_000 // the batcher's bound: half of max_bytes
	)
	h := newHarness(t, 4)
	id, _, err := h.reg.RegisterSchema("bench-value", sr.Schema{Schema: benchAvsc, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	s := avro.MustParse(benchAvsc)
	var hdr sr.ConfluentHeader
	value := func(i int64) []byte {
		b, err := hdr.AppendEncode(nil, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		return append(b, newBenchEvent(i).avro(t, s)...)
	}
	const size = 201
	guessed := size + int64(size*initialDecodedPerByte(config.FormatAvro)) + recordOverhead
	first := (bound + guessed - 1) / guessed // the Add whose charge reaches the bound
	if first >= n {
		t.Fatalf("the guessed charge (%d bytes) fits %d records under %d bytes: not a cut", guessed, n, bound)
	}
	total := first + 3*n
	recs := make([]*kgo.Record, 0, total)
	for i := range total {
		v := value(i)
		if len(v) != size {
			t.Fatalf("record %d is %d bytes, want %d", i, len(v), size)
		}
		recs = append(recs, &kgo.Record{Topic: h.topic, Partition: int32(i % 4), Value: v})
	}
	h.produceRecords(recs...)
	cfg := h.config()
	cfg.Batch = config.Batch{MaxRecords: n, MaxBytes: 2 * bound, MaxAge: 5 * time.Second}
	m := h.startWith("a", cfg, nil)
	h.waitHandled(total, 60*time.Second, m)
	measured := size + int64(size*m.ratio()) + recordOverhead
	if rows, want := commitRows(t, h.tableDir), []int64{first, n, n, n}; !slices.Equal(rows, want) {
		t.Fatalf("commits of %v rows, want %v (charged %d bytes each by the guess, %d as measured; bound %d)", rows, want, guessed, measured, bound)
	}
	if measured*n >= bound {
		t.Fatalf("measured charge %d × %d records reaches the bound %d: the test's premise fails", measured, n, bound)
	}
	for trig, want := range map[string]float64{"records": 3, "bytes": 1, "age": 0} {
		if got := testutil.ToFloat64(h.metrics.BatchFlushes.WithLabelValues("orders", trig)); got != want {
			t.Fatalf("%s-triggered flushes = %v, want %v", trig, got, want)
		}
	}
	m.stop(t)
}
