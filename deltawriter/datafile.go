package deltawriter

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
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

// WriteDataFile writes one Parquet data file and returns its add action
// (PROTOCOL.md, "Data Files", "Add File and Remove File", "Per-file Statistics").
//
// schema is the file's Parquet schema (normally from ParquetSchema). cols[i] holds the
// values of leaf column i in schema.Columns() order, each carrying its repetition and
// definition levels and column index (parquet.Value.Level); every column must describe
// numRows rows (values with repetition level 0). The file is written as DataPage V1 with
// the table's codec under the name part-00000-<uuid>-c000.<codec>.parquet, using Put
// semantics (the name is unique). The add action has the exact size in bytes,
// modificationTime in ms, dataChange true and stats JSON (numRecords, minValues,
// maxValues, nullCount keyed by physical names).
//
// It returns an error, and writes nothing, when the columns do not match the schema or
// disagree on the number of rows, or when the codec is unknown.
func WriteDataFile(ctx context.Context, st storage.Store, schema *parquet.Schema, cols [][]parquet.Value, numRows int, opts FileOptions) (deltalog.Add, error) {
	if opts.Schema == nil {
		return deltalog.Add{}, fmt.Errorf("write data file: FileOptions.Schema is nil")
	}
	if err := validateColumns(schema, cols, numRows); err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file: %w", err)
	}
	codec, ext, err := compressionCodec(opts.Configuration)
	if err != nil {
		return deltalog.Add{}, fmt.Errorf("write data file: %w", err)
	}
	stats, err := computeStats(schema, cols, numRows, opts)
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
	cw := &countingWriter{w: w}
	pw := parquet.NewGenericWriter[any](cw, schema,
		parquet.DataPageVersion(1),
		parquet.Compression(codec),
		parquet.CreatedBy("ingestd", "", ""),
	)
	for i, c := range cols {
		if len(c) == 0 {
			continue
		}
		if _, err := pw.ColumnWriters()[i].WriteRowValues(c); err != nil {
			_ = w.Abort()
			return deltalog.Add{}, fmt.Errorf("write data file column %s: %w", strings.Join(schema.Columns()[i], "."), err)
		}
	}
	if err := pw.Close(); err != nil {
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
	if fi.Size != cw.n {
		return deltalog.Add{}, fmt.Errorf("write data file %s: stored size %d bytes, wrote %d", rel, fi.Size, cw.n)
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

// validateColumns checks that cols matches schema leaf by leaf: levels within bounds,
// non-null exactly at the maximum definition level, the leaf's physical kind, and
// numRows rows in every column.
func validateColumns(schema *parquet.Schema, cols [][]parquet.Value, numRows int) error {
	leaves := schema.Columns()
	if len(cols) != len(leaves) {
		return fmt.Errorf("got %d columns, schema has %d leaf columns", len(cols), len(leaves))
	}
	if numRows <= 0 {
		return fmt.Errorf("no rows to write")
	}
	for i, path := range leaves {
		leaf, ok := schema.Lookup(path...)
		if !ok {
			return fmt.Errorf("leaf column %v not found", path)
		}
		kind := leaf.Node.Type().Kind()
		rows := 0
		for j, v := range cols[i] {
			r, d := v.RepetitionLevel(), v.DefinitionLevel()
			switch {
			case j == 0 && r != 0:
				return fmt.Errorf("column %s: first value has repetition level %d, want 0", strings.Join(path, "."), r)
			case r > leaf.MaxRepetitionLevel || d > leaf.MaxDefinitionLevel:
				return fmt.Errorf("column %s value %d: levels (%d,%d) exceed max (%d,%d)", strings.Join(path, "."), j, r, d, leaf.MaxRepetitionLevel, leaf.MaxDefinitionLevel)
			case v.IsNull() != (d < leaf.MaxDefinitionLevel):
				return fmt.Errorf("column %s value %d: null=%v at definition level %d of %d", strings.Join(path, "."), j, v.IsNull(), d, leaf.MaxDefinitionLevel)
			case !v.IsNull() && v.Kind() != kind:
				return fmt.Errorf("column %s value %d: %v value for a %v column", strings.Join(path, "."), j, v.Kind(), kind)
			case v.Column() != i:
				return fmt.Errorf("column %s value %d: carries column index %d, want %d", strings.Join(path, "."), j, v.Column(), i)
			}
			if r == 0 {
				rows++
			}
		}
		if rows != numRows {
			return fmt.Errorf("column %s has %d rows, want %d", strings.Join(path, "."), rows, numRows)
		}
	}
	return nil
}

// compressionCodec maps delta.parquet.compression.codec to a parquet-go codec and the
// file name infix Spark uses (".snappy", ".zstd", ".gz", "").
func compressionCodec(conf map[string]string) (compress.Codec, string, error) {
	switch c := strings.ToLower(strings.TrimSpace(conf[deltalog.PropCompressionCodec])); c {
	case "", "snappy":
		return snappyCodec{}, ".snappy", nil
	case "zstd":
		return zstdCodec, ".zstd", nil
	case "gzip":
		return &parquet.Gzip, ".gz", nil
	case "uncompressed", "none":
		return &parquet.Uncompressed, "", nil
	default:
		return nil, "", fmt.Errorf("read %s: codec %q is not supported (snappy, zstd, gzip, uncompressed)", deltalog.PropCompressionCodec, c)
	}
}

// escapePath turns a store path into add.path: a relative URI, each segment
// percent-encoded once (checklist §1.4).
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
