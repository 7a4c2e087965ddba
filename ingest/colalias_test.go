package ingest

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"
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
// the flush every string value of the data file is a slice of its Kafka record's value.
// When the flush has ended (its file written and committed) the column buffers kept for
// the next flush hold no byte value at all, up to their capacity, so they retain nothing
// of the finished batch's records (issue 15: no RSS regression from the aliasing).
func TestColumnBuffersReleaseTheBatchRecords(t *testing.T) {
	h := newHarness(t, 1)
	const n = 300
	cfg := h.config()
	cfg.Batch = BatchConfig{MaxRecords: n, MaxBytes: 1 << 30, MaxAge: time.Minute} // flushes by records: n each
	var recs []*kgo.Record
	type seen struct{ strings, aliased int }
	seenCh := make(chan seen, 4)
	var m *member
	m = h.startHooked("a", cfg, nil, func(hk *hooks) {
		hk.beforeFlush = func(r []*kgo.Record) { recs = append(recs[:0], r...) }
		hk.beforeCommit = func(int) error {
			var s seen
			for _, c := range m.p.fl.colBufs {
				for _, v := range c.Values { // byte values are never dense
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
		for i := round * n; i < (round+1)*n; i++ {
			h.produceRaw(0, h.encodeCustomer(i, fmt.Sprintf("customer-%06d", i)))
		}
		h.waitHandled((round+1)*n, 20*time.Second, m)
		s := <-seenCh
		if s.strings != n || s.aliased != n {
			t.Fatalf("flush %d: %d string values in the columns at the commit, %d of them slices of the batch's records; want %d and %d",
				round, s.strings, s.aliased, n, n)
		}
		m.p.mu.Lock()
		var held, inBatch int
		for _, c := range m.p.fl.colBufs {
			for _, v := range c.Values[:cap(c.Values)] { // byte values are never dense
				if k := v.Kind(); (k == parquet.ByteArray || k == parquet.FixedLenByteArray) && !v.IsNull() {
					held++
					if within(v.ByteArray(), recs) {
						inBatch++
					}
				}
			}
		}
		m.p.mu.Unlock()
		if held != 0 || inBatch != 0 {
			t.Fatalf("flush %d ended: the kept column buffers hold %d byte values, %d of them in the finished batch's records; want none", round, held, inBatch)
		}
	}
}
