package schemaguard

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	dl "github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Each test is a schema change that broke other Kafka/Avro → lakehouse pipelines, as
// reported in public (the report is named above each test), at the guard's level: the
// decision under each policy (evolve/dead_letter/halt) and, for evolve, the exact resulting
// schema. Writer schemas are given in Delta types, as decode.ToDelta maps them: Avro's
// required fields are NOT NULL. The same changes run end to end in
// integration/schema_drift_test.go; the test names keep the label (C01, C03, …) they share.

func notNull(name string, t dl.DataType) *dl.StructField { return field(name, t, false) }
func null(name string, t dl.DataType) *dl.StructField    { return field(name, t, true) }

// decideAll returns the actions for evolve, dead_letter and halt.
func decideAll(table, writer *dl.StructType, ts TableState, allow ...string) [3]Decision {
	var out [3]Decision
	a := map[string]bool{}
	for _, f := range allow {
		a[f] = true
	}
	for i, p := range []Policy{Evolve, DeadLetter, Halt} {
		out[i] = Decide(Diff(table, writer), Options{Policy: p, OnIncompatible: Halt, Table: ts, Allow: a})
	}
	return out
}

func actions(ds [3]Decision) string {
	return fmt.Sprintf("%v/%v/%v", ds[0].Action, ds[1].Action, ds[2].Action)
}

// TestCaseC01NewTopLevelColumn: a consumer kept the schema it fetched at start-up, so a
// column added to the producer's schema went missing until a restart (AbsaOSS/ABRiS#309,
// delta-io/delta-rs#2355). Table orders(order_id, status, dt); v2 adds coupon
// [null,string]. Evolve appends coupon, nullable, at the end; dead_letter names the field
// coupon (schema_mismatch); halt halts.
func TestCaseC01NewTopLevelColumn(t *testing.T) {
	table := st(null("order_id", dl.Long), null("status", dl.String), null("dt", dl.String))
	v2 := st(notNull("order_id", dl.Long), notNull("status", dl.String), notNull("dt", dl.String), null("coupon", dl.String))
	ds := decideAll(table, v2, TableState{})
	if got := actions(ds); got != "evolve/dead_letter/halt" {
		t.Fatalf("actions %s", got)
	}
	if ds[1].Field != "coupon" || ds[1].Reason != "schema_mismatch" {
		t.Errorf("silver field %q reason %q", ds[1].Field, ds[1].Reason)
	}
	got, _ := Apply(table, v2, false)
	if s := got.String(); s != "struct<order_id:long,status:string,dt:string,coupon:string>" {
		t.Errorf("evolved %s", s)
	}
	if !got.Fields[3].Nullable {
		t.Error("coupon must be nullable")
	}
}

// TestCaseC03NestedStructField: new fields inside a struct were dropped silently when only
// top-level fields were compared, and not evolved at all when the first record had a null
// parent (apache/iceberg#15395). Table orders(order_id int, customer struct<customer_id
// int>); v2's Customer gains details [null, Details{name, email}]. The decision comes from
// the schema, not the values: evolve adds customer.details struct<name, email> (all
// nullable), dead_letter and halt name customer.details, and a second batch with v2 needs
// no change.
func TestCaseC03NestedStructField(t *testing.T) {
	table := st(null("order_id", dl.Integer), null("customer", st(null("customer_id", dl.Integer))))
	v2 := st(notNull("order_id", dl.Integer), notNull("customer", st(notNull("customer_id", dl.Integer),
		null("details", st(notNull("name", dl.String), notNull("email", dl.String))))))
	ds := decideAll(table, v2, TableState{})
	if got := actions(ds); got != "evolve/dead_letter/halt" || ds[1].Field != "customer.details" {
		t.Fatalf("actions %s field %q", got, ds[1].Field)
	}
	got, _ := Apply(table, v2, false)
	want := `{"type":"struct","fields":[{"name":"order_id","type":"integer","nullable":true,"metadata":{}},{"name":"customer","type":{"type":"struct","fields":[{"name":"customer_id","type":"integer","nullable":true,"metadata":{}},{"name":"details","type":{"type":"struct","fields":[{"name":"name","type":"string","nullable":true,"metadata":{}},{"name":"email","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`
	if s := schemaJSON(t, got); s != want {
		t.Errorf("evolved\n got %s\nwant %s", s, want)
	}
	// Batch 2 with the same writer schema needs no change.
	if d := Decide(Diff(got, v2), Options{Policy: Evolve, OnIncompatible: Halt}); d.Action != Write {
		t.Errorf("second batch: %v", d.Action)
	}
}

// TestCaseC05FieldRemoved: a sink crashed with a null-pointer error when an optional field
// was dropped from the writer schema (databricks/iceberg-kafka-connect#261). Table
// users(id, email, tags); v2 drops email. A missing nullable column is no drift: write
// under every policy (the decoder writes NULL). Variant N, email NOT NULL: a missing NOT
// NULL column cannot be written, so evolve and halt halt and dead_letter dead-letters, at
// email (missing_not_null).
func TestCaseC05FieldRemoved(t *testing.T) {
	tags := &dl.ArrayType{ElementType: dl.String, ContainsNull: true}
	table := st(null("id", dl.Long), null("email", dl.String), null("tags", tags))
	v2 := st(notNull("id", dl.Long), null("tags", tags))
	if got := actions(decideAll(table, v2, TableState{})); got != "write/write/write" {
		t.Errorf("nullable column removed: %s, want write everywhere", got)
	}
	// Variant N: email NOT NULL → a missing field cannot be written.
	tableN := st(null("id", dl.Long), notNull("email", dl.String), null("tags", tags))
	ds := decideAll(tableN, v2, TableState{})
	if got := actions(ds); got != "halt/dead_letter/halt" || ds[0].Field != "email" || ds[0].Changes[0].Kind != MissingNotNull {
		t.Errorf("variant N: %s field %q changes %v", got, ds[0].Field, ds[0].Changes)
	}
}

// TestCaseC06IntToLong: writing a long into an int column was refused, then silently cast
// down until a value overflowed (delta-io/delta#3443, delta-io/delta-rs#2464). Table
// metrics(id int, count int); v2's count is long. With type widening on the table (variant
// A) evolve widens count to long and records the change; without it (variant B) the
// widening needs the typeWidening table feature: incompatible (halt, with a message naming
// the feature and schema.allow_table_features) unless the pipeline allows the feature.
// Long values into an int column are never narrowed: an int writer into a long column just
// writes.
func TestCaseC06IntToLong(t *testing.T) {
	table := st(null("id", dl.Integer), null("count", dl.Integer))
	v2 := st(notNull("id", dl.Integer), notNull("count", dl.Long))
	// Variant A: type widening on.
	ds := decideAll(table, v2, TableState{TypeWidening: true})
	if got := actions(ds); got != "evolve/dead_letter/halt" {
		t.Fatalf("variant A: %s", got)
	}
	got, applied := Apply(table, v2, true)
	want := `{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}},{"name":"count","type":"long","nullable":true,"metadata":{}}]}`
	if s := schemaJSON(t, got); s != want || len(applied) != 1 || applied[0].Kind != Widen {
		t.Errorf("variant A evolved\n got %s\nwant %s (%v)", s, want, applied)
	}
	// Variant B: no type widening: incompatible unless the pipeline allows the feature.
	ds = decideAll(table, v2, TableState{})
	if got := actions(ds); got != "halt/dead_letter/halt" || ds[0].Changes[0].Kind != NeedsFeature || ds[0].Changes[0].Feature != dl.FeatureTypeWidening {
		t.Errorf("variant B: %s %v", got, ds[0].Changes)
	}
	msg := Explain(ds[0], table, "metrics", 4, v2, 602, Options{Policy: Evolve, OnIncompatible: Halt})
	for _, want := range []string{"field count widens integer → long needs table feature typeWidening", "add typeWidening to schema.allow_table_features", "count integer", "count long NOT NULL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("variant B message lacks %q:\n%s", want, msg)
		}
	}
	ds = decideAll(table, v2, TableState{}, dl.FeatureTypeWidening)
	if got := actions(ds); got != "evolve/dead_letter/halt" || fmt.Sprint(ds[0].Features) != "[typeWidening]" {
		t.Errorf("variant B with typeWidening allowed: %s features %v", got, ds[0].Features)
	}
	// The other direction (long writer values into an int column) never narrows silently.
	if d := Decide(Diff(st(null("count", dl.Long)), st(null("count", dl.Integer))), Options{Policy: Halt}); d.Action != Write {
		t.Errorf("int into long: %v", d.Action)
	}
}

// TestCaseC11IncompatibleTypes: a struct field that changed from string to long was cast
// silently, and a field that became a struct failed the whole batch
// (delta-io/delta-rs#2642, delta-io/delta#1551). Table events(id, details struct<code
// string, message string>); v2 makes details.code long, v3 makes details.message a record
// Msg{text, lang}. Neither is a widening, even with type widening allowed: evolve and halt
// halt, dead_letter dead-letters the records, at details.code and details.message
// (type_mismatch).
func TestCaseC11IncompatibleTypes(t *testing.T) {
	table := st(null("id", dl.Long), null("details", st(null("code", dl.String), null("message", dl.String))))
	v2 := st(notNull("id", dl.Long), notNull("details", st(notNull("code", dl.Long), notNull("message", dl.String))))
	v3 := st(notNull("id", dl.Long), notNull("details", st(notNull("code", dl.String), notNull("message", st(notNull("text", dl.String), notNull("lang", dl.String))))))
	for _, tc := range []struct {
		writer *dl.StructType
		field  string
	}{{v2, "details.code"}, {v3, "details.message"}} {
		ds := decideAll(table, tc.writer, TableState{TypeWidening: true}, dl.FeatureTypeWidening)
		if got := actions(ds); got != "halt/dead_letter/halt" || ds[1].Field != tc.field || ds[1].Changes[0].Kind != TypeMismatch {
			t.Errorf("%s: %s field %q %v", tc.field, got, ds[1].Field, ds[1].Changes)
		}
	}
}

// TestCaseC12Nullability: a table created from a first batch without nulls was NOT NULL and
// refused later nulls, and a map<string,string> accepted {"a": null} at write time, then
// failed at read time (malon64/floe#99, delta-io/delta-rs#3690). Profile v1: id, email
// string, attrs map<string>, addr [null, Addr{zip string}]; v2 makes email nullable and the
// map values [null,string]. A table ingestd creates from v1 is nullable all the way down
// (columns, map values, addr.zip), so v2 just writes. An existing table mirroring v1's NOT
// NULLs: evolve relaxes email and the map values (two changes) but never addr.zip, which no
// writer made nullable; dead_letter and halt write, and the decoder then rejects each
// record that carries a null.
func TestCaseC12Nullability(t *testing.T) {
	attrs := &dl.MapType{KeyType: dl.String, ValueType: dl.String, ValueContainsNull: false}
	v1 := st(notNull("id", dl.Long), notNull("email", dl.String), notNull("attrs", attrs), null("addr", st(notNull("zip", dl.String))))
	v2 := st(notNull("id", dl.Long), null("email", dl.String), notNull("attrs", &dl.MapType{KeyType: dl.String, ValueType: dl.String, ValueContainsNull: true}), null("addr", st(notNull("zip", dl.String))))
	// Tables ingestd creates are nullable all the way down: v2 and v3 fit as they are.
	created, _ := Apply(&dl.StructType{}, v1, false)
	if s := created.String(); s != "struct<id:long,email:string,attrs:map<string,string>,addr:struct<zip:string>>" || !created.Fields[1].Nullable ||
		!created.Fields[2].Type.(*dl.MapType).ValueContainsNull || !created.Fields[3].Type.(*dl.StructType).Fields[0].Nullable {
		t.Fatalf("created table %s is not nullable all the way down", schemaJSONNoT(created))
	}
	if got := actions(decideAll(created, v2, TableState{})); got != "write/write/write" {
		t.Errorf("v2 into created table: %s", got)
	}
	// An existing table mirroring v1's NOT NULLs: evolve relaxes, silver and gold write
	// (the decoder then rejects each record that carries a null).
	strict := v1.Clone()
	ds := decideAll(strict, v2, TableState{})
	if got := actions(ds); got != "evolve/write/write" {
		t.Fatalf("v2 into strict table: %s", got)
	}
	relaxed, applied := Apply(strict, v2, false)
	if !relaxed.Fields[1].Nullable || !relaxed.Fields[2].Type.(*dl.MapType).ValueContainsNull || len(applied) != 2 {
		t.Errorf("relaxed %s applied %v", schemaJSONNoT(relaxed), applied)
	}
	if relaxed.Fields[3].Type.(*dl.StructType).Fields[0].Nullable {
		t.Error("addr.zip was relaxed although no writer made it nullable")
	}
}

// TestCaseC17TimestampNtz: adding a TIMESTAMP_NTZ column to an existing Delta table needs
// the timestampNtz table feature, which writers enabled by hand or, worse, silently
// (apache/parquet-java#1665, delta-io/delta#4103). Table trips(id); v2 adds pickup_local
// (local-timestamp-micros → timestamp_ntz). Without the feature allowed, evolve halts
// naming timestampNtz; with schema.allow_table_features [timestampNtz] evolve adds the
// column and enables the feature; a table that already has it needs nothing enabled.
func TestCaseC17TimestampNtz(t *testing.T) {
	table := st(null("id", dl.Long))
	v2 := st(notNull("id", dl.Long), null("pickup_local", dl.TimestampNtz))
	ds := decideAll(table, v2, TableState{})
	if got := actions(ds); got != "halt/dead_letter/halt" || ds[0].Changes[0].Feature != dl.FeatureTimestampNtz {
		t.Errorf("without the feature: %s %v", got, ds[0].Changes)
	}
	ds = decideAll(table, v2, TableState{}, dl.FeatureTimestampNtz)
	if got := actions(ds); got != "evolve/dead_letter/halt" || fmt.Sprint(ds[0].Features) != "[timestampNtz]" {
		t.Errorf("allowed: %s %v", got, ds[0].Features)
	}
	if d := Decide(Diff(table, v2), Options{Policy: Evolve, Table: TableState{Features: map[string]bool{"timestampNtz": true}}}); d.Action != EvolveAndWrite || len(d.Features) != 0 {
		t.Errorf("table already has timestampNtz: %v %v", d.Action, d.Features)
	}
}

// TestCaseC24WideRecordsLinear: very wide records (delta-io/kafka-delta-ingest#189). A
// writer of 1,500 leaf fields (1,000 doubles f0000…, a struct s of 500 strings, a string
// blob) and the same plus one field f_new: the diff reports exactly f_new, and its time is
// linear in the width (15,000 leaves within 40× the time of 1,500).
func TestCaseC24WideRecordsLinear(t *testing.T) {
	build := func(n int, extra bool) *dl.StructType {
		s := &dl.StructType{}
		for i := range n * 2 / 3 {
			s.Fields = append(s.Fields, null(fmt.Sprintf("f%04d", i), dl.Double))
		}
		inner := &dl.StructType{}
		for i := range n - len(s.Fields) {
			inner.Fields = append(inner.Fields, null(fmt.Sprintf("t%03d", i), dl.String))
		}
		s.Fields = append(s.Fields, null("s", inner), null("blob", dl.String))
		if extra {
			s.Fields = append(s.Fields, null("f_new", dl.Long))
		}
		return s
	}
	table, v2 := build(1500, false), build(1500, true)
	changes := Diff(table, v2)
	if len(changes) != 1 || changes[0].Path != "f_new" {
		t.Fatalf("changes %v, want exactly f_new", changes)
	}
	// Linear in width: 10× the leaves takes far less than 100× the time. Each size is
	// timed as the fastest of 5 trials (after a GC), so a GC pause or a descheduling on a
	// loaded machine (CI runs this under -race beside other packages) is not read as
	// quadratic work; the bound itself is unchanged.
	timeOf := func(n int) time.Duration {
		a, b := build(n, false), build(n, true)
		best := time.Duration(math.MaxInt64)
		for range 5 {
			runtime.GC()
			start := time.Now()
			for range 20 {
				Diff(a, b)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := timeOf(1500), timeOf(15000)
	if large > 40*small {
		t.Errorf("diff of 15,000 leaves took %v, 1,500 took %v: not linear", large, small)
	}
}

// TestCaseC26NamesNeedColumnMapping: columns such as "Code région" were refused for a
// space, one of the characters ` ,;{}()\n\t=` Delta allows only under column mapping
// (delta-io/delta#462), and a merge failed on the column y--1 (delta-io/delta-rs#2438).
// Writer fields "order id", " amount" (leading space), "a;b", "x=y", "y--1" against a
// table of y--1 without column mapping: the four names that need it are NeedsFeature
// columnMapping changes, in order, and halt evolve; y--1 needs no mapping. On a table
// with column mapping evolve adds them.
func TestCaseC26NamesNeedColumnMapping(t *testing.T) {
	writer := st(null("order id", dl.String), null(" amount", dl.Double), null("a;b", dl.Integer), null("x=y", dl.String), null("y--1", dl.Long))
	table := st(null("y--1", dl.Long))
	ds := decideAll(table, writer, TableState{})
	if got := actions(ds); got != "halt/dead_letter/halt" {
		t.Fatalf("%s", got)
	}
	var needs []string
	for _, c := range ds[0].Changes {
		if c.Kind == NeedsFeature && c.Feature == dl.FeatureColumnMapping {
			needs = append(needs, c.Path)
		}
	}
	if fmt.Sprint(needs) != "[order id  amount a;b x=y]" {
		t.Errorf("names needing column mapping %q", needs)
	}
	if dl.NeedsColumnMapping("y--1") {
		t.Error("y--1 needs no mapping")
	}
	ds = decideAll(table, writer, TableState{ColumnMapping: true})
	if got := actions(ds); got != "evolve/dead_letter/halt" {
		t.Errorf("table with column mapping: %s", got)
	}
}

// TestCaseC27NullTypedFieldIgnored: a column typed from all-null values became a Null
// column Delta rejects (delta-io/delta-rs#3891). Order v2 adds note [null,string] and
// legacy (type null) to orders(order_id); evolve adds note as string, one change.
func TestCaseC27NullTypedFieldIgnored(t *testing.T) {
	// ToDelta omits Avro `null`-typed fields (ingest/decode); what reaches the guard is
	// the writer schema without `legacy`, and `note` is added as string from the schema.
	table := st(null("order_id", dl.Long))
	v2 := st(notNull("order_id", dl.Long), null("note", dl.String))
	got, applied := Apply(table, v2, false)
	if got.String() != "struct<order_id:long,note:string>" || len(applied) != 1 {
		t.Errorf("evolved %s %v", got, applied)
	}
}

// TestCaseC29TableChangedByAnotherWriter: a writer kept the table schema it read at start
// and never refreshed it after another writer changed the table
// (delta-io/kafka-delta-ingest#40). Another writer added region (and type widening) to
// orders(order_id, status); ingestd's v2 adds coupon. The result is table ∪ {coupon}:
// order_id, status, region, coupon, nothing dropped or reordered.
func TestCaseC29TableChangedByAnotherWriter(t *testing.T) {
	// Spark added region and enabled type widening; v2 adds coupon: the result is
	// table ∪ {coupon}, region kept in place, nothing dropped or reordered.
	table := st(null("order_id", dl.Long), null("status", dl.String), null("region", dl.String))
	v2 := st(notNull("order_id", dl.Long), notNull("status", dl.String), null("coupon", dl.String))
	ds := decideAll(table, v2, TableState{TypeWidening: true})
	if got := actions(ds); got != "evolve/dead_letter/halt" {
		t.Fatalf("%s", got)
	}
	got, _ := Apply(table, v2, true)
	if got.String() != "struct<order_id:long,status:string,region:string,coupon:string>" {
		t.Errorf("evolved %s", got)
	}
}

func schemaJSONNoT(s *dl.StructType) string {
	b, _ := s.MarshalJSON()
	return string(b)
}

// TestCaseC34GeneratedColumns: writers refused every append to a Spark table with
// generated columns (delta-io/delta-rs#3182). Table orders(order_id, created_at,
// event_date date NOT NULL GENERATED ALWAYS AS CAST(created_at AS DATE), y long NOT NULL
// GENERATED ALWAYS AS YEAR(created_at)). A writer schema lacking a generated column (even
// NOT NULL) needs no change; one supplying it with the same type, or one that upcasts into
// it (y as int), is written and checked per record; evolution never relaxes or widens it
// (event_date as a timestamp halts evolve and halt, and dead_letter names event_date).
func TestCaseC34GeneratedColumns(t *testing.T) {
	gen := func(f *dl.StructField, e string) *dl.StructField {
		f.Metadata = map[string]any{dl.MetaGenerationExpression: e}
		return f
	}
	table := st(null("order_id", dl.Long), null("created_at", dl.Timestamp),
		gen(notNull("event_date", dl.Date), "CAST(created_at AS DATE)"), gen(notNull("y", dl.Long), "YEAR(created_at)"))
	v1 := st(null("order_id", dl.Long), null("created_at", dl.Timestamp))
	if got := actions(decideAll(table, v1, TableState{})); got != "write/write/write" {
		t.Errorf("v1 (no generated field): %s, want write/write/write", got)
	}
	v2 := st(null("order_id", dl.Long), null("created_at", dl.Timestamp), null("event_date", dl.Date), null("y", dl.Integer))
	ds := decideAll(table, v2, TableState{})
	if got := actions(ds); got != "write/write/write" {
		t.Errorf("v2 (supplies event_date, nullable, and y as int): %s %v, want write/write/write", got, ds[0].Changes)
	}
	if got, ch := Apply(table, v2, true); got != table || len(ch) != 0 {
		t.Errorf("Apply changed a generated column: %v", ch)
	}
	v3 := st(null("order_id", dl.Long), null("created_at", dl.Timestamp), null("event_date", dl.Timestamp))
	ds = decideAll(table, v3, TableState{TypeWidening: true})
	if got := actions(ds); got != "halt/dead_letter/halt" || ds[1].Field != "event_date" {
		t.Errorf("v3 (event_date as timestamp, a widening of date): %s field %q, want halt/dead_letter/halt on event_date", got, ds[1].Field)
	}
}
