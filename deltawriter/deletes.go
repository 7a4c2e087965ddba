package deltawriter

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// This file decides whether ingestd may delete rows of a table's existing files, and
// deletes them by rewriting a file (copy-on-write); dvwrite.go deletes them with deletion
// vectors (merge-on-read).

// DeleteMode is how rows of existing data files are deleted.
type DeleteMode int

const (
	// DeleteWithDeletionVectors marks the rows in deletion vectors (DeleteRows): cheap to
	// write, read by readers that support the deletionVectors table feature.
	DeleteWithDeletionVectors DeleteMode = iota
	// DeleteByRewrite rewrites each affected file without the rows (RewriteWithoutRows):
	// every Delta reader reads the result.
	DeleteByRewrite
)

func (m DeleteMode) String() string {
	if m == DeleteByRewrite {
		return "copy-on-write"
	}
	return "deletion vectors"
}

// ErrDeletesRefused is wrapped by CheckDeletes when a table's properties forbid ingestd
// to delete rows the way asked.
var ErrDeletesRefused = errors.New("the table does not allow ingestd to delete rows")

// CheckDeletes reports whether ingestd may delete rows of this table's files in mode,
// and, for DeleteWithDeletionVectors, whether the commit must first turn deletion vectors
// on (enable true: pass deltalog.FeatureDeletionVectors in SchemaChange.Enable, whose
// protocol and metaData go into that commit or an earlier one). A table that does not
// exist yet (Version -1) needs enable for deletion vectors and nothing for rewrites.
//
// Refused, with an error wrapping ErrDeletesRefused that names the property:
//   - delta.appendOnly=true: the table accepts appends only (Delta refuses UPDATE and
//     DELETE on it; PROTOCOL.md "Append-only Tables");
//   - delta.enableChangeDataFeed=true: ingestd writes no change data files, so a change
//     data feed reader would miss the rows replaced or deleted (PROTOCOL.md "Add CDC
//     File": only inserts may be read from add actions);
//   - for deletion vectors, delta.enableDeletionVectors=false set explicitly: writers
//     must not write new deletion vectors then (PROTOCOL.md "Deletion Vectors"), and
//     ingestd does not override the table owner's choice: set it to true, or delete by
//     rewriting files.
//
// The deletionVectors feature is otherwise added when missing: every protocol ingestd
// writes can be upgraded to reader 3 / writer 7 (UpgradeProtocol), which readers without
// deletion vector support then refuse to read. A table ingestd cannot write at all gives
// CheckWritable's error.
func (s *Snapshot) CheckDeletes(mode DeleteMode) (enable bool, err error) {
	if s.Version < 0 {
		return mode == DeleteWithDeletionVectors, nil
	}
	if err := s.CheckWritable(); err != nil {
		return false, err
	}
	conf := s.Metadata.Configuration
	if isTrue(conf[deltalog.PropAppendOnly]) {
		return false, fmt.Errorf("check deletes: table property %s=true: the table accepts appends only: %w", deltalog.PropAppendOnly, ErrDeletesRefused)
	}
	if isTrue(conf[deltalog.PropEnableChangeDataFeed]) {
		return false, fmt.Errorf("check deletes: table property %s=true: ingestd writes no change data files, so the change data feed would miss replaced and deleted rows; "+
			"set it to false or write in append mode: %w", deltalog.PropEnableChangeDataFeed, ErrDeletesRefused)
	}
	if mode != DeleteWithDeletionVectors {
		return false, nil
	}
	v, set := conf[deltalog.PropEnableDeletionVectors]
	if set && strings.EqualFold(strings.TrimSpace(v), "false") {
		return false, fmt.Errorf("check deletes: table property %s=false: Delta writers must not write new deletion vectors; "+
			"set it to true or delete by rewriting files (copy-on-write): %w", deltalog.PropEnableDeletionVectors, ErrDeletesRefused)
	}
	return !s.DeletionVectorsEnabled(), nil
}

// DeletionVectorsEnabled reports whether DeleteRows may write deletion vectors to this
// table as it is: its protocol has the deletionVectors reader and writer feature and
// delta.enableDeletionVectors is true (PROTOCOL.md, "Deletion Vectors").
func (s *Snapshot) DeletionVectorsEnabled() bool {
	return dvEnabled(s.Protocol, s.Metadata)
}

func dvEnabled(p deltalog.Protocol, m deltalog.Metadata) bool {
	return protocolSupports(p, deltalog.FeatureDeletionVectors) && isTrue(m.Configuration[deltalog.PropEnableDeletionVectors])
}

func isTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// fileOptionsBeside are the snapshot's FileOptions for a file written in place of rows of
// add: add's partitionValues, and its directory (the partition directory) when add's path
// is relative to the table root.
func (s *Snapshot) fileOptionsBeside(add deltalog.Add) FileOptions {
	opts := s.FileOptions()
	opts.PartitionValues = add.PartitionValues
	if d := path.Dir(deltalog.CanonicalPath(add.Path)); d != "." && !strings.HasPrefix(d, "/") && !strings.Contains(d, "://") {
		opts.Dir = d
	}
	return opts
}

// RewriteWithoutRows rewrites the data file of add, a live file of this snapshot,
// without the rows at the given 0-based positions of the physical file and without the
// rows its current deletion vector deletes (copy-on-write; PROTOCOL.md "Add File and
// Remove File"). It returns the remove of add (dataChange true, deletionTimestamp now,
// extendedFileMetadata true with its partitionValues, size, stats, tags and deletion
// vector) and the add of the new file (dataChange true, fresh stats, no deletion vector,
// the same partition values and directory), or a nil add when no row remains (nothing is
// written then). Rows may repeat or be deleted already.
//
// The file is read as OPTIMIZE reads it (ReadDataFile: conformed to the snapshot's
// schema, column mapping and widened types) and written with the snapshot's FileOptions
// (WriteDataFile): the new file holds the remaining rows in their order. The whole file
// is held in memory while it is rewritten. The new file becomes part of the table only
// through the commit carrying the two actions.
//
// Errors: a row at or beyond the file's number of rows (nothing is written), or an error
// reading the file or its deletion vector or writing the new one.
func (s *Snapshot) RewriteWithoutRows(ctx context.Context, st storage.Store, add deltalog.Add, rows []uint64, now time.Time) (deltalog.Remove, *deltalog.Add, error) {
	cur, err := ReadDeletionVector(ctx, st, add.DeletionVector)
	if err != nil {
		return deltalog.Remove{}, nil, fmt.Errorf("rewrite %s: %w", add.Path, err)
	}
	bm := roaring64.New()
	if cur != nil {
		bm = cur.bm.Clone()
	}
	bm.AddMany(rows)
	pq, err := s.DataFileSchema()
	if err != nil {
		return deltalog.Remove{}, nil, fmt.Errorf("rewrite %s: %w", add.Path, err)
	}
	var kept []map[string]any
	total, err := s.readDataFile(ctx, st, add, &DeletedRows{bm: bm}, func(r map[string]any) error {
		kept = append(kept, r)
		return nil
	})
	if err != nil {
		return deltalog.Remove{}, nil, fmt.Errorf("rewrite: %w", err)
	}
	if !bm.IsEmpty() && bm.Maximum() >= uint64(total) {
		return deltalog.Remove{}, nil, fmt.Errorf("rewrite %s: row %d is beyond the file's %d rows", add.Path, bm.Maximum(), total)
	}
	nowMs := now.UnixMilli()
	size := add.Size
	rm := deltalog.Remove{
		Path: add.Path, DeletionTimestamp: &nowMs, DataChange: true, ExtendedFileMetadata: ptrTo(true),
		PartitionValues: add.PartitionValues, Size: &size, Stats: add.Stats, Tags: add.Tags,
		DeletionVector: add.DeletionVector, BaseRowID: add.BaseRowID, DefaultRowCommitVersion: add.DefaultRowCommitVersion,
	}
	if len(kept) == 0 {
		return rm, nil, nil
	}
	cols, err := RowsToColumns(pq, kept)
	if err != nil {
		return deltalog.Remove{}, nil, fmt.Errorf("rewrite %s: %w", add.Path, err)
	}
	na, err := WriteDataFile(ctx, st, pq, cols, len(kept), s.fileOptionsBeside(add))
	if err != nil {
		return deltalog.Remove{}, nil, fmt.Errorf("rewrite %s: %w", add.Path, err)
	}
	return rm, &na, nil
}

// CopyRows writes a new data file holding copies of the rows at the given 0-based
// positions of the data file of add, a live file of this snapshot, each with the
// top-level columns edit returns (by logical name, values as RowsToColumns takes them:
// bool, int64, string, …) set: an upsert table's soft delete keeps a deleted key's stored
// row, flagged, while the commit marks the original (DeleteRows or RewriteWithoutRows).
// The file is read as RewriteWithoutRows reads it (conformed to the snapshot's schema) and
// the copies are written with the snapshot's FileOptions in add's partition (its
// partitionValues and directory), in file order; add itself is not changed. The new file
// becomes part of the table only through the commit carrying its add.
//
// Errors: a position at or beyond the file's rows or deleted by its deletion vector, a
// column edit names that the snapshot's schema lacks, or an error reading the file or
// writing the new one.
func (s *Snapshot) CopyRows(ctx context.Context, st storage.Store, add deltalog.Add, rows []uint64, edit func(row uint64) map[string]any) (deltalog.Add, error) {
	cur, err := ReadDeletionVector(ctx, st, add.DeletionVector)
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("copy rows of %s: %w", add.Path, err)
	}
	n, err := numRecords(ctx, st, add)
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("copy rows of %s: %w", add.Path, err)
	}
	want := roaring64.New()
	want.AddMany(rows)
	if !want.IsEmpty() && want.Maximum() >= uint64(n) {
		return deltalog.Add{}, fmt.Errorf("copy rows of %s: row %d is beyond the file's %d rows", add.Path, want.Maximum(), n)
	}
	if cur != nil && roaring64.And(want, cur.bm).GetCardinality() > 0 {
		return deltalog.Add{}, fmt.Errorf("copy rows of %s: a row to copy is deleted by the file's deletion vector", add.Path)
	}
	skip := roaring64.New() // every row but those to copy
	skip.AddRange(0, uint64(n))
	skip.AndNot(want)
	pq, err := s.DataFileSchema()
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("copy rows of %s: %w", add.Path, err)
	}
	order := want.ToArray() // the rows in file order, as readDataFile calls back
	var copies []map[string]any
	if _, err := s.readDataFile(ctx, st, add, &DeletedRows{bm: skip}, func(r map[string]any) error {
		if len(copies) == len(order) {
			return errors.New("the file holds more rows than its row count")
		}
		pos := order[len(copies)]
		for name, v := range edit(pos) {
			f := s.Schema.Field(name)
			if f == nil {
				return fmt.Errorf("set column %s of row %d: the table has no such column", name, pos)
			}
			r[physicalName(f, s.ColumnMapping)] = v
		}
		copies = append(copies, r)
		return nil
	}); err != nil {
		return deltalog.Add{}, fmt.Errorf("copy rows: %w", err)
	}
	if len(copies) != len(order) {
		return deltalog.Add{}, fmt.Errorf("copy rows of %s: read %d of the %d rows to copy", add.Path, len(copies), len(order))
	}
	cols, err := RowsToColumns(pq, copies)
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("copy rows of %s: %w", add.Path, err)
	}
	na, err := WriteDataFile(ctx, st, pq, cols, len(copies), s.fileOptionsBeside(add))
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("copy rows of %s: %w", add.Path, err)
	}
	return na, nil
}
