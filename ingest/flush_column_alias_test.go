package ingest

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
)

// within reports whether b's bytes lie inside one of recs' values.
func within(b []byte, recs []*kgo.Record) bool {
	if len(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, r := range recs {
		if len(r.Value) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(r.Value)))
		if p >= lo && p < lo+uintptr(len(r.Value)) {
			return true
		}
	}
	return false
}

// The flusher decodes without copying the records (decode.Arena.AliasPayloads): during
// a flush with every column levelled (flusher.levelled) every string value of the data
// file is a slice of its Kafka record's value; with the byte form (a non-repeated string
// column whose values are set, column.Column) the string bytes are copied once, straight
// from the records into the column's own Bytes, back to back, and nothing of the column
// lies inside a record. When the flush has ended (its file written and committed) the
// column buffers kept for the next flush hold no byte value at all, up to their
// capacity, and the byte form's Bytes are the column's own, so they retain nothing of the
// finished batch's records (the aliasing must not make the RSS grow).
func TestColumnBuffersReleaseTheBatchRecords(t *testing.T) {
	h := newHarness(t, 1)
	const n = 300
	cfg := h.config()
	cfg.Batch = config.Batch{MaxRecords: n, MaxBytes: 1 << 30, MaxAge: time.Minute} // flushes by records: n each
	var recs []*kgo.Record
	type seen struct {
		strings, aliased int    // levelled string values, and those inside the records
		dense            int    // rows of byte-form columns
		bytes            string // the byte-form columns' Bytes
		bytesInBatch     bool   // a byte-form column's Bytes lie inside a record
	}
	seenCh := make(chan seen, 4)
	var m *member
	m = h.startHooked("a", cfg, nil, func(hk *hooks) {
		hk.beforeFlush = func(r []*kgo.Record) { recs = append(recs[:0], r...) }
		hk.beforeCommit = func(int) error {
			var s seen
			for i := range m.p.fl.colBufs {
				c := &m.p.fl.colBufs[i]
				if c.IsDense() && c.Leaf().Kind == parquet.ByteArray {
					s.dense += c.Len()
					s.bytes += string(c.Bytes)
					s.bytesInBatch = s.bytesInBatch || within(c.Bytes, recs)
				}
				for _, v := range c.Values {
					if v.Kind() == parquet.ByteArray && !v.IsNull() {
						s.strings++
						if within(v.ByteArray(), recs) {
							s.aliased++
						}
					}
				}
			}
			seenCh <- s
			return nil
		}
	})
	for round := int64(0); round < 2; round++ {
		levelled := round == 1
		tok := m.p.acquireFlush()
		m.p.fl.levelled = levelled // between flushes: the next one starts every column levelled
		m.p.releaseFlush(tok)
		var customers string
		for i := round * n; i < (round+1)*n; i++ {
			c := fmt.Sprintf("customer-%06d", i)
			customers += c
			h.produceRaw(0, h.encodeCustomer(i, c))
		}
		h.waitHandled((round+1)*n, 20*time.Second, m)
		s := <-seenCh
		if levelled {
			if s.strings != n || s.aliased != n || s.dense != 0 {
				t.Fatalf("levelled flush %d: %d string values in the columns at the commit, %d of them slices of the batch's records, %d byte-form rows; want %d, %d and 0",
					round, s.strings, s.aliased, s.dense, n, n)
			}
		} else if s.strings != 0 || s.dense != n || s.bytes != customers || s.bytesInBatch {
			t.Fatalf("flush %d: %d levelled string values, %d byte-form rows holding %d bytes (the customers' %d in order: %v), inside the records: %v; want 0, %d rows of the customers' bytes, not inside the records",
				round, s.strings, s.dense, len(s.bytes), len(customers), s.bytes == customers, s.bytesInBatch, n)
		}
		tok = m.p.acquireFlush()
		var held, inBatch int
		bytesInBatch := false
		for i := range m.p.fl.colBufs {
			c := &m.p.fl.colBufs[i]
			bytesInBatch = bytesInBatch || within(c.Bytes[:cap(c.Bytes)], recs)
			for _, v := range c.Values[:cap(c.Values)] {
				if k := v.Kind(); (k == parquet.ByteArray || k == parquet.FixedLenByteArray) && !v.IsNull() {
					held++
					if within(v.ByteArray(), recs) {
						inBatch++
					}
				}
			}
		}
		m.p.releaseFlush(tok)
		if held != 0 || inBatch != 0 || bytesInBatch {
			t.Fatalf("flush %d ended: the kept column buffers hold %d byte values, %d of them in the finished batch's records (Bytes inside them: %v); want none", round, held, inBatch, bytesInBatch)
		}
	}
}
