package parquetenc

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// The dense pass of the encoder: a column in the dense form of package column (one
// 8-byte word per row, column.Bits, of a non-repeated BOOLEAN, INT32, INT64, FLOAT or
// DOUBLE leaf whose every row is set) is encoded straight from its words (Parquet
// format, "Data pages", "Encodings" PLAIN, RLE/bit-packing hybrid, RLE_DICTIONARY); a
// non-repeated BYTE_ARRAY leaf in the byte form (its values back to back in
// Column.Bytes, end offsets in Column.Dense) straight from its bytes (densebytes.go).
//
// What the levelled pass checks per value is checked once per column (checkDense: the
// words all share the levels, kind and column index of their leaf); the definition
// levels, all at the leaf's maximum, are written as runs (appendConstLevels) instead of
// one level byte per value; the values are written PLAIN from the words with the
// minimum and maximum in the same loop, or dictionary-encoded on the words. Pages are cut
// after the same number of rows as the levelled pass cuts them (pageRows), so that the
// file is byte for byte the one the levelled pass writes for the same values
// (TestWriteColumnsDenseSameBytes); a word is read as column.FromBits reads it (an
// INT32 or FLOAT word by its low 32 bits, a BOOLEAN word as true when not 0).

// denseColumn validates the dense column c against leaf (checkDense), summarises it and,
// when encoding, appends its pages to e.out; INT32 and INT64 columns are
// dictionary-encoded when dictionaryPaysDense, as the levelled pass does; BYTE_ARRAY
// columns (the byte form) take denseBytesColumn.
func (e *columnEncoder) denseColumn(ci int, leaf *leafInfo, c *column.Column, numRows int) (Summary, error) {
	if err := checkDense(ci, leaf, c, numRows); err != nil {
		return Summary{}, err
	}
	if leaf.kind == parquet.ByteArray {
		return e.denseBytesColumn(leaf, c)
	}
	words := c.Dense
	switch leaf.kind {
	case parquet.Int32, parquet.Int64:
		if e.encode && e.dictionaryPaysDense(words, leaf.kind) {
			s, err := e.densePass(leaf, words, true)
			if err != errDictFull {
				return s, err
			}
		}
	}
	return e.densePass(leaf, words, false)
}

// checkDense validates a dense column once for all its words: the schema leaf is not
// repeated, and the column's leaf (column.Leaf) has the schema leaf's maximum definition
// level, column index and physical kind, and numRows words. The errors of the last
// three, and of a column of no words, are those the levelled pass reports for the same
// values (each word is a value at repetition level 0 and definition level Leaf.MaxDef
// with column index Leaf.Index, as column.At materialises it; its first value is where
// the levelled pass finds the fault).
func checkDense(ci int, leaf *leafInfo, c *column.Column, numRows int) error {
	name := strings.Join(leaf.path, ".")
	l := c.Leaf()
	if leaf.maxRep != 0 {
		return fmt.Errorf("column %s: dense values for a repeated leaf (max repetition level %d); a repeated leaf takes levelled values", name, leaf.maxRep)
	}
	if len(c.Dense) > 0 {
		switch {
		case l.MaxDef > leaf.maxDef:
			return fmt.Errorf("column %s value %d: levels (%d,%d) exceed max (%d,%d)", name, 0, 0, l.MaxDef, leaf.maxRep, leaf.maxDef)
		case l.Index != ci:
			return fmt.Errorf("column %s value %d: carries column index %d, want %d", name, 0, l.Index, ci)
		case l.MaxDef < leaf.maxDef:
			return fmt.Errorf("column %s value %d: null=false at definition level %d of %d", name, 0, l.MaxDef, leaf.maxDef)
		case l.Kind != leaf.kind:
			return fmt.Errorf("column %s value %d: %v value for a %v column", name, 0, l.Kind, leaf.kind)
		}
	}
	if len(c.Dense) != numRows {
		return fmt.Errorf("column %s has %d rows, want %d", name, len(c.Dense), numRows)
	}
	return nil
}

// dictKey is the dictionary key of an INT32 or INT64 word: the value's bits as the
// levelled pass keys them (an INT32 zero-extended).
func dictKey(kind parquet.Kind, w uint64) uint64 {
	if kind == parquet.Int32 {
		return uint64(uint32(w))
	}
	return w
}

// dictionaryPaysDense is dictionaryPays for the words of a dense INT32 or INT64 column
// (every word a non-null value): its first dictProbe values hold at most a quarter
// distinct values.
func (e *columnEncoder) dictionaryPaysDense(words []uint64, kind parquet.Kind) bool {
	e.probe.reset()
	n := min(len(words), dictProbe)
	for _, w := range words[:n] {
		e.probe.index(dictKey(kind, w))
		if len(e.probe.keys)*4 > dictProbe {
			return false
		}
	}
	return n > 0 && len(e.probe.keys)*4 <= n
}

// pageRows returns the number of rows per page of a dense column (the last page may hold
// fewer): the first row count k ≥ 1 at which the levelled pass's page-cut test
// (the page's PLAIN value bytes + 2 × its dictionary indexes + its level entries / 8 ≥
// target, columnPass) holds, for a page of k set values of width bytes each (0:
// BOOLEAN, one bit each) or, when dict, k dictionary indexes. It assumes target ≥ 1.
func pageRows(target, width int, dict bool) int {
	size := func(k int) int {
		switch {
		case dict:
			return 2*k + k>>3
		case width == 0:
			return (k+7)>>3 + k>>3
		default:
			return k*width + k>>3
		}
	}
	limit := 8*target + 8 // size(limit) ≥ target for every form
	return 1 + sort.Search(limit, func(i int) bool { return size(i+1) >= target })
}

// appendConstLevels appends the level stream of a DataPage V1 holding n level entries
// all equal to level (1 ≤ level ≤ 255): the uint32 LE length prefix, then an RLE run of
// the largest multiple of 8 entries and one of the rest (Parquet format, "Run Length
// Encoding / Bit-Packing Hybrid": run header uvarint(count << 1), then the value in one
// byte for a bit width ≤ 8). These are the bytes parquet-go's rle encoder, which the
// levelled pass uses, writes for such levels (TestAppendConstLevels).
func appendConstLevels(dst []byte, n, level int) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	if n >= 8 {
		dst = binary.AppendUvarint(dst, uint64(n&^7)<<1)
		dst = append(dst, byte(level))
	}
	if r := n & 7; r > 0 {
		dst = binary.AppendUvarint(dst, uint64(r)<<1)
		dst = append(dst, byte(level))
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// densePass encodes (when e.encode) and summarises the words of a validated dense
// column, PLAIN or, with dict, dictionary-encoded (errDictFull when the dictionary
// outgrows its bounds: the caller re-encodes PLAIN). The summary is the levelled pass's:
// no nulls, lo and hi the first of the minimum and maximum values, nonFinite for a NaN or
// ±Inf; BOOLEAN columns get no bounds.
func (e *columnEncoder) densePass(leaf *leafInfo, words []uint64, dict bool) (Summary, error) {
	var s Summary
	e.beginChunk(dict, true)
	defer e.endChunk(dict)
	kind := leaf.kind
	width := 0
	switch kind {
	case parquet.Int32, parquet.Float:
		width = 4
	case parquet.Int64, parquet.Double:
		width = 8
	}
	per := len(words) // summarising only: one stretch, no pages
	if e.encode {
		per = pageRows(e.pageTarget, width, dict)
	}
	// the current minimum and maximum (of s.Lo and s.Hi), kept unpacked; the first
	// value starts both, the rest replace them only when strictly beyond
	var loI, hiI int64
	var loF, hiF float64
	if kind != parquet.Boolean && !dict {
		s.HasBounds = true
		switch kind {
		case parquet.Int32:
			loI = int64(int32(uint32(words[0])))
		case parquet.Int64:
			loI = int64(words[0])
		case parquet.Float:
			loF = float64(math.Float32frombits(uint32(words[0])))
		case parquet.Double:
			loF = math.Float64frombits(words[0])
		}
		hiI, hiF = loI, loF
	}
	for start := 0; start < len(words); start += per {
		page := words[start:min(start+per, len(words))]
		switch {
		case dict:
			for j, w := range page {
				k, err := e.dictIndexN(dictKey(kind, w), width, start+j)
				if err != nil {
					return s, err
				}
				e.idx = append(e.idx, k)
			}
		case kind == parquet.Boolean:
			buf := e.growVals((len(page) + 7) >> 3)
			clear(buf)
			for j, w := range page {
				if w != 0 {
					buf[j>>3] |= 1 << (j & 7)
				}
			}
		case kind == parquet.Int32:
			buf := e.growVals(4 * len(page))
			for j, w := range page {
				x := int32(uint32(w))
				binary.LittleEndian.PutUint32(buf[4*j:], uint32(x))
				if y := int64(x); y < loI {
					s.Lo, loI = start+j, y
				} else if y > hiI {
					s.Hi, hiI = start+j, y
				}
			}
		case kind == parquet.Int64:
			buf := e.growVals(8 * len(page))
			for j, w := range page {
				binary.LittleEndian.PutUint64(buf[8*j:], w)
				if x := int64(w); x < loI {
					s.Lo, loI = start+j, x
				} else if x > hiI {
					s.Hi, hiI = start+j, x
				}
			}
		case kind == parquet.Float:
			buf := e.growVals(4 * len(page))
			for j, w := range page {
				b := uint32(w)
				binary.LittleEndian.PutUint32(buf[4*j:], b)
				if b&0x7f800000 == 0x7f800000 { // exponent all ones: NaN or ±Inf
					s.NonFinite = true
				}
				y := float64(math.Float32frombits(b)) // exact: float32 order is float64 order
				if y < loF {
					s.Lo, loF = start+j, y
				}
				if y > hiF {
					s.Hi, hiF = start+j, y
				}
			}
		case kind == parquet.Double:
			buf := e.growVals(8 * len(page))
			for j, w := range page {
				binary.LittleEndian.PutUint64(buf[8*j:], w)
				if w&0x7ff0000000000000 == 0x7ff0000000000000 {
					s.NonFinite = true
				}
				x := math.Float64frombits(w)
				if x < loF {
					s.Lo, loF = start+j, x
				}
				if x > hiF {
					s.Hi, hiF = start+j, x
				}
			}
		}
		if !e.encode {
			e.vals = e.vals[:0]
			continue
		}
		if err := e.flushPage(leaf, len(page), 0); err != nil {
			return s, fmt.Errorf("column %s: %w", strings.Join(leaf.path, "."), err)
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
			if kind == parquet.Int32 {
				x := int32(uint32(words[j]))
				clo, chi = cmp.Compare(x, int32(uint32(words[s.Lo]))), cmp.Compare(x, int32(uint32(words[s.Hi])))
			} else {
				x := int64(words[j])
				clo, chi = cmp.Compare(x, int64(words[s.Lo])), cmp.Compare(x, int64(words[s.Hi]))
			}
			if clo < 0 {
				s.Lo = j
			} else if chi > 0 {
				s.Hi = j
			}
		}
		if err := e.writeDictionary(); err != nil {
			return s, fmt.Errorf("column %s: %w", strings.Join(leaf.path, "."), err)
		}
	}
	return s, nil
}

// growVals sets e.vals to n bytes (contents undefined) and returns it.
func (e *columnEncoder) growVals(n int) []byte {
	e.vals = slices.Grow(e.vals[:0], n)[:n]
	return e.vals
}
