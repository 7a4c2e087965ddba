package deltawriter

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
)

// Constraint is a CHECK constraint (PROTOCOL.md, "Check Constraints": the table property
// delta.constraints.<name>) or a column invariant ("Column Invariants": the field metadata
// delta.invariants), bound to the table's schema. A row satisfies it only when the
// expression is true: false and NULL are both violations, as the protocol ("must return
// true") and Spark's writer have it (a row Spark would refuse would break its next ADD
// CONSTRAINT or rewrite of the file; docs/tables.md, "Constraints").
type Constraint struct {
	// Name is everything after delta.constraints. (never split on dots), or
	// "invariant(<column>)" for a column invariant.
	Name string
	Expr *expr.Expr // boolean
}

// InvariantName is the Constraint.Name of the invariant of top-level column col.
func InvariantName(col string) string { return "invariant(" + col + ")" }

// Constraints returns the CHECK constraints of a table with this schema and configuration
// (metaData.configuration), sorted by name, then its column invariants in schema order,
// each compiled with Spark's semantics (expr) in deltalog.GenerationTimeZone. It returns an error
// wrapping ErrUnsupportedFeature that names the constraint and its expression when an
// expression is outside the evaluator's subset (expr.Supported; the error names the
// function or construct), is not boolean, or is an invariant of a nested field.
func Constraints(schema *deltalog.StructType, conf map[string]string) ([]Constraint, error) {
	if schema == nil {
		return nil, nil
	}
	var names []string
	for k := range conf {
		if name, ok := strings.CutPrefix(k, deltalog.PropConstraintPrefix); ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out []Constraint
	for _, name := range names {
		src := conf[deltalog.PropConstraintPrefix+name]
		c, err := compileConstraint(name, src, schema, conf)
		if err != nil {
			return nil, fmt.Errorf("check CHECK constraint %q (%s) (feature %s): %w", name, src, deltalog.FeatureCheckConstraints, err)
		}
		out = append(out, c)
	}
	for _, f := range schema.Fields {
		if err := noNestedInvariant(f.Type, f.Name); err != nil {
			return nil, err
		}
		raw, ok := f.Metadata[deltalog.MetaInvariants]
		if !ok {
			continue
		}
		src, err := invariantExpression(raw)
		if err != nil {
			return nil, fmt.Errorf("check invariant of column %q (feature %s): %w: %w", f.Name, deltalog.FeatureInvariants, err, ErrUnsupportedFeature)
		}
		c, err := compileConstraint(InvariantName(f.Name), src, schema, conf)
		if err != nil {
			return nil, fmt.Errorf("check invariant of column %q (%s) (feature %s): %w", f.Name, src, deltalog.FeatureInvariants, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func compileConstraint(name, src string, schema *deltalog.StructType, conf map[string]string) (Constraint, error) {
	loc, err := deltalog.GenerationTimeZone(conf)
	if err != nil {
		return Constraint{}, err
	}
	e, err := expr.Compile(src, schema, expr.Options{TimeZone: loc})
	if err != nil {
		return Constraint{}, fmt.Errorf("%w: %w", err, ErrUnsupportedFeature)
	}
	if t := e.Type(); t != deltalog.Boolean && t != deltalog.Void {
		return Constraint{}, fmt.Errorf("the expression is of type %s, not boolean: %w", t, ErrUnsupportedFeature)
	}
	return Constraint{Name: name, Expr: e}, nil
}

// invariantExpression reads delta.invariants' value: a JSON string (or object)
// {"expression": {"expression": "<SQL>"}} (PROTOCOL.md, "Column Invariants").
func invariantExpression(raw any) (string, error) {
	var doc struct {
		Expression struct {
			Expression string `json:"expression"`
		} `json:"expression"`
	}
	var b []byte
	switch v := raw.(type) {
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return "", fmt.Errorf("read %s: %w", deltalog.MetaInvariants, err)
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Expression.Expression == "" {
		return "", fmt.Errorf("read %s %s: want {\"expression\": {\"expression\": \"<SQL>\"}}", deltalog.MetaInvariants, b)
	}
	return doc.Expression.Expression, nil
}

func noNestedInvariant(t deltalog.DataType, path string) error {
	switch t := t.(type) {
	case *deltalog.StructType:
		for _, f := range t.Fields {
			p := path + "." + f.Name
			if _, ok := f.Metadata[deltalog.MetaInvariants]; ok {
				return fmt.Errorf("check schema: column %q has %s on a nested field (ingestd evaluates invariants of top-level columns only): %w", p, deltalog.MetaInvariants, ErrUnsupportedFeature)
			}
			if err := noNestedInvariant(f.Type, p); err != nil {
				return err
			}
		}
	case *deltalog.ArrayType:
		return noNestedInvariant(t.ElementType, path+".element")
	case *deltalog.MapType:
		return noNestedInvariant(t.ValueType, path+".value")
	}
	return nil
}
