package ingest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A topic deleted and created again under its name starts its offsets at 0 again, while
// the table's txns still name the old topic's: without the check, the pipeline would skip
// the new topic's records up to those offsets as already written. The partitions halt
// with txn_beyond_log_end, nothing is written, and after ResetOffsets to 0 a restart
// writes exactly the new records.
func TestTxnBeyondLogEndHaltsThenReset(t *testing.T) {
	h := newHarness(t, 2)
	m := h.start("a", nil)
	h.produce(0, 40, 0, 2, -1) // 20 per partition: txn versions 19
	h.waitHandled(40, 20*time.Second, m)
	m.stop(t)

	adm := kadm.NewClient(h.producer)
	ctx := context.Background()
	if _, err := adm.DeleteTopic(ctx, h.topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error { // the deletion completes asynchronously
		_, err := adm.CreateTopic(ctx, 2, 1, nil, h.topic)
		return err
	})
	// A client of its own: the harness's producer remembers the old topic's id.
	pr, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	h.producer = pr
	h.produce(100, 6, 0, 2, -1) // 3 per partition, offsets 0..2
	before := h.snapshot().Version

	m = h.start("b", nil)
	waitFor(t, 20*time.Second, func() error {
		if st := m.p.Status(); len(st.Halted) != 2 {
			return fmt.Errorf("status %s, %d partitions halted, want 2", st.State, len(st.Halted))
		}
		return nil
	})
	st := m.p.Status()
	slices.SortFunc(st.Halted, func(a, b HaltedPartition) int { return int(a.Partition - b.Partition) })
	for i, hp := range st.Halted {
		if hp.Partition != int32(i) || hp.Offset != 20 || hp.Reason != ReasonTxnBeyondLogEnd {
			t.Errorf("halted %+v, want partition %d offset 20 reason %s", hp, i, ReasonTxnBeyondLogEnd)
		}
	}
	want := fmt.Sprintf("the table's txn for orders[0] is at offset 19, but the partition ends at offset 3: the topic was deleted and created again, " +
		"or the broker lost records. Its records at offsets up to 19 would be skipped as already written. " +
		"Fix: ingestd table reset-offsets --config PIPELINE.yaml --topic orders --to-earliest (a topic created again), or --to-offset N, then restart")
	if st.Halted[0].Message != want {
		t.Errorf("message\n got %s\nwant %s", st.Halted[0].Message, want)
	}
	time.Sleep(500 * time.Millisecond) // a flush would have had time to commit
	if v := h.snapshot().Version; v != before {
		t.Errorf("the table moved from version %d to %d while its partitions were halted", before, v)
	}
	m.stop(t)

	moved, _, err := ResetOffsets(ctx, h.config(), h.table(), h.topic, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(moved); got != "[{0 20 0} {1 20 0}]" {
		t.Errorf("ResetOffsets moved %s, want [{0 20 0} {1 20 0}]", got)
	}

	m = h.start("c", nil)
	h.waitHandled(6, 20*time.Second, m)
	m.stop(t)
	ids := h.orderIDs()
	if len(ids) != 46 {
		t.Errorf("the table holds %d orders, want 40 of the old topic and 6 of the new", len(ids))
	}
	for id := int64(100); id < 106; id++ {
		if ids[id] != 1 {
			t.Errorf("order %d of the new topic appears %d times, want 1", id, ids[id])
		}
	}
	if got := fmt.Sprint(h.snapshot().Txns); got != "map[orders-orders-0:2 orders-orders-1:2]" {
		t.Errorf("txns %s, want map[orders-orders-0:2 orders-orders-1:2]", got)
	}
}

// ResetOffsets with named partitions moves only those, also when the table has no txn
// for one (From -1); a negative offset and a topic the table holds no txn of are refused.
func TestResetOffsetsErrors(t *testing.T) {
	h := newHarness(t, 2)
	m := h.start("a", nil)
	h.produce(0, 10, 0, 2, -1)
	h.waitHandled(10, 20*time.Second, m)
	m.stop(t)
	ctx := context.Background()
	tbl := h.table()
	if _, _, err := ResetOffsets(ctx, h.config(), tbl, "orders", nil, -1); err == nil || err.Error() != "reset offsets: offset -1 is negative" {
		t.Errorf("negative offset: %v", err)
	}
	if _, _, err := ResetOffsets(ctx, h.config(), tbl, "other", nil, 0); err == nil ||
		err.Error() != "reset offsets: the table holds no txn of topic other under app id orders (appIds orders-other-<partition>): name the partitions" {
		t.Errorf("unknown topic: %v", err)
	}
	moved, v, err := ResetOffsets(ctx, h.config(), tbl, "orders", []int32{1, 7}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(moved); got != "[{1 5 3} {7 -1 3}]" {
		t.Errorf("moved %s, want [{1 5 3} {7 -1 3}]", got)
	}
	snap := h.snapshot()
	if snap.Version != v {
		t.Errorf("snapshot version %d, ResetOffsets committed %d", snap.Version, v)
	}
	if got := fmt.Sprint(snap.Txns); got != "map[orders-orders-0:4 orders-orders-1:2 orders-orders-7:2]" {
		t.Errorf("txns %s", got)
	}
}

// A source topic deleted while the pipeline reads it: the consumer's fetches answer
// UNKNOWN_TOPIC_ID without end. After unknownTopicGrace its partitions halt with
// topic_deleted, and their fetches are paused (the answers stop).
func TestDeletedTopicHaltsItsPartitions(t *testing.T) {
	h := newHarness(t, 2)
	m := h.start("a", nil)
	h.produce(0, 10, 0, 2, -1)
	h.waitHandled(10, 20*time.Second, m)
	if _, err := kadm.NewClient(h.producer).DeleteTopic(context.Background(), h.topic); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	waitFor(t, 30*time.Second, func() error {
		if st := m.p.Status(); len(st.Halted) != 2 {
			return fmt.Errorf("status %s, %d partitions halted, want 2", st.State, len(st.Halted))
		}
		return nil
	})
	if took := time.Since(deleted); took < unknownTopicGrace {
		t.Errorf("halted %v after the deletion, before the grace of %v", took, unknownTopicGrace)
	}
	st := m.p.Status()
	slices.SortFunc(st.Halted, func(a, b HaltedPartition) int { return int(a.Partition - b.Partition) })
	for i, hp := range st.Halted {
		if hp.Partition != int32(i) || hp.Offset != 5 || hp.Reason != ReasonTopicDeleted {
			t.Errorf("halted %+v, want partition %d offset 5 reason %s", hp, i, ReasonTopicDeleted)
		}
	}
	if want := "topic orders was deleted while the pipeline read its partition 0 (the broker no longer knows the topic's id); " +
		"if it was created again under its name, reading it from the table's txn offsets would skip its first records. " +
		"Fix: stop ingestd; if the topic was created again, run ingestd table reset-offsets --config PIPELINE.yaml --topic orders --to-earliest; " +
		"if it is gone for good, remove it from the pipeline's kafka.topics; then start ingestd"; st.Halted[0].Message != want {
		t.Errorf("message\n got %s\nwant %s", st.Halted[0].Message, want)
	}
	if got := testutil.ToFloat64(h.metrics.PipelineHalted.WithLabelValues("orders")); got != 1 {
		t.Errorf("ingestd_pipeline_halted = %v, want 1", got)
	}
	m.stop(t)
}
