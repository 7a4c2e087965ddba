package decode

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// The one-pass JSON transcoder: it reads a document once, checking it as jScanner does
// (syntax, repeated keys, UTF-8, nesting) while it writes the Avro body of a jNode tree,
// fields in the tree's order (a struct's values are written as their keys come, then
// moved into field order when the document's order differs). It takes the common path
// only: a document it does not accept (any error, a string with escapes, a key the tree
// lacks where plain JSON would add a column, a Connect decimal as base64, nesting near
// the bound) makes it give up, and the two-pass transcoder (jEncoder, jScanner) reads the
// document instead and reports the error. So both accept the same documents with the
// same bytes, and every failure keeps its reason and message.

// jFastMaxDepth is the nesting the one-pass transcoder reads; deeper documents take the
// two-pass path, which enforces maxJSONDepth.
const jFastMaxDepth = maxJSONDepth - 4

// jFast is one document's one-pass transcoding state.
type jFast struct {
	avroAppender
	b       []byte
	i       int
	top     bool // fail on a top-level key the tree lacks (JSONSource.Writer: a new column)
	segs    []jSeg
	keys    [][]byte
	tmp     []byte
	doc     bool  // also build the document as encoding/json with UseNumber would (jsonschema)
	vstack  []any // doc: values being built
	scratch []byte
}

// jSeg is where one struct field's value was written: [start, end) of e.b; end 0: absent.
type jSeg struct{ start, end int }

// jFastPool keeps jFast states between documents.
var jFastPool = sync.Pool{New: func() any { return &jFast{} }}

// fastJSON transcodes body as top in one pass into dst; ok is false when the one-pass
// transcoder gives up (see above). With doc, it also returns the document's value.
func fastJSON(dst, body []byte, top *jNode, writer, doc bool) (out []byte, v any, ok bool) {
	f := jFastPool.Get().(*jFast)
	defer func() {
		f.avroAppender, f.b, f.vstack = avroAppender{}, nil, f.vstack[:0]
		clear(f.keys)
		f.keys = f.keys[:0]
		jFastPool.Put(f)
	}()
	f.avroAppender = newAvroAppender(dst, len(body))
	f.b, f.i, f.top, f.doc = body, 0, writer, doc
	f.segs = f.segs[:0]
	f.ws()
	if !f.value(top, 0) {
		return nil, nil, false
	}
	f.ws()
	if f.i != len(f.b) {
		return nil, nil, false
	}
	if doc {
		v = f.vstack[0]
	}
	return f.avroAppender.b, v, true
}

func (f *jFast) ws() {
	if f.i < len(f.b) && f.b[f.i] > ' ' { // no whitespace: every JSON whitespace byte is at most ' '
		return
	}
	for f.i < len(f.b) {
		switch f.b[f.i] {
		case ' ', '\t', '\n', '\r':
			f.i++
		default:
			return
		}
	}
}

func (f *jFast) peek() byte {
	f.ws()
	if f.i < len(f.b) {
		return f.b[f.i]
	}
	return 0
}

// next reads what follows a member of an object or an array closed by end ('}' or ']'):
// a comma (more: another member follows) or end (the last member); anything else is not
// ok (the read fails there, so the position past it does not matter). Small enough to
// inline: it runs after every member.
func (f *jFast) next(end byte) (more, ok bool) {
	c := f.peek()
	f.i++
	return c == ',', c == ',' || c == end
}

// push records a value of the document (doc mode).
func (f *jFast) push(v any) {
	if f.doc {
		f.vstack = append(f.vstack, v)
	}
}

// str reads a string without escapes and returns its bytes (a sub-slice of the document):
// false for a string with an escape, a control character or invalid UTF-8, and for one
// not closed. One pass finds the closing quote and checks the text, eight bytes at a time.
func (f *jFast) str() ([]byte, bool) {
	const ones, hi = 0x0101010101010101, 0x8080808080808080
	const quote, bslash, space = 0x2222222222222222, 0x5c5c5c5c5c5c5c5c, 0x2020202020202020
	f.i++ // '"'
	b, start := f.b, f.i
	i, seen := start, uint64(0) // seen: every byte of the whole words passed, ORed
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, e := x^quote, x^bslash
		// The lowest flagged byte is the first quote, backslash or byte below 0x20 (a
		// flag above it may come from a borrow, and is never looked at).
		if m := ((q-ones)&^q | (e-ones)&^e | (x-space)&^x) & hi; m != 0 {
			k := bits.TrailingZeros64(m) >> 3
			seen |= x & (1<<(8*k) - 1) // the bytes before it
			i += k
			break
		}
		seen |= x
	}
	for ; i < len(b); i++ {
		c := b[i]
		if c == '"' {
			break
		}
		if c < 0x20 || c == '\\' {
			return nil, false
		}
		seen |= uint64(c)
	}
	if i >= len(b) || b[i] != '"' {
		return nil, false
	}
	raw := b[start:i]
	if seen&hi != 0 && !utf8.Valid(raw) {
		return nil, false
	}
	f.i = i + 1
	return raw, true
}

// number reads a JSON number's text (RFC 8259 grammar).
func (f *jFast) number() ([]byte, bool) {
	b := f.b
	start, i := f.i, f.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) || b[i] < '0' || b[i] > '9' {
		return nil, false
	}
	if b[i] == '0' {
		i++
	} else {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false
		}
	}
	f.i = i
	return b[start:i], true
}

func (f *jFast) literal(l string) bool {
	if len(f.b)-f.i < len(l) || string(f.b[f.i:f.i+len(l)]) != l {
		return false
	}
	f.i += len(l)
	return true
}

// parseInt is strconv.ParseInt(num, 10, bitSize) for a JSON number's text.
func parseInt(num []byte, bitSize int) (int64, bool) {
	neg := len(num) > 0 && num[0] == '-'
	d := num
	if neg {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	lim := uint64(1) << (bitSize - 1)
	if neg {
		if u > lim {
			return 0, false
		}
		return -int64(u), true
	}
	if u >= lim {
		return 0, false
	}
	return int64(u), true
}

// float64pow10 are the powers of ten a float64 holds exactly.
var float64pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// exactFloat64 is strconv.ParseFloat(string(num), 64) for the JSON numbers it reads
// exactly, the way strconv's own exact path does (atof64exact): a mantissa of at most 52
// bits times or over a power of ten, both exact, in one correctly rounded operation
// (m / 10^k for k ≤ 22 digits after the point, m × 10^k up to 10^37 while m × 10^(k−22)
// stays within 10^15). ok is false for any other text, which strconv then reads. num is
// a JSON number's text (RFC 8259 grammar, checked by number).
func exactFloat64(num []byte) (v float64, ok bool) {
	i, neg := 0, false
	if len(num) > 0 && num[0] == '-' {
		i, neg = 1, true
	}
	var m uint64
	digits, exp, dot := 0, 0, false
	for ; i < len(num); i++ {
		c := num[i]
		if c >= '0' && c <= '9' {
			if m>>52 != 0 {
				return 0, false // past the exact mantissas (and never near an overflow)
			}
			m = m*10 + uint64(c-'0')
			digits++
			if dot {
				exp--
			}
			continue
		}
		if c == '.' && !dot {
			dot = true
			continue
		}
		break
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(num) { // the exponent: e or E, a sign, digits
		if num[i] != 'e' && num[i] != 'E' || i+1 == len(num) {
			return 0, false
		}
		i++
		esign := 1
		if num[i] == '+' || num[i] == '-' {
			if num[i] == '-' {
				esign = -1
			}
			i++
		}
		e := 0
		if i == len(num) {
			return 0, false
		}
		for ; i < len(num); i++ {
			c := num[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			if e < 10000 {
				e = e*10 + int(c-'0')
			}
		}
		exp += esign * e
	}
	if m>>52 != 0 {
		return 0, false
	}
	if m == 0 {
		exp = 0 // strconv reads any zero as ±0, whatever its exponent
	}
	v = float64(m)
	if neg {
		v = -v
	}
	switch {
	case exp == 0:
		return v, true
	case exp > 0 && exp <= 15+22:
		if exp > 22 {
			v *= float64pow10[exp-22]
			exp = 22
		}
		if v > 1e15 || v < -1e15 {
			return 0, false
		}
		return v * float64pow10[exp], true
	case exp < 0 && exp >= -22:
		return v / float64pow10[-exp], true
	}
	return 0, false
}

// value writes the value at f.i as n (jEncoder.value's conversions).
func (f *jFast) value(n *jNode, depth int) bool {
	if depth > jFastMaxDepth || len(f.avroAppender.b) > f.limit {
		return false
	}
	c := f.peek()
	if c == 'n' {
		if !f.literal("null") || !n.nullable || n.js&jsNoNull != 0 {
			return false
		}
		f.push(nil)
		f.avroAppender.b = append(f.avroAppender.b, 0)
		return true
	}
	if n.nullable {
		f.avroAppender.b = append(f.avroAppender.b, 2)
	}
	switch n.kind {
	case jBool:
		switch {
		case c == 't' && f.literal("true"):
			f.avroAppender.b = append(f.avroAppender.b, 1)
			f.push(true)
		case c == 'f' && f.literal("false"):
			f.avroAppender.b = append(f.avroAppender.b, 0)
			f.push(false)
		default:
			return false
		}
	case jInt, jLong:
		num, ok := f.number()
		if !ok {
			return false
		}
		bitsz := 64
		if n.kind == jInt {
			bitsz = 32
		}
		v, ok := parseInt(num, bitsz)
		if !ok {
			return false
		}
		f.long(v)
		f.pushNumber(num)
	case jFloat, jDouble:
		num, ok := f.number()
		if !ok {
			return false
		}
		if n.kind == jFloat {
			v, err := strconv.ParseFloat(string(num), 32)
			if err != nil {
				return false
			}
			f.avroAppender.b = binary.LittleEndian.AppendUint32(f.avroAppender.b, math.Float32bits(float32(v)))
		} else {
			v, ok := exactFloat64(num)
			if !ok {
				var err error
				if v, err = strconv.ParseFloat(string(num), 64); err != nil {
					return false
				}
			}
			f.avroAppender.b = binary.LittleEndian.AppendUint64(f.avroAppender.b, math.Float64bits(v))
		}
		f.pushNumber(num)
	case jDecimal, jDecimalB64:
		if c == '"' {
			return false // a Connect decimal as base64, or a wrong type
		}
		num, ok := f.number()
		if !ok {
			return false
		}
		u, ok := unscaledInt64(num, n.prec, n.scale)
		if !ok {
			return false
		}
		f.scratch = twosInt64(f.scratch[:0], u)
		f.avroAppender.str(f.scratch)
		f.pushNumber(num)
	case jString, jBinary, jDate, jTimestamp, jTsNtz:
		if c != '"' {
			return false
		}
		raw, ok := f.str()
		if !ok {
			return false
		}
		if !f.text(n, raw) {
			return false
		}
		if f.doc {
			f.vstack = append(f.vstack, string(raw))
		}
	case jStruct:
		return c == '{' && f.object(n, depth)
	case jArray:
		return c == '[' && f.array(n, depth)
	case jMap:
		return c == '{' && f.mapValue(n, depth)
	default:
		return false
	}
	return true
}

func (f *jFast) pushNumber(num []byte) {
	if f.doc {
		f.vstack = append(f.vstack, json.Number(num))
	}
}

// text writes a string value raw (no escapes) as n.
func (f *jFast) text(n *jNode, raw []byte) bool {
	switch n.kind {
	case jString:
		if n.enum != nil && !n.enum[string(raw)] {
			return false
		}
		f.avroAppender.str(raw)
	case jBinary:
		m := base64.StdEncoding.DecodedLen(len(raw))
		f.scratch = slices.Grow(f.scratch[:0], m)[:m]
		k, err := base64.StdEncoding.Decode(f.scratch, raw)
		if err != nil {
			return false
		}
		f.avroAppender.str(f.scratch[:k])
	case jDate:
		d, ok := jsonDays(raw)
		if !ok {
			return false
		}
		f.long(d)
	case jTimestamp, jTsNtz:
		us, ok := jsonMicros(n, raw)
		if !ok {
			return false
		}
		f.long(us)
	}
	return true
}

// jsonDays is a jDate string's days since 1970-01-01, as jEncoder.value writes it; false
// where it fails.
func jsonDays(raw []byte) (int64, bool) {
	d, err := time.Parse(time.DateOnly, string(raw))
	if err != nil || d.Year() < 1 {
		return 0, false
	}
	return d.Unix() / 86400, true
}

// jsonMicros is a jTimestamp or jTsNtz string's microseconds since the epoch, as
// jEncoder.value writes them; false where it fails (and, under jsRFC3339, for the texts
// time.Parse takes and RFC 3339 does not).
func jsonMicros(n *jNode, raw []byte) (int64, bool) {
	if us, ok, sure := utcMicros(raw, n.kind == jTsNtz); sure {
		return us, ok
	}
	if n.js&jsRFC3339 != 0 {
		return 0, false // time.Parse takes texts RFC 3339 does not (a comma before the fraction, an offset of +24:00)
	}
	layout := time.RFC3339Nano
	if n.kind == jTsNtz {
		layout = "2006-01-02T15:04:05.999999999"
	}
	ts, err := time.Parse(layout, string(raw))
	if err != nil || ts.UTC().Year() < 1 || ts.UTC().Year() > 9999 || ts.Nanosecond()%1000 != 0 {
		return 0, false
	}
	return ts.UnixMicro(), true
}

// utcMicros reads the timestamp most writers write, YYYY-MM-DDTHH:MM:SS with 0 to 9
// fraction digits after a '.', then 'Z' (or nothing, when ntz): µs since the epoch, and
// ok false where time.Parse would fail or text would read the value as invalid (a
// field out of range, year 0, a part of a microsecond). sure is false for any other
// text, which time.Parse then reads.
func utcMicros(raw []byte, ntz bool) (us int64, ok, sure bool) {
	n := len(raw)
	if n < 19 || raw[4] != '-' || raw[7] != '-' || raw[10] != 'T' || raw[13] != ':' || raw[16] != ':' {
		return 0, false, false
	}
	if ntz == (raw[n-1] == 'Z') {
		return 0, false, false
	}
	if !ntz {
		n--
	}
	num := func(i, w int) int {
		v := 0
		for _, c := range raw[i : i+w] {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d, h, mi, sec := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2)
	if y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || sec < 0 {
		return 0, false, false
	}
	frac := 0
	if n > 19 {
		digits := n - 20
		if raw[19] != '.' || digits < 1 || digits > 9 {
			return 0, false, false
		}
		if frac = num(20, digits); frac < 0 {
			return 0, false, false
		}
		for range 9 - digits {
			frac *= 10
		}
	}
	if y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59 || frac%1000 != 0 {
		return 0, false, true
	}
	if d > 28 && d > daysIn(mo, y) {
		return 0, false, true
	}
	secs := daysFromCivil(y, mo, d)*86400 + int64(h*3600+mi*60+sec)
	return secs*1_000_000 + int64(frac/1000), true, true
}

// daysIn is the number of days of month mo (1–12) of year y (proleptic Gregorian).
func daysIn(mo, y int) int {
	switch mo {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the number of days from 1970-01-01 to y-mo-d (proleptic Gregorian,
// y ≥ 1, a valid date): Howard Hinnant's days_from_civil, eras of 400 years counted from
// March so that the leap day ends a year.
func daysFromCivil(y, mo, d int) int64 {
	if mo <= 2 {
		y--
	}
	era := y / 400 // y ≥ 0 here
	yoe := y - era*400
	mp := (mo + 9) % 12 // March is 0
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// unscaledInt64 is unscaled for the common decimal: no exponent, at most 18 digits. One
// pass: the digits after the point beyond the scale must be zeros (unscaled's exactness).
func unscaledInt64(num []byte, prec, scale int) (int64, bool) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	var u int64
	digits, nfrac, point := 0, 0, false // digits from the first non-zero one; nfrac: after the point, within the scale
	for _, c := range num {
		switch {
		case c == '.':
			point = true
			continue
		case c == 'e' || c == 'E':
			return 0, false
		case point && nfrac >= scale:
			if c != '0' {
				return 0, false
			}
			continue
		case point:
			nfrac++
		}
		if digits > 0 || c != '0' {
			digits++
		}
		u = u*10 + int64(c-'0')
		if digits > 18 {
			return 0, false
		}
	}
	for range scale - nfrac {
		if u != 0 {
			digits++
		}
		u *= 10
		if digits > 18 {
			return 0, false
		}
	}
	if digits > prec {
		return 0, false
	}
	if neg {
		u = -u
	}
	return u, true
}

// twosInt64 is bigTwos for an int64.
func twosInt64(dst []byte, u int64) []byte {
	var w [9]byte
	if u >= 0 {
		binary.BigEndian.PutUint64(w[1:], uint64(u))
		i := 1
		for i < 9 && w[i] == 0 {
			i++
		}
		if i == 9 || w[i]&0x80 != 0 {
			i--
		}
		return append(dst, w[i:]...)
	}
	n := (bits.Len64(uint64(-u)) + 8) / 8
	binary.BigEndian.PutUint64(w[1:], uint64(u))
	w[0] = 0xff
	return append(dst, w[9-n:]...)
}

// object writes a struct: each field's value as its key comes, then in field order.
func (f *jFast) object(n *jNode, depth int) bool {
	f.i++ // '{'
	base := len(f.segs)
	f.segs = slices.Grow(f.segs, len(n.fields))[:base+len(n.fields)]
	clear(f.segs[base:])
	defer func() { f.segs = f.segs[:base] }()
	p0 := len(f.avroAppender.b)
	var obj map[string]any
	if f.doc {
		obj = make(map[string]any, len(n.fields))
	}
	kbase := len(f.keys)
	defer func() { f.keys = f.keys[:kbase] }()
	inOrder, last, nkeys := true, -1, 0
	prev := 0 // n.succ's index of the last field read: 0 before the first, i+1 after field i
	if f.peek() == '}' {
		f.i++
	} else {
		for {
			if f.peek() != '"' {
				return false
			}
			var i int
			var known bool
			var k []byte
			// The field writers put next: the one that came after the last field in the
			// last document read, else the next in field order.
			guess := last + 1
			if prev < len(n.succ) {
				guess = int(n.succ[prev].Load())
			}
			if uint(guess) < uint(len(n.plain)) && n.plain[guess] {
				// When the text is that name then its closing quote, it is the string str
				// would read (the name has no quote, backslash nor control byte and is
				// valid UTF-8), found without scanning nor hashing it.
				name := n.fields[guess].name
				if e := f.i + 1 + len(name); e < len(f.b) && f.b[e] == '"' && string(f.b[f.i+1:e]) == name {
					k, i, known = f.b[f.i+1:e], guess, true
					f.i = e + 1
				}
			}
			if !known {
				var ok bool
				if k, ok = f.str(); !ok {
					return false
				}
			}
			if f.peek() != ':' {
				return false
			}
			f.i++
			if nkeys++; nkeys > 1024 {
				return false
			}
			switch {
			case known:
			case uint(guess) < uint(len(n.fields)) && string(k) == n.fields[guess].name:
				i, known = guess, true // no hashing
			default:
				i, known = n.fieldBytes(k)
				if known && n.js&jsExactKeys != 0 && string(k) != n.fields[i].name {
					return false // a key that differs from the property's name in case
				}
			}
			switch {
			case !known && (depth == 0 && !f.top || n.open):
				if !f.newKey(kbase, k) || !f.skip(depth+1) { // a key the tree lacks (a dropped top-level key, or one JSON Schema allows)
					return false
				}
				if f.doc {
					obj[string(k)] = f.pop()
				}
			case !known:
				return false
			default:
				if f.segs[base+i].end != 0 {
					return false
				}
				start := len(f.avroAppender.b)
				if !f.value(n.fields[i].node, depth+1) {
					return false
				}
				f.segs[base+i] = jSeg{start, len(f.avroAppender.b)}
				if i != last+1 {
					inOrder = false
				}
				last = i
				if prev < len(n.succ) && int(n.succ[prev].Load()) != i {
					n.succ[prev].Store(int32(i)) // the next document's guess (a race only changes a guess)
				}
				prev = i + 1
				if f.doc {
					obj[string(k)] = f.pop()
				}
			}
			f.ws()
			if f.i >= len(f.b) {
				return false
			}
			if f.b[f.i] == ',' {
				f.i++
				continue
			}
			if f.b[f.i] != '}' {
				return false
			}
			f.i++
			break
		}
	}
	if f.doc {
		f.vstack = append(f.vstack, obj)
	}
	if inOrder && last == len(n.fields)-1 {
		return true
	}
	// Keys came out of field order, or some are missing: rewrite in field order.
	f.tmp = append(f.tmp[:0], f.avroAppender.b[p0:]...)
	f.avroAppender.b = f.avroAppender.b[:p0]
	for i, fl := range n.fields {
		s := f.segs[base+i]
		if s.end == 0 {
			if !fl.node.nullable || fl.node.js&jsPresent != 0 {
				return false
			}
			f.avroAppender.b = append(f.avroAppender.b, 0)
			continue
		}
		f.avroAppender.b = append(f.avroAppender.b, f.tmp[s.start-p0:s.end-p0]...)
	}
	return true
}

// pop takes the last built value (doc mode).
func (f *jFast) pop() any {
	v := f.vstack[len(f.vstack)-1]
	f.vstack = f.vstack[:len(f.vstack)-1]
	return v
}

// fieldBytes is field for a key's raw bytes (without allocating on the common path).
func (n *jNode) fieldBytes(k []byte) (int, bool) {
	if i, ok := n.byName[string(k)]; ok {
		return i, true
	}
	return n.field(string(k))
}

// insertCount puts the Avro block count c at p, before the items written after p.
func (f *jFast) insertCount(p int, c int64) {
	var v [binary.MaxVarintLen64]byte
	k := binary.PutVarint(v[:], c)
	f.avroAppender.b = append(f.avroAppender.b, v[:k]...)
	copy(f.avroAppender.b[p+k:], f.avroAppender.b[p:len(f.avroAppender.b)-k])
	copy(f.avroAppender.b[p:], v[:k])
}

func (f *jFast) array(n *jNode, depth int) bool {
	f.i++ // '['
	p := len(f.avroAppender.b)
	var items []any
	count := int64(0)
	if f.peek() == ']' {
		f.i++
	} else {
		for {
			if !f.value(n.elem, depth+1) {
				return false
			}
			count++
			if f.doc {
				items = append(items, f.pop())
			}
			more, ok := f.next(']')
			if !ok {
				return false
			}
			if !more {
				break
			}
		}
	}
	if count > 0 {
		f.insertCount(p, count)
	}
	f.avroAppender.b = append(f.avroAppender.b, 0)
	if f.doc {
		if items == nil {
			items = []any{}
		}
		f.vstack = append(f.vstack, items)
	}
	return true
}

func (f *jFast) mapValue(n *jNode, depth int) bool {
	f.i++ // '{'
	p := len(f.avroAppender.b)
	kbase := len(f.keys)
	defer func() { f.keys = f.keys[:kbase] }()
	var obj map[string]any
	if f.doc {
		obj = map[string]any{}
	}
	count := int64(0)
	if f.peek() == '}' {
		f.i++
	} else {
		for {
			if f.peek() != '"' {
				return false
			}
			k, ok := f.str()
			if !ok || f.peek() != ':' || !f.newKey(kbase, k) {
				return false
			}
			f.i++
			f.avroAppender.str(k)
			if !f.value(n.values, depth+1) {
				return false
			}
			count++
			if f.doc {
				obj[string(k)] = f.pop()
			}
			more, ok := f.next('}')
			if !ok {
				return false
			}
			if !more {
				break
			}
		}
	}
	if count > 0 {
		f.insertCount(p, count)
	}
	f.avroAppender.b = append(f.avroAppender.b, 0)
	if f.doc {
		f.vstack = append(f.vstack, obj)
	}
	return true
}

// newKey records key k of the object whose keys start at f.keys[kbase]; false when the
// object has it already or has too many keys.
func (f *jFast) newKey(kbase int, k []byte) bool {
	if len(f.keys)-kbase > 1024 {
		return false
	}
	for _, o := range f.keys[kbase:] {
		if bytes.Equal(o, k) {
			return false
		}
	}
	f.keys = append(f.keys, k)
	return true
}

// skip checks and passes one value (jScanner.skip's rules).
func (f *jFast) skip(depth int) bool {
	if depth > jFastMaxDepth {
		return false
	}
	switch c := f.peek(); c {
	case '{':
		f.i++
		kbase := len(f.keys)
		defer func() { f.keys = f.keys[:kbase] }()
		var obj map[string]any
		if f.doc {
			obj = map[string]any{}
		}
		if f.peek() == '}' {
			f.i++
		} else {
			for {
				if f.peek() != '"' {
					return false
				}
				k, ok := f.str()
				if !ok || f.peek() != ':' || !f.newKey(kbase, k) {
					return false
				}
				f.i++
				if !f.skip(depth + 1) {
					return false
				}
				if f.doc {
					obj[string(k)] = f.pop()
				}
				more, ok := f.next('}')
				if !ok {
					return false
				}
				if !more {
					break
				}
			}
		}
		f.push(obj)
	case '[':
		f.i++
		var items []any
		if f.doc {
			items = []any{}
		}
		if f.peek() == ']' {
			f.i++
		} else {
			for {
				if !f.skip(depth + 1) {
					return false
				}
				if f.doc {
					items = append(items, f.pop())
				}
				more, ok := f.next(']')
				if !ok {
					return false
				}
				if !more {
					break
				}
			}
		}
		f.push(items)
	case '"':
		raw, ok := f.str()
		if !ok {
			return false
		}
		if f.doc {
			f.vstack = append(f.vstack, string(raw))
		}
	case 't':
		f.push(true)
		return f.literal("true")
	case 'f':
		f.push(false)
		return f.literal("false")
	case 'n':
		f.push(nil)
		return f.literal("null")
	default:
		num, ok := f.number()
		if !ok {
			return false
		}
		f.pushNumber(num)
	}
	return true
}

// jMemo keeps the transcodings a DocumentSource made while it chose the writer schemas of
// a batch's documents (the flush picks every record's writer schema first, then decodes
// them in the same order), so that each decode takes its bytes instead of reading the
// document again. One per source: a queue of (writer, document, transcoding) in reused
// chunks, matched by the writer and the document's bytes (never by identity). A decode
// that does not match the head looks a few entries further (records routed elsewhere are
// never decoded) and drops those it passes; past maxMemoBytes, or when the queue empties,
// the chunks are filled again from the first. Chunks of memoChunk bytes, never grown nor
// copied: a batch's transcodings cost no reallocation of what is already kept.
type jMemo struct {
	mu      sync.Mutex
	chunks  [][]byte // filled one after another; chunks[cur] is being filled
	cur     int
	size    int // the bytes put since the chunks were last filled from the first
	entries []jMemoEntry
	head    int
	slots   []jdSlot // the direct decoder's reads (jsondirect.go), refilled with the chunks
}

type jMemoEntry struct {
	jb           *jsonBody
	chunk        int
	in, out, end int  // the document at chunks[chunk][in:out], its transcoding at [out:end]
	slots        bool // a direct read instead, at jMemo.slots[s0:s1] (end is out)
	s0, s1       int
}

// maxMemoBytes bounds the documents and transcodings one source keeps.
const maxMemoBytes = 64 << 20

// memoChunk is the size of the memo's chunks; a document and its transcoding larger than
// that get a chunk of their own, dropped when the chunks are next filled from the first.
const memoChunk = 1 << 20

// memoLookahead is how many entries a decode passes looking for its own.
const memoLookahead = 64

// put remembers the transcoding out of document in, of writer jb; or, with slots not
// nil, the direct decoder's read of it (directAhead).
func (m *jMemo) put(jb *jsonBody, in, out []byte, slots []jdSlot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(in) + len(out) + jdSlotBytes*len(slots)
	if m.head == len(m.entries) || m.size+n > maxMemoBytes {
		for i, c := range m.chunks {
			if cap(c) > memoChunk {
				c = nil
			}
			m.chunks[i] = c[:0]
		}
		m.cur, m.size, m.entries, m.head, m.slots = 0, 0, m.entries[:0], 0, m.slots[:0]
	}
	if m.cur < len(m.chunks) && cap(m.chunks[m.cur])-len(m.chunks[m.cur]) < n && len(m.chunks[m.cur]) > 0 {
		m.cur++
	}
	if m.cur == len(m.chunks) {
		m.chunks = append(m.chunks, nil)
	}
	c := m.chunks[m.cur]
	if cap(c)-len(c) < n { // an empty chunk too small: a new one
		c = make([]byte, 0, max(memoChunk, n))
	}
	e := jMemoEntry{jb: jb, chunk: m.cur, in: len(c), slots: slots != nil}
	c = append(c, in...)
	e.out = len(c)
	c = append(c, out...)
	e.end = len(c)
	if slots != nil {
		e.s0, e.s1 = len(m.slots), len(m.slots)+len(slots)
		m.slots = append(m.slots, slots...)
	}
	m.chunks[m.cur] = c
	m.size += n
	m.entries = append(m.entries, e)
}

// take appends the remembered transcoding of body by jb to dst, if there is one; a
// remembered direct read of it (directAhead) is dropped.
func (m *jMemo) take(jb *jsonBody, dst, body []byte) ([]byte, bool) {
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := m.head; i < len(m.entries) && i < m.head+memoLookahead; i++ {
		e := &m.entries[i]
		c := m.chunks[e.chunk]
		if e.jb == jb && bytes.Equal(c[e.in:e.out], body) {
			for k := m.head; k <= i; k++ {
				m.entries[k].jb = nil
			}
			m.head = i + 1
			if e.slots {
				return nil, false // a direct read that a decoder without the direct path passes over
			}
			return append(dst, c[e.out:e.end]...), true
		}
	}
	return nil, false
}

// keepTranscodings makes the decodes of ws (a JSON writer schema its source has not
// published yet) look for their transcodings in memo.
func (ws *WriterSchema) keepTranscodings(memo *jMemo) {
	if jb, ok := ws.body.(*jsonBody); ok {
		jb.memo = memo
	}
}

// transcodeAhead transcodes document body of ws (a JSON writer schema) in one pass and
// remembers the result for the decode that follows; false when the one-pass transcoder
// gives up. writer: a top-level key ws lacks gives up (plain JSON infers a column for it).
func (ws *WriterSchema) transcodeAhead(memo *jMemo, body []byte, writer bool) bool {
	jb, ok := ws.body.(*jsonBody)
	if !ok || ws.DeltaErr != nil {
		return false
	}
	sp := jAheadPool.Get().(*[]byte)
	defer jAheadPool.Put(sp)
	out, _, ok := fastJSON((*sp)[:0], body, jb.top, writer, false)
	if !ok {
		return false
	}
	memo.put(jb, body, out, nil)
	if cap(out) <= maxScratch {
		*sp = out[:0]
	}
	return true
}

var jAheadPool = sync.Pool{New: func() any { return new([]byte) }}

// fastEnvelope finds a Kafka Connect JSON record's schema and payload values in one
// checked pass (jScanner.topKeys's rules); false when the one-pass reader gives up or
// either is missing.
func fastEnvelope(value []byte) (schema, payload []byte, ok bool) {
	f := jFastPool.Get().(*jFast)
	defer func() {
		f.b = nil
		clear(f.keys)
		f.keys = f.keys[:0]
		jFastPool.Put(f)
	}()
	f.b, f.i, f.doc = value, 0, false
	if f.peek() != '{' {
		return nil, nil, false
	}
	f.i++
	if f.peek() == '}' {
		return nil, nil, false
	}
	for {
		if f.peek() != '"' {
			return nil, nil, false
		}
		k, ok := f.str()
		if !ok || f.peek() != ':' || !f.newKey(0, k) {
			return nil, nil, false
		}
		f.i++
		f.ws()
		start := f.i
		if !f.skip(1) {
			return nil, nil, false
		}
		switch string(k) {
		case "schema":
			schema = value[start:f.i]
		case "payload":
			payload = value[start:f.i]
		}
		switch f.peek() {
		case ',':
			f.i++
			continue
		case '}':
			f.i++
		default:
			return nil, nil, false
		}
		break
	}
	return schema, payload, schema != nil && payload != nil
}
