package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/parquet-go/parquet-go"
)

// state is the per-call decoding state: a bounds-checked reader over one record's payload,
// the column buffers being appended to, and a slab that string and binary values are copied
// into (values in column buffers must not alias the Kafka record, whose buffer may be
// pooled; slab chunks are only ever sliced forward, never rewritten).
type state struct {
	buf  []byte
	pos  int
	cols [][]parquet.Value
	slab []byte
	lens []int
	// zeroItems bounds the array items of zero encoded size one record may produce, since
	// their count is not bounded by the input length.
	zeroItems int
}

const (
	slabChunk    = 32 << 10
	maxZeroItems = 1 << 16
	maxVarintLen = 10
)

var errEOF = errors.New("unexpected end of input")

func truncated() error { return newError(ReasonTruncated, "", errEOF) }

func malformed(format string, args ...any) error {
	return newError(ReasonDecodeError, "", fmt.Errorf(format, args...))
}

func (s *state) remaining() int { return len(s.buf) - s.pos }

// uvarint reads an Avro varint (at most 10 bytes, value within 64 bits).
func (s *state) uvarint() (uint64, error) {
	i := s.pos
	if i < len(s.buf) && s.buf[i] < 0x80 {
		s.pos = i + 1
		return uint64(s.buf[i]), nil
	}
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if i >= len(s.buf) {
			return 0, truncated()
		}
		c := s.buf[i]
		i++
		if shift == 63 && c > 1 {
			return 0, malformed("varint overflows 64 bits")
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			s.pos = i
			return v, nil
		}
		if i-s.pos >= maxVarintLen {
			return 0, malformed("varint longer than %d bytes", maxVarintLen)
		}
	}
}

// long reads a zigzag-encoded Avro long.
func (s *state) long() (int64, error) {
	u, err := s.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

// int reads a zigzag-encoded Avro int; values outside 32 bits are malformed.
func (s *state) int() (int32, error) {
	u, err := s.uvarint()
	if err != nil {
		return 0, err
	}
	if u > math.MaxUint32 {
		return 0, malformed("int overflows 32 bits")
	}
	return int32(uint32(u>>1)) ^ -int32(uint32(u)&1), nil
}

func (s *state) bool() (bool, error) {
	if s.pos >= len(s.buf) {
		return false, truncated()
	}
	c := s.buf[s.pos]
	if c > 1 {
		return false, malformed("boolean byte is 0x%02x, want 0 or 1", c)
	}
	s.pos++
	return c == 1, nil
}

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
	if n < 0 {
		return nil, malformed("negative length %d", n)
	}
	if n > int64(s.remaining()) {
		return nil, malformed("length %d exceeds the %d bytes left", n, s.remaining())
	}
	b := s.buf[s.pos : s.pos+int(n) : s.pos+int(n)]
	s.pos += int(n)
	return b, nil
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

// skip advances n bytes.
func (s *state) skip(n int64) error {
	if n < 0 {
		return malformed("negative length %d", n)
	}
	if n > int64(s.remaining()) {
		return malformed("length %d exceeds the %d bytes left", n, s.remaining())
	}
	s.pos += int(n)
	return nil
}

// copyBytes copies b into the slab and returns the copy (never nil, so an empty value is
// not mistaken for a missing one).
func (s *state) copyBytes(b []byte) []byte {
	if len(b) == 0 {
		return emptyBytes
	}
	if len(b) > cap(s.slab)-len(s.slab) {
		if len(b) >= slabChunk/4 {
			out := make([]byte, len(b))
			copy(out, b)
			return out
		}
		s.slab = make([]byte, 0, slabChunk)
	}
	n := len(s.slab)
	s.slab = append(s.slab, b...)
	return s.slab[n:len(s.slab):len(s.slab)]
}

// alloc returns n zeroed bytes from the slab.
func (s *state) alloc(n int) []byte {
	if n > cap(s.slab)-len(s.slab) {
		s.slab = make([]byte, 0, slabChunk)
	}
	m := len(s.slab)
	s.slab = s.slab[:m+n]
	out := s.slab[m : m+n : m+n]
	clear(out)
	return out
}

var emptyBytes = []byte{}

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

// put appends v to column col with the given levels. It is equivalent to
// append(cols[col], v.Level(rep, def, col)) but uses the inlinable single-field setters
// (levels and column indexes were range-checked when the decoder was compiled).
func (s *state) put(v parquet.Value, rep, def, col int) {
	v.SetRepetitionLevel(rep)
	v.SetDefinitionLevel(def)
	v.SetColumnIndex(col)
	s.cols[col] = append(s.cols[col], v)
}

// nulls appends a null at (rep, def) to every column in leaves.
func (s *state) nulls(leaves []int, rep, def int) {
	for _, c := range leaves {
		s.put(parquet.NullValue(), rep, def, c)
	}
}
