package ingest

import (
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// newCols returns an empty column for every leaf of pq, each Reset for its leaf (dense
// where column.Leaf.Denseable), as flusher.prepare readies them.
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
