package deltawriter

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// DataFileWriter streams one data file of several row groups to the store, for files too
// large to hold whole (OPTIMIZE's output): each WriteRowGroup encodes its columns
// (parquetenc.Writer) and writes them to the store's object writer before returning, and
// Close writes the footer and returns the add action. The file, its name, its add action
// and its statistics are those WriteColumns gives (PROTOCOL.md, "Data Files", "Per-file
// Statistics"), but for the row groups: the statistics are merged over them (exact
// numRecords and nullCount; minValues and maxValues the extremes over every row group,
// formatted and truncated as WriteColumns does), so a file has the stats a single
// WriteColumns of all its rows would give.
//
// Memory: one encoded row group and the store writer's buffer (an object store's
// multipart part), plus, per leaf column, its running minimum and maximum.
//
// Not safe for concurrent use. Close or Abort must be called.
type DataFileWriter struct {
	ctx    context.Context
	st     storage.Store
	schema *parquet.Schema
	opts   FileOptions
	rel    string
	sw     storage.Writer
	pw     *parquetenc.Writer
	codec  format.CompressionCodec
	acc    []leafAcc
	kinds  []leafKind
	rows   int64
	done   bool
}

// leafKind is what merging a leaf's bounds needs of it.
type leafKind struct {
	kind     parquet.Kind
	signedFL bool // a decimal FIXED_LEN_BYTE_ARRAY: signed big-endian order
	repeated bool
	maxDef   int
}

// leafAcc is one leaf's statistics merged over the row groups written.
type leafAcc struct {
	nulls     int
	lo, hi    parquet.Value // owned copies
	has       bool
	nonFinite bool
	// rowDefs counts, for a repeated leaf, the rows whose first entry is at each
	// definition level (the null rows of arrays and maps).
	rowDefs []int
}

// NewDataFileWriter creates the object of a new data file of the table opts describes
// (named as WriteColumns names it, under opts.Dir) and returns its writer.
//
// Errors: opts.Schema nil, an unknown codec, or the store's Create.
func NewDataFileWriter(ctx context.Context, st storage.Store, schema *parquet.Schema, opts FileOptions) (*DataFileWriter, error) {
	if opts.Schema == nil {
		return nil, fmt.Errorf("write data file: FileOptions.Schema is nil")
	}
	codec, ext, err := compressionCodec(opts.Configuration)
	if err != nil {
		return nil, fmt.Errorf("write data file: %w", err)
	}
	rel, err := dataFileName(opts, ext)
	if err != nil {
		return nil, fmt.Errorf("write data file: %w", err)
	}
	sw, err := st.Create(ctx, rel)
	if err != nil {
		return nil, fmt.Errorf("write data file: %w", err)
	}
	pw, err := parquetenc.NewWriter(sw, schema, codec)
	if err != nil {
		_ = sw.Abort()
		return nil, fmt.Errorf("write data file %s: %w", rel, err)
	}
	w := &DataFileWriter{ctx: ctx, st: st, schema: schema, opts: opts, rel: rel, sw: sw, pw: pw, codec: format.Uncompressed}
	if codec != nil {
		w.codec = codec.CompressionCodec()
	}
	for _, path := range schema.Columns() {
		lc, _ := schema.Lookup(path...)
		t := lc.Node.Type()
		k := leafKind{kind: t.Kind(), repeated: lc.MaxRepetitionLevel > 0, maxDef: lc.MaxDefinitionLevel}
		if lt := t.LogicalType(); lt != nil && k.kind == parquet.FixedLenByteArray {
			_, k.signedFL = lt.Value.(*format.DecimalType)
		}
		w.kinds = append(w.kinds, k)
		a := leafAcc{}
		if k.repeated {
			a.rowDefs = make([]int, k.maxDef+1)
		}
		w.acc = append(w.acc, a)
	}
	return w, nil
}

// dataFileName is the path of a new data file: part-00000-<uuid>-c000<ext>.parquet under
// opts.Dir.
func dataFileName(opts FileOptions, ext string) (string, error) {
	uuid, err := newUUID()
	if err != nil {
		return "", err
	}
	name := "part-00000-" + uuid + "-c000" + ext + ".parquet"
	if opts.Dir != "" {
		return strings.TrimSuffix(opts.Dir, "/") + "/" + name, nil
	}
	return name, nil
}

// Size is the file's bytes written so far (the footer comes with Close).
func (w *DataFileWriter) Size() int64 { return w.pw.Size() }

// NumRows is the rows written so far.
func (w *DataFileWriter) NumRows() int64 { return w.rows }

// WriteRowGroup encodes cols (numRows ≥ 1 rows of the file's schema, WriteColumns' forms
// and rules) as the next row group, writes it, and merges its statistics into the file's.
// cols may be reused once it returns.
//
// Errors: WriteColumns' for the columns (nothing is written then), or the store's.
func (w *DataFileWriter) WriteRowGroup(cols []column.Column, numRows int) error {
	if w.done {
		return fmt.Errorf("write data file %s: closed", w.rel)
	}
	sums, err := w.pw.WriteRowGroup(cols, numRows)
	if err != nil {
		return fmt.Errorf("write data file %s: %w", w.rel, err)
	}
	for i := range sums {
		w.merge(i, &cols[i], sums[i])
	}
	w.rows += int64(numRows)
	return nil
}

// merge folds one row group's summary of leaf i (column c) into the file's statistics.
func (w *DataFileWriter) merge(i int, c *column.Column, s parquetenc.Summary) {
	b := leafAcc{nulls: s.Nulls, nonFinite: s.NonFinite}
	if k := w.kinds[i]; k.repeated && !c.IsDense() {
		b.rowDefs = make([]int, k.maxDef+1)
		for _, v := range c.Values {
			if v.RepetitionLevel() == 0 {
				b.rowDefs[v.DefinitionLevel()]++
			}
		}
	}
	if s.HasBounds {
		b.lo, b.hi, b.has = c.At(s.Lo).Clone(), c.At(s.Hi).Clone(), true
	}
	w.mergeAcc(i, &b)
}

// compareBound orders two set values of a leaf as parquetenc's summaries do: signed
// integers, IEEE 754 floats, unsigned bytes for BYTE_ARRAY, signed big-endian for decimal
// FIXED_LEN_BYTE_ARRAY.
func compareBound(k leafKind, a, b parquet.Value) int {
	switch k.kind {
	case parquet.Int32:
		return cmp.Compare(a.Int32(), b.Int32())
	case parquet.Int64:
		return cmp.Compare(a.Int64(), b.Int64())
	case parquet.Float:
		return cmp.Compare(a.Float(), b.Float())
	case parquet.Double:
		return cmp.Compare(a.Double(), b.Double())
	case parquet.FixedLenByteArray:
		x, y := a.ByteArray(), b.ByteArray()
		if k.signedFL && len(x) > 0 && len(y) > 0 {
			if sx, sy := x[0]&0x80 != 0, y[0]&0x80 != 0; sx != sy {
				if sx {
					return -1
				}
				return 1
			}
		}
		return bytes.Compare(x, y)
	}
	return bytes.Compare(a.ByteArray(), b.ByteArray())
}

// Abort discards the file (nothing becomes visible).
func (w *DataFileWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	_ = w.pw.Close() // hands the encoder back; the object is discarded below
	if err := w.sw.Abort(); err != nil {
		return fmt.Errorf("abort data file %s: %w", w.rel, err)
	}
	return nil
}

// Close writes the footer, publishes the object and returns its add action: WriteColumns'
// (exact size, modificationTime, dataChange true, stats merged over the row groups).
//
// Errors: no row written (the object is discarded), or the store's.
func (w *DataFileWriter) Close() (deltalog.Add, error) {
	if w.done {
		return deltalog.Add{}, fmt.Errorf("write data file %s: closed", w.rel)
	}
	if w.rows == 0 {
		_ = w.Abort()
		return deltalog.Add{}, fmt.Errorf("write data file %s: no rows to write", w.rel)
	}
	w.done = true
	if err := w.pw.Close(); err != nil {
		_ = w.sw.Abort()
		return deltalog.Add{}, fmt.Errorf("write data file %s: %w", w.rel, err)
	}
	size := w.pw.Size()
	if err := w.sw.Close(); err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file %s: %w", w.rel, err)
	}
	stats, err := w.stats()
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file %s: %w", w.rel, err)
	}
	fi, err := w.st.Stat(w.ctx, w.rel)
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file %s: %w", w.rel, err)
	}
	if fi.Size != size {
		return deltalog.Add{}, fmt.Errorf("write data file %s: stored size %d bytes, wrote %d", w.rel, fi.Size, size)
	}
	mtime := fi.ModTime
	if mtime.IsZero() {
		mtime = time.Now()
	}
	pv := w.opts.PartitionValues
	if pv == nil {
		pv = map[string]*string{}
	}
	return deltalog.Add{Path: escapePath(w.rel), PartitionValues: pv, Size: fi.Size, ModificationTime: mtime.UnixMilli(),
		DataChange: true, Stats: stats}, nil
}

// stats renders the merged statistics as WriteColumns' stats JSON.
func (w *DataFileWriter) stats() (string, error) {
	cfg, err := newStatsConfig(w.opts.Configuration)
	if err != nil {
		return "", err
	}
	mode := w.opts.ColumnMapping
	if mode == "" {
		mode = deltalog.ColumnMappingNone
	}
	if w.rows > math.MaxInt {
		return "", fmt.Errorf("%d rows", w.rows)
	}
	b := &statsBuilder{schema: w.schema, numRows: int(w.rows), cfg: cfg, mode: mode, partition: map[string]bool{}, acc: w.acc}
	return b.build(w.opts)
}
