package deltawriter

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
)

// The classic checkpoint writer's former column path, kept as the reference the
// checkpoint writer is checked and measured against (TestCheckpointSameAsValuePath,
// BenchmarkCheckpointEncode): the same rows built as one []parquet.Value per leaf
// column of checkpointSchema with their repetition and definition levels (Dremel), the
// rows of the other actions written as null runs, then written by parquet-go's column
// writers (DataPage V1, SNAPPY, page statistics and page index).

// checkpointColumns is the content of one classic checkpoint: the leaf columns and the
// figures _last_checkpoint reports.
//
// cols[i] holds only the values of the rows of column i's own action; the rows of the
// other actions are null there and are written from nulls (see encodeCheckpoint).
type checkpointColumns struct {
	cols     [][]parquet.Value
	sections []cpSection // the actions, in row order
	nulls    []parquet.Value
	rows     int // actions (rows)
	numAdds  int

	yield func() // called every yieldRows rows when not nil
	since int    // rows since the last yield
}

// cpSection is a run of rows of one action, whose values are in cols[first:end].
type cpSection struct{ rows, first, end int }

// nullRun returns n values that make n rows null in any column: definition level 0,
// repetition level 0 (parquet-go's column writers do not read a value's column index).
func (b *checkpointColumns) nullRun(n int) []parquet.Value {
	if len(b.nulls) < n {
		b.nulls = slices.Repeat([]parquet.Value{parquet.NullValue().Level(0, 0, 0)}, n)
	}
	return b.nulls[:n]
}

// row counts one built row and yields every yieldRows rows.
func (b *checkpointColumns) row() {
	if b.yield == nil {
		return
	}
	if b.since++; b.since >= yieldRows {
		b.since = 0
		b.yield()
	}
}

// buildCheckpointColumns returns the leaf columns of the whole classic checkpoint of s
// in one chunk (cpSource.fill without a row limit); reuse, when not nil, lends its column
// slices' storage, and yield is called every yieldRows rows when not nil.
func buildCheckpointColumns(s *Snapshot, now time.Time, reuse *checkpointColumns, yield func()) (*checkpointColumns, error) {
	src, err := newCPSource(s, now)
	if err != nil {
		return nil, err
	}
	defer src.close()
	b := reuse
	if b == nil {
		b = &checkpointColumns{}
	}
	src.fillValues(b, math.MaxInt, yield)
	return b, nil
}

// fillValues builds the next rows, at most max of them, into b (its previous values dropped)
// and returns how many. yield, when not nil, is called every yieldRows rows.
func (src *cpSource) fillValues(b *checkpointColumns, max int, yield func()) int {
	c := cpClassic.c
	s := src.s
	n := len(checkpointSchema.Columns())
	if len(b.cols) != n {
		b.cols = make([][]parquet.Value, n)
	}
	for i := range b.cols {
		clear(b.cols[i])
		b.cols[i] = b.cols[i][:0]
	}
	b.sections = b.sections[:0]
	b.rows, b.numAdds = src.rows, src.numAdds
	b.yield, b.since = yield, 0
	built := 0
	// Each action fills its own columns for its rows; the other columns are null there.
	open := func(kind string) *cpSection {
		r := c.kinds[kind]
		if k := len(b.sections); k == 0 || b.sections[k-1].first != r[0] {
			b.sections = append(b.sections, cpSection{first: r[0], end: r[1]})
		}
		return &b.sections[len(b.sections)-1]
	}
	for built < max && src.stage != cpStageDone {
		switch src.stage {
		case cpStageProtocol:
			open("protocol").rows++
			p := &s.Protocol
			b.i32(c.protoMinReader, int32(p.MinReaderVersion))
			b.i32(c.protoMinWriter, int32(p.MinWriterVersion))
			b.strList(c.protoReaderFeat, p.ReaderFeatures, p.MinReaderVersion >= 3)
			b.strList(c.protoWriterFeat, p.WriterFeatures, p.MinWriterVersion >= 7)
			src.stage++
		case cpStageMetadata:
			open("metaData").rows++
			m := &s.Metadata
			b.str(c.mdID, m.ID)
			b.optStr(c.mdName, m.Name)
			b.optStr(c.mdDescription, m.Description)
			b.str(c.mdFormatProvider, m.Format.Provider)
			b.strMap(c.mdFormatOptions, m.Format.Options, true)
			b.str(c.mdSchemaString, m.SchemaString)
			b.strList(c.mdPartitionColumns, m.PartitionColumns, true)
			b.strMap(c.mdConfiguration, m.Configuration, true)
			b.optI64(c.mdCreatedTime, m.CreatedTime)
			src.stage++
		case cpStageTxn:
			if src.i >= len(src.txnIDs) {
				src.stage, src.i = src.stage+1, 0
				continue
			}
			open("txn").rows++
			t := s.txns[src.txnIDs[src.i]]
			src.i++
			b.str(c.txnAppID, t.AppID)
			b.i64(c.txnVersion, t.Version)
			b.optI64(c.txnLastUpdated, t.LastUpdated)
		case cpStageDomain:
			if src.i >= len(src.domains) {
				src.stage, src.i = src.stage+1, 0
				continue
			}
			open("domainMetadata").rows++
			dm := s.domains[src.domains[src.i]]
			src.i++
			b.str(c.domDomain, dm.Domain)
			b.str(c.domConfig, dm.Configuration)
			b.boolean(c.domRemoved, false)
		case cpStageAdd:
			_, a, ok := src.next()
			if !ok {
				src.stage, src.i = src.stage+1, 0
				continue
			}
			open("add").rows++
			b.str(c.addPath, a.Path)
			b.partitionValues(c.addPartitionValues, a.PartitionValues, true) // {} when none
			b.i64(c.addSize, a.Size)
			b.i64(c.addModificationTime, a.ModificationTime)
			b.boolean(c.addDataChange, a.DataChange)
			b.strMap(c.addTags, a.Tags, a.Tags != nil)
			b.dv(c.addDV, a.DeletionVector)
			b.optI64(c.addBaseRowID, a.BaseRowID)
			b.optI64(c.addDefaultRowCommitVersion, a.DefaultRowCommitVersion)
			b.optStr(c.addStats, a.Stats)
		case cpStageRemove:
			if src.i >= len(src.removeKeys) {
				src.stage, src.i = src.stage+1, 0
				continue
			}
			open("remove").rows++
			r, _ := s.tombstones.get(src.removeKeys[src.i])
			src.i++
			b.str(c.removePath, r.Path)
			b.optI64(c.removeDeletionTimestamp, r.DeletionTimestamp)
			b.boolean(c.removeDataChange, r.DataChange)
			if r.ExtendedFileMetadata != nil {
				b.boolean(c.removeExtendedFileMetadata, *r.ExtendedFileMetadata)
			} else {
				b.null(c.removeExtendedFileMetadata)
			}
			b.partitionValues(c.removePartitionValues, r.PartitionValues, r.PartitionValues != nil)
			b.optI64(c.removeSize, r.Size)
			b.dv(c.removeDV, r.DeletionVector)
			b.optI64(c.removeBaseRowID, r.BaseRowID)
			b.optI64(c.removeDefaultRowCommitVersion, r.DefaultRowCommitVersion)
		}
		built++
		b.row()
	}
	return built
}

func (b *checkpointColumns) put(l cpLeaf, rep, def int, v parquet.Value) {
	b.cols[l.col] = append(b.cols[l.col], v.Level(rep, def, l.col))
}

// null appends a null leaf whose parent is defined.
func (b *checkpointColumns) null(l cpLeaf) { b.put(l, 0, l.def-1, parquet.NullValue()) }

func (b *checkpointColumns) str(l cpLeaf, s string) { b.put(l, 0, l.def, stringValue(s)) }

// optStr writes "" as null (optional string fields that JSON omits when empty).
func (b *checkpointColumns) optStr(l cpLeaf, s string) {
	if s == "" {
		b.null(l)
		return
	}
	b.str(l, s)
}

func (b *checkpointColumns) i32(l cpLeaf, x int32)    { b.put(l, 0, l.def, parquet.Int32Value(x)) }
func (b *checkpointColumns) i64(l cpLeaf, x int64)    { b.put(l, 0, l.def, parquet.Int64Value(x)) }
func (b *checkpointColumns) boolean(l cpLeaf, x bool) { b.put(l, 0, l.def, parquet.BooleanValue(x)) }

func (b *checkpointColumns) optI64(l cpLeaf, x *int64) {
	if x == nil {
		b.null(l)
		return
	}
	b.i64(l, *x)
}

// strList writes a LIST<string>: null when !present, else its elements (an empty list
// when there are none).
func (b *checkpointColumns) strList(l cpList, xs []string, present bool) {
	e := l.elem
	switch {
	case !present:
		b.put(e, 0, e.def-3, parquet.NullValue())
	case len(xs) == 0:
		b.put(e, 0, e.def-2, parquet.NullValue())
	default:
		for i, x := range xs {
			b.put(e, repAt(i, e.rep), e.def, stringValue(x))
		}
	}
}

// strMap writes a MAP<string,string> in key order: null when !present, else its entries
// (an empty map when there are none).
func (b *checkpointColumns) strMap(m cpMap, kv map[string]string, present bool) {
	if !b.mapHead(m, len(kv), present) {
		return
	}
	for i, k := range sortedKeys(kv) {
		b.put(m.key, repAt(i, m.key.rep), m.key.def, stringValue(k))
		b.put(m.value, repAt(i, m.value.rep), m.value.def, stringValue(kv[k]))
	}
}

// partitionValues writes a MAP<string,string> whose nil values are null, in key order.
func (b *checkpointColumns) partitionValues(m cpMap, pv map[string]*string, present bool) {
	if !b.mapHead(m, len(pv), present) {
		return
	}
	for i, k := range sortedKeys(pv) {
		r := repAt(i, m.key.rep)
		b.put(m.key, r, m.key.def, stringValue(k))
		if v := pv[k]; v != nil {
			b.put(m.value, r, m.value.def, stringValue(*v))
		} else {
			b.put(m.value, r, m.value.def-1, parquet.NullValue())
		}
	}
}

// mapHead writes a null or empty map and reports whether entries remain to be written.
func (b *checkpointColumns) mapHead(m cpMap, n int, present bool) bool {
	def := m.key.def - 1 // the map is defined, with no entry
	if !present {
		def--
	}
	if !present || n == 0 {
		b.put(m.key, 0, def, parquet.NullValue())
		b.put(m.value, 0, def, parquet.NullValue())
		return false
	}
	return true
}

func (b *checkpointColumns) dv(c cpDV, d *deltalog.DeletionVector) {
	if d == nil {
		for _, l := range []cpLeaf{c.storageType, c.pathOrInlineDv, c.offset, c.sizeInBytes, c.cardinality, c.maxRowIndex} {
			b.put(l, 0, l.def-2, parquet.NullValue())
		}
		return
	}
	b.str(c.storageType, d.StorageType)
	b.str(c.pathOrInlineDv, d.PathOrInlineDv)
	if d.Offset != nil {
		b.i32(c.offset, *d.Offset)
	} else {
		b.null(c.offset)
	}
	b.i32(c.sizeInBytes, d.SizeInBytes)
	b.i64(c.cardinality, d.Cardinality)
	b.optI64(c.maxRowIndex, d.MaxRowIndex)
}

// stringValue is a BYTE_ARRAY value that shares s's bytes (parquet-go only reads them
// while the column is written).
func stringValue(s string) parquet.Value {
	return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// release drops the references the columns hold into a snapshot's strings, keeping the
// slices' storage for the next checkpoint.
func (b *checkpointColumns) release() {
	for i := range b.cols {
		clear(b.cols[i])
		b.cols[i] = b.cols[i][:0]
	}
}

// A domain's configuration can be megabytes (a keyed table's remembered deletes): its
// min and max, which no reader uses, would store it twice more, in the page header and
// the footer.
var checkpointUnboundedColumn = []string{"domainMetadata", "configuration"}

func newCheckpointParquetWriter(out io.Writer) *parquet.GenericWriter[any] {
	return parquet.NewGenericWriter[any](out, checkpointSchema, parquet.DataPageVersion(1),
		parquet.Compression(parquetenc.Snappy()), parquet.CreatedBy("ingestd", "", ""),
		parquet.SkipPageBounds(checkpointUnboundedColumn...), parquet.SkipPageStatistics(checkpointUnboundedColumn...))
}

// encodeCheckpoint writes the Parquet file of checkpoint columns cols to out: one row
// group, DataPage V1, SNAPPY (plain snappy blocks through s2, parquetenc.Snappy). yield,
// when not nil, is called after each column.
func encodeCheckpoint(out io.Writer, cols *checkpointColumns, yield func()) error {
	w := newCheckpointParquetWriter(out)
	if err := writeCheckpointChunk(w, cols, yield); err != nil {
		return err
	}
	return w.Close()
}

// yieldValues is how many values of a column a background checkpoint writes between two
// yields (about 0.1 ms of work).
const yieldValues = 2048

// writeCheckpointChunk writes the rows of cols to w's current row group, column by
// column. yield, when not nil, is called after each column.
func writeCheckpointChunk(w *parquet.GenericWriter[any], cols *checkpointColumns, yield func()) error {
	for i, own := range cols.cols {
		cw := w.ColumnWriters()[i]
		for _, sec := range cols.sections {
			vals := own
			if i < sec.first || i >= sec.end {
				vals = cols.nullRun(sec.rows)
			}
			// In pieces that start rows, with a yield between them: on one core the
			// committing goroutine must not wait for a whole column of a big chunk.
			for len(vals) > 0 {
				n := len(vals)
				if yield != nil && n > yieldValues {
					n = yieldValues
					for n < len(vals) && vals[n].RepetitionLevel() != 0 {
						n++
					}
				}
				if _, err := cw.WriteRowValues(vals[:n]); err != nil {
					return fmt.Errorf("column %s: %w", strings.Join(checkpointSchema.Columns()[i], "."), err)
				}
				vals = vals[n:]
				if yield != nil && len(vals) > 0 {
					yield()
				}
			}
		}
		if yield != nil {
			// Compress the column's last page now rather than all of them in Close.
			if err := cw.Flush(); err != nil {
				return fmt.Errorf("column %s: %w", strings.Join(checkpointSchema.Columns()[i], "."), err)
			}
			yield()
		}
	}
	return nil
}
