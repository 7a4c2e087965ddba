package parquetenc

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// The levels pass: a column in the levels form of package column (its entries'
// repetition and definition levels as bytes, its set values as words or in the byte
// form) is encoded PLAIN (Parquet format, "Data pages", "Encodings": PLAIN,
// RLE/bit-packing hybrid levels) with no parquet.Value per entry: the levels of a page
// are copied to the level encoder as they are, the values written straight from the
// words or bytes. Validation, the Summary and the page cuts are the levelled pass's
// (columnPass without a dictionary): pages are cut at a row start once the page's PLAIN
// value bytes + its level entries / 8 reach the page target, so the file is byte for
// byte the one the levelled pass writes for the same values when it chooses PLAIN
// (TestLevelsSameBytesAsLevelled, levelsform_test.go). The form is meant for columns of mostly nulls or of
// distinct values (the Delta checkpoint's), where a dictionary saves little: it is never
// dictionary-encoded.

// levelsColumn validates the column c in the levels form against leaf (checkLevels and,
// per entry, levels within the leaf's maxima, the first entry starting a row, numRows
// rows, one value per set entry), summarises it and, when encoding, appends its PLAIN
// pages to e.out.
func (e *columnEncoder) levelsColumn(ci int, leaf *leafInfo, c *column.Column, numRows int) (Summary, error) {
	var s Summary
	if err := checkLevels(ci, leaf, c); err != nil {
		return s, err
	}
	name := func() string { return strings.Join(leaf.path, ".") }
	e.beginChunk(false, false)
	defer e.endChunk(false)
	maxRep, maxDef, kind := leaf.maxRep, leaf.maxDef, leaf.kind
	defs, reps, words := c.Defs, c.Reps, c.Dense
	rows, pageStart, pageNulls, nbits := 0, 0, 0, 0
	k := 0 // the next value (set entry)
	var start uint64
	var bd bounds // the current minimum and maximum (of s.Lo and s.Hi)
	flush := func(end int) error {
		if maxRep > 0 {
			e.reps = append(e.reps[:0], reps[pageStart:end]...)
		}
		if maxDef > 0 {
			e.defs = append(e.defs[:0], defs[pageStart:end]...)
		}
		if err := e.flushPage(leaf, end-pageStart, pageNulls); err != nil {
			return fmt.Errorf("column %s: %w", name(), err)
		}
		return nil
	}
	n, maxDef8 := len(defs), byte(maxDef)
	for j := 0; j < n; j++ {
		r, d := 0, int(defs[j])
		if maxRep > 0 {
			r = int(reps[j])
		}
		if r == 0 {
			if e.encode && len(e.vals)+(j-pageStart)>>3 >= e.pageTarget {
				if err := flush(j); err != nil {
					return s, err
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
		if d < maxDef && r > 0 {
			s.Nulls++
			pageNulls++
			continue
		}
		if d < maxDef {
			// A run of null rows (the rows of other actions, in a checkpoint): counted,
			// and cut into pages where the per-entry test would cut them, without a
			// test per entry. No value is added in the run, so the test first holds at
			// the row pageStart + 8·(e.pageTarget − len(e.vals)).
			end := j + 1
			for end < n && defs[end] < maxDef8 && (maxRep == 0 || reps[end] == 0) {
				end++
			}
			s.Nulls += end - j
			rows += end - j - 1
			i := j // entries [i, end) are not in pageNulls yet
			for e.encode {
				k := max(pageStart+max(e.pageTarget-len(e.vals), 0)<<3, i+1)
				if k >= end {
					break
				}
				pageNulls += k - i
				if err := flush(k); err != nil {
					return s, err
				}
				pageStart, pageNulls, nbits, i = k, 0, 0, k
			}
			pageNulls += end - i
			j = end - 1
			continue
		}
		if k >= len(words) {
			return s, fmt.Errorf("column %s value %d: set entry %d has no value (%d held)", name(), j, k, len(words))
		}
		w := words[k]
		k++
		switch kind {
		case parquet.Boolean:
			if e.encode {
				if nbits&7 == 0 {
					e.vals = append(e.vals, 0)
				}
				if w != 0 {
					e.vals[len(e.vals)-1] |= 1 << (nbits & 7)
				}
				nbits++
			}
			continue // no bounds
		case parquet.Int32, parquet.Int64:
			var x int64
			if kind == parquet.Int32 {
				x = int64(int32(uint32(w)))
				if e.encode {
					e.vals = binary.LittleEndian.AppendUint32(e.vals, uint32(w))
				}
			} else {
				x = int64(w)
				if e.encode {
					e.vals = binary.LittleEndian.AppendUint64(e.vals, w)
				}
			}
			bd.integer(&s, j, x)
		case parquet.Float, parquet.Double:
			var x float64
			if kind == parquet.Float {
				x = float64(math.Float32frombits(uint32(w)))
				if e.encode {
					e.vals = binary.LittleEndian.AppendUint32(e.vals, uint32(w))
				}
			} else {
				x = math.Float64frombits(w)
				if e.encode {
					e.vals = binary.LittleEndian.AppendUint64(e.vals, w)
				}
			}
			bd.float(&s, j, x)
		case parquet.ByteArray:
			b := c.Bytes[start:w:w]
			start = w
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint32(e.vals, uint32(len(b)))
				e.vals = append(e.vals, b...)
			}
			bd.byteArray(&s, j, b)
		}
	}
	if k != len(words) {
		return s, fmt.Errorf("column %s: %d values held for %d set entries", name(), len(words), k)
	}
	if rows != numRows {
		return s, fmt.Errorf("column %s has %d rows, want %d", name(), rows, numRows)
	}
	if e.encode && n > pageStart {
		if err := flush(n); err != nil {
			return s, err
		}
	}
	return s, nil
}

// checkLevels validates what a column in the levels form shares by all its entries:
// its leaf (column.Leaf) has the schema leaf's physical kind, column index and maximum
// levels; a repeated leaf has one repetition level per definition level, a
// non-repeated one none; a BYTE_ARRAY column's end offsets are in order and end at
// len(Bytes) (checkOffsets).
func checkLevels(ci int, leaf *leafInfo, c *column.Column) error {
	name := strings.Join(leaf.path, ".")
	l := c.Leaf()
	switch {
	case l.Kind != leaf.kind:
		return fmt.Errorf("column %s: levels form of a %v leaf for a %v column", name, l.Kind, leaf.kind)
	case l.Index != ci:
		return fmt.Errorf("column %s: levels form of leaf column %d, want %d", name, l.Index, ci)
	case l.MaxDef != leaf.maxDef || l.MaxRep != leaf.maxRep:
		return fmt.Errorf("column %s: levels form with maximum levels (%d,%d), want (%d,%d)", name, l.MaxRep, l.MaxDef, leaf.maxRep, leaf.maxDef)
	case leaf.maxRep > 0 && len(c.Reps) != len(c.Defs):
		return fmt.Errorf("column %s: %d repetition levels for %d entries", name, len(c.Reps), len(c.Defs))
	case leaf.maxRep == 0 && len(c.Reps) != 0:
		return fmt.Errorf("column %s: repetition levels for a leaf that is not repeated", name)
	}
	if leaf.kind == parquet.ByteArray {
		return checkOffsets(leaf, c)
	}
	return nil
}
