package expr

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Operators and functions of the CHECK-constraint subset, with Spark's three-valued logic:
// a NULL operand makes a comparison, arithmetic or string function NULL; AND and OR follow
// Kleene's logic (false AND NULL is false, true OR NULL is true).

var (
	boolTrue  = Int(deltalog.Boolean, 1)
	boolFalse = Int(deltalog.Boolean, 0)
	boolNull  = Null(deltalog.Boolean)
)

func boolOf(b bool) Value {
	if b {
		return boolTrue
	}
	return boolFalse
}

// comparison is l op r on operands of one type (the binder casts them).
type comparison struct {
	op   string // =, <=>, <>, <, <=, >, >=
	l, r evaluator
}

func (c comparison) typ() deltalog.DataType { return deltalog.Boolean }
func (c comparison) eval(row []Value) (Value, error) {
	a, err := c.l.eval(row)
	if err != nil {
		return Value{}, err
	}
	b, err := c.r.eval(row)
	if err != nil {
		return Value{}, err
	}
	if c.op == "<=>" {
		return boolOf(NullSafeEqual(a, b)), nil
	}
	if a.Null || b.Null {
		return boolNull, nil
	}
	k := compareValues(a, b)
	switch c.op {
	case "=":
		return boolOf(k == 0), nil
	case "<>":
		return boolOf(k != 0), nil
	case "<":
		return boolOf(k < 0), nil
	case "<=":
		return boolOf(k <= 0), nil
	case ">":
		return boolOf(k > 0), nil
	}
	return boolOf(k >= 0), nil
}

// logic is l AND r or l OR r (Kleene): the right side is evaluated only when needed, as
// Spark does (false AND x never fails on x).
type logic struct {
	and  bool
	l, r evaluator
}

func (g logic) typ() deltalog.DataType { return deltalog.Boolean }
func (g logic) eval(row []Value) (Value, error) {
	a, err := g.l.eval(row)
	if err != nil {
		return Value{}, err
	}
	if !a.Null && (a.Int != 0) != g.and { // false AND …, true OR …
		return a, nil
	}
	b, err := g.r.eval(row)
	if err != nil {
		return Value{}, err
	}
	switch {
	case !b.Null && (b.Int != 0) != g.and:
		return b, nil
	case a.Null || b.Null:
		return boolNull, nil
	}
	return a, nil
}

type not struct{ x evaluator }

func (n not) typ() deltalog.DataType { return deltalog.Boolean }
func (n not) eval(row []Value) (Value, error) {
	v, err := n.x.eval(row)
	if err != nil || v.Null {
		return boolNull, err
	}
	return boolOf(v.Int == 0), nil
}

type isNull struct {
	x   evaluator
	not bool
}

func (n isNull) typ() deltalog.DataType { return deltalog.Boolean }
func (n isNull) eval(row []Value) (Value, error) {
	v, err := n.x.eval(row)
	if err != nil {
		return Value{}, err
	}
	return boolOf(v.Null != n.not), nil
}

// inList is Spark's In: true when x equals an element; else NULL when x or an element is
// NULL; else false.
type inList struct {
	x    evaluator
	list []evaluator
}

func (n inList) typ() deltalog.DataType { return deltalog.Boolean }
func (n inList) eval(row []Value) (Value, error) {
	v, err := n.x.eval(row)
	if err != nil || v.Null {
		return boolNull, err
	}
	hasNull := false
	for _, e := range n.list {
		w, err := e.eval(row)
		if err != nil {
			return Value{}, err
		}
		if w.Null {
			hasNull = true
			continue
		}
		if compareValues(v, w) == 0 {
			return boolTrue, nil
		}
	}
	if hasNull {
		return boolNull, nil
	}
	return boolFalse, nil
}

// like is Spark's Like: _ matches one character, % any run of characters, the escape
// character (\ by default) makes the next _, % or itself literal.
type like struct {
	x, pat evaluator
	esc    rune
	fixed  []likeToken // the compiled pattern when it is a literal
}

type likeToken struct {
	any, one bool // %, _
	r        rune
}

func compileLike(p string, esc rune) ([]likeToken, error) {
	var out []likeToken
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == esc:
			if i+1 >= len(rs) {
				return nil, fmt.Errorf("the pattern %q ends with the escape character (INVALID_FORMAT.ESC_AT_THE_END: %w)", p, errArithmetic)
			}
			n := rs[i+1]
			if n != '_' && n != '%' && n != esc {
				return nil, fmt.Errorf("the pattern %q has the escape character before %q (INVALID_FORMAT.ESC_IN_THE_MIDDLE: %w)", p, n, errArithmetic)
			}
			out = append(out, likeToken{r: n})
			i++
		case c == '%':
			out = append(out, likeToken{any: true})
		case c == '_':
			out = append(out, likeToken{one: true})
		default:
			out = append(out, likeToken{r: c})
		}
	}
	return out, nil
}

// matchLike matches s against the tokens (iterative, with backtracking to the last %).
func matchLike(s []rune, p []likeToken) bool {
	si, pi, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && !p[pi].any && (p[pi].one || p[pi].r == s[si]):
			si++
			pi++
		case pi < len(p) && p[pi].any:
			star, mark = pi, si
			pi++
		case star >= 0:
			mark++
			si, pi = mark, star+1
		default:
			return false
		}
	}
	for pi < len(p) && p[pi].any {
		pi++
	}
	return pi == len(p)
}

func (l like) typ() deltalog.DataType { return deltalog.Boolean }
func (l like) eval(row []Value) (Value, error) {
	v, err := l.x.eval(row)
	if err != nil || v.Null {
		return boolNull, err
	}
	toks := l.fixed
	if toks == nil {
		p, err := l.pat.eval(row)
		if err != nil || p.Null {
			return boolNull, err
		}
		if toks, err = compileLike(p.Str, l.esc); err != nil {
			return Value{}, err
		}
	}
	return boolOf(matchLike([]rune(v.Str), toks)), nil
}

// arith is l op r (+ - * / %) on operands cast to the operation's type; t is the result
// type (decimal precision and scale by Spark's DecimalPrecision rules).
type arith struct {
	op   string
	l, r evaluator
	t    deltalog.DataType
}

func (a arith) typ() deltalog.DataType { return a.t }
func (a arith) eval(row []Value) (Value, error) {
	x, err := a.l.eval(row)
	if err != nil {
		return Value{}, err
	}
	y, err := a.r.eval(row)
	if err != nil {
		return Value{}, err
	}
	if x.Null || y.Null {
		return Null(a.t), nil
	}
	divZero := func() error {
		return fmt.Errorf("division by zero in %s %s %s (DIVIDE_BY_ZERO: %w)", x, a.op, y, errArithmetic)
	}
	switch {
	case isIntegral(a.t):
		var r int64
		ok := true
		switch a.op {
		case "+":
			r = x.Int + y.Int
			ok = (r > x.Int) == (y.Int > 0) || y.Int == 0
		case "-":
			r = x.Int - y.Int
			ok = (r < x.Int) == (y.Int > 0) || y.Int == 0
		case "*":
			r = x.Int * y.Int
			ok = x.Int == 0 || (r/x.Int == y.Int && !(x.Int == -1 && y.Int == math.MinInt64))
		case "%":
			if y.Int == 0 {
				return Value{}, divZero()
			}
			if y.Int == -1 {
				r = 0
			} else {
				r = x.Int % y.Int
			}
		}
		lo, hi := integralBounds(a.t)
		if !ok || r < lo || r > hi {
			return Value{}, fmt.Errorf("%s %s %s overflows %s (ARITHMETIC_OVERFLOW: %w)", x, a.op, y, a.t, errArithmetic)
		}
		return Int(a.t, r), nil
	case isFloating(a.t):
		var r float64
		switch a.op {
		case "+":
			r = x.F + y.F
		case "-":
			r = x.F - y.F
		case "*":
			r = x.F * y.F
		case "/":
			if y.F == 0 {
				return Value{}, divZero()
			}
			r = x.F / y.F
		case "%":
			if y.F == 0 {
				return Value{}, divZero()
			}
			r = math.Mod(x.F, y.F)
		}
		if a.t == deltalog.Float {
			r = float64(float32(r))
		}
		return Float(a.t, r), nil
	}
	d := a.t.(deltalog.DecimalType)
	sx, sy := x.Type.(deltalog.DecimalType).Scale, y.Type.(deltalog.DecimalType).Scale
	var u *big.Int
	var scale int
	switch a.op {
	case "+", "-":
		scale = max(sx, sy)
		p, q := rescale(x.Dec, sx, scale), rescale(y.Dec, sy, scale)
		if a.op == "+" {
			u = new(big.Int).Add(p, q)
		} else {
			u = new(big.Int).Sub(p, q)
		}
	case "*":
		u, scale = new(big.Int).Mul(x.Dec, y.Dec), sx+sy
	case "/":
		if y.Dec.Sign() == 0 {
			return Value{}, divZero()
		}
		// Spark's Decimal./: BigDecimal.divide at scale 39 with HALF_UP, then the cast to
		// the result type rounds again.
		scale = maxPrecision + 1
		num := new(big.Int).Mul(x.Dec, pow10(scale-sx+sy))
		u = divHalfUp(num, new(big.Int).Abs(y.Dec))
		if y.Dec.Sign() < 0 {
			u.Neg(u)
		}
	case "%":
		if y.Dec.Sign() == 0 {
			return Value{}, divZero()
		}
		scale = max(sx, sy)
		u = new(big.Int).Rem(rescale(x.Dec, sx, scale), rescale(y.Dec, sy, scale))
	}
	return toDecimal(u, scale, d)
}

// decimalResult is the result type of a decimal operation (Spark's DecimalPrecision).
func decimalResult(op string, a, b deltalog.DecimalType) deltalog.DecimalType {
	p1, s1, p2, s2 := a.Precision, a.Scale, b.Precision, b.Scale
	switch op {
	case "+", "-":
		s := max(s1, s2)
		return adjustPrecisionScale(max(p1-s1, p2-s2)+s+1, s)
	case "*":
		return adjustPrecisionScale(p1+p2+1, s1+s2)
	case "/":
		s := max(6, s1+p2+1)
		return adjustPrecisionScale(p1-s1+s2+s, s)
	}
	s := max(s1, s2) // %
	return adjustPrecisionScale(min(p1-s1, p2-s2)+s, s)
}

// negate is -x.
type negate struct{ x evaluator }

func (n negate) typ() deltalog.DataType { return n.x.typ() }
func (n negate) eval(row []Value) (Value, error) {
	v, err := n.x.eval(row)
	if err != nil || v.Null {
		return Null(n.typ()), err
	}
	switch t := v.Type; {
	case isIntegral(t):
		if lo, _ := integralBounds(t); v.Int == lo {
			return Value{}, fmt.Errorf("-(%s) overflows %s (ARITHMETIC_OVERFLOW: %w)", v, t, errArithmetic)
		}
		return Int(t, -v.Int), nil
	case isFloating(t):
		return Float(t, -v.F), nil
	}
	return Decimal(v.Type.(deltalog.DecimalType), new(big.Int).Neg(v.Dec)), nil
}

// coalesce is the first non-NULL argument (arguments after it are not evaluated).
type coalesce struct {
	args []evaluator
	t    deltalog.DataType
}

func (c coalesce) typ() deltalog.DataType { return c.t }
func (c coalesce) eval(row []Value) (Value, error) {
	for _, a := range c.args {
		v, err := a.eval(row)
		if err != nil {
			return Value{}, err
		}
		if !v.Null {
			return v, nil
		}
	}
	return Null(c.t), nil
}

// stringFn is length, lower, upper, trim, ltrim or rtrim of a string.
type stringFn struct {
	name string
	x    evaluator
}

func (s stringFn) typ() deltalog.DataType {
	if s.name == "length" {
		return deltalog.Integer
	}
	return deltalog.String
}

func (s stringFn) eval(row []Value) (Value, error) {
	v, err := s.x.eval(row)
	if err != nil || v.Null {
		return Null(s.typ()), err
	}
	switch s.name {
	case "length": // characters (code points), not bytes; a binary's bytes
		if v.Type == deltalog.Binary {
			return Int(deltalog.Integer, int64(len(v.Str))), nil
		}
		return Int(deltalog.Integer, int64(utf8.RuneCountInString(v.Str))), nil
	case "lower":
		return Str(caseMap(v.Str, false)), nil
	case "upper":
		return Str(caseMap(v.Str, true)), nil
	case "trim": // Spark's UTF8String.trim: the space character only
		return Str(strings.Trim(v.Str, " ")), nil
	case "ltrim":
		return Str(strings.TrimLeft(v.Str, " ")), nil
	}
	return Str(strings.TrimRight(v.Str, " ")), nil
}

// caseMap is Spark's upper (up) or lower of s: ASCII letters mapped directly (Spark's
// UTF8String fast path), anything else by Unicode's full, locale-independent case mapping
// as Java's String.toUpperCase/toLowerCase: SpecialCasing's one-to-many mappings (ß → SS,
// ﬁ → FI, İ → i̇) and the final sigma (ΟΔΟΣ → οδος), which per-rune mapping misses.
func caseMap(s string, up bool) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		if up {
			return strings.ToUpper(s)
		}
		return strings.ToLower(s)
	}
	// A Caser keeps state: one per call (the evaluator runs on several goroutines).
	if up {
		return cases.Upper(language.Und).String(s)
	}
	return cases.Lower(language.Und).String(s)
}
