package decode

import (
	"bytes"
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// The direct Protobuf decoder: the values of a body go from the wire format straight into
// the columns, with no Avro body and no second decode. It reads the bodies the one pass
// reads (messageInOrder: fields in ascending number order, a singular field at most once,
// a repeated field's occurrences adjacent; unknown fields skipped) of a message whose
// top-level fields are scalars (no uint64, fixed64 or float), strings, bytes, enums,
// Timestamps, Durations, Empties and repeated strings or bytes, where the Avro decoder
// compiled for the table takes each field with one of its inline steps (opLong, opInt32,
// opDouble, opBool, opString, an opArray of opString) or discards it: the values it
// writes are the ones that step writes from the transcoded value, at the same levels, in
// the same form (dense or levelled).
//
// It first reads and checks the whole body (pdSlot per field: the value, its bytes, a
// list's occurrences), then writes every column; on anything it does not read exactly as
// the transcoding path would (a body of another shape, a wire error, a string that is not
// UTF-8, a Timestamp out of range, an enum number without a name, a null for a NOT NULL
// column, a dense column reset for another leaf) it has written nothing and the record
// takes the transcoding path, which gives the answer and the error. So results, errors
// and dead letters are the transcoding path's; only the work differs. Under an aliasing
// arena (Arena.AliasPayloads) levelled string and bytes values are sub-slices of the
// Protobuf body, as an Avro body's are; without it they are copied into the arena.

// pdKind is how the direct decoder reads and writes one top-level field.
type pdKind uint8

const (
	pdSkip   pdKind = iota // no column (the table lacks it): read and checked only
	pdEmpty                // google.protobuf.Empty: no column; present, the transcoding path reads the body
	pdLong                 // int64, sint64, sfixed64, uint32, fixed32 → opLong
	pdInt32                // int32, sint32, sfixed32 → opInt32
	pdDouble               // double → opDouble
	pdBool                 // bool → opBool
	pdString               // string (checked for UTF-8), bytes → opString
	pdEnum                 // enum → opString: its name
	pdTime                 // Timestamp, Duration → opLong: microseconds
	pdList                 // repeated string or bytes → opArray of opString
)

// pdField is one top-level field of the message (pbMsg.fields[i]) with the Avro decoder's
// step for it (Decoder.ops[i]); what read looks at first, in few bytes.
type pdField struct {
	kind     pdKind
	wt       protowire.Type    // the wire type of one value (a list's: of one element)
	pk       protoreflect.Kind // the Protobuf kind of one value
	tk       pbKind            // pdTime: pbTimestamp or pbDuration
	list     bool
	oneof    bool // a member of a oneof: present, the transcoding path reads the body
	nullable bool // absent: a null at op.nullDef
	// text: the string's bytes (an element's, for a list) must be valid UTF-8 (validText):
	// the wire decoder checks proto3's, the Avro decoder every Avro string's.
	text    bool
	notNull bool // a nullable field whose column is NOT NULL: absent, the record fails
	op      *fieldOp
	names   [][]byte // pdEnum: value names by number (nil for none)
	// The value of the field when absent and not nullable (its Avro default decoded).
	zw uint64
	zb []byte
}

// pdSlot is what a body holds for one field: n is 0 when it holds none, else 1, or a
// list's count of values. w is the value's word (an integer, a bool, a double's bits,
// microseconds), an enum's number, or for a string and a list the offsets of its bytes
// in the body: start<<32 | end (a list's: its values with the tags between them).
type pdSlot struct {
	w uint64
	n uint32
}

// protoDirect is the direct decoder of one (message, Avro decoder) pair.
type protoDirect struct {
	pm      *pbMsg
	d       *Decoder
	fields  []pdField
	byNum   []int16 // field number → 1 + index in fields, for numbers below len(byNum)
	notNull []int   // the indexes of fields with notNull
}

// compileProtoDirect returns the direct decoder of message pm for the Avro decoder d
// compiled from its derived schema, or nil when a field or its step is not one it reads.
func compileProtoDirect(pm *pbMsg, d *Decoder) *protoDirect {
	if pm == nil || d == nil || d.topUnion || !pm.inOrder || len(d.ops) != len(pm.fields) {
		return nil
	}
	if len(pm.fields) >= 1<<15 {
		return nil
	}
	pd := &protoDirect{pm: pm, d: d, fields: make([]pdField, len(pm.fields)), byNum: make([]int16, len(pm.byNum))}
	for n, k := range pm.byNum {
		pd.byNum[n] = int16(k)
	}
	fixed := 0 // what the fields may write beyond the body's bytes (see below)
	for i := range pm.fields {
		f, df := &pm.fields[i], &pd.fields[i]
		df.op, df.wt, df.pk, df.tk = &d.ops[i], f.wt, f.typ.pk, f.typ.kind
		df.list, df.oneof, df.nullable = f.list, f.oneof != 0, f.nullable
		if !directField(df, f) {
			return nil
		}
		if df.notNull {
			pd.notNull = append(pd.notNull, i)
		}
		fixed += 32 + len(f.zero)
		for _, n := range df.names {
			fixed += len(n)
		}
	}
	// The transcoding refuses a body whose Avro outgrows maxExpandFixed + maxExpandFactor
	// × the body. A body the direct decoder reads transcodes to at most fixed + its own
	// length: a string or list element at most its wire bytes, every other value (an
	// enum's name, a default, a union index, a list's counts) within its field's share of
	// fixed. Within maxExpandFixed, no body it reads is refused for it.
	if fixed > maxExpandFixed {
		return nil
	}
	return pd
}

// directField sets df's kind from its field and step, and reports whether the direct
// decoder reads it.
func directField(df *pdField, f *pbField) bool {
	op := df.op
	if f.isMap || f.typ.pk == protoreflect.GroupKind {
		return false
	}
	if op.kind == opCall {
		if !op.skip {
			return false
		}
		switch {
		case f.typ.kind == pbEmpty:
			df.kind = pdEmpty
			return true
		case f.typ.pk == protoreflect.MessageKind:
			return false // a message's values are checked when transcoded: not read here
		case f.list && f.wt != protowire.BytesType:
			return false // packed runs
		}
		df.kind, df.text = pdSkip, f.utf8v
		return true
	}
	if f.list {
		it := op.item
		if op.kind != opArray || op.opt || it == nil || it.kind != opString || it.opt {
			return false
		}
		switch f.typ.kind {
		case pbString:
			df.kind, df.text = pdList, true
			return it.text
		case pbBytes:
			df.kind = pdList
			return !it.text
		}
		return false
	}
	if op.opt != f.nullable || op.opt && op.nullIdx != 0 {
		return false
	}
	df.notNull = op.opt && op.notNull
	switch f.typ.kind {
	case pbInt64, pbUint32:
		df.kind = pdLong
	case pbInt32:
		df.kind = pdInt32
	case pbDouble:
		df.kind = pdDouble
	case pbBool:
		df.kind = pdBool
	case pbString:
		df.kind, df.text = pdString, true
	case pbBytes:
		df.kind = pdString
	case pbEnum:
		df.kind = pdEnum
		df.names = make([][]byte, len(f.typ.names))
		for n, name := range f.typ.names {
			if name != "" {
				df.names[n] = []byte(name)
			}
		}
	case pbTimestamp, pbDuration:
		df.kind = pdTime
	default:
		return false
	}
	want := opLong
	switch df.kind {
	case pdInt32:
		want = opInt32
	case pdDouble:
		want = opDouble
	case pdBool:
		want = opBool
	case pdString, pdEnum:
		if op.kind != opString || op.text != (f.typ.kind != pbBytes) {
			return false
		}
		want = opString
	}
	if op.kind.plain() != want {
		return false
	}
	if f.nullable {
		return true
	}
	// The absent value: what the step reads from the field's Avro default (f.zero).
	z := f.zero
	switch df.kind {
	case pdLong, pdInt32:
		x, n := binary.Varint(z)
		if n != len(z) || df.kind == pdInt32 && int64(int32(x)) != x {
			return false
		}
		df.zw = uint64(x)
	case pdDouble:
		if len(z) != 8 {
			return false
		}
		df.zw = binary.LittleEndian.Uint64(z)
	case pdBool:
		if len(z) != 1 || z[0] > 1 {
			return false
		}
		df.zw = uint64(z[0])
	case pdString, pdEnum:
		n, k := binary.Varint(z)
		if k <= 0 || n < 0 || int64(len(z)-k) != n || op.text && !validText(z[k:]) {
			return false
		}
		df.zb = z[k:len(z):len(z)]
	default: // a Timestamp or Duration has presence
		return false
	}
	return true
}

// decodeColumns decodes body into cols (len(cols) == the decoder's Columns()) through a
// (nil: none), as transcodingDecoder.DecodeColumns does, and reports whether it did; when
// it did not, it has written nothing.
func (pd *protoDirect) decodeColumns(a *Arena, body []byte, cols []column.Column) bool {
	d := pd.d
	if !d.leavesMatch(cols) {
		return false // the Avro decoder's error (errLeaf)
	}
	s, pooled := d.acquire(a)
	if pooled {
		defer d.pool.Put(s)
	}
	if cap(s.pdSlots) < len(pd.fields) {
		s.pdSlots = make([]pdSlot, len(pd.fields))
	}
	slots := s.pdSlots[:len(pd.fields)]
	if !pd.read(slots, body) {
		return false
	}
	s.cols, s.owned = cols, s.alias
	pd.write(s, slots, body)
	if len(d.missing) > 0 {
		s.nulls(d.missing, 0, 0)
	}
	s.cols = nil
	return true
}

// pdVarint reads the varint at the start of b: its value and length (< 0: it does not
// parse, as protowire.ConsumeVarint).
func pdVarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	if len(b) >= 8 {
		if v, n := varint8(binary.LittleEndian.Uint64(b)); n > 0 {
			return v, n
		}
	}
	return protowire.ConsumeVarint(b)
}

// read reads body into slots (cleared first) and reports whether the direct decoder
// writes it: the body has the one pass's shape and holds nothing the transcoding path
// would refuse.
func (pd *protoDirect) read(slots []pdSlot, b []byte) (ok bool) {
	// One return: the deferred call is open-coded (no defer record per body).
	defer func() {
		if recover() != nil {
			ok = false // the transcoding path decides
		}
	}()
	ok = pd.scan(slots, b)
	return ok
}

// scan is read without the recover.
func (pd *protoDirect) scan(slots []pdSlot, b []byte) bool {
	if uint64(len(b)) > math.MaxUint32 {
		return false // offsets are 32 bits
	}
	clear(slots)
	fields := pd.fields
	next := 0 // the first field not yet read
	for i := 0; i < len(b); {
		tagAt := i
		var num protowire.Number
		var wt protowire.Type
		if c := b[i]; c < 0x80 && c >= 8 { // a one-byte tag
			num, wt = protowire.Number(c>>3), protowire.Type(c&7)
			i++
		} else {
			var n int
			if num, wt, n = readTag(b[i:]); n < 0 {
				return false
			}
			i += n
		}
		var fi int
		if int(num) < len(pd.byNum) {
			fi = int(pd.byNum[num]) - 1
		} else {
			fi = pd.pm.field(num)
		}
		if fi < 0 {
			n := protowire.ConsumeFieldValue(num, wt, b[i:])
			if n < 0 {
				return false
			}
			i += n
			continue
		}
		df, sl := &fields[fi], &slots[fi]
		if fi < next || df.oneof || wt != df.wt || df.kind == pdEmpty {
			return false
		}
		next = fi + 1
		if df.list {
			// The adjacent occurrences: a value, then tag and value after each.
			tag, start, count := b[tagAt:i], i, uint32(0)
			for {
				n := wireLen(b[i:], wt)
				if n < 0 {
					return false
				}
				if df.text && wt == protowire.BytesType && !validText(b[i+n-wireLenPayload(b[i:]):i+n]) {
					return false
				}
				i += n
				count++
				if len(tag) == 1 { // bytes.HasPrefix for the one-byte tags of fields 1..15
					if i == len(b) || b[i] != tag[0] {
						break
					}
				} else if !bytes.HasPrefix(b[i:], tag) {
					break
				}
				i += len(tag)
			}
			sl.w, sl.n = uint64(start)<<32|uint64(i), count
			continue
		}
		sl.n = 1
		switch wt {
		case protowire.VarintType:
			v, n := pdVarint(b[i:])
			if n < 0 {
				return false
			}
			i += n
			switch df.kind {
			case pdLong, pdInt32, pdBool:
				sl.w = uint64(intOf(df.pk, v))
			case pdEnum:
				x := int64(int32(v))
				if x < 0 || x >= int64(len(df.names)) || df.names[x] == nil {
					return false // a number without a name: its text, written by the transcoding
				}
				sl.w = uint64(x)
			}
		case protowire.Fixed32Type:
			if len(b)-i < 4 {
				return false
			}
			sl.w = uint64(intOf(df.pk, uint64(binary.LittleEndian.Uint32(b[i:]))))
			i += 4
		case protowire.Fixed64Type:
			if len(b)-i < 8 {
				return false
			}
			sl.w = binary.LittleEndian.Uint64(b[i:]) // a double's bits, a sfixed64's value
			i += 8
		case protowire.BytesType:
			n := wireLen(b[i:], wt)
			if n < 0 {
				return false
			}
			p := b[i+n-wireLenPayload(b[i:]) : i+n]
			switch df.kind {
			case pdString:
				if df.text && !validText(p) {
					return false
				}
				sl.w = uint64(i+n-len(p))<<32 | uint64(i+n)
			case pdTime:
				us, ok := wktMicros(df.tk, p)
				if !ok {
					return false
				}
				sl.w = uint64(us)
			case pdSkip:
				if df.text && !utf8.Valid(p) {
					return false
				}
			}
			i += n
		default:
			return false // a group: never a direct field
		}
	}
	for _, k := range pd.notNull {
		if slots[k].n == 0 {
			return false // the NOT NULL violation
		}
	}
	return true
}

// write appends the values read into slots from body b to s.cols, as runFields appends
// them from their Avro encoding.
func (pd *protoDirect) write(s *state, slots []pdSlot, b []byte) {
	for i := range pd.fields {
		df, sl := &pd.fields[i], slots[i]
		op := df.op
		col, def := int(op.col), int(op.def)
		switch df.kind {
		case pdSkip, pdEmpty:
			continue
		case pdList:
			if sl.n == 0 {
				s.putNull(0, def, col)
				continue
			}
			it := op.item
			icol, idef := int(it.col&maxFastColumn), int(it.def)
			c := &s.cols[icol]
			if c.IsDense() { // never: a list's items are repeated
				c.ToLevelled()
			}
			rep, p := 0, b[sl.w>>32:uint32(sl.w)]
			for k := uint32(0); k < sl.n; k++ {
				if k > 0 {
					_, _, n := readTag(p)
					p = p[n:]
				}
				n := wireLen(p, protowire.BytesType)
				// A levelled value built where it is appended, as array appends it.
				v := parquet.ByteArrayValue(s.own(p[n-wireLenPayload(p) : n]))
				v.SetRepetitionLevel(int(uint8(rep)))
				v.SetDefinitionLevel(idef)
				v.SetColumnIndex(icol)
				c.Values = append(c.Values, v)
				p = p[n:]
				rep = int(op.inner)
			}
			continue
		}
		w := sl.w
		var v []byte
		switch {
		case sl.n == 0 && df.nullable:
			s.putNull(0, int(op.nullDef), col)
			continue
		case sl.n == 0:
			w, v = df.zw, df.zb
		case df.kind == pdString:
			v = b[w>>32 : uint32(w)]
		case df.kind == pdEnum:
			v = df.names[w]
		}
		switch df.kind {
		case pdLong, pdTime:
			s.putInt64(int64(w), 0, def, col)
		case pdInt32:
			s.putInt32(int32(uint32(w)), 0, def, col)
		case pdDouble:
			s.putDouble(math.Float64frombits(w), 0, def, col) // the bits as they came
		case pdBool:
			s.putBoolean(w != 0, 0, def, col)
		case pdString:
			s.putBytes(v, 0, def, col)
		case pdEnum:
			s.putByteArray(v, 0, def, col) // a constant, as an enum symbol is
		}
	}
}

// wktMicros is a Timestamp's or Duration's value in microseconds from its message bytes
// b, as messageValue writes it; false when messageValue fails (a wire error, a value out
// of range).
func wktMicros(k pbKind, b []byte) (int64, bool) {
	var sec, nanos int64
	i := 0
	// As serializers write it: seconds then nanos, each at most once.
	if i < len(b) && b[i] == 0x08 {
		v, n := pdVarint(b[i+1:])
		if n < 0 {
			return 0, false
		}
		sec, i = int64(v), i+1+n
	}
	if i < len(b) && b[i] == 0x10 {
		v, n := pdVarint(b[i+1:])
		if n < 0 {
			return 0, false
		}
		nanos, i = int64(int32(v)), i+1+n
	}
	if i != len(b) {
		var err error
		if sec, nanos, err = secondsNanos(b); err != nil {
			return 0, false
		}
	}
	if k == pbTimestamp {
		if sec < minTimestampSeconds || sec > maxTimestampSeconds || nanos < 0 || nanos > 999_999_999 {
			return 0, false
		}
	} else if sec < -maxDurationSeconds || sec > maxDurationSeconds || nanos < -999_999_999 || nanos > 999_999_999 || (sec > 0 && nanos < 0) || (sec < 0 && nanos > 0) {
		return 0, false
	}
	return sec*1_000_000 + nanos/1000, true
}
