package rowfill

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
)

// ErrPartitionLimit is returned by Stage.Fill for a record whose partition value would
// open one more data file than batch.max_open_partitions (Options.MaxOpenPartitions)
// allows in this flush: the record, and every later one of its Kafka partition, is left
// for the next flush.
var ErrPartitionLimit = errors.New("partition value limit of the flush reached")

// Partitioner splits a flush's rows by partition value (PROTOCOL.md, "Partition Value
// Serialization"): one data file per distinct tuple of partition values, under Spark's
// directory layout. The rows' values are moved out of the flush's table-wide column
// buffers into their partition's buffers, whose leaf column indexes are those of the data
// files' Parquet schema (FileSchema): the table's without the partition columns, unless
// the table has the materializePartitionColumns writer feature. Stage.Fill places each
// row; the flush then writes Files, one data file each.
type Partitioner struct {
	cols    []partColumn
	file    *parquet.Schema // the data files' Parquet schema
	leaves  []column.Leaf   // file's leaves (column.Leaves): each partition file's columns start from them
	leafMap []int           // table leaf index → data-file leaf index; -1: not in the files
	max     int             // batch.max_open_partitions; 0: unbounded
	parts   map[string]*PartitionFile
	order   []*PartitionFile // in first-row order
	log     *slog.Logger
	warned  bool // the "__HIVE_DEFAULT_PARTITION__" string warning, once per flush
	// randomDirs: under column mapping (or delta.randomizeFilePrefixes), files go into
	// random two-character directories instead of col=value ones, as Spark writes them
	// (delta.randomPrefixLength: a column's name can change; partition values are read
	// from add.partitionValues by physical name, never from the path).
	randomDirs bool
	// last is the file of the last row placed and lastVals that row's partition leaf
	// values: rows come in runs of one partition value (records in time order, an hourly
	// column), and a row whose values are the same bits goes to the same file without its
	// partition values being serialised and hashed again.
	last     *PartitionFile
	lastVals []parquet.Value
	// lastBytes holds the bytes of lastVals' byte values: a dense BYTE_ARRAY column's
	// value aliases its Bytes (column.Column.At), which the next row overwrites once move
	// has dropped this one, so lastVals keeps copies (one per run of rows, not per row).
	lastBytes []byte
	// levelled starts every partition file's columns levelled (Options.Levelled).
	levelled bool
}

// partColumn is one partition column: its field, physical name and table leaf.
type partColumn struct {
	field *deltalog.StructField
	phys  string
	leaf  int
}

// PartitionFile is the rows of one partition value tuple: one data file, written with
// the Partitioner's FileSchema under Dir with add.partitionValues Values.
type PartitionFile struct {
	// Values are add.partitionValues, by physical name (nil: a null partition value).
	Values map[string]*string
	// Dir is the file's directory relative to the table root: the Hive-escaped
	// col=value/… path by logical names, or a random two-character prefix (column
	// mapping, delta.randomizeFilePrefixes).
	Dir string
	// Cols are the file's column values, by leaf of FileSchema; a column starts dense
	// when its leaf allows.
	Cols []column.Column
	Rows int // rows in Cols
}

// newPartitioner returns the partitioner of a flush to a table with schema, partition
// columns partitionBy (logical names, metaData.partitionColumns), column mapping mode cm
// and table-wide Parquet schema pq; nil for an unpartitioned table. materialize keeps the
// partition columns in the data files (writer feature materializePartitionColumns);
// randomDirs puts files in random two-character directories instead of col=value ones,
// as Spark does under column mapping and with delta.randomizeFilePrefixes.
// Errors: a partition column the schema lacks or cannot partition by
// (deltawriter.CheckPartitionColumns).
func newPartitioner(schema *deltalog.StructType, partitionBy []string, cm deltalog.ColumnMappingMode, pq *parquet.Schema,
	row *rowView, materialize, randomDirs bool, maxOpen int, log *slog.Logger) (*Partitioner, error) {
	if len(partitionBy) == 0 {
		return nil, nil
	}
	if err := deltawriter.CheckPartitionColumns(schema, partitionBy); err != nil {
		return nil, fmt.Errorf("partition table: %w", err)
	}
	p := &Partitioner{max: maxOpen, parts: map[string]*PartitionFile{}, log: log, randomDirs: randomDirs}
	drop := map[string]bool{}
	for _, name := range partitionBy {
		f := deltawriter.PartitionField(schema, name)
		c, ok := row.column(f.Name)
		if !ok {
			return nil, fmt.Errorf("partition table: column %q has no Parquet leaf", name)
		}
		p.cols = append(p.cols, partColumn{field: f, phys: f.PhysicalName(cm), leaf: c.first})
		drop[deltalog.NameKey(f.Name)] = true
	}
	p.file = pq
	p.leafMap = make([]int, len(pq.Columns()))
	for i := range p.leafMap {
		p.leafMap[i] = i
	}
	if !materialize {
		narrow := &deltalog.StructType{}
		for _, f := range schema.Fields {
			if !drop[deltalog.NameKey(f.Name)] {
				narrow.Fields = append(narrow.Fields, f)
			}
		}
		file, err := deltawriter.ParquetSchema(narrow, cm)
		if err != nil {
			return nil, fmt.Errorf("build parquet schema of the partition files: %w", err)
		}
		p.file = file
		for i, path := range pq.Columns() {
			p.leafMap[i] = -1
			if l, ok := file.Lookup(path...); ok {
				p.leafMap[i] = l.ColumnIndex
			}
		}
	}
	p.leaves = column.Leaves(p.file)
	return p, nil
}

// place moves the row into its partition's buffers (the flush's column buffers are left
// as before the row). Errors (the row is then dropped from the buffers): ErrPartitionLimit
// when the row's value would open one file more than max; a *decode.Error
// not_null_violation for an empty string in a NOT NULL partition column (the protocol
// makes it null); a serialisation failure.
func (p *Partitioner) place(row *rowView) error {
	if p.last != nil && p.sameAsLast(row) {
		p.move(row, p.last)
		return nil
	}
	var key strings.Builder
	values := make([]*string, len(p.cols))
	for i, c := range p.cols {
		vs := row.leaf(c.leaf)
		if len(vs) != 1 {
			row.drop()
			return fmt.Errorf("partition row: column %q has %d values", c.field.Name, len(vs))
		}
		pv, err := deltawriter.PartitionValue(c.field.Type, vs[0])
		if err != nil {
			row.drop()
			return &decode.Error{Reason: decode.ReasonDecodeError, Field: c.field.Name, Err: err}
		}
		if pv == nil && !c.field.Nullable {
			row.drop()
			return &decode.Error{Reason: decode.ReasonNotNullViolation, Field: c.field.Name,
				Err: fmt.Errorf("partition column %s is NOT NULL and the value is empty (an empty string is a null partition value)", c.field.Name)}
		}
		values[i] = pv
		if pv == nil {
			key.WriteByte(0)
		} else {
			key.WriteByte(1)
			key.WriteString(*pv)
		}
		key.WriteByte(0xFF)
	}
	part := p.parts[key.String()]
	if part == nil {
		if p.max > 0 && len(p.parts) >= p.max {
			row.drop()
			return ErrPartitionLimit
		}
		part = p.open(row, values)
		p.parts[key.String()] = part
		p.order = append(p.order, part)
	}
	p.last, p.lastVals = part, p.lastVals[:0]
	for _, c := range p.cols {
		p.lastVals = append(p.lastVals, row.leaf(c.leaf)[0]) // one value each: checked above
	}
	p.keepLast()
	p.move(row, part)
	return nil
}

// keepLast copies the bytes of lastVals' byte values into lastBytes and points the
// values at the copies, so that they outlive the row's entries in the flush's columns.
func (p *Partitioner) keepLast() {
	n := 0
	for _, v := range p.lastVals {
		if k := v.Kind(); !v.IsNull() && (k == parquet.ByteArray || k == parquet.FixedLenByteArray) {
			n += len(v.ByteArray())
		}
	}
	if n == 0 {
		return
	}
	if cap(p.lastBytes) < n {
		p.lastBytes = make([]byte, 0, n)
	}
	buf := p.lastBytes[:0]
	for i, v := range p.lastVals {
		k := v.Kind()
		if v.IsNull() || k != parquet.ByteArray && k != parquet.FixedLenByteArray {
			continue
		}
		start := len(buf)
		buf = append(buf, v.ByteArray()...)
		b := buf[start:len(buf):len(buf)]
		kept := parquet.ByteArrayValue(b)
		if k == parquet.FixedLenByteArray {
			kept = parquet.FixedLenByteArrayValue(b)
		}
		p.lastVals[i] = kept.Level(int(v.RepetitionLevel()), int(v.DefinitionLevel()), int(v.Column()))
	}
	p.lastBytes = buf
}

// sameAsLast reports whether row's partition values are those of the last row placed, bit
// for bit: 0.0 and -0.0, whose serialisations differ, are not the same; a NaN is the same
// only as a NaN of the same bits, which serialises the same.
func (p *Partitioner) sameAsLast(row *rowView) bool {
	for i, c := range p.cols {
		vs := row.leaf(c.leaf)
		if len(vs) != 1 || !sameBits(vs[0], p.lastVals[i]) {
			return false
		}
	}
	return true
}

// sameBits reports whether a and b are the same value: kind, nullness and bits.
func sameBits(a, b parquet.Value) bool {
	if a.Kind() != b.Kind() || a.IsNull() != b.IsNull() {
		return false
	}
	switch {
	case a.IsNull():
		return true
	case a.Kind() == parquet.Float:
		return math.Float32bits(a.Float()) == math.Float32bits(b.Float())
	case a.Kind() == parquet.Double:
		return math.Float64bits(a.Double()) == math.Float64bits(b.Double())
	}
	return parquet.Equal(a, b)
}

// move appends row's entries to part's columns (data-file leaf indexes; dense words are
// copied as words, column.Column.AppendFrom) and drops the row from the flush's
// table-wide columns.
func (p *Partitioner) move(row *rowView, part *PartitionFile) {
	for i, fi := range p.leafMap {
		if fi < 0 {
			continue
		}
		part.Cols[fi].AppendFrom(&row.cols[i], row.mark[i], fi)
	}
	part.Rows++
	row.drop()
}

// open starts the file of a new partition value tuple.
func (p *Partitioner) open(row *rowView, values []*string) *PartitionFile {
	part := &PartitionFile{Values: map[string]*string{}, Cols: make([]column.Column, len(p.leaves))}
	for i := range part.Cols {
		part.Cols[i].Reset(p.leaves[i])
		if p.levelled {
			part.Cols[i].ToLevelled()
		}
	}
	names, dirs := make([]string, len(p.cols)), make([]string, len(p.cols))
	for i, c := range p.cols {
		part.Values[c.phys] = values[i]
		// Spark names directories by logical name; under column mapping too.
		names[i] = c.field.Name
		dirs[i] = deltawriter.PartitionDirValue(c.field.Type, values[i], row.leaf(c.leaf)[0].Int64())
		if v := values[i]; v != nil && *v == deltawriter.HiveDefaultPartition && !p.warned {
			p.warned = true
			p.log.Warn("a partition value is the string __HIVE_DEFAULT_PARTITION__: add.partitionValues keeps the string (Delta readers see it), "+
				"but directory-based readers (Hive, Spark without Delta) read that directory as NULL", "column", c.field.Name)
		}
	}
	part.Dir = deltawriter.PartitionDir(names, dirs)
	if p.randomDirs {
		part.Dir = randomPrefix()
	}
	return part
}

// randomPrefix is a two-character alphanumeric directory name, as Spark's
// delta.randomPrefixLength (2) gives files of column-mapped tables.
func randomPrefix() string {
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	return string([]byte{chars[rand.IntN(len(chars))], chars[rand.IntN(len(chars))]})
}

// Files returns the flush's partition files in first-row order (nil before any row is
// placed). The flush writes each once every row is placed; they are read-only then.
func (p *Partitioner) Files() []*PartitionFile { return p.order }

// FileSchema is the Parquet schema of the partition files: the table's without the
// partition columns, or the table's own under materializePartitionColumns. Cols of a
// PartitionFile are by its leaf column indexes.
func (p *Partitioner) FileSchema() *parquet.Schema { return p.file }
