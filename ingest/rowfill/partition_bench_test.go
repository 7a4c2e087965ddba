package rowfill

import (
	"context"
	"fmt"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
)

const benchPartAvro = `{"type":"record","name":"Event","fields":[
 {"name":"id","type":"long"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"customer","type":"string"},
 {"name":"amount","type":"double"},
 {"name":"status","type":"string"},
 {"name":"event_hour","type":"string"}]}`

// BenchmarkPartitionedFlush times the flush's write path for one batch of 50,000 records
// (decode → Stage: column fills and partitioner → Parquet files on the local store),
// unpartitioned (no Stage: the rows stay in the columns) and into 24 hourly partitions
// (event_hour, records in time order spread over a day), in the same run. It reports
// rows/s and the data files per flush.
func BenchmarkPartitionedFlush(b *testing.B) {
	const rows = 50_000
	ws, err := decode.ParseWriterSchema(1, benchPartAvro)
	if err != nil {
		b.Fatal(err)
	}
	sch := avro.MustParse(benchPartAvro)
	payloads := make([][]byte, rows)
	for i := range payloads {
		hour := i * 24 / rows
		v := map[string]any{"id": int64(i), "ts": int64(1764547200000000 + int64(i)*1_728_000_000/rows*1000), "customer": fmt.Sprintf("c-%d", i%997),
			"amount": float64(i) / 7, "status": "PAID", "event_hour": fmt.Sprintf("2026-12-01-%02d", hour)}
		if payloads[i], err = avro.Marshal(sch, v); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		by   []string
	}{{"unpartitioned", nil}, {"hourly24", []string{"event_hour"}}} {
		b.Run(tc.name, func(b *testing.B) {
			schema := ws.Delta.Clone()
			pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
			if err != nil {
				b.Fatal(err)
			}
			dec, err := decode.Compile(ws, schema, deltalog.ColumnMappingNone, pq)
			if err != nil {
				b.Fatal(err)
			}
			st, err := storage.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			fo := deltawriter.FileOptions{Schema: schema, ColumnMapping: deltalog.ColumnMappingNone, PartitionColumns: tc.by}
			tbl := Table{Schema: schema, ColumnMapping: deltalog.ColumnMappingNone, Parquet: pq, PartitionColumns: tc.by}
			cfg := &config.Config{}
			files := 0
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				var arena decode.Arena
				cols := newCols(pq)
				stage, err := New(cfg, tbl, Options{MaxOpenPartitions: 256, Log: discard()})
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range payloads {
					if stage == nil {
						if err := dec.DecodeColumns(&arena, p, cols); err != nil {
							b.Fatal(err)
						}
						continue
					}
					stage.Begin(cols, ws)
					err := dec.DecodeColumns(&arena, p, cols)
					stage.Decoded()
					if err != nil {
						b.Fatal(err)
					}
					if err := stage.Fill(nil); err != nil {
						b.Fatal(err)
					}
				}
				parts := stage.Partitioner()
				ctx := context.Background()
				if parts == nil {
					if _, err := deltawriter.WriteColumns(ctx, st, pq, cols, rows, fo); err != nil {
						b.Fatal(err)
					}
					files++
					continue
				}
				for _, part := range parts.Files() {
					o := fo
					o.Dir, o.PartitionValues = part.Dir, part.Values
					if _, err := deltawriter.WriteColumns(ctx, st, parts.FileSchema(), part.Cols, part.Rows, o); err != nil {
						b.Fatal(err)
					}
					files++
				}
			}
			b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(files)/float64(b.N), "files/flush")
		})
	}
}
