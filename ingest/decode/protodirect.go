package decode

import (
	"bytes"
	"encoding/binary"
	"math"
	"unicode/utf8"

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
// step for it (Decoder.ops[i]).
type pdField struct {
	f    *pbField
	op   *fieldOp
	kind pdKind
	// text: the string's bytes (an element's, for a list) must be valid UTF-8 (validText):
	// the wire decoder checks proto3's, the Avro decoder every Avro string's.
	text    bool
	notNull bool     // a nullable field whose column is NOT NULL: absent, the record fails
	names   [][]byte // pdEnum: value names by number (nil for none)
	// The value of the field when absent and not nullable (its Avro default decoded).
	zw uint64
	zb []byte
}

// pdSlot is what a body holds for one field: set, and the value's word, or its bytes (a
// string's, an enum's name), or for a list its occurrences [tag and value ...] and count.
type pdSlot struct {
	set bool
	w   uint64
	b   []byte
	n   int
}

// protoDirect is the direct decoder of one (message, Avro decoder) pair.
type protoDirect struct {
	pm      *pbMsg
	d       *Decoder
	fields  []pdField
	notNull []int // the indexes of fields with notNull
}

// compileProtoDirect returns the direct decoder of message pm for the Avro decoder d
// compiled from its derived schema, or nil when a field or its step is not one it reads.
func compileProtoDirect(pm *pbMsg, d *Decoder) *protoDirect {
	if pm == nil || d == nil || d.topUnion || !pm.inOrder || len(d.ops) != len(pm.fields) {
		return nil
	}
	pd := &protoDirect{pm: pm, d: d, fields: make([]pdField, len(pm.fields))}
	fixed := 0 // what the fields may write beyond the body's bytes (see below)
	for i := range pm.fields {
		f, op := &pm.fields[i], &d.ops[i]
		df := &pd.fields[i]
		df.f, df.op = f, op
		if !directField(df) {
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
func directField(df *pdField) bool {
	f, op := df.f, df.op
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
	if op.kind != want {
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
	for i := range cols {
		if c := &cols[i]; c.IsDense() && c.Len() == 0 && c.Leaf() != d.leaves[i] {
			return false // the Avro decoder's error (errLeaf)
		}
	}
	var s *state
	if a != nil {
		s = &a.s
		if s.retain == 0 {
			s.retain = arenaRetainChunks
		}
	} else {
		s = d.pool.Get().(*state)
		defer d.pool.Put(s)
	}
	if cap(s.pdSlots) < len(pd.fields) {
		s.pdSlots = make([]pdSlot, len(pd.fields))
	}
	slots := s.pdSlots[:len(pd.fields)]
	if !pd.read(slots, body) {
		clear(slots)
		return false
	}
	s.cols, s.owned = cols, s.alias
	pd.write(s, slots)
	if len(d.missing) > 0 {
		s.nulls(d.missing, 0, 0)
	}
	s.cols = nil
	clear(slots) // no reference to the body stays in the state
	return true
}

// read reads body into slots (cleared first) and reports whether the direct decoder
// writes it: the body has the one pass's shape and holds nothing the transcoding path
// would refuse.
func (pd *protoDirect) read(slots []pdSlot, b []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false // the transcoding path decides
		}
	}()
	clear(slots)
	pm := pd.pm
	next := 0 // the first field not yet read
	for i := 0; i < len(b); {
		tagAt := i
		num, wt, n := readTag(b[i:])
		if n < 0 {
			return false
		}
		i += n
		fi := pm.field(num)
		if fi < 0 {
			n := protowire.ConsumeFieldValue(num, wt, b[i:])
			if n < 0 {
				return false
			}
			i += n
			continue
		}
		f, df, sl := &pm.fields[fi], &pd.fields[fi], &slots[fi]
		if fi < next || f.oneof != 0 || wt != f.wt || df.kind == pdEmpty {
			return false
		}
		next = fi + 1
		if f.list {
			// The adjacent occurrences: a value, then tag and value after each.
			tag, start, count := b[tagAt:i], i, 0
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
				if !bytes.HasPrefix(b[i:], tag) {
					break
				}
				i += len(tag)
			}
			sl.set, sl.b, sl.n = true, b[start:i], count
			continue
		}
		n = wireLen(b[i:], wt)
		if n < 0 {
			return false
		}
		r := b[i : i+n]
		i += n
		sl.set = true
		switch df.kind {
		case pdLong, pdInt32, pdBool:
			sl.w = uint64(wireInt(f.typ.pk, r))
		case pdDouble:
			sl.w = binary.LittleEndian.Uint64(r)
		case pdString:
			p := r[len(r)-wireLenPayload(r):]
			if df.text && !validText(p) {
				return false
			}
			sl.b = p
		case pdEnum:
			x := wireInt(protoreflect.EnumKind, r)
			if x < 0 || x >= int64(len(df.names)) || df.names[x] == nil {
				return false // a number without a name: its text, written by the transcoding
			}
			sl.b = df.names[x]
		case pdTime:
			us, ok := wktMicros(f.typ.kind, r[len(r)-wireLenPayload(r):])
			if !ok {
				return false
			}
			sl.w = uint64(us)
		case pdSkip:
			if df.text && wt == protowire.BytesType && !utf8.Valid(r[len(r)-wireLenPayload(r):]) {
				return false
			}
		}
	}
	for _, k := range pd.notNull {
		if !slots[k].set {
			return false // the NOT NULL violation
		}
	}
	return true
}

// write appends the values read into slots to s.cols, as runFields appends them from
// their Avro encoding.
func (pd *protoDirect) write(s *state, slots []pdSlot) {
	for i := range pd.fields {
		df, sl := &pd.fields[i], &slots[i]
		op := df.op
		col, def := int(op.col), int(op.def)
		w, b := sl.w, sl.b
		switch df.kind {
		case pdSkip, pdEmpty:
			continue
		case pdList:
			it := op.item
			if !sl.set {
				s.putNull(0, def, col)
				continue
			}
			icol, idef := int(it.col), int(it.def)
			rep, p := 0, sl.b
			for k := 0; k < sl.n; k++ {
				if k > 0 {
					_, _, n := readTag(p)
					p = p[n:]
				}
				n := wireLen(p, protowire.BytesType)
				v := p[n-wireLenPayload(p) : n]
				p = p[n:]
				s.putLevelledBytes(s.own(v), rep, idef, icol) // a repeated leaf: levelled
				rep = int(op.inner)
			}
			continue
		}
		if !sl.set {
			if df.f.nullable {
				s.putNull(0, int(op.nullDef), col)
				continue
			}
			w, b = df.zw, df.zb
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
			s.putBytes(b, 0, def, col)
		case pdEnum:
			s.putByteArray(b, 0, def, col) // a constant, as an enum symbol is
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
		v, n := protowire.ConsumeVarint(b[i+1:])
		if n < 0 {
			return 0, false
		}
		sec, i = int64(v), i+1+n
	}
	if i < len(b) && b[i] == 0x10 {
		v, n := protowire.ConsumeVarint(b[i+1:])
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
