package parquetenc

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/rle"
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
		if sums[i], err = e.column(i, &leaves[i], &cols[i], numRows); err != nil {
			return nil, err
		}
	}
	return sums, nil
}

type leafInfo struct {
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
		li := leafInfo{path: path, typ: t, kind: t.Kind(), maxRep: leaf.MaxRepetitionLevel, maxDef: leaf.MaxDefinitionLevel}
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

	// per column chunk
	numValues    int64
	uncompressed int64
	pages        int32
	firstPage    int64
	dataPage     int64 // offset of the first data page
}

// Dictionary encoding (RLE_DICTIONARY data pages after one PLAIN dictionary page, as
// arrow-go and parquet-mr write) is used for a BYTE_ARRAY, INT32 or INT64 column whose
// first dictProbe non-null values hold at most a quarter distinct values; the column falls
// back to PLAIN (re-encoded from the start) when its dictionary passes dictMaxEntries
// entries or dictMaxBytes bytes (a variable for tests).
const (
	dictProbe      = 1024
	dictMaxEntries = 1 << 16
)

var dictMaxBytes = 1 << 20

var errDictFull = errors.New("dictionary full")

var dictSeed = maphash.MakeSeed()

// bytesDict is an open-addressing hash set of the BYTE_ARRAY dictionary entries, whose
// bytes live in the dictionary page buffer (cheaper than a map[string]int32, which
// spent a third of the encode time of string columns). Hashes come from hashBytes: for
// values of at most 8 bytes the hash is exact (equal hash and length mean equal bytes),
// so find compares no bytes for them.
type bytesDict struct {
	slots  []int32  // entry+1, 0 = empty; len a power of two
	hashes []uint64 // per entry
	off    []int32  // per entry: start of its bytes in the page buffer
	size   []int32  // per entry: length
}

func (d *bytesDict) reset() {
	if len(d.slots) == 0 {
		d.slots = make([]int32, 1024)
	}
	clear(d.slots)
	d.hashes, d.off, d.size = d.hashes[:0], d.off[:0], d.size[:0]
}

// find returns the entry holding b (hash h), or -1; page is the dictionary page buffer.
func (d *bytesDict) find(page, b []byte, h uint64) int32 {
	mask := uint64(len(d.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := d.slots[i]
		if s == 0 {
			return -1
		}
		k := s - 1
		if d.hashes[k] == h && int(d.size[k]) == len(b) && (len(b) <= 8 || bytes.Equal(page[d.off[k]:int(d.off[k])+len(b)], b)) {
			return k
		}
	}
}

// add appends an entry (hash h, bytes at page[off:off+n]) absent from d.
func (d *bytesDict) add(h uint64, off, n int) {
	k := int32(len(d.hashes))
	d.hashes = append(d.hashes, h)
	d.off = append(d.off, int32(off))
	d.size = append(d.size, int32(n))
	if 2*len(d.hashes) > len(d.slots) {
		d.slots = make([]int32, 2*len(d.slots))
		for e, eh := range d.hashes {
			d.insert(eh, int32(e))
		}
		return
	}
	d.insert(h, k)
}

func (d *bytesDict) insert(h uint64, k int32) {
	mask := uint64(len(d.slots) - 1)
	i := h & mask
	for d.slots[i] != 0 {
		i = (i + 1) & mask
	}
	d.slots[i] = k + 1
}

// hashBytes hashes a BYTE_ARRAY value for bytesDict and dictionaryPays. A value of at
// most 8 bytes is packed into a uint64 that, for a given length, determines its bytes
// (lengths 4–8: the first and last 4 bytes; 1–3: the first, middle and last byte), then
// mixed by mix64, a keyed bijection: equal hashes of equal lengths mean equal values. Longer
// values take maphash (AES where the CPU has it). The hash never reaches the file: the
// dictionary is in first-occurrence order.
func hashBytes(b []byte) uint64 {
	n := len(b)
	var key uint64
	switch {
	case n > 8:
		return maphash.Bytes(dictSeed, b)
	case n >= 4:
		key = uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<32
	case n > 0:
		key = uint64(b[0]) | uint64(b[n>>1])<<8 | uint64(b[n-1])<<16
	}
	return mix64(key) + uint64(n)*0x9e3779b97f4a7c15
}

// mixSeed is a random per-process key for mix64 (from dictSeed), so that the values of a
// record, which a producer controls, cannot be chosen to collide in the dictionary tables'
// slots (a public mix is invertible: colliding inputs could be computed, making every
// lookup probe the whole table).
var mixSeed = maphash.String(dictSeed, "ingestd mix64 seed")

// mix64 is fmix64 of x keyed by mixSeed: a bijection on uint64 (so exact keys stay
// exact) that spreads every input bit over the low bits the tables index by.
func mix64(x uint64) uint64 { return fmix64(x ^ mixSeed) }

// fmix64 is MurmurHash3's 64-bit finaliser, a bijection on uint64.
func fmix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// intDict is an open-addressing hash map from the bits of an INT32 or INT64 value to
// its dictionary entry (cheaper than a map[uint64]int32: no per-lookup hashing call,
// one probe in the common case).
type intDict struct {
	slots []int32  // entry+1, 0 = empty; len a power of two
	keys  []uint64 // per entry
}

func (d *intDict) reset() {
	if len(d.slots) == 0 {
		d.slots = make([]int32, 1024)
	}
	clear(d.slots)
	d.keys = d.keys[:0]
}

// index returns the entry of x, adding it as the next entry if absent (added reports
// that).
func (d *intDict) index(x uint64) (k int32, added bool) {
	mask := uint64(len(d.slots) - 1)
	i := mix64(x) & mask
	for {
		s := d.slots[i]
		if s == 0 {
			break
		}
		if d.keys[s-1] == x {
			return s - 1, false
		}
		i = (i + 1) & mask
	}
	k = int32(len(d.keys))
	d.keys = append(d.keys, x)
	if 2*len(d.keys) > len(d.slots) {
		d.slots = make([]int32, 2*len(d.slots))
		mask = uint64(len(d.slots) - 1)
		for e, ek := range d.keys {
			j := mix64(ek) & mask
			for d.slots[j] != 0 {
				j = (j + 1) & mask
			}
			d.slots[j] = int32(e) + 1
		}
		return k, true
	}
	d.slots[i] = k + 1
	return k, true
}

// dictionaryPays reports whether vals (a BYTE_ARRAY, INT32 or INT64 column) looks
// low-cardinality: its first dictProbe non-null values hold at most a quarter distinct
// values. Byte arrays are told apart by hashBytes (exact up to 8 bytes; longer values by
// a 64-bit hash, whose collisions among 1,024 values are too rare to matter for a
// heuristic).
func (e *columnEncoder) dictionaryPays(vals []parquet.Value, kind parquet.Kind, maxDef int) bool {
	e.probe.reset()
	n := 0
	for j := range vals {
		if n == dictProbe {
			break
		}
		v := &vals[j]
		if int(v.DefinitionLevel()) < maxDef || v.Kind() != kind {
			continue // nulls; wrong kinds are reported by the encode pass
		}
		var x uint64
		switch kind {
		case parquet.ByteArray:
			x = hashBytes(v.ByteArray())
		case parquet.Int32:
			x = uint64(uint32(v.Int32()))
		default:
			x = uint64(v.Int64())
		}
		e.probe.index(x)
		n++
		if len(e.probe.keys)*4 > dictProbe {
			return false
		}
	}
	return n > 0 && len(e.probe.keys)*4 <= n
}

// dictIndexN returns the dictionary index of the fixed-width value with bits x (width
// 4 or 8 bytes), adding it for its first occurrence j, or errDictFull.
func (e *columnEncoder) dictIndexN(x uint64, width, j int) (int32, error) {
	k, added := e.dictN.index(x)
	if !added {
		return k, nil
	}
	if len(e.dictFirst) >= dictMaxEntries || len(e.dictVals)+width > dictMaxBytes {
		return 0, errDictFull // the column is re-encoded PLAIN: the extra entry is never read
	}
	e.dictFirst = append(e.dictFirst, j)
	if width == 4 {
		e.dictVals = binary.LittleEndian.AppendUint32(e.dictVals, uint32(x))
	} else {
		e.dictVals = binary.LittleEndian.AppendUint64(e.dictVals, x)
	}
	return k, nil
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
	e.codec, e.encode, e.compressed = codec, encode, false
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
	e.codec = nil
	encoders.Put(e)
}

// column validates c against leaf (levels within bounds, non-null exactly at the
// maximum definition level, the leaf's physical kind and width, the column index, and
// numRows rows), summarises it, and, when encoding, appends its pages to e.out. A dense
// c takes the dense pass (denseColumn); the summary's lo and hi index c's entries
// (c.At) in either form.
func (e *columnEncoder) column(ci int, leaf *leafInfo, c *column.Column, numRows int) (Summary, error) {
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

func (e *columnEncoder) columnPass(ci int, leaf *leafInfo, vals []parquet.Value, numRows int, dict bool) (Summary, error) {
	var s Summary
	name := func() string { return strings.Join(leaf.path, ".") }
	maxRep, maxDef := leaf.maxRep, leaf.maxDef
	kind := leaf.kind
	e.beginChunk(dict, false)
	defer e.endChunk(dict) // back to the file buffer, also on errors
	rows, pageStart, pageNulls, nbits := 0, 0, 0, 0
	// the current minimum and maximum (of s.lo and s.hi), kept unpacked
	var loI, hiI int64
	var loF, hiF float64
	var loB, hiB []byte
	// the previous BYTE_ARRAY value of a dictionary pass and its entry
	var prevB []byte
	prevK := int32(-1)
	for j := range vals {
		v := &vals[j]
		r, d := int(v.RepetitionLevel()), int(v.DefinitionLevel())
		if r == 0 {
			if e.encode && len(e.vals)+2*len(e.idx)+(j-pageStart)>>3 >= pageTargetBytes {
				if err := e.flushPage(leaf, j-pageStart, pageNulls); err != nil {
					return s, fmt.Errorf("column %s: %w", name(), err)
				}
				pageStart, pageNulls, nbits = j, 0, 0
			}
			rows++
		} else if j == 0 {
			return s, fmt.Errorf("column %s: first value has repetition level %d, want 0", name(), r)
		}
		if r > maxRep || d > maxDef {
			return s, fmt.Errorf("column %s value %d: levels (%d,%d) exceed max (%d,%d)", name(), j, r, d, maxRep, maxDef)
		}
		if v.Column() != ci {
			return s, fmt.Errorf("column %s value %d: carries column index %d, want %d", name(), j, v.Column(), ci)
		}
		if e.encode {
			if maxRep > 0 {
				e.reps = append(e.reps, byte(r))
			}
			if maxDef > 0 {
				e.defs = append(e.defs, byte(d))
			}
		}
		if d < maxDef {
			if !v.IsNull() {
				return s, fmt.Errorf("column %s value %d: null=false at definition level %d of %d", name(), j, d, maxDef)
			}
			s.Nulls++
			pageNulls++
			continue
		}
		if v.Kind() != kind { // a null Value has kind 0 (not a physical kind)
			if v.IsNull() {
				return s, fmt.Errorf("column %s value %d: null=true at definition level %d of %d", name(), j, d, maxDef)
			}
			return s, fmt.Errorf("column %s value %d: %v value for a %v column", name(), j, v.Kind(), kind)
		}
		switch kind {
		case parquet.Boolean:
			if e.encode {
				if nbits&7 == 0 {
					e.vals = append(e.vals, 0)
				}
				if v.Boolean() {
					e.vals[len(e.vals)-1] |= 1 << (nbits & 7)
				}
				nbits++
			}
		case parquet.Int32:
			x := v.Int32()
			if dict {
				k, err := e.dictIndexN(uint64(uint32(x)), 4, j)
				if err != nil {
					return s, err
				}
				e.idx = append(e.idx, k)
				continue
			}
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint32(e.vals, uint32(x))
			}
			if y := int64(x); !s.HasBounds {
				s.Lo, s.Hi, s.HasBounds, loI, hiI = j, j, true, y, y
			} else if y < loI {
				s.Lo, loI = j, y
			} else if y > hiI {
				s.Hi, hiI = j, y
			}
		case parquet.Int64:
			x := v.Int64()
			if dict {
				k, err := e.dictIndexN(uint64(x), 8, j)
				if err != nil {
					return s, err
				}
				e.idx = append(e.idx, k)
				continue
			}
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint64(e.vals, uint64(x))
			}
			if !s.HasBounds {
				s.Lo, s.Hi, s.HasBounds, loI, hiI = j, j, true, x, x
			} else if x < loI {
				s.Lo, loI = j, x
			} else if x > hiI {
				s.Hi, hiI = j, x
			}
		case parquet.Float:
			x := v.Float()
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint32(e.vals, math.Float32bits(x))
			}
			if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
				s.NonFinite = true
			}
			if y := float64(x); !s.HasBounds { // exact: float32 order is float64 order
				s.Lo, s.Hi, s.HasBounds, loF, hiF = j, j, true, y, y
			} else {
				if y < loF {
					s.Lo, loF = j, y
				}
				if y > hiF {
					s.Hi, hiF = j, y
				}
			}
		case parquet.Double:
			x := v.Double()
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint64(e.vals, math.Float64bits(x))
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				s.NonFinite = true
			}
			if !s.HasBounds {
				s.Lo, s.Hi, s.HasBounds, loF, hiF = j, j, true, x, x
			} else {
				if x < loF {
					s.Lo, loF = j, x
				}
				if x > hiF {
					s.Hi, hiF = j, x
				}
			}
		case parquet.ByteArray:
			b := v.ByteArray()
			if dict {
				// A value longer than 8 bytes equal to the previous one (a repeated
				// note, a constant tag) reuses its entry: one compare instead of hashing
				// it and comparing it in the table.
				if len(b) > 8 && len(b) == len(prevB) && prevK >= 0 && bytes.Equal(b, prevB) {
					e.idx = append(e.idx, prevK)
					continue
				}
				k, err := e.dictIndexBytes(b, j)
				if err != nil {
					return s, err
				}
				prevB, prevK = b, k
				e.idx = append(e.idx, k)
				continue
			}
			if e.encode {
				e.vals = binary.LittleEndian.AppendUint32(e.vals, uint32(len(b)))
				e.vals = append(e.vals, b...)
			}
			if !s.HasBounds {
				s.Lo, s.Hi, s.HasBounds, loB, hiB = j, j, true, b, b
			} else if bytes.Compare(b, loB) < 0 {
				s.Lo, loB = j, b
			} else if bytes.Compare(b, hiB) > 0 {
				s.Hi, hiB = j, b
			}
		case parquet.FixedLenByteArray:
			b := v.ByteArray()
			if len(b) != leaf.flbaLen {
				return s, fmt.Errorf("column %s value %d: %d bytes for a FIXED_LEN_BYTE_ARRAY(%d) column", name(), j, len(b), leaf.flbaLen)
			}
			if e.encode {
				e.vals = append(e.vals, b...)
			}
			cmp := bytes.Compare
			if leaf.signedFL {
				cmp = compareSignedBE
			}
			if !s.HasBounds {
				s.Lo, s.Hi, s.HasBounds, loB, hiB = j, j, true, b, b
			} else if cmp(b, loB) < 0 {
				s.Lo, loB = j, b
			} else if cmp(b, hiB) > 0 {
				s.Hi, hiB = j, b
			}
		}
	}
	if rows != numRows {
		return s, fmt.Errorf("column %s has %d rows, want %d", name(), rows, numRows)
	}
	if e.encode && len(vals) > pageStart {
		if err := e.flushPage(leaf, len(vals)-pageStart, pageNulls); err != nil {
			return s, fmt.Errorf("column %s: %w", name(), err)
		}
	}
	if dict {
		// min and max over the distinct values; each entry stands for its first
		// occurrence, so the first of equal values wins as in the PLAIN pass
		for _, j := range e.dictFirst {
			if !s.HasBounds {
				s.Lo, s.Hi, s.HasBounds = j, j, true
				continue
			}
			var clo, chi int
			switch kind {
			case parquet.ByteArray:
				b := vals[j].ByteArray()
				clo, chi = bytes.Compare(b, vals[s.Lo].ByteArray()), bytes.Compare(b, vals[s.Hi].ByteArray())
			case parquet.Int32:
				x := vals[j].Int32()
				clo, chi = cmp.Compare(x, vals[s.Lo].Int32()), cmp.Compare(x, vals[s.Hi].Int32())
			default:
				x := vals[j].Int64()
				clo, chi = cmp.Compare(x, vals[s.Lo].Int64()), cmp.Compare(x, vals[s.Hi].Int64())
			}
			if clo < 0 {
				s.Lo = j
			} else if chi > 0 {
				s.Hi = j
			}
		}
		if err := e.writeDictionary(); err != nil {
			return s, fmt.Errorf("column %s: %w", name(), err)
		}
	}
	return s, nil
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

// compareSignedBE compares two equal-length big-endian two's-complement integers.
func compareSignedBE(a, b []byte) int {
	if len(a) > 0 && len(b) > 0 && a[0] != b[0] {
		if int8(a[0]) < int8(b[0]) {
			return -1
		}
		return 1
	}
	return bytes.Compare(a, b)
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

// parallelMinValues is the number of column entries (all leaves: level entries of a
// levelled column, rows of a dense one) below which a file is
// encoded inline: starting a helper costs about a microsecond, a column of a few thousand
// values tens of them.
const parallelMinValues = 16 << 10

func countValues(cols []column.Column) int {
	n := 0
	for i := range cols {
		n += cols[i].Len()
	}
	return n
}

// encodeHelpersBusy counts the helper goroutines encoding column chunks, process-wide;
// at most GOMAXPROCS-1 (the callers themselves are the other encode goroutines).
var encodeHelpersBusy atomic.Int64

// acquireHelpers takes up to want helpers from the budget, without waiting, and returns
// how many it took (possibly 0).
func acquireHelpers(want int) int {
	limit := int64(runtime.GOMAXPROCS(0) - 1)
	for {
		busy := encodeHelpersBusy.Load()
		n := min(int64(want), limit-busy)
		if n <= 0 {
			return 0
		}
		if encodeHelpersBusy.CompareAndSwap(busy, busy+n) {
			return int(n)
		}
	}
}

func releaseHelpers(n int) {
	if n > 0 {
		encodeHelpersBusy.Add(-int64(n))
	}
}

// encodedChunk is one column chunk encoded by a worker: its bytes are
// enc.out[start:end], and md's offsets are positions in enc.out.
type encodedChunk struct {
	enc          *columnEncoder
	start, end   int
	md           format.ColumnChunk
	dict         bool
	uncompressed int64
	err          error
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
	sums = make([]Summary, len(leaves))
	chunks := make([]format.ColumnChunk, len(leaves))
	var totalUncompressed int64
	if helpers = min(helpers, len(leaves)-1); helpers <= 0 {
		for i := range leaves {
			if sums[i], err = e.column(i, &leaves[i], &cols[i], numRows); err != nil {
				return nil, nil, err
			}
			chunks[i] = e.chunkMetadata(&leaves[i], &cols[i], sums[i])
			totalUncompressed += e.uncompressed
		}
	} else if totalUncompressed, err = e.encodeColumnsParallel(leaves, cols, numRows, codec, helpers, sums, chunks); err != nil {
		return nil, nil, err
	}
	orders := make([]format.ColumnOrder, len(leaves))
	for i := range orders {
		orders[i] = format.ColumnOrder{Value: new(format.TypeDefinedOrder)}
	}
	md := format.FileMetaData{
		Version:      2,
		Schema:       schemaElements(schema),
		NumRows:      int64(numRows),
		CreatedBy:    parquetCreatedBy,
		ColumnOrders: orders,
		RowGroups: []format.RowGroup{{
			Columns:             chunks,
			TotalByteSize:       totalUncompressed,
			NumRows:             int64(numRows),
			FileOffset:          4,
			TotalCompressedSize: int64(len(e.out)) - 4,
		}},
	}
	e.hdr.Reset()
	if err := e.henc.Encode(&md); err != nil {
		return nil, nil, fmt.Errorf("encode footer: %w", err)
	}
	e.out = append(e.out, e.hdr.Bytes()...)
	e.out = binary.LittleEndian.AppendUint32(e.out, uint32(e.hdr.Len()))
	e.out = append(e.out, "PAR1"...)
	return e, sums, nil
}

// encodeColumnsParallel encodes the column chunks on the calling goroutine and helpers
// more, each with its own pooled columnEncoder taking the next column not yet taken,
// then appends the chunks to e.out in schema order, moving their footer offsets
// (ColumnChunk.file_offset, data_page_offset, dictionary_page_offset) to their place in
// the file. It fills sums and chunks and returns the columns' total uncompressed size.
// On errors it returns the error of the first failing column in schema order, as the
// inline pass does: columns are taken in order and a worker stops taking after a
// failure, so every column before a failed one has been encoded.
//
// Memory: the workers' buffers hold the encoded chunks (the file's size in all) until
// they are copied into e.out, so the file is held twice for the copy, plus each worker's
// page buffers (about 3 × pageTargetBytes and a dictionary of at most dictMaxBytes).
func (e *columnEncoder) encodeColumnsParallel(leaves []leafInfo, cols []column.Column, numRows int, codec compress.Codec, helpers int,
	sums []Summary, chunks []format.ColumnChunk) (int64, error) {
	res := make([]encodedChunk, len(leaves))
	workers := make([]*columnEncoder, helpers+1)
	for w := range workers {
		workers[w] = newColumnEncoder(codec, true)
	}
	defer func() {
		for _, w := range workers {
			w.release()
		}
	}()
	var next atomic.Int64
	var failed atomic.Bool
	work := func(w *columnEncoder) {
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= len(leaves) {
				return
			}
			start := len(w.out)
			s, err := w.column(i, &leaves[i], &cols[i], numRows)
			if err != nil {
				res[i].err = err
				failed.Store(true)
				return
			}
			sums[i] = s
			res[i] = encodedChunk{enc: w, start: start, end: len(w.out), md: w.chunkMetadata(&leaves[i], &cols[i], s),
				dict: w.dictOn, uncompressed: w.uncompressed}
		}
	}
	var wg sync.WaitGroup
	for _, w := range workers[1:] {
		wg.Go(func() { work(w) })
	}
	work(workers[0])
	wg.Wait()
	size := 0
	for i := range res {
		if res[i].err != nil {
			return 0, res[i].err
		}
		size += res[i].end - res[i].start
	}
	e.out = slices.Grow(e.out, size)
	var total int64
	for i := range res {
		r := &res[i]
		shift := int64(len(e.out) - r.start)
		e.out = append(e.out, r.enc.out[r.start:r.end]...)
		c := r.md
		c.FileOffset += shift
		c.MetaData.DataPageOffset += shift
		if r.dict {
			c.MetaData.DictionaryPageOffset += shift
		}
		chunks[i] = c
		total += r.uncompressed
	}
	return total, nil
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
