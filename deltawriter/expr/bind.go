package expr

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// ErrUnsupported is wrapped by Bind's errors for a function, operator, type or argument
// the evaluator does not implement (as opposed to an expression that is wrong, such as
// an unknown column).
var ErrUnsupported = errors.New("not supported by ingestd's expression evaluator")

// Supported lists the functions and constructs Bind accepts, for messages and the README.
const Supported = "a bare column, CAST(x AS DATE), date(x), to_date(x), date_format(x, pattern) " +
	"(pattern letters y M d H m s), year(x), month(x), day(x), dayofmonth(x), hour(x), " +
	"date_trunc('HOUR'|'DAY', x), substring(s, pos[, len]) / substr, and literals"

// Options are the session settings an expression is bound with.
type Options struct {
	// TimeZone is Spark's session time zone (spark.sql.session.timeZone), used by
	// conversions between timestamp and local date/time; nil means UTC.
	TimeZone *time.Location
}

// Expr is an expression bound to a table schema: typed, with its columns resolved.
type Expr struct {
	src     string
	root    evaluator
	columns []*deltalog.StructField
}

// Type is the expression's result type (a Delta primitive type).
func (e *Expr) Type() deltalog.DataType { return e.root.typ() }

// Columns are the table's top-level columns the expression reads, in the order Eval takes
// their values; each is the schema's field (its spelling, not the expression's).
func (e *Expr) Columns() []*deltalog.StructField { return e.columns }

// String is the expression's SQL text as given to Bind.
func (e *Expr) String() string { return e.src }

// Eval evaluates the expression on one row: args[i] is the value of Columns()[i]. An
// error is a value the expression cannot be evaluated on (as Spark's ANSI mode fails the
// query: a string that is not a date, …), naming the expression and the value.
func (e *Expr) Eval(args []Value) (Value, error) {
	v, err := e.root.eval(args)
	if err != nil {
		return Value{}, fmt.Errorf("evaluate %s: %w", e.src, err)
	}
	return v, nil
}

// Compile is Parse and Bind.
func Compile(src string, schema *deltalog.StructType, opts Options) (*Expr, error) {
	n, err := Parse(src)
	if err != nil {
		return nil, err
	}
	return Bind(src, n, schema, opts)
}

// Bind resolves and types n (parsed from src) against the top-level columns of schema.
// Column names match case-insensitively (Spark's default spark.sql.caseSensitive=false,
// via deltalog's Delta name matching). Errors name the construct and, for what the
// evaluator does not implement, wrap ErrUnsupported.
func Bind(src string, n Node, schema *deltalog.StructType, opts Options) (*Expr, error) {
	loc := opts.TimeZone
	if loc == nil {
		loc = time.UTC
	}
	b := &binder{schema: schema, loc: loc, index: map[*deltalog.StructField]int{}}
	root, err := b.bind(n)
	if err != nil {
		return nil, fmt.Errorf("bind expression %q: %w", src, err)
	}
	return &Expr{src: src, root: root, columns: b.cols}, nil
}

type binder struct {
	schema *deltalog.StructType
	loc    *time.Location
	cols   []*deltalog.StructField
	index  map[*deltalog.StructField]int
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%s: %w (supported: %s)", fmt.Sprintf(format, args...), ErrUnsupported, Supported)
}

func (b *binder) bind(n Node) (evaluator, error) {
	switch n := n.(type) {
	case Lit:
		return b.literal(n)
	case Col:
		if len(n.Parts) != 1 {
			return nil, unsupported("nested field reference %s", String(n))
		}
		f := b.schema.FieldByKey(n.Parts[0])
		if f == nil {
			return nil, fmt.Errorf("column %s does not exist in the table", String(n))
		}
		t, ok := f.Type.(deltalog.PrimitiveType)
		if !ok || !evaluable(t) {
			return nil, unsupported("column %s of type %s", String(n), f.Type)
		}
		i, ok := b.index[f]
		if !ok {
			i = len(b.cols)
			b.index[f] = i
			b.cols = append(b.cols, f)
		}
		return colRef{i: i, t: t}, nil
	case Cast:
		x, err := b.bind(n.X)
		if err != nil {
			return nil, err
		}
		switch n.Type {
		case "date":
			return b.toDate(x, String(n))
		}
		return nil, unsupported("CAST to %s in %s", strings.ToUpper(n.Type), String(n))
	case Call:
		return b.call(n)
	case Unary:
		return nil, unsupported("operator %s in %s", n.Op, String(n))
	case Binary:
		return nil, unsupported("operator %s in %s", n.Op, String(n))
	case IsNull:
		return nil, unsupported("IS NULL in %s", String(n))
	case In:
		return nil, unsupported("IN in %s", String(n))
	case Between:
		return nil, unsupported("BETWEEN in %s", String(n))
	case Like:
		return nil, unsupported("LIKE in %s", String(n))
	}
	return nil, fmt.Errorf("unknown syntax node %T", n)
}

func evaluable(t deltalog.PrimitiveType) bool {
	switch t {
	case deltalog.String, deltalog.Long, deltalog.Integer, deltalog.Short, deltalog.Byte,
		deltalog.Date, deltalog.Timestamp, deltalog.TimestampNtz, deltalog.Boolean, deltalog.Binary:
		return true
	}
	return false
}

func (b *binder) literal(n Lit) (evaluator, error) {
	switch n.Kind {
	case "string":
		return lit{Str(n.Text)}, nil
	case "null":
		return lit{Null(deltalog.Void)}, nil
	case "boolean":
		v := int64(0)
		if n.Text == "true" {
			v = 1
		}
		return lit{Int(deltalog.Boolean, v)}, nil
	case "integer":
		v, err := strconv.ParseInt(n.Text, 10, 64)
		if err != nil {
			return nil, unsupported("integer literal %s out of the range of long", n.Text)
		}
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			return lit{Int(deltalog.Integer, v)}, nil
		}
		return lit{Int(deltalog.Long, v)}, nil
	}
	return nil, unsupported("%s literal %s", n.Kind, n.Text)
}

// toDate is Spark's cast to date of x (explicit, or the implicit cast of a date
// function's argument): from timestamp in the session zone, timestamp_ntz without one,
// string by Spark's stringToDate, date unchanged.
func (b *binder) toDate(x evaluator, what string) (evaluator, error) {
	switch x.typ() {
	case deltalog.Date:
		return x, nil
	case deltalog.Timestamp, deltalog.TimestampNtz, deltalog.String, deltalog.Void:
		return castDate{x: x, loc: b.loc}, nil
	}
	return nil, unsupported("a %s argument in %s (Spark casts only timestamp, timestamp_ntz, date and string to date)", x.typ(), what)
}

// toTimestamp is Spark's implicit cast to timestamp of x: from date at the start of the
// day and from timestamp_ntz, both in the session zone.
func (b *binder) toTimestamp(x evaluator, what string) (evaluator, error) {
	switch x.typ() {
	case deltalog.Timestamp:
		return x, nil
	case deltalog.Date, deltalog.TimestampNtz, deltalog.Void:
		return castTimestamp{x: x, loc: b.loc}, nil
	}
	return nil, unsupported("a %s argument in %s (timestamp, timestamp_ntz or date)", x.typ(), what)
}

func (b *binder) call(n Call) (evaluator, error) {
	name := strings.ToLower(n.Name)
	what := String(n)
	args := make([]evaluator, len(n.Args))
	for i, a := range n.Args {
		x, err := b.bind(a)
		if err != nil {
			return nil, err
		}
		args[i] = x
	}
	arity := func(lo, hi int) error {
		if len(args) < lo || len(args) > hi {
			if lo == hi {
				return fmt.Errorf("%s takes %d argument(s), %s has %d", name, lo, what, len(args))
			}
			return fmt.Errorf("%s takes %d to %d arguments, %s has %d", name, lo, hi, what, len(args))
		}
		return nil
	}
	switch name {
	case "date", "to_date":
		if len(args) == 2 && name == "to_date" {
			return nil, unsupported("to_date with a format in %s", what)
		}
		if err := arity(1, 1); err != nil {
			return nil, err
		}
		return b.toDate(args[0], what)
	case "year", "month", "day", "dayofmonth":
		if err := arity(1, 1); err != nil {
			return nil, err
		}
		d, err := b.toDate(args[0], what)
		if err != nil {
			return nil, err
		}
		f := map[string]byte{"year": 'y', "month": 'M', "day": 'd', "dayofmonth": 'd'}[name]
		return dateField{x: d, field: f}, nil
	case "hour":
		if err := arity(1, 1); err != nil {
			return nil, err
		}
		if args[0].typ() == deltalog.TimestampNtz {
			return hourOf{x: args[0], loc: time.UTC}, nil
		}
		ts, err := b.toTimestamp(args[0], what)
		if err != nil {
			return nil, err
		}
		return hourOf{x: ts, loc: b.loc}, nil
	case "date_format":
		if err := arity(2, 2); err != nil {
			return nil, err
		}
		pat, ok := n.Args[1].(Lit)
		if !ok || pat.Kind != "string" {
			return nil, unsupported("a pattern that is not a string literal in %s", what)
		}
		p, err := compilePattern(pat.Text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		ts, err := b.toTimestamp(args[0], what)
		if err != nil {
			return nil, err
		}
		return dateFormat{x: ts, pattern: p, loc: b.loc}, nil
	case "date_trunc":
		if err := arity(2, 2); err != nil {
			return nil, err
		}
		unit, ok := n.Args[0].(Lit)
		if !ok || unit.Kind != "string" {
			return nil, unsupported("a unit that is not a string literal in %s", what)
		}
		var u string
		switch strings.ToUpper(unit.Text) {
		case "HOUR":
			u = "HOUR"
		case "DAY", "DD":
			u = "DAY"
		default:
			return nil, unsupported("date_trunc unit %q in %s (HOUR or DAY)", unit.Text, what)
		}
		ts, err := b.toTimestamp(args[1], what)
		if err != nil {
			return nil, err
		}
		return dateTrunc{x: ts, unit: u, loc: b.loc}, nil
	case "substring", "substr":
		if err := arity(2, 3); err != nil {
			return nil, err
		}
		if t := args[0].typ(); t != deltalog.String && t != deltalog.Void {
			return nil, unsupported("a %s first argument in %s (string)", t, what)
		}
		for _, a := range args[1:] {
			switch a.typ() {
			case deltalog.Integer, deltalog.Short, deltalog.Byte, deltalog.Void:
			default:
				return nil, unsupported("a %s position or length in %s (integer)", a.typ(), what)
			}
		}
		s := substring{s: args[0], pos: args[1]}
		if len(args) == 3 {
			s.n = args[2]
		}
		return s, nil
	}
	return nil, unsupported("function %s in %s", n.Name, what)
}

// supportedFunctions are the functions Bind evaluates (lower-case names).
var supportedFunctions = map[string]bool{"date": true, "to_date": true, "year": true, "month": true, "day": true,
	"dayofmonth": true, "hour": true, "date_format": true, "date_trunc": true, "substring": true, "substr": true}

// CheckSupported reports, before a schema is known, whether n uses only functions and
// constructs Bind evaluates: it returns the first other one, named, wrapping
// ErrUnsupported. Bind still checks types, arities and columns.
func CheckSupported(n Node) error {
	switch n := n.(type) {
	case Lit:
		if n.Kind == "decimal" {
			return unsupported("decimal literal %s", n.Text)
		}
		return nil
	case Col:
		if len(n.Parts) != 1 {
			return unsupported("nested field reference %s", String(n))
		}
		return nil
	case Cast:
		if n.Type != "date" {
			return unsupported("CAST to %s in %s", strings.ToUpper(n.Type), String(n))
		}
		return CheckSupported(n.X)
	case Call:
		if !supportedFunctions[strings.ToLower(n.Name)] {
			return unsupported("function %s in %s", n.Name, String(n))
		}
		for _, a := range n.Args {
			if err := CheckSupported(a); err != nil {
				return err
			}
		}
		return nil
	}
	_, err := (&binder{schema: &deltalog.StructType{}}).bind(n) // the operators' messages
	return err
}

// Columns returns the column references of n, as written (first part), in order of
// appearance, each once.
func Columns(n Node) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(Node)
	walk = func(n Node) {
		switch n := n.(type) {
		case Col:
			if !seen[n.Parts[0]] {
				seen[n.Parts[0]] = true
				out = append(out, n.Parts[0])
			}
		case Cast:
			walk(n.X)
		case Call:
			for _, a := range n.Args {
				walk(a)
			}
		case Unary:
			walk(n.X)
		case Binary:
			walk(n.L)
			walk(n.R)
		case IsNull:
			walk(n.X)
		case In:
			walk(n.X)
			for _, a := range n.List {
				walk(a)
			}
		case Between:
			walk(n.X)
			walk(n.Lo)
			walk(n.Hi)
		case Like:
			walk(n.X)
			walk(n.Pattern)
		}
	}
	walk(n)
	return out
}
