package rowfill

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
	"github.com/ingestd/ingestd/ingest/decode"
)

// CHECK constraints and column invariants (PROTOCOL.md, "Check Constraints", "Column
// Invariants"): a check-only columnFill, run after the Kafka and generated columns are
// filled, evaluates every constraint of the table on each record's row (Spark's
// semantics, deltawriter/expr). A row satisfies a constraint only when its expression is
// true; false, NULL and a value the expression cannot be evaluated on (ANSI mode's
// errors) are violations, routed as decode.ReasonCheckViolation by the table's policy.
// The fills are built per flush from the snapshot the flush commits on, so a constraint
// added by anyone is checked from the next flush on, and a commit conflict with a winner
// that changed the metadata rebuilds the batch (a new Stage), re-checking every record.

// CHAR(n) and VARCHAR(n) limits (deltawriter.CharVarcharLimits: Spark's field metadata
// __CHAR_VARCHAR_TYPE_STRING) are checked by the same fill, before the CHECK
// constraints: every non-null value of a limited string leaf (a top-level or nested
// field, an array's elements, a map's keys and values, a partition column) must have at
// most n Unicode code points, trailing spaces included, as Delta's write-side check has
// it. A violation is a check_violation named char_varchar(<column>), routed like any
// other. Values are stored as sent: a CHAR(n) value shorter than n is not padded (Spark
// 3.4+ writes it so too, and pads on read; docs/tables.md, "CHAR and VARCHAR").

// constraintFill checks a flush's constraints on each decoded row (a columnFill).
type constraintFill struct {
	limits []checkedLimit
	cons   []checkedConstraint
}

// checkedLimit is a CHAR/VARCHAR limit bound to its leaf column in the flush's Parquet
// schema; a value at the leaf's maximum definition level is a non-null string.
type checkedLimit struct {
	deltawriter.CharVarcharLimit
	leaf, maxDef int
}

// LimitName is the constraint name of a CHAR/VARCHAR limit of column (a leaf path as
// deltawriter.CharVarcharLimit.Column) in check_violation dead letters.
func LimitName(column string) string { return "char_varchar(" + column + ")" }

type checkedConstraint struct {
	deltawriter.Constraint
	args []expr.Value // reused per row
}

// newConstraintFill returns the fill of the constraints of a table with schema and
// configuration conf (deltawriter.Constraints) and of its CHAR/VARCHAR limits
// (deltawriter.CharVarcharLimits, their leaves in pq under column mapping mode cm), or
// nil when it has none.
func newConstraintFill(schema *deltalog.StructType, cm deltalog.ColumnMappingMode, pq *parquet.Schema, conf map[string]string) (*constraintFill, error) {
	cons, err := deltawriter.Constraints(schema, conf)
	if err != nil {
		return nil, err
	}
	limits, err := deltawriter.CharVarcharLimits(schema, cm)
	if err != nil {
		return nil, err
	}
	if len(cons) == 0 && len(limits) == 0 {
		return nil, nil
	}
	c := &constraintFill{}
	for _, l := range limits {
		lc, ok := pq.Lookup(l.Leaf...)
		if !ok {
			return nil, fmt.Errorf("check %s of column %q: the Parquet schema has no leaf %s", l.Type, l.Column, strings.Join(l.Leaf, "."))
		}
		c.limits = append(c.limits, checkedLimit{CharVarcharLimit: l, leaf: lc.ColumnIndex, maxDef: lc.MaxDefinitionLevel})
	}
	for _, k := range cons {
		c.cons = append(c.cons, checkedConstraint{Constraint: k, args: make([]expr.Value, len(k.Expr.Columns()))})
	}
	return c, nil
}

// fill evaluates every constraint on the row (in name order, invariants last) and, when
// any is violated, rejects the record with check_violation: Details "constraint" lists
// every violated constraint's name (", "-separated, in that order) and
// "constraint.<name>" holds each one's expression (ingestd.error.constraint and
// ingestd.error.constraint.<name> headers).
//
// A CHAR/VARCHAR limit violated is named char_varchar(<column>) (LimitName), first, with
// "constraint.char_varchar(<column>)" holding "length(<column>) <= n" and the declared
// type, and the record's Field is the first such column.
func (c *constraintFill) fill(_ *kgo.Record, row *rowView) error {
	var names, why []string
	var details map[string]string
	var field string
	for i := range c.limits {
		l := &c.limits[i]
		longest := -1
		for _, v := range row.leaf(l.leaf) {
			if v.DefinitionLevel() == l.maxDef {
				longest = max(longest, utf8.RuneCount(v.ByteArray()))
			}
		}
		if longest <= l.N {
			continue
		}
		if details == nil {
			details = map[string]string{}
			field = l.Column
		}
		name := LimitName(l.Column)
		names = append(names, name)
		details["constraint."+name] = fmt.Sprintf("length(%s) <= %d (%s, declared %s)", l.Column, l.N, l.Type, l.Declared)
		why = append(why, fmt.Sprintf("%s: column %s is %s, the value has %d characters (Unicode code points, trailing spaces included)", name, l.Column, l.Type, longest))
	}
	for i := range c.cons {
		k := &c.cons[i]
		for j, col := range k.Expr.Columns() {
			pv, f, ok := row.top(col.Name)
			if !ok {
				return fmt.Errorf("check constraint %q: the row has no value of column %q", k.Name, col.Name)
			}
			v, err := expr.FromParquet(f.Type, pv)
			if err != nil {
				return fmt.Errorf("check constraint %q: %w", k.Name, err)
			}
			k.args[j] = v
		}
		v, err := k.Expr.Eval(k.args)
		var result string
		switch {
		case err != nil:
			result = "cannot be evaluated: " + err.Error()
		case v.Null:
			result = "is NULL"
		case v.Int == 0:
			result = "is false"
		default:
			continue
		}
		if details == nil {
			details = map[string]string{}
		}
		names = append(names, k.Name)
		details["constraint."+k.Name] = k.Expr.String()
		why = append(why, fmt.Sprintf("CHECK constraint %s (%s) %s", k.Name, k.Expr, result))
	}
	if len(names) == 0 {
		return nil
	}
	details["constraint"] = strings.Join(names, ", ")
	return &decode.Error{Reason: decode.ReasonCheckViolation, Field: field, Details: details,
		Err: fmt.Errorf("the row violates %s (a row must make every constraint true; NULL is a violation)", strings.Join(why, "; "))}
}
