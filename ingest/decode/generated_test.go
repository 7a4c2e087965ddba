package decode

import (
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestGeneratedColumnsAreComputedNotMissing: a NOT NULL generated column that the writer
// lacks is not a NOT NULL violation (the flush computes it), nor is a null the writer
// supplies for it (the flush checks it); an ordinary NOT NULL column still is.
func TestGeneratedColumnsAreComputedNotMissing(t *testing.T) {
	gen := &deltalog.StructField{Name: "event_date", Type: deltalog.Date, Nullable: false,
		Metadata: map[string]any{deltalog.MetaGenerationExpression: "CAST(created_at AS DATE)"}}
	table := &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "order_id", Type: deltalog.Long, Nullable: true},
		{Name: "created_at", Type: deltalog.Timestamp, Nullable: true},
		gen,
	}}
	v1 := mustWriter(t, 1, `{"type":"record","name":"O","fields":[{"name":"order_id","type":"long"},{"name":"created_at","type":["null",{"type":"long","logicalType":"timestamp-micros"}]}]}`)
	d, _ := mustCompile(t, v1, table, "none")
	cols, err := decodeCase(t, d, mustMarshal(t, v1.Avro, map[string]any{"order_id": int64(1), "created_at": nil}), nil)
	if err != nil || len(cols) != 3 {
		t.Fatalf("v1 without the generated column: %v", err)
	}
	v2 := mustWriter(t, 2, `{"type":"record","name":"O","fields":[{"name":"order_id","type":"long"},{"name":"event_date","type":["null",{"type":"int","logicalType":"date"}]}]}`)
	d2, _ := mustCompile(t, v2, table, "none")
	if _, err := decodeCase(t, d2, mustMarshal(t, v2.Avro, map[string]any{"order_id": int64(1), "event_date": nil}), nil); err != nil {
		t.Errorf("a supplied null for a NOT NULL generated column: %v, want it decoded (the flush checks it)", err)
	}
	gen.Metadata = nil // an ordinary NOT NULL column
	pq := mustParquet(t, table, "none")
	if _, err := Compile(v1, table, "none", pq); ReasonOf(err) != ReasonNotNullViolation {
		t.Errorf("an ordinary NOT NULL column the writer lacks: %v, want not_null_violation", err)
	}
}
