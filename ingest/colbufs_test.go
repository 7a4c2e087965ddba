package ingest

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/sr"
)

// The column buffers of an unpartitioned table are sized before the batch is decoded
// (one value per column and row the batch can write) and kept across flushes: the first
// flush reserves exactly its rows, and a steady-state flush of the same size neither grows
// nor replaces a column (issue 15: growslice inside the decode).
func TestColumnBuffersReservedAndKept(t *testing.T) {
	h := newHarness(t, 1)
	const n = 400
	cfg := h.config()
	cfg.Batch = BatchConfig{MaxRecords: n, MaxBytes: 1 << 30, MaxAge: time.Minute} // flushes by records: n each
	m := h.startWith("a", cfg, nil)
	type buf struct {
		cap   int
		first *parquet.Value
	}
	bufs := func() []buf {
		m.p.mu.Lock()
		defer m.p.mu.Unlock()
		var out []buf
		for _, c := range m.p.fl.colBufs {
			out = append(out, buf{cap(c), &c[:1][0]})
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
		if round == 0 {
			for i, b := range got {
				if b.cap != n {
					t.Fatalf("flush 0: column %d has capacity %d, want exactly %d (reserved for the batch's rows, not grown)", i, b.cap, n)
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

// Values the arena does not keep (a string of 16 KiB or more gets its own allocation)
// make the next flush clear the column buffers before reusing them, so that the last
// batch's large values can be freed while the next is decoded; small records do not.
func TestColumnBuffersClearedAfterLargeValues(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Batch = BatchConfig{MaxRecords: 2, MaxBytes: 1 << 30, MaxAge: time.Minute}
	m := h.startWith("a", cfg, nil)
	big := h.encodeCustomer(0, strings.Repeat("x", 20<<10))
	h.produceRaw(0, big, h.encode(1, 0))
	h.waitHandled(2, 20*time.Second, m)
	m.p.mu.Lock()
	clean := m.p.fl.colsClean
	m.p.mu.Unlock()
	if clean {
		t.Fatal("colsClean is true after a flush with a 20 KiB string: its own allocation would stay reachable from the buffers")
	}
	h.produce(2, 2, 0, 1, -1)
	h.waitHandled(4, 20*time.Second, m)
	m.p.mu.Lock()
	clean = m.p.fl.colsClean
	m.p.mu.Unlock()
	if !clean {
		t.Fatal("colsClean is false after a flush of small records")
	}
}

// encodeCustomer is encode(id, 0) with the given customer.
func (h *harness) encodeCustomer(id int64, customer string) []byte {
	body, err := avro.Marshal(h.schemas[0], map[string]any{"order_id": id, "customer": customer, "amount": big.NewRat(id, 100)})
	if err != nil {
		h.t.Fatal(err)
	}
	var hdr sr.ConfluentHeader
	framed, err := hdr.AppendEncode(nil, h.ids[0], nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return append(framed, body...)
}
