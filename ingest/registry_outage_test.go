package ingest

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRegistryOutagePausesOnlyWaitingPartitions: while the registry cannot serve
// schema v2, the partition whose next record needs it is paused with backoff and holds
// its txn before that record; the other partitions keep committing; nothing is
// dead-lettered; after recovery everything lands exactly once.
func TestRegistryOutagePausesOnlyWaitingPartitions(t *testing.T) {
	const parts = 3
	h := newHarness(t, parts)
	schemas := h.staticSchemas()
	schemas.fail[h.ids[1]] = true
	schemas.setDown(true)
	h.produce(1, 300, 0, parts, -1)
	a := h.start("a", func(d *Deps) { d.Schemas = schemas })
	h.waitHandled(300, 30*time.Second, a)
	h.produce(301, 100, 1, parts, 0) // v2, partition 0 only: waits for the registry
	h.produce(401, 200, 0, parts, 1) // v1 to partition 1 flows meanwhile
	h.produce(601, 200, 0, parts, 2)
	waitFor(t, 30*time.Second, func() error {
		txns := h.snapshot().Txns
		if txns["orders-orders-1"] == 299 && txns["orders-orders-2"] == 299 {
			if txns["orders-orders-0"] != 99 {
				t.Fatalf("partition 0 moved to %d during the outage, want 99", txns["orders-orders-0"])
			}
			return nil
		}
		return fmt.Errorf("other partitions did not progress during the outage: %v", txns)
	})
	waitFor(t, 30*time.Second, func() error {
		if b := testutil.ToFloat64(h.metrics.PartitionsBackingOff.WithLabelValues("orders")); b != 1 {
			return fmt.Errorf("partitions backing off = %v, want 1", b)
		}
		if e := testutil.ToFloat64(h.metrics.TransientErrors.WithLabelValues("orders", "schema registry")); e < 1 {
			return fmt.Errorf("transient registry errors = %v, want >= 1", e)
		}
		return nil
	})
	if txns := h.snapshot().Txns; txns["orders-orders-0"] != 99 {
		t.Fatalf("partition 0 moved to %d during the outage, want 99", txns["orders-orders-0"])
	}
	if n := h.dlqCount(); n != 0 {
		t.Fatalf("%d records dead-lettered during a registry outage", n)
	}
	schemas.setDown(false)
	h.waitHandled(800, 60*time.Second, a)
	a.stop(t)
	h.checkExactlyOnce(800)
	h.checkTxnsAtEnd()
	if n := h.dlqCount(); n != 0 {
		t.Fatalf("%d records dead-lettered after the outage", n)
	}
	if b := testutil.ToFloat64(h.metrics.PartitionsBackingOff.WithLabelValues("orders")); b != 0 {
		t.Errorf("partitions backing off after recovery = %v, want 0", b)
	}
	for _, trigger := range []string{"age", "retry"} {
		if n := testutil.ToFloat64(h.metrics.BatchFlushes.WithLabelValues("orders", trigger)); n < 1 {
			t.Errorf("ingestd_batch_flushes_total{trigger=%q} = %v, want >= 1", trigger, n)
		}
	}
}
