package deltawriter

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// ReadRowColumns reads the top-level columns named (logical names of the snapshot's
// schema) of the rows at the given 0-based positions of the data file of add, a live
// file of this snapshot: an upsert table's stored row of a key (its file and position
// from the key index) whose current values a change needs (a column Debezium could not
// send keeps the stored value; docs/keyed-tables.md, Unavailable values).
//
// Only the named columns' chunks are read, and through ranged reads when the store
// serves them (storage.RangeGetter: the blocks of storage.ReadBlockSize holding them),
// so a wide file with large values costs the bytes of those columns' pages up to each
// row. The result maps each position to its row as ReadDataFile gives it (keyed by
// physical column names, conformed to the current schema: a column the file lacks is
// nil); positions may repeat and need not be sorted. The deletion vector is not read:
// the caller names live rows.
//
// Errors: a name the schema lacks, a position at or beyond the file's rows, or an error
// reading the file.
func (s *Snapshot) ReadRowColumns(ctx context.Context, st storage.Store, add deltalog.Add, rows []uint64, columns []string) (map[uint64]map[string]any, error) {
	f, _, err := openParquet(ctx, st, add, 0)
	if err != nil {
		return nil, err
	}
	fileFields := map[string]parquet.Field{}
	for _, fld := range f.Schema().Fields() {
		fileFields[fld.Name()] = fld
	}
	group := parquet.Group{}
	for _, name := range columns {
		sf := s.Schema.Field(name)
		if sf == nil {
			return nil, fmt.Errorf("read rows of %s: the table has no column %s", add.Path, name)
		}
		if fld, ok := fileFields[physicalName(sf, s.ColumnMapping)]; ok {
			group[fld.Name()] = fld
		}
	}
	want := slices.Clone(rows)
	slices.Sort(want)
	want = slices.Compact(want)
	out := make(map[uint64]map[string]any, len(want))
	if len(group) == 0 { // none of the columns is in the file: all nil
		for _, r := range want {
			out[r] = map[string]any{}
		}
		return out, nil
	}
	proj := parquet.NewSchema("projection", group)
	conv, err := parquet.Convert(proj, f.Schema())
	if err != nil {
		return nil, fmt.Errorf("read rows of %s: %w", add.Path, err)
	}
	fields, leaves := proj.Fields(), len(proj.Columns())
	buf := make([]parquet.Row, 64)
	var start uint64
	for _, rg := range f.RowGroups() {
		n := uint64(rg.NumRows())
		if len(want) == 0 {
			break
		}
		if want[0] >= start+n {
			start += n
			continue
		}
		if err := s.readRowGroupRows(parquet.ConvertRowGroup(rg, conv), start, n, &want, buf, func(row uint64, r parquet.Row) error {
			conformed, err := s.conformRow(assembleRowFields(fields, leaves, r), fileFields)
			out[row] = conformed
			return err
		}); err != nil {
			return nil, fmt.Errorf("read data file %s: %w", add.Path, err)
		}
		start += n
	}
	if len(want) > 0 {
		return nil, fmt.Errorf("read rows of %s: row %d is beyond the file's %d rows", add.Path, want[0], start)
	}
	return out, nil
}

// readRowGroupRows calls fn with the rows of rg (whose first row is file row start, n
// rows) that *want (sorted, distinct file rows) names, taking them off *want. Without an
// offset index a seek decodes the chunk from its start, so it seeks once, to the first
// row wanted, and reads on from there: one pass over the pages up to the last row
// wanted.
func (s *Snapshot) readRowGroupRows(rg parquet.RowGroup, start, n uint64, want *[]uint64, buf []parquet.Row, fn func(row uint64, r parquet.Row) error) (err error) {
	rr := rg.Rows()
	defer func() {
		if cerr := rr.Close(); err == nil {
			err = cerr
		}
	}()
	cur := (*want)[0]
	if err := rr.SeekToRow(int64(cur - start)); err != nil {
		return fmt.Errorf("row %d: %w", cur, err)
	}
	for len(*want) > 0 && (*want)[0] < start+n {
		row := (*want)[0]
		// rows up to the next one wanted, that one included
		k, rerr := rr.ReadRows(buf[:min(uint64(len(buf)), row-cur+1)])
		for i := range k {
			if cur+uint64(i) == row {
				if err := fn(row, buf[i]); err != nil {
					return fmt.Errorf("row %d: %w", row, err)
				}
				*want = (*want)[1:]
			}
		}
		cur += uint64(k)
		if k == 0 || rerr != nil && rerr != io.EOF {
			if rerr == nil || rerr == io.EOF {
				rerr = io.ErrUnexpectedEOF
			}
			if cur <= row {
				return fmt.Errorf("row %d: %w", row, rerr)
			}
		}
	}
	return nil
}
