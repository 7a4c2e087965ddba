package parquetenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// The dense pass of a BYTE_ARRAY column (string, binary, enum: any logical type over
// BYTE_ARRAY) in the byte form of package column: the rows' values back to back in
// Column.Bytes, Column.Dense[j] the end offset of row j (Parquet format, "Data pages",
// "Encodings" PLAIN: a 4-byte little-endian length then the bytes; RLE_DICTIONARY).
//
// As the fixed-width dense pass (dense.go): the column is validated once (checkDense,
// then checkOffsets), its definition levels, all at the leaf's maximum, are written as
// runs; the values are written PLAIN straight from Bytes with the minimum and maximum
// (unsigned byte order) in the same loop, or dictionary-encoded when dictionaryPaysBytes
// (the levelled pass's probe over the same values), entries in first-occurrence order,
// abandoned for PLAIN when the dictionary outgrows its bounds. Pages are cut before the
// row at which the levelled pass cuts (its test: the page's PLAIN value bytes, 4 + length
// per value, + 2 × its dictionary indexes + its rows / 8 ≥ pageTargetBytes), so the file
// and its Summary (the footer bounds, and the table's statistics, which read the
// summary's entries through column.At) are those the levelled pass gives for the same
// values (TestWriteColumnsDenseSameBytes, FuzzDenseSameBytes).

// denseBytesColumn is denseColumn for a dense BYTE_ARRAY column that passed checkDense:
// it validates c's offsets (checkOffsets), summarises it and, when encoding, appends its
// pages to e.out, dictionary-encoded when dictionaryPaysBytes, as the levelled pass does.
func (e *columnEncoder) denseBytesColumn(leaf *leafInfo, c *column.Column) (Summary, error) {
	if err := checkOffsets(leaf, c); err != nil {
		return Summary{}, err
	}
	if e.encode && e.dictionaryPaysBytes(c) {
		s, err := e.denseBytesDictPass(leaf, c)
		if err != errDictFull {
			return s, err
		}
	}
	return e.denseBytesPlainPass(leaf, c)
}

// checkOffsets validates the end offsets of a dense BYTE_ARRAY column (column.Column's
// byte form): each at least the one before (the first at least 0), the last one
// len(Bytes). A column appended through column.Column's methods always passes; the
// fields are exported, so a column built otherwise is refused here (naming the column
// and the first bad row) rather than written wrong or read out of range.
func checkOffsets(leaf *leafInfo, c *column.Column) error {
	var prev uint64
	for j, end := range c.Dense {
		if end < prev {
			return fmt.Errorf("column %s row %d: byte offset %d after %d; a dense BYTE_ARRAY column takes its values through column.Column.AppendBytes",
				strings.Join(leaf.path, "."), j, end, prev)
		}
		prev = end
	}
	if prev != uint64(len(c.Bytes)) {
		return fmt.Errorf("column %s: last byte offset %d, want the %d bytes held; a dense BYTE_ARRAY column takes its values through column.Column.AppendBytes",
			strings.Join(leaf.path, "."), prev, len(c.Bytes))
	}
	return nil
}

// dictionaryPaysBytes is dictionaryPays for a dense BYTE_ARRAY column (every row a
// non-null value): its first dictProbe values hold at most a quarter distinct values,
// told apart by hashBytes as the levelled probe does.
func (e *columnEncoder) dictionaryPaysBytes(c *column.Column) bool {
	e.probe.reset()
	n := min(len(c.Dense), dictProbe)
	var start uint64
	for _, end := range c.Dense[:n] {
		e.probe.index(hashBytes(c.Bytes[start:end]))
		start = end
		if len(e.probe.keys)*4 > dictProbe {
			return false
		}
	}
	return n > 0 && len(e.probe.keys)*4 <= n
}

// denseBytesPlainPass encodes (when e.encode) and summarises a validated dense BYTE_ARRAY
// column PLAIN (Parquet format, "Encodings", Plain: each value as its length, 4 bytes
// little-endian, then its bytes): no nulls, lo and hi the first of the minimum and
// maximum values in unsigned byte order.
func (e *columnEncoder) denseBytesPlainPass(leaf *leafInfo, c *column.Column) (Summary, error) {
	e.beginChunk(false, true)
	defer e.endChunk(false)
	offs, data := c.Dense, c.Bytes
	n := len(offs)
	s := Summary{HasBounds: true}
	loB, hiB := c.ValueBytes(0), c.ValueBytes(0)
	if !e.encode {
		var start uint64
		for j, end := range offs {
			b := data[start:end]
			start = end
			if bytes.Compare(b, loB) < 0 {
				s.Lo, loB = j, b
			} else if bytes.Compare(b, hiB) > 0 {
				s.Hi, hiB = j, b
			}
		}
		return s, nil
	}
	var base uint64 // byte offset of the page's first value
	for first := 0; first < n; {
		// the page's rows: the levelled pass cuts before row last once the page's
		// PLAIN bytes (4 + length per value) + its rows / 8 reach pageTargetBytes
		last := first + 1
		for last < n {
			k := last - first
			if 4*k+int(offs[last-1]-base)+k>>3 >= e.pageTarget {
				break
			}
			last++
		}
		buf := e.growVals(4*(last-first) + int(offs[last-1]-base))
		p, start := 0, base
		for j := first; j < last; j++ {
			end := offs[j]
			b := data[start:end]
			start = end
			binary.LittleEndian.PutUint32(buf[p:], uint32(len(b)))
			p += 4 + copy(buf[p+4:], b)
			if bytes.Compare(b, loB) < 0 {
				s.Lo, loB = j, b
			} else if bytes.Compare(b, hiB) > 0 {
				s.Hi, hiB = j, b
			}
		}
		if err := e.flushPage(leaf, last-first, 0); err != nil {
			return s, fmt.Errorf("column %s: %w", strings.Join(leaf.path, "."), err)
		}
		first, base = last, offs[last-1]
	}
	return s, nil
}

// denseBytesDictPass dictionary-encodes and summarises a validated dense BYTE_ARRAY
// column (errDictFull when the dictionary outgrows its bounds: the caller re-encodes
// PLAIN), with the levelled pass's entries (first-occurrence order), pages
// (pageRows(0, true) rows each) and bounds (the first of the minimum and maximum among
// the entries' first occurrences).
func (e *columnEncoder) denseBytesDictPass(leaf *leafInfo, c *column.Column) (Summary, error) {
	var s Summary
	e.beginChunk(true, true)
	defer e.endChunk(true)
	offs, data := c.Dense, c.Bytes
	per := pageRows(e.pageTarget, 0, true)
	// the previous value and its entry (the levelled pass's shortcut for a run of one
	// value longer than 8 bytes)
	var prevB []byte
	prevK := int32(-1)
	var start uint64
	for first := 0; first < len(offs); first += per {
		page := offs[first:min(first+per, len(offs))]
		for j, end := range page {
			b := data[start:end]
			start = end
			if len(b) > 8 && len(b) == len(prevB) && prevK >= 0 && bytes.Equal(b, prevB) {
				e.idx = append(e.idx, prevK)
				continue
			}
			k, err := e.dictIndexBytes(b, first+j)
			if err != nil {
				return s, err
			}
			prevB, prevK = b, k
			e.idx = append(e.idx, k)
		}
		if err := e.flushPage(leaf, len(page), 0); err != nil {
			return s, fmt.Errorf("column %s: %w", strings.Join(leaf.path, "."), err)
		}
	}
	// min and max over the distinct values; each entry stands for its first
	// occurrence, so the first of equal values wins as in the PLAIN pass
	for i, j := range e.dictFirst {
		if i == 0 {
			s.Lo, s.Hi, s.HasBounds = j, j, true
			continue
		}
		b := c.ValueBytes(j)
		if bytes.Compare(b, c.ValueBytes(s.Lo)) < 0 {
			s.Lo = j
		} else if bytes.Compare(b, c.ValueBytes(s.Hi)) > 0 {
			s.Hi = j
		}
	}
	if err := e.writeDictionary(); err != nil {
		return s, fmt.Errorf("column %s: %w", strings.Join(leaf.path, "."), err)
	}
	return s, nil
}

// dictIndexBytes returns the dictionary entry of the BYTE_ARRAY value b, adding it (its
// PLAIN bytes to the dictionary page) for its first occurrence, row or level entry j, or
// errDictFull when the entry would pass dictMaxEntries entries or dictMaxBytes bytes.
func (e *columnEncoder) dictIndexBytes(b []byte, j int) (int32, error) {
	h := hashBytes(b)
	if k := e.dict.find(e.dictVals, b, h); k >= 0 {
		return k, nil
	}
	if len(e.dictFirst) >= dictMaxEntries || len(e.dictVals)+4+len(b) > dictMaxBytes {
		return 0, errDictFull // the column is re-encoded PLAIN: the entry is never read
	}
	k := int32(len(e.dictFirst))
	e.dictFirst = append(e.dictFirst, j)
	e.dictVals = binary.LittleEndian.AppendUint32(e.dictVals, uint32(len(b)))
	e.dict.add(h, len(e.dictVals), len(b))
	e.dictVals = append(e.dictVals, b...)
	return k, nil
}
