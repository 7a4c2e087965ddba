package ingest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
)

// checkInOrder asserts that the commits of a one-partition table hold orders 1..n in
// offset order: each commit's rows are the next contiguous run of ids (order id = offset
// + 1) and its txn version is the offset of its last row, so no commit passed a record
// that an earlier commit did not hold.
func (h *harness) checkInOrder(n int64) []commitLog {
	h.t.Helper()
	cs := h.commits()
	next := int64(1)
	for _, c := range cs {
		for _, id := range c.ids {
			if id != next {
				h.t.Fatalf("commit %d holds order %d where order %d was due (ids %d..%d)", c.version, id, next, c.ids[0], c.ids[len(c.ids)-1])
			}
			next++
		}
		if v, ok := c.txns["orders-orders-0"]; len(c.ids) > 0 && (!ok || v != next-2) {
			h.t.Fatalf("commit %d: txn version %d (present %v), want %d (its last row's offset)", c.version, v, ok, next-2)
		}
	}
	if next != n+1 {
		h.t.Fatalf("the commits hold orders 1..%d, want 1..%d", next-1, n)
	}
	return cs
}

// flushWaitSum is the sum and count of ingestd_flush_wait_seconds for the orders pipeline.
func (h *harness) flushWaitSum() (sum float64, count uint64) {
	h.t.Helper()
	mfs, err := h.promReg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ingestd_flush_wait_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pipeline" && l.GetValue() == "orders" {
					return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	h.t.Fatal("ingestd_flush_wait_seconds{pipeline=\"orders\"} is not exported")
	return 0, 0
}

// TestPollLoopBatchesWhileFlushInFlight: while the flush worker is blocked inside a
// flush (hooks.beforeFlush), the poll loop keeps polling and fills the next batch up to
// batch.max_records (100) and no further (backpressure: one batch in flight, one being
// filled); the next flush starts only after the blocked one has committed; the time the
// loop waited is in ingestd_flush_wait_seconds. Every record lands once, in order.
func TestPollLoopBatchesWhileFlushInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Batch.MaxRecords, cfg.Batch.MaxAge = 100, time.Minute // only the record bound fires; the drain takes the rest
	h.produce(1, 230, 0, 1, -1)
	started, release := newLatch(), newLatch()
	var calls atomic.Int32
	var sizes []int
	var handledAtSecond int64 = -1
	m := h.startHooked("a", cfg, nil, func(hk *hooks) {
		hk.beforeFlush = func(recs []*kgo.Record) {
			sizes = append(sizes, len(recs)) // the worker's goroutine only; read after it stopped
			switch calls.Add(1) {
			case 1:
				started.open()
				release.wait()
			case 2:
				handledAtSecond = h.handled()
			}
		}
	})
	t.Cleanup(release.open) // runs before the member's cleanup: a failed test does not leave the worker blocked
	// The first batch (offsets 0..99) is in flight; the loop buffers the next 100 and waits.
	waitBatched(t, m, started, 100, true)
	const blocked = 300 * time.Millisecond
	time.Sleep(blocked)
	if n := m.batched(); n != 100 {
		t.Fatalf("the batcher holds %d records after %v of a blocked flush, want 100 (batch.max_records)", n, blocked)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d flushes started while the first was in flight, want 1", n)
	}
	if n := h.handled(); n != 0 {
		t.Fatalf("the table handled %d records while the first flush is blocked before its commit, want 0", n)
	}
	if c := testutil.ToFloat64(h.metrics.RecordsConsumed.WithLabelValues("orders")); c < 200 {
		t.Fatalf("ingestd_records_consumed_total = %v during the blocked flush, want >= 200", c)
	}
	release.open()
	h.waitHandled(200, 30*time.Second, m)
	m.stop(t) // the drain commits the last 30
	if n := calls.Load(); n != 2 {
		t.Fatalf("the worker ran %d flushes, want 2 (the drain flushes the rest itself)", n)
	}
	if sizes[0] != 100 || sizes[1] != 100 {
		t.Fatalf("worker batches of %v records, want [100 100]", sizes)
	}
	if handledAtSecond != 100 {
		t.Fatalf("the second flush started when the table held %d records, want 100 (after the first committed)", handledAtSecond)
	}
	cs := h.checkInOrder(230)
	if len(cs) != 3 {
		t.Fatalf("%d commits, want 3 (100, 100, and 30 by the drain)", len(cs))
	}
	h.checkExactlyOnce(230)
	if sum, n := h.flushWaitSum(); n < 1 || sum < blocked.Seconds() {
		t.Fatalf("ingestd_flush_wait_seconds: sum %.3f s over %d waits, want >= %.1f s (the loop waited for the blocked flush)", sum, n, blocked.Seconds())
	}
}

// TestTransientFailureInFlightKeepsPartitionOrder: the flush in flight fails transiently
// at its commit (hooks.beforeCommit) while the poll loop has buffered the next 100 records
// of the same partition behind it. The failed records go back ahead of them (held first):
// nothing is committed ahead of them, and every record is committed once, in offset
// order, after the partition's backoff.
func TestTransientFailureInFlightKeepsPartitionOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Batch.MaxRecords, cfg.Batch.MaxAge = 100, 200*time.Millisecond
	h.produce(1, 250, 0, 1, -1)
	inFlight := newLatch()
	buffered := newLatch() // opened once the loop has buffered records of this partition behind the flush
	m := h.startHooked("a", cfg, nil, func(hk *hooks) { hk.beforeCommit = failFirstCommit(inFlight, buffered) })
	t.Cleanup(buffered.open)
	waitBatched(t, m, inFlight, 100, false)
	buffered.open()
	h.waitHandled(250, 60*time.Second, m)
	m.stop(t)
	if e := testutil.ToFloat64(h.metrics.TransientErrors.WithLabelValues("orders", "commit")); e != 1 {
		t.Fatalf("ingestd_transient_errors_total{stage=\"commit\"} = %v, want 1 (the injected failure)", e)
	}
	// The retried take is counted as trigger "retry" or "records": batcher.Due reports the
	// records bound first when the 100 fresh records behind the held ones already reach it
	// by the time the hold ends (it does under load), so the label is not asserted; the
	// order checks below are what the held-first rule guarantees.
	cs := h.checkInOrder(250)
	if len(cs[0].ids) < 200 || cs[0].ids[0] != 1 {
		t.Fatalf("the first commit holds %d rows from order %d, want the 100 retried records and the 100 held behind them, from order 1", len(cs[0].ids), cs[0].ids[0])
	}
	h.checkExactlyOnce(250)
	h.checkTxnsAtEnd()
}

// TestHaltInFlightDropsBufferedRecords: under policy halt, the flush in flight meets a
// record that adds a field (offset 50) while the poll loop has buffered the next batch of
// the same partition (offsets 60..119). The partition halts at offset 50; the buffered
// records, and those read later, are never committed: the txn stays at 49 and the table
// holds exactly orders 1..50, also after the drain.
func TestHaltInFlightDropsBufferedRecords(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Schema.Policy = config.PolicyHalt
	cfg.Batch.MaxRecords, cfg.Batch.MaxAge = 60, 200*time.Millisecond
	h.produce(1, 50, 0, 1, -1)   // offsets 0..49
	h.produce(51, 1, 1, 1, -1)   // offset 50: v2 adds channel
	h.produce(52, 100, 0, 1, -1) // offsets 51..150
	inFlight, release := newLatch(), newLatch()
	var calls atomic.Int32
	m := h.startHooked("a", cfg, nil, func(hk *hooks) { hk.beforeFlush = holdFirstFlush(inFlight, release, &calls, nil) })
	t.Cleanup(release.open)
	waitBatched(t, m, inFlight, 60, true)
	release.open()
	waitFor(t, 30*time.Second, func() error {
		if st := m.p.Status(); st.State != StateHalted || len(st.Halted) != 1 || st.Halted[0].Offset != 50 {
			return fmt.Errorf("status %+v, want halted at offset 50", st)
		}
		if calls.Load() < 2 {
			return fmt.Errorf("the buffered batch was not flushed yet")
		}
		return nil
	})
	waitFor(t, 30*time.Second, m.drained) // the age flushes of whatever the loop still had are done
	check := func(when string) {
		t.Helper()
		if v, ok := h.snapshot().Txns["orders-orders-0"]; !ok || v != 49 {
			t.Fatalf("%s: txn version %d (present %v), want 49", when, v, ok)
		}
		h.checkExactlyOnce(50)
	}
	check("halted")
	m.stop(t)
	check("after the drain")
	if c := testutil.ToFloat64(h.metrics.Commits.WithLabelValues("orders")); c != 1 {
		t.Fatalf("ingestd_delta_commits_total = %v, want 1", c)
	}
}

// TestRetriedBatchWithinMaxBytes (peak RSS within max_bytes + 256 MiB:
// docs/architecture.md, "Memory"): partition 0's flush in flight fails transiently at its
// commit while the batch behind it was read (about two batches of records wait for the
// retry); partition 1's records then arrive while partition 0 is on hold. The records
// held back keep their budget sizes: at the end of every flush (its peak: the poll loop
// filled the batcher meanwhile) the batch in flight holds at most half of batch.max_bytes
// plus one record, and it together with what the batcher holds at most max_bytes plus
// three records; before the fix the retried batch alone took both waiting batches (≈
// max_bytes) and the pair reached ≈ 1.5 × max_bytes. Every record is committed once, txns
// at the end offsets.
func TestRetriedBatchWithinMaxBytes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2)
	cfg := h.config()
	// A record is charged ≈ 290 bytes (raw ≈ 30 × (1 + 2.2) + recordOverhead; its three
	// columns decode to one levelled value and two dense words, 40 bytes): a batch's half
	// of the budget is ≈ 24 records.
	const maxBytes = 14_000
	cfg.Batch = config.Batch{MaxRecords: 1 << 20, MaxBytes: maxBytes, MaxAge: 200 * time.Millisecond}
	h.produce(1, 40, 0, 2, 0) // partition 0: about two batches
	type flushSeen struct {
		sizes    []int64
		buffered int64
	}
	var mu sync.Mutex
	var seen []flushSeen
	flushing, failed := newLatch(), newLatch()
	m := h.startHooked("a", cfg, nil, func(hk *hooks) {
		hk.beforeCommit = failFirstCommit(flushing, failed)
		hk.settle = func(inFlight []int64, buffered int64) {
			mu.Lock()
			seen = append(seen, flushSeen{append([]int64(nil), inFlight...), buffered})
			mu.Unlock()
		}
	})
	t.Cleanup(failed.open)
	waitBatched(t, m, flushing, 1, false) // the first batch is in flight, records are read behind it
	// All of partition 0 is read (in flight or buffered) before the flush in flight fails:
	// the loop counts a record consumed in the same batchMu hold as it adds it, and the
	// failure gives the records in flight back under batchMu, after that add.
	waitFor(t, 30*time.Second, func() error {
		running(t, m)
		return atLeast("ingestd_records_consumed_total", int64(testutil.ToFloat64(h.metrics.RecordsConsumed.WithLabelValues("orders"))), 40)
	})
	failed.open()
	waitFor(t, 10*time.Second, func() error {
		if e := testutil.ToFloat64(h.metrics.TransientErrors.WithLabelValues("orders", "commit")); e != 1 {
			return fmt.Errorf("ingestd_transient_errors_total{stage=\"commit\"} = %v, want 1 (the injected failure)", e)
		}
		return nil
	})
	h.produce(41, 60, 0, 2, 1) // partition 1, while partition 0 is on hold
	h.waitHandled(100, 60*time.Second, m)
	m.stop(t)
	h.checkExactlyOnce(100)
	h.checkTxnsAtEnd()

	mu.Lock()
	defer mu.Unlock()
	var maxRecord int64
	for _, f := range seen {
		for _, s := range f.sizes {
			maxRecord = max(maxRecord, s)
		}
	}
	half := int64(maxBytes / 2)
	heavy := 0 // flushes that ended with at least a batch's half buffered behind them
	for i, f := range seen {
		var inFlight int64
		for _, s := range f.sizes {
			inFlight += s
		}
		if inFlight > half+maxRecord {
			t.Errorf("flush %d of %d: %d records of %d bytes in flight, want at most %d (half of max_bytes %d plus one record of at most %d)",
				i+1, len(seen), len(f.sizes), inFlight, half+maxRecord, maxBytes, maxRecord)
		}
		if total := inFlight + f.buffered; total > maxBytes+3*maxRecord {
			t.Errorf("flush %d of %d: %d bytes in flight and %d buffered = %d, want at most %d (max_bytes plus three records of at most %d)",
				i+1, len(seen), inFlight, f.buffered, total, maxBytes+3*maxRecord, maxRecord)
		}
		if f.buffered >= half {
			heavy++
		}
		t.Logf("flush %d: %d records, %d bytes in flight, %d buffered", i+1, len(f.sizes), inFlight, f.buffered)
	}
	// The failure left about two batches waiting: some flush ended with at least a half
	// buffered (the bound was in play, not only small batches).
	if heavy == 0 || len(seen) < 3 {
		t.Fatalf("%d flushes, %d of them with half of max_bytes buffered; want at least 3 and 1 (the failed one, the retry, partition 1's)", len(seen), heavy)
	}
	if maxRecord < 250 || maxRecord > 330 {
		t.Fatalf("largest record charge %d bytes, want ≈ 290 (the test's batch sizes assume it)", maxRecord)
	}
}
