package ingest

import (
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
)

// A CHECK constraint on a decimal column is checked per record: under dead_letter the rows
// that make it false are dead-lettered as check_violation naming the constraint and its
// expression; the others are committed.
func TestCheckConstraintDeadLetters(t *testing.T) {
	h := newHarness(t, 1)
	h.createTable(nil, map[string]string{"delta.constraints.amount.min": "amount > 1", "delta.constraints.id_known": "order_id IS NOT NULL"})
	h.produce(0, 10, 0, 1, -1) // amounts id*37/100: 0.00, 0.37, 0.74 violate amount > 1
	cfg := h.config()
	cfg.Schema.Policy = config.PolicyDeadLetter
	m := h.startWith("pipeline", cfg, nil)
	h.waitHandled(10, 20*time.Second, m)
	got := h.snapshot()
	if len(got.Files) != 1 {
		t.Fatalf("%d files, want one", len(got.Files))
	}
	for _, a := range got.Files {
		if n, _ := a.NumRecords(); n != 7 {
			t.Fatalf("%d rows, want 7", n)
		}
	}
	recs := h.readTopicAll(h.dlq)
	if len(recs) != 3 {
		t.Fatalf("%d dead letters, want 3", len(recs))
	}
	for _, r := range recs {
		reason, _ := dlq.Header(r, dlq.HeaderReason)
		name, _ := dlq.Header(r, "ingestd.error.constraint")
		src, _ := dlq.Header(r, "ingestd.error.constraint.amount.min")
		msg, _ := dlq.Header(r, dlq.HeaderConnectMessage)
		want := "decode: check_violation: the row violates CHECK constraint amount.min (amount > 1) is false (a row must make every constraint true; NULL is a violation)"
		if reason != "check_violation" || name != "amount.min" || src != "amount > 1" || msg != want {
			t.Errorf("dead letter: reason %q constraint %q expression %q message %q", reason, name, src, msg)
		}
	}
}

// BenchmarkConstraintFill checks CASES.md C41's six constraints on one decoded valid row
// (decimals, a string IN list, a double, a length, a decimal product).
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
	fills, err := fillsFor(&config.Config{}, schema, deltalog.ColumnMappingNone, pq, conf, nil)
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
