package ingest

import (
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumerLag is the bookkeeping behind ingestd_consumer_lag_records (records in a
// partition past the last one committed to the table): per partition, the high
// watermark of the latest fetch and the next offset to handle (txn version + 1). Safe
// for concurrent use: the poll loop, the flushes and the rebalance callbacks update it.
// Its mutex is the innermost lock of a pipeline (taken last, held briefly).
type consumerLag struct {
	pipeline string
	m        *Metrics

	mu   sync.Mutex
	hwm  map[topicPartition]int64 // high watermark from the latest fetch
	next map[topicPartition]int64 // next offset to handle: txn version + 1
}

func newConsumerLag(pipeline string, m *Metrics) *consumerLag {
	return &consumerLag{pipeline: pipeline, m: m, hwm: map[topicPartition]int64{}, next: map[topicPartition]int64{}}
}

// setNext records that the partition's next offset to handle is next (never moving it
// back) and updates its lag.
func (l *consumerLag) setNext(k topicPartition, next int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.next[k]; !ok || next > cur {
		l.next[k] = next
	}
	l.updateLocked(k)
}

// nextOf is the partition's next offset to handle, if known.
func (l *consumerLag) nextOf(k topicPartition) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.next[k]
	return n, ok
}

// observe takes the high watermarks of a poll's partitions for the lag gauge.
func (l *consumerLag) observe(fs kgo.Fetches) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fp.Err != nil || fp.HighWatermark < 0 {
			return
		}
		k := topicPartition{fp.Topic, fp.Partition}
		l.hwm[k] = fp.HighWatermark
		l.updateLocked(k)
	})
}

// forget drops the bookkeeping and the lag series of partitions that are no longer ours.
func (l *consumerLag) forget(gone map[topicPartition]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range gone {
		delete(l.hwm, k)
		delete(l.next, k)
		l.m.ConsumerLag.DeleteLabelValues(l.pipeline, k.topic, strconv.Itoa(int(k.partition)))
	}
}

// updateLocked sets the partition's ingestd_consumer_lag_records once both its high
// watermark and its next offset are known. l.mu held.
func (l *consumerLag) updateLocked(k topicPartition) {
	h, ok1 := l.hwm[k]
	n, ok2 := l.next[k]
	if !ok1 || !ok2 {
		return
	}
	l.m.ConsumerLag.WithLabelValues(l.pipeline, k.topic, strconv.Itoa(int(k.partition))).Set(float64(max(h-n, 0)))
}
