package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// TestTwoMembersShareTopicExactlyOnce: two members of one group share a 6-partition topic
// into one table while records keep arriving; a member joins (rebalance: revoked
// partitions are flushed within the callback) and later leaves cleanly. Every record is
// in the table exactly once and the txns end at the end offsets.
func TestTwoMembersShareTopicExactlyOnce(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	const parts = 6
	h := newHarness(t, parts)
	h.produce(1, 6000, 0, parts, -1)
	a := h.start("a", nil)
	h.waitHandled(1500, 30*time.Second, a)
	b := h.start("b", nil)
	h.produce(6001, 6000, 0, parts, -1)
	h.waitHandled(9000, 30*time.Second, a, b)
	a.stop(t) // b takes over a's partitions from their txn versions
	h.produce(12001, 3000, 1, parts, -1)
	h.waitHandled(15000, 30*time.Second, b)
	b.stop(t)
	h.checkExactlyOnce(15000)
	h.checkTxnsAtEnd()
	if n := testutil.ToFloat64(h.metrics.RecordsWritten.WithLabelValues("orders")); n != 15000 {
		t.Errorf("ingestd_records_written_total = %v, want 15000", n)
	}
	if n := h.dlqCount(); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
	// A backlog of 6,000 records fills batches of batch.max_records (500).
	if n := testutil.ToFloat64(h.metrics.BatchFlushes.WithLabelValues("orders", "records")); n < 1 {
		t.Errorf("ingestd_batch_flushes_total{trigger=\"records\"} = %v, want >= 1", n)
	}
}

// TestKilledMemberWithoutLeaving: a member that owns half the partitions dies in the
// middle of its records without flushing, committing or leaving the group (ctx cancelled
// with errAbandon, LeaveGroup swallowed). After the session timeout the survivor owns
// every partition, seeks to the txn versions and the table ends with every record
// exactly once.
func TestKilledMemberWithoutLeaving(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	const parts = 4
	h := newHarness(t, parts)
	h.produce(1, 8000, 0, parts, -1) // offsets 0..1999 of each partition
	a := h.start("a", nil)
	b := h.start("b", nil)
	h.waitHandled(2000, 30*time.Second, a, b)
	// Kill a only in a stable group where it owns partitions. Killed while it still
	// joins, a would own nothing; worse, b rejoins for the cooperative second phase at
	// that moment and kfake, unlike Kafka (MemberMetadata.shouldKeepAlive: never expire
	// a member with a JoinGroup or SyncGroup in purgatory), expires a member waiting in
	// JoinGroup when its session timer fires and never answers that request: if b's
	// timer fires before dead a's, b waits out its JoinGroup read timeout (rebalance
	// timeout + 10 s = 130 s) while a's partitions stay unowned.
	h.waitStableSplit(2, parts, 30*time.Second, a, b)
	h.produce(8001, 2000, 0, parts, -1)
	a.waitCommittedPast(t, 1999, 30*time.Second) // a is in the middle of its new records
	var swallowed atomic.Int32
	swallowLeave(h.cluster, &swallowed)
	a.cancel(errAbandon)
	if err := <-a.done; err != nil {
		t.Fatalf("abandoned member returned %v", err)
	}
	a.done <- nil
	if swallowed.Load() != 1 {
		t.Fatalf("the killed member's LeaveGroup was not swallowed (%d)", swallowed.Load())
	}
	at := h.handled()
	h.produce(10001, 2000, 0, parts, -1)
	h.waitHandled(12000, 60*time.Second, b)
	b.stop(t)
	t.Logf("killed at %d handled records", at)
	h.checkExactlyOnce(12000)
	h.checkTxnsAtEnd()
}

// waitCommittedPast waits until m has committed a record past offset off in one of the
// partitions it owns.
func (m *member) waitCommittedPast(t *testing.T, off int64, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, func() error {
		m.p.lag.mu.Lock()
		defer m.p.lag.mu.Unlock()
		for _, next := range m.p.lag.next {
			if next > off+1 {
				return nil
			}
		}
		return fmt.Errorf("the member committed nothing past offset %d", off)
	})
}

// hookStore runs before once, just before the first commit file is written.
type hookStore struct {
	storage.Store
	once   sync.Once
	before func()
}

func (s *hookStore) PutIfAbsent(ctx context.Context, p string, data []byte) error {
	if strings.HasPrefix(p, "_delta_log/") && strings.HasSuffix(p, ".json") && s.before != nil {
		s.once.Do(s.before)
	}
	return s.Store.PutIfAbsent(ctx, p, data)
}

// TestZombieFencing: member A still holds records of a partition that member B (its new
// owner) has already committed, together with records of a partition A still owns. A's
// flush must drop exactly what the table has: first when B's commit is visible before A
// reads the snapshot, then when B's commit lands between A's snapshot read and A's commit
// (the put-if-absent race). Nothing is lost for the partition only A handled.
func TestZombieFencing(t *testing.T) {
	h := newHarness(t, 2)
	schemas := h.staticSchemas()
	newMember := func(hook func()) *Pipeline {
		st, err := storage.Open("file://" + h.tableDir)
		if err != nil {
			t.Fatal(err)
		}
		hs := &hookStore{Store: st, before: hook}
		tbl, err := deltawriter.Open(context.Background(), hs)
		if err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(testWriter{t, "zombie"}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return NewPipeline(h.config(), Deps{Logger: log, Metrics: h.metrics, Schemas: schemas, Framed: true, Table: tbl})
	}
	recs := func(part int32, from, to int64) []*kgo.Record {
		var out []*kgo.Record
		for off := from; off <= to; off++ {
			id := int64(part)*1_000_000 + off + 1
			out = append(out, &kgo.Record{Topic: h.topic, Partition: part, Offset: off, Value: h.encode(id, 0)})
		}
		return out
	}
	flush := func(p *Pipeline, rs ...[]*kgo.Record) {
		t.Helper()
		var all []*kgo.Record
		for _, r := range rs {
			all = append(all, r...)
		}
		tok := p.acquireFlush()
		defer p.releaseFlush(tok)
		left, err := p.tryFlushLocked(context.Background(), all)
		if err != nil || len(left) > 0 {
			t.Fatalf("flush: %v (%d left)", err, len(left))
		}
	}
	zombie, owner := newMember(nil), newMember(nil)
	flush(owner, recs(0, 0, 149))
	flush(zombie, recs(0, 0, 99), recs(1, 0, 49)) // partition 0 is covered; partition 1 is new
	txns := h.snapshot().Txns
	if txns["orders-orders-0"] != 149 || txns["orders-orders-1"] != 49 {
		t.Fatalf("txns after the visible race = %v, want p0=149 p1=49", txns)
	}

	// The race: the owner commits partition 0 up to 249 after the zombie read its snapshot.
	owner2 := newMember(nil)
	zombie2 := newMember(func() { flush(owner2, recs(0, 150, 249)) })
	before := testutil.ToFloat64(h.metrics.CommitConflicts.WithLabelValues("orders"))
	flush(zombie2, recs(0, 150, 199), recs(1, 50, 59))
	txns = h.snapshot().Txns
	if txns["orders-orders-0"] != 249 || txns["orders-orders-1"] != 59 {
		t.Fatalf("txns after the put-if-absent race = %v, want p0=249 p1=59", txns)
	}
	if got := testutil.ToFloat64(h.metrics.CommitConflicts.WithLabelValues("orders")) - before; got < 1 {
		t.Errorf("commit conflicts went up by %v, want >= 1", got)
	}
	ids := h.orderIDs()
	want := map[int64]bool{}
	for off := int64(0); off <= 249; off++ {
		want[off+1] = true
	}
	for off := int64(0); off <= 59; off++ {
		want[1_000_000+off+1] = true
	}
	for id, c := range ids {
		if !want[id] || c != 1 {
			t.Errorf("order %d is in the table %d times (expected: %v)", id, c, want[id])
		}
	}
	if len(ids) != len(want) {
		t.Errorf("table has %d distinct orders, want %d", len(ids), len(want))
	}
}
