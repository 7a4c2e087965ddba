package ingest

import (
	"fmt"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
)

// BenchmarkPlaceholderSearch times the search for Debezium's unavailable-value
// placeholder (findPlaceholders) in one flush's columns without it: 100,000 rows of
// BenchmarkFlushUpsert's record's string columns (name, note, kind: dense) and its tags
// array (4 elements, levelled). One op is one flush's search; cpu-ns/row beside
// BenchmarkFlushUpsert's CPU per change (1e9 / changes/cpu-s; run them in one
// invocation) is the search's share of a flush: docs/keyed-tables.md, Unavailable values (TOAST).
func BenchmarkPlaceholderSearch(b *testing.B) {
	const rows = 100_000
	field := func(name string, t deltalog.DataType) *deltalog.StructField {
		return &deltalog.StructField{Name: name, Type: t, Nullable: true}
	}
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{field("id", deltalog.Long), field("name", deltalog.String),
		field("note", deltalog.String), field("kind", deltalog.String),
		field("tags", &deltalog.ArrayType{ElementType: deltalog.String, ContainsNull: true})}}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		b.Fatal(err)
	}
	leaves := column.Leaves(pq)
	cols := make([]column.Column, len(leaves))
	for i := range cols {
		cols[i].Reset(leaves[i])
	}
	tags := []string{"web", "promo-spring-2024", "eu-west-1", "returning-customer!!!"}
	for r := range rows {
		cols[0].AppendDense(uint64(r))
		cols[1].AppendBytes(fmt.Appendf(nil, "user-%06d", r%100_000))
		cols[2].AppendBytes([]byte("n-note-of-this-record-padding-to-two-hundred"))
		cols[3].AppendBytes([]byte("VIEW"))
		for i, t := range tags {
			rep := 0
			if i > 0 {
				rep = 1
			}
			cols[4].Append(parquet.ByteArrayValue([]byte(t)).Level(rep, leaves[4].MaxDef, 4))
		}
	}
	p := &prepared{schema: schema, pq: pq, cols: cols, rows: rows}
	cands := placeholderColumns(p, config.DefaultUnavailableValue)
	if len(cands) != 4 {
		b.Fatalf("candidates %+v", cands)
	}
	files := flushFiles(p)
	ph := []byte(config.DefaultUnavailableValue)
	b.ResetTimer()
	cpu0 := processCPU(b)
	for range b.N {
		if hits := findPlaceholders(files, cands, ph); len(hits) != 0 {
			b.Fatal(hits)
		}
	}
	// CPU time, as BenchmarkFlushUpsert's changes/cpu-s: the machine may be shared.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N*rows), "cpu-ns/row")
}
