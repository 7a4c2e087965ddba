package schemaguard

import (
	"testing"

	dl "github.com/ingestd/ingestd/deltawriter/deltalog"
)

// mapped is a field with column mapping metadata (id and physical name).
func mapped(name, physical string, id int, t dl.DataType) *dl.StructField {
	return &dl.StructField{Name: name, Type: t, Nullable: true, Metadata: map[string]any{
		dl.MetaColumnMappingID: float64(id), dl.MetaColumnMappingPhysicalName: physical}}
}

// TestRenamedAndDroppedColumnsAreNewFields: under column mapping the guard matches writer
// fields to the table's logical names only. After `country TO country_code` (physical name
// still "country") and a drop of tier, a writer still sending country and tier has two new
// fields — never a match through the physical name — routed by policy like any new field;
// a writer sending country_code matches the renamed column.
func TestRenamedAndDroppedColumnsAreNewFields(t *testing.T) {
	table := st(mapped("order_id", "order_id", 1, dl.Long), mapped("channel", "channel", 5, dl.String),
		mapped("status", "status", 2, dl.String), mapped("country_code", "country", 3, dl.String))
	old := st(field("order_id", dl.Long, false), field("status", dl.String, false), field("country", dl.String, false),
		field("tier", dl.String, false), field("channel", dl.String, false))
	changes := Diff(table, old)
	if len(changes) != 2 || changes[0] != (Change{Kind: AddColumn, Path: "country", WriterType: "string"}) ||
		changes[1] != (Change{Kind: AddColumn, Path: "tier", WriterType: "string"}) {
		t.Fatalf("changes %+v, want country and tier as new columns", changes)
	}
	for _, tc := range []struct {
		policy Policy
		want   Action
		reason string
	}{{Evolve, EvolveAndWrite, ""}, {DeadLetter, DeadLetterIt, "schema_mismatch"}, {Halt, HaltIt, "schema_mismatch"}} {
		d := Decide(changes, Options{Policy: tc.policy, OnIncompatible: Halt})
		if d.Action != tc.want || d.Reason != tc.reason || d.Field != "country" {
			t.Errorf("%s: %v reason %q field %q, want %v %q country", tc.policy, d.Action, d.Reason, d.Field, tc.want, tc.reason)
		}
	}
	// Evolve appends them as plain new fields: no id, no physical name copied from the
	// renamed column (deltawriter gives them fresh ones, col-<uuid>).
	got, _ := Apply(table, old, false)
	want := `{"type":"struct","fields":[` +
		`{"name":"order_id","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"order_id"}},` +
		`{"name":"channel","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":5,"delta.columnMapping.physicalName":"channel"}},` +
		`{"name":"status","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"status"}},` +
		`{"name":"country_code","type":"string","nullable":true,"metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"country"}},` +
		`{"name":"country","type":"string","nullable":true,"metadata":{}},{"name":"tier","type":"string","nullable":true,"metadata":{}}]}`
	if s := schemaJSON(t, got); s != want {
		t.Errorf("evolved\n got %s\nwant %s", s, want)
	}
	// The new name matches; the reorder changes nothing for a writer.
	renamed := st(field("order_id", dl.Long, false), field("status", dl.String, false), field("country_code", dl.String, false), field("channel", dl.String, false))
	if c := Diff(table, renamed); len(c) != 0 {
		t.Errorf("writer with the new name: changes %+v", c)
	}
}
