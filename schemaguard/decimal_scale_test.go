package schemaguard

import (
	"strings"
	"testing"

	dl "github.com/ingestd/ingestd/deltawriter/deltalog"
)

// A decimal column whose scale grows while its integer digits shrink (PostgreSQL's
// ALTER COLUMN amount TYPE numeric(10,4) from numeric(10,2), through Debezium) is no
// Delta type widening either way: incompatible, under evolve too, so the records halt
// (or are dead-lettered) unchanged, never rescaled into the old scale. The message names
// the column, both types, the decimal that holds both, and the command that widens the
// table to it; after that widening both writers are written as they are.
func TestDecimalScaleChangeNamesTheTypeThatHoldsBoth(t *testing.T) {
	table := st(field("id", dl.Integer, false), field("amount", dl.DecimalType{Precision: 10, Scale: 2}, true))
	writer := st(field("id", dl.Integer, false), field("amount", dl.DecimalType{Precision: 10, Scale: 4}, true))
	for _, tc := range []struct {
		name  string
		opts  Options
		state TableState
		fix   string
	}{
		{"evolve", Options{Policy: Evolve, OnIncompatible: Halt, AlterTable: "--table /lake/scaled", Allow: map[string]bool{dl.FeatureTypeWidening: true}}, TableState{},
			"To let it through: ingestd table alter --table /lake/scaled --enable-feature typeWidening --widen 'amount DECIMAL(12,4)' (holds the table's decimal(10,2) and the writer's decimal(10,4) values exactly), or fix the producer's schema at amount; then restart ingestd (a halted partition stays halted until the pipeline restarts)"},
		{"evolve, typeWidening on", Options{Policy: Evolve, OnIncompatible: Halt, AlterTable: "--table /lake/scaled"}, TableState{TypeWidening: true},
			"To let it through: ingestd table alter --table /lake/scaled --widen 'amount DECIMAL(12,4)' (holds the table's decimal(10,2) and the writer's decimal(10,4) values exactly), or fix the producer's schema at amount; then restart ingestd (a halted partition stays halted until the pipeline restarts)"},
		{"dead_letter", Options{Policy: DeadLetter, OnIncompatible: Halt, AlterTable: "--table /lake/scaled"}, TableState{},
			"To let it through: ingestd table alter --table /lake/scaled --enable-feature typeWidening --widen 'amount DECIMAL(12,4)' (holds the table's decimal(10,2) and the writer's decimal(10,4) values exactly), or fix the producer's schema at amount"},
		// A partition column's decimal cannot widen (its partition values would change form).
		{"partition column", Options{Policy: Evolve, OnIncompatible: Halt, AlterTable: "--table /lake/scaled", PartitionColumns: []string{"amount"}}, TableState{},
			"To let it through: fix the producer's schema at amount (Delta cannot store this change without rewriting the table); then restart ingestd (a halted partition stays halted until the pipeline restarts)"},
	} {
		tc.opts.Table = tc.state
		d := Decide(Diff(table, writer), tc.opts)
		wantAction := HaltIt
		if tc.opts.Policy == DeadLetter {
			wantAction = DeadLetterIt
		}
		if d.Action != wantAction || d.Field != "amount" || d.Reason != "schema_mismatch" || len(d.Changes) != 1 || d.Changes[0].Kind != TypeMismatch {
			t.Fatalf("%s: decision %+v, want %v at amount (schema_mismatch, one type mismatch)", tc.name, d, wantAction)
		}
		msg := Explain(d, table, "scaled", 3, writer, 37, tc.opts)
		if want := "  - field amount is decimal(10,4) in the writer schema but decimal(10,2) in the table, neither a widening of the other (decimal(12,4) holds both)\n"; !strings.Contains(msg, want) {
			t.Errorf("%s: message\n%s\nlacks\n%s", tc.name, msg, want)
		}
		if _, fix, _ := strings.Cut(msg, "To let it through: "); "To let it through: "+fix != tc.fix {
			t.Errorf("%s: fix\n%s\nwant\n%s", tc.name, "To let it through: "+fix, tc.fix)
		}
	}
	// The fix: the table widened to decimal(12,4) takes the old writer and the new one as
	// upcasts, under every policy.
	widened := st(field("id", dl.Integer, false), field("amount", dl.DecimalType{Precision: 12, Scale: 4}, true))
	old := st(field("id", dl.Integer, false), field("amount", dl.DecimalType{Precision: 10, Scale: 2}, true))
	for _, w := range []*dl.StructType{old, writer} {
		if d := Decide(Diff(widened, w), Options{Policy: Halt, OnIncompatible: Halt}); d.Action != Write {
			t.Errorf("writer %v into decimal(12,4): %+v, want write", w.Fields[1].Type, d)
		}
	}
	// Past precision 38 no decimal holds both: the fix is the producer's.
	big := st(field("id", dl.Integer, false), field("amount", dl.DecimalType{Precision: 38, Scale: 0}, true))
	frac := st(field("id", dl.Integer, false), field("amount", dl.DecimalType{Precision: 2, Scale: 2}, true))
	opts := Options{Policy: Halt, OnIncompatible: Halt, AlterTable: "--table /lake/scaled"}
	d := Decide(Diff(big, frac), opts)
	if d.Changes[0].Holds != "" || !strings.Contains(Explain(d, big, "scaled", 3, frac, 38, opts), "fix the producer's schema at amount (Delta cannot store this change without rewriting the table)") {
		t.Errorf("decimal(38,0) table, decimal(2,2) writer: %+v\n%s", d.Changes, Explain(d, big, "scaled", 3, frac, 38, opts))
	}
}
