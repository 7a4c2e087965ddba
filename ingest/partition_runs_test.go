package ingest

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	dl "github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/rowfill"
	"github.com/ingestd/ingestd/schemaguard"
)

// interleaved is a batch of n records over topics a and b, partitions 0..2, in runs of
// random length: each partition's offsets increase, partitions interleave, a partition
// comes back after others.
func interleaved(rng *rand.Rand, n int) []*kgo.Record {
	next := map[topicPartition]int64{}
	var recs []*kgo.Record
	for len(recs) < n {
		k := topicPartition{[]string{"a", "b"}[rng.IntN(2)], int32(rng.IntN(3))}
		for run := 1 + rng.IntN(5); run > 0 && len(recs) < n; run-- {
			recs = append(recs, &kgo.Record{Topic: k.topic, Partition: k.partition, Offset: next[k]})
			next[k] += 1 + int64(rng.IntN(3)) // gaps, as compaction or transaction markers leave
		}
	}
	return recs
}

// lastOffsets gives, per partition, the offset of its last record: the same map as a write
// per record, for interleaved runs of partitions (committedLocked's lag and resume
// bookkeeping depend on it).
func TestLastOffsetsPerPartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		recs := interleaved(rng, rng.IntN(40))
		want := map[topicPartition]int64{}
		for _, r := range recs {
			want[topicPartition{r.Topic, r.Partition}] = r.Offset
		}
		got := lastOffsets(recs)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("trial %d: lastOffsets = %v, want %v", trial, got, want)
		}
	}
	if got := lastOffsets([]*kgo.Record{
		{Topic: "a", Partition: 0, Offset: 4}, {Topic: "a", Partition: 1, Offset: 9}, {Topic: "a", Partition: 0, Offset: 5},
		{Topic: "b", Partition: 0, Offset: 2}, {Topic: "a", Partition: 0, Offset: 7},
	}); fmt.Sprint(got) != "map[{a 0}:7 {a 1}:9 {b 0}:2]" {
		t.Fatalf("lastOffsets = %v, want a/0=7 a/1=9 b/0=2", got)
	}
}

// After a flush, committedLocked moves each partition's next offset to one past its last
// committed record and resumes partitions that were held back unless they still have
// records waiting: the same offsets for interleaved partitions, a cut and waiting records.
func TestCommittedLockedInterleaved(t *testing.T) {
	p := NewPipeline(&config.Config{Name: "orders", Batch: config.Batch{MaxRecords: 100}}, Deps{Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rec := func(topic string, part int32, off int64) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: part, Offset: off}
	}
	done := []*kgo.Record{rec("a", 0, 1), rec("a", 1, 5), rec("a", 0, 2), rec("b", 0, 7), rec("a", 1, 6), rec("a", 0, 4)}
	cut := []*kgo.Record{rec("b", 0, 8), rec("b", 0, 9)}
	waiting := []*kgo.Record{rec("a", 1, 7)}
	// a/0, a/1 and b/0 were held back after a failure.
	held := []*kgo.Record{rec("a", 0, 0), rec("a", 1, 4), rec("b", 0, 6)}
	now := time.Now()
	p.batch.Hold(held, []int64{1, 1, 1}, now, func(int) time.Duration { return time.Hour })
	p.batch.Take(now, true) // the held records go into the flush; the holds stay
	p.committedLocked(done, append(cut, waiting...))
	got := map[topicPartition]int64{}
	p.lag.mu.Lock()
	for k, v := range p.lag.next {
		got[k] = v
	}
	p.lag.mu.Unlock()
	if want := "map[{a 0}:5 {a 1}:7 {b 0}:8]"; fmt.Sprint(got) != want {
		t.Fatalf("next offsets %v, want %s", got, want)
	}
	// a/0 is released; a/1 (waiting) and b/0 (cut: the rest follows at once) stay held.
	if n := p.batch.Holding(); n != 2 {
		t.Fatalf("partitions still on hold = %d, want 2 (a/1 waits for the registry, b/0 has its cut records)", n)
	}
	if _, ok := p.batch.Release(topicPartition{"a", 0}); ok {
		t.Fatal("a/0 is still on hold after its records were committed")
	}
}

// The router records each partition's last handled offset once per run of the partition:
// the same watermarks as a write per handled record, with halts and cuts that stop their
// partition midway, for random interleaved batches.
func TestRouterHandledMatchesPerRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fits := &decode.WriterSchema{ID: 1}
	guard := schemaguard.BatchPlan{Base: &dl.StructType{}, Decisions: map[int]schemaguard.Decision{1: {Action: schemaguard.Write}}}
	for trial := 0; trial < 300; trial++ {
		recs := interleaved(rng, rng.IntN(60))
		items := make([]item, len(recs))
		outcome := map[*kgo.Record]error{}
		for i, r := range recs {
			items[i] = item{rec: r, ws: fits}
			switch x := rng.IntN(30); {
			case x == 0:
				outcome[r] = &decode.Error{Reason: decode.ReasonTruncated, Err: fmt.Errorf("truncated")} // halts: no DLQ
			case x == 1:
				outcome[r] = rowfill.ErrPartitionLimit
			case x == 2:
				outcome[r] = decode.ErrNullRecord
			case x == 3:
				items[i].route = routeSkip
			}
		}
		rt := router{rules: rules{policy: config.PolicyHalt, onIncompatible: config.PolicyHalt}, guard: guard, table: "orders",
			decode: func(it *item) error { return outcome[it.rec] }}
		res := rt.route(items)
		// The reference: a map write per handled record, in order.
		want := map[topicPartition]int64{}
		stopped := map[topicPartition]bool{}
		for i, it := range items {
			k := topicPartition{it.rec.Topic, it.rec.Partition}
			if stopped[k] {
				if res.routes[i] != routeGuard {
					t.Fatalf("trial %d: item %d after its partition stopped got route %d", trial, i, res.routes[i])
				}
				continue
			}
			if r := res.routes[i]; r == routeHalt || r == routeCut {
				stopped[k] = true
				continue
			}
			want[k] = it.rec.Offset
		}
		if fmt.Sprint(res.handled) != fmt.Sprint(want) {
			t.Fatalf("trial %d: handled %v, want %v", trial, res.handled, want)
		}
	}
}

// sizesOf gives back each record's charge as the batcher handed it out, whichever of the
// batch's records a failed flush leaves (all of them, or e.g. the partitions waiting for
// the registry), not its budgetSize now (decodedPerByte may have moved since it was added).
func TestSizesOfKeepsAddedCharges(t *testing.T) {
	p := NewPipeline(&config.Config{Name: "orders", Batch: config.Batch{MaxRecords: 100}}, Deps{Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	recs := []*kgo.Record{{Partition: 0, Offset: 1}, {Partition: 1, Offset: 1}, {Partition: 0, Offset: 2}, {Partition: 1, Offset: 2, Value: make([]byte, 10)}}
	sizes := []int64{10, 20, 30, 40}
	if got := p.sizesOf(recs, recs, sizes); &got[0] != &sizes[0] {
		t.Fatalf("sizesOf(all of recs) = %v, want sizes itself", got)
	}
	if got := p.sizesOf([]*kgo.Record{recs[1], recs[3]}, recs, sizes); fmt.Sprint(got) != "[20 40]" {
		t.Fatalf("sizesOf(partition 1's records) = %v, want [20 40]", got)
	}
	stray := &kgo.Record{Partition: 2, Value: make([]byte, 10)}
	if got, want := p.sizesOf([]*kgo.Record{recs[0], stray}, recs, sizes), fmt.Sprint([]int64{10, p.budgetSize(stray)}); fmt.Sprint(got) != want {
		t.Fatalf("sizesOf with a record not in recs = %v, want %s (its budgetSize now)", got, want)
	}
}
