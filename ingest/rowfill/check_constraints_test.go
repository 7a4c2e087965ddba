package rowfill

import (
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
)

// BenchmarkConstraintFill checks six CHECK constraints of an orders table on one decoded
// valid row: decimal comparisons, a string IN list, a backquoted column name with a
// space, a string length, a decimal product and a constraint name with dots.
func BenchmarkConstraintFill(b *testing.B) {
	dec := deltalog.DecimalType{Precision: 10, Scale: 2}
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "order_id", Type: deltalog.Long, Nullable: true}, {Name: "amount", Type: dec, Nullable: true},
		{Name: "qty", Type: deltalog.Integer, Nullable: true}, {Name: "line_total", Type: dec, Nullable: true},
		{Name: "status", Type: deltalog.String, Nullable: true}, {Name: "unit price", Type: deltalog.Double, Nullable: true},
		{Name: "note", Type: deltalog.String, Nullable: true}}}
	conf := map[string]string{
		"delta.constraints.amount_pos": "amount >= 0", "delta.constraints.status_known": "status IN ('NEW', 'PAID', 'SHIPPED')",
		"delta.constraints.price_positive": "`unit price` > 0", "delta.constraints.note_short": "length(note) <= 5",
		"delta.constraints.line_total_ok": "amount * qty = line_total", "delta.constraints.ops.amount.max": "amount < 1000000"}
	pq, _ := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	fills, err := fillsFor(&config.Config{}, schema, deltalog.ColumnMappingNone, pq, conf, Options{})
	if err != nil || len(fills) != 1 {
		b.Fatal(err, len(fills))
	}
	row, _ := newRowView(schema, deltalog.ColumnMappingNone, pq)
	vals := []parquet.Value{parquet.Int64Value(1), parquet.Int32Value(100), parquet.Int32Value(1), parquet.Int32Value(100),
		parquet.ByteArrayValue([]byte("NEW")), parquet.DoubleValue(2.5), parquet.ByteArrayValue([]byte("ok"))}
	cols := newCols(pq)
	for i, f := range schema.Fields {
		first, _ := row.leaves(f.Name)
		cols[first].Append(vals[i].Level(0, 1, first))
	}
	row.begin(cols)
	for c := range cols {
		row.mark[c] = 0
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := fills[0].fill(nil, row); err != nil {
			b.Fatal(err)
		}
	}
}
