package deltawriter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// FileOptions describes the table a data file belongs to.
type FileOptions struct {
	// Schema is the table's logical schema. It orders and types the statistics; its
	// physical names (under ColumnMapping) must be the Parquet schema's column names.
	Schema *deltalog.StructType
	// ColumnMapping is the table's effective column mapping mode.
	ColumnMapping deltalog.ColumnMappingMode
	// Configuration holds the table properties; used here:
	// delta.parquet.compression.codec (snappy by default, as Spark; zstd, gzip,
	// uncompressed), delta.dataSkippingNumIndexedCols (32), delta.dataSkippingStatsColumns,
	// delta.dataSkippingStringPrefixLength (32).
	Configuration map[string]string
	// Dir is an optional slash-separated directory under the table root (e.g. a
	// partition directory, already Hive-escaped); "" writes at the root.
	Dir string
	// PartitionValues becomes add.partitionValues (physical names; nil value = null).
	PartitionValues map[string]*string
	// PartitionColumns are the table's logical partition columns: they are not in the
	// data file and get no statistics.
	PartitionColumns []string
}

// FileOptions returns the options for a data file of this snapshot's table.
func (s *Snapshot) FileOptions() FileOptions {
	return FileOptions{Schema: s.Schema, ColumnMapping: s.ColumnMapping, Configuration: s.Metadata.Configuration,
		PartitionColumns: s.Metadata.PartitionColumns}
}

// WriteColumns writes one Parquet data file and returns its add action
// (PROTOCOL.md, "Data Files", "Add File and Remove File", "Per-file Statistics").
//
// schema is the file's Parquet schema (normally from ParquetSchema). cols[i] holds leaf
// column i in schema.Columns() order, in either form of package column: levelled (each
// value carrying its repetition and definition levels and column index,
// parquet.Value.Level; any leaf) or dense (one set value per row at the leaf's maximum
// definition level, the column's Leaf being the schema's leaf: a word, column.Bits, of
// a non-repeated BOOLEAN, INT32, INT64, FLOAT or DOUBLE leaf, or the byte form of a
// non-repeated BYTE_ARRAY leaf, the values back to back in Bytes with their end offsets
// in Dense). Every column must describe numRows rows (levelled: values with repetition
// level 0; dense: numRows words or offsets). The file is encoded in memory by
// parquetenc.Encode (one row group, DataPage V1, PLAIN or dictionary-encoded values, RLE
// levels, the table's codec; the statistics' summaries gathered in the same pass) and
// stored under the name
// part-00000-<uuid>-c000.<codec>.parquet, using Put semantics (the name is unique). The
// add action has the exact size in bytes, modificationTime in ms, dataChange true and
// stats JSON (numRecords, minValues, maxValues, nullCount keyed by physical names). A
// dense column gives the file bytes and stats its values give levelled
// (TestWriteColumnsDenseSameBytes).
//
// It returns an error, and writes nothing, when the columns do not match the schema
// (a dense column: its leaf's kind, maximum definition level or column index differs
// from the schema's, or the leaf is repeated; a byte-form column: its end offsets
// decrease or the last is not len(Bytes)) or disagree on the number of rows, or when
// the codec is unknown.
func WriteColumns(ctx context.Context, st storage.Store, schema *parquet.Schema, cols []column.Column, numRows int, opts FileOptions) (deltalog.Add, error) {
	if opts.Schema == nil {
		return deltalog.Add{}, fmt.Errorf("write data file: FileOptions.Schema is nil")
	}
	codec, ext, err := compressionCodec(opts.Configuration)
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file: %w", err)
	}
	enc, sums, err := parquetenc.Encode(schema, cols, numRows, codec)
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file: %w", err)
	}
	defer enc.Release()
	data := enc.Bytes()
	stats, err := statsFromSummaries(schema, cols, sums, numRows, opts)
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file: %w", err)
	}
	uuid, err := newUUID()
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file: %w", err)
	}
	name := "part-00000-" + uuid + "-c000" + ext + ".parquet"
	rel := name
	if opts.Dir != "" {
		rel = strings.TrimSuffix(opts.Dir, "/") + "/" + name
	}

	w, err := st.Create(ctx, rel)
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file: %w", err)
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Abort()
		return deltalog.Add{}, fmt.Errorf("write data file %s: %w", rel, err)
	}
	if err := w.Close(); err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file %s: %w", rel, err)
	}
	fi, err := st.Stat(ctx, rel)
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file %s: %w", rel, err)
	}
	if fi.Size != int64(len(data)) {
		return deltalog.Add{}, fmt.Errorf("write data file %s: stored size %d bytes, wrote %d", rel, fi.Size, len(data))
	}
	mtime := fi.ModTime
	if mtime.IsZero() {
		mtime = time.Now()
	}
	pv := opts.PartitionValues
	if pv == nil {
		pv = map[string]*string{}
	}
	return deltalog.Add{
		Path:             escapePath(rel),
		PartitionValues:  pv,
		Size:             fi.Size,
		ModificationTime: mtime.UnixMilli(),
		DataChange:       true,
		Stats:            stats,
	}, nil
}

// WriteDataFile is WriteColumns for levelled columns (column.Levelled): cols[i] holds the
// values of leaf column i in schema.Columns() order, each carrying its repetition and
// definition levels and column index (parquet.Value.Level). Same file, add action and
// errors as WriteColumns.
func WriteDataFile(ctx context.Context, st storage.Store, schema *parquet.Schema, cols [][]parquet.Value, numRows int, opts FileOptions) (deltalog.Add, error) {
	lc := make([]column.Column, len(cols))
	for i, c := range cols {
		lc[i] = column.Levelled(c)
	}
	return WriteColumns(ctx, st, schema, lc, numRows, opts)
}

// compressionCodec maps delta.parquet.compression.codec to a parquet-go codec and the
// file name infix Spark uses (".snappy", ".zstd", ".gz", "").
func compressionCodec(conf map[string]string) (compress.Codec, string, error) {
	switch c := strings.ToLower(strings.TrimSpace(conf[deltalog.PropCompressionCodec])); c {
	case "", "snappy":
		return parquetenc.Snappy(), ".snappy", nil
	case "zstd":
		return parquetenc.Zstd(), ".zstd", nil
	case "gzip":
		return &parquet.Gzip, ".gz", nil
	case "uncompressed", "none":
		return &parquet.Uncompressed, "", nil
	default:
		return nil, "", fmt.Errorf("read %s: codec %q is not supported (snappy, zstd, gzip, uncompressed)", deltalog.PropCompressionCodec, c)
	}
}
