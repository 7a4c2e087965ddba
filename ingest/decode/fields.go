package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// A record compiles to a flat list of fieldOps run by runFields. The common shapes are
// decoded inline, with the reader position held in a local across the whole list: a
// primitive leaf, a leaf in a two-branch union with null ([null, x] or [x, null]), and an
// array (or [null, array]) of such leaves. Anything else is a compiled emitFn (opCall).
// Each shape decodes, appends and fails exactly like the closures that value, array and
// leafFn compile for it (same values, levels, reasons, messages and field paths).

// fieldOp is one step of a record. Levels and the column index are stored in the widths
// parquet-go allows (fastField checks them), so that the level setters' range checks
// compile away.
type fieldOp struct {
	kind opKind
	// A two-branch union with null around the value: opt is set, nullIdx is the index of
	// the null branch, a null is appended at nullDef, or is a NOT NULL violation (notNull).
	opt     bool
	notNull bool
	def     uint8  // definition level of a present leaf value (arrays: of an empty array)
	nullDef uint8  // opt: definition level of a null
	inner   uint8  // opArray: repetition level of the items after the first
	col     uint16 // leaf column (an array's: its items' column), at most maxFastColumn
	nullIdx int64

	text  bool     // opString: an Avro string (string, uuid), checked for UTF-8 (badUTF8)
	syms  [][]byte // opEnum: the symbols
	dec   *decOut  // opDecimal: precision, column and the wide path
	up    int      // opDecimal: scale difference (the column's scale minus the writer's)
	fixed int      // opDecimal: size of a fixed, or -1 for bytes

	item    *fieldOp // opArray: the items (a leaf op, possibly opt)
	minItem int      // opArray: smallest encoded size of one item

	phys parquet.Kind // opLong, opInt32, opDouble, opBool, opDecimal (p ≤ 18): the leaf's physical type

	path string // field path of errors
	fn   emitFn // opCall
	skip bool   // opCall: the field has no column; its value is read and discarded
}

// maxFastColumn bounds the column index of inline steps: masked with it, the index is
// provably within parquet.MaxColumnIndex.
const maxFastColumn = 1<<15 - 1

type opKind uint8

const (
	opCall    opKind = iota
	opLong           // long, time-micros → INT64
	opInt32          // int, time-millis → INT32
	opMicros         // timestamp-micros, local-timestamp-micros → INT64 within Delta's timestamp range
	opDays           // date → INT32 within Delta's date range
	opDouble         // double → DOUBLE
	opBool           // boolean → BOOLEAN
	opString         // string, uuid, bytes → BYTE_ARRAY (owned bytes)
	opEnum           // enum → BYTE_ARRAY (symbol)
	opDecimal        // decimal on bytes or fixed → decimal column
	opArray          // array of leaves → LIST
)

// plain is k without its range: opLong for opMicros, opInt32 for opDays. The direct
// decoders, which check Delta's ranges as they parse, match steps by it.
func (k opKind) plain() opKind {
	switch k {
	case opMicros:
		return opLong
	case opDays:
		return opInt32
	}
	return k
}

// fastField compiles a field value written as w into table type t (null at nullDef, present
// at nullDef+1, repetition level rep) to a fieldOp of one of runFields's inline shapes. For
// anything else, or anything that would not compile, it reports false and the caller
// compiles the value with value (which also produces the errors).
func (c *compiler) fastField(w avro.Schema, t deltalog.DataType, nullable bool, path string, pqPath []string, nullDef, rep int) (fieldOp, bool) {
	if c.noInline {
		return fieldOp{}, false
	}
	o := fieldOp{nullIdx: -1, fixed: -1, path: path}
	if u, ok := deref(w).(*avro.UnionSchema); ok {
		types := u.Types()
		if len(types) != 2 {
			return fieldOp{}, false
		}
		switch {
		case types[0].Type() == avro.Null && types[1].Type() != avro.Null:
			o.nullIdx, w = 0, types[1]
		case types[1].Type() == avro.Null && types[0].Type() != avro.Null:
			o.nullIdx, w = 1, types[0]
		default:
			return fieldOp{}, false
		}
		o.opt, o.notNull, o.nullDef = true, !nullable, uint8(nullDef) // nullDef < def, checked below
	}
	def := nullDef + 1
	if a, ok := deref(w).(*avro.ArraySchema); ok {
		at, ok := t.(*deltalog.ArrayType)
		if !ok {
			return fieldOp{}, false
		}
		item, ok := c.fastField(a.Items(), at.ElementType, at.ContainsNull, path+"[]", extend(pqPath, "list", "element"), def+1, rep+1)
		if !ok || item.kind == opArray {
			return fieldOp{}, false
		}
		minItem, err := minSize(a.Items(), 0)
		if err != nil {
			return fieldOp{}, false
		}
		if def > parquet.MaxDefinitionLevel || rep+1 > parquet.MaxRepetitionLevel {
			return fieldOp{}, false
		}
		o.kind, o.col, o.def, o.item, o.inner, o.minItem = opArray, item.col, uint8(def), &item, uint8(rep+1), minItem
		return o, true
	}
	switch deref(w).(type) {
	case *avro.PrimitiveSchema, *avro.EnumSchema, *avro.FixedSchema:
	default:
		return fieldOp{}, false
	}
	k, err := classify(w)
	if err != nil {
		return fieldOp{}, false
	}
	switch {
	case t == deltalog.Long && (k.base == kLong || k.base == kTimeMicros):
		o.kind = opLong
	case t == deltalog.Timestamp && k.base == kTsMicros, t == deltalog.TimestampNtz && k.base == kLocalTsMicros:
		o.kind = opMicros
	case t == deltalog.Integer && (k.base == kInt || k.base == kTimeMillis):
		o.kind = opInt32
	case t == deltalog.Date && k.base == kDate:
		o.kind = opDays
	case t == deltalog.Double && k.base == kDouble:
		o.kind = opDouble
	case t == deltalog.Boolean && k.base == kBool:
		o.kind = opBool
	case t == deltalog.String && (k.base == kString || k.base == kUUID):
		o.kind, o.text = opString, true
	case t == deltalog.Binary && k.base == kBytes:
		o.kind = opString
	case t == deltalog.String && k.base == kEnum:
		o.kind, o.syms = opEnum, k.symbols
	default:
		dt, ok := t.(deltalog.DecimalType)
		if !ok || (k.base != kDecimalBytes && k.base != kDecimalFixed) || dt.Scale < k.scale || dt.Precision-dt.Scale < k.precision-k.scale {
			return fieldOp{}, false
		}
		o.kind, o.up = opDecimal, dt.Scale-k.scale
		if k.base == kDecimalFixed {
			o.fixed = k.size
		}
	}
	col, err := c.leaf(pqPath, def, rep)
	if err != nil || col > maxFastColumn {
		return fieldOp{}, false
	}
	if o.kind == opDecimal {
		dt := t.(deltalog.DecimalType)
		o.dec = &decOut{p: dt.Precision, col: col, def: def, width: decimalBytes(dt.Precision), bound: bigPow10(dt.Precision), path: path}
	}
	o.col, o.def = uint16(col), uint8(def) // leaf checked both
	if o.kind == opString {
		c.recordBytes(col, rep)
	}
	switch o.kind {
	case opLong, opMicros:
		o.phys = parquet.Int64
	case opInt32, opDays:
		o.phys = parquet.Int32
	case opDouble:
		o.phys = parquet.Double
	case opBool:
		o.phys = parquet.Boolean
	case opDecimal:
		o.phys = parquet.Int64
		if o.dec.p <= 9 {
			o.phys = parquet.Int32
		}
	}
	return o, true
}

// Delta's ranges as spans from their lower ends: v is within them when
// uint(v - min) ≤ span (one comparison).
const (
	timestampSpan = uint64(deltalog.TimestampMaxMicros - deltalog.TimestampMinMicros)
	dateSpan      = uint32(deltalog.DateMaxDays - deltalog.DateMinDays)
)

// errNullNotNull is the NOT NULL violation of a null union branch at path.
func errNullNotNull(path string) error {
	return newError(ReasonNotNullViolation, path, errors.New("decode record: null for a NOT NULL column"))
}

func errUnionIndex(idx int64, path string) error {
	return withField(malformed("union index %d out of range [0,%d)", idx, 2), path)
}

func errEnumIndex(v int32, n int, path string) error {
	return withField(malformed("enum index %d out of range [0,%d)", v, n), path)
}

// runFields runs a record's steps at repetition level r. buf and pos stay in locals across
// the inline steps (s.pos is synchronised around calls). A set fixed-width value of a
// dense column is appended as its word (column.Bits) where it is decoded, a set string,
// bytes or enum value of a dense column as its bytes (column.Column.AppendBytes, from the
// payload or the symbol); every other inline step ends in the one levelled append at put
// (which turns a dense column levelled at its first null).
func (s *state) runFields(ops []fieldOp, r int) error {
	buf, pos, cols := s.buf, s.pos, s.cols
	rep := int(uint8(r)) // r ≤ parquet.MaxRepetitionLevel (compiler.leaf): no range check
	var v parquet.Value  // the value of the step; every path to put sets it
	var w uint64         // a fixed-width value's word (column.Bits); every path to word sets it
	for i := range ops {
		o := &ops[i]
		def := o.def
		var err error
		if o.opt {
			var idx int64
			if uint(pos) < uint(len(buf)) && buf[pos] < 0x80 {
				c := buf[pos]
				pos++
				idx = int64(c>>1) ^ -int64(c&1)
			} else if idx, pos, err = zigzagSlow(buf, pos); err != nil {
				return withField(err, o.path)
			}
			if idx != o.nullIdx^1 {
				if idx != o.nullIdx {
					return errUnionIndex(idx, o.path)
				}
				if o.notNull {
					return errNullNotNull(o.path)
				}
				v, def = parquet.NullValue(), o.nullDef
				goto put
			}
		}
		switch o.kind {
		case opLong, opMicros:
			var x int64
			if uint(pos) < uint(len(buf)) && buf[pos] < 0x80 {
				c := buf[pos]
				pos++
				x = int64(c>>1) ^ -int64(c&1)
			} else {
				var u uint64
				n := 0
				if len(buf)-pos >= 8 {
					u, n = varint8(binary.LittleEndian.Uint64(buf[pos:]))
				}
				if n > 0 {
					pos += n
					x = int64(u>>1) ^ -int64(u&1)
				} else if x, pos, err = zigzagSlow(buf, pos); err != nil {
					return withField(err, o.path)
				}
			}
			if o.kind == opMicros && uint64(x-deltalog.TimestampMinMicros) > timestampSpan {
				return withField(timestampOutOfRange(x, 1), o.path)
			}
			w = uint64(x)
			goto word
		case opInt32, opDays:
			var x int32
			if uint(pos) < uint(len(buf)) && buf[pos] < 0x80 {
				c := buf[pos]
				pos++
				x = int32(c>>1) ^ -int32(c&1)
			} else if x, pos, err = int32Slow(buf, pos); err != nil {
				return withField(err, o.path)
			}
			if o.kind == opDays && uint32(x-deltalog.DateMinDays) > dateSpan {
				return withField(daysOutOfRange(int64(x)), o.path)
			}
			w = uint64(uint32(x))
			goto word
		case opDouble:
			if len(buf)-pos < 8 {
				return withField(truncated(), o.path)
			}
			w = binary.LittleEndian.Uint64(buf[pos:]) // the IEEE 754 bits
			pos += 8
			goto word
		case opBool:
			if uint(pos) >= uint(len(buf)) {
				return withField(truncated(), o.path)
			}
			c := buf[pos]
			if c > 1 {
				return withField(badBool(c), o.path)
			}
			pos++
			w = uint64(c) // 0 or 1, checked above
			goto word
		case opString:
			var n int64
			if uint(pos) < uint(len(buf)) && buf[pos] < 0x80 {
				c := buf[pos]
				pos++
				n = int64(c>>1) ^ -int64(c&1)
			} else if n, pos, err = zigzagSlow(buf, pos); err != nil {
				return withField(err, o.path)
			}
			if uint64(n) > uint64(len(buf)-pos) { // also every negative n
				return withField(badLength(n, len(buf)-pos), o.path)
			}
			start := pos
			pos += int(n)
			if o.text && !validText(buf[start:pos]) {
				return withField(badUTF8(buf[start:pos]), o.path)
			}
			if p := &cols[o.col]; p.IsDense() {
				// Straight from the record into the column's Bytes: no arena copy, no
				// parquet.Value.
				p.AppendBytes(buf[start:pos])
				continue
			}
			v = parquet.ByteArrayValue(s.own(buf[start:pos:pos]))
		case opEnum:
			var x int32
			if uint(pos) < uint(len(buf)) && buf[pos] < 0x80 {
				c := buf[pos]
				pos++
				x = int32(c>>1) ^ -int32(c&1)
			} else if x, pos, err = int32Slow(buf, pos); err != nil {
				return withField(err, o.path)
			}
			if uint32(x) >= uint32(len(o.syms)) {
				return errEnumIndex(x, len(o.syms), o.path)
			}
			if p := &cols[o.col]; p.IsDense() {
				p.AppendBytes(o.syms[x])
				continue
			}
			v = parquet.ByteArrayValue(o.syms[x])
		case opDecimal:
			// Bytes of up to 8 into decimal(p ≤ 18) here; the rest in leaf.
			if o.fixed < 0 && uint(pos) < uint(len(buf)) && buf[pos] <= 16 && o.dec.p <= 18 {
				n := int(buf[pos] >> 1) // non-negative and ≤ 8: buf[pos] is even
				if buf[pos]&1 == 0 && n <= len(buf)-pos-1 {
					var x int64
					var ok bool
					if len(buf)-pos-1 >= 8 && n > 0 {
						// Sign-extend the n big-endian bytes at once.
						x, ok = scale64(int64(binary.BigEndian.Uint64(buf[pos+1:]))>>(64-8*n), o.up, o.dec.p)
					} else {
						x, ok = decimal64(buf[pos+1:pos+1+n], o.up, o.dec.p)
					}
					if !ok {
						return o.dec.exceeds()
					}
					pos += 1 + n
					w = uint64(x)
					if o.dec.p <= 9 {
						w = uint64(uint32(int32(x)))
					}
					goto word
				}
			}
			s.pos = pos
			if err := s.leaf(o, r); err != nil {
				return err
			}
			pos = s.pos
			continue
		case opCall:
			s.pos = pos
			if err := o.fn(s, r); err != nil {
				return err
			}
			pos = s.pos
			continue
		case opArray:
			s.pos = pos
			if err := s.array(o, r); err != nil {
				return err
			}
			pos = s.pos
			continue
		default:
			return withField(fmt.Errorf("decode record: unknown field op %d", o.kind), o.path)
		}
	put:
		v.SetRepetitionLevel(rep)
		v.SetDefinitionLevel(int(def))
		v.SetColumnIndex(int(o.col & maxFastColumn))
		{
			// appendLevelled, written out: v is appended from where it is, not copied
			// into a parameter first (a copy of its just-set level bytes stalls the load).
			p := &cols[o.col]
			if p.IsDense() {
				p.ToLevelled()
			}
			p.Values = append(p.Values, v)
		}
		continue
	word:
		// A set fixed-width value: its word into a dense column, else its parquet.Value
		// of the leaf's physical type (o.phys) at put.
		if p := &cols[o.col]; p.IsDense() {
			p.Dense = append(p.Dense, w)
			continue
		}
		switch o.phys {
		case parquet.Int64:
			v = parquet.Int64Value(int64(w))
		case parquet.Int32:
			v = parquet.Int32Value(int32(uint32(w)))
		case parquet.Double:
			v = parquet.DoubleValue(math.Float64frombits(w))
		default: // parquet.Boolean
			v = parquet.BooleanValue(w != 0)
		}
		goto put
	}
	s.pos = pos
	return nil
}

// varint8 decodes a varint of at most 8 bytes (56 bits) from x, the next 8 bytes of the
// input read little-endian, returning its value and length; n is 0 for a longer varint.
// The 7-bit groups of the bytes up to the first without the continuation bit are packed
// at once.
func varint8(x uint64) (v uint64, n int) {
	stop := ^x & 0x8080808080808080
	if stop == 0 {
		return 0, 0
	}
	nbits := uint(bits.TrailingZeros64(stop)) + 1 // 8 × bytes used
	x &= (uint64(1)<<nbits - 1) & 0x7f7f7f7f7f7f7f7f
	x = (x&0x7f007f007f007f00)>>1 | x&0x007f007f007f007f
	x = (x&0x3fff00003fff0000)>>2 | x&0x00003fff00003fff
	x = (x&0x0fffffff00000000)>>4 | x&0x000000000fffffff
	return x, int(nbits / 8)
}

// decimal64 is the unscaled value of decimal(p ≤ 18) from the big-endian two's-complement
// b (at most 8 bytes) times 10^up, or false if it exceeds the precision (decOut.emitTwos
// and emitScaled for these values).
func decimal64(b []byte, up, p int) (int64, bool) {
	var v int64
	if len(b) > 0 && b[0]&0x80 != 0 {
		v = -1
	}
	for _, c := range b {
		v = v<<8 | int64(c)
	}
	return scale64(v, up, p)
}

// scale64 is v × 10^up within decimal(p ≤ 18), or false.
func scale64(v int64, up, p int) (int64, bool) {
	if up > 0 {
		if up >= len(pow10) {
			return 0, false
		}
		m := pow10[up]
		if v > math.MaxInt64/m || v < math.MinInt64/m {
			return 0, false
		}
		v *= m
	}
	if lim := pow10[p]; v >= lim || v <= -lim {
		return 0, false
	}
	return v, true
}

// leaf decodes one leaf value of o (not its union) at s.pos and appends it at (rep, o.def).
func (s *state) leaf(o *fieldOp, rep int) error {
	col, def := int(o.col), int(o.def)
	var err error
	switch o.kind {
	case opLong, opMicros:
		var v int64
		if v, err = s.long(); err == nil {
			if o.kind == opMicros && uint64(v-deltalog.TimestampMinMicros) > timestampSpan {
				return withField(timestampOutOfRange(v, 1), o.path)
			}
			s.putInt64(v, rep, def, col)
			return nil
		}
	case opInt32, opDays:
		var v int32
		if v, err = s.int(); err == nil {
			if o.kind == opDays && uint32(v-deltalog.DateMinDays) > dateSpan {
				return withField(daysOutOfRange(int64(v)), o.path)
			}
			s.putInt32(v, rep, def, col)
			return nil
		}
	case opDouble:
		var v float64
		if v, err = s.double(); err == nil {
			s.putDouble(v, rep, def, col)
			return nil
		}
	case opBool:
		var v bool
		if v, err = s.bool(); err == nil {
			s.putBoolean(v, rep, def, col)
			return nil
		}
	case opString:
		if o.text {
			err = s.putText(rep, def, col)
		} else {
			err = s.putString(rep, def, col)
		}
		if err == nil {
			return nil
		}
	case opEnum:
		var v int32
		if v, err = s.int(); err == nil {
			if uint32(v) >= uint32(len(o.syms)) {
				return errEnumIndex(v, len(o.syms), o.path)
			}
			s.putByteArray(o.syms[v], rep, def, col)
			return nil
		}
	case opDecimal:
		var b []byte
		if o.fixed >= 0 {
			b, err = s.fixed(o.fixed)
		} else {
			b, err = s.span()
		}
		if err == nil {
			if len(b) > 8 || o.dec.p > 18 {
				return o.dec.emitTwos(s, rep, b, o.up)
			}
			v, ok := decimal64(b, o.up, o.dec.p)
			if !ok {
				return o.dec.exceeds()
			}
			if o.dec.p <= 9 {
				s.putInt32(int32(v), rep, def, col)
			} else {
				s.putInt64(v, rep, def, col)
			}
			return nil
		}
	default:
		err = fmt.Errorf("decode record: unknown field op %d", o.kind)
	}
	return withField(err, o.path)
}

// array decodes an array of leaves (o.item) at s.pos, the first item at repetition level
// r, the others at o.inner; an empty array is one null at o.def in the items' column.
func (s *state) array(o *fieldOp, r int) error {
	it := o.item
	rep, first := r, true
	for {
		// blockCount, with one-byte counts and sizes inline.
		n, size, ok := int64(0), int64(-1), false
		if i := s.pos; o.minItem > 0 && uint(i) < uint(len(s.buf)) {
			left := len(s.buf) - i - 1 // after the count
			switch c := s.buf[i]; {
			case c == 0:
				s.pos, ok = i+1, true
			case c < 0x80 && c&1 == 0: // count c/2
				if int(c>>1)*o.minItem <= left {
					n, s.pos, ok = int64(c>>1), i+1, true
				}
			case c < 0x80 && left > 0: // count -(c/2+1), then the block's byte size
				if z := s.buf[i+1]; z < 0x80 && z&1 == 0 && int(z>>1) <= left-1 && (int(c>>1)+1)*o.minItem <= left-1 {
					n, size, s.pos, ok = int64(c>>1)+1, int64(z>>1), i+2, true
				}
			}
		}
		if !ok {
			var err error
			if n, size, err = s.blockCount(o.minItem); err != nil {
				return withField(err, o.path)
			}
		}
		if n == 0 {
			break
		}
		first = false
		start := s.pos
		if it.kind == opString && !it.opt {
			// The common array<string>: inline, position in a local.
			buf, pos, cols := s.buf, s.pos, s.cols
			def, col := int(it.def), int(it.col&maxFastColumn)
			for ; n > 0; n-- {
				var l int64
				if uint(pos) < uint(len(buf)) && buf[pos] < 0x80 {
					c := buf[pos]
					pos++
					l = int64(c>>1) ^ -int64(c&1)
				} else {
					var err error
					if l, pos, err = zigzagSlow(buf, pos); err != nil {
						return withField(err, it.path)
					}
				}
				if uint64(l) > uint64(len(buf)-pos) {
					return withField(badLength(l, len(buf)-pos), it.path)
				}
				i := pos
				pos += int(l)
				if it.text && !validText(buf[i:pos]) {
					return withField(badUTF8(buf[i:pos]), it.path)
				}
				v := parquet.ByteArrayValue(s.own(buf[i:pos:pos]))
				v.SetRepetitionLevel(int(uint8(rep)))
				v.SetDefinitionLevel(def)
				v.SetColumnIndex(col)
				p := &cols[col]
				if p.IsDense() { // never: a list's items are repeated
					p.ToLevelled()
				}
				p.Values = append(p.Values, v)
				rep = int(o.inner)
			}
			s.pos = pos
		} else {
			for ; n > 0; n-- {
				if err := s.item(it, rep); err != nil {
					return err
				}
				rep = int(o.inner)
			}
		}
		if size >= 0 && int64(s.pos-start) != size {
			return withField(malformed("array block declares %d bytes, its items took %d", size, s.pos-start), o.path)
		}
	}
	if first { // an empty array
		s.putNull(r, int(o.def), int(o.col))
	}
	return nil
}

// item decodes one array item of a leaf op, with its union if any.
func (s *state) item(o *fieldOp, rep int) error {
	if o.opt {
		idx, err := s.long()
		if err != nil {
			return withField(err, o.path)
		}
		if idx != o.nullIdx^1 {
			if idx != o.nullIdx {
				return errUnionIndex(idx, o.path)
			}
			if o.notNull {
				return errNullNotNull(o.path)
			}
			s.putNull(rep, int(o.nullDef), int(o.col))
			return nil
		}
	}
	return s.leaf(o, rep)
}
