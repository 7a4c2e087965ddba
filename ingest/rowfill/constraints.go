package rowfill

import (
	"fmt"
	"strings"

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

// constraintFill checks a flush's constraints on each decoded row (a columnFill).
type constraintFill struct {
	cons []checkedConstraint
}

type checkedConstraint struct {
	deltawriter.Constraint
	args []expr.Value // reused per row
}

// newConstraintFill returns the fill of the constraints of a table with schema and
// configuration conf (deltawriter.Constraints), or nil when it has none.
func newConstraintFill(schema *deltalog.StructType, conf map[string]string) (*constraintFill, error) {
	cons, err := deltawriter.Constraints(schema, conf)
	if err != nil || len(cons) == 0 {
		return nil, err
	}
	c := &constraintFill{}
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
func (c *constraintFill) fill(_ *kgo.Record, row *rowView) error {
	var names, why []string
	var details map[string]string
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
	return &decode.Error{Reason: decode.ReasonCheckViolation, Details: details,
		Err: fmt.Errorf("the row violates %s (a row must make every constraint true; NULL is a violation)", strings.Join(why, "; "))}
}
