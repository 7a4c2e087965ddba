package rowfill

import (
	"errors"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/internal/configtest"
)

// TestGeneratedCreateAndCheck: the created schema gets each configured column, typed by
// its expression, with delta.generationExpression; a source column the writer lacks, or
// an existing table that differs, is an error naming file, line and fix.
func TestGeneratedCreateAndCheck(t *testing.T) {
	cfgs, err := config.Load(configtest.Write(t, configtest.GeneratedColumns))
	if err != nil {
		t.Fatal(err)
	}
	cfg := cfgs[0]
	writer := &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "order_id", Type: deltalog.Long, Nullable: true}, {Name: "created_at", Type: deltalog.Timestamp, Nullable: true}}}
	s := GeneratedCreateColumns(cfg)(writer.Clone())
	if got := s.String(); got != "struct<order_id:long,created_at:timestamp,event_date:date,y:int>" && got != "struct<order_id:long,created_at:timestamp,event_date:date,y:integer>" {
		t.Errorf("created schema %s", got)
	}
	if e := s.Fields[2].Metadata[deltalog.MetaGenerationExpression]; e != "CAST(created_at AS DATE)" {
		t.Errorf("event_date metadata %v", s.Fields[2].Metadata)
	}
	if err := CheckGeneratedConfig(cfg, s); err != nil {
		t.Errorf("the created schema does not satisfy its config: %v", err)
	}
	noTS := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "order_id", Type: deltalog.Long, Nullable: true}}}
	err = CheckGeneratedConfig(cfg, GeneratedCreateColumns(cfg)(noTS))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:8: table.generated_columns.event_date") || !strings.Contains(err.Error(), "reads created_at, which the table") {
		t.Errorf("a missing source column: %v", err)
	}
	err = CheckGeneratedConfig(cfg, writer)
	if err == nil || !strings.Contains(err.Error(), `the table has no column "event_date"`) {
		t.Errorf("an existing table without the column: %v", err)
	}
	s.Fields[3].Metadata[deltalog.MetaGenerationExpression] = "MONTH(created_at)"
	err = CheckGeneratedConfig(cfg, s)
	if err == nil || !strings.Contains(err.Error(), "is GENERATED ALWAYS AS (MONTH(created_at)), not (YEAR(created_at))") {
		t.Errorf("a different expression: %v", err)
	}
}

// orderDatesSchema is an orders table whose event_date, y, m and d are generated from
// created_at (a timestamp): CAST(created_at AS DATE), YEAR, MONTH and DAY, as a Spark
// table partitioned by date parts declares them.
func orderDatesSchema() *deltalog.StructType {
	gen := func(name string, t deltalog.DataType, e string) *deltalog.StructField {
		return &deltalog.StructField{Name: name, Type: t, Nullable: true, Metadata: map[string]any{deltalog.MetaGenerationExpression: e}}
	}
	return &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "order_id", Type: deltalog.Long, Nullable: true},
		{Name: "created_at", Type: deltalog.Timestamp, Nullable: true},
		gen("event_date", deltalog.Date, "CAST(created_at AS DATE)"),
		gen("y", deltalog.Integer, "YEAR(created_at)"),
		gen("m", deltalog.Integer, "MONTH(created_at)"),
		gen("d", deltalog.Integer, "DAY(created_at)"),
	}}
}

// fillRow runs the generated fill on one row whose decoded values are vals (by column
// name; absent: null), with writer the record's writer schema, and returns the row's
// values by column name, or the fill's error.
func fillRow(t *testing.T, schema *deltalog.StructType, conf map[string]string, writer *deltalog.StructType, vals map[string]parquet.Value) (map[string]parquet.Value, error) {
	t.Helper()
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	fills, err := fillsFor(&config.Config{}, schema, deltalog.ColumnMappingNone, pq, conf, Options{})
	if err != nil || len(fills) != 1 {
		t.Fatalf("fillsFor: %v %v", fills, err)
	}
	row, err := newRowView(schema, deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatal(err)
	}
	cols := newCols(pq)
	row.begin(cols)
	for _, f := range schema.Fields {
		first, _ := row.leaves(f.Name)
		v, ok := vals[f.Name]
		if !ok {
			v = parquet.NullValue()
		}
		def := 1
		if v.IsNull() {
			def = 0
		}
		cols[first].Append(v.Level(0, def, first))
	}
	row.writer = writer
	if err := fills[0].fill(nil, row); err != nil {
		return nil, err
	}
	out := map[string]parquet.Value{}
	for _, f := range schema.Fields {
		v, _, _ := row.top(f.Name)
		out[f.Name] = v
	}
	return out, nil
}

// The generated fill computes event_date, y, m and d from created_at in UTC whatever the
// process's TZ (here Australia/Melbourne, where 2023-01-09T13:00Z is already the 10th),
// or in the table's ingestd.generation.timeZone when set; an event_date the record
// supplies itself is checked with null-safe equality (Spark's <=>): equal is kept; a
// different date, or NULL on one side only, is generated_column_mismatch naming the
// column, the expression and both values; NULL <=> NULL (no created_at) passes.
func TestGeneratedFillComputesAndChecks(t *testing.T) {
	t.Setenv("TZ", "Australia/Melbourne")
	v1 := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "order_id", Type: deltalog.Long, Nullable: true}, {Name: "created_at", Type: deltalog.Timestamp, Nullable: true}}}
	v2 := v1.Clone()
	v2.Fields = append(v2.Fields, &deltalog.StructField{Name: "event_date", Type: deltalog.Date, Nullable: true})
	ts := func(us int64) parquet.Value { return parquet.Int64Value(us) }
	dt := func(d int32) parquet.Value { return parquet.Int32Value(d) }
	null := parquet.NullValue()
	type want struct {
		date    any // int32 or nil
		y, m, d any
		err     string
	}
	for _, c := range []struct {
		off    int
		writer *deltalog.StructType
		vals   map[string]parquet.Value
		want   want
	}{
		{0, v1, map[string]parquet.Value{"created_at": ts(1673269200000000)}, want{int32(19366), int32(2023), int32(1), int32(9), ""}},
		{1, v1, map[string]parquet.Value{"created_at": ts(1704067199999999)}, want{int32(19722), int32(2023), int32(12), int32(31), ""}},
		{2, v1, map[string]parquet.Value{}, want{nil, nil, nil, nil, ""}},
		{3, v2, map[string]parquet.Value{"created_at": ts(1673269200000000), "event_date": dt(19366)}, want{int32(19366), int32(2023), int32(1), int32(9), ""}},
		{4, v2, map[string]parquet.Value{"created_at": ts(1673269200000000), "event_date": dt(19367)}, want{err: "the record supplies event_date = 2023-01-10, but event_date GENERATED ALWAYS AS (CAST(created_at AS DATE)) is 2023-01-09"}},
		{5, v2, map[string]parquet.Value{"created_at": ts(1673269200000000), "event_date": null}, want{err: "the record supplies event_date = NULL, but event_date GENERATED ALWAYS AS (CAST(created_at AS DATE)) is 2023-01-09"}},
		{6, v2, map[string]parquet.Value{"event_date": dt(19366)}, want{err: "the record supplies event_date = 2023-01-09, but event_date GENERATED ALWAYS AS (CAST(created_at AS DATE)) is NULL"}},
		{7, v2, map[string]parquet.Value{"event_date": null}, want{nil, nil, nil, nil, ""}},
	} {
		got, err := fillRow(t, orderDatesSchema(), nil, c.writer, c.vals)
		if c.want.err != "" {
			var de *decode.Error
			if !errors.As(err, &de) || de.Reason != decode.ReasonGeneratedColumnMismatch || de.Field != "event_date" || !strings.Contains(err.Error(), c.want.err) {
				t.Errorf("off %d: error %v, want generated_column_mismatch at event_date: %q", c.off, err, c.want.err)
			} else if de.Details["expression"] != "CAST(created_at AS DATE)" || !strings.Contains(c.want.err, "supplies event_date = "+de.Details["value"]+",") ||
				!strings.HasSuffix(c.want.err, " is "+de.Details["expected"]) {
				t.Errorf("off %d: details %v", c.off, de.Details)
			}
			continue
		}
		if err != nil {
			t.Errorf("off %d: %v", c.off, err)
			continue
		}
		for name, w := range map[string]any{"event_date": c.want.date, "y": c.want.y, "m": c.want.m, "d": c.want.d} {
			v := got[name]
			switch {
			case w == nil && !v.IsNull(), w != nil && (v.IsNull() || v.Int32() != w.(int32)):
				t.Errorf("off %d: %s = %v, want %v", c.off, name, v, w)
			}
		}
	}
	// The table's zone property moves off 0 to the Melbourne date.
	got, err := fillRow(t, orderDatesSchema(), map[string]string{deltalog.PropGenerationTimeZone: "Australia/Melbourne"}, v1, map[string]parquet.Value{"created_at": ts(1673269200000000)})
	if err != nil || got["event_date"].Int32() != 19367 || got["d"].Int32() != 10 {
		t.Errorf("Melbourne generation zone: %v %v, want 2023-01-10", got, err)
	}
	// The first instant Delta holds is still 0001-01-01 in UTC, but 0000-12-31 in Los
	// Angeles: a date outside Delta's range, refused rather than written; the last is
	// 10000-01-01 in Melbourne.
	for _, c := range []struct {
		zone string
		us   int64
		msg  string
	}{
		{"UTC", deltalog.TimestampMinMicros, ""},
		{"America/Los_Angeles", deltalog.TimestampMinMicros, "event_date GENERATED ALWAYS AS (CAST(created_at AS DATE)) is 0000-12-31 for this record (generation time zone America/Los_Angeles), outside Delta's range 0001-01-01..9999-12-31"},
		{"Australia/Melbourne", deltalog.TimestampMaxMicros, "event_date GENERATED ALWAYS AS (CAST(created_at AS DATE)) is 10000-01-01 for this record (generation time zone Australia/Melbourne)"},
	} {
		got, err := fillRow(t, orderDatesSchema(), map[string]string{deltalog.PropGenerationTimeZone: c.zone}, v1, map[string]parquet.Value{"created_at": ts(c.us)})
		var de *decode.Error
		switch {
		case c.msg == "" && (err != nil || got["event_date"].Int32() != deltalog.DateMinDays):
			t.Errorf("%s: %v %v, want 0001-01-01", c.zone, got["event_date"], err)
		case c.msg != "" && (!errors.As(err, &de) || de.Reason != decode.ReasonGeneratedColumnMismatch || de.Field != "event_date" || !strings.Contains(err.Error(), c.msg)):
			t.Errorf("%s: %v, want generated_column_mismatch at event_date: %q", c.zone, err, c.msg)
		}
	}
}

// BenchmarkGeneratedFill is the per-record cost of computing orderDatesSchema's four
// generated columns (event_date, y, m, d from created_at) on a decoded row.
func BenchmarkGeneratedFill(b *testing.B) {
	schema := orderDatesSchema()
	pq, _ := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	fills, err := fillsFor(&config.Config{}, schema, deltalog.ColumnMappingNone, pq, nil, Options{})
	if err != nil {
		b.Fatal(err)
	}
	row, _ := newRowView(schema, deltalog.ColumnMappingNone, pq)
	row.writer = &deltalog.StructType{Fields: schema.Fields[:2]}
	cols := newCols(pq)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		resetCols(cols)
		row.begin(cols)
		for _, f := range schema.Fields {
			first, _ := row.leaves(f.Name)
			v := parquet.NullValue().Level(0, 0, first)
			if f.Name == "created_at" {
				v = parquet.Int64Value(1673269200000000+int64(i)*3_600_000_000).Level(0, 1, first)
			} else if f.Name == "order_id" {
				v = parquet.Int64Value(int64(i)).Level(0, 1, first)
			}
			cols[first].Append(v)
		}
		if err := fills[0].fill(nil, row); err != nil {
			b.Fatal(err)
		}
	}
}
