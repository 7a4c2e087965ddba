package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
)

// consExprs are the CHECK-subset expressions the property test compares with Spark, over
// consInputSchema's columns: every operator and function of the subset, decimals of mixed
// precision, integers, doubles with NaN, strings with multi-byte characters, dates and
// timestamps. None can fail under ANSI mode on consRows (no zero divisor, no overflow), so
// one query evaluates them all.
var consExprs = []string{
	"a >= 0", "a * i = b", "a + b > 1.5", "a - b", "a * b", "a / 7", "b / 3.0", "a % 3", "i * 2 + l", "a / b",
	"a IN (1.00, -2.50, NULL)", "i IN (1, 2, 3)", "s IN ('NEW', 'PAID')", "a BETWEEN -10 AND 10.5", "i NOT BETWEEN 0 AND 10",
	"s LIKE 'a_c'", "s LIKE '%\\\\%%'", "s LIKE 'N%'", "s NOT LIKE '%!_%' ESCAPE '!'", "length(s)", "upper(s)", "lower(s) = 'new'",
	"trim(s)", "coalesce(a, b, 0)", "coalesce(i, l)", "d > 1.0", "d = CAST('NaN' AS DOUBLE)", "d >= a", "d < 0 OR d IS NULL",
	"NOT (a > 0) AND i > 0", "a > 0 OR i > 0", "a IS NULL", "CAST(a AS INT)", "CAST(b AS STRING)", "CAST(i AS STRING)",
	"CAST(a AS DECIMAL(6,1))", "CAST(l AS DOUBLE) > 1000.5", "CAST(dt AS STRING)", "dt < '2020-01-01'", "ts >= '2020-01-01 00:00:00'",
	"CAST(ts AS DATE) = dt", "CAST(ts AS STRING)", "(i / 4) > 1.2", "a <=> b", "-a < b", "l % 7 = 0", "a * 3 = a + a + a",
	"a * 1.5 + b", "`s` = 'NEW' AND a * i >= 0", "isnotnull(d) AND d <> d",
}

var consInputSchema = &deltalog.StructType{Fields: []*deltalog.StructField{
	{Name: "a", Type: deltalog.DecimalType{Precision: 10, Scale: 2}, Nullable: true},
	{Name: "b", Type: deltalog.DecimalType{Precision: 5, Scale: 3}, Nullable: true},
	{Name: "i", Type: deltalog.Integer, Nullable: true},
	{Name: "l", Type: deltalog.Long, Nullable: true},
	{Name: "d", Type: deltalog.Double, Nullable: true},
	{Name: "s", Type: deltalog.String, Nullable: true},
	{Name: "dt", Type: deltalog.Date, Nullable: true},
	{Name: "ts", Type: deltalog.Timestamp, Nullable: true},
}}

// consRow is one input row; a nil field is NULL. a and b are unscaled (cents, thousandths).
type consRow struct {
	a, b, i, l, dt, ts *int64
	d                  *float64
	s                  *string
}

func consRows() []consRow {
	r := rand.New(rand.NewPCG(41, 14))
	some := func(v int64) *int64 {
		if r.IntN(10) == 0 {
			return nil
		}
		return &v
	}
	strs := []string{"NEW", "new", "PAID", "Zoë!!", "Zoë!!!", "a_c", "abc", "a%c", "  pad  ", "", "ÄÖü", "N_x"}
	dbls := []float64{math.NaN(), 0, math.Copysign(0, -1), 1.5, -2.25, 1e10, 0.1, 3}
	var out []consRow
	for k := 0; k < 80; k++ {
		b := r.Int64N(19999) - 9999
		if b == 0 {
			b = 7
		}
		row := consRow{a: some(r.Int64N(199999) - 99999), b: some(b), i: some(r.Int64N(101) - 50), l: some(r.Int64N(2_000_001) - 1_000_000),
			dt: some(r.Int64N(40000) - 5000), ts: some(r.Int64N(2_000_000_000_000_000) - 200_000_000_000_000)}
		if r.IntN(10) != 0 {
			d := dbls[r.IntN(len(dbls))]
			if r.IntN(3) == 0 {
				d = float64(r.Int64N(4000)-2000) / 8
			}
			row.d = &d
		}
		if r.IntN(10) != 0 {
			s := strs[r.IntN(len(strs))]
			row.s = &s
		}
		out = append(out, row)
	}
	return out
}

// consValues renders rows as a Spark VALUES table t(id, a, b, i, l, d, s, dt, ts).
func consValues(rows []consRow) string {
	num := func(v *int64, f func(int64) string, typ string) string {
		if v == nil {
			return "CAST(NULL AS " + typ + ")"
		}
		return f(*v)
	}
	dec := func(scale int, typ string) func(int64) string {
		return func(v int64) string {
			return "CAST('" + expr.Decimal(deltalog.DecimalType{Precision: 38, Scale: scale}, big.NewInt(v)).String() + "' AS " + typ + ")"
		}
	}
	var b strings.Builder
	b.WriteString("VALUES ")
	for k, r := range rows {
		if k > 0 {
			b.WriteString(", ")
		}
		d := "CAST(NULL AS DOUBLE)"
		if r.d != nil {
			d = "CAST('" + strconv.FormatFloat(*r.d, 'g', -1, 64) + "' AS DOUBLE)"
			if math.IsNaN(*r.d) {
				d = "CAST('NaN' AS DOUBLE)"
			}
		}
		s := "CAST(NULL AS STRING)"
		if r.s != nil {
			s = "'" + strings.ReplaceAll(strings.ReplaceAll(*r.s, `\`, `\\`), "'", `\'`) + "'"
		}
		fmt.Fprintf(&b, "(%d, %s, %s, %s, %s, %s, %s, %s, %s)", k,
			num(r.a, dec(2, "DECIMAL(10,2)"), "DECIMAL(10,2)"), num(r.b, dec(3, "DECIMAL(5,3)"), "DECIMAL(5,3)"),
			num(r.i, func(v int64) string { return fmt.Sprintf("CAST(%d AS INT)", v) }, "INT"),
			num(r.l, func(v int64) string { return fmt.Sprintf("CAST(%d AS BIGINT)", v) }, "BIGINT"), d, s,
			num(r.dt, func(v int64) string { return fmt.Sprintf("DATE_FROM_UNIX_DATE(%d)", v) }, "DATE"),
			num(r.ts, func(v int64) string { return fmt.Sprintf("TIMESTAMP_MICROS(%d)", v) }, "TIMESTAMP"))
	}
	b.WriteString(" AS t(id, a, b, i, l, d, s, dt, ts)")
	return b.String()
}

// consArgs are row's values of e's columns.
func consArgs(e *expr.Expr, r consRow) []expr.Value {
	args := make([]expr.Value, len(e.Columns()))
	for j, c := range e.Columns() {
		v := expr.Null(c.Type)
		switch c.Name {
		case "a", "b":
			p := r.a
			if c.Name == "b" {
				p = r.b
			}
			if p != nil {
				v = expr.Decimal(c.Type.(deltalog.DecimalType), big.NewInt(*p))
			}
		case "i", "l", "dt", "ts":
			p := map[string]*int64{"i": r.i, "l": r.l, "dt": r.dt, "ts": r.ts}[c.Name]
			if p != nil {
				v = expr.Int(c.Type, *p)
			}
		case "d":
			if r.d != nil {
				v = expr.Float(c.Type, *r.d)
			}
		case "s":
			if r.s != nil {
				v = expr.Str(*r.s)
			}
		}
		args[j] = v
	}
	return args
}

// consCanon renders a result for comparison: decimals by exact value (the Spark helper
// prints Python's str(Decimal), e.g. 0E-10), strings quoted, the rest as JSON.
func consCanon(t deltalog.DataType, raw string) string {
	raw = strings.TrimSpace(raw)
	if raw == "null" {
		return raw
	}
	if _, ok := t.(deltalog.DecimalType); ok {
		var s string
		if json.Unmarshal([]byte(raw), &s) == nil {
			raw = s
		}
		if r, ok := new(big.Rat).SetString(raw); ok {
			return r.RatString()
		}
	}
	return raw
}

func consGo(v expr.Value) string {
	if v.Null {
		return "null"
	}
	switch v.Type {
	case deltalog.Boolean:
		return strconv.FormatBool(v.Int != 0)
	case deltalog.String:
		b, _ := json.Marshal(v.Str)
		return string(b)
	}
	if _, ok := v.Type.(deltalog.DecimalType); ok {
		r, _ := new(big.Rat).SetString(v.String())
		return r.RatString()
	}
	return v.String()
}

// constraintsPropertyVsSpark compares ingestd's evaluator with Spark on consExprs ×
// consRows in one query.
func constraintsPropertyVsSpark(t *testing.T, spark *sparkSession) {
	rows := consRows()
	compiled := make([]*expr.Expr, len(consExprs))
	cols := make([]string, len(consExprs))
	for k, src := range consExprs {
		e, err := expr.Compile(src, consInputSchema, expr.Options{TimeZone: time.UTC})
		if err != nil {
			t.Fatalf("compile %s: %v", src, err)
		}
		if e.Type() == deltalog.Double || e.Type() == deltalog.Float {
			t.Fatalf("%s is a %s: compare doubles through a predicate (NaN is not JSON)", src, e.Type())
		}
		compiled[k] = e
		cols[k] = fmt.Sprintf("%s AS e%d", src, k)
	}
	spark.call(t, map[string]any{"op": "sql", "query": "SET spark.sql.session.timeZone=UTC"}, nil)
	var got []map[string]json.RawMessage
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT id, " + strings.Join(cols, ", ") + " FROM " + consValues(rows) + " ORDER BY id"}, &got)
	if len(got) != len(rows) {
		t.Fatalf("Spark returned %d rows, want %d", len(got), len(rows))
	}
	cases, mismatches, nonNull := 0, 0, 0
	for i, r := range rows {
		for k, e := range compiled {
			cases++
			v, err := e.Eval(consArgs(e, r))
			if err != nil {
				t.Errorf("%s on row %d: %v (Spark evaluated it)", consExprs[k], i, err)
				continue
			}
			g, w := consCanon(e.Type(), string(got[i][fmt.Sprintf("e%d", k)])), consGo(v)
			if g != "null" {
				nonNull++
			}
			if g != w {
				if mismatches++; mismatches <= 40 {
					t.Errorf("%s on row %d (%s): Spark %s, ingestd %s", consExprs[k], i, consValues(rows[i:i+1]), g, w)
				}
			}
		}
	}
	t.Logf("%d (expression, row) cases compared with Spark, %d mismatches, %d non-NULL results", cases, mismatches, nonNull)
	if cases < 3000 || nonNull < cases*6/10 {
		t.Fatalf("the comparison is too weak: %d cases, %d non-NULL", cases, nonNull)
	}
}
