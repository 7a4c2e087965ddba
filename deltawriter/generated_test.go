package deltawriter

import (
	"errors"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
)

func genSchema(exprs map[string]string, types map[string]deltalog.DataType) *deltalog.StructType {
	s := &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "order_id", Type: deltalog.Long, Nullable: true},
		{Name: "created_at", Type: deltalog.Timestamp, Nullable: true},
	}}
	for _, name := range []string{"event_date", "y", "bad"} {
		src, ok := exprs[name]
		if !ok {
			continue
		}
		s.Fields = append(s.Fields, &deltalog.StructField{Name: name, Type: types[name], Nullable: true,
			Metadata: map[string]any{deltalog.MetaGenerationExpression: src}})
	}
	return s
}

func TestGeneratedColumns(t *testing.T) {
	s := genSchema(map[string]string{"event_date": "CAST(created_at AS DATE)", "y": "YEAR(created_at)"},
		map[string]deltalog.DataType{"event_date": deltalog.Date, "y": deltalog.Long})
	gen, err := GeneratedColumns(s, map[string]string{deltalog.PropGenerationTimeZone: "Australia/Melbourne"})
	if err != nil {
		t.Fatal(err)
	}
	if len(gen) != 2 || gen[0].Field.Name != "event_date" || gen[1].Field.Name != "y" {
		t.Fatalf("generated columns %+v", gen)
	}
	v, err := gen[0].Expr.Eval([]expr.Value{expr.Int(deltalog.Timestamp, 1673269200000000)})
	if err != nil || v.Int != 19367 { // Melbourne: 2023-01-10
		t.Errorf("event_date in Melbourne = %v, %v; want 19367", v, err)
	}
	if gen[0].Expr.Columns()[0] != s.Fields[1] {
		t.Errorf("the expression reads %v, want the table's created_at", gen[0].Expr.Columns())
	}
	for _, c := range []struct {
		exprs map[string]string
		types map[string]deltalog.DataType
		conf  map[string]string
		want  string
	}{
		{map[string]string{"bad": "upper(order_id)"}, map[string]deltalog.DataType{"bad": deltalog.String}, nil, `column "bad" GENERATED ALWAYS AS (upper(order_id)) (feature generatedColumns)`},
		{map[string]string{"bad": "CAST(created_at AS DATE)"}, map[string]deltalog.DataType{"bad": deltalog.String}, nil, `the expression is date, the column string`},
		{map[string]string{"event_date": "CAST(created_at AS DATE)", "bad": "year(event_date)"}, map[string]deltalog.DataType{"event_date": deltalog.Date, "bad": deltalog.Integer}, nil, `refers to the generated column "event_date"`},
		{map[string]string{"y": "year(created_at)"}, map[string]deltalog.DataType{"y": deltalog.Integer}, map[string]string{deltalog.PropGenerationTimeZone: "Mars/Olympus"}, `ingestd.generation.timeZone="Mars/Olympus"`},
		{map[string]string{"y": "year(created_at)"}, map[string]deltalog.DataType{"y": deltalog.Integer}, map[string]string{deltalog.PropGenerationTimeZone: "Local"}, `want an IANA time zone name`},
	} {
		_, err := GeneratedColumns(genSchema(c.exprs, c.types), c.conf)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.exprs, err, c.want)
		}
	}
	if _, err := GeneratedColumns(genSchema(map[string]string{"bad": "upper(order_id)"}, map[string]deltalog.DataType{"bad": deltalog.String}), nil); !errors.Is(err, ErrUnsupportedFeature) {
		t.Errorf("an unsupported expression: %v does not wrap ErrUnsupportedFeature", err)
	}
}

// TestCreateWithGeneratedColumns: a new table with a generated column gets the protocol
// Spark (Delta 4.4) writes for CREATE TABLE … GENERATED ALWAYS AS: (1, 7) with writer
// features appendOnly, invariants and generatedColumns; it is writable; with
// timestamp_ntz it also gets the reader-writer feature.
func TestCreateWithGeneratedColumns(t *testing.T) {
	s := genSchema(map[string]string{"event_date": "CAST(created_at AS DATE)"}, map[string]deltalog.DataType{"event_date": deltalog.Date})
	d, _, err := PrepareSchemaChange(nil, SchemaChange{Schema: s, Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Protocol; p.MinReaderVersion != 1 || p.MinWriterVersion != 7 || strings.Join(p.WriterFeatures, ",") != "appendOnly,invariants,generatedColumns" {
		t.Errorf("protocol %+v, want (1, 7) [appendOnly invariants generatedColumns]", p)
	}
	if err := checkWritable(d.Protocol, d.Metadata, s); err != nil {
		t.Errorf("a table with a supported generated column is refused: %v", err)
	}
	s.Fields = append(s.Fields, &deltalog.StructField{Name: "l", Type: deltalog.TimestampNtz, Nullable: true})
	d, _, err = PrepareSchemaChange(nil, SchemaChange{Schema: s, Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	p := d.Protocol
	if p.MinReaderVersion != 3 || p.MinWriterVersion != 7 || !strings.Contains(strings.Join(p.WriterFeatures, ","), deltalog.FeatureGeneratedColumns) ||
		strings.Join(p.ReaderFeatures, ",") != deltalog.FeatureTimestampNtz {
		t.Errorf("protocol %+v, want (3, 7) with generatedColumns and timestampNtz", p)
	}
}
