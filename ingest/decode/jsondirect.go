package decode

import (
	"bytes"
	"math"
	"strconv"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// The direct plain JSON decoder: the values of a document go from its text straight into
// the columns, with no Avro body and no second decode. It reads the documents of a plain
// JSON writer schema (format json) whose top-level fields are longs, ints, doubles,
// booleans, strings, timestamps and timestamp_ntz (RFC 3339 strings), dates, decimals of
// at most 18 digits and arrays of strings, where the Avro decoder compiled for the table
// takes each field with one of its inline steps (opLong, opInt32, opDouble, opBool,
// opString, opDecimal, an opArray of opString) or discards it: the values it writes are
// the ones that step writes from the transcoded value, at the same levels, in the same
// form (dense or levelled).
//
// It reads only what the one-pass transcoder (jsonfast.go) reads with a top-level key the
// tree lacks giving up, and converts every value with that transcoder's own functions
// (parseInt, exactFloat64 then strconv, unscaledInt64, jsonMicros, jsonDays, str for
// strings without escapes): a document it reads is one the transcoder writes, with the
// same values. On anything else (a key the writer lacks, a repeated key, a string with
// an escape, a value of another JSON type, a number out of range, a null or a missing key
// for a column that needs a value, a decimal beyond the column, a dense column reset for
// another leaf) it has written nothing and the record takes the transcoding path, which
// gives the answer and the error. So results, errors and dead letters are the
// transcoding path's; only the work differs.
//
// The writer-schema step (JSONSource.Writer) reads each document once already, to find
// keys the table lacks; for the writer schema of the table's own keys it reads it with
// the direct reader (directAhead) and keeps the read in its memo, in place of the
// transcoding, and the decode writes the columns from it. The step picks the writer
// schema it picked before: a document the reader takes is one the one-pass transcoder
// takes with a new key giving up (the same writer schema), and on any other the step
// goes on as before. A document whose read is not kept (another writer schema, a memo
// reset, a decode without a writer-schema step) is read by the decode itself.

// jdKind is how the direct decoder reads and writes one top-level field.
type jdKind uint8

const (
	jdLong    jdKind = iota + 1 // jLong → opLong
	jdInt                       // jInt → opInt32
	jdDouble                    // jDouble → opDouble
	jdBool                      // jBool → opBool
	jdString                    // jString → opString (text)
	jdTime                      // jTimestamp, jTsNtz → opLong: microseconds
	jdDate                      // jDate → opInt32: days
	jdDecimal                   // jDecimal (at most 18 digits) → opDecimal: the unscaled value at the node's scale
	jdList                      // jArray of jString → opArray of opString
)

// jdField is one top-level field of a plain JSON writer schema's node.
type jdField struct {
	kind     jdKind
	node     *jNode
	elemNull bool // jdList: an element may be null
}

// jsonReader reads the documents of one top-level node (a plain JSON writer schema's)
// into jdSlots: the half of the direct decoder that needs no table.
type jsonReader struct {
	top      *jNode
	fields   []jdField
	required []int // the fields that are not nullable: missing, the document is not read
}

// jdSlot is what a document holds for one field. n is 0 when it has no key for it, 1 for
// a null, else 2 (a list: 2 + its element count). w is the value's word (an integer, a
// bool, a double's bits, microseconds, days, a decimal's unscaled value), or for a string
// the offsets of its text in the document, start<<32 | end, and for a list those of the
// text between its brackets.
type jdSlot struct {
	w uint64
	n uint32
}

// jdSlotBytes is the size of a jdSlot, counted in a jMemo's bytes.
const jdSlotBytes = 16

// newJSONReader returns the reader of documents of top, or nil when a field is not one it
// reads.
func newJSONReader(top *jNode) *jsonReader {
	// More than 1024 keys make the one-pass transcoder give up.
	if top == nil || top.kind != jStruct || top.open || top.js != 0 || len(top.fields) == 0 || len(top.fields) > 1024 || len(top.succ) != len(top.fields)+1 {
		return nil
	}
	r := &jsonReader{top: top, fields: make([]jdField, len(top.fields))}
	for i, f := range top.fields {
		n, df := f.node, &r.fields[i]
		if n.js != 0 || n.enum != nil || n.connect != "" {
			return nil
		}
		df.node = n
		switch n.kind {
		case jLong:
			df.kind = jdLong
		case jInt:
			df.kind = jdInt
		case jDouble:
			df.kind = jdDouble
		case jBool:
			df.kind = jdBool
		case jString:
			df.kind = jdString
		case jTimestamp, jTsNtz:
			df.kind = jdTime
		case jDate:
			df.kind = jdDate
		case jDecimal:
			if n.prec > 18 {
				return nil
			}
			df.kind = jdDecimal
		case jArray:
			e := n.elem
			if e == nil || e.kind != jString || e.js != 0 || e.enum != nil || e.connect != "" {
				return nil
			}
			df.kind, df.elemNull = jdList, e.nullable
		default:
			return nil
		}
		if !n.nullable {
			r.required = append(r.required, i)
		}
	}
	// The transcoding of a document the reader reads is within the bound the transcoder
	// enforces (avroAppender.check): at most 11 bytes per field beyond a string's text,
	// at most 6 per list element beyond its text, each element at least 3 bytes of the
	// document ("", or null); 1024 fields × 11 < maxExpandFixed.
	return r
}

// read reads document b into slots (len(slots) == len(r.fields), cleared first) and
// reports whether the direct decoder takes it (see above). It scans with the one-pass
// transcoder's own steps (jFast's ws, peek, str, number, literal).
func (r *jsonReader) read(slots []jdSlot, b []byte) bool {
	clear(slots)
	top := r.top
	var f jFast // the scanner only: b and i
	f.b = b
	if f.peek() != '{' {
		return false
	}
	f.i++
	if f.peek() == '}' {
		f.i++
	} else {
		prev := 0 // top.succ's index of the last field read: 0 before the first, k+1 after field k
		for {
			if f.peek() != '"' {
				return false
			}
			// The key: the field the one-pass transcoder guesses, when the text is its
			// name then a quote; else the key as str reads it, found as object finds it.
			guess := int(top.succ[prev].Load())
			k, known := guess, false
			if uint(k) < uint(len(top.plain)) && top.plain[k] {
				name := top.fields[k].name
				if e := f.i + 1 + len(name); e < len(b) && b[e] == '"' && string(b[f.i+1:e]) == name {
					f.i, known = e+1, true
				}
			}
			if !known {
				key, ok := f.str()
				if !ok {
					return false
				}
				if k, known = top.fieldBytes(key); !known {
					return false // a key the writer lacks: the writer-schema step's, or the transcoding's
				}
			}
			if f.peek() != ':' {
				return false
			}
			f.i++
			sl := &slots[k]
			if sl.n != 0 || !r.value(sl, &r.fields[k], &f) {
				return false // a repeated key, or a value the transcoder gives up on
			}
			if guess != k {
				top.succ[prev].Store(int32(k)) // the next document's guess (a race only changes a guess)
			}
			prev = k + 1
			more, ok := f.next('}')
			if !ok {
				return false
			}
			if !more {
				break
			}
		}
	}
	if f.peek(); f.i != len(b) {
		return false
	}
	for _, k := range r.required {
		if slots[k].n == 0 {
			return false // the missing key of a NOT NULL field
		}
	}
	return true
}

// value reads the value of field fd at f into sl: false where the one-pass transcoder
// gives up.
func (r *jsonReader) value(sl *jdSlot, fd *jdField, f *jFast) bool {
	c := f.peek()
	if c == 'n' {
		if !f.literal("null") || !fd.node.nullable {
			return false
		}
		sl.n = 1
		return true
	}
	sl.n = 2
	switch fd.kind {
	case jdBool:
		switch {
		case c == 't' && f.literal("true"):
			sl.w = 1
			return true
		case c == 'f' && f.literal("false"):
			return true
		}
		return false
	case jdLong, jdInt, jdDouble, jdDecimal:
		num, ok := f.number()
		if !ok {
			return false
		}
		switch fd.kind {
		case jdLong, jdInt:
			bits := 64
			if fd.kind == jdInt {
				bits = 32
			}
			v, ok := parseInt(num, bits)
			sl.w = uint64(v)
			return ok
		case jdDouble:
			v, ok := exactFloat64(num)
			if !ok {
				var err error
				if v, err = strconv.ParseFloat(string(num), 64); err != nil {
					return false
				}
			}
			sl.w = math.Float64bits(v)
			return true
		default:
			u, ok := unscaledInt64(num, fd.node.prec, fd.node.scale)
			sl.w = uint64(u)
			return ok
		}
	case jdString, jdTime, jdDate:
		if c != '"' {
			return false
		}
		raw, ok := f.str()
		if !ok {
			return false
		}
		switch fd.kind {
		case jdString:
			sl.w = uint64(f.i-1-len(raw))<<32 | uint64(f.i-1)
		case jdTime:
			us, ok := jsonMicros(fd.node, raw)
			if !ok {
				return false
			}
			sl.w = uint64(us)
		default:
			d, ok := jsonDays(raw)
			if !ok || int64(int32(d)) != d {
				return false
			}
			sl.w = uint64(d)
		}
		return true
	case jdList:
		if c != '[' {
			return false
		}
		f.i++
		start := f.i
		if f.peek() == ']' {
			sl.w = uint64(start)<<32 | uint64(f.i)
			f.i++
			return true
		}
		for {
			switch c := f.peek(); {
			case c == '"':
				if _, ok := f.str(); !ok {
					return false
				}
			case c == 'n' && fd.elemNull && f.literal("null"):
			default:
				return false
			}
			if sl.n == math.MaxUint32 {
				return false
			}
			sl.n++
			switch f.peek() {
			case ',':
				f.i++
				continue
			case ']':
				sl.w = uint64(start)<<32 | uint64(f.i)
				f.i++
				return true
			}
			return false
		}
	}
	return false
}

// jSkipWS is the index of the first byte at or after i that is not JSON whitespace.
func jSkipWS(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// jsonDirect is the direct decoder of one (plain JSON writer schema, Avro decoder) pair.
type jsonDirect struct {
	rd  *jsonReader
	jb  *jsonBody
	d   *Decoder
	ops []*fieldOp // per field: its step in d (skip: the table lacks it)
}

// compileJSONDirect returns the direct decoder of jb's documents for the Avro decoder d
// compiled from its derived schema, or nil when a field or its step is not one it writes.
func compileJSONDirect(jb *jsonBody, d *Decoder) *jsonDirect {
	rd := jb.rd
	if rd == nil || d == nil || d.topUnion || len(d.ops) != len(rd.fields) {
		return nil
	}
	jd := &jsonDirect{rd: rd, jb: jb, d: d, ops: make([]*fieldOp, len(rd.fields))}
	for i := range rd.fields {
		f, op := &rd.fields[i], &d.ops[i]
		jd.ops[i] = op
		if op.kind == opCall && op.skip {
			continue // read and checked only
		}
		if op.opt != f.node.nullable || op.opt && op.nullIdx != 0 {
			return nil
		}
		want := opLong
		switch f.kind {
		case jdInt, jdDate:
			want = opInt32
		case jdDouble:
			want = opDouble
		case jdBool:
			want = opBool
		case jdString:
			want = opString
			if !op.text {
				return nil
			}
		case jdDecimal:
			want = opDecimal
			if op.fixed >= 0 || op.dec == nil || op.dec.p > 18 {
				return nil
			}
		case jdList:
			want = opArray
			it := op.item
			if it == nil || it.kind != opString || !it.text || it.opt != f.elemNull || it.opt && (it.nullIdx != 0 || it.notNull) {
				return nil
			}
		}
		if op.kind.plain() != want {
			return nil
		}
	}
	return jd
}

// decodeColumns decodes document body into cols (len(cols) == the decoder's Columns())
// through a (nil: none), as transcodingDecoder.DecodeColumns does, and reports whether it
// did; when it did not, it has written nothing.
func (jd *jsonDirect) decodeColumns(a *Arena, body []byte, cols []column.Column) bool {
	d := jd.d
	if !d.leavesMatch(cols) {
		return false // the Avro decoder's error (errLeaf)
	}
	s, pooled := d.acquire(a)
	if pooled {
		defer d.pool.Put(s)
	}
	if cap(s.jdSlots) < len(jd.ops) {
		s.jdSlots = make([]jdSlot, len(jd.ops))
	}
	slots := s.jdSlots[:len(jd.ops)]
	switch jd.jb.memo.takeSlots(jd.jb, body, slots) {
	case memoAvro:
		return false // transcoded ahead: the transcoding path takes it
	case memoNone:
		if !jd.rd.read(slots, body) {
			return false
		}
	}
	// What the Avro decoder refuses of a transcoding: a null for a NOT NULL column, a
	// decimal beyond its column.
	for i, op := range jd.ops {
		sl := &slots[i]
		switch {
		case op.kind == opCall:
		case sl.n < 2:
			if op.notNull {
				return false
			}
		case op.kind == opDecimal:
			x, ok := scale64(int64(sl.w), op.up, op.dec.p)
			if !ok {
				return false
			}
			sl.w = uint64(x)
		}
	}
	s.cols, s.owned = cols, s.alias
	jd.write(s, slots, body)
	if len(d.missing) > 0 {
		s.nulls(d.missing, 0, 0)
	}
	s.cols = nil
	return true
}

// write appends the values read into slots from document b to s.cols, as runFields
// appends them from their Avro encoding.
func (jd *jsonDirect) write(s *state, slots []jdSlot, b []byte) {
	for i, op := range jd.ops {
		if op.kind == opCall {
			continue
		}
		sl := slots[i]
		col, def := int(op.col), int(op.def)
		if sl.n < 2 {
			s.putNull(0, int(op.nullDef), col)
			continue
		}
		switch jd.rd.fields[i].kind {
		case jdLong, jdTime:
			s.putInt64(int64(sl.w), 0, def, col)
		case jdInt, jdDate:
			s.putInt32(int32(uint32(sl.w)), 0, def, col)
		case jdDouble:
			s.putDouble(math.Float64frombits(sl.w), 0, def, col)
		case jdBool:
			s.putBoolean(sl.w != 0, 0, def, col)
		case jdDecimal:
			if op.dec.p <= 9 {
				s.putInt32(int32(sl.w), 0, def, col)
			} else {
				s.putInt64(int64(sl.w), 0, def, col)
			}
		case jdString:
			s.putBytes(b[sl.w>>32:uint32(sl.w)], 0, def, col)
		case jdList:
			if sl.n == 2 {
				s.putNull(0, def, col) // an empty array
				continue
			}
			it := op.item
			icol, idef := int(it.col&maxFastColumn), int(it.def)
			c := &s.cols[icol]
			if c.IsDense() { // never: a list's items are repeated
				c.ToLevelled()
			}
			p, rep := b[sl.w>>32:uint32(sl.w)], 0
			for k := 0; k < len(p); {
				k = jSkipWS(p, k)
				if p[k] == 'n' {
					s.putNull(rep, int(it.nullDef), icol)
					k += 4
				} else {
					e := k + 1 + bytes.IndexByte(p[k+1:], '"') // no escapes: the closing quote
					// A levelled value built where it is appended, as array appends it.
					v := parquet.ByteArrayValue(s.own(p[k+1 : e : e]))
					v.SetRepetitionLevel(int(uint8(rep)))
					v.SetDefinitionLevel(idef)
					v.SetColumnIndex(icol)
					c.Values = append(c.Values, v)
					k = e + 1
				}
				rep = int(op.inner)
				k = jSkipWS(p, k)
				if k < len(p) { // ','
					k++
				}
			}
		}
	}
}

// The answers of jMemo.takeSlots.
const (
	memoNone  = iota // no entry for the document
	memoSlots        // its read, now in slots
	memoAvro         // its transcoding (the writer-schema step's reader gave up on it)
)

// takeSlots looks for the entry of document body of jb: its read into slots (memoSlots,
// the entry taken), a transcoding (memoAvro, left for take: the writer-schema step's
// reader gave up on the document, or ran before the direct decoder was compiled), or none.
func (m *jMemo) takeSlots(jb *jsonBody, body []byte, slots []jdSlot) int {
	if m == nil {
		return memoNone
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := m.head; i < len(m.entries) && i < m.head+memoLookahead; i++ {
		e := &m.entries[i]
		c := m.chunks[e.chunk]
		if e.jb != jb || !bytes.Equal(c[e.in:e.out], body) {
			continue
		}
		if !e.slots || e.s1-e.s0 != len(slots) {
			return memoAvro
		}
		copy(slots, m.slots[e.s0:e.s1])
		for k := m.head; k <= i; k++ {
			m.entries[k].jb = nil
		}
		m.head = i + 1
		return memoSlots
	}
	return memoNone
}

// directAhead reads document body of ws (a plain JSON writer schema) with the direct
// reader and remembers the read for the decode that follows; false when ws has no
// direct decoder or the reader does not take the document (a key ws lacks among them).
func (ws *WriterSchema) directAhead(memo *jMemo, body []byte) bool {
	jb, ok := ws.body.(*jsonBody)
	if !ok || jb.rd == nil || !jb.direct.Load() || ws.DeltaErr != nil {
		return false
	}
	sp := jdAheadPool.Get().(*jdAhead)
	defer jdAheadPool.Put(sp)
	if cap(sp.slots) < len(jb.rd.fields) {
		sp.slots = make([]jdSlot, len(jb.rd.fields))
	}
	slots := sp.slots[:len(jb.rd.fields)]
	if !jb.rd.read(slots, body) {
		return false
	}
	memo.put(jb, body, nil, slots)
	return true
}

// jdAhead is directAhead's scratch: the read.
type jdAhead struct {
	slots []jdSlot
}

var jdAheadPool = sync.Pool{New: func() any { return new(jdAhead) }}
