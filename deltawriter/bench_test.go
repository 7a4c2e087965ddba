package deltawriter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// BENCHMARKS.md "Parquet encode": a 10-column batch of 100,000 rows encoded to a
// Parquet file in memory, rows/s per core. "ingestd" is the path WriteDataFile takes
// (column values → ColumnWriters, DataPage V1, the codecs of codec.go); "parquet-go
// default" is parquet-go's struct writer with its default codecs (the path the notes
// call slow).

const benchRows = 100_000

const benchSchema = `{"type":"struct","fields":[
{"name":"id","type":"long","nullable":true,"metadata":{}},
{"name":"name","type":"string","nullable":true,"metadata":{}},
{"name":"price","type":"double","nullable":true,"metadata":{}},
{"name":"active","type":"boolean","nullable":true,"metadata":{}},
{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
{"name":"note","type":"string","nullable":true,"metadata":{}},
{"name":"qty","type":"integer","nullable":true,"metadata":{}},
{"name":"amount","type":"decimal(12,2)","nullable":true,"metadata":{}},
{"name":"status","type":"string","nullable":true,"metadata":{}},
{"name":"country","type":"string","nullable":true,"metadata":{}}]}`

type benchRow struct {
	ID      int64   `parquet:"id"`
	Name    string  `parquet:"name"`
	Price   float64 `parquet:"price"`
	Active  bool    `parquet:"active"`
	TS      int64   `parquet:"ts"`
	Note    *string `parquet:"note,optional"`
	Qty     int32   `parquet:"qty"`
	Amount  int64   `parquet:"amount"`
	Status  string  `parquet:"status"`
	Country string  `parquet:"country"`
}

var statuses = []string{"NEW", "PAID", "SHIPPED", "DELIVERED", "RETURNED"}
var countries = []string{"DE", "FR", "US", "JP", "BR", "IN", "NL"}

func benchData() ([]benchRow, []map[string]any) {
	rows := make([]benchRow, benchRows)
	maps := make([]map[string]any, benchRows)
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := range rows {
		r := benchRow{ID: int64(i), Name: fmt.Sprintf("customer-%06d", i%50_000), Price: float64(i%10_000) / 100,
			Active: i%3 == 0, TS: base + int64(i)*1_000, Qty: int32(i % 50), Amount: int64(i%1_000_000) * 7,
			Status: statuses[i%len(statuses)], Country: countries[(i/7)%len(countries)]}
		m := map[string]any{"id": r.ID, "name": r.Name, "price": r.Price, "active": r.Active, "ts": r.TS,
			"qty": r.Qty, "amount": r.Amount, "status": r.Status, "country": r.Country}
		if i%4 != 0 {
			n := fmt.Sprintf("note %d", i%97)
			r.Note = &n
			m["note"] = n
		}
		rows[i], maps[i] = r, m
	}
	return rows, maps
}

func BenchmarkParquetEncode(b *testing.B) {
	structRows, mapRows := benchData()
	schema, err := deltalog.ParseSchema(benchSchema)
	if err != nil {
		b.Fatal(err)
	}
	pq, err := ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		b.Fatal(err)
	}
	cols, err := shredRows(pq, mapRows)
	if err != nil {
		b.Fatal(err)
	}
	ingestd := func(codec compress.Codec) func(w io.Writer) error {
		return func(w io.Writer) error {
			pw := parquet.NewGenericWriter[any](w, pq, parquet.DataPageVersion(1), parquet.Compression(codec))
			for i, c := range cols {
				if _, err := pw.ColumnWriters()[i].WriteRowValues(c); err != nil {
					return err
				}
			}
			return pw.Close()
		}
	}
	defaultPath := func(codec compress.Codec) func(w io.Writer) error {
		return func(w io.Writer) error {
			pw := parquet.NewGenericWriter[benchRow](w, parquet.Compression(codec))
			if _, err := pw.Write(structRows); err != nil {
				return err
			}
			return pw.Close()
		}
	}
	for _, c := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"ingestd/snappy", ingestd(snappyCodec{})},
		{"ingestd/zstd", ingestd(zstdCodec)},
		{"parquet-go-default/snappy", defaultPath(&parquet.Snappy)},
		{"parquet-go-default/zstd", defaultPath(&parquet.Zstd)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if err := c.write(&buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(buf.Len()), "file-bytes")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BENCHMARKS.md "Commit path": 10,000 commits (one add and one txn each, as a pipeline
// flush makes) to a local table with a checkpoint every 10 commits, p50/p99/max of
// Table.Commit. Run with -benchtime 1x: one iteration is the whole 10,000-commit run.
func BenchmarkCommitPath(b *testing.B) {
	b.Run("sync-checkpoints", func(b *testing.B) { benchCommitPath(b) })
	b.Run("background-checkpoints", func(b *testing.B) { benchCommitPath(b, WithBackgroundCheckpoints()) })
}

func benchCommitPath(b *testing.B, opts ...Option) {
	const commits = 10_000
	for b.Loop() {
		ctx := context.Background()
		st, err := storage.NewLocal(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		tbl, err := Open(ctx, st, opts...)
		if err != nil {
			b.Fatal(err)
		}
		schema, _ := deltalog.ParseSchema(benchSchema)
		p, m := NewTableMetadata("bench", schema, nil, nil)
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: &p, Metadata: &m}); err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, commits)
		stats := `{"numRecords":1000,"minValues":{"id":1},"maxValues":{"id":1000},"nullCount":{"id":0}}`
		for v := int64(0); v < commits; v++ {
			a := deltalog.Add{Path: fmt.Sprintf("part-00000-%08d-c000.snappy.parquet", v), Size: 123456, ModificationTime: 1, DataChange: true, Stats: stats}
			t0 := time.Now()
			if _, err := tbl.Commit(ctx, Commit{ReadVersion: v, Adds: []deltalog.Add{a}, Txns: []deltalog.Txn{{AppID: "bench-orders-0", Version: v * 1000}}}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		tbl.WaitCheckpoints()
		if _, err := st.Stat(ctx, lastCheckpointPath); err != nil {
			b.Fatal("no checkpoint written")
		}
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(0, "ns/op")
	}
}
