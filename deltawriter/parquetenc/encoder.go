package parquetenc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// columnEncoder holds the buffers reused across the pages and columns of one file.
type columnEncoder struct {
	codec      compress.Codec
	compressed bool
	encode     bool // false: validate and summarise only

	out     []byte // the whole file
	reps    []byte
	defs    []byte
	vals    []byte
	body    []byte
	scratch []byte
	cbuf    []byte
	hdr     bytes.Buffer
	henc    *thrift.Encoder

	// denseDefs: the current column is dense, every level entry at the maximum
	// definition level; flushPage writes the level runs without e.defs
	denseDefs bool

	// dictionary encoding of the current BYTE_ARRAY, INT32 or INT64 column (dictOn)
	dictOn    bool
	dict      bytesDict // BYTE_ARRAY entries
	dictN     intDict   // INT32 / INT64 entries by their bits
	probe     intDict   // dictionaryPays' distinct values
	dictVals  []byte    // PLAIN dictionary page values
	dictFirst []int     // index in the column of each entry's first occurrence
	idx       []int32   // the current page's dictionary indexes
	dataPages []byte    // the column's data pages while the dictionary grows
	fileOut   []byte    // e.out while dataPages is being written

	// yield, when not nil, is called after each page is written (Writer.SetYield)
	yield func()
	// pageTarget is the page-cut bound in bytes (pageTargetBytes, or
	// Writer.SetPageTarget's)
	pageTarget int

	// per column chunk
	numValues    int64
	uncompressed int64
	pages        int32
	firstPage    int64
	dataPage     int64 // offset of the first data page
}

// encoders keeps columnEncoders (and their page and file buffers) between files.
var encoders sync.Pool

// maxPooledBytes bounds the file buffer kept in the pool.
const maxPooledBytes = 64 << 20

func newColumnEncoder(codec compress.Codec, encode bool) *columnEncoder {
	e, _ := encoders.Get().(*columnEncoder)
	if e == nil {
		e = &columnEncoder{}
		e.henc = thrift.NewEncoder(new(thrift.CompactProtocol).NewWriter(&e.hdr))
	}
	e.codec, e.encode, e.compressed, e.yield, e.pageTarget = codec, encode, false, nil, pageTargetBytes
	if codec != nil && codec.CompressionCodec() != format.Uncompressed {
		e.compressed = true
	}
	e.out = e.out[:0]
	return e
}

// release returns e to the pool; e and the bytes it returned must not be used after.
func (e *columnEncoder) release() {
	if cap(e.out) > maxPooledBytes {
		e.out = nil
	}
	e.codec, e.yield = nil, nil
	encoders.Put(e)
}

// column validates c against leaf (levels within bounds, non-null exactly at the
// maximum definition level, the leaf's physical kind and width, the column index, and
// numRows rows), summarises it, and, when encoding, appends its pages to e.out. A dense
// c takes the dense pass (denseColumn), one in the levels form the levels pass
// (levelsColumn); the summary's lo and hi index c's entries (c.At) in every form.
func (e *columnEncoder) column(ci int, leaf *leafInfo, c *column.Column, numRows int) (Summary, error) {
	if c.IsLevels() {
		return e.levelsColumn(ci, leaf, c, numRows)
	}
	if c.IsDense() {
		return e.denseColumn(ci, leaf, c, numRows)
	}
	vals := c.Values
	switch leaf.kind {
	case parquet.ByteArray, parquet.Int32, parquet.Int64:
		if !e.encode || !e.dictionaryPays(vals, leaf.kind, leaf.maxDef) {
			break
		}
		s, err := e.columnPass(ci, leaf, vals, numRows, true)
		if err != errDictFull {
			return s, err
		}
	}
	return e.columnPass(ci, leaf, vals, numRows, false)
}

// beginChunk resets the per-chunk state for a pass over one column (dense: denseDefs);
// with dict, the data pages go to e.dataPages until writeDictionary has put the
// dictionary page before them. Call endChunk when the pass ends, also on errors.
func (e *columnEncoder) beginChunk(dict, dense bool) {
	// e.idx too when not dict: a dictionary pass abandoned for PLAIN (errDictFull)
	// leaves its last page's indexes, which the page-cut test would count
	e.reps, e.defs, e.vals, e.idx = e.reps[:0], e.defs[:0], e.vals[:0], e.idx[:0]
	e.numValues, e.uncompressed, e.pages, e.firstPage = 0, 0, 0, int64(len(e.out))
	e.dataPage = e.firstPage
	e.dictOn, e.denseDefs = dict, dense
	if dict {
		e.dict.reset()
		e.dictN.reset()
		e.dictVals, e.dictFirst = e.dictVals[:0], e.dictFirst[:0]
		e.fileOut, e.out = e.out, e.dataPages[:0]
	}
}

// endChunk puts the file buffer back after a dictionary pass (beginChunk).
func (e *columnEncoder) endChunk(dict bool) {
	if dict {
		e.dataPages, e.out, e.fileOut = e.out, e.fileOut, nil
	}
	e.denseDefs = false
}

// writeDictionary writes the dictionary page to the file buffer followed by the data
// pages buffered while it grew.
func (e *columnEncoder) writeDictionary() error {
	data := e.dictVals
	if e.compressed {
		var err error
		if e.cbuf, err = e.codec.Encode(e.cbuf[:0], e.dictVals); err != nil {
			return fmt.Errorf("compress dictionary page: %w", err)
		}
		data = e.cbuf
	}
	e.hdr.Reset()
	h := format.PageHeader{
		Type:                 format.DictionaryPage,
		UncompressedPageSize: int32(len(e.dictVals)),
		CompressedPageSize:   int32(len(data)),
		DictionaryPageHeader: thrift.New(format.DictionaryPageHeader{
			NumValues: int32(len(e.dictFirst)),
			Encoding:  format.Plain,
		}),
	}
	if err := e.henc.Encode(&h); err != nil {
		return fmt.Errorf("encode dictionary page header: %w", err)
	}
	e.fileOut = append(e.fileOut, e.hdr.Bytes()...)
	e.fileOut = append(e.fileOut, data...)
	e.uncompressed += int64(e.hdr.Len() + len(e.dictVals))
	e.dataPage = int64(len(e.fileOut))
	e.fileOut = append(e.fileOut, e.out...) // the data pages
	return nil
}

func levelBitWidth(max int) int { return bits.Len(uint(max)) }

// appendLevels appends levels RLE/bit-packed at the width of max, with the uint32 LE
// length prefix of DataPage V1.
func (e *columnEncoder) appendLevels(dst, levels []byte, max int) ([]byte, error) {
	enc := rle.Encoding{BitWidth: levelBitWidth(max)}
	var err error
	e.scratch, err = enc.EncodeLevels(e.scratch[:0], levels)
	if err != nil {
		return dst, fmt.Errorf("encode levels: %w", err)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e.scratch)))
	return append(dst, e.scratch...), nil
}

// flushPage writes the buffered levels and values as one DataPage V1 of n level
// entries (nulls of them null) to e.out.
func (e *columnEncoder) flushPage(leaf *leafInfo, n, nulls int) error {
	body := e.body[:0]
	var err error
	if leaf.maxRep > 0 {
		if body, err = e.appendLevels(body, e.reps, leaf.maxRep); err != nil {
			return err
		}
	}
	if leaf.maxDef > 0 {
		if e.denseDefs {
			body = appendConstLevels(body, n, leaf.maxDef)
		} else if body, err = e.appendLevels(body, e.defs, leaf.maxDef); err != nil {
			return err
		}
	}
	enc := format.Plain
	if e.dictOn {
		enc = format.RLEDictionary
		// Index bit width; a page cut before the first non-null value has an empty
		// dictionary and no indexes (bits.Len of -1 as uint would be 64).
		w := 1
		if n := len(e.dictFirst); n > 1 {
			w = bits.Len(uint(n - 1))
		}
		rl := rle.Encoding{BitWidth: w}
		if e.scratch, err = rl.EncodeInt32(e.scratch[:0], e.idx); err != nil {
			return fmt.Errorf("encode dictionary indexes: %w", err)
		}
		body = append(body, byte(w))
		body = append(body, e.scratch...)
	} else {
		body = append(body, e.vals...)
	}
	e.body = body
	data := body
	if e.compressed {
		if e.cbuf, err = e.codec.Encode(e.cbuf[:0], body); err != nil {
			return fmt.Errorf("compress page: %w", err)
		}
		data = e.cbuf
	}
	if len(body) > math.MaxInt32 || len(data) > math.MaxInt32 {
		return fmt.Errorf("page of %d bytes exceeds the format's limit", len(body))
	}
	e.hdr.Reset()
	h := format.PageHeader{
		Type:                 format.DataPage,
		UncompressedPageSize: int32(len(body)),
		CompressedPageSize:   int32(len(data)),
		DataPageHeader: thrift.New(format.DataPageHeader{
			NumValues:               int32(n),
			Encoding:                enc,
			DefinitionLevelEncoding: format.RLE,
			RepetitionLevelEncoding: format.RLE,
			Statistics:              format.Statistics{NullCount: int64(nulls)},
		}),
	}
	if err := e.henc.Encode(&h); err != nil {
		return fmt.Errorf("encode page header: %w", err)
	}
	e.out = append(e.out, e.hdr.Bytes()...)
	e.out = append(e.out, data...)
	e.numValues += int64(n)
	e.uncompressed += int64(e.hdr.Len() + len(body))
	e.pages++
	e.reps, e.defs, e.vals, e.idx = e.reps[:0], e.defs[:0], e.vals[:0], e.idx[:0]
	if e.yield != nil {
		e.yield()
	}
	return nil
}

// chunkMetadata returns the footer entry of the column chunk just encoded from c.
func (e *columnEncoder) chunkMetadata(leaf *leafInfo, c *column.Column, s Summary) format.ColumnChunk {
	encs := []format.Encoding{format.Plain}
	if leaf.maxRep > 0 || leaf.maxDef > 0 || e.dictOn {
		encs = append(encs, format.RLE)
	}
	encStats := []format.PageEncodingStats{{PageType: format.DataPage, Encoding: format.Plain, Count: e.pages}}
	if e.dictOn {
		encs = append(encs, format.RLEDictionary)
		encStats = []format.PageEncodingStats{
			{PageType: format.DictionaryPage, Encoding: format.Plain, Count: 1},
			{PageType: format.DataPage, Encoding: format.RLEDictionary, Count: e.pages},
		}
	}
	md := format.ColumnMetaData{
		Type:                  format.Type(leaf.kind),
		Encoding:              encs,
		PathInSchema:          leaf.path,
		Codec:                 format.Uncompressed,
		NumValues:             e.numValues,
		TotalUncompressedSize: e.uncompressed,
		TotalCompressedSize:   int64(len(e.out)) - e.firstPage,
		DataPageOffset:        e.dataPage,
		Statistics:            format.Statistics{NullCount: int64(s.Nulls)},
		EncodingStats:         encStats,
	}
	if e.dictOn {
		md.DictionaryPageOffset = e.firstPage
	}
	if e.compressed {
		md.Codec = e.codec.CompressionCodec()
	}
	if s.HasBounds {
		md.Statistics.MinValue, md.Statistics.MaxValue = footerBounds(leaf, c.At(s.Lo), c.At(s.Hi), s.NonFinite)
	}
	return format.ColumnChunk{FileOffset: e.firstPage, MetaData: md}
}

// footerBounds returns the PLAIN-encoded min and max for the chunk statistics, or nils
// when the column gets none.
func footerBounds(leaf *leafInfo, lo, hi parquet.Value, nonFinite bool) ([]byte, []byte) {
	switch leaf.kind {
	case parquet.Int32:
		return binary.LittleEndian.AppendUint32(nil, uint32(lo.Int32())), binary.LittleEndian.AppendUint32(nil, uint32(hi.Int32()))
	case parquet.Int64:
		return binary.LittleEndian.AppendUint64(nil, uint64(lo.Int64())), binary.LittleEndian.AppendUint64(nil, uint64(hi.Int64()))
	case parquet.Float:
		if nonFinite {
			return nil, nil
		}
		mn, mx := lo.Float(), hi.Float()
		if mn == 0 {
			mn = float32(math.Copysign(0, -1))
		}
		if mx == 0 {
			mx = 0
		}
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(mn)), binary.LittleEndian.AppendUint32(nil, math.Float32bits(mx))
	case parquet.Double:
		if nonFinite {
			return nil, nil
		}
		mn, mx := lo.Double(), hi.Double()
		if mn == 0 {
			mn = math.Copysign(0, -1)
		}
		if mx == 0 {
			mx = 0
		}
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(mn)), binary.LittleEndian.AppendUint64(nil, math.Float64bits(mx))
	case parquet.ByteArray:
		// Like Arrow's writer, no bounds past MaxFooterBound bytes: each would be stored
		// twice more, uncompressed, and a value of ~100 MB makes the footer unreadable to
		// readers with a thrift size limit (pyarrow). Delta's add.stats are separate.
		if len(lo.ByteArray()) > MaxFooterBound || len(hi.ByteArray()) > MaxFooterBound {
			return nil, nil
		}
		return append([]byte{}, lo.ByteArray()...), append([]byte{}, hi.ByteArray()...)
	case parquet.FixedLenByteArray:
		if leaf.signedFL {
			return append([]byte{}, lo.ByteArray()...), append([]byte{}, hi.ByteArray()...)
		}
	}
	return nil, nil
}
