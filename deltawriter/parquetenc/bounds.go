package parquetenc

import (
	"bytes"
	"math"
)

// bounds keeps, while a pass walks a column chunk's values, its least and greatest
// value: their positions in Summary.Lo and Summary.Hi, and the values themselves
// unpacked by kind, so each new value costs one or two compares. The first of equal
// values keeps its place; a NaN compares false, so it never moves a bound once one is set.
type bounds struct {
	loI, hiI int64
	loF, hiF float64
	loB, hiB []byte
}

// integer takes integer value x at position j (INT32 widened, INT64).
func (b *bounds) integer(s *Summary, j int, x int64) {
	switch {
	case !s.HasBounds:
		s.Lo, s.Hi, s.HasBounds, b.loI, b.hiI = j, j, true, x, x
	case x < b.loI:
		s.Lo, b.loI = j, x
	case x > b.hiI:
		s.Hi, b.hiI = j, x
	}
}

// float takes floating-point value x at position j (FLOAT widened exactly, DOUBLE),
// marking a NaN or an infinity in s.NonFinite.
func (b *bounds) float(s *Summary, j int, x float64) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		s.NonFinite = true
	}
	if !s.HasBounds {
		s.Lo, s.Hi, s.HasBounds, b.loF, b.hiF = j, j, true, x, x
		return
	}
	if x < b.loF {
		s.Lo, b.loF = j, x
	}
	if x > b.hiF {
		s.Hi, b.hiF = j, x
	}
}

// byteArray takes BYTE_ARRAY value v at position j, in unsigned byte order.
func (b *bounds) byteArray(s *Summary, j int, v []byte) {
	switch {
	case !s.HasBounds:
		s.Lo, s.Hi, s.HasBounds, b.loB, b.hiB = j, j, true, v, v
	case bytes.Compare(v, b.loB) < 0:
		s.Lo, b.loB = j, v
	case bytes.Compare(v, b.hiB) > 0:
		s.Hi, b.hiB = j, v
	}
}

// fixed takes FIXED_LEN_BYTE_ARRAY value v at position j, ordered by cmp (unsigned
// bytes, or compareSignedBE for a decimal).
func (b *bounds) fixed(s *Summary, j int, v []byte, cmp func(a, b []byte) int) {
	switch {
	case !s.HasBounds:
		s.Lo, s.Hi, s.HasBounds, b.loB, b.hiB = j, j, true, v, v
	case cmp(v, b.loB) < 0:
		s.Lo, b.loB = j, v
	case cmp(v, b.hiB) > 0:
		s.Hi, b.hiB = j, v
	}
}
