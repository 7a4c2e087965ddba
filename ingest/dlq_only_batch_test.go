package ingest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestIdlePollsAndDeadLetterOnlyBatch: a batch made only of poison pills (an hour old)
// advances the txn with one txn-only commit after the dead letters are acknowledged, so
// that replay finds the commit they name and the lag is 0; then ten poll cycles without
// records commit nothing (an idle pipeline adds no empty commits to the log). The
// metrics pass client_golang's linter.
func TestIdlePollsAndDeadLetterOnlyBatch(t *testing.T) {
	h := newHarness(t, 1)
	h.produce(1, 100, 0, 1, -1)
	a := h.start("a", func(d *Deps) { d.KafkaOpts = append(d.KafkaOpts, kgo.FetchMaxWait(100*time.Millisecond)) })
	h.waitHandled(100, 30*time.Second, a)
	v0 := h.snapshot().Version
	var pills [][]byte
	for i := range 50 {
		switch i % 3 {
		case 0:
			pills = append(pills, []byte(`{"order_id":1}`)) // bad magic
		case 1:
			pills = append(pills, []byte{0, 0, 0}) // too short
		default:
			pills = append(pills, []byte{0, 0, 0, 0x0f, 0x42, 2}) // unknown schema id
		}
	}
	h.produceRaw(0, pills...)
	h.waitHandled(150, 30*time.Second, a)
	snap := h.snapshot()
	if snap.Version != v0+1 {
		t.Fatalf("the dead-letter-only batch made versions %d..%d, want one commit", v0+1, snap.Version)
	}
	if n := h.dlqCount(); n != 50 {
		t.Fatalf("dead-letter topic holds %d records, want 50", n)
	}
	// The commit file is visible before the pipeline counts the commit (it does so after
	// Table.Commit returns): wait until it counted every version, all of them its own, so
	// that the idle polls below start from a settled count.
	commits := h.waitCounter(h.metrics.Commits.WithLabelValues("orders"), float64(snap.Version+1), 30*time.Second)
	batches := testutil.ToFloat64(h.metrics.Batches.WithLabelValues("orders"))
	var fetches atomic.Int32
	h.cluster.ControlKey(kmsg.Fetch.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		fetches.Add(1)
		return nil, nil, false
	})
	waitFor(t, 30*time.Second, func() error { // ten empty polls (FetchMaxWait is 100 ms here)
		if n := fetches.Load(); n < 10 {
			return fmt.Errorf("only %d fetches", n)
		}
		return nil
	})
	if v := h.snapshot().Version; v != snap.Version {
		t.Errorf("idle polls made commits: version %d -> %d", snap.Version, v)
	}
	if c := testutil.ToFloat64(h.metrics.Commits.WithLabelValues("orders")); c != commits {
		t.Errorf("idle polls counted commits: %v -> %v", commits, c)
	}
	if b := testutil.ToFloat64(h.metrics.Batches.WithLabelValues("orders")); b != batches {
		t.Errorf("idle polls counted batches: %v -> %v", batches, b)
	}
	a.stop(t)
	if v := h.snapshot().Version; v != snap.Version {
		t.Errorf("shutdown with nothing buffered committed: version %d -> %d", snap.Version, v)
	}
	for reason, want := range map[string]float64{"bad_magic": 17, "too_short": 17, "schema_not_found": 16} {
		if got := testutil.ToFloat64(h.metrics.RecordsDeadLettered.WithLabelValues("orders", reason)); got != want {
			t.Errorf("dead-lettered %s = %v, want %v", reason, got, want)
		}
	}
	if lag := testutil.ToFloat64(h.metrics.ConsumerLag.WithLabelValues("orders", "orders", "0")); lag != 0 {
		t.Errorf("consumer lag after catching up = %v, want 0", lag)
	}
	problems, err := testutil.GatherAndLint(h.promReg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
	}
	n, err := testutil.GatherAndCount(h.promReg, "ingestd_schema_registry_requests_total", "ingestd_consumer_lag_records",
		"ingestd_batches_total", "ingestd_delta_commit_duration_seconds")
	if err != nil || n < 4 {
		t.Errorf("expected registry, lag, batch and duration series, counted %d (%v)", n, err)
	}
}
