package parquetenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"

	"github.com/parquet-go/parquet-go"
)

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
