package deltawriter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// ingestdCreatedBy starts the created_by of the files parquetenc writes, whose column chunk
// statistics CopyRowGroup trusts (parquetenc's package doc, "Layout").
const ingestdCreatedBy = "ingestd "

// CopyRowGroup copies the reader's next row group into w as its encoded column chunks,
// without decoding a page, when that gives the file WriteRowGroup would give the same rows
// (same values, the table's codec, exact statistics), and reports whether it did; when it
// did not, nothing was written and the reader's next row group is still to be read (Next).
// It copies when:
//
//   - the source file has no deletion vector;
//   - its leaves are the data file schema's (DataFileReader.Columnar);
//   - every chunk is compressed with the table's codec;
//   - the file was written by ingestd (parquetenc), whose chunk statistics are exact and
//     complete: a null count, and a minimum and maximum for every ordered leaf holding a
//     value, left out only for floats holding NaN or ±Inf (no bounds in add.stats either)
//     and byte arrays past parquetenc.MaxFooterBound bytes (such a row group is not
//     copied). The statistics of the copied row group are merged into the file's from
//     them; the null rows of arrays and maps are counted from the levels of their first
//     leaf, whose pages are read for it.
//
// Errors: reading the source file or writing the store's object (the writer then fails
// every later call).
func (w *DataFileWriter) CopyRowGroup(r *DataFileReader) (bool, error) {
	if w.done {
		return false, fmt.Errorf("write data file %s: closed", w.rel)
	}
	groups := r.f.RowGroups()
	if r.rg >= len(groups) || !r.columnar || r.add.DeletionVector != nil || r.del.Cardinality() > 0 {
		return false, nil
	}
	md := r.f.Metadata()
	if !strings.HasPrefix(md.CreatedBy, ingestdCreatedBy) || r.rg >= len(md.RowGroups) {
		return false, nil
	}
	rg := &md.RowGroups[r.rg]
	if len(rg.Columns) != len(w.acc) || rg.NumRows <= 0 {
		return false, nil
	}
	adds := make([]leafAcc, len(w.acc))
	for i, c := range rg.Columns {
		if c.MetaData.Codec != w.codec {
			return false, nil
		}
		a, ok := chunkStats(w.kinds[i], &c.MetaData)
		if !ok {
			return false, nil
		}
		adds[i] = a
	}
	// the null rows of arrays and maps: their leaves' rows by the definition level of
	// their first entry
	for i, k := range w.kinds {
		if !k.repeated {
			continue
		}
		defs, err := rowDefs(groups[r.rg].ColumnChunks()[i], k.maxDef)
		if err != nil {
			return false, fmt.Errorf("read data file %s column %d: %w", r.add.Path, i, err)
		}
		adds[i].rowDefs = defs
	}
	if err := w.pw.CopyRowGroup(r.ra, rg); err != nil {
		return false, fmt.Errorf("write data file %s: copy a row group of %s: %w", w.rel, r.add.Path, err)
	}
	for i := range adds {
		w.mergeAcc(i, &adds[i])
	}
	w.rows += rg.NumRows
	r.rg++
	r.row += uint64(rg.NumRows)
	return true, nil
}

// chunkStats reads the statistics of a column chunk parquetenc wrote; ok is false when
// they do not give the leaf's exact statistics.
func chunkStats(k leafKind, md *format.ColumnMetaData) (leafAcc, bool) {
	st := &md.Statistics
	a := leafAcc{nulls: int(st.NullCount)}
	if k.repeated || k.kind == parquet.Boolean || md.NumValues-st.NullCount <= 0 {
		return a, true // no bounds needed, or none to have
	}
	switch k.kind {
	case parquet.Float, parquet.Double:
		if st.MinValue == nil && st.MaxValue == nil { // NaN or ±Inf among the values
			a.nonFinite = true
			return a, true
		}
	case parquet.ByteArray:
		if st.MaxValue == nil { // a bound past MaxFooterBound bytes (or only empty values)
			return a, false
		}
	}
	lo, hi := plainBound(k, st.MinValue), plainBound(k, st.MaxValue)
	if lo.IsNull() || hi.IsNull() {
		return a, false
	}
	a.lo, a.hi, a.has = lo, hi, true
	return a, true
}

// plainBound decodes a PLAIN-encoded footer bound of leaf kind k (a null Value when it
// does not decode). A nil BYTE_ARRAY bound is the empty value.
func plainBound(k leafKind, b []byte) parquet.Value {
	switch k.kind {
	case parquet.Int32:
		if len(b) == 4 {
			return parquet.Int32Value(int32(binary.LittleEndian.Uint32(b)))
		}
	case parquet.Int64:
		if len(b) == 8 {
			return parquet.Int64Value(int64(binary.LittleEndian.Uint64(b)))
		}
	case parquet.Float:
		if len(b) == 4 {
			return parquet.FloatValue(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}
	case parquet.Double:
		if len(b) == 8 {
			return parquet.DoubleValue(math.Float64frombits(binary.LittleEndian.Uint64(b)))
		}
	case parquet.ByteArray:
		return parquet.ByteArrayValue(append([]byte{}, b...))
	case parquet.FixedLenByteArray:
		if len(b) > 0 {
			return parquet.FixedLenByteArrayValue(append([]byte{}, b...))
		}
	}
	return parquet.Value{}
}

// rowDefs counts the rows of a repeated leaf's chunk by the definition level of their
// first entry (repetition level 0).
func rowDefs(chunk parquet.ColumnChunk, maxDef int) ([]int, error) {
	out := make([]int, maxDef+1)
	pages := chunk.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		reps, defs := p.RepetitionLevels(), p.DefinitionLevels()
		for j, rep := range reps {
			if rep == 0 && j < len(defs) && int(defs[j]) <= maxDef {
				out[defs[j]]++
			}
		}
		parquet.Release(p)
	}
}

// mergeAcc folds one copied row group's statistics of leaf i into the file's.
func (w *DataFileWriter) mergeAcc(i int, b *leafAcc) { mergeLeafAcc(w.kinds[i], &w.acc[i], b) }

// mergeLeafAcc folds the statistics b of leaf kind k into a.
func mergeLeafAcc(k leafKind, a, b *leafAcc) {
	a.nulls += b.nulls
	a.nonFinite = a.nonFinite || b.nonFinite
	for d, n := range b.rowDefs {
		a.rowDefs[d] += n
	}
	if !b.has {
		return
	}
	if !a.has || compareBound(k, b.lo, a.lo) < 0 {
		a.lo = b.lo
	}
	if !a.has || compareBound(k, b.hi, a.hi) > 0 {
		a.hi = b.hi
	}
	a.has = true
}
