package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// benchFlushAvro is the end-to-end benchmark's record (cmd/benche2e, recordSchema).
const benchFlushAvro = `{"type":"record","name":"Event","namespace":"bench","fields":[
 {"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"score","type":"double"},
 {"name":"active","type":"boolean"},{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"note","type":["null","string"]},{"name":"count","type":"int"},{"name":"amount","type":"double"},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["CLICK","VIEW","BUY"]}},
 {"name":"tags","type":{"type":"array","items":"string"}}]}`

// mapSchemas serves writer schemas by id from a map (no registry).
type mapSchemas map[int]*decode.WriterSchema

func (m mapSchemas) Schema(_ context.Context, id int) (*decode.WriterSchema, error) {
	if ws, ok := m[id]; ok {
		return ws, nil
	}
	return nil, &decode.Error{Reason: decode.ReasonSchemaNotFound, Err: fmt.Errorf("schema %d not found", id)}
}

// BenchmarkFlushStages times the per-record stages of a consumer flush that run before
// the Parquet encode, for one batch of 100,000 framed ~200-byte records over 4
// partitions in runs of 500 (as fetches hand them out): the schema check
// (Pipeline.resolveSchemas), collect, prepare (guard plan, column buffers), route with
// the Avro decode, and the commit bookkeeping (committedLocked). Without a table: the
// plan creates it from the writer schema. One op is one batch; it reports ns/record.
func BenchmarkFlushStages(b *testing.B) {
	const n = 100_000
	p := benchFlushPipeline(b, n, nil, nil)
	recs := benchFlushRecords(b, n)
	ctx := context.Background()
	t := tableState{version: -1, txns: map[string]int64{}}
	rows := 0
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ready, items, prep := benchPrepare(ctx, b, p, t, recs)
		out := p.fl.route(t, prep, items)
		rows += out.rows
		endFlush(p.fl, items)
		p.committedLocked(ready, nil)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/record")
	// The process's CPU time (every thread: the collector's too) is what the daemon's
	// throughput per core depends on and, unlike wall time, what the other processes of a
	// loaded machine do not add to.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(n*b.N), "cpu-ns/record")
	if rows != n*b.N {
		b.Fatalf("wrote %d rows, want %d", rows, n*b.N)
	}
}

// benchFlushRecords is BenchmarkFlushStages's batch: n framed ~200-byte records of
// benchFlushAvro (writer schema id 7) over 4 partitions in runs of 500.
func benchFlushRecords(b *testing.B, n int) []*kgo.Record {
	const run = 500
	sch := avro.MustParse(benchFlushAvro)
	recs := make([]*kgo.Record, n)
	offsets := [4]int64{}
	for i := range recs {
		v := map[string]any{"id": int64(1_000_000_000_000 + i), "name": fmt.Sprintf("user-%06d", i%100_000), "score": float64(i) / 3,
			"active": i%2 == 0, "ts": int64(1_700_000_000_000_000 + i), "note": map[string]any{"string": "n-note-of-this-record-padding-to-two-hundred"},
			"count": int32(i % 1000), "amount": float64(i%100_000) / 100, "kind": "VIEW",
			"tags": []string{"web", "promo-spring-2024", "eu-west-1", "returning-customer!!!"}}
		body, err := avro.Marshal(sch, v)
		if err != nil {
			b.Fatal(err)
		}
		part := int32(i / run % 4)
		recs[i] = &kgo.Record{Topic: "bench", Partition: part, Offset: offsets[part], Key: []byte(fmt.Sprint(i)),
			Value: append([]byte{0, 0, 0, 0, 7}, body...)}
		offsets[part]++
	}
	return recs
}

// benchFlushPipeline is the pipeline of the flush benchmarks: batches of n records of
// benchFlushAvro, to table (nil: none; the data files go to its store) with the Kafka
// columns kafka.
func benchFlushPipeline(b *testing.B, n int, table *deltawriter.Table, kafka []string) *Pipeline {
	ws, err := decode.ParseWriterSchema(7, benchFlushAvro)
	if err != nil {
		b.Fatal(err)
	}
	cfg := &config.Config{Name: "bench", AppID: "bench", Table: config.Table{URI: "file:///nonexistent", Create: true, KafkaColumns: kafka, KeyFormat: kafkacols.KeyBytes},
		Schema: config.Schema{Policy: config.PolicyEvolve, OnIncompatible: config.PolicyHalt}, DeadLetter: config.DeadLetter{Topic: "bench.dlq"},
		Batch: config.Batch{MaxRecords: n, MaxBytes: 128 << 20}}
	return NewPipeline(cfg, Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: NewMetrics(prometheus.NewRegistry()),
		Schemas: mapSchemas{7: ws}, Framed: true, Table: table})
}

// BenchmarkFlushColumns times a consumer flush of BenchmarkFlushStages's batch from the
// schema check to the written data file (route with the Avro decode into the columns, the
// fills, deltawriter.WriteColumns to a local directory; no commit), with every column
// levelled (the baseline: flusher.levelled) and with the fixed-width ones dense (the
// non-repeated strings, the enum and the string Kafka columns too, in the byte form:
// docs/architecture.md, "Memory"), without and with the Kafka columns partition, offset
// and timestamp ("kafka"), and with topic and the binary key as well ("kafka+strings").
// One op is one batch; it reports ns/record and the process's cpu-ns/record.
func BenchmarkFlushColumns(b *testing.B) {
	const n = 100_000
	recs := benchFlushRecords(b, n)
	fixed := []string{kafkacols.Partition, kafkacols.Offset, kafkacols.Timestamp}
	for ki, kafka := range [][]string{nil, fixed, append([]string{kafkacols.Topic, kafkacols.Key}, fixed...)} {
		for _, levelled := range []bool{true, false} {
			name := map[bool]string{true: "levelled", false: "dense"}[levelled]
			name += []string{"", "/kafka", "/kafka+strings"}[ki]
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				tbl := benchTable(ctx, b)
				p := benchFlushPipeline(b, n, tbl, kafka)
				p.fl.levelled = levelled
				t := tableState{version: -1, txns: map[string]int64{}}
				rows := 0
				cpu0 := processCPU(b)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					ready, items, prep := benchPrepare(ctx, b, p, t, recs)
					out := p.fl.route(t, prep, items)
					if _, err := p.fl.writeFiles(ctx, prep, out); err != nil {
						b.Fatal(err)
					}
					rows += out.rows
					p.fl.releaseCols(prep)
					endFlush(p.fl, items)
					p.committedLocked(ready, nil)
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/record")
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(n*b.N), "cpu-ns/record")
				if rows != n*b.N {
					b.Fatalf("wrote %d rows, want %d", rows, n*b.N)
				}
			})
		}
	}
}

// processCPU is the process's user + system CPU time so far, in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchTable opens a Delta table on local disk in a new temporary directory (no table
// there yet: the first flush's plan creates it).
func benchTable(ctx context.Context, b *testing.B) *deltawriter.Table {
	st, err := storage.Open("file://" + b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		b.Fatal(err)
	}
	return tbl
}

// benchPrepare runs the flush's steps before route on recs, as flusher.flush does: the
// schema check (Pipeline.resolveSchemas), collect and prepare.
func benchPrepare(ctx context.Context, b *testing.B, p *Pipeline, t tableState, recs []*kgo.Record) ([]*kgo.Record, []item, *prepared) {
	ready, _, note, err := p.resolveSchemas(ctx, recs)
	if err != nil {
		b.Fatal(err)
	}
	items, err := p.fl.collect(ctx, t, ready, note)
	if err != nil {
		b.Fatal(err)
	}
	prep, err := p.fl.prepare(t, items)
	if err != nil {
		b.Fatal(err)
	}
	return ready, items, prep
}

// endFlush does what flusher.flush does with a batch's items when it returns.
func endFlush(f *flusher, items []item) { f.release(items) }
