package expr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// evaluator is a bound, typed node.
type evaluator interface {
	typ() deltalog.DataType
	eval(row []Value) (Value, error)
}

const (
	microsPerSecond = 1_000_000
	microsPerDay    = 86_400 * microsPerSecond
)

type colRef struct {
	i int
	t deltalog.DataType
}

func (c colRef) typ() deltalog.DataType { return c.t }
func (c colRef) eval(row []Value) (Value, error) {
	v := row[c.i]
	v.Type = c.t
	return v, nil
}

type lit struct{ v Value }

func (l lit) typ() deltalog.DataType      { return l.v.Type }
func (l lit) eval([]Value) (Value, error) { return l.v, nil }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// localMicros is the wall-clock time of the instant us in loc, as µs since
// 1970-01-01T00:00 of the wall clock (Spark's microsToLocalDateTime).
func localMicros(us int64, loc *time.Location) int64 {
	if loc == time.UTC {
		return us
	}
	sec := floorDiv(us, microsPerSecond)
	_, off := time.Unix(sec, 0).In(loc).Zone()
	return us + int64(off)*microsPerSecond
}

func offsetAt(loc *time.Location, sec int64) int64 {
	_, off := time.Unix(sec, 0).In(loc).Zone()
	return int64(off)
}

// instantMicros is the instant of the wall-clock time local (µs since 1970-01-01T00:00)
// in loc, resolved as java.time's ZonedDateTime.ofLocal does (Spark's
// localDateTimeToMicros): in an overlap the preferred offset when it is valid, else the
// earlier offset; in a gap the time is moved forward by the gap's length. preferred < -1e9
// means none.
func instantMicros(local int64, loc *time.Location, preferred int64) int64 {
	if loc == time.UTC {
		return local
	}
	sec := floorDiv(local, microsPerSecond)
	rem := local - sec*microsPerSecond
	const window = 18*3600 + 1 // offsets are within ±18 h
	before, after := offsetAt(loc, sec-window), offsetAt(loc, sec+window)
	valid := func(o int64) bool { return offsetAt(loc, sec-o) == o }
	var off int64
	switch {
	case preferred > -1e9 && valid(preferred):
		off = preferred
	case valid(before):
		off = before
	case valid(after):
		off = after
	default: // a gap: local+gap at the later offset is local at the earlier one
		off = before
	}
	return (sec-off)*microsPerSecond + rem
}

const noOffset = math.MinInt64

type castDate struct {
	x   evaluator
	loc *time.Location
}

func (c castDate) typ() deltalog.DataType { return deltalog.Date }
func (c castDate) eval(row []Value) (Value, error) {
	v, err := c.x.eval(row)
	if err != nil || v.Null {
		return Null(deltalog.Date), err
	}
	switch v.Type {
	case deltalog.Timestamp:
		return Int(deltalog.Date, floorDiv(localMicros(v.Int, c.loc), microsPerDay)), nil
	case deltalog.TimestampNtz:
		return Int(deltalog.Date, floorDiv(v.Int, microsPerDay)), nil
	case deltalog.String:
		d, ok := stringToDate(v.Str)
		if !ok {
			return Value{}, fmt.Errorf("the string %q cannot be cast to DATE (Spark's ANSI mode fails the query: CAST_INVALID_INPUT)", v.Str)
		}
		return Int(deltalog.Date, d), nil
	case deltalog.Date:
		return v, nil
	}
	return Value{}, fmt.Errorf("cast %s to date", v.Type)
}

// stringToDate is Spark's DateTimeUtils.stringToDate: after trimming whitespace and
// control characters, [+-]yyyy[y…] (4 to 7 digits), [+-]yyyy-[m]m, [+-]yyyy-[m]m-[d]d,
// optionally followed by ' ' or 'T' and anything.
func stringToDate(s string) (int64, bool) {
	trim := func(c byte) bool { return c <= ' ' || c == 0x7f }
	i, j := 0, len(s)
	for i < j && trim(s[i]) {
		i++
	}
	for j > i && trim(s[j-1]) {
		j--
	}
	if i == j {
		return 0, false
	}
	sign := 1
	if s[i] == '-' || s[i] == '+' {
		if s[i] == '-' {
			sign = -1
		}
		i++
	}
	segs := [3]int{1, 1, 1}
	seg, val, digits := 0, 0, 0
	validDigits := func(seg, digits int) bool {
		return seg == 0 && digits >= 4 && digits <= 7 || seg != 0 && digits > 0 && digits <= 2
	}
	for i < j && !(s[i] == ' ' || s[i] == 'T') {
		c := s[i]
		if seg < 2 && c == '-' {
			if !validDigits(seg, digits) {
				return 0, false
			}
			segs[seg] = val
			val, digits = 0, 0
			seg++
		} else {
			if c < '0' || c > '9' {
				return 0, false
			}
			val = val*10 + int(c-'0')
			digits++
			if digits > 7 {
				return 0, false
			}
		}
		i++
	}
	if !validDigits(seg, digits) {
		return 0, false
	}
	if seg < 2 && i < j {
		return 0, false
	}
	segs[seg] = val
	y, m, d := sign*segs[0], segs[1], segs[2]
	if m < 1 || m > 12 || d < 1 || d > 31 {
		return 0, false
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Day() != d { // 2023-02-30 and the like: LocalDate.of refuses them
		return 0, false
	}
	return t.Unix() / 86400, true
}

type castTimestamp struct {
	x   evaluator
	loc *time.Location
}

func (c castTimestamp) typ() deltalog.DataType { return deltalog.Timestamp }
func (c castTimestamp) eval(row []Value) (Value, error) {
	v, err := c.x.eval(row)
	if err != nil || v.Null {
		return Null(deltalog.Timestamp), err
	}
	switch v.Type {
	case deltalog.Date:
		return Int(deltalog.Timestamp, instantMicros(v.Int*microsPerDay, c.loc, noOffset)), nil
	case deltalog.TimestampNtz:
		return Int(deltalog.Timestamp, instantMicros(v.Int, c.loc, noOffset)), nil
	case deltalog.Timestamp:
		return v, nil
	}
	return Value{}, fmt.Errorf("cast %s to timestamp", v.Type)
}

type dateField struct {
	x     evaluator // a date
	field byte      // 'y', 'M', 'd'
}

func (f dateField) typ() deltalog.DataType { return deltalog.Integer }
func (f dateField) eval(row []Value) (Value, error) {
	v, err := f.x.eval(row)
	if err != nil || v.Null {
		return Null(deltalog.Integer), err
	}
	t := time.Unix(v.Int*86400, 0).UTC()
	switch f.field {
	case 'y':
		return Int(deltalog.Integer, int64(t.Year())), nil
	case 'M':
		return Int(deltalog.Integer, int64(t.Month())), nil
	}
	return Int(deltalog.Integer, int64(t.Day())), nil
}

type hourOf struct {
	x   evaluator // a timestamp (in loc) or timestamp_ntz (loc UTC)
	loc *time.Location
}

func (h hourOf) typ() deltalog.DataType { return deltalog.Integer }
func (h hourOf) eval(row []Value) (Value, error) {
	v, err := h.x.eval(row)
	if err != nil || v.Null {
		return Null(deltalog.Integer), err
	}
	l := localMicros(v.Int, h.loc)
	return Int(deltalog.Integer, (l-floorDiv(l, microsPerDay)*microsPerDay)/(3600*microsPerSecond)), nil
}

type dateTrunc struct {
	x    evaluator // a timestamp
	unit string    // HOUR or DAY
	loc  *time.Location
}

func (d dateTrunc) typ() deltalog.DataType { return deltalog.Timestamp }

// eval is Spark's truncToUnit: ZonedDateTime.truncatedTo on the local time-line, back to
// an instant keeping the original offset when it is still valid.
func (d dateTrunc) eval(row []Value) (Value, error) {
	v, err := d.x.eval(row)
	if err != nil || v.Null {
		return Null(deltalog.Timestamp), err
	}
	unit := int64(3600 * microsPerSecond)
	if d.unit == "DAY" {
		unit = microsPerDay
	}
	l := localMicros(v.Int, d.loc)
	off := (l - v.Int) / microsPerSecond
	return Int(deltalog.Timestamp, instantMicros(floorDiv(l, unit)*unit, d.loc, off)), nil
}

// piece is one element of a compiled date_format pattern: a literal, or a field letter
// with its count.
type piece struct {
	lit    string
	letter byte
	count  int
}

// compilePattern compiles a Spark datetime pattern (the Datetime Patterns page of Spark's
// SQL reference) of the letters y, M, d, H, m, s, with quoted '…' literals and other
// non-letters as themselves.
func compilePattern(p string) ([]piece, error) {
	var out []piece
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == '\'':
			j := i + 1
			var b strings.Builder
			for {
				if j >= len(p) {
					return nil, fmt.Errorf("date_format pattern %q: unterminated quote", p)
				}
				if p[j] == '\'' {
					if j+1 < len(p) && p[j+1] == '\'' {
						b.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(p[j])
				j++
			}
			if j == i+1 { // '' is a quote
				b.WriteByte('\'')
			}
			out = append(out, piece{lit: b.String()})
			i = j + 1
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(p) && p[j] == c {
				j++
			}
			n := j - i
			ok := false
			switch c {
			case 'y':
				ok = n == 1 || n == 2 || n == 4
			case 'M', 'd', 'H', 'm', 's':
				ok = n <= 2
			}
			if !ok {
				return nil, fmt.Errorf("date_format pattern %q: %q: %w (pattern letters y, yy, yyyy, M, MM, d, dd, H, HH, m, mm, s, ss)",
					p, p[i:j], ErrUnsupported)
			}
			out = append(out, piece{letter: c, count: n})
			i = j
		default:
			_, w := utf8.DecodeRuneInString(p[i:])
			out = append(out, piece{lit: p[i : i+w]})
			i += w
		}
	}
	return out, nil
}

type dateFormat struct {
	x       evaluator // a timestamp
	pattern []piece
	loc     *time.Location
}

func (d dateFormat) typ() deltalog.DataType { return deltalog.String }
func (d dateFormat) eval(row []Value) (Value, error) {
	v, err := d.x.eval(row)
	if err != nil || v.Null {
		return Null(deltalog.String), err
	}
	t := time.UnixMicro(localMicros(v.Int, d.loc)).UTC()
	var b strings.Builder
	pad := func(n, width int) {
		s := strconv.Itoa(n)
		for k := len(s); k < width; k++ {
			b.WriteByte('0')
		}
		b.WriteString(s)
	}
	for _, p := range d.pattern {
		switch p.letter {
		case 0:
			b.WriteString(p.lit)
		case 'y': // year of era, as java.time's DateTimeFormatter prints it
			y := t.Year()
			if y <= 0 {
				y = 1 - y
			}
			switch p.count {
			case 2:
				pad(y%100, 2)
			case 4:
				if y > 9999 {
					b.WriteByte('+')
				}
				pad(y, 4)
			default:
				pad(y, 1)
			}
		case 'M':
			pad(int(t.Month()), p.count)
		case 'd':
			pad(t.Day(), p.count)
		case 'H':
			pad(t.Hour(), p.count)
		case 'm':
			pad(t.Minute(), p.count)
		case 's':
			pad(t.Second(), p.count)
		}
	}
	return Str(b.String()), nil
}

type substring struct {
	s, pos, n evaluator // n nil: to the end
}

func (s substring) typ() deltalog.DataType { return deltalog.String }

// eval is Spark's UTF8String.substringSQL: 1-based positions over code points, a
// negative position counts from the end, 0 is the same as 1.
func (s substring) eval(row []Value) (Value, error) {
	str, err := s.s.eval(row)
	if err != nil || str.Null {
		return Null(deltalog.String), err
	}
	pv, err := s.pos.eval(row)
	if err != nil || pv.Null {
		return Null(deltalog.String), err
	}
	length := int64(math.MaxInt32)
	if s.n != nil {
		nv, err := s.n.eval(row)
		if err != nil || nv.Null {
			return Null(deltalog.String), err
		}
		length = nv.Int
	}
	runes := []rune(str.Str)
	n := int64(len(runes))
	pos := pv.Int
	var start int64
	switch {
	case pos > 0:
		start = pos - 1
	case pos < 0:
		start = n + pos
	}
	end := start + length // int32 positions and lengths: no int64 overflow
	end = min(max(end, math.MinInt32), math.MaxInt32)
	start = max(start, 0)
	if start >= end || start >= n {
		return Str(""), nil
	}
	return Str(string(runes[start:min(end, n)])), nil
}
