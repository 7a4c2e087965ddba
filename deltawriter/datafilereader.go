package deltawriter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// DataFileReader reads a data file of the table one row group at a time into column
// buffers of the snapshot's data file schema (DataFileSchema), for table maintenance
// (OPTIMIZE). Rows its deletion vector deletes are dropped (PROTOCOL.md, "Deletion
// Vectors").
//
// A file whose Parquet leaves are the data file schema's (same paths, physical types,
// logical types and levels: the files ingestd writes, and most files other engines
// write into a table whose schema never changed) is read column by column: each column
// chunk's pages are decoded straight into the column's buffer, with no row assembled. Any
// other file (older schemas: added or dropped columns, widened types, names before column
// mapping, INT96 or millisecond timestamps) is read row by row through ReadDataFile's
// conformance and shredded back into levelled columns, one row group at a time.
//
// Memory: one row group of the file, decoded (appended to the caller's columns; a row
// group with deleted rows, or read row by row, passes through the reader's own buffers
// first), and the object: whole when it is at most storage.ReadBlockSize ×
// storage.ReadBlocks bytes (8 MiB) or the store cannot read ranges, else at most that
// many bytes of it at a time.
// Not safe for concurrent use.
type DataFileReader struct {
	s        *Snapshot
	add      deltalog.Add
	pq       *parquet.Schema
	leaves   []column.Leaf
	f        *parquet.File
	ra       io.ReaderAt
	del      *DeletedRows
	rg       int
	row      uint64 // file rows passed (live and deleted)
	columnar bool
	byName   map[string]parquet.Field
	vals     []parquet.Value
	keep     []bool
	scratch  []column.Column // a row group to filter or conform before it is appended
}

// OpenDataFile opens the data file of add for reading into columns of pq (this
// snapshot's DataFileSchema), reading its deletion vector first.
//
// Errors: the file or its deletion vector cannot be read, or is not a Parquet file.
func (s *Snapshot) OpenDataFile(ctx context.Context, st storage.Store, add deltalog.Add, pq *parquet.Schema) (*DataFileReader, error) {
	del, err := ReadDeletionVector(ctx, st, add.DeletionVector)
	if err != nil {
		return nil, fmt.Errorf("read data file %s: %w", add.Path, err)
	}
	// a file that fits the range reader's blocks is read whole: one request, no copy
	// through blocks
	f, ra, err := openParquet(ctx, st, add, storage.ReadBlockSize*storage.ReadBlocks)
	if err != nil {
		return nil, err
	}
	r := &DataFileReader{s: s, add: add, pq: pq, leaves: column.Leaves(pq), f: f, ra: ra, del: del}
	r.columnar = sameLeaves(f.Schema(), pq)
	if !r.columnar {
		r.byName = map[string]parquet.Field{}
		for _, fld := range f.Schema().Fields() {
			r.byName[fld.Name()] = fld
		}
	}
	return r, nil
}

// openParquet opens the data file of add: through ranged reads when the store can read
// ranges (storage.RangeGetter) and add.size is above whole bytes, else read whole.
// Errors: the store's, or the object is not a Parquet file.
func openParquet(ctx context.Context, st storage.Store, add deltalog.Add, whole int64) (*parquet.File, io.ReaderAt, error) {
	rel := deltalog.CanonicalPath(add.Path)
	var ra io.ReaderAt
	size := add.Size
	if rg, ok := st.(storage.RangeGetter); ok && size > whole {
		ra = storage.NewObjectReader(ctx, rg, rel, size)
	} else {
		data, err := st.Get(ctx, rel)
		if err != nil {
			return nil, nil, fmt.Errorf("read data file %s: %w", add.Path, err)
		}
		ra, size = bytes.NewReader(data), int64(len(data))
	}
	f, err := parquet.OpenFile(ra, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, nil, fmt.Errorf("read data file %s: %w", add.Path, err)
	}
	return f, ra, nil
}

// sameLeaves reports whether file's leaf columns are want's: the same paths in the same
// order, physical and logical types, and repetition and definition levels.
func sameLeaves(file, want *parquet.Schema) bool {
	fc, wc := file.Columns(), want.Columns()
	if len(fc) != len(wc) {
		return false
	}
	for i := range fc {
		if !slices.Equal(fc[i], wc[i]) {
			return false
		}
		a, _ := file.Lookup(fc[i]...)
		b, _ := want.Lookup(wc[i]...)
		if a.MaxRepetitionLevel != b.MaxRepetitionLevel || a.MaxDefinitionLevel != b.MaxDefinitionLevel {
			return false
		}
		at, bt := a.Node.Type(), b.Node.Type()
		if at.Kind() != bt.Kind() || at.Length() != bt.Length() || !reflect.DeepEqual(at.LogicalType(), bt.LogicalType()) {
			return false
		}
	}
	return true
}

// Columnar reports whether the file is read column by column (its leaves are the data
// file schema's) rather than row by row.
func (r *DataFileReader) Columnar() bool { return r.columnar }

// NextRowGroupBytes is the compressed size in bytes of the column chunks of the row group
// Next or DataFileWriter.CopyRowGroup reads next, 0 after the last.
func (r *DataFileReader) NextRowGroupBytes() int64 {
	md := r.f.Metadata()
	if r.rg >= len(md.RowGroups) {
		return 0
	}
	var n int64
	for _, c := range md.RowGroups[r.rg].Columns {
		n += c.MetaData.TotalCompressedSize
	}
	return n
}

// RowsRead is the file rows passed so far, live and deleted.
func (r *DataFileReader) RowsRead() int64 { return int64(r.row) }

// AppendRowGroup appends the next row group's live rows to cols (one per leaf of the data
// file schema, each Reset to its leaf or holding rows of it already) and returns their
// number: 0 for a row group whose rows are all deleted, and 0 with io.EOF after the last
// row group. Values appended never alias the file's pages nor the reader's buffers.
//
// Errors: a page or row that cannot be read or conformed.
func (r *DataFileReader) AppendRowGroup(cols []column.Column) (int, error) {
	return r.appendRowGroup(cols, nil)
}

// appendRowGroup is AppendRowGroup leaving out the leaves skip marks (nil: none): their
// columns are not read; only for a row group read column by column with no deleted row.
func (r *DataFileReader) appendRowGroup(cols []column.Column, skip []bool) (int, error) {
	if len(cols) != len(r.leaves) {
		return 0, fmt.Errorf("read data file %s: %d columns for %d leaves", r.add.Path, len(cols), len(r.leaves))
	}
	groups := r.f.RowGroups()
	if r.rg >= len(groups) {
		return 0, io.EOF
	}
	rg := groups[r.rg]
	r.rg++
	first, n := r.row, rg.NumRows()
	r.row += uint64(n)
	dropped := 0
	if r.del.Cardinality() > 0 {
		r.keep = slices.Grow(r.keep[:0], int(n))[:n]
		for j := range r.keep {
			r.keep[j] = !r.del.Contains(first + uint64(j))
			if !r.keep[j] {
				dropped++
			}
		}
	}
	if r.columnar && dropped == 0 { // straight into the caller's columns
		for i, chunk := range rg.ColumnChunks() {
			if skip != nil && skip[i] {
				continue
			}
			if err := r.readChunk(chunk, &cols[i], r.leaves[i].Index); err != nil {
				return 0, fmt.Errorf("read data file %s column %d: %w", r.add.Path, i, err)
			}
		}
		return int(n), nil
	}
	if skip != nil {
		return 0, fmt.Errorf("read data file %s: a row group with deleted rows or other leaves cannot leave columns out", r.add.Path)
	}
	if r.scratch == nil {
		r.scratch = make([]column.Column, len(r.leaves))
	}
	for i := range r.scratch {
		r.scratch[i].Reset(r.leaves[i])
	}
	live := int(n) - dropped
	if r.columnar {
		for i, chunk := range rg.ColumnChunks() {
			if err := r.readChunk(chunk, &r.scratch[i], r.leaves[i].Index); err != nil {
				return 0, fmt.Errorf("read data file %s column %d: %w", r.add.Path, i, err)
			}
			r.scratch[i].KeepRows(r.keep)
		}
	} else {
		var err error
		if live, err = r.readRows(rg, first, r.scratch); err != nil {
			return 0, err
		}
	}
	if live == 0 {
		return 0, nil
	}
	for i := range cols {
		cols[i].AppendFrom(&r.scratch[i], 0, r.leaves[i].Index)
	}
	return live, nil
}

// readChunk appends the values of one column chunk to c, as leaf column index.
func (r *DataFileReader) readChunk(chunk parquet.ColumnChunk, c *column.Column, index int) error {
	pages := chunk.Pages()
	defer pages.Close()
	if r.vals == nil {
		r.vals = make([]parquet.Value, 4096)
	}
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		vr := p.Values()
		for {
			n, err := vr.ReadValues(r.vals)
			for _, v := range r.vals[:n] {
				c.AppendCopy(v.Level(int(v.RepetitionLevel()), int(v.DefinitionLevel()), index))
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				parquet.Release(p)
				return err
			}
		}
		parquet.Release(p)
	}
}

// readRows reads a row group whose leaves differ from the data file schema row by row,
// conformed to the snapshot's schema as ReadDataFile does, into levelled columns.
func (r *DataFileReader) readRows(rg parquet.RowGroup, first uint64, cols []column.Column) (int, error) {
	fields, leaves := r.f.Schema().Fields(), len(r.f.Schema().Columns())
	var live []map[string]any
	rows := rg.Rows()
	defer rows.Close()
	buf := make([]parquet.Row, 256)
	idx := first
	for {
		n, rerr := rows.ReadRows(buf)
		for _, row := range buf[:n] {
			i := idx
			idx++
			if r.del.Contains(i) {
				continue
			}
			out, err := r.s.conformRow(assembleRowFields(fields, leaves, row), r.byName)
			if err != nil {
				return 0, fmt.Errorf("read data file %s row %d: %w", r.add.Path, i, err)
			}
			live = append(live, out)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return 0, fmt.Errorf("read data file %s: %w", r.add.Path, rerr)
		}
	}
	if len(live) == 0 {
		return 0, nil
	}
	vals, err := shredRows(r.pq, live)
	if err != nil {
		return 0, fmt.Errorf("read data file %s: %w", r.add.Path, err)
	}
	for i := range cols {
		cols[i] = column.Levelled(vals[i])
	}
	return len(live), nil
}
