package decode

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The Protobuf wire decoder: it walks a message's binary encoding (Protobuf encoding
// guide, "Message Structure") with protowire and writes the Avro binary of the message's
// derived schema directly, fields in the schema's order. Each message's fields are first
// located in one pass (the last value of a scalar, every occurrence of a repeated, map or
// message field: Protobuf merges repeated occurrences of a message, which is decoding
// their concatenation), then written. A body as serializers write it (fields in number
// order, which is the schema's when the .proto declares them ascending, each singular
// field once) is written as it is read instead, in one pass (messageInOrder); any other
// body falls back to the two passes. It reads a body exactly as proto.Unmarshal into a
// dynamic message does (DiscardUnknown, RecursionLimit maxProtoRecursion): unknown fields
// and fields of a mismatched wire type are skipped, a oneof keeps its last member, a map
// its last entry per key.
//
// A body the decoder cannot read, and one holding a value it drops unread (a replaced
// oneof message member, a replaced map entry, a Struct, Value, ListValue or Empty), is
// checked with proto.Unmarshal into a dynamic message, so that every record fails with the
// library's own error, in its order (wire errors, then missing required fields, then the
// transcoding's value errors); a record that parses never takes that path.

// errPBWire: the decoder could not read the body; proto.Unmarshal gives the error.
var errPBWire = errors.New("protobuf body does not parse")

// protoBody transcodes one message's bodies.
type protoBody struct {
	md   protoreflect.MessageDescriptor
	top  *pbMsg
	pool sync.Pool // *pbState
}

var protoUnmarshal = proto.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: maxProtoRecursion}

func (p *protoBody) toAvro(dst, body []byte) (out []byte, err error) {
	defer recoverPanic(&err)
	s, _ := p.pool.Get().(*pbState)
	if s == nil {
		s = &pbState{}
	}
	defer func() { s.avroAppender = avroAppender{}; p.pool.Put(s) }()
	s.avroAppender = newAvroAppender(dst, len(body))
	s.recheck = false
	// The one pass reads the whole body or gives up; then the two passes read it from the
	// start, never trying the one pass again: a body costs at most both, whatever fails
	// where (a failure deep down retried level by level would cost 2^depth passes).
	if start := len(s.b); !p.top.inOrder || !s.messageInOrder(p.top, body, 1) {
		s.b, s.recheck = s.b[:start], false
		err = s.message(p.top, body, 1)
	}
	if err != nil || s.recheck {
		// The library's verdict on the body comes first: it fails for the same bodies as
		// the old dynamicpb path, with the same message.
		if lerr := protoUnmarshal.Unmarshal(body, dynamicpb.NewMessage(p.md)); lerr != nil {
			return nil, malformed("decode protobuf %s: %v", p.md.FullName(), lerr)
		}
		if errors.Is(err, errPBWire) {
			return nil, malformed("decode protobuf %s: %v", p.md.FullName(), err)
		}
	}
	if err != nil {
		return nil, err
	}
	return s.b, nil
}

// pbSpan is one occurrence of a field's value in a message's bytes: [off, end), and the
// index+1 of the field's next occurrence (0: none).
type pbSpan struct {
	off, end int
	wt       protowire.Type
	next     int
}

// pbSlot is what one message's bytes hold for one field.
type pbSlot struct {
	set        bool
	wt         protowire.Type
	off, end   int // a scalar: its last value's bytes
	head, tail int // every occurrence (messages, repeated, maps): index+1 in pbLevel.spans
}

// pbLevel is the scratch of the message being decoded at one nesting depth.
type pbLevel struct {
	slots []pbSlot
	spans []pbSpan
	cat   []byte // the concatenated occurrences of a message field
}

type pbEntry struct {
	key   string
	order int
	val   []byte // the entry's value: its raw scalar, or its message's bytes
	wt    protowire.Type
	set   bool
}

// pbState is one body's decoding state (pooled per protoBody).
type pbState struct {
	avroAppender
	levels  [maxProtoRecursion + 3]pbLevel
	entries []pbEntry
	recheck bool // a value was dropped unread: proto.Unmarshal must accept the body
}

// wireType is the wire type of one (unpacked) value of Protobuf kind k.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// packable reports whether repeated values of kind k may come packed.
func packable(k protoreflect.Kind) bool {
	t := wireType(k)
	return t == protowire.VarintType || t == protowire.Fixed32Type || t == protowire.Fixed64Type
}

// consumeValue returns the length of one value of wire type wt at the start of b (< 0 when
// it does not parse).
func consumeValue(b []byte, wt protowire.Type) int {
	switch wt {
	case protowire.VarintType:
		_, n := protowire.ConsumeVarint(b)
		return n
	case protowire.Fixed32Type:
		_, n := protowire.ConsumeFixed32(b)
		return n
	case protowire.Fixed64Type:
		_, n := protowire.ConsumeFixed64(b)
		return n
	}
	_, n := protowire.ConsumeBytes(b)
	return n
}

// field returns the index in pm.fields of field number num, or -1.
func (pm *pbMsg) field(num protowire.Number) int {
	if int(num) < len(pm.byNum) {
		return int(pm.byNum[num]) - 1
	}
	if i, ok := pm.byNumMap[num]; ok {
		return i
	}
	return -1
}

// index builds pm's lookup tables for the wire decoder.
func (pm *pbMsg) index() error {
	maxDense := 0
	for i := range pm.fields {
		if n := int(pm.fields[i].num); n < 1024 && n >= maxDense {
			maxDense = n + 1
		}
	}
	pm.byNum = make([]int32, maxDense)
	for i := range pm.fields {
		f := &pm.fields[i]
		f.wt = wireType(f.typ.pk)
		f.pack = f.list && packable(f.typ.pk)
		f.occurs = f.list || f.isMap || f.typ.pk == protoreflect.MessageKind || f.typ.pk == protoreflect.GroupKind
		f.utf8v = f.typ.utf8 && !f.isMap
		if f.isMap {
			f.wt = protowire.BytesType
		}
		if int(f.num) < maxDense {
			pm.byNum[f.num] = int32(i + 1)
		} else {
			if pm.byNumMap == nil {
				pm.byNumMap = map[protowire.Number]int{}
			}
			pm.byNumMap[f.num] = i
		}
		if f.fd.Cardinality() == protoreflect.Required {
			pm.required = append(pm.required, i)
		}
		if !f.isMap && !f.list && !f.nullable && f.typ.kind != pbEmpty {
			var e avroAppender
			if err := e.protoValue(&f.typ, f.fd.Default()); err != nil {
				return err
			}
			f.zero = e.b
		}
	}
	pm.inOrder = len(pm.required) == 0 && slices.IsSortedFunc(pm.fields, func(a, b pbField) int { return cmp.Compare(a.num, b.num) })
	ods := pm.md.Oneofs()
	for i := range ods.Len() {
		od := ods.Get(i)
		if od.IsSynthetic() {
			continue
		}
		var members []int
		for j := range od.Fields().Len() {
			if k := pm.field(od.Fields().Get(j).Number()); k >= 0 {
				members = append(members, k)
				pm.fields[k].oneof = len(pm.oneofs) + 1
			}
		}
		pm.oneofs = append(pm.oneofs, members)
	}
	return nil
}

// protoValue appends the Avro encoding of a scalar value v of t (a field's default).
func (e *avroAppender) protoValue(t *pbType, v protoreflect.Value) error {
	switch t.kind {
	case pbBool:
		e.b = append(e.b, b2i(v.Bool()))
	case pbInt32, pbInt64:
		e.long(v.Int())
	case pbUint32:
		e.long(int64(v.Uint()))
	case pbUint64:
		e.uint64Decimal(v.Uint())
	case pbFloat:
		e.b = binary.LittleEndian.AppendUint32(e.b, math.Float32bits(float32(v.Float())))
	case pbDouble:
		e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v.Float()))
	case pbString:
		e.text(v.String())
	case pbBytes:
		e.str(v.Bytes())
	case pbEnum:
		e.enum(t, int32(v.Enum()))
	default:
		return newError(ReasonUnsupportedType, "", fmt.Errorf("convert schema: no default value for a %v", t.pk))
	}
	return nil
}

func b2i(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// enumNames lists ed's value names by number for the numbers 0..1023 it has.
func enumNames(ed protoreflect.EnumDescriptor) []string {
	vs := ed.Values()
	n := 0
	for i := range vs.Len() {
		if num := int(vs.Get(i).Number()); num >= 0 && num < 1024 && num >= n {
			n = num + 1
		}
	}
	names := make([]string, n)
	for i := range vs.Len() {
		if num := int(vs.Get(i).Number()); num >= 0 && num < n && names[num] == "" {
			names[num] = string(vs.Get(i).Name())
		}
	}
	return names
}

// enum appends enum number n of t: its name, or its number as text when t has none
// (proto3 enums are open).
func (e *avroAppender) enum(t *pbType, n int32) {
	if n >= 0 && int(n) < len(t.names) && t.names[n] != "" {
		e.text(t.names[n])
		return
	}
	if ev := t.enum.Values().ByNumber(protoreflect.EnumNumber(n)); ev != nil {
		e.text(string(ev.Name()))
		return
	}
	var buf [12]byte
	e.str(strconv.AppendInt(buf[:0], int64(n), 10))
}

// uint64Decimal writes v as an Avro decimal(20,0): its big-endian two's complement, in
// the fewest bytes (a leading 0 when the top bit is set).
func (e *avroAppender) uint64Decimal(v uint64) {
	var w [9]byte
	binary.BigEndian.PutUint64(w[1:], v)
	i := 0
	for i < 8 && w[i] == 0 && w[i+1] < 0x80 {
		i++
	}
	e.str(w[i:])
}

// message writes the message pm encoded in b, at nesting depth (the top message is 1).
func (s *pbState) message(pm *pbMsg, b []byte, depth int) error {
	if depth > maxProtoRecursion {
		return errPBWire
	}
	lv := &s.levels[depth]
	if err := s.scan(lv, pm, b); err != nil {
		return err
	}
	for i := range pm.fields {
		f := &pm.fields[i]
		sl := &lv.slots[i]
		var err error
		switch {
		case f.isMap:
			err = s.mapField(f, lv, sl, b, depth)
		case f.list:
			err = s.list(f, lv, sl, b, depth)
		case f.typ.kind == pbEmpty:
			if sl.head != 0 {
				s.recheck = true // an Empty's bytes are read by nobody else
			}
		case f.nullable:
			if !sl.set {
				s.b = append(s.b, 0) // union branch 0: null
				continue
			}
			s.b = append(s.b, 2) // union branch 1
			err = s.singular(f, lv, sl, b, depth)
		case !sl.set:
			s.b = append(s.b, f.zero...)
		default:
			err = s.singular(f, lv, sl, b, depth)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// messageInOrder is message's one pass for the body serializers write: pm's fields in
// its declaration order (pm.inOrder: ascending numbers), a singular field at most once,
// a repeated field's occurrences adjacent (or one packed run), no map entry, oneof member,
// group or Empty present; unknown fields are skipped. It writes each value as it reads it
// and the absent fields' defaults between them, exactly what message's two passes write
// for such a body; nested messages are read by the one pass too. It returns false, with
// s.b partly written, for any other body, for one that does not decode and for one that
// outgrows s.limit: toAvro then reads the whole body again with the two passes, which
// give the answer and the error.
func (s *pbState) messageInOrder(pm *pbMsg, b []byte, depth int) bool {
	next := 0 // the first field not yet written
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
		f := &pm.fields[fi]
		if fi < next || f.isMap || f.oneof != 0 || f.typ.kind == pbEmpty || f.typ.pk == protoreflect.GroupKind ||
			wt != f.wt && !(wt == protowire.BytesType && f.pack) {
			return false
		}
		s.absent(pm, next, fi)
		next = fi + 1
		if !f.list {
			n := wireLen(b[i:], wt)
			if n < 0 {
				return false
			}
			if f.nullable {
				s.b = append(s.b, 2) // union branch 1
			}
			if !s.value(f, b[i:i+n], depth) {
				return false
			}
			i += n
			continue
		}
		tag := b[tagAt:i]
		if wt != f.wt { // packed: one run of values
			p, n := protowire.ConsumeBytes(b[i:])
			if n < 0 || bytes.HasPrefix(b[i+n:], tag) {
				return false
			}
			count := 0
			for q := p; len(q) > 0; count++ {
				m := consumeValue(q, f.wt)
				if m < 0 {
					return false
				}
				q = q[m:]
			}
			if count > 0 {
				s.long(int64(count))
				for len(p) > 0 {
					m := consumeValue(p, f.wt)
					s.scalar(&f.typ, p[:m])
					p = p[m:]
					if len(s.b) > s.limit { // an enum's name may be far longer than its number
						return false
					}
				}
			}
			s.b = append(s.b, 0)
			i += n
			continue
		}
		count, end := 0, i // the adjacent occurrences: values at i, then tag+value after each
		for {
			n := wireLen(b[end:], wt)
			if n < 0 {
				return false
			}
			end += n
			count++
			if !bytes.HasPrefix(b[end:], tag) {
				break
			}
			end += len(tag)
		}
		s.long(int64(count))
		for k := 0; k < count; k++ {
			if k > 0 {
				i += len(tag)
			}
			n := wireLen(b[i:], wt)
			if !s.value(f, b[i:i+n], depth) || len(s.b) > s.limit {
				return false
			}
			i += n
		}
		s.b = append(s.b, 0)
	}
	s.absent(pm, next, len(pm.fields))
	return len(s.b) <= s.limit
}

// absent writes what message writes for pm's fields [from, to) when the body has none of
// them: an empty array or map, nothing for an Empty, null, or the field's default.
func (s *pbState) absent(pm *pbMsg, from, to int) {
	for k := from; k < to; k++ {
		f := &pm.fields[k]
		switch {
		case f.isMap, f.list:
			s.b = append(s.b, 0)
		case f.typ.kind == pbEmpty:
		case f.nullable:
			s.b = append(s.b, 0)
		default:
			s.b = append(s.b, f.zero...)
		}
	}
}

// value writes one value r (its wire bytes, of f's own wire type) of f, a singular field
// or a list element: a scalar (a string checked for UTF-8), or a message decoded at
// depth+1. It reports whether it did.
func (s *pbState) value(f *pbField, r []byte, depth int) bool {
	if f.typ.pk == protoreflect.MessageKind {
		p, _ := protowire.ConsumeBytes(r)
		if f.typ.kind == pbMessage {
			return f.typ.msg.inOrder && depth+1 <= maxProtoRecursion && s.messageInOrder(f.typ.msg, p, depth+1)
		}
		return s.messageValue(&f.typ, p, depth+1, f.path) == nil // a well-known type
	}
	if k := f.typ.pk; k == protoreflect.StringKind || k == protoreflect.BytesKind {
		p := r[len(r)-wireLenPayload(r):] // r is the length's varint, then the bytes
		if f.utf8v && !utf8.Valid(p) {
			return false
		}
		s.str(p)
		return true
	}
	s.scalar(&f.typ, r)
	return true
}

// wireLenPayload is the length of the bytes after a length-delimited value's varint
// length, the value r already checked.
func wireLenPayload(r []byte) int {
	if r[0] < 0x80 {
		return int(r[0])
	}
	v, _ := protowire.ConsumeVarint(r)
	return int(v)
}

// wireLen is the length of the one value of wire type wt (not a group) at the start of b,
// or -1 when it does not parse.
func wireLen(b []byte, wt protowire.Type) int {
	switch wt {
	case protowire.VarintType:
		if len(b) > 0 && b[0] < 0x80 {
			return 1
		}
		_, n := protowire.ConsumeVarint(b)
		return n
	case protowire.BytesType:
		if len(b) > 0 && b[0] < 0x80 && int(b[0]) < len(b) {
			return 1 + int(b[0])
		}
		_, n := protowire.ConsumeBytes(b)
		return n
	}
	return consumeValue(b, wt)
}

// readTag reads the field tag at the start of b: its number, wire type and length in
// bytes, or n < 0 when it does not parse (Protobuf encoding guide, "Message Structure").
func readTag(b []byte) (num protowire.Number, wt protowire.Type, n int) {
	if c := b[0]; c < 0x80 && c >= 8 { // a one-byte tag
		return protowire.Number(c >> 3), protowire.Type(c & 7), 1
	}
	num, wt, n = protowire.ConsumeTag(b)
	if n < 0 || num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, wt, n
}

// scan locates pm's fields in b into lv.slots.
func (s *pbState) scan(lv *pbLevel, pm *pbMsg, b []byte) error {
	if cap(lv.slots) < len(pm.fields) {
		lv.slots = make([]pbSlot, len(pm.fields))
	}
	lv.slots = lv.slots[:len(pm.fields)]
	clear(lv.slots)
	lv.spans = lv.spans[:0]
	for i := 0; i < len(b); {
		num, wt, k := readTag(b[i:])
		if k < 0 {
			return errPBWire
		}
		i += k
		fi := pm.field(num)
		var f *pbField
		if fi >= 0 {
			f = &pm.fields[fi]
		}
		if f == nil || wt != f.wt && !(wt == protowire.BytesType && f.pack) {
			// an unknown field, or a known one of a mismatched wire type: skipped
			n := protowire.ConsumeFieldValue(num, wt, b[i:])
			if n < 0 {
				return errPBWire
			}
			i += n
			continue
		}
		if wt == protowire.StartGroupType {
			v, m := protowire.ConsumeGroup(num, b[i:])
			if m < 0 {
				return errPBWire
			}
			s.occur(lv, pm, fi, i, i+len(v), wt)
			i += m
			continue
		}
		n := wireLen(b[i:], wt)
		if n > 0 && wt == protowire.BytesType && f.utf8v {
			if !utf8.Valid(b[i+n-wireLenPayload(b[i:]) : i+n]) {
				return errPBWire
			}
		}
		if n < 0 {
			return errPBWire
		}
		if f.occurs {
			s.occur(lv, pm, fi, i, i+n, wt)
		} else {
			if f.oneof != 0 {
				s.clearOneof(lv, pm, fi)
			}
			sl := &lv.slots[fi]
			sl.set, sl.wt, sl.off, sl.end = true, wt, i, i+n
		}
		i += n
	}
	for _, ri := range pm.required {
		if !lv.slots[ri].set {
			return errPBWire // proto.Unmarshal names the field
		}
	}
	return nil
}

// occur adds an occurrence of field fi (a message, repeated or map field) at [off, end).
func (s *pbState) occur(lv *pbLevel, pm *pbMsg, fi, off, end int, wt protowire.Type) {
	f := &pm.fields[fi]
	sl := &lv.slots[fi]
	if f.oneof != 0 && sl.head == 0 {
		s.clearOneof(lv, pm, fi)
	}
	lv.spans = append(lv.spans, pbSpan{off: off, end: end, wt: wt})
	k := len(lv.spans)
	if sl.head == 0 {
		sl.head = k
	} else {
		lv.spans[sl.tail-1].next = k
	}
	sl.tail, sl.set = k, true
}

// clearOneof drops the members of field fi's oneof other than fi, as setting fi does.
func (s *pbState) clearOneof(lv *pbLevel, pm *pbMsg, fi int) {
	for _, k := range pm.oneofs[pm.fields[fi].oneof-1] {
		if k == fi || !lv.slots[k].set {
			continue
		}
		if lv.slots[k].head != 0 {
			s.recheck = true // a message member's bytes dropped unread
		}
		lv.slots[k] = pbSlot{}
	}
}

// messageBytes is the bytes of a message field's occurrences: the one occurrence, or
// their concatenation (which Protobuf decodes as their merge).
func (lv *pbLevel) messageBytes(sl *pbSlot, b []byte) []byte {
	sp := &lv.spans[sl.head-1]
	if sp.next == 0 {
		return sp.content(b)
	}
	lv.cat = lv.cat[:0]
	for k := sl.head; k != 0; k = lv.spans[k-1].next {
		lv.cat = append(lv.cat, lv.spans[k-1].content(b)...)
	}
	return lv.cat
}

// content is a message occurrence's bytes: a length-delimited value's, a group's.
func (sp *pbSpan) content(b []byte) []byte {
	if sp.wt == protowire.BytesType {
		v, _ := protowire.ConsumeBytes(b[sp.off:sp.end])
		return v
	}
	return b[sp.off:sp.end]
}

// singular writes a set singular field.
func (s *pbState) singular(f *pbField, lv *pbLevel, sl *pbSlot, b []byte, depth int) error {
	if sl.head != 0 {
		return s.messageValue(&f.typ, lv.messageBytes(sl, b), depth+1, f.path)
	}
	s.scalar(&f.typ, b[sl.off:sl.end])
	return nil
}

// scalar writes one scalar value of t from its wire bytes (a varint, fixed32, fixed64 or
// length-prefixed value, already checked).
func (s *pbState) scalar(t *pbType, r []byte) {
	switch t.pk {
	case protoreflect.FloatKind:
		f := float64(math.Float32frombits(binary.LittleEndian.Uint32(r)))
		s.b = binary.LittleEndian.AppendUint32(s.b, math.Float32bits(float32(f)))
	case protoreflect.DoubleKind:
		s.b = append(s.b, r[:8]...)
	case protoreflect.StringKind, protoreflect.BytesKind:
		p, _ := protowire.ConsumeBytes(r)
		s.str(p)
	case protoreflect.BoolKind:
		s.b = append(s.b, byte(wireInt(t.pk, r)))
	case protoreflect.EnumKind:
		s.enum(t, int32(wireInt(t.pk, r)))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		s.uint64Decimal(uint64(wireInt(t.pk, r)))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		s.long(wireInt(t.pk, r))
	}
}

// wireInt is the integer one value of an integer, bool or enum kind k has, from its wire
// bytes r (a varint, fixed32 or fixed64, already checked): what its Avro int, long or
// boolean holds (a bool 0 or 1, an enum its number, a 32-bit kind its value in 32 bits
// as the library reads it; a 64-bit unsigned kind its bits).
func wireInt(k protoreflect.Kind, r []byte) int64 {
	var v uint64
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		v = uint64(binary.LittleEndian.Uint32(r))
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		v = binary.LittleEndian.Uint64(r)
	default:
		if r[0] < 0x80 {
			v = uint64(r[0])
		} else {
			v, _ = protowire.ConsumeVarint(r)
		}
	}
	return intOf(k, v)
}

// intOf is wireInt of the value v read from the wire (a varint's, a fixed32's, a
// fixed64's bits).
func intOf(k protoreflect.Kind, v uint64) int64 {
	switch k {
	case protoreflect.BoolKind:
		return int64(b2i(v != 0))
	case protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		return int64(int32(v))
	case protoreflect.Sint32Kind:
		return int64(int32(protowire.DecodeZigZag(v & math.MaxUint32)))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return int64(uint32(v))
	case protoreflect.Sint64Kind:
		return protowire.DecodeZigZag(v)
	}
	return int64(v) // int64, sfixed64, uint64, fixed64
}

// list writes a repeated field: an Avro array of its values in wire order.
func (s *pbState) list(f *pbField, lv *pbLevel, sl *pbSlot, b []byte, depth int) error {
	if sl.head == 0 {
		s.b = append(s.b, 0)
		return nil
	}
	n := 0
	for k := sl.head; k != 0; k = lv.spans[k-1].next {
		sp := &lv.spans[k-1]
		if sp.wt != protowire.BytesType || !packable(f.typ.pk) {
			n++
			continue
		}
		p, _ := protowire.ConsumeBytes(b[sp.off:sp.end])
		vt := wireType(f.typ.pk)
		for len(p) > 0 {
			m := consumeValue(p, vt)
			if m < 0 {
				return errPBWire
			}
			p, n = p[m:], n+1
		}
	}
	if n > 0 {
		s.long(int64(n))
		vt := wireType(f.typ.pk)
		for k := sl.head; k != 0; k = lv.spans[k-1].next {
			sp := &lv.spans[k-1]
			r := b[sp.off:sp.end]
			switch {
			case f.typ.pk == protoreflect.MessageKind:
				p, _ := protowire.ConsumeBytes(r)
				if err := s.messageValue(&f.typ, p, depth+1, f.path); err != nil {
					return err
				}
			case f.typ.pk == protoreflect.GroupKind:
				if err := s.messageValue(&f.typ, r, depth+1, f.path); err != nil {
					return err
				}
			case sp.wt == protowire.BytesType && vt != protowire.BytesType: // packed
				p, _ := protowire.ConsumeBytes(r)
				for len(p) > 0 {
					m := consumeValue(p, vt)
					s.scalar(&f.typ, p[:m])
					p = p[m:]
					if err := s.check(f.path); err != nil {
						return err
					}
				}
				continue
			default:
				s.scalar(&f.typ, r)
			}
			if err := s.check(f.path); err != nil {
				return err
			}
		}
	}
	s.b = append(s.b, 0)
	return nil
}

// mapField writes a map field: an Avro map of its entries by key text, sorted, the last
// entry of each key.
func (s *pbState) mapField(f *pbField, lv *pbLevel, sl *pbSlot, b []byte, depth int) error {
	if sl.head == 0 {
		s.b = append(s.b, 0)
		return nil
	}
	if depth+1 > maxProtoRecursion {
		return errPBWire // the entry is a message one level down
	}
	first := len(s.entries)
	defer func() { s.entries = s.entries[:first] }()
	vt := wireType(f.typ.pk)
	for k := sl.head; k != 0; k = lv.spans[k-1].next {
		sp := &lv.spans[k-1]
		e, err := s.entry(f, vt, b[sp.off:sp.end])
		if err != nil {
			return err
		}
		e.order = len(s.entries)
		s.entries = append(s.entries, e)
	}
	es := s.entries[first:]
	slices.SortFunc(es, func(a, b pbEntry) int {
		if c := cmpString(a.key, b.key); c != 0 {
			return c
		}
		return b.order - a.order // the last entry of a key first
	})
	n := 0
	for i := range es {
		if i > 0 && es[i].key == es[i-1].key {
			if vt == protowire.BytesType && (f.typ.pk == protoreflect.MessageKind) && es[i].set {
				s.recheck = true // a replaced entry's message, dropped unread
			}
			continue
		}
		n++
	}
	s.long(int64(n))
	for i := range es {
		if i > 0 && es[i].key == es[i-1].key {
			continue
		}
		e := &es[i]
		s.text(e.key)
		var err error
		switch {
		case f.typ.pk == protoreflect.MessageKind || f.typ.pk == protoreflect.GroupKind:
			if !e.set {
				err = s.emptyMessage(&f.typ, depth+2, f.path)
			} else {
				err = s.messageValue(&f.typ, e.val, depth+2, f.path)
			}
		case !e.set:
			var a avroAppender
			a.b = s.b
			err = a.protoValue(&f.typ, f.fd.MapValue().Default())
			s.b = a.b
		default:
			s.scalar(&f.typ, e.val)
		}
		if err != nil {
			return err
		}
	}
	if err := s.check(f.path); err != nil {
		return err
	}
	s.b = append(s.b, 0)
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// entry reads one map entry (key = 1, value = 2).
func (s *pbState) entry(f *pbField, vt protowire.Type, r []byte) (pbEntry, error) {
	p, _ := protowire.ConsumeBytes(r)
	var e pbEntry
	var key []byte
	kt := wireType(f.kk)
	haveKey := false
	var cat []byte
	for len(p) > 0 {
		num, wt, n := readTag(p)
		if n < 0 {
			return e, errPBWire
		}
		p = p[n:]
		switch {
		case num == 1 && wt == kt:
			if n = consumeValue(p, wt); n < 0 {
				return e, errPBWire
			}
			if f.kutf8 {
				if v, _ := protowire.ConsumeBytes(p); !utf8.Valid(v) {
					return e, errPBWire
				}
			}
			key, haveKey = p[:n], true
		case num == 2 && wt == vt:
			var v []byte
			if wt == protowire.StartGroupType {
				v, n = protowire.ConsumeGroup(2, p)
			} else if n = consumeValue(p, wt); n >= 0 && wt == protowire.BytesType {
				v, _ = protowire.ConsumeBytes(p)
			}
			if n < 0 || f.typ.utf8 && !utf8.Valid(v) {
				return e, errPBWire
			}
			switch {
			case f.typ.pk != protoreflect.MessageKind && f.typ.pk != protoreflect.GroupKind:
				e.val = p[:n] // a scalar's last value
			case !e.set:
				e.val = v
			default: // a message's occurrences merge
				cat = append(append(cat[:0:0], e.val...), v...)
				e.val = cat
			}
			e.wt, e.set = wt, true
		default:
			if n = protowire.ConsumeFieldValue(num, wt, p); n < 0 {
				return e, errPBWire
			}
		}
		p = p[n:]
	}
	e.key = s.keyText(f, key, haveKey)
	return e, nil
}

// keyText is a map key as text: a string as it is, an integer in decimal, a bool
// true/false.
func (s *pbState) keyText(f *pbField, r []byte, have bool) string {
	if !have {
		switch f.kk {
		case protoreflect.StringKind:
			return ""
		case protoreflect.BoolKind:
			return "false"
		}
		return "0"
	}
	var v uint64
	switch f.kk {
	case protoreflect.StringKind:
		p, _ := protowire.ConsumeBytes(r)
		return string(p)
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		v = uint64(binary.LittleEndian.Uint32(r))
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		v = binary.LittleEndian.Uint64(r)
	default:
		v, _ = protowire.ConsumeVarint(r)
	}
	switch f.kk {
	case protoreflect.BoolKind:
		return strconv.FormatBool(v != 0)
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		return strconv.FormatInt(int64(int32(v)), 10)
	case protoreflect.Sint32Kind:
		return strconv.FormatInt(int64(int32(protowire.DecodeZigZag(v&math.MaxUint32))), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.FormatUint(uint64(uint32(v)), 10)
	case protoreflect.Sint64Kind:
		return strconv.FormatInt(protowire.DecodeZigZag(v), 10)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v, 10)
	}
	return strconv.FormatInt(int64(v), 10)
}

// emptyMessage writes a message of t that has no bytes (a map entry without a value).
func (s *pbState) emptyMessage(t *pbType, depth int, path string) error {
	switch t.kind {
	case pbMessage:
		if len(t.msg.required) > 0 {
			return errPBWire // proto.Unmarshal names the required field
		}
		for i := range t.msg.fields {
			f := &t.msg.fields[i]
			switch {
			case f.isMap || f.list || f.nullable:
				s.b = append(s.b, 0)
			case f.typ.kind == pbEmpty:
			default:
				s.b = append(s.b, f.zero...)
			}
		}
		return nil
	case pbJSON, pbEmpty:
		return s.messageValue(t, nil, depth, path)
	}
	// Timestamp, Duration, wrappers, Any: their zero values
	return s.messageValue(t, nil, -depth, path)
}

// messageValue writes a message-typed value of t whose bytes are b, at depth (negative:
// a value that is not in the bytes, whose depth is not checked).
func (s *pbState) messageValue(t *pbType, b []byte, depth int, path string) error {
	if depth < 0 {
		depth = 0
	} else if depth > maxProtoRecursion {
		return errPBWire
	}
	switch t.kind {
	case pbMessage:
		return s.message(t.msg, b, depth)
	case pbTimestamp:
		sec, nanos, err := secondsNanos(b)
		if err != nil {
			return err
		}
		if sec < minTimestampSeconds || sec > maxTimestampSeconds || nanos < 0 || nanos > 999_999_999 {
			return newError(ReasonDecodeError, path, fmt.Errorf("google.protobuf.Timestamp {seconds: %d, nanos: %d} is outside 0001-01-01..9999-12-31 or not normalised", sec, nanos))
		}
		s.long(sec*1_000_000 + nanos/1000) // nanoseconds below the microsecond are dropped
	case pbDuration:
		sec, nanos, err := secondsNanos(b)
		if err != nil {
			return err
		}
		if sec < -maxDurationSeconds || sec > maxDurationSeconds || nanos < -999_999_999 || nanos > 999_999_999 || (sec > 0 && nanos < 0) || (sec < 0 && nanos > 0) {
			return newError(ReasonDecodeError, path, fmt.Errorf("google.protobuf.Duration {seconds: %d, nanos: %d} is out of range or its signs differ", sec, nanos))
		}
		s.long(sec*1_000_000 + nanos/1000) // truncated toward zero
	case pbWrapper:
		w := t.wrapped
		r, ok, err := lastField(b, 1, wireType(w.pk), w.utf8)
		if err != nil {
			return err
		}
		if !ok {
			var a avroAppender
			a.b = s.b
			err = a.protoValue(w, zeroOf(w.pk))
			s.b = a.b
			return err
		}
		s.scalar(w, r)
	case pbAny:
		u, okU, err := lastField(b, 1, protowire.BytesType, true)
		if err != nil {
			return err
		}
		v, okV, err := lastField(b, 2, protowire.BytesType, false)
		if err != nil {
			return err
		}
		var typ, val []byte
		if okU {
			typ, _ = protowire.ConsumeBytes(u)
		}
		if okV {
			val, _ = protowire.ConsumeBytes(v)
		}
		j, err := json.Marshal(struct {
			Type  string `json:"@type"`
			Value string `json:"value"`
		}{string(typ), base64.StdEncoding.EncodeToString(val)})
		if err != nil {
			return newError(ReasonDecodeError, path, fmt.Errorf("encode google.protobuf.Any as JSON: %w", err))
		}
		s.str(j)
	case pbJSON:
		s.recheck = true // the walk below reads leniently: the library checks the bytes
		var v any
		var err error
		switch t.wkt {
		case "google.protobuf.Struct":
			v, err = structJSON(b, 0)
		case "google.protobuf.ListValue":
			v, err = listJSON(b, 0)
		default:
			v, err = valueJSON(b, 0)
		}
		if err != nil {
			return err
		}
		j, err := json.Marshal(v)
		if err != nil {
			return newError(ReasonDecodeError, path, fmt.Errorf("encode %s as JSON: %w", t.wkt, err))
		}
		s.str(j)
	case pbEmpty:
		s.recheck = true
	}
	return nil
}

func zeroOf(k protoreflect.Kind) protoreflect.Value {
	switch k {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(false)
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(0)
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(0)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("")
	}
	return protoreflect.ValueOfBytes(nil)
}

// secondsNanos reads a Timestamp's or Duration's fields: seconds (1, int64) and nanos
// (2, int32).
func secondsNanos(b []byte) (sec, nanos int64, err error) {
	err = eachField(b, func(num protowire.Number, wt protowire.Type, v []byte) error {
		if wt == protowire.VarintType && (num == 1 || num == 2) {
			x, _ := protowire.ConsumeVarint(v)
			if num == 1 {
				sec = int64(x)
			} else {
				nanos = int64(int32(x))
			}
		}
		return nil
	})
	return sec, nanos, err
}

// lastField returns the last value of field num with wire type wt in the message bytes b
// (the other fields skipped, every value checked).
func lastField(b []byte, num protowire.Number, wt protowire.Type, utf bool) (r []byte, ok bool, err error) {
	for len(b) > 0 {
		n, t, k := readTag(b)
		if k < 0 {
			return nil, false, errPBWire
		}
		b = b[k:]
		if n == num && t == wt {
			if k = consumeValue(b, t); k < 0 {
				return nil, false, errPBWire
			}
			if utf {
				if v, _ := protowire.ConsumeBytes(b); !utf8.Valid(v) {
					return nil, false, errPBWire
				}
			}
			r, ok = b[:k], true
		} else if k = protowire.ConsumeFieldValue(n, t, b); k < 0 {
			return nil, false, errPBWire
		}
		b = b[k:]
	}
	return r, ok, nil
}

// maxWKTDepth cuts the walk of a Struct nested deeper than a body may be (the library
// refuses such a body anyway).
const maxWKTDepth = 3*maxProtoRecursion + 3

// structJSON is a google.protobuf.Struct (fields = 1: map<string, Value>) as a Go value
// json.Marshal writes as its JSON mapping; b may be several occurrences concatenated.
func structJSON(b []byte, depth int) (any, error) {
	out := map[string]any{}
	if depth > maxWKTDepth {
		return out, nil
	}
	err := eachField(b, func(num protowire.Number, wt protowire.Type, v []byte) error {
		if num != 1 || wt != protowire.BytesType {
			return nil
		}
		key, val, have := "", []byte(nil), false
		err := eachField(v, func(num protowire.Number, wt protowire.Type, v []byte) error {
			switch {
			case num == 1 && wt == protowire.BytesType:
				key = string(v)
			case num == 2 && wt == protowire.BytesType && have: // a Value's occurrences merge
				val = append(append(val[:0:0], val...), v...)
			case num == 2 && wt == protowire.BytesType:
				val, have = v, true
			}
			return nil
		})
		if err != nil {
			return err
		}
		x, err := valueJSON(val, depth+2)
		out[key] = x
		return err
	})
	return out, err
}

// listJSON is a google.protobuf.ListValue (values = 1: repeated Value).
func listJSON(b []byte, depth int) (any, error) {
	out := []any{}
	if depth > maxWKTDepth {
		return out, nil
	}
	err := eachField(b, func(num protowire.Number, wt protowire.Type, v []byte) error {
		if num != 1 || wt != protowire.BytesType {
			return nil
		}
		x, err := valueJSON(v, depth+1)
		out = append(out, x)
		return err
	})
	return out, err
}

// valueJSON is a google.protobuf.Value (oneof kind: null_value = 1, number_value = 2,
// string_value = 3, bool_value = 4, struct_value = 5, list_value = 6).
func valueJSON(b []byte, depth int) (any, error) {
	if depth > maxWKTDepth {
		return nil, nil
	}
	var (
		kind protowire.Number
		num  float64
		str  []byte
		bl   bool
		sub  []byte
	)
	err := eachField(b, func(n protowire.Number, wt protowire.Type, v []byte) error {
		switch {
		case n == 1 && wt == protowire.VarintType, n == 4 && wt == protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v)
			bl = x != 0
		case n == 2 && wt == protowire.Fixed64Type:
			num = math.Float64frombits(binary.LittleEndian.Uint64(v))
		case n == 3 && wt == protowire.BytesType:
			str = v
		case (n == 5 || n == 6) && wt == protowire.BytesType:
			if kind != n {
				sub = nil
			}
			sub = append(sub[:len(sub):len(sub)], v...)
		default:
			return nil
		}
		kind = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch kind {
	case 2:
		if math.IsInf(num, 0) || math.IsNaN(num) {
			return strconv.FormatFloat(num, 'g', -1, 64), nil // JSON has no such number: its text, as protojson writes it
		}
		return num, nil
	case 3:
		return string(str), nil
	case 4:
		return bl, nil
	case 5:
		return structJSON(sub, depth+1)
	case 6:
		return listJSON(sub, depth+1)
	}
	return nil, nil // unset or null_value
}

// eachField calls fn with every field of the message bytes b: its number, wire type and
// value (a varint's or fixed value's bytes, a length-delimited value's content, a group's
// content).
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, wt, n := readTag(b)
		if n < 0 {
			return errPBWire
		}
		b = b[n:]
		var v []byte
		switch wt {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.StartGroupType:
			v, n = protowire.ConsumeGroup(num, b)
		default:
			n = protowire.ConsumeFieldValue(num, wt, b)
			if n >= 0 {
				v = b[:n]
			}
		}
		if n < 0 {
			return errPBWire
		}
		if err := fn(num, wt, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// enforceUTF8 reports whether fd's strings must be valid UTF-8, as proto.Unmarshal
// decides it: proto3 always, editions by the utf8_validation feature, proto2 never.
func enforceUTF8(fd protoreflect.FieldDescriptor) bool {
	if fd.Syntax() == protoreflect.Editions {
		if x, ok := fd.(interface{ EnforceUTF8() bool }); ok {
			return x.EnforceUTF8()
		}
	}
	return fd.Syntax() == protoreflect.Proto3
}
