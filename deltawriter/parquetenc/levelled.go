package parquetenc

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// columnPass validates and summarises the levelled values vals of column ci and, when
// encoding, appends their pages to e.out: PLAIN or, with dict, dictionary-encoded
// (errDictFull when the dictionary outgrows its bounds: the caller re-encodes PLAIN).
// A page is cut at a row start once its PLAIN value bytes + 2 × its dictionary indexes +
// its level entries / 8 reach e.pageTarget (pageTargetBytes unless Writer.SetPageTarget).
func (e *columnEncoder) columnPass(ci int, leaf *leafInfo, vals []parquet.Value, numRows int, dict bool) (Summary, error) {
	var s Summary
	name := func() string { return strings.Join(leaf.path, ".") }
	maxRep, maxDef := leaf.maxRep, leaf.maxDef
	kind := leaf.kind
	e.beginChunk(dict, false)
	defer e.endChunk(dict) // back to the file buffer, also on errors
	rows, pageStart, pageNulls, nbits := 0, 0, 0, 0
	var bd bounds // the current minimum and maximum (of s.Lo and s.Hi)
	// the previous BYTE_ARRAY value of a dictionary pass and its entry
	var prevB []byte
	prevK := int32(-1)
	for j := range vals {
		v := &vals[j]
		r, d := int(v.RepetitionLevel()), int(v.DefinitionLevel())
		if r == 0 {
			if e.encode && len(e.vals)+2*len(e.idx)+(j-pageStart)>>3 >= e.pageTarget {
				if err := e.flushPage(leaf, j-pageStart, pageNulls); err != nil {
					return s, fmt.Errorf("column %s: %w", name(), err)
				}
				pageStart, pageNulls, nbits = j, 0, 0
			}
			rows++
		} else if j == 0 {
			return s, fmt.Errorf("column %s: first value has repetition level %d, want 0", name(), r)
		}
		if r > maxRep || d > maxDef {
			return s, fmt.Errorf("column %s value %d: levels (%d,%d) exceed max (%d,%d)", name(), j, r, d, maxRep, maxDef)
		}
		if v.Column() != ci {
			return s, fmt.Errorf("column %s value %d: carries column index %d, want %d", name(), j, v.Column(), ci)
		}
		if e.encode {
			if maxRep > 0 {
				e.reps = append(e.reps, byte(r))
			}
			if maxDef > 0 {
				e.defs = append(e.defs, byte(d))
			}
		}
		if d < maxDef {
			if !v.IsNull() {
				return s, fmt.Errorf("column %s value %d: null=false at definition level %d of %d", name(), j, d, maxDef)
			}
			s.Nulls++
			pageNulls++
			continue
		}
		if v.Kind() != kind { // a null Value has kind 0 (not a physical kind)
			if v.IsNull() {
				return s, fmt.Errorf("column %s value %d: null=true at definition level %d of %d", name(), j, d, maxDef)
			}
			return s, fmt.Errorf("column %s value %d: %v value for a %v column", name(), j, v.Kind(), kind)
		}
		switch kind {
		case parquet.Boolean:
			if e.encode {
				if nbits&7 == 0 {
					e.vals = append(e.vals, 0)
				}
				if v.Boolean() {
					e.vals[len(e.vals)-1] |= 1 << (nbits & 7)
				}
				nbits++
			}
		case parquet.Int32:
			x := v.Int32()
			if dict {
				k, err := e.dictIndexN(uint64(uint32(x)), 4, j)
				if err != nil {
					return s, err
				}
				e.idx = append(e.idx, k)
				continue
			}
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint32(e.vals, uint32(x))
			}
			bd.integer(&s, j, int64(x))
		case parquet.Int64:
			x := v.Int64()
			if dict {
				k, err := e.dictIndexN(uint64(x), 8, j)
				if err != nil {
					return s, err
				}
				e.idx = append(e.idx, k)
				continue
			}
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint64(e.vals, uint64(x))
			}
			bd.integer(&s, j, x)
		case parquet.Float:
			x := v.Float()
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint32(e.vals, math.Float32bits(x))
			}
			bd.float(&s, j, float64(x)) // exact: float32 order is float64 order
		case parquet.Double:
			x := v.Double()
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint64(e.vals, math.Float64bits(x))
			}
			bd.float(&s, j, x)
		case parquet.ByteArray:
			b := v.ByteArray()
			if dict {
				// A value longer than 8 bytes equal to the previous one (a repeated
				// note, a constant tag) reuses its entry: one compare instead of hashing
				// it and comparing it in the table.
				if len(b) > 8 && len(b) == len(prevB) && prevK >= 0 && bytes.Equal(b, prevB) {
					e.idx = append(e.idx, prevK)
					continue
				}
				k, err := e.dictIndexBytes(b, j)
				if err != nil {
					return s, err
				}
				prevB, prevK = b, k
				e.idx = append(e.idx, k)
				continue
			}
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint32(e.vals, uint32(len(b)))
				e.vals = append(e.vals, b...)
			}
			bd.byteArray(&s, j, b)
		case parquet.FixedLenByteArray:
			b := v.ByteArray()
			if len(b) != leaf.flbaLen {
				return s, fmt.Errorf("column %s value %d: %d bytes for a FIXED_LEN_BYTE_ARRAY(%d) column", name(), j, len(b), leaf.flbaLen)
			}
			if e.encode {
				e.vals = append(e.vals, b...)
			}
			cmp := bytes.Compare
			if leaf.signedFL {
				cmp = compareSignedBE
			}
			bd.fixed(&s, j, b, cmp)
		}
	}
	if rows != numRows {
		return s, fmt.Errorf("column %s has %d rows, want %d", name(), rows, numRows)
	}
	if e.encode && len(vals) > pageStart {
		if err := e.flushPage(leaf, len(vals)-pageStart, pageNulls); err != nil {
			return s, fmt.Errorf("column %s: %w", name(), err)
		}
	}
	if dict {
		// min and max over the distinct values; each entry stands for its first
		// occurrence, so the first of equal values wins as in the PLAIN pass
		for _, j := range e.dictFirst {
			if !s.HasBounds {
				s.Lo, s.Hi, s.HasBounds = j, j, true
				continue
			}
			var clo, chi int
			switch kind {
			case parquet.ByteArray:
				b := vals[j].ByteArray()
				clo, chi = bytes.Compare(b, vals[s.Lo].ByteArray()), bytes.Compare(b, vals[s.Hi].ByteArray())
			case parquet.Int32:
				x := vals[j].Int32()
				clo, chi = cmp.Compare(x, vals[s.Lo].Int32()), cmp.Compare(x, vals[s.Hi].Int32())
			default:
				x := vals[j].Int64()
				clo, chi = cmp.Compare(x, vals[s.Lo].Int64()), cmp.Compare(x, vals[s.Hi].Int64())
			}
			if clo < 0 {
				s.Lo = j
			} else if chi > 0 {
				s.Hi = j
			}
		}
		if err := e.writeDictionary(); err != nil {
			return s, fmt.Errorf("column %s: %w", name(), err)
		}
	}
	return s, nil
}

// compareSignedBE compares two equal-length big-endian two's-complement integers.
func compareSignedBE(a, b []byte) int {
	if len(a) > 0 && len(b) > 0 && a[0] != b[0] {
		if int8(a[0]) < int8(b[0]) {
			return -1
		}
		return 1
	}
	return bytes.Compare(a, b)
}
