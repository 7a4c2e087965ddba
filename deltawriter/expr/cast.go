package expr

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// castable reports whether the evaluator implements Spark's CAST from one type to
// another: between numeric types, boolean, string, date and timestamp (not numeric ↔
// date/timestamp, not binary except from string).
func castable(from, to deltalog.DataType) bool {
	if from == to || from == deltalog.Void {
		return true
	}
	kind := func(t deltalog.DataType) string {
		switch {
		case isNumeric(t):
			return "number"
		case t == deltalog.Date, t == deltalog.Timestamp, t == deltalog.TimestampNtz:
			return "time"
		case t == deltalog.String:
			return "string"
		case t == deltalog.Boolean:
			return "boolean"
		case t == deltalog.Binary:
			return "binary"
		}
		return ""
	}
	f, t := kind(from), kind(to)
	switch {
	case f == "" || t == "":
		return false
	case f == "string" || t == "string":
		return f != "binary" && t != "binary" || f == "string" && t == "binary"
	case f == "time" && t == "time":
		return true
	case f == "number" || f == "boolean":
		return t == "number" || t == "boolean"
	}
	return false
}

// parseCastType is the Delta type of a CAST's type name (lower-cased, "decimal(10,2)").
func parseCastType(name string) (deltalog.DataType, bool) {
	switch name {
	case "tinyint", "byte":
		return deltalog.Byte, true
	case "smallint", "short":
		return deltalog.Short, true
	case "int", "integer":
		return deltalog.Integer, true
	case "bigint", "long":
		return deltalog.Long, true
	case "float", "real":
		return deltalog.Float, true
	case "double":
		return deltalog.Double, true
	case "string", "varchar", "text":
		return deltalog.String, true
	case "boolean", "bool":
		return deltalog.Boolean, true
	case "date":
		return deltalog.Date, true
	case "timestamp", "timestamp_ltz":
		return deltalog.Timestamp, true
	case "timestamp_ntz":
		return deltalog.TimestampNtz, true
	case "binary":
		return deltalog.Binary, true
	case "decimal", "dec", "numeric":
		return deltalog.DecimalType{Precision: 10}, true
	}
	for _, p := range []string{"decimal(", "dec(", "numeric("} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			ps := strings.Split(strings.TrimSuffix(rest, ")"), ",")
			prec, err := strconv.Atoi(ps[0])
			scale := 0
			if err == nil && len(ps) == 2 {
				scale, err = strconv.Atoi(ps[1])
			}
			if err != nil || len(ps) > 2 || prec < 1 || prec > maxPrecision || scale < 0 || scale > prec {
				return nil, false
			}
			return deltalog.DecimalType{Precision: prec, Scale: scale}, true
		}
	}
	return nil, false
}

type castTo struct {
	x   evaluator
	t   deltalog.DataType
	loc *time.Location
}

func (c castTo) typ() deltalog.DataType { return c.t }
func (c castTo) eval(row []Value) (Value, error) {
	v, err := c.x.eval(row)
	if err != nil {
		return Value{}, err
	}
	return castValue(v, c.t, c.loc)
}

// CastString is Spark's CAST(s AS t) in a UTC session (ANSI mode): a partition value's
// string (PROTOCOL.md, "Partition Value Serialization") to its column's type. Errors: a
// string that is not a value of t, or a t the evaluator does not cast strings to.
func CastString(s string, t deltalog.DataType) (Value, error) {
	if !castable(deltalog.String, t) {
		return Value{}, fmt.Errorf("cast a string to %s: %w", t, ErrUnsupported)
	}
	if t == deltalog.Binary {
		return Value{Type: t, Str: s}, nil
	}
	return castValue(Str(s), t, time.UTC)
}

// castValue is Spark's CAST(v AS t) under ANSI mode; castable(v.Type, t) holds.
func castValue(v Value, t deltalog.DataType, loc *time.Location) (Value, error) {
	if v.Null {
		return Null(t), nil
	}
	from := v.Type
	if from == t {
		return v, nil
	}
	outOfRange := func(what string) error {
		return fmt.Errorf("the %s value %s cannot be cast to %s: out of range (CAST_OVERFLOW: %w)", from, what, t, errArithmetic)
	}
	switch {
	case isIntegral(t):
		lo, hi := integralBounds(t)
		switch {
		case isIntegral(from) || from == deltalog.Boolean:
			if v.Int < lo || v.Int > hi {
				return Value{}, outOfRange(v.String())
			}
			return Int(t, v.Int), nil
		case isFloating(from):
			if math.IsNaN(v.F) || math.Trunc(v.F) < float64(lo) || math.Trunc(v.F) > float64(hi) || math.Trunc(v.F) == float64(math.MaxInt64) {
				return Value{}, outOfRange(v.String())
			}
			return Int(t, int64(v.F)), nil
		case isDecimal(from):
			q := new(big.Int).Quo(v.Dec, pow10(from.(deltalog.DecimalType).Scale)) // toward zero
			if !q.IsInt64() || q.Int64() < lo || q.Int64() > hi {
				return Value{}, outOfRange(v.String())
			}
			return Int(t, q.Int64()), nil
		case from == deltalog.String:
			n, ok := stringToIntegral(v.Str)
			if !ok || n < lo || n > hi {
				return Value{}, invalidInput(v.Str, t)
			}
			return Int(t, n), nil
		}
	case isFloating(t):
		var f float64
		switch {
		case isIntegral(from) || from == deltalog.Boolean:
			f = float64(v.Int)
		case isFloating(from):
			f = v.F
		case isDecimal(from):
			f = decimalToFloat(v.Dec, from.(deltalog.DecimalType).Scale)
		case from == deltalog.String:
			var ok bool
			if f, ok = stringToFloat(v.Str); !ok {
				return Value{}, invalidInput(v.Str, t)
			}
		}
		if t == deltalog.Float {
			f = float64(float32(f))
		}
		return Float(t, f), nil
	case isDecimal(t):
		d := t.(deltalog.DecimalType)
		switch {
		case isIntegral(from) || from == deltalog.Boolean:
			return toDecimal(big.NewInt(v.Int), 0, d)
		case isFloating(from):
			if math.IsNaN(v.F) || math.IsInf(v.F, 0) {
				return Value{}, outOfRange(v.String())
			}
			bits := 64
			if from == deltalog.Float {
				bits = 32
			}
			u, s := floatToDecimal(v.F, bits)
			return toDecimal(u, s, d)
		case isDecimal(from):
			return toDecimal(v.Dec, from.(deltalog.DecimalType).Scale, d)
		case from == deltalog.String:
			u, s, ok := parseDecimalString(v.Str)
			if !ok {
				return Value{}, invalidInput(v.Str, t)
			}
			return toDecimal(u, s, d)
		}
	case t == deltalog.Boolean:
		switch {
		case isIntegral(from):
			return Int(t, b2i(v.Int != 0)), nil
		case isFloating(from):
			return Int(t, b2i(v.F != 0)), nil
		case isDecimal(from):
			return Int(t, b2i(v.Dec.Sign() != 0)), nil
		case from == deltalog.String:
			switch strings.ToLower(strings.TrimSpace(v.Str)) {
			case "t", "true", "y", "yes", "1":
				return Int(t, 1), nil
			case "f", "false", "n", "no", "0":
				return Int(t, 0), nil
			}
			return Value{}, invalidInput(v.Str, t)
		}
	case t == deltalog.String:
		switch from {
		case deltalog.Timestamp:
			return Str(formatTimestamp(localMicros(v.Int, loc))), nil
		case deltalog.TimestampNtz:
			return Str(formatTimestamp(v.Int)), nil
		case deltalog.Binary:
			return Str(v.Str), nil
		}
		return Str(v.String()), nil
	case t == deltalog.Binary:
		return Value{Type: t, Str: v.Str}, nil
	case t == deltalog.Date:
		return castDate{x: lit{v}, loc: loc}.eval(nil)
	case t == deltalog.Timestamp || t == deltalog.TimestampNtz:
		switch from {
		case deltalog.String:
			local, off, ok := stringToTimestamp(v.Str)
			if !ok {
				return Value{}, invalidInput(v.Str, t)
			}
			switch {
			case t == deltalog.TimestampNtz:
				return Int(t, local), nil
			case off != noOffset:
				return Int(t, local-off*microsPerSecond), nil
			}
			return Int(t, instantMicros(local, loc, noOffset)), nil
		case deltalog.Date:
			if t == deltalog.TimestampNtz {
				return Int(t, v.Int*microsPerDay), nil
			}
			return castTimestamp{x: lit{v}, loc: loc}.eval(nil)
		case deltalog.Timestamp: // to timestamp_ntz: the wall clock in the session zone
			return Int(t, localMicros(v.Int, loc)), nil
		case deltalog.TimestampNtz:
			return Int(t, instantMicros(v.Int, loc, noOffset)), nil
		}
	}
	return Value{}, fmt.Errorf("cast %s to %s: %w", from, t, ErrUnsupported)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func invalidInput(s string, t deltalog.DataType) error {
	return fmt.Errorf("the string %q cannot be cast to %s (CAST_INVALID_INPUT: %w)", s, strings.ToUpper(fmt.Sprint(t)), errArithmetic)
}

// trimSpaceControl trims what Spark's UTF8String.trimAll trims before parsing a number:
// whitespace and ISO control characters.
func trimSpaceControl(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// stringToIntegral is Spark's ANSI cast of a string to an integral type,
// UTF8String.toLongExact (toLong with allowDecimal false): after trimming, an optional
// sign and digits only. A decimal point is invalid input (CAST('1.9' AS INT) fails with
// CAST_INVALID_INPUT under ANSI; only the legacy non-ANSI cast truncates it to 1).
func stringToIntegral(s string) (int64, bool) {
	s = trimSpaceControl(s)
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 || body == "" || strings.Trim(body, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// stringToFloat is Spark's cast of a string to double: Java's Double.parseDouble after
// trimming, plus inf, +inf, -inf, infinity and nan in any case.
func stringToFloat(s string) (float64, bool) {
	s = trimSpaceControl(s)
	switch strings.ToLower(s) {
	case "inf", "+inf", "infinity", "+infinity":
		return math.Inf(1), true
	case "-inf", "-infinity":
		return math.Inf(-1), true
	case "nan":
		return math.NaN(), true
	}
	t := strings.TrimSuffix(strings.TrimSuffix(s, "d"), "D")
	t = strings.TrimSuffix(strings.TrimSuffix(t, "f"), "F")
	if t == "" || strings.ContainsAny(t, "xXpP_") || strings.EqualFold(strings.TrimLeft(t, "+-"), "inf") {
		return 0, false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return 0, false
	}
	return f, true
}

// formatTimestamp renders local µs as Spark's CAST(timestamp AS STRING):
// yyyy-MM-dd HH:mm:ss with the fraction's trailing zeros trimmed.
func formatTimestamp(local int64) string {
	return time.UnixMicro(local).UTC().Format("2006-01-02 15:04:05.999999")
}

// stringToTimestamp is Spark's DateTimeUtils.stringToTimestamp for the forms
// [+-]yyyy[-[m]m[-[d]d]][( |T)[h]h[:[m]m[:[s]s[.ffffff]]]][zone] with zone Z, ±hh[:mm] or
// an IANA name after a space; it returns the wall-clock µs and the zone's offset in seconds
// (noOffset when none is given).
func stringToTimestamp(s string) (int64, int64, bool) {
	s = trimSpaceControl(s)
	datePart, rest := s, ""
	if i := strings.IndexAny(s, " T"); i >= 0 {
		datePart, rest = s[:i], s[i+1:]
	}
	days, ok := stringToDate(datePart)
	if !ok || strings.ContainsAny(datePart, " T") {
		return 0, 0, false
	}
	local := days * microsPerDay
	if rest == "" {
		return local, noOffset, true
	}
	off := int64(noOffset)
	timePart := rest
	if i := strings.IndexAny(rest, "Z+- "); i >= 0 {
		timePart = rest[:i]
		zone := strings.TrimSpace(rest[i:])
		switch {
		case zone == "Z" || strings.EqualFold(zone, "UTC"):
			off = 0
		case zone[0] == '+' || zone[0] == '-':
			h, m, _ := strings.Cut(zone[1:], ":")
			hh, err1 := strconv.Atoi(h)
			mm := 0
			var err2 error
			if m != "" {
				mm, err2 = strconv.Atoi(m)
			}
			if err1 != nil || err2 != nil || len(h) > 2 || hh > 18 || mm > 59 {
				return 0, 0, false
			}
			off = int64(hh*3600 + mm*60)
			if zone[0] == '-' {
				off = -off
			}
		default: // named zones are not in the forms the evaluator parses
			return 0, 0, false
		}
	}
	hms, frac, _ := strings.Cut(timePart, ".")
	parts := strings.Split(hms, ":")
	if len(parts) > 3 || hms == "" {
		return 0, 0, false
	}
	lim := []int{23, 59, 59}
	mul := []int64{3600, 60, 1}
	for i, p := range parts {
		if len(p) == 0 || len(p) > 2 || strings.Trim(p, "0123456789") != "" {
			return 0, 0, false
		}
		n, _ := strconv.Atoi(p)
		if n > lim[i] {
			return 0, 0, false
		}
		local += int64(n) * mul[i] * microsPerSecond
	}
	if frac != "" {
		if strings.Trim(frac, "0123456789") != "" || len(parts) != 3 {
			return 0, 0, false
		}
		if len(frac) > 6 {
			frac = frac[:6] // Spark truncates beyond microseconds
		}
		n, _ := strconv.Atoi(frac + strings.Repeat("0", 6-len(frac)))
		local += int64(n)
	}
	return local, off, true
}
