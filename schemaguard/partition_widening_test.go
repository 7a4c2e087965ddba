package schemaguard

import (
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestDecidePartitionWidening: evolve widens a partition column only where its partition
// values keep their form, the rule `table alter --widen` applies: int → long of partition
// column qty evolves; date → timestamp_ntz of partition column day is a
// partition_type_change, incompatible (dead-lettered under on_incompatible: dead_letter);
// the same date → timestamp_ntz of a column that is not a partition column evolves.
func TestDecidePartitionWidening(t *testing.T) {
	table := &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "qty", Type: deltalog.Integer, Nullable: true},
		{Name: "day", Type: deltalog.Date, Nullable: true},
		{Name: "seen", Type: deltalog.Date, Nullable: true},
	}}
	writer := func(qty, day, seen deltalog.DataType) *deltalog.StructType {
		return &deltalog.StructType{Fields: []*deltalog.StructField{
			{Name: "qty", Type: qty, Nullable: true}, {Name: "day", Type: day, Nullable: true}, {Name: "seen", Type: seen, Nullable: true}}}
	}
	opts := Options{Policy: Evolve, OnIncompatible: DeadLetter, PartitionColumns: []string{"QTY", "day"},
		Table: TableState{TypeWidening: true, Features: map[string]bool{deltalog.FeatureTypeWidening: true, deltalog.FeatureTimestampNtz: true}}}
	cases := []struct {
		name   string
		writer *deltalog.StructType
		action Action
		kind   ChangeKind
		msg    string
	}{
		{"int to long of a partition column", writer(deltalog.Long, deltalog.Date, deltalog.Date), EvolveAndWrite, Widen, "field qty widens integer → long"},
		{"date to timestamp_ntz of a partition column", writer(deltalog.Integer, deltalog.TimestampNtz, deltalog.Date), DeadLetterIt, ChangeKind("partition_type_change"),
			"partition column day widens date → timestamp_ntz, which would change the form of its partition values (only byte→short→integer→long keep it)"},
		{"date to timestamp_ntz of another column", writer(deltalog.Integer, deltalog.Date, deltalog.TimestampNtz), EvolveAndWrite, Widen, "field seen widens date → timestamp_ntz"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(Diff(table, c.writer), opts)
			if d.Action != c.action || len(d.Changes) != 1 || d.Changes[0].Kind != c.kind || d.Changes[0].String() != c.msg {
				t.Fatalf("Decide: %v %+v\nwant %v, one %s change: %s", d.Action, d.Changes, c.action, c.kind, c.msg)
			}
		})
	}
}
