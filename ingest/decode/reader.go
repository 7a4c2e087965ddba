package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// state is the decoding state of one record: a bounds-checked reader over the record's
// payload (or over its copy in the arena, see owned), the column buffers being appended
// to, and the byte arena that the record and wide-decimal values are copied into
// (levelled values in column buffers must not alias a payload the caller may modify or
// reuse, unless the arena was set to alias, Arena.AliasPayloads; values of a dense
// column's byte form are copied into the column's Bytes). A state is held either by an
// Arena (caller owned, DecodeWith) or by the Decoder's pool (Decode, never aliasing).
type state struct {
	buf []byte
	pos int
	// cols are the columns being appended to, by leaf column index: the caller's
	// (DecodeColumns) or wrap, wrapping Decode's and DecodeWith's [][]parquet.Value.
	cols []column.Column
	wrap []column.Column // Decode's and DecodeWith's columns as levelled Columns
	// zeroItems bounds the array items of zero encoded size one record may produce, since
	// their count is not bounded by the input length.
	zeroItems int
	lens      []int    // column lengths before the record, for the rollback
	pdSlots   []pdSlot // the direct Protobuf decoder's fields of the record (protodirect.go)
	jdSlots   []jdSlot // the direct JSON decoder's fields of the record (jsondirect.go)
	// owned is set when values sliced from buf may be appended as they are (see own):
	// buf is the record's copy in the arena (Decoder.copies), or the payload itself under
	// alias.
	owned bool
	// alias is Arena.AliasPayloads: buf is always the payload, and owned is always set.
	alias bool

	// Byte arena. cur is the chunk being filled (cur[:len(cur)] has been handed out);
	// chunks lists the chunks that may be handed out again after a reset, in the order they
	// were first used; next is the index in chunks after cur's. Only Arena.Reset, and the
	// rollback of a failed record to where that record started, rewind; otherwise bytes
	// are only ever handed out once.
	cur    []byte
	chunks [][]byte
	next   int
	retain int // how many chunks may be kept for reuse (0: none, the pooled state of Decode)
	// detached counts the bytes handed out since the last Arena.Reset outside chunks:
	// large values' own allocations and chunks beyond retain (Arena.Detached).
	detached int
}

const (
	slabChunk    = 64 << 10
	maxZeroItems = 1 << 16
	maxVarintLen = 10
)

var errEOF = errors.New("unexpected end of input")

func truncated() error { return newError(ReasonTruncated, "", errEOF) }

func malformed(format string, args ...any) error {
	return newError(ReasonDecodeError, "", fmt.Errorf(format, args...))
}

func (s *state) remaining() int { return len(s.buf) - s.pos }

// uvarint reads an Avro varint (at most 10 bytes, value within 64 bits). The one-byte
// case is inlined into callers; longer varints take uvarintSlow.
func (s *state) uvarint() (uint64, error) {
	if i := s.pos; i < len(s.buf) {
		if c := s.buf[i]; c < 0x80 {
			s.pos = i + 1
			return uint64(c), nil
		}
	}
	return s.uvarintSlow()
}

func (s *state) uvarintSlow() (uint64, error) {
	v, pos, err := uvarintSlowAt(s.buf, s.pos)
	if err == nil {
		s.pos = pos
	}
	return v, err
}

// uvarintSlowAt reads the varint at buf[i:] and returns it with the position after it.
func uvarintSlowAt(buf []byte, i int) (uint64, int, error) {
	if len(buf)-i >= maxVarintLen {
		// At least 10 bytes left. Up to 8 bytes (56 bits) at once: find the first byte
		// without the continuation bit, keep the bytes up to it, and pack their 7-bit
		// groups.
		x := binary.LittleEndian.Uint64(buf[i:])
		if stop := ^x & 0x8080808080808080; stop != 0 {
			nbits := uint(bits.TrailingZeros64(stop)) + 1 // 8 × bytes used
			x &= (uint64(1)<<nbits - 1) & 0x7f7f7f7f7f7f7f7f
			x = (x&0x7f007f007f007f00)>>1 | x&0x007f007f007f007f
			x = (x&0x3fff00003fff0000)>>2 | x&0x00003fff00003fff
			x = (x&0x0fffffff00000000)>>4 | x&0x000000000fffffff
			return x, i + int(nbits/8), nil
		}
		b := (*[maxVarintLen]byte)(buf[i:])
		var v uint64
		for k := 0; k < maxVarintLen-1; k++ {
			c := b[k]
			v |= uint64(c&0x7f) << (7 * k)
			if c < 0x80 {
				return v, i + k + 1, nil
			}
		}
		if c := b[maxVarintLen-1]; c <= 1 {
			return v | uint64(c)<<63, i + maxVarintLen, nil
		}
		return 0, i, malformed("varint overflows 64 bits")
	}
	start := i
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if i >= len(buf) {
			return 0, start, truncated()
		}
		c := buf[i]
		i++
		if shift == 63 && c > 1 {
			return 0, start, malformed("varint overflows 64 bits")
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, i, nil
		}
		if i-start >= maxVarintLen {
			return 0, start, malformed("varint longer than %d bytes", maxVarintLen)
		}
	}
}

// zigzagSlow reads the zigzag-encoded long at buf[i:] (any length) and returns it with the
// position after it.
func zigzagSlow(buf []byte, i int) (int64, int, error) {
	u, i, err := uvarintSlowAt(buf, i)
	return int64(u>>1) ^ -int64(u&1), i, err
}

// int32Slow reads the zigzag-encoded int at buf[i:] (any length); values outside 32 bits
// are malformed.
func int32Slow(buf []byte, i int) (int32, int, error) {
	u, i, err := uvarintSlowAt(buf, i) // u is 0 when err is set
	if u > math.MaxUint32 {
		return 0, i, intOverflow()
	}
	return int32(uint32(u>>1)) ^ -int32(uint32(u)&1), i, err
}

// long reads a zigzag-encoded Avro long.
func (s *state) long() (int64, error) {
	u, err := s.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

// int reads a zigzag-encoded Avro int; values outside 32 bits are malformed.
func (s *state) int() (int32, error) {
	u, err := s.uvarint() // u is 0 when err is set
	if u > math.MaxUint32 {
		return 0, intOverflow()
	}
	return int32(uint32(u>>1)) ^ -int32(uint32(u)&1), err
}

func intOverflow() error { return malformed("int overflows 32 bits") }

func (s *state) bool() (bool, error) {
	if s.pos >= len(s.buf) {
		return false, truncated()
	}
	c := s.buf[s.pos]
	if c > 1 {
		return false, badBool(c)
	}
	s.pos++
	return c == 1, nil
}

func badBool(c byte) error { return malformed("boolean byte is 0x%02x, want 0 or 1", c) }

func (s *state) float() (float32, error) {
	if s.remaining() < 4 {
		return 0, truncated()
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(s.buf[s.pos:]))
	s.pos += 4
	return v, nil
}

func (s *state) double() (float64, error) {
	if s.remaining() < 8 {
		return 0, truncated()
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(s.buf[s.pos:]))
	s.pos += 8
	return v, nil
}

// span reads a length-prefixed string or bytes value and returns it aliasing the payload.
// A negative length, or one beyond the remaining input, is malformed.
func (s *state) span() ([]byte, error) {
	n, err := s.long()
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(len(s.buf)-s.pos) { // also every negative n
		return nil, badLength(n, len(s.buf)-s.pos)
	}
	i := s.pos
	s.pos = i + int(n)
	return s.buf[i:s.pos:s.pos], nil
}

// badLength is the error of a string or bytes length n with left bytes left.
func badLength(n int64, left int) error {
	if n < 0 {
		return malformed("negative length %d", n)
	}
	return malformed("length %d exceeds the %d bytes left", n, left)
}

// badUTF8 is the decode_error of an Avro string b that is not UTF-8 (Avro specification,
// "Primitive Types": a string is UTF-8 character data): written to a Delta string column
// it would make the data file unreadable to readers that check UTF-8 (delta-rs, arrow-rs:
// "encountered non UTF-8 data").
func badUTF8(b []byte) error {
	i := InvalidUTF8At(b)
	return malformed("string of %d bytes is not valid UTF-8 (invalid byte 0x%02x at offset %d)", len(b), b[min(i, len(b)-1)], i)
}

// InvalidUTF8At returns the offset of the first byte of b that does not start a valid
// UTF-8 sequence, or len(b) when b is valid UTF-8 (and when b is empty).
func InvalidUTF8At(b []byte) int {
	i := 0
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		i += n
	}
	return i
}

// validText reports whether b is valid UTF-8 (utf8.Valid). A string shorter than 64
// bytes that is ASCII — the common string — is checked a word at a time (the tail as the
// last, overlapping word), from the first word that is not ASCII (a character boundary:
// everything before it is ASCII) by utf8.Valid; a longer one by utf8.Valid from the start,
// whose 32-byte ASCII steps are faster from about 54 bytes on: the word loop is 1.5–2.5×
// faster below 64 bytes and took 54 ns at 873 bytes against utf8.Valid's 21 ns (go1.26;
// BenchmarkValidText, BENCHMARKS.md "The UTF-8 check of long strings").
func validText(b []byte) bool {
	const hi = 0x8080808080808080
	n := len(b)
	if n >= 64 {
		return utf8.Valid(b)
	}
	if n < 8 {
		for i, c := range b {
			if c >= 0x80 {
				return utf8.Valid(b[i:])
			}
		}
		return true
	}
	i := 0
	for ; n-i >= 16; i += 16 {
		if (binary.LittleEndian.Uint64(b[i:])|binary.LittleEndian.Uint64(b[i+8:]))&hi != 0 {
			return utf8.Valid(b[i:])
		}
	}
	if i < n && (binary.LittleEndian.Uint64(b[min(i, n-8):])|binary.LittleEndian.Uint64(b[n-8:]))&hi != 0 {
		return utf8.Valid(b[i:])
	}
	return true
}

// putText reads an Avro string value, checks that it is UTF-8 (badUTF8) and appends it
// (putBytes).
func (s *state) putText(rep, def, col int) error {
	b, err := s.span()
	if err != nil {
		return err
	}
	if !validText(b) {
		return badUTF8(b)
	}
	s.putBytes(b, rep, def, col)
	return nil
}

// fixed reads n bytes aliasing the payload.
func (s *state) fixed(n int) ([]byte, error) {
	if s.remaining() < n {
		return nil, truncated()
	}
	b := s.buf[s.pos : s.pos+n : s.pos+n]
	s.pos += n
	return b, nil
}

// copyBytes copies b into the arena and returns the copy (never nil, so an empty value is
// not mistaken for a missing one).
func (s *state) copyBytes(b []byte) []byte {
	n := len(s.cur)
	if len(b) == 0 || len(b) > cap(s.cur)-n {
		return s.copySlow(b)
	}
	s.cur = s.cur[:n+len(b)]
	out := s.cur[n : n+len(b) : n+len(b)]
	copy(out, b)
	return out
}

func (s *state) copySlow(b []byte) []byte {
	if len(b) == 0 {
		return emptyBytes
	}
	out := s.alloc(len(b))
	copy(out, b)
	return out
}

// alloc returns n zeroed bytes from the arena.
func (s *state) alloc(n int) []byte {
	if n > cap(s.cur)-len(s.cur) {
		if n >= slabChunk/4 {
			s.detached += n
			return make([]byte, n) // large values get their own allocation, never reused
		}
		s.nextChunk()
	}
	m := len(s.cur)
	s.cur = s.cur[:m+n]
	out := s.cur[m : m+n : m+n]
	clear(out) // a reused chunk holds old bytes
	return out
}

// nextChunk makes cur the next reusable chunk, or a new one (kept for reuse while fewer
// than retain are kept).
func (s *state) nextChunk() {
	if s.next < len(s.chunks) {
		s.cur = s.chunks[s.next][:0]
		s.next++
		return
	}
	s.cur = make([]byte, 0, slabChunk)
	if len(s.chunks) < s.retain {
		s.chunks = append(s.chunks, s.cur)
		s.next = len(s.chunks)
	} else {
		s.detached += slabChunk
	}
}

var emptyBytes = []byte{}

// own returns a string, bytes, fixed or map-key value b read from buf that may be
// appended to a levelled column: b itself when buf is the record's copy in the arena or
// the payload under alias (Arena.AliasPayloads), else a copy. An empty value is
// emptyBytes (never nil, so it is not mistaken for a missing one).
func (s *state) own(b []byte) []byte {
	if len(b) == 0 {
		return emptyBytes
	}
	if s.owned {
		return b[:len(b):len(b)]
	}
	return s.copyBytes(b)
}

// blockCount reads one array or map block header. It returns the item count (0 ends the
// array or map) and, for a negative count, the declared byte size of the block (else -1).
// minItem is the smallest encoded size of one item; counts the remaining input cannot
// hold are malformed, so no caller ever allocates beyond the input.
func (s *state) blockCount(minItem int) (count int64, size int64, err error) {
	n, err := s.long()
	if err != nil || n == 0 {
		return 0, -1, err
	}
	size = -1
	if n < 0 {
		if n == math.MinInt64 {
			return 0, -1, malformed("block count overflows")
		}
		n = -n
		size, err = s.long()
		if err != nil {
			return 0, -1, err
		}
		if size < 0 || size > int64(s.remaining()) {
			return 0, -1, malformed("block size %d invalid with %d bytes left", size, s.remaining())
		}
	}
	if minItem > 0 {
		if n > int64(s.remaining())/int64(minItem) {
			return 0, -1, malformed("block count %d exceeds what the %d bytes left can hold", n, s.remaining())
		}
	} else {
		s.zeroItems += int(min(n, maxZeroItems+1))
		if s.zeroItems > maxZeroItems {
			return 0, -1, malformed("more than %d zero-size items in one record", maxZeroItems)
		}
	}
	return n, size, nil
}

// The typed put functions are put for one kind of value: few enough arguments to pass in
// registers. A set value of a fixed-width kind goes into a dense column as its word
// (column.Bits: the column is of a non-repeated leaf, so rep is 0, and a present value's
// def is the leaf's maximum, checked by compiler.leaf), a set BYTE_ARRAY value into a
// dense column as its bytes (putByteArray, putBytes); anything else is built as a
// parquet.Value with its levels set in place (the setters are inlined) and appended to
// the levelled form (putValue).

// putValue appends v, with its levels and column index set, to column col in the
// levelled form (appendLevelled).
func (s *state) putValue(v parquet.Value, col int) { appendLevelled(&s.cols[col], v) }

// appendLevelled appends v to c in the levelled form: a dense c turns levelled first (v
// is a null, or a kind the dense form does not hold, which the decoder never writes to a
// dense leaf).
func appendLevelled(c *column.Column, v parquet.Value) {
	if c.IsDense() {
		c.ToLevelled()
	}
	c.Values = append(c.Values, v)
}

func (s *state) putNull(rep, def, col int) {
	v := parquet.NullValue()
	v.SetRepetitionLevel(rep)
	v.SetDefinitionLevel(def)
	v.SetColumnIndex(col)
	s.putValue(v, col)
}

func (s *state) putBoolean(x bool, rep, def, col int) {
	if p := &s.cols[col]; p.IsDense() {
		var b uint64
		if x {
			b = 1
		}
		p.Dense = append(p.Dense, b)
		return
	}
	v := parquet.BooleanValue(x)
	v.SetRepetitionLevel(rep)
	v.SetDefinitionLevel(def)
	v.SetColumnIndex(col)
	s.putValue(v, col)
}

func (s *state) putInt32(x int32, rep, def, col int) {
	if p := &s.cols[col]; p.IsDense() {
		p.Dense = append(p.Dense, uint64(uint32(x)))
		return
	}
	v := parquet.Int32Value(x)
	v.SetRepetitionLevel(rep)
	v.SetDefinitionLevel(def)
	v.SetColumnIndex(col)
	s.putValue(v, col)
}

func (s *state) putInt64(x int64, rep, def, col int) {
	if p := &s.cols[col]; p.IsDense() {
		p.Dense = append(p.Dense, uint64(x))
		return
	}
	v := parquet.Int64Value(x)
	v.SetRepetitionLevel(rep)
	v.SetDefinitionLevel(def)
	v.SetColumnIndex(col)
	s.putValue(v, col)
}

func (s *state) putFloat(x float32, rep, def, col int) {
	if p := &s.cols[col]; p.IsDense() {
		p.Dense = append(p.Dense, uint64(math.Float32bits(x)))
		return
	}
	v := parquet.FloatValue(x)
	v.SetRepetitionLevel(rep)
	v.SetDefinitionLevel(def)
	v.SetColumnIndex(col)
	s.putValue(v, col)
}

func (s *state) putDouble(x float64, rep, def, col int) {
	if p := &s.cols[col]; p.IsDense() {
		p.Dense = append(p.Dense, math.Float64bits(x))
		return
	}
	v := parquet.DoubleValue(x)
	v.SetRepetitionLevel(rep)
	v.SetDefinitionLevel(def)
	v.SetColumnIndex(col)
	s.putValue(v, col)
}

// putByteArray appends b, a schema constant (an enum symbol) or a value own returned:
// copied into a dense column's Bytes (column.Column.AppendBytes; the decoder writes byte
// values to BYTE_ARRAY leaves only, at the leaf's maximum definition level), else as a
// levelled value aliasing b.
func (s *state) putByteArray(b []byte, rep, def, col int) {
	if p := &s.cols[col]; p.IsDense() {
		p.AppendBytes(b)
		return
	}
	s.putLevelledBytes(b, rep, def, col)
}

// putLevelledBytes appends b as a levelled BYTE_ARRAY value.
func (s *state) putLevelledBytes(b []byte, rep, def, col int) {
	v := parquet.ByteArrayValue(b)
	v.SetRepetitionLevel(rep)
	v.SetDefinitionLevel(def)
	v.SetColumnIndex(col)
	s.putValue(v, col)
}

// putBytes appends b, a string, bytes or fixed value read from buf: copied into a dense
// column's Bytes (column.Column.AppendBytes; never an arena copy), else owned (own) as a
// levelled value.
func (s *state) putBytes(b []byte, rep, def, col int) {
	if p := &s.cols[col]; p.IsDense() {
		p.AppendBytes(b)
		return
	}
	s.putLevelledBytes(s.own(b), rep, def, col)
}

func (s *state) putFixedLenByteArray(b []byte, rep, def, col int) {
	v := parquet.FixedLenByteArrayValue(b)
	v.SetRepetitionLevel(rep)
	v.SetDefinitionLevel(def)
	v.SetColumnIndex(col)
	s.putValue(v, col)
}

// putString reads a string or bytes value and appends it (putBytes).
func (s *state) putString(rep, def, col int) error {
	b, err := s.span()
	if err != nil {
		return err
	}
	s.putBytes(b, rep, def, col)
	return nil
}

// nulls appends a null at (rep, def) to every column in leaves.
func (s *state) nulls(leaves []int, rep, def int) {
	for _, c := range leaves {
		s.putNull(rep, def, c)
	}
}
