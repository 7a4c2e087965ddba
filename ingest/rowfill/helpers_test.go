package rowfill

import (
	"io"
	"log/slog"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
)

// The unit-test harness of the per-row stage: column buffers as a flush readies them, a
// table compiled from a writer schema, and the renderings the tests compare.

// newCols returns an empty column for every leaf of pq, each Reset for its leaf (dense
// where column.Leaf.Denseable), as the flush readies its buffers.
func newCols(pq *parquet.Schema) []column.Column {
	leaves := column.Leaves(pq)
	cols := make([]column.Column, len(leaves))
	for i := range cols {
		cols[i].Reset(leaves[i])
	}
	return cols
}

// resetCols empties every column, Reset for its leaf again (dense where it may be).
func resetCols(cols []column.Column) {
	for i := range cols {
		cols[i].Reset(cols[i].Leaf())
	}
}

// levelledOf returns every column's entries as levelled values (column.Column.At: a
// dense word with its levels and column index).
func levelledOf(cols []column.Column) [][]parquet.Value {
	out := make([][]parquet.Value, len(cols))
	for i := range cols {
		c := &cols[i]
		for j := range c.Len() {
			out[i] = append(out[i], c.At(j))
		}
	}
	return out
}

// tableSetup compiles writer schema avsc (id 1) against its own table schema, changed by
// tweak when not nil, as a flush would: the table schema, its Parquet schema, the decoder
// and a row view.
func tableSetup(t *testing.T, avsc string, tweak func(*deltalog.StructType)) (*deltalog.StructType, *parquet.Schema, *decode.Decoder, *rowView) {
	t.Helper()
	ws, err := decode.ParseWriterSchema(1, avsc)
	if err != nil {
		t.Fatal(err)
	}
	schema := ws.Delta.Clone()
	if tweak != nil {
		tweak(schema)
	}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := decode.Compile(ws, schema, deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatal(err)
	}
	row, err := newRowView(schema, deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatal(err)
	}
	return schema, pq, dec, row
}

func leafIndex(t *testing.T, pq *parquet.Schema, path ...string) int {
	t.Helper()
	l, ok := pq.Lookup(path...)
	if !ok {
		t.Fatalf("no leaf %v", path)
	}
	return l.ColumnIndex
}

func equalCols(a, b [][]parquet.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			x, y := a[i][j], b[i][j]
			if !parquet.Equal(x, y) || x.RepetitionLevel() != y.RepetitionLevel() || x.DefinitionLevel() != y.DefinitionLevel() || x.Column() != y.Column() {
				return false
			}
		}
	}
	return true
}

// discard is a logger that drops everything (the partitioner's warnings).
func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
