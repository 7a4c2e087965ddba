package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
)

// The batch.max_bytes budget charges a record its raw bytes plus the decoded bytes a
// flush makes of them (docs/architecture.md, "Memory"): one flush of known records
// measures the ratio exactly, and budgetSize charges by it.
func TestByteBudgetMeasuresDecodedValues(t *testing.T) {
	h := newHarness(t, 1)
	const n = 300
	cfg := h.config()
	cfg.Batch = config.Batch{MaxRecords: n, MaxBytes: 1 << 30, MaxAge: time.Minute} // one flush, by records
	var raw, decoded int64
	for id := int64(0); id < n; id++ {
		key, val := fmt.Appendf(nil, "%d", id), h.encode(id, 0)
		raw += int64(len(key) + len(val))
		// The body after the 5-byte frame; 3 columns: order_id (long) and amount
		// (decimal(10,2), INT64) dense words, customer (string) in the byte form, an end
		// offset and its bytes, held in the column (column.Column.ByteSize).
		decoded += int64(len(val)-5) + 3*denseBytes + int64(len(fmt.Sprintf("c-%d", id%17)))
	}
	h.produce(0, n, 0, 1, -1)
	m := h.startWith("a", cfg, nil)
	h.waitHandled(n, 20*time.Second, m)
	tok := m.p.acquireFlush()
	got := m.p.decodedPerByte
	size := m.p.budgetSize(&kgo.Record{Key: make([]byte, 10), Value: make([]byte, 90)})
	m.p.releaseFlush(tok)
	if want := float64(decoded) / float64(raw); got != want {
		t.Fatalf("decodedPerByte = %v, want %v (%d decoded bytes of %d raw)", got, want, decoded, raw)
	}
	if want := 100 + int64(100*got) + recordOverhead; size != want {
		t.Fatalf("budgetSize of a 100-byte record = %d, want %d", size, want)
	}
	if valueBytes != 24 || denseBytes != 8 {
		t.Fatalf("valueBytes = %d, denseBytes = %d, want 24 (parquet.Value) and 8 (a dense word)", valueBytes, denseBytes)
	}
	if recordOverhead < 200 || recordOverhead > 400 {
		t.Fatalf("recordOverhead = %d, want the ~250 bytes of a kgo.Record and an item", recordOverhead)
	}
}

// A batch whose raw bytes are under batch.max_bytes but whose decoded values would take it
// over is flushed by the bytes bound, long before max_age.
func TestByteBudgetFlushesOnDecodedBytes(t *testing.T) {
	h := newHarness(t, 1)
	const n = 200
	var raw int64
	sizes := make([]int64, n)
	for id := int64(0); id < n; id++ {
		sizes[id] = int64(len(fmt.Appendf(nil, "%d", id)) + len(h.encode(id, 0)))
		raw += sizes[id]
	}
	// The first flush takes the records up to the one whose charge reaches the batch's
	// share of the budget: half of batch.max_bytes (batchBytes; the other half is the batch
	// in flight's).
	first, charged := int64(0), int64(0)
	for charged < raw {
		charged += sizes[first] + int64(float64(sizes[first])*initialDecodedPerByte(config.FormatAvro)) + recordOverhead
		first++
	}
	cfg := h.config()
	// The raw bytes of all the records are one batch's share (half the budget); charged
	// with their decoded values and recordOverhead (1 + initialDecodedPerByte(avro),
	// +recordOverhead each) they exceed it.
	cfg.Batch = config.Batch{MaxRecords: 1 << 20, MaxBytes: config.ByteSize(2 * raw), MaxAge: 10 * time.Minute}
	h.produce(0, n, 0, 1, -1)
	m := h.startWith("a", cfg, nil)
	h.waitHandled(first, 20*time.Second, m) // the first commit: age is 10 min away
	if got := testutil.ToFloat64(h.metrics.BatchFlushes.WithLabelValues("orders", "bytes")); got < 1 {
		t.Fatalf("bytes-triggered flushes = %v, want at least 1", got)
	}
	if got := firstCommitHandled(t, h.tableDir); got != first {
		t.Fatalf("the first commit handled %d records, want %d (raw %d bytes, budget %d, batch share %d)", got, first, raw, 2*raw, raw)
	}
}

// firstCommitHandled is the number of records of partition 0 that the table's first
// commit (version 0) records in its txn.
func firstCommitHandled(t *testing.T, dir string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var a struct {
			Txn *struct{ Version int64 } `json:"txn"`
		}
		if err := json.Unmarshal(line, &a); err != nil {
			t.Fatal(err)
		}
		if a.Txn != nil {
			return a.Txn.Version + 1
		}
	}
	t.Fatal("version 0 has no txn")
	return 0
}
