package parquetenc

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// pageTargetBytes is the PLAIN value bytes after which a page is cut (at the next row
// start); 1 MiB as arrow-go and parquet-mr. A variable for tests.
var pageTargetBytes = 1 << 20

const parquetCreatedBy = "ingestd version (build )"

// Summary is what encoding learns about one leaf column of a file: the null count and
// where its bounds are, from which the table writer derives its per-file statistics.
type Summary struct {
	// Nulls counts the column's level entries below the leaf's maximum definition level
	// (for a non-repeated leaf: the rows where it is null).
	Nulls int
	// Lo and Hi are the entries (column.Column.At) of the minimum and maximum non-null
	// value in physical order (signed for integers and decimals, IEEE 754 for floats,
	// unsigned bytes for BYTE_ARRAY, signed for decimal FIXED_LEN_BYTE_ARRAY); the first
	// of equal values wins. Valid when HasBounds: the column holds a non-null value and
	// its leaf is not BOOLEAN (which gets no bounds).
	Lo, Hi    int
	HasBounds bool
	// NonFinite reports a NaN or ±Inf among the values of a FLOAT or DOUBLE leaf.
	NonFinite bool
}

// MaxFooterBound is the largest BYTE_ARRAY minimum or maximum, in bytes, that Encode
// writes to a column chunk's footer statistics: past it both are left out (Arrow C++'s
// default max_statistics_size is 4,096 too). Summary's bounds have no such limit.
const MaxFooterBound = 4096

// File is one Parquet file encoded in memory, in buffers the encoder reuses for the next
// file: call Release once its bytes are written.
type File struct {
	e *columnEncoder
}

// Bytes returns the whole file, from the leading "PAR1" to the trailing one; valid until
// Release, nil after it.
func (f *File) Bytes() []byte {
	if f.e == nil {
		return nil
	}
	return f.e.out
}

// Release hands the file's buffers back to the encoder pool; the bytes Bytes returned
// must not be used after. A second Release does nothing.
func (f *File) Release() {
	if f.e != nil {
		f.e.release()
		f.e = nil
	}
}

// Encode validates cols against schema and encodes them as one Parquet file whose pages
// codec compresses (Snappy, Zstd or a parquet-go codec; nil or UNCOMPRESSED stores them as
// they are). It returns the file and one Summary per leaf column, in schema.Columns()
// order. The layout written is in the package doc.
//
// cols[i] holds leaf column i of schema, in schema.Columns() order, in either form of
// package column: levelled (each value with its repetition and definition levels and
// column index; any leaf) or dense (a non-repeated leaf whose every row is set: one word
// per row of a BOOLEAN, INT32, INT64, FLOAT or DOUBLE leaf, or the byte form of a
// BYTE_ARRAY leaf, its Leaf being the schema's leaf). Every column describes numRows rows
// (levelled: that many values at repetition level 0; dense: that many words or end
// offsets). A dense column gives the bytes and the Summary the same values give levelled.
//
// The column chunks are encoded by the calling goroutine and up to GOMAXPROCS-1 helper
// goroutines taken, without waiting, from a process-wide budget, so that files encoded
// at the same time (partitions of one flush, pipelines) never run more than GOMAXPROCS
// encode goroutines between them; the helpers have returned when Encode does. With
// GOMAXPROCS=1, a file of fewer than 16,384 column entries or no helper free, it runs
// inline as one pass. The bytes are the same either way (TestEncodeParallelSameBytes).
//
// It returns an error, and no file, when len(cols) is not the schema's number of leaves,
// numRows < 1, a leaf is INT96, a column does not fit its leaf (a value's levels beyond
// the leaf's maximum, a value null or set at the wrong definition level, of another
// physical kind, FIXED_LEN_BYTE_ARRAY width or column index, a first value at repetition
// level > 0; a dense column for a repeated leaf or whose Leaf's kind, maximum definition
// level or index differs from the schema's, byte-form end offsets that decrease or do not
// end at len(Bytes)), a column holds another number of rows than numRows, a page
// passes 2 GiB, or codec fails. The message names the column by its dotted path and the
// value by its entry index; of several failing columns it is the first in schema order.
func Encode(schema *parquet.Schema, cols []column.Column, numRows int, codec compress.Codec) (*File, []Summary, error) {
	helpers := 0
	if len(cols) > 1 && countValues(cols) >= parallelMinValues {
		helpers = acquireHelpers(len(cols) - 1)
		defer releaseHelpers(helpers)
	}
	return encodeFile(schema, cols, numRows, codec, helpers)
}

// Summarize validates cols as Encode does and returns the summaries Encode would, without
// encoding: no pages, no codec, one pass per column on the calling goroutine. Its errors
// are Encode's but those of pages and codecs.
func Summarize(schema *parquet.Schema, cols []column.Column, numRows int) ([]Summary, error) {
	leaves, err := leafInfos(schema, cols, numRows)
	if err != nil {
		return nil, err
	}
	e := newColumnEncoder(nil, false)
	defer e.release()
	sums := make([]Summary, len(leaves))
	for i := range leaves {
		if sums[i], err = e.column(leaves[i].index, &leaves[i], &cols[i], numRows); err != nil {
			return nil, err
		}
	}
	return sums, nil
}

type leafInfo struct {
	index    int // the leaf's column index in the schema
	path     []string
	typ      parquet.Type
	kind     parquet.Kind
	maxRep   int
	maxDef   int
	flbaLen  int
	signedFL bool // FIXED_LEN_BYTE_ARRAY holding a decimal: signed order
}

func leafInfos(schema *parquet.Schema, cols []column.Column, numRows int) ([]leafInfo, error) {
	leaves := schema.Columns()
	if len(cols) != len(leaves) {
		return nil, fmt.Errorf("got %d columns, schema has %d leaf columns", len(cols), len(leaves))
	}
	if numRows <= 0 {
		return nil, fmt.Errorf("no rows to write")
	}
	out := make([]leafInfo, len(leaves))
	for i, path := range leaves {
		leaf, ok := schema.Lookup(path...)
		if !ok {
			return nil, fmt.Errorf("leaf column %v not found", path)
		}
		t := leaf.Node.Type()
		li := leafInfo{index: i, path: path, typ: t, kind: t.Kind(), maxRep: leaf.MaxRepetitionLevel, maxDef: leaf.MaxDefinitionLevel}
		switch li.kind {
		case parquet.Int96:
			return nil, fmt.Errorf("column %s: INT96 is not written", strings.Join(path, "."))
		case parquet.FixedLenByteArray:
			li.flbaLen = t.Length()
			if lt := t.LogicalType(); lt != nil {
				_, li.signedFL = lt.Value.(*format.DecimalType)
			}
		}
		out[i] = li
	}
	return out, nil
}

// encodeFile is Encode with helpers extra goroutines (0: inline).
func encodeFile(schema *parquet.Schema, cols []column.Column, numRows int, codec compress.Codec, helpers int) (*File, []Summary, error) {
	e, sums, err := encodeColumns(schema, cols, numRows, codec, helpers)
	if err != nil {
		return nil, nil, err
	}
	return &File{e: e}, sums, nil
}

// encodeColumns encodes the file into the returned encoder's out (see encodeFile); on
// errors it has released the encoder.
func encodeColumns(schema *parquet.Schema, cols []column.Column, numRows int, codec compress.Codec, helpers int) (e *columnEncoder, sums []Summary, err error) {
	leaves, err := leafInfos(schema, cols, numRows)
	if err != nil {
		return nil, nil, err
	}
	e = newColumnEncoder(codec, true)
	defer func(enc *columnEncoder) {
		if err != nil {
			enc.release()
		}
	}(e)
	e.out = append(e.out, "PAR1"...)
	rg, sums, err := e.rowGroup(leaves, cols, numRows, codec, helpers)
	if err != nil {
		return nil, nil, err
	}
	rg.FileOffset, rg.TotalCompressedSize = 4, int64(len(e.out))-4
	if err = e.footer(schema, []format.RowGroup{rg}, int64(numRows)); err != nil {
		return nil, nil, err
	}
	return e, sums, nil
}

// rowGroup appends the column chunks of one row group to e.out and returns its footer
// entry (offsets are positions in e.out; FileOffset and TotalCompressedSize are the
// caller's) and the columns' summaries.
func (e *columnEncoder) rowGroup(leaves []leafInfo, cols []column.Column, numRows int, codec compress.Codec, helpers int) (format.RowGroup, []Summary, error) {
	sums := make([]Summary, len(leaves))
	chunks := make([]format.ColumnChunk, len(leaves))
	var totalUncompressed int64
	var err error
	if helpers = min(helpers, len(leaves)-1); helpers <= 0 {
		for i := range leaves {
			if sums[i], err = e.column(leaves[i].index, &leaves[i], &cols[i], numRows); err != nil {
				return format.RowGroup{}, nil, err
			}
			chunks[i] = e.chunkMetadata(&leaves[i], &cols[i], sums[i])
			totalUncompressed += e.uncompressed
		}
	} else if totalUncompressed, err = e.encodeColumnsParallel(leaves, cols, numRows, codec, helpers, sums, chunks); err != nil {
		return format.RowGroup{}, nil, err
	}
	return format.RowGroup{Columns: chunks, TotalByteSize: totalUncompressed, NumRows: int64(numRows)}, sums, nil
}

// footer appends the FileMetaData of a file of rowGroups, its length and "PAR1" to e.out.
func (e *columnEncoder) footer(schema *parquet.Schema, rowGroups []format.RowGroup, numRows int64) error {
	orders := make([]format.ColumnOrder, len(schema.Columns()))
	for i := range orders {
		orders[i] = format.ColumnOrder{Value: new(format.TypeDefinedOrder)}
	}
	md := format.FileMetaData{
		Version:      2,
		Schema:       schemaElements(schema),
		NumRows:      numRows,
		CreatedBy:    parquetCreatedBy,
		ColumnOrders: orders,
		RowGroups:    rowGroups,
	}
	e.hdr.Reset()
	if err := e.henc.Encode(&md); err != nil {
		return fmt.Errorf("encode footer: %w", err)
	}
	e.out = append(e.out, e.hdr.Bytes()...)
	e.out = binary.LittleEndian.AppendUint32(e.out, uint32(e.hdr.Len()))
	e.out = append(e.out, "PAR1"...)
	return nil
}

// schemaElements flattens schema depth-first (parquet-go's field order, the order of
// schema.Columns()) into the footer's schema list.
func schemaElements(schema *parquet.Schema) []format.SchemaElement {
	var out []format.SchemaElement
	var walk func(name string, n parquet.Node, root bool)
	walk = func(name string, n parquet.Node, root bool) {
		t := n.Type()
		el := format.SchemaElement{Name: name, FieldID: int32(n.ID())}
		if !root {
			switch {
			case n.Optional():
				el.RepetitionType = thrift.New(format.Optional)
			case n.Repeated():
				el.RepetitionType = thrift.New(format.Repeated)
			default:
				el.RepetitionType = thrift.New(format.Required)
			}
		}
		if lt := t.LogicalType(); lt != nil {
			el.LogicalType = *lt
			if d, ok := lt.Value.(*format.DecimalType); ok {
				el.Scale = thrift.New(d.Scale)
				el.Precision = thrift.New(d.Precision)
			}
		}
		if l := int32(t.Length()); l > 0 {
			el.TypeLength = thrift.New(l)
		}
		if !n.Leaf() {
			el.NumChildren = thrift.New(int32(len(n.Fields())))
		}
		if pt := t.PhysicalType(); pt != nil {
			el.Type = thrift.New(*pt)
		}
		if ct := t.ConvertedType(); ct != nil {
			el.ConvertedType = thrift.New(*ct)
		}
		out = append(out, el)
		for _, f := range n.Fields() {
			walk(f.Name(), f, false)
		}
	}
	walk(schema.Name(), schema, true)
	return out
}
