package ingest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
)

// Attacks on the flush worker's overlap: the batch in flight and the records buffered
// behind it when a SIGTERM, a rebalance or a kill -9 arrives, with the flush in flight
// failing transiently.

// checkPartitionsInOrder asserts that the commits of a parts-partition table, whose orders
// [1, n] were produced round-robin from order 1 (order id's partition: id % parts), hold
// each partition's orders in offset order: per partition each commit's rows continue the
// previous commit's (no record committed ahead of one not yet committed), and the
// partition's txn version in a commit with its rows is the offset of its last row. It
// returns the number of rows committed.
func (h *harness) checkPartitionsInOrder(parts int32) int {
	h.t.Helper()
	next := map[int32]int64{}  // the next order id due per partition
	count := map[int32]int64{} // rows committed per partition (= next offset)
	for p := int32(0); p < parts; p++ {
		next[p] = int64(p)
		if p == 0 {
			next[p] = int64(parts)
		}
	}
	rows := 0
	for _, c := range h.commits() {
		seen := map[int32]bool{}
		for _, id := range c.ids {
			p := int32(id % int64(parts))
			if id != next[p] {
				h.t.Fatalf("commit %d holds order %d of partition %d where order %d was due", c.version, id, p, next[p])
			}
			next[p] += int64(parts)
			count[p]++
			seen[p] = true
			rows++
		}
		for p := range seen {
			app := fmt.Sprintf("orders-%s-%d", h.topic, p)
			if v, ok := c.txns[app]; !ok || v != count[p]-1 {
				h.t.Fatalf("commit %d: txn %s version %d (present %v), want %d (its last row's offset)", c.version, app, v, ok, count[p]-1)
			}
		}
	}
	return rows
}

// waitJoined waits until a second member's join has reached the group that one member
// owned alone (Stable, one member): the group is rebalancing, or Stable with more members.
// A member whose poll loop waits for its flush in flight cannot take part in the rebalance
// (its polls block rebalances until AllowRebalance), so its revoke callback runs after
// that flush has settled.
func (h *harness) waitJoined(timeout time.Duration, members ...*member) {
	h.t.Helper()
	h.waitGroup(timeout, members, func(g kadm.DescribedGroup) error {
		if g.Err != nil || g.State == "Stable" && len(g.Members) < 2 {
			return fmt.Errorf("group state %s with %d members (err %v), want a rebalance or more members", g.State, len(g.Members), g.Err)
		}
		return nil
	})
}

// TestDrainAfterFailedFlushInFlight is SIGTERM while a flush is in flight with the next
// 100 records of its partition buffered behind it, and that flush then fails transiently
// at its commit: the drain commits the failed records first and then those buffered
// behind them, in offset order (txn = last row's offset), and a restarted member commits
// the rest: every order exactly once, txns at the end offsets.
func TestDrainAfterFailedFlushInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Batch.MaxRecords, cfg.Batch.MaxAge = 100, 200*time.Millisecond
	h.produce(1, 250, 0, 1, -1)
	// Only the record bound fires in a, not the age (a loaded machine may take more than
	// 200 ms between two polls): the batch in flight and the one behind it hold 100 each.
	cfgA := h.config()
	cfgA.Batch.MaxRecords, cfgA.Batch.MaxAge = 100, time.Minute
	inFlight, failed := newLatch(), newLatch()
	var sizes []int // the worker's batches, in records (its goroutine only; read after Run returned)
	m := h.startHooked("a", cfgA, nil, func(hk *hooks) {
		hk.beforeFlush = func(recs []*kgo.Record) { sizes = append(sizes, len(recs)) }
		hk.beforeCommit = failFirstCommit(inFlight, failed)
	})
	t.Cleanup(failed.open)
	waitBatched(t, m, inFlight, 100, true)
	m.cancel(nil) // SIGTERM while the flush is in flight (the context has ended when cancel returns)
	failed.open() // the flush in flight fails now, after the SIGTERM
	select {
	case err := <-m.done:
		m.done <- nil
		if err != nil {
			t.Fatalf("member stopped with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the member did not stop within 60 s of SIGTERM")
	}
	if len(sizes) != 1 || sizes[0] != 100 {
		t.Fatalf("the worker flushed batches of %v records, want [100] (the one in flight at the SIGTERM; the drain flushes the rest itself)", sizes)
	}
	if rows := h.checkPartitionsInOrder(1); rows < 200 {
		t.Fatalf("the drain committed %d rows, want at least 200 (the 100 failed in flight and the 100 buffered behind them)", rows)
	}
	if h.handled() < 250 { // a member stopped while it starts up fails "list topics": start one only for records left
		m2 := h.startWith("b", cfg, nil)
		h.waitHandled(250, 60*time.Second, m2)
		m2.stop(t)
	}
	if rows := h.checkPartitionsInOrder(1); rows != 250 {
		t.Fatalf("%d rows committed, want 250", rows)
	}
	h.checkExactlyOnce(250)
	h.checkTxnsAtEnd()
}

// TestRevokeDuringFailedFlushInFlight: a second member joins the group (rebalance) while
// the first one's flush is in flight with records buffered behind it, and that flush fails
// transiently. The revoke callback waits for the flush, then flushes the revoked
// partitions' failed and buffered records, held ones first; the new owner resumes from
// the txns. Every order exactly once, each partition's commits in offset order, txns at
// the end offsets.
func TestRevokeDuringFailedFlushInFlight(t *testing.T) {
	t.Parallel()
	const parts = 4
	h := newHarness(t, parts)
	cfg := h.config()
	cfg.Batch.MaxRecords, cfg.Batch.MaxAge = 100, 200*time.Millisecond
	h.produce(1, 1000, 0, parts, -1)
	inFlight, buffered := newLatch(), newLatch()
	a := h.startHooked("a", cfg, nil, func(hk *hooks) { hk.beforeCommit = failFirstCommit(inFlight, buffered) })
	t.Cleanup(buffered.open)
	waitBatched(t, a, inFlight, 100, false)
	b := h.startWith("b", cfg, nil) // joins while a's flush is in flight
	h.waitJoined(30*time.Second, a, b)
	buffered.open()
	h.produce(1001, 1000, 0, parts, -1)
	h.waitHandled(2000, 60*time.Second, a, b)
	a.stop(t)
	b.stop(t)
	if rows := h.checkPartitionsInOrder(parts); rows != 2000 {
		t.Fatalf("%d rows committed, want 2000", rows)
	}
	h.checkExactlyOnce(2000)
	h.checkTxnsAtEnd()
}

// TestAbandonDuringFlushInFlight is kill -9 (the abandon seam) while a flush is in
// flight with records buffered behind it: the flush in flight settles (it may commit,
// like a crash after the commit), the buffered records are dropped, and a new member
// resumes from the txn: every order exactly once, in offset order.
func TestAbandonDuringFlushInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Batch.MaxRecords, cfg.Batch.MaxAge = 100, 200*time.Millisecond
	h.produce(1, 250, 0, 1, -1)
	inFlight, release := newLatch(), newLatch()
	var calls atomic.Int32
	a := h.startHooked("a", cfg, nil, func(hk *hooks) { hk.beforeFlush = holdFirstFlush(inFlight, release, &calls, nil) })
	t.Cleanup(release.open)
	waitBatched(t, a, inFlight, 100, false)
	a.cancel(errAbandon) // kill -9 while the flush is in flight (the context has ended when cancel returns)
	release.open()
	select {
	case err := <-a.done:
		if err != nil {
			t.Fatalf("abandoned member returned %v", err)
		}
		a.done <- nil
	case <-time.After(60 * time.Second):
		t.Fatal("the abandoned member did not stop within 60 s")
	}
	if rows := h.checkPartitionsInOrder(1); rows > 100 {
		t.Fatalf("%d rows committed by the abandoned member, want at most the 100 in flight (the buffered ones are dropped)", rows)
	}
	b := h.startWith("b", cfg, nil)
	h.waitHandled(250, 60*time.Second, b)
	b.stop(t)
	if rows := h.checkPartitionsInOrder(1); rows != 250 {
		t.Fatalf("%d rows committed, want 250", rows)
	}
	h.checkExactlyOnce(250)
	h.checkTxnsAtEnd()
}

// TestRegistryOutageInFlight: the registry goes down as the flush in flight looks up its
// records' writer schema, while the poll loop has buffered the next 100 records of the
// partition behind it. The partition waits (nothing dead-lettered), and after the outage
// its records are committed once each, in offset order, the waiting ones first.
func TestRegistryOutageInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Batch.MaxRecords, cfg.Batch.MaxAge = 100, 200*time.Millisecond
	h.produce(1, 250, 0, 1, -1)
	schemas := h.staticSchemas()
	schemas.fail[h.ids[0]] = true
	inFlight, release := newLatch(), newLatch()
	var calls atomic.Int32
	m := h.startHooked("a", cfg, func(d *Deps) { d.Schemas = schemas }, func(hk *hooks) {
		// The flush in flight meets the outage.
		hk.beforeFlush = holdFirstFlush(inFlight, release, &calls, func() { schemas.setDown(true) })
	})
	t.Cleanup(release.open)
	waitBatched(t, m, inFlight, 100, false)
	release.open()
	waitFor(t, 30*time.Second, func() error {
		if calls.Load() < 3 {
			return fmt.Errorf("%d flushes, want the one in flight and retries during the outage", calls.Load())
		}
		return nil
	})
	if n := h.handled(); n != 0 {
		t.Fatalf("%d records handled during the outage, want 0", n)
	}
	schemas.setDown(false)
	h.waitHandled(250, 60*time.Second, m)
	m.stop(t)
	if rows := h.checkPartitionsInOrder(1); rows != 250 {
		t.Fatalf("%d rows committed, want 250", rows)
	}
	h.checkExactlyOnce(250)
	h.checkTxnsAtEnd()
	if n := h.dlqCount(); n != 0 {
		t.Fatalf("%d dead letters, want 0", n)
	}
}

// TestHaltInFlightThenHandOver: under policy halt the flush in flight halts the partition
// at offset 50 with the next batch buffered behind it; then the member stops (SIGTERM)
// and another takes the partition over. The buffered records are never committed, and the
// new owner halts at the same offset: txn 49, orders 1..50 exactly once.
func TestHaltInFlightThenHandOver(t *testing.T) {
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
	a := h.startHooked("a", cfg, nil, func(hk *hooks) { hk.beforeFlush = holdFirstFlush(inFlight, release, &calls, nil) })
	t.Cleanup(release.open)
	waitBatched(t, a, inFlight, 60, true)
	release.open()
	halted := func(m *member) func() error {
		return func() error {
			if st := m.p.Status(); st.State != StateHalted || len(st.Halted) != 1 || st.Halted[0].Offset != 50 {
				return fmt.Errorf("status %+v, want halted at offset 50", st)
			}
			return nil
		}
	}
	waitFor(t, 30*time.Second, halted(a))
	a.stop(t) // the drain must not commit the halted partition's buffered records
	check := func(when string) {
		t.Helper()
		if v, ok := h.snapshot().Txns["orders-orders-0"]; !ok || v != 49 {
			t.Fatalf("%s: txn version %d (present %v), want 49", when, v, ok)
		}
		h.checkExactlyOnce(50)
	}
	check("after a's drain")
	b := h.startWith("b", cfg, nil)
	waitFor(t, 30*time.Second, halted(b))
	waitFor(t, 30*time.Second, b.drained) // the age flushes of whatever b still had are done
	b.stop(t)
	check("after b halted and stopped")
}
