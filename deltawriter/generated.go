package deltawriter

import (
	"fmt"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
)

// GeneratedColumn is a top-level column whose value Delta requires to equal its
// generation expression (PROTOCOL.md, "Generated Columns"), the expression bound to the
// table's schema.
type GeneratedColumn struct {
	Field *deltalog.StructField
	Expr  *expr.Expr // its Type() is the column's type, or an integer type the column widens
}

// GeneratedColumns returns the generated columns of a table with this schema and
// configuration (metaData.configuration), in schema order, each expression compiled with
// Spark's semantics in deltalog.GenerationTimeZone. It returns an error wrapping
// ErrUnsupportedFeature, naming the column and its expression, for an expression outside
// the evaluator's set (expr.Supported), a nested generated column, or a result type the
// column cannot hold; and an error for an invalid time zone property.
func GeneratedColumns(schema *deltalog.StructType, conf map[string]string) ([]GeneratedColumn, error) {
	if schema == nil {
		return nil, nil
	}
	var out []GeneratedColumn
	var loc *time.Location
	for _, f := range schema.Fields {
		if err := noNestedGenerated(f.Type, f.Name); err != nil {
			return nil, err
		}
		src, ok := f.Metadata[deltalog.MetaGenerationExpression].(string)
		if !ok {
			if _, has := f.Metadata[deltalog.MetaGenerationExpression]; has {
				return nil, fmt.Errorf("check generated column %q: %s is not a string: %w", f.Name, deltalog.MetaGenerationExpression, ErrUnsupportedFeature)
			}
			continue
		}
		if loc == nil {
			var err error
			if loc, err = deltalog.GenerationTimeZone(conf); err != nil {
				return nil, fmt.Errorf("check generated column %q: %w", f.Name, err)
			}
		}
		e, err := compileGenerated(f, src, schema, loc)
		if err != nil {
			return nil, err
		}
		out = append(out, GeneratedColumn{Field: f, Expr: e})
	}
	return out, nil
}

// compileGenerated compiles generated column f's expression src against schema in loc
// and checks it (GeneratedColumns' errors).
func compileGenerated(f *deltalog.StructField, src string, schema *deltalog.StructType, loc *time.Location) (*expr.Expr, error) {
	e, err := expr.Compile(src, schema, expr.Options{TimeZone: loc})
	if err != nil {
		return nil, fmt.Errorf("check generated column %q GENERATED ALWAYS AS (%s) (feature %s): %w: %w", f.Name, src, deltalog.FeatureGeneratedColumns, err, ErrUnsupportedFeature)
	}
	for _, c := range e.Columns() {
		if c == f {
			return nil, fmt.Errorf("check generated column %q GENERATED ALWAYS AS (%s): it refers to itself: %w", f.Name, src, ErrUnsupportedFeature)
		}
		if _, gen := c.Metadata[deltalog.MetaGenerationExpression]; gen {
			return nil, fmt.Errorf("check generated column %q GENERATED ALWAYS AS (%s): it refers to the generated column %q (Spark does not allow that): %w", f.Name, src, c.Name, ErrUnsupportedFeature)
		}
	}
	if !holds(f.Type, e.Type()) {
		return nil, fmt.Errorf("check generated column %q GENERATED ALWAYS AS (%s): the expression is %s, the column %s: %w", f.Name, src, e.Type(), f.Type, ErrUnsupportedFeature)
	}
	return e, nil
}

// UnsupportedGenerated returns, for each top-level generated column of a table with this
// schema and configuration that ingestd cannot compute, the error GeneratedColumns gives
// for it (the reason a pipeline refuses the table at start-up), by column name; nil when
// every one is supported. A time zone property that is not valid is every column's error.
// It is what `ingestd table describe` marks.
func UnsupportedGenerated(schema *deltalog.StructType, conf map[string]string) map[string]error {
	if schema == nil {
		return nil
	}
	var out map[string]error
	loc, zoneErr := deltalog.GenerationTimeZone(conf)
	for _, f := range schema.Fields {
		src, ok := f.Metadata[deltalog.MetaGenerationExpression].(string)
		if !ok {
			continue
		}
		var err error
		if zoneErr != nil {
			err = fmt.Errorf("check generated column %q: %w", f.Name, zoneErr)
		} else {
			_, err = compileGenerated(f, src, schema, loc)
		}
		if err != nil {
			if out == nil {
				out = map[string]error{}
			}
			out[f.Name] = err
		}
	}
	return out
}

// holds reports whether a column of type col holds an expression result of type t
// unchanged: the same type, or an integer type widened (integer into long, …).
func holds(col, t deltalog.DataType) bool {
	if col == t {
		return true
	}
	rank := map[deltalog.DataType]int{deltalog.Byte: 1, deltalog.Short: 2, deltalog.Integer: 3, deltalog.Long: 4}
	return rank[col] > 0 && rank[t] > 0 && rank[col] >= rank[t]
}

func noNestedGenerated(t deltalog.DataType, path string) error {
	switch t := t.(type) {
	case *deltalog.StructType:
		for _, f := range t.Fields {
			p := path + "." + f.Name
			if _, ok := f.Metadata[deltalog.MetaGenerationExpression]; ok {
				return fmt.Errorf("check schema: nested column %q has %s; ingestd computes top-level generated columns only: %w", p, deltalog.MetaGenerationExpression, ErrUnsupportedFeature)
			}
			if err := noNestedGenerated(f.Type, p); err != nil {
				return err
			}
		}
	case *deltalog.ArrayType:
		return noNestedGenerated(t.ElementType, path+".element")
	case *deltalog.MapType:
		if err := noNestedGenerated(t.KeyType, path+".key"); err != nil {
			return err
		}
		return noNestedGenerated(t.ValueType, path+".value")
	}
	return nil
}

// hasGenerated reports whether a top-level column of s has a generation expression.
func hasGenerated(s *deltalog.StructType) bool {
	if s == nil {
		return false
	}
	for _, f := range s.Fields {
		if _, ok := f.Metadata[deltalog.MetaGenerationExpression]; ok {
			return true
		}
	}
	return false
}
