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
const Supported = "columns (`backticked` names may hold spaces and dots), literals (string, integer, decimal, " +
	"boolean, NULL), comparisons (= == <=> <> != < <= > >=), AND, OR, NOT, IS [NOT] NULL, [NOT] IN (…), " +
	"[NOT] BETWEEN, [NOT] LIKE [ESCAPE], + - * / %, CAST(x AS numeric|string|boolean|date|timestamp), " +
	"coalesce, nvl, ifnull, isnull, isnotnull, length, char_length, character_length, lower, lcase, upper, ucase, " +
	"trim, ltrim, rtrim, date(x), to_date(x), date_format(x, pattern) (pattern letters y M d H m s), year(x), " +
	"month(x), day(x), dayofmonth(x), hour(x), date_trunc('HOUR'|'DAY', x), substring(s, pos[, len]) / substr"

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
		t := f.Type
		if !evaluable(t) {
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
		t, ok := parseCastType(n.Type)
		switch {
		case !ok:
			return nil, unsupported("CAST to %s in %s", strings.ToUpper(n.Type), String(n))
		case t == deltalog.Date:
			return b.toDate(x, String(n))
		case !castable(x.typ(), t):
			return nil, unsupported("CAST from %s to %s in %s", x.typ(), t, String(n))
		}
		return castTo{x: x, t: t, loc: b.loc}, nil
	case Call:
		return b.call(n)
	case Unary:
		return b.unary(n)
	case Binary:
		return b.binary(n)
	case IsNull:
		x, err := b.bind(n.X)
		if err != nil {
			return nil, err
		}
		return isNull{x: x, not: n.Not}, nil
	case In:
		return b.in(n)
	case Between:
		x, err := b.bind(n.X)
		if err != nil {
			return nil, err
		}
		lo, err := b.bind(n.Lo)
		if err != nil {
			return nil, err
		}
		hi, err := b.bind(n.Hi)
		if err != nil {
			return nil, err
		}
		// Spark rewrites x BETWEEN lo AND hi to x >= lo AND x <= hi.
		ge, err := b.compare(">=", x, lo, String(n))
		if err != nil {
			return nil, err
		}
		le, err := b.compare("<=", x, hi, String(n))
		if err != nil {
			return nil, err
		}
		var e evaluator = logic{and: true, l: ge, r: le}
		if n.Not {
			e = not{e}
		}
		return e, nil
	case Like:
		return b.like(n)
	}
	return nil, fmt.Errorf("unknown syntax node %T", n)
}

func evaluable(t deltalog.DataType) bool {
	switch t {
	case deltalog.String, deltalog.Long, deltalog.Integer, deltalog.Short, deltalog.Byte, deltalog.Float, deltalog.Double,
		deltalog.Date, deltalog.Timestamp, deltalog.TimestampNtz, deltalog.Boolean, deltalog.Binary:
		return true
	}
	return isDecimal(t)
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
	case "decimal":
		u, t, ok := parseDecimalLiteral(n.Text)
		if !ok {
			return nil, unsupported("decimal literal %s (more than 38 digits)", n.Text)
		}
		return lit{Decimal(t, u)}, nil
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
	case "coalesce", "nvl", "ifnull":
		if name == "coalesce" && len(args) == 0 {
			return nil, fmt.Errorf("coalesce takes at least 1 argument, %s has none", what)
		}
		if name != "coalesce" {
			if err := arity(2, 2); err != nil {
				return nil, err
			}
		}
		t, err := b.common(args, what)
		if err != nil {
			return nil, err
		}
		for i := range args {
			args[i] = b.coerce(args[i], t)
		}
		return coalesce{args: args, t: t}, nil
	case "isnull", "isnotnull":
		if err := arity(1, 1); err != nil {
			return nil, err
		}
		return isNull{x: args[0], not: name == "isnotnull"}, nil
	case "length", "char_length", "character_length", "lower", "lcase", "upper", "ucase", "trim", "ltrim", "rtrim":
		if err := arity(1, 1); err != nil {
			return nil, err
		}
		t := args[0].typ()
		if t != deltalog.String && t != deltalog.Void && !(t == deltalog.Binary && strings.HasSuffix(name, "length")) {
			return nil, unsupported("a %s argument in %s (string)", t, what)
		}
		canon := map[string]string{"char_length": "length", "character_length": "length", "lcase": "lower", "ucase": "upper"}[name]
		if canon == "" {
			canon = name
		}
		return stringFn{name: canon, x: args[0]}, nil
	}
	return nil, unsupported("function %s in %s", n.Name, what)
}

// litOf returns the value of x when it is an integral literal (for decimal widening).
func litOf(x evaluator) *Value {
	if l, ok := x.(lit); ok && isIntegral(l.v.Type) {
		return &l.v
	}
	return nil
}

// coerce casts x to t (an implicit cast of Spark's type coercion) unless it has type t.
func (b *binder) coerce(x evaluator, t deltalog.DataType) evaluator {
	if x.typ() == t {
		return x
	}
	if t == deltalog.Date {
		return castDate{x: x, loc: b.loc}
	}
	return castTo{x: x, t: t, loc: b.loc}
}

// common is the type args are coerced to (Spark's findWiderCommonType).
func (b *binder) common(args []evaluator, what string) (deltalog.DataType, error) {
	var t deltalog.DataType = deltalog.Void
	var tl *Value
	for i, a := range args {
		w, ok := wider(t, a.typ(), tl, litOf(a))
		if !ok {
			return nil, unsupported("mixing %s and %s in %s", t, a.typ(), what)
		}
		if i == 0 {
			tl = litOf(a)
		} else if w != t {
			tl = nil
		}
		t = w
	}
	return t, nil
}

func (b *binder) compare(op string, l, r evaluator, what string) (evaluator, error) {
	t, ok := wider(l.typ(), r.typ(), litOf(l), litOf(r))
	if !ok {
		return nil, unsupported("comparing %s with %s in %s", l.typ(), r.typ(), what)
	}
	switch op {
	case "==":
		op = "="
	case "!=":
		op = "<>"
	}
	return comparison{op: op, l: b.coerce(l, t), r: b.coerce(r, t)}, nil
}

func (b *binder) boolean(x evaluator, what string) error {
	if t := x.typ(); t != deltalog.Boolean && t != deltalog.Void {
		return fmt.Errorf("%s needs a boolean operand, not %s", what, t)
	}
	return nil
}

func (b *binder) unary(n Unary) (evaluator, error) {
	what := String(n)
	x, err := b.bind(n.X)
	if err != nil {
		return nil, err
	}
	switch n.Op {
	case "NOT":
		if err := b.boolean(x, what); err != nil {
			return nil, err
		}
		return not{x}, nil
	case "-", "+":
		if t := x.typ(); !isNumeric(t) {
			return nil, unsupported("unary %s of a %s in %s (numeric)", n.Op, t, what)
		}
		if n.Op == "+" {
			return x, nil
		}
		return negate{x}, nil
	}
	return nil, unsupported("operator %s in %s", n.Op, what)
}

func (b *binder) binary(n Binary) (evaluator, error) {
	what := String(n)
	if n.Op == "||" {
		return nil, unsupported("operator || in %s", what)
	}
	l, err := b.bind(n.L)
	if err != nil {
		return nil, err
	}
	r, err := b.bind(n.R)
	if err != nil {
		return nil, err
	}
	switch n.Op {
	case "AND", "OR":
		if err := b.boolean(l, what); err != nil {
			return nil, err
		}
		if err := b.boolean(r, what); err != nil {
			return nil, err
		}
		return logic{and: n.Op == "AND", l: l, r: r}, nil
	case "=", "==", "<=>", "<>", "!=", "<", "<=", ">", ">=":
		return b.compare(n.Op, l, r, what)
	}
	return b.arith(n.Op, l, r, what)
}

// arith binds l op r for + - * / % with Spark's result types: two integral operands
// keep the wider integral type (/ is double); a decimal with an integral or decimal is a
// decimal by DecimalPrecision (an integral literal joins with its own digits); a float or
// double makes the operation double (float with float or integral stays float, except /).
func (b *binder) arith(op string, l, r evaluator, what string) (evaluator, error) {
	lt, rt := l.typ(), r.typ()
	if lt == deltalog.Void && rt == deltalog.Void {
		lt, rt = deltalog.Integer, deltalog.Integer
	}
	if lt == deltalog.Void {
		lt = rt
	}
	if rt == deltalog.Void {
		rt = lt
	}
	if !isNumeric(lt) || !isNumeric(rt) {
		return nil, unsupported("operator %s on %s and %s in %s (numeric operands)", op, lt, rt, what)
	}
	if (isDecimal(lt) || isDecimal(rt)) && !isFloating(lt) && !isFloating(rt) {
		dl, dr := asDecimalOperand(lt, litOf(l)), asDecimalOperand(rt, litOf(r))
		return arith{op: op, l: b.coerce(l, dl), r: b.coerce(r, dr), t: decimalResult(op, dl, dr)}, nil
	}
	t, _ := wider(lt, rt, nil, nil)
	if op == "/" {
		t = deltalog.Double
	}
	return arith{op: op, l: b.coerce(l, t), r: b.coerce(r, t), t: t}, nil
}

func asDecimalOperand(t deltalog.DataType, lit *Value) deltalog.DecimalType {
	if d, ok := t.(deltalog.DecimalType); ok {
		return d
	}
	return intAsDecimal(t, lit)
}

func (b *binder) in(n In) (evaluator, error) {
	what := String(n)
	x, err := b.bind(n.X)
	if err != nil {
		return nil, err
	}
	all := []evaluator{x}
	for _, e := range n.List {
		v, err := b.bind(e)
		if err != nil {
			return nil, err
		}
		all = append(all, v)
	}
	t, err := b.common(all, what)
	if err != nil {
		return nil, err
	}
	for i := range all {
		all[i] = b.coerce(all[i], t)
	}
	var e evaluator = inList{x: all[0], list: all[1:]}
	if n.Not {
		e = not{e}
	}
	return e, nil
}

func (b *binder) like(n Like) (evaluator, error) {
	what := String(n)
	x, err := b.bind(n.X)
	if err != nil {
		return nil, err
	}
	p, err := b.bind(n.Pattern)
	if err != nil {
		return nil, err
	}
	for _, e := range []evaluator{x, p} {
		if t := e.typ(); t != deltalog.String && t != deltalog.Void {
			return nil, unsupported("LIKE on a %s in %s (string)", t, what)
		}
	}
	esc := '\\'
	if n.Escape != "" {
		esc = []rune(n.Escape)[0]
	}
	l := like{x: x, pat: p, esc: esc}
	if pl, ok := p.(lit); ok && !pl.v.Null {
		toks, err := compileLike(pl.v.Str, esc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if toks == nil {
			toks = []likeToken{} // non-nil: the pattern is compiled (an empty one matches "")
		}
		l.fixed = toks
	}
	var e evaluator = l
	if n.Not {
		e = not{e}
	}
	return e, nil
}

// supportedFunctions are the functions Bind evaluates (lower-case names).
var supportedFunctions = map[string]bool{"date": true, "to_date": true, "year": true, "month": true, "day": true,
	"dayofmonth": true, "hour": true, "date_format": true, "date_trunc": true, "substring": true, "substr": true,
	"coalesce": true, "nvl": true, "ifnull": true, "isnull": true, "isnotnull": true, "length": true, "char_length": true,
	"character_length": true, "lower": true, "lcase": true, "upper": true, "ucase": true, "trim": true, "ltrim": true, "rtrim": true}

// CheckSupported reports, before a schema is known, whether n uses only functions and
// constructs Bind evaluates: it returns the first other one, named, wrapping
// ErrUnsupported. Bind still checks types, arities and columns.
func CheckSupported(n Node) error {
	var err error
	walk(n, func(n Node) bool {
		switch n := n.(type) {
		case Lit:
			if n.Kind == "decimal" {
				if _, _, ok := parseDecimalLiteral(n.Text); !ok {
					err = unsupported("decimal literal %s (more than 38 digits)", n.Text)
				}
			}
		case Col:
			if len(n.Parts) != 1 {
				err = unsupported("nested field reference %s", String(n))
			}
		case Cast:
			if _, ok := parseCastType(n.Type); !ok {
				err = unsupported("CAST to %s in %s", strings.ToUpper(n.Type), String(n))
			}
		case Call:
			if !supportedFunctions[strings.ToLower(n.Name)] {
				err = unsupported("function %s in %s", n.Name, String(n))
			}
		case Binary:
			if n.Op == "||" {
				err = unsupported("operator || in %s", String(n))
			}
		}
		return err == nil
	})
	return err
}

// walk calls f on n and, while f returns true, on its descendants, depth first.
func walk(n Node, f func(Node) bool) bool {
	if !f(n) {
		return false
	}
	var kids []Node
	switch n := n.(type) {
	case Cast:
		kids = []Node{n.X}
	case Call:
		kids = n.Args
	case Unary:
		kids = []Node{n.X}
	case Binary:
		kids = []Node{n.L, n.R}
	case IsNull:
		kids = []Node{n.X}
	case In:
		kids = append([]Node{n.X}, n.List...)
	case Between:
		kids = []Node{n.X, n.Lo, n.Hi}
	case Like:
		kids = []Node{n.X, n.Pattern}
	}
	for _, k := range kids {
		if !walk(k, f) {
			return false
		}
	}
	return true
}

// Columns returns the column references of n, as written (first part), in order of
// appearance, each once.
func Columns(n Node) []string {
	var out []string
	seen := map[string]bool{}
	Walk(n, func(n Node) {
		if c, ok := n.(Col); ok && !seen[c.Parts[0]] {
			seen[c.Parts[0]] = true
			out = append(out, c.Parts[0])
		}
	})
	return out
}
