package parquetenc

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// Writer streams one Parquet file of several row groups to an io.Writer: each
// WriteRowGroup encodes its columns as Encode does (same pages, encodings, statistics and
// validation) and writes the row group's bytes before returning, and Close writes the
// footer. Memory is one encoded row group (about twice its compressed size while helpers
// encode, plus the page buffers described in the package doc) and the footer entries,
// never the whole file: a file of any size is written with the row groups' memory.
//
// A Writer is not safe for concurrent use. The columns handed to WriteRowGroup may be
// reused once it returns, but a Summary's Lo and Hi index them: read them first.
type Writer struct {
	w         io.Writer
	schema    *parquet.Schema
	codec     compress.Codec
	e         *columnEncoder
	off       int64 // bytes written
	numRows   int64
	rowGroups []format.RowGroup
	err       error
	copyBuf   []byte
	yield     func()
	pageCut   int // SetPageTarget's bound; 0: pageTargetBytes
}

// NewWriter returns a Writer of a file of schema whose pages codec compresses (as
// Encode), writing "PAR1" to w first.
//
// Errors: w's.
func NewWriter(w io.Writer, schema *parquet.Schema, codec compress.Codec) (*Writer, error) {
	fw := &Writer{w: w, schema: schema, codec: codec}
	if err := fw.write([]byte("PAR1")); err != nil {
		return nil, err
	}
	return fw, nil
}

// SetYield makes every later WriteRowGroup encode on the calling goroutine only (no
// helper goroutines) and call yield after each page it writes (a page holds at most
// about 1 MiB of values): a writer in the background, sharing a core with latency-bound
// work, lets it run between pages (runtime.Gosched). nil restores the default.
func (w *Writer) SetYield(yield func()) { w.yield = yield }

// SetPageTarget makes every later WriteRowGroup cut its pages at n bytes (n ≥ 1) instead
// of 1 MiB: the page-cut test of every pass (the page's PLAIN value bytes + 2 × its
// dictionary indexes + its level entries / 8 ≥ n, at a row start) with n for the
// target. Smaller pages make SetYield's yields more frequent. 0 restores the default.
func (w *Writer) SetPageTarget(n int) { w.pageCut = n }

// Size is the bytes written so far (the footer is written by Close).
func (w *Writer) Size() int64 { return w.off }

// NumRows is the rows of the row groups written so far.
func (w *Writer) NumRows() int64 { return w.numRows }

func (w *Writer) write(b []byte) error {
	if w.err != nil {
		return w.err
	}
	n, err := w.w.Write(b)
	w.off += int64(n)
	if err != nil {
		w.err = fmt.Errorf("write parquet file: %w", err)
	}
	return w.err
}

// WriteRowGroup encodes cols (numRows rows; Encode's forms and rules) as the next row
// group and writes it. It returns one Summary per leaf column, in schema.Columns() order.
//
// Errors: Encode's (nothing is written then, and the Writer stays usable), or w's (the
// Writer then fails every later call).
func (w *Writer) WriteRowGroup(cols []column.Column, numRows int) ([]Summary, error) {
	return w.WriteRowGroupCopied(cols, numRows, nil)
}

// CopiedChunk is a column chunk made of data pages copied from other files as they are
// (Parquet format, "Column chunks": any number of data pages, with no dictionary page
// for a chunk none of whose pages is dictionary-encoded).
type CopiedChunk struct {
	// Pages are the chunk's pages back to back, each its page header and its body as
	// stored (DataPage V1 or V2, compressed with MetaData.Codec).
	Pages []byte
	// MetaData is the chunk's footer entry: type, encodings, path, codec, num_values,
	// total uncompressed and compressed sizes (the latter len(Pages)), statistics and
	// encoding stats. Its page offsets are set by the Writer; it has no dictionary page,
	// page index nor bloom filter.
	MetaData format.ColumnMetaData
}

// WriteRowGroupCopied is WriteRowGroup for a row group some of whose column chunks are
// copied pages: leaf i is copied[i]'s pages when copied[i] is not nil (cols[i] is then
// not read), else encoded from cols[i]; copied may be nil. The chunks are written in
// schema order. The Summary of a copied leaf is the zero Summary: its statistics are the
// caller's (copied[i].MetaData.Statistics). The caller checks that a copied chunk fits
// its leaf: physical type, levels, numRows rows, and a codec any reader of this file
// reads.
//
// Errors: WriteRowGroup's, or a copied chunk whose size is not len(Pages) or with a
// dictionary page (nothing is written then).
func (w *Writer) WriteRowGroupCopied(cols []column.Column, numRows int, copied []*CopiedChunk) ([]Summary, error) {
	if w.err != nil {
		return nil, w.err
	}
	all, err := leafInfos(w.schema, cols, numRows)
	if err != nil {
		return nil, err
	}
	if copied != nil && len(copied) != len(all) {
		return nil, fmt.Errorf("got %d copied chunks, schema has %d leaf columns", len(copied), len(all))
	}
	leaves, encCols := all, cols
	if copied != nil {
		leaves, encCols = nil, nil
		for i := range all {
			if c := copied[i]; c != nil {
				if c.MetaData.TotalCompressedSize != int64(len(c.Pages)) || len(c.Pages) == 0 || c.MetaData.DictionaryPageOffset != 0 {
					return nil, fmt.Errorf("copied chunk of column %s: %d bytes of pages, %d bytes in its metadata", strings.Join(all[i].path, "."), len(c.Pages), c.MetaData.TotalCompressedSize)
				}
				continue
			}
			leaves, encCols = append(leaves, all[i]), append(encCols, cols[i])
		}
	}
	helpers := 0
	if w.yield == nil && len(encCols) > 1 && countValues(encCols) >= parallelMinValues {
		helpers = acquireHelpers(len(encCols) - 1)
		defer releaseHelpers(helpers)
	}
	if w.e == nil {
		w.e = newColumnEncoder(w.codec, true)
	}
	e := w.e
	e.out, e.yield = e.out[:0], w.yield
	if w.pageCut > 0 {
		e.pageTarget = w.pageCut
	}
	defer func() { e.yield, e.pageTarget = nil, pageTargetBytes }()
	rg, sums, err := e.rowGroup(leaves, encCols, numRows, w.codec, helpers)
	if err != nil {
		return nil, err
	}
	if copied == nil {
		shiftChunks(rg.Columns, w.off)
		rg.FileOffset, rg.TotalCompressedSize = w.off, int64(len(e.out))
		rg.Ordinal = int16(len(w.rowGroups))
		if err := w.write(e.out); err != nil {
			return nil, err
		}
		w.rowGroups = append(w.rowGroups, rg)
		w.numRows += int64(numRows)
		return sums, nil
	}
	// the encoded chunks lie back to back in e.out; write them and the copied ones in
	// schema order
	out := format.RowGroup{NumRows: int64(numRows), FileOffset: w.off, Ordinal: int16(len(w.rowGroups)),
		Columns: make([]format.ColumnChunk, len(all)), TotalByteSize: rg.TotalByteSize}
	allSums := make([]Summary, len(all))
	j := 0
	for i := range all {
		start := w.off
		if c := copied[i]; c != nil {
			md := c.MetaData
			md.DataPageOffset, md.DictionaryPageOffset, md.IndexPageOffset = start, 0, 0
			md.BloomFilterOffset, md.BloomFilterLength = 0, 0
			out.Columns[i] = format.ColumnChunk{FileOffset: start, MetaData: md}
			out.TotalByteSize += md.TotalUncompressedSize
			if err := w.write(c.Pages); err != nil {
				return nil, err
			}
			continue
		}
		ch := rg.Columns[j]
		allSums[i] = sums[j]
		j++
		from := ch.FileOffset
		out.Columns[i] = ch
		shiftChunks(out.Columns[i:i+1], start-from)
		if err := w.write(e.out[from : from+ch.MetaData.TotalCompressedSize]); err != nil {
			return nil, err
		}
	}
	out.TotalCompressedSize = w.off - out.FileOffset
	w.rowGroups = append(w.rowGroups, out)
	w.numRows += int64(numRows)
	return allSums, nil
}

// CopyRowGroup writes row group rg of another Parquet file, read from src, as it is: its
// column chunks' bytes (each from its dictionary or first data page for the chunk's
// total_compressed_size bytes) in the order of rg.Columns, and a footer entry whose
// chunks keep their metadata (codec, encodings, statistics, sizes) with the page offsets
// moved to their place in this file; page index and bloom filter offsets are dropped
// (this package writes neither). The caller checks that the row group fits: the same
// leaf columns as the schema, in its order (PathInSchema, physical type, levels), and a
// codec any reader of this file reads. Memory: one column chunk at a time.
//
// Errors: rg has not one chunk per leaf, a chunk in another file or encrypted, src's
// read errors (nothing is written then), or w's (the Writer then fails every later call).
func (w *Writer) CopyRowGroup(src io.ReaderAt, rg *format.RowGroup) error {
	if w.err != nil {
		return w.err
	}
	if len(rg.Columns) != len(w.schema.Columns()) {
		return fmt.Errorf("copy row group: %d column chunks for %d leaf columns", len(rg.Columns), len(w.schema.Columns()))
	}
	out := format.RowGroup{NumRows: rg.NumRows, TotalByteSize: rg.TotalByteSize, FileOffset: w.off, Ordinal: int16(len(w.rowGroups))}
	out.Columns = make([]format.ColumnChunk, len(rg.Columns))
	for i, c := range rg.Columns {
		if c.FilePath != "" || len(c.EncryptedColumnMetadata) > 0 {
			return fmt.Errorf("copy row group: column %d is in another file or encrypted", i)
		}
		md := c.MetaData
		start := md.DataPageOffset
		if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
			start = md.DictionaryPageOffset
		}
		n := md.TotalCompressedSize
		if start < 4 || n <= 0 {
			return fmt.Errorf("copy row group: column %d at offset %d, %d bytes", i, start, n)
		}
		if int64(cap(w.copyBuf)) < n {
			w.copyBuf = make([]byte, n)
		}
		buf := w.copyBuf[:n]
		if m, err := src.ReadAt(buf, start); err != nil && !(errors.Is(err, io.EOF) && int64(m) == n) {
			return fmt.Errorf("copy row group: read column %d: %w", i, err)
		}
		d := w.off - start
		md.DataPageOffset += d
		if md.DictionaryPageOffset > 0 {
			md.DictionaryPageOffset += d
		}
		md.IndexPageOffset = 0
		md.BloomFilterOffset, md.BloomFilterLength = 0, 0
		out.Columns[i] = format.ColumnChunk{FileOffset: w.off, MetaData: md}
		if err := w.write(buf); err != nil {
			return err
		}
		out.TotalCompressedSize += n
	}
	w.rowGroups = append(w.rowGroups, out)
	w.numRows += rg.NumRows
	return nil
}

// shiftChunks moves the footer offsets of chunks by d bytes.
func shiftChunks(chunks []format.ColumnChunk, d int64) {
	for i := range chunks {
		c := &chunks[i]
		dict := c.MetaData.DataPageOffset != c.FileOffset // a dictionary page comes first
		c.FileOffset += d
		c.MetaData.DataPageOffset += d
		if dict {
			c.MetaData.DictionaryPageOffset += d
		}
	}
}

// Close writes the footer (FileMetaData listing every row group written) and hands the
// encoder's buffers back; it does not close the underlying io.Writer. A file with no
// row group is a valid file of no rows.
//
// Errors: w's, or an earlier write's.
func (w *Writer) Close() error {
	if w.err != nil {
		w.release()
		return w.err
	}
	if w.e == nil {
		w.e = newColumnEncoder(w.codec, true)
	}
	w.e.out = w.e.out[:0]
	if err := w.e.footer(w.schema, w.rowGroups, w.numRows); err != nil {
		w.release()
		return err
	}
	err := w.write(w.e.out)
	w.release()
	if err == nil {
		w.err = fmt.Errorf("write parquet file: closed")
	}
	return err
}

// release hands the encoder back to the pool.
func (w *Writer) release() {
	if w.e != nil {
		w.e.release()
		w.e = nil
	}
}
