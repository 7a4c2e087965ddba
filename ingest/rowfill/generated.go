package rowfill

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// Generated columns (PROTOCOL.md, "Generated Columns"): table.generated_columns adds them
// to a table ingestd creates; on every table that has them, a columnFill computes each
// one per record after decoding (Spark's semantics, deltawriter/expr) and checks a value
// the record supplies itself with null-safe equality (Spark's <=>), as Spark's
// generated-column constraint does.

// GeneratedCreateColumns is the guard's schemaguard.Options.CreateColumns for cfg: the
// function it returns adds table.generated_columns to the schema of a table the batch
// creates (in place, returning it), each typed by its expression's result type and
// carrying delta.generationExpression; a field of that name the writer schema already
// has becomes the generated column. An expression that does not bind to the schema is
// left out there and reported by CheckGeneratedConfig. It returns nil when cfg has no
// table.generated_columns.
func GeneratedCreateColumns(cfg *config.Config) func(*deltalog.StructType) *deltalog.StructType {
	if len(cfg.Table.GeneratedColumns) == 0 {
		return nil
	}
	names := cfg.GeneratedNames()
	// The Kafka columns are appended after the guard (by the flush's commit schema), but a generated column
	// may derive from one (e.g. DATE(_kafka_timestamp)): bind against them too. The avro
	// key's struct is not known here; no supported expression reads a struct.
	var kafka []*deltalog.StructField
	if cols := slices.DeleteFunc(slices.Clone(cfg.Table.KafkaColumns), func(c string) bool {
		return c == kafkacols.Key && cfg.Table.KeyFormat == kafkacols.KeyAvro
	}); len(cols) > 0 {
		kafka, _ = kafkacols.Fields(cols, cfg.Table.KeyFormat, nil)
	}
	return func(s *deltalog.StructType) *deltalog.StructType {
		loc, err := deltalog.GenerationTimeZone(cfg.Table.Properties)
		if err != nil {
			return s
		}
		for _, name := range names {
			src := cfg.Table.GeneratedColumns[name]
			bindTo := s
			if len(kafka) > 0 {
				bindTo = &deltalog.StructType{Fields: append(slices.Clone(s.Fields), kafka...)}
			}
			e, err := expr.Compile(src, bindTo, expr.Options{TimeZone: loc})
			if err != nil {
				continue
			}
			meta := map[string]any{deltalog.MetaGenerationExpression: src}
			if f := s.FieldByKey(name); f != nil {
				f.Metadata = meta // the writer sends it too: the same column, now generated
				continue
			}
			s.Fields = append(s.Fields, &deltalog.StructField{Name: name, Type: e.Type(), Nullable: true, Metadata: meta})
		}
		return s
	}
}

// CheckGeneratedConfig checks table.generated_columns against schema, the table's (or the
// one a flush creates it with): each must be a generated column of the table with the
// same expression. ingestd adds generated columns only when it creates a table, so a
// difference is an error ("check table.generated_columns: …") naming, for each
// column, the config file and line and the fix.
func CheckGeneratedConfig(cfg *config.Config, schema *deltalog.StructType) error {
	var errs []string
	for _, name := range cfg.GeneratedNames() {
		src := cfg.Table.GeneratedColumns[name]
		where := fmt.Sprintf("%s:%d: table.generated_columns.%s", cfg.File, cfg.Line("$.table.generated_columns."+name), name)
		f := schema.FieldByKey(name)
		var got string // the table's expression for the column, "" when it has none
		if f != nil {
			got, _ = f.Metadata[deltalog.MetaGenerationExpression].(string)
		}
		switch {
		case f == nil || got == "":
			missing := []string{}
			if n, err := expr.Parse(src); err == nil {
				for _, c := range expr.Columns(n) {
					if schema.FieldByKey(c) == nil {
						missing = append(missing, c)
					}
				}
			}
			if len(missing) > 0 {
				errs = append(errs, fmt.Sprintf("%s: %q reads %s, which the table (or the writer schema creating it) does not have; fix the expression or the column name", where, src, strings.Join(missing, ", ")))
			} else if f == nil {
				errs = append(errs, fmt.Sprintf("%s: the table has no column %q: ingestd adds generated columns only when it creates a table; add it with Spark (a new table) or remove the key", where, name))
			} else {
				errs = append(errs, fmt.Sprintf("%s: the table's column %q is not a generated column; remove the key, or recreate the table with it", where, f.Name))
			}
		case got != src:
			errs = append(errs, fmt.Sprintf("%s: the table's column %q is GENERATED ALWAYS AS (%s), not (%s); set the key to the table's expression or remove it", where, f.Name, got, src))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("check table.generated_columns: %s", strings.Join(errs, "; "))
	}
	return nil
}

// generatedFill computes a flush's generated columns on each decoded row (a columnFill).
type generatedFill struct {
	cols []generatedCol
	tz   string // the zone's name, for messages
}

type generatedCol struct {
	deltawriter.GeneratedColumn
	args []expr.Value // reused per row
}

// newGeneratedFill returns the fill of the generated columns of a table with schema and
// configuration conf (deltawriter.GeneratedColumns), or nil when it has none.
func newGeneratedFill(schema *deltalog.StructType, conf map[string]string) (*generatedFill, error) {
	gen, err := deltawriter.GeneratedColumns(schema, conf)
	if err != nil || len(gen) == 0 {
		return nil, err
	}
	loc, _ := deltalog.GenerationTimeZone(conf) // checked by GeneratedColumns
	g := &generatedFill{tz: loc.String()}
	for _, c := range gen {
		g.cols = append(g.cols, generatedCol{GeneratedColumn: c, args: make([]expr.Value, len(c.Expr.Columns()))})
	}
	return g, nil
}

// fill computes every generated column of the row. A column the record's writer schema
// lacks gets the computed value; one it supplies is kept when null-safe equal to it
// (Spark's <=>), else the record is rejected with generated_column_mismatch naming the
// column, the expression and both values. A computed NULL in a NOT NULL column is
// not_null_violation; an expression that cannot be evaluated on the record (a string
// that is no date), or whose date or timestamp is outside Delta's range
// (deltalog.TimeRange), is generated_column_mismatch.
func (g *generatedFill) fill(_ *kgo.Record, row *rowView) error {
	for i := range g.cols {
		c := &g.cols[i]
		name := c.Field.Name
		for j, src := range c.Expr.Columns() {
			pv, f, ok := row.top(src.Name)
			if !ok {
				return fmt.Errorf("compute generated column %q: the row has no value of column %q", name, src.Name)
			}
			v, err := expr.FromParquet(f.Type, pv)
			if err != nil {
				return fmt.Errorf("compute generated column %q: %w", name, err)
			}
			c.args[j] = v
		}
		want, err := c.Expr.Eval(c.args)
		if err != nil {
			return &decode.Error{Reason: decode.ReasonGeneratedColumnMismatch, Field: name, Details: map[string]string{"expression": c.Expr.String()},
				Err: fmt.Errorf("generated column %s GENERATED ALWAYS AS (%s) cannot be computed for this record: %w", name, c.Expr, err)}
		}
		want.Type = c.Field.Type // an integer result widened into a long column keeps its value
		if lo, hi, ok := deltalog.TimeRange(want.Type); ok && !want.Null && (want.Int < lo || want.Int > hi) {
			// CAST(created_at AS DATE) of 0001-01-01T00:00:00Z west of UTC is 0000-12-31.
			return &decode.Error{Reason: decode.ReasonGeneratedColumnMismatch, Field: name, Details: map[string]string{"expression": c.Expr.String(), "expected": want.String()},
				Err: fmt.Errorf("generated column %s GENERATED ALWAYS AS (%s) is %s for this record (generation time zone %s), outside Delta's range 0001-01-01..9999-12-31", name, c.Expr, want, g.tz)}
		}
		if row.writer != nil && row.writer.FieldByKey(name) != nil {
			pv, f, ok := row.top(name)
			if !ok {
				return fmt.Errorf("check generated column %q: the row has no value for it", name)
			}
			got, err := expr.FromParquet(f.Type, pv)
			if err != nil {
				return fmt.Errorf("check generated column %q: %w", name, err)
			}
			if !expr.NullSafeEqual(got, want) {
				return &decode.Error{Reason: decode.ReasonGeneratedColumnMismatch, Field: name,
					Details: map[string]string{"expression": c.Expr.String(), "value": got.String(), "expected": want.String()},
					Err: fmt.Errorf("the record supplies %s = %s, but %s GENERATED ALWAYS AS (%s) is %s for it (null-safe equality, Spark's <=>; generation time zone %s)",
						name, got, name, c.Expr, want, g.tz)}
			}
		}
		if want.Null && !c.Field.Nullable {
			return &decode.Error{Reason: decode.ReasonNotNullViolation, Field: name,
				Err: fmt.Errorf("generated column %s GENERATED ALWAYS AS (%s) is NULL for this record, but the column is NOT NULL", name, c.Expr)}
		}
		pq, err := expr.ToParquet(want)
		if err != nil {
			return fmt.Errorf("compute generated column %q: %w", name, err)
		}
		if err := row.setTop(name, pq); err != nil {
			return fmt.Errorf("compute generated column %q: %w", name, err)
		}
	}
	return nil
}
