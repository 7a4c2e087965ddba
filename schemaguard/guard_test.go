package schemaguard

import (
	"encoding/json"
	"strings"
	"testing"

	dl "github.com/ingestd/ingestd/deltawriter/deltalog"
)

func field(name string, t dl.DataType, nullable bool) *dl.StructField {
	return &dl.StructField{Name: name, Type: t, Nullable: nullable, Metadata: map[string]any{}}
}

func st(fs ...*dl.StructField) *dl.StructType { return &dl.StructType{Fields: fs} }

func schemaJSON(t *testing.T, s *dl.StructType) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var orders = st(field("order_id", dl.Long, true), field("amount", dl.DecimalType{Precision: 10, Scale: 2}, true), field("ts", dl.Timestamp, true))

func TestDecideNewTopLevelField(t *testing.T) {
	writer := st(field("order_id", dl.Long, false), field("amount", dl.DecimalType{Precision: 10, Scale: 2}, false),
		field("ts", dl.Timestamp, false), field("channel", dl.String, true))
	changes := Diff(orders, writer)
	if len(changes) != 1 || changes[0] != (Change{Kind: AddColumn, Path: "channel", WriterType: "string"}) {
		t.Fatalf("changes = %+v", changes)
	}
	for _, tc := range []struct {
		policy Policy
		want   Action
		reason string
	}{
		{Evolve, EvolveAndWrite, ""},
		{DeadLetter, DeadLetterIt, "schema_mismatch"},
		{Halt, HaltIt, "schema_mismatch"},
	} {
		d := Decide(changes, Options{Policy: tc.policy, OnIncompatible: Halt})
		if d.Action != tc.want || d.Reason != tc.reason || d.Field != "channel" {
			t.Errorf("%s: got %v reason %q field %q, want %v %q channel", tc.policy, d.Action, d.Reason, d.Field, tc.want, tc.reason)
		}
	}
	got, applied := Apply(orders, writer, false)
	want := `{"type":"struct","fields":[{"name":"order_id","type":"long","nullable":true,"metadata":{}},{"name":"amount","type":"decimal(10,2)","nullable":true,"metadata":{}},{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},{"name":"channel","type":"string","nullable":true,"metadata":{}}]}`
	if s := schemaJSON(t, got); s != want {
		t.Fatalf("evolved schema\n got %s\nwant %s", s, want)
	}
	if len(applied) != 1 {
		t.Fatalf("applied %v", applied)
	}
	// idempotent, and the input is untouched
	again, applied2 := Apply(got, writer, false)
	if again != got || len(applied2) != 0 {
		t.Fatalf("second Apply changed the schema: %v", applied2)
	}
	if len(orders.Fields) != 3 {
		t.Fatal("Apply modified its input")
	}
}

func TestDecisionTable(t *testing.T) {
	notNullTable := st(field("id", dl.Long, false), field("name", dl.String, true))
	nested := st(field("id", dl.Long, true), field("addr", st(field("city", dl.String, true)), true),
		field("items", &dl.ArrayType{ElementType: st(field("sku", dl.String, true)), ContainsNull: true}, true),
		field("attrs", &dl.MapType{KeyType: dl.String, ValueType: st(field("v", dl.Integer, true)), ValueContainsNull: true}, true))
	intTable := st(field("n", dl.Integer, true))
	tests := []struct {
		name    string
		table   *dl.StructType
		writer  *dl.StructType
		widen   bool
		kinds   string    // the changes found
		actions [3]Action // evolve, dead_letter, halt (on_incompatible halt)
		field   string
	}{
		{"same", orders, orders, false, "", [3]Action{Write, Write, Write}, ""},
		{"fewer nullable fields", orders, st(field("order_id", dl.Long, false)), false, "", [3]Action{Write, Write, Write}, ""},
		{"missing NOT NULL field", notNullTable, st(field("name", dl.String, true)), false, "missing_not_null:id", [3]Action{HaltIt, DeadLetterIt, HaltIt}, "id"},
		{"nested struct field", nested, st(field("addr", st(field("city", dl.String, true), field("zip", dl.String, true)), true)), false, "add_column:addr.zip", [3]Action{EvolveAndWrite, DeadLetterIt, HaltIt}, "addr.zip"},
		{"array element struct field", nested, st(field("items", &dl.ArrayType{ElementType: st(field("sku", dl.String, true), field("qty", dl.Integer, true)), ContainsNull: true}, true)), false, "add_column:items[].qty", [3]Action{EvolveAndWrite, DeadLetterIt, HaltIt}, "items[].qty"},
		{"map value struct field", nested, st(field("attrs", &dl.MapType{KeyType: dl.String, ValueType: st(field("v", dl.Integer, true), field("w", dl.Long, true)), ValueContainsNull: true}, true)), false, "add_column:attrs{}.w", [3]Action{EvolveAndWrite, DeadLetterIt, HaltIt}, "attrs{}.w"},
		{"widening off", intTable, st(field("n", dl.Long, true)), false, "needs_feature:n", [3]Action{HaltIt, DeadLetterIt, HaltIt}, "n"},
		{"widening on", intTable, st(field("n", dl.Long, true)), true, "widen:n", [3]Action{EvolveAndWrite, DeadLetterIt, HaltIt}, "n"},
		{"lossless upcast int into long", st(field("n", dl.Long, true)), st(field("n", dl.Integer, false)), false, "", [3]Action{Write, Write, Write}, ""},
		{"int to double is applied by hand, not evolved", intTable, st(field("n", dl.Double, true)), true, "type_mismatch:n", [3]Action{HaltIt, DeadLetterIt, HaltIt}, "n"},
		{"narrowing long into int", st(field("n", dl.Long, true)), st(field("n", dl.Integer, true)), true, "", [3]Action{Write, Write, Write}, ""},
		{"string to number", st(field("n", dl.String, true)), st(field("n", dl.Long, true)), true, "type_mismatch:n", [3]Action{HaltIt, DeadLetterIt, HaltIt}, "n"},
		{"scalar to struct", st(field("n", dl.String, true)), st(field("n", st(field("x", dl.String, true)), true)), false, "type_mismatch:n", [3]Action{HaltIt, DeadLetterIt, HaltIt}, "n"},
		{"nullable writer into NOT NULL", notNullTable, st(field("id", dl.Long, true)), false, "relax_nullability:id", [3]Action{EvolveAndWrite, Write, Write}, "id"},
		{"case clash", orders, st(field("Channel", dl.String, true), field("channel", dl.String, true)), false, "add_column:Channel,name_clash:channel", [3]Action{HaltIt, DeadLetterIt, HaltIt}, "channel"},
		{"case-insensitive match keeps table spelling", orders, st(field("ORDER_ID", dl.Long, true)), false, "", [3]Action{Write, Write, Write}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changes := Diff(tt.table, tt.writer)
			// kinds as Decide sees them under evolve (a widening without the feature
			// becomes needs_feature)
			dv := Decide(changes, Options{Policy: Evolve, OnIncompatible: Halt, Table: TableState{TypeWidening: tt.widen}})
			var kinds []string
			for _, c := range dv.Changes {
				kinds = append(kinds, string(c.Kind)+":"+c.Path)
			}
			if got := strings.Join(kinds, ","); got != tt.kinds {
				t.Fatalf("changes %q, want %q", got, tt.kinds)
			}
			for i, p := range []Policy{Evolve, DeadLetter, Halt} {
				d := Decide(changes, Options{Policy: p, OnIncompatible: Halt, Table: TableState{TypeWidening: tt.widen}})
				if d.Action != tt.actions[i] {
					t.Errorf("policy %s: action %v, want %v", p, d.Action, tt.actions[i])
				}
				if d.Action != Write && d.Field != tt.field {
					t.Errorf("policy %s: field %q, want %q", p, d.Field, tt.field)
				}
			}
		})
	}
	// on_incompatible dead_letter under evolve
	d := Decide(Diff(intTable, st(field("n", dl.String, true))), Options{Policy: Evolve, OnIncompatible: DeadLetter})
	if d.Action != DeadLetterIt || d.Reason != "schema_mismatch" {
		t.Fatalf("evolve with on_incompatible dead_letter: %+v", d)
	}
}

func TestApplyNestedAndRelax(t *testing.T) {
	table := st(field("id", dl.Long, false), field("items", &dl.ArrayType{ElementType: st(field("sku", dl.String, true)), ContainsNull: true}, true))
	writer := st(field("id", dl.Long, true), field("items", &dl.ArrayType{ElementType: st(field("sku", dl.String, true), field("qty", dl.Integer, false)), ContainsNull: true}, true),
		field("meta", st(field("src", dl.String, false)), false))
	got, applied := Apply(table, writer, false)
	want := `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"items","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"sku","type":"string","nullable":true,"metadata":{}},{"name":"qty","type":"integer","nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}},{"name":"meta","type":{"type":"struct","fields":[{"name":"src","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`
	if s := schemaJSON(t, got); s != want {
		t.Fatalf("got  %s\nwant %s", s, want)
	}
	if len(applied) != 3 {
		t.Fatalf("applied %v, want relax id, add items[].qty, add meta", applied)
	}
	if len(Diff(got, writer)) != 0 {
		t.Fatalf("after Apply the writer still differs: %v", Diff(got, writer))
	}
}

func TestExplain(t *testing.T) {
	writer := st(field("order_id", dl.Long, false), field("channel", dl.String, true))
	opts := Options{Policy: DeadLetter, OnIncompatible: Halt, AlterTable: "--config pipelines/silver.yaml"}
	d := Decide(Diff(orders, writer), opts)
	got := Explain(d, orders, "orders-silver", 7, writer, 3, opts)
	want := `writer schema id 3 does not fit table orders-silver at version 7 under policy dead_letter:
  - new field channel string
  table schema         | writer schema (id 3)
  order_id long        | order_id long NOT NULL
  amount decimal(10,2) | channel string
  ts timestamp         |
To let it through: ingestd table alter --config pipelines/silver.yaml --add-column 'channel STRING', or set schema.policy: evolve`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// Before the table exists, the flush that decides creates it from its first records.
	if got := Explain(d, orders, "orders-silver", -1, writer, 3, opts); !strings.HasPrefix(got, "writer schema id 3 does not fit table orders-silver as this flush creates it under policy dead_letter:\n") {
		t.Errorf("explanation without a table:\n%s", got)
	}
	halt := Options{Policy: Halt, OnIncompatible: Halt}
	got = Explain(Decide(Diff(orders, writer), halt), orders, "orders-gold", 7, writer, 3, halt)
	if want := "or set schema.policy: evolve; then restart ingestd (a halted partition stays halted until the pipeline restarts)"; !strings.HasSuffix(got, want) {
		t.Fatalf("halt explanation ends\n%s\nwant suffix\n%s", got, want)
	}
}

// Before the table exists, and when no record of the flush creates it, there is no table
// to alter: the fix names only the settings, each once (three timestamp_ntz columns need
// one feature). A flush that creates the table from other records keeps the alter
// (cmd/ingestd's TestDemo: the gold table created by v1 records, v2 halted).
func TestExplainCreatingTableNeedsFeature(t *testing.T) {
	empty := st()
	writer := st(field("id", dl.Integer, false), field("a", dl.TimestampNtz, true), field("b", dl.TimestampNtz, true), field("c", dl.TimestampNtz, true))
	opts := Options{Policy: Evolve, OnIncompatible: Halt, AlterTable: "--config p.yaml"}
	d := Decision{Action: HaltIt, Changes: []Change{
		{Kind: AddColumn, Path: "id", WriterType: "integer"},
		{Kind: NeedsFeature, Path: "a", WriterType: "timestamp_ntz", Feature: dl.FeatureTimestampNtz},
		{Kind: NeedsFeature, Path: "b", WriterType: "timestamp_ntz", Feature: dl.FeatureTimestampNtz},
		{Kind: NeedsFeature, Path: "c", WriterType: "timestamp_ntz", Feature: dl.FeatureTimestampNtz},
	}}
	got := Explain(d, empty, "cdc", -1, writer, 0, opts)
	want := "To let it through: add timestampNtz to schema.allow_table_features (an irreversible protocol upgrade); then restart ingestd (a halted partition stays halted until the pipeline restarts)"
	if _, fix, _ := strings.Cut(got, "To let it through: "); "To let it through: "+fix != want {
		t.Fatalf("got\n%s\nwant the fix\n%s", got, want)
	}
}

// Field names match as Delta matches them (deltalog.NameKey, the decoder's rule). The guard
// used to lower-case instead, which kept "ſum" (U+017F) and "SUM" apart although the
// decoder writes one into the other; and lower-casing matched "İd" (U+0130) with "id",
// which EqualFold does not.
func TestDiffMatchesNamesByNameKey(t *testing.T) {
	table := st(field("SUM", dl.Long, true), field("id", dl.Long, true))
	if changes := Diff(table, st(field("ſum", dl.Long, true))); len(changes) != 0 {
		t.Errorf("ſum vs SUM: %+v, want the same column", changes)
	}
	changes := Diff(table, st(field("İd", dl.Long, true)))
	if len(changes) != 1 || changes[0].Kind != AddColumn || changes[0].Path != "İd" {
		t.Errorf("İd vs id: %+v, want a new column", changes)
	}
	if changes := Diff(table, st(field("ſum", dl.Long, true), field("sum", dl.Long, true))); len(changes) != 1 || changes[0].Kind != NameClash {
		t.Errorf("ſum and sum in one writer schema: %+v, want a name clash", changes)
	}
	got, applied := Apply(table, st(field("ſum", dl.Long, true)), false)
	if got != table || len(applied) != 0 {
		t.Errorf("Apply added ſum beside SUM: %v", applied)
	}
}
