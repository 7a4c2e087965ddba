package ingest

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/ingest/config"
)

// The column buffers of an unpartitioned table are sized before the batch is decoded
// (one value per column and row the batch can write) and kept across flushes: the first
// flush reserves exactly its rows, and a steady-state flush of the same size neither grows
// nor replaces a column (no growslice inside the decode).
func TestColumnBuffersReservedAndKept(t *testing.T) {
	h := newHarness(t, 1)
	const n = 400
	cfg := h.config()
	cfg.Batch = config.Batch{MaxRecords: n, MaxBytes: 1 << 30, MaxAge: time.Minute} // flushes by records: n each
	m := h.startWith("a", cfg, nil)
	type buf struct {
		dense bool
		cap   int
		first unsafe.Pointer // the column's array, in the form it holds
		// the byte form's Bytes (a dense string column): capacity and array
		bytesCap   int
		bytesFirst unsafe.Pointer
	}
	bufs := func() []buf {
		tok := m.p.acquireFlush()
		defer m.p.releaseFlush(tok)
		var out []buf
		for i := range m.p.fl.colBufs {
			c := &m.p.fl.colBufs[i]
			if c.IsDense() {
				b := buf{dense: true, cap: cap(c.Dense), first: unsafe.Pointer(&c.Dense[:1][0])}
				if cap(c.Bytes) > 0 {
					b.bytesCap, b.bytesFirst = cap(c.Bytes), unsafe.Pointer(&c.Bytes[:1][0])
				}
				out = append(out, b)
			} else {
				out = append(out, buf{dense: false, cap: cap(c.Values), first: unsafe.Pointer(&c.Values[:1][0])})
			}
		}
		return out
	}
	var first []buf
	for round := int64(0); round < 3; round++ {
		h.produce(round*n, n, 0, 1, -1)
		h.waitHandled((round+1)*n, 20*time.Second, m)
		got := bufs()
		if len(got) != 3 {
			t.Fatalf("flush %d: %d column buffers, want 3 (order_id, customer, amount)", round, len(got))
		}
		// order_id (long) and amount (decimal(10,2): INT64) are dense words, customer
		// (string) in the byte form: an end offset a row, its bytes in Bytes.
		if forms := [3]bool{got[0].dense, got[1].dense, got[2].dense}; forms != [3]bool{true, true, true} {
			t.Fatalf("flush %d: dense forms %v, want [true true true] (order_id, customer, amount)", round, forms)
		}
		if round == 0 {
			for i, b := range got {
				if b.cap != n {
					t.Fatalf("flush 0: column %d has capacity %d, want exactly %d (reserved for the batch's rows, not grown)", i, b.cap, n)
				}
				if (b.bytesCap > 0) != (i == 1) {
					t.Fatalf("flush 0: column %d has Bytes capacity %d; want Bytes for customer (column 1) only", i, b.bytesCap)
				}
			}
			first = got
			continue
		}
		for i, b := range got {
			if b != first[i] {
				t.Fatalf("flush %d: column %d is %+v, want the first flush's array %+v (kept, not grown)", round, i, b, first[i])
			}
		}
	}
	if !m.p.fl.colsClean {
		t.Fatal("colsClean is false after flushes of small records: every value points into the arena")
	}
}

// A large value (a 20 KiB string) does not stay reachable from the column buffers once
// its flush has ended: the flusher's values alias the records (decode.Arena.AliasPayloads;
// the string no longer gets its own arena allocation, which made colsClean false and the
// next prepare clear the buffers), and releaseCols clears every byte value when the flush
// ends, so the buffers are clean at once, for large and small records alike.
func TestColumnBuffersClearedAfterLargeValues(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Batch = config.Batch{MaxRecords: 2, MaxBytes: 1 << 30, MaxAge: time.Minute}
	m := h.startWith("a", cfg, nil)
	big := h.encodeCustomer(0, strings.Repeat("x", 20<<10))
	h.produceRaw(0, big, h.encode(1, 0))
	h.waitHandled(2, 20*time.Second, m)
	// byteValues counts the byte values left in the kept buffers (up to capacity) and the
	// longest of them.
	byteValues := func() (n, longest int, clean bool) {
		tok := m.p.acquireFlush()
		defer m.p.releaseFlush(tok)
		for _, c := range m.p.fl.colBufs {
			for _, v := range c.Values[:cap(c.Values)] { // byte values are never dense
				if k := v.Kind(); (k == parquet.ByteArray || k == parquet.FixedLenByteArray) && !v.IsNull() {
					n++
					longest = max(longest, len(v.ByteArray()))
				}
			}
		}
		return n, longest, m.p.fl.colsClean
	}
	if n, longest, clean := byteValues(); n != 0 || !clean {
		t.Fatalf("after a flush with a 20 KiB string: %d byte values left in the buffers (longest %d bytes), colsClean %v; want none, true", n, longest, clean)
	}
	h.produce(2, 2, 0, 1, -1)
	h.waitHandled(4, 20*time.Second, m)
	if n, longest, clean := byteValues(); n != 0 || !clean {
		t.Fatalf("after a flush of small records: %d byte values left in the buffers (longest %d bytes), colsClean %v; want none, true", n, longest, clean)
	}
}

// reserve sizes a batch's columns from its first rows: a column of one value per row for
// every candidate row, a repeated field's column for its sampled values per row plus an
// eighth, a dense column's words for every candidate row; nothing when that would exceed
// batch.max_bytes at 24 bytes a levelled value and 8 a dense word.
func TestReserveFromSample(t *testing.T) {
	mk := func() *prepared {
		dense := column.Column{}
		dense.Reset(column.Leaf{Index: 3, Kind: parquet.Int64, MaxDef: 1})
		dense.Dense = make([]uint64, 256) // one word per row
		dense.Dense[255] = 9              // kept by the growth
		b := &prepared{rows: 256, candidates: 1000, cols: []column.Column{
			column.Levelled(make([]parquet.Value, 256, 1000)), // one value per row, reserved by prepare
			column.Levelled(make([]parquet.Value, 1024)),      // a list of 4 items per row
			column.Levelled(make([]parquet.Value, 256)),
			dense,
		}}
		b.cols[1].Values[1023] = parquet.Int64Value(7) // kept by the growth
		return b
	}
	caps := func(b *prepared) []int {
		return []int{cap(b.cols[0].Values), cap(b.cols[1].Values), cap(b.cols[2].Values), cap(b.cols[3].Dense)}
	}
	b := mk()
	b.reserve(128 << 20)
	if got := caps(b); got[0] != 1000 || got[1] < 4500 || got[2] < 1000 || got[3] < 1000 {
		t.Fatalf("capacities after reserve %v, want [1000, ≥4500, ≥1000, ≥1000]", got)
	}
	if got := []int{b.cols[0].Len(), b.cols[1].Len(), b.cols[2].Len(), b.cols[3].Len()}; got[0] != 256 || got[1] != 1024 || got[2] != 256 || got[3] != 256 {
		t.Fatalf("lengths after reserve %v, want the decoded [256 1024 256 256]", got)
	}
	if v := b.cols[1].Values[1023]; v.Int64() != 7 {
		t.Fatalf("a decoded value changed in the growth: %v", v)
	}
	if !b.cols[3].IsDense() || b.cols[3].Dense[255] != 9 || cap(b.cols[3].Values) != 0 {
		t.Fatalf("the dense column after reserve: dense %v, last word %d, %d levelled values reserved; want dense, 9, none",
			b.cols[3].IsDense(), b.cols[3].Dense[255], cap(b.cols[3].Values))
	}
	// 1000 + 4500 + 1000 values of 24 bytes and 1000 words of 8 are 164,000 bytes: within
	// 170,000 (at 24 bytes a word it would be 180,000), over 100,000.
	b = mk()
	b.reserve(170_000)
	if got := caps(b); got[0] != 1000 || got[1] < 4500 || got[2] < 1000 || got[3] < 1000 {
		t.Fatalf("capacities after reserve within a 170,000-byte budget %v, want [1000, ≥4500, ≥1000, ≥1000]", got)
	}
	b = mk()
	b.reserve(100_000)
	if got := caps(b); got[0] != 1000 || got[1] != 1024 || got[2] != 256 || got[3] != 256 {
		t.Fatalf("capacities after reserve over budget %v, want them unchanged [1000 1024 256 256]", got)
	}
}
