package expr

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Numeric types, decimal precision rules and casts with Spark's semantics under ANSI mode
// (spark.sql.ansi.enabled=true, Spark 4's default): an overflow, a division by zero or a
// string that is not a number is an error (Spark fails the query), never a silent NULL.

// maxPrecision is Spark's DecimalType.MAX_PRECISION (and MAX_SCALE).
const maxPrecision = 38

// errArithmetic marks a value the expression cannot be evaluated on.
var errArithmetic = errors.New("the query fails in Spark's ANSI mode")

func isIntegral(t deltalog.DataType) bool {
	switch t {
	case deltalog.Byte, deltalog.Short, deltalog.Integer, deltalog.Long:
		return true
	}
	return false
}

func isFloating(t deltalog.DataType) bool { return t == deltalog.Float || t == deltalog.Double }

func isDecimal(t deltalog.DataType) bool { _, ok := t.(deltalog.DecimalType); return ok }

func isNumeric(t deltalog.DataType) bool { return isIntegral(t) || isFloating(t) || isDecimal(t) }

// integralRank orders the integral types by width.
func integralRank(t deltalog.DataType) int {
	switch t {
	case deltalog.Byte:
		return 1
	case deltalog.Short:
		return 2
	case deltalog.Integer:
		return 3
	}
	return 4
}

// integralBounds are the range of an integral type (long's for any other).
func integralBounds(t deltalog.DataType) (int64, int64) {
	if lo, hi, ok := deltalog.IntegerRange(t); ok {
		return lo, hi
	}
	return math.MinInt64, math.MaxInt64
}

// decimalOfIntegral is Spark's DecimalType.forType: the decimal that holds every value of
// an integral type.
func decimalOfIntegral(t deltalog.DataType) deltalog.DecimalType {
	switch t {
	case deltalog.Byte:
		return deltalog.DecimalType{Precision: 3}
	case deltalog.Short:
		return deltalog.DecimalType{Precision: 5}
	case deltalog.Integer:
		return deltalog.DecimalType{Precision: 10}
	}
	return deltalog.DecimalType{Precision: 20}
}

// boundedDecimal is Spark's DecimalType.bounded.
func boundedDecimal(p, s int) deltalog.DecimalType {
	return deltalog.DecimalType{Precision: min(p, maxPrecision), Scale: min(s, maxPrecision)}
}

// widerDecimal is Spark's DecimalType.widerDecimalType.
func widerDecimal(a, b deltalog.DecimalType) deltalog.DecimalType {
	scale := max(a.Scale, b.Scale)
	rng := max(a.Precision-a.Scale, b.Precision-b.Scale)
	return boundedDecimal(rng+scale, scale)
}

// adjustPrecisionScale is Spark's DecimalType.adjustPrecisionScale
// (spark.sql.decimalOperations.allowPrecisionLoss=true): a result wider than 38 digits
// keeps its integral digits and gives up scale, down to min(scale, 6).
func adjustPrecisionScale(p, s int) deltalog.DecimalType {
	if p <= maxPrecision {
		return deltalog.DecimalType{Precision: p, Scale: s}
	}
	intDigits := p - s
	minScale := min(s, 6)
	return deltalog.DecimalType{Precision: maxPrecision, Scale: max(maxPrecision-intDigits, minScale)}
}

// wider returns the type two operands of a comparison, IN, COALESCE or arithmetic are
// cast to (Spark's findWiderTypeForTwo), ok false when Spark's ANSI type coercion has
// none that the evaluator implements. lit marks an operand that is an integral literal,
// which joins a decimal with its own digits (DecimalType.fromLiteral), not its type's.
func wider(a, b deltalog.DataType, litA, litB *Value) (deltalog.DataType, bool) {
	switch {
	case a == b:
		return a, true
	case a == deltalog.Void:
		return b, true
	case b == deltalog.Void:
		return a, true
	case isIntegral(a) && isIntegral(b):
		if integralRank(a) >= integralRank(b) {
			return a, true
		}
		return b, true
	case isDecimal(a) && isDecimal(b):
		return widerDecimal(a.(deltalog.DecimalType), b.(deltalog.DecimalType)), true
	case isDecimal(a) && isIntegral(b):
		return widerDecimal(a.(deltalog.DecimalType), intAsDecimal(b, litB)), true
	case isIntegral(a) && isDecimal(b):
		return widerDecimal(intAsDecimal(a, litA), b.(deltalog.DecimalType)), true
	case isNumeric(a) && isNumeric(b): // one is float or double
		if (a == deltalog.Float || isIntegral(a)) && (b == deltalog.Float || isIntegral(b)) {
			return deltalog.Float, true
		}
		return deltalog.Double, true
	case a == deltalog.Date && b == deltalog.Timestamp, a == deltalog.Timestamp && b == deltalog.Date:
		return deltalog.Timestamp, true
	case a == deltalog.Date && b == deltalog.TimestampNtz, a == deltalog.TimestampNtz && b == deltalog.Date:
		return deltalog.TimestampNtz, true
	case a == deltalog.Timestamp && b == deltalog.TimestampNtz, a == deltalog.TimestampNtz && b == deltalog.Timestamp:
		return deltalog.Timestamp, true
	case a == deltalog.String && (b == deltalog.Date || b == deltalog.Timestamp || b == deltalog.TimestampNtz):
		return b, true
	case b == deltalog.String && (a == deltalog.Date || a == deltalog.Timestamp || a == deltalog.TimestampNtz):
		return a, true
	}
	return nil, false
}

// intAsDecimal is the decimal an integral operand joins a decimal as: a literal with its
// own digits (Spark's DecimalType.fromLiteral), anything else its type's
// (DecimalType.forType).
func intAsDecimal(t deltalog.DataType, lit *Value) deltalog.DecimalType {
	if lit != nil && !lit.Null {
		d := len(strconv.FormatInt(lit.Int, 10))
		if lit.Int < 0 {
			d--
		}
		return deltalog.DecimalType{Precision: max(d, 1)}
	}
	return decimalOfIntegral(t)
}

var pow10Cache [2*maxPrecision + 2]*big.Int

func init() {
	p := big.NewInt(1)
	for i := range pow10Cache {
		pow10Cache[i] = new(big.Int).Set(p)
		p.Mul(p, big.NewInt(10))
	}
}

func pow10(n int) *big.Int {
	if n < len(pow10Cache) {
		return pow10Cache[n]
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// rescale returns u × 10^-from rounded to scale to with HALF_UP (Java's
// RoundingMode.HALF_UP, Spark's Decimal.changePrecision default).
func rescale(u *big.Int, from, to int) *big.Int {
	if to >= from {
		return new(big.Int).Mul(u, pow10(to-from))
	}
	return divHalfUp(u, pow10(from-to))
}

// divHalfUp is a / b rounded half away from zero; b > 0.
func divHalfUp(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	r2 := new(big.Int).Abs(r)
	r2.Lsh(r2, 1)
	if r2.Cmp(b) >= 0 {
		if a.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

// fitsPrecision reports whether |u| < 10^p.
func fitsPrecision(u *big.Int, p int) bool { return new(big.Int).Abs(u).Cmp(pow10(p)) < 0 }

// toDecimal is Spark's Decimal.toPrecision with HALF_UP under ANSI mode: u × 10^-scale
// rounded to t's scale; an error when it needs more than t's precision.
func toDecimal(u *big.Int, scale int, t deltalog.DecimalType) (Value, error) {
	r := rescale(u, scale, t.Scale)
	if !fitsPrecision(r, t.Precision) {
		return Value{}, fmt.Errorf("%s cannot be represented as %s (NUMERIC_VALUE_OUT_OF_RANGE: %w)", formatDecimal(u, scale), t, errArithmetic)
	}
	return Decimal(t, r), nil
}

// parseDecimalLiteral returns the unscaled value and type of a decimal literal such as
// 0.10 (decimal(2,2)), as Spark's Decimal(BigDecimal(text)).
func parseDecimalLiteral(text string) (*big.Int, deltalog.DecimalType, bool) {
	neg := strings.HasPrefix(text, "-")
	text = strings.TrimPrefix(text, "-")
	intPart, frac, _ := strings.Cut(text, ".")
	if strings.Contains(frac, ".") {
		return nil, deltalog.DecimalType{}, false
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	u, ok := new(big.Int).SetString("0"+intPart+frac, 10)
	if !ok {
		return nil, deltalog.DecimalType{}, false
	}
	if neg {
		u.Neg(u)
	}
	p := max(len(digits), len(frac), 1)
	if p > maxPrecision {
		return nil, deltalog.DecimalType{}, false
	}
	return u, deltalog.DecimalType{Precision: p, Scale: len(frac)}, true
}

// parseDecimalString parses s as Java's BigDecimal does (sign, digits, point, exponent),
// after trimming whitespace, returning the unscaled value and the scale.
func parseDecimalString(s string) (*big.Int, int, bool) {
	s = strings.TrimSpace(s)
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return nil, 0, false
		}
		mant, exp = s[:i], e
	}
	neg := false
	if mant != "" && (mant[0] == '-' || mant[0] == '+') {
		neg = mant[0] == '-'
		mant = mant[1:]
	}
	ip, fp, _ := strings.Cut(mant, ".")
	if ip+fp == "" || strings.Trim(ip+fp, "0123456789") != "" {
		return nil, 0, false
	}
	u, _ := new(big.Int).SetString(ip+fp, 10)
	if neg {
		u.Neg(u)
	}
	scale := len(fp) - exp
	if scale < 0 {
		u.Mul(u, pow10(-scale))
		scale = 0
	}
	return u, scale, true
}

// decimalToFloat is Java's BigDecimal.doubleValue: the nearest double.
func decimalToFloat(u *big.Int, scale int) float64 {
	f, _ := strconv.ParseFloat(formatDecimal(u, scale), 64)
	return f
}

// floatToDecimal is Spark's Decimal(double): the value of Java's Double.toString of f
// (its shortest decimal), exactly.
func floatToDecimal(f float64, bits int) (*big.Int, int) {
	u, scale, _ := parseDecimalString(strconv.FormatFloat(f, 'e', -1, bits))
	return u, scale
}

// compareFloats is Spark's SQLOrderingUtil.compareDoubles: NaN equals NaN and is greater
// than every other value; -0.0 equals 0.0.
func compareFloats(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compareValues orders two non-NULL values of one type as Spark does: numbers by value
// (NaN greatest), strings and binaries by their bytes, booleans false < true.
func compareValues(a, b Value) int {
	switch {
	case isFloating(a.Type):
		return compareFloats(a.F, b.F)
	case isDecimal(a.Type):
		sa, sb := a.Type.(deltalog.DecimalType).Scale, b.Type.(deltalog.DecimalType).Scale
		x, y := a.Dec, b.Dec
		if sa < sb {
			x = rescale(x, sa, sb)
		} else if sb < sa {
			y = rescale(y, sb, sa)
		}
		return x.Cmp(y)
	case a.Type == deltalog.String || a.Type == deltalog.Binary:
		return strings.Compare(a.Str, b.Str)
	}
	switch {
	case a.Int < b.Int:
		return -1
	case a.Int > b.Int:
		return 1
	}
	return 0
}

// JavaFloatString renders f as Java's Double.toString (bits 64) or Float.toString (bits
// 32): the shortest digits that round-trip; "ddd.ddd" (at least one fraction digit) for
// 1e-3 <= |f| < 1e7, else "d.dddE±n" ("1.0E7", "1.0E-4"); "NaN", "Infinity",
// "-Infinity", "-0.0" (Spark's CAST(double AS STRING); partition values render -0.0 as
// "0.0", deltawriter).
func JavaFloatString(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, bits) // -d.dddde±xx
	if !strings.Contains(e, ".") {
		// One shortest digit: Java picks, among the two-digit decimals that round to f, the
		// closest (Double.toString(Double.MIN_VALUE) is "4.9E-324", not "5.0E-324").
		if two := strconv.FormatFloat(f, 'e', 1, bits); !strings.Contains(two, ".0e") && roundTrips(two, f, bits) {
			e = two
		}
	}
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	mant, expS, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expS)
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	abs := math.Abs(f)
	if abs >= 1e-3 && abs < 1e7 {
		if exp >= 0 {
			if len(digits) <= exp+1 {
				out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
			} else {
				out = digits[:exp+1] + "." + digits[exp+1:]
			}
		} else {
			out = "0." + strings.Repeat("0", -exp-1) + digits
		}
	} else {
		frac := digits[1:]
		if frac == "" {
			frac = "0"
		}
		out = digits[:1] + "." + frac + "E" + strconv.Itoa(exp)
	}
	if neg {
		return "-" + out
	}
	return out
}

// roundTrips reports whether the decimal s parses back to f at bits precision.
func roundTrips(s string, f float64, bits int) bool {
	g, err := strconv.ParseFloat(s, bits)
	return err == nil && g == f
}
