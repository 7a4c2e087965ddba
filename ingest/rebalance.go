package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/batcher"
	"github.com/ingestd/ingestd/deltawriter"
)

// adjustOffsets seeks newly assigned partitions to the Delta txn version + 1, or to the
// configured start when the table holds no txn for the partition and the group has no
// offset for it. A group offset without a txn is the progress of dead-letter-only flushes
// made while the table did not exist (consumerMode.done), possibly by another member
// before another one created the table: the partition resumes there, and the next commit
// (recordProgressLocked, if nothing else comes first) moves its txn to it and names that
// position (flusher.fromGroup), so replay counts those dead letters as real.
func (p *Pipeline) adjustOffsets(ctx context.Context, m map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	txns := map[string]int64{}
	retention := false
	snap, err := p.deps.Table.Snapshot(ctx)
	switch {
	case errors.Is(err, deltawriter.ErrTableNotFound):
	case err != nil:
		err = fmt.Errorf("read txn versions: %w", err)
		p.observe(verdict{action: actRetry, stage: "read txn versions", err: err}, 1, "partitions not assigned; the session fails and rejoins")
		return nil, err
	default:
		txns, retention = snap.Txns, snap.TxnRetention > 0
	}
	ends := p.logEnds(ctx, m, txns)
	var halts []HaltedPartition
	for t, ps := range m {
		for part, committed := range ps {
			k := topicPartition{t, part}
			if v, ok := txns[p.appID(t, part)]; ok {
				if end, known := ends[k]; known && v+1 > end {
					halts = append(halts, txnBeyondLogEnd(k, v, end))
				}
			}
			ps[part] = p.assignedOffset(k, committed, txns, retention)
		}
	}
	if len(halts) > 0 {
		tok := p.acquireFlush()
		p.batchMu.Lock()
		p.applyHalts(halts, "pipeline halted: the partition's log ends before the offset the table's txn has reached")
		p.batchMu.Unlock()
		p.releaseFlush(tok)
	}
	return m, nil
}

// ReasonTxnBeyondLogEnd is the halt reason of a partition whose log ends before the next
// offset the table's txn names (txnBeyondLogEnd).
const ReasonTxnBeyondLogEnd = "txn_beyond_log_end"

// txnBeyondLogEnd is the halt of partition k whose table txn version v (the last offset
// written) is at or past the partition's end offset end (its high watermark): the log no
// longer holds what the table recorded, because the topic was deleted and created again
// under its name or the broker lost records (an unclean leader election). Reading on
// would skip the new records at offsets up to v as already written, so the partition
// halts until the txn is reset (`ingestd table reset-offsets`; docs/operations.md,
// "A topic created again").
func txnBeyondLogEnd(k topicPartition, v, end int64) HaltedPartition {
	return HaltedPartition{Topic: k.topic, Partition: k.partition, Offset: v + 1, Reason: ReasonTxnBeyondLogEnd,
		Message: fmt.Sprintf("the table's txn for %s[%d] is at offset %d, but the partition ends at offset %d: the topic was deleted and created again, "+
			"or the broker lost records. Its records at offsets up to %d would be skipped as already written. "+
			"Fix: ingestd table reset-offsets --config PIPELINE.yaml --topic %s --to-earliest (a topic created again), or --to-offset N, then restart",
			k.topic, k.partition, v, end, v, k.topic)}
}

// logEnds returns the end offset (high watermark) of each partition of m the table holds
// a txn for, read through the group consumer with one ListOffsets request per broker;
// nil when none has a txn, or when the request fails (logged: the check is skipped, and
// assignment goes on as before it).
func (p *Pipeline) logEnds(ctx context.Context, m map[string]map[int32]kgo.Offset, txns map[string]int64) map[topicPartition]int64 {
	var topics []string
	for t, ps := range m {
		for part := range ps {
			if _, ok := txns[p.appID(t, part)]; ok {
				topics = append(topics, t)
				break
			}
		}
	}
	if len(topics) == 0 {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, logEndsTimeout)
	defer cancel()
	select { // this callback may run before start has set p.cl
	case <-p.clSet:
	case <-lctx.Done():
		p.log.Warn("could not read the end offsets of the assigned partitions; not checking them against the table's txns", "err", lctx.Err())
		return nil
	}
	p.batchMu.Lock()
	cl := p.cl
	p.batchMu.Unlock()
	listed, err := kadm.NewClient(cl).ListEndOffsets(lctx, topics...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		p.log.Warn("could not read the end offsets of the assigned partitions; not checking them against the table's txns", "err", err)
		return nil
	}
	ends := map[topicPartition]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[topicPartition{o.Topic, o.Partition}] = o.Offset })
	return ends
}

// logEndsTimeout bounds logEnds' request: it runs inside the rebalance.
const logEndsTimeout = 10 * time.Second

// assignedOffset is where newly assigned partition k starts (adjustOffsets): after its
// txn version in txns, else at its group offset committed when the table expires txns
// (retention) or when records were dead-lettered while no table existed, else at the
// configured start. It records the partition's next offset for the lag and, for a group
// offset without a txn, the progress the next commit must record.
func (p *Pipeline) assignedOffset(k topicPartition, committed kgo.Offset, txns map[string]int64, retention bool) kgo.Offset {
	t, part := k.topic, k.partition
	if v, ok := txns[p.appID(t, part)]; ok {
		p.lag.setNext(k, v+1)
		p.log.Info("partition assigned", "topic", t, "partition", part, "offset", v+1, "from", "delta txn")
		return kgo.NewOffset().At(v + 1).WithEpoch(-1)
	}
	eo := committed.EpochOffset()
	switch {
	case retention && eo.Offset >= 0:
		// The table expires txns (delta.setTransactionRetentionDuration) and this
		// partition's expired: the advisory group offset, committed after each
		// Delta commit, is the best record of progress left.
		p.lag.setNext(k, eo.Offset)
		p.log.Warn("partition assigned without a txn in a table that expires txns; resuming from the Kafka group offset",
			"topic", t, "partition", part, "offset", eo.Offset, "from", "group offset")
		return kgo.NewOffset().At(eo.Offset).WithEpoch(-1)
	case eo.Offset > 0:
		// Records before eo.Offset were dead-lettered while no table existed.
		p.lag.setNext(k, eo.Offset)
		tok := p.acquireFlush()
		p.fl.fromGroup[k] = eo.Offset - 1
		p.fl.noTableTxns[k] = max(p.fl.noTableTxns[k], eo.Offset-1)
		p.batchMu.Lock()
		p.publishProgressLocked()
		p.batchMu.Unlock()
		p.releaseFlush(tok)
		p.log.Info("partition assigned", "topic", t, "partition", part, "offset", eo.Offset, "from", "group offset (no txn yet)")
		return kgo.NewOffset().At(eo.Offset).WithEpoch(-1)
	case p.cfg.Kafka.StartOffset == "latest":
		p.log.Info("partition assigned", "topic", t, "partition", part, "from", "latest")
		return kgo.NewOffset().AtEnd()
	}
	p.lag.setNext(k, 0)
	p.log.Info("partition assigned", "topic", t, "partition", part, "from", "earliest")
	return kgo.NewOffset().AtStart()
}

// onRevoked commits what is buffered for the revoked partitions before they move to
// another member, in one bounded attempt (well inside the rebalance timeout); if that
// fails, the records are dropped and the new owner re-reads them from the txn version.
// Records of the partitions we keep stay buffered. It first waits for the flush in flight.
func (p *Pipeline) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	gone := partSet(revoked)
	if len(gone) == 0 {
		return // the end of a session that moved nothing of ours
	}
	// Wait for the flush in flight (it may hold records of these partitions, or fail and
	// give them back to the batcher), then take what is buffered for them.
	tok := p.acquireFlush()
	defer p.releaseFlush(tok)
	p.batchMu.Lock()
	recs, _ := p.batch.TakeKeys(func(k topicPartition) bool { return gone[k] }) // not given back: the new owner re-reads what fails
	abandoned := p.hooks.abandoned
	p.batchMu.Unlock()
	if len(recs) > 0 && !abandoned {
		p.m.BatchFlushes.WithLabelValues(p.cfg.Name, batcher.TriggerRevoke.String()).Inc()
		fctx, cancel := context.WithTimeout(ctx, revokeFlushTimeout)
		left, err := p.tryFlushLocked(fctx, recs)
		cancel()
		if len(left) > 0 || err != nil {
			p.log.Warn("flush on revoke incomplete; the new owner re-reads these records from the Delta txn",
				"records", len(left), "err", err)
		}
		// Its advisory offset commit is answered inside the group session that ends now.
		p.cm.commits.wait(commitWaitOnStop)
	}
	p.batchMu.Lock()
	defer p.batchMu.Unlock()
	p.forgetLocked(revoked, gone)
}

// onLost drops buffered records of partitions lost without a clean revoke: another
// member may already own them, and the txn fencing would refuse our commit anyway.
func (p *Pipeline) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	gone := partSet(lost)
	if len(gone) == 0 {
		return
	}
	tok := p.acquireFlush() // the flush in flight settles first (its commit is fenced by the txns if another member moved them)
	defer p.releaseFlush(tok)
	p.batchMu.Lock()
	defer p.batchMu.Unlock()
	if recs, _ := p.batch.TakeKeys(func(k topicPartition) bool { return gone[k] }); len(recs) > 0 {
		p.log.Warn("partitions lost; buffered records dropped (the new owner re-reads them from the Delta txn)", "records", len(recs))
	}
	p.forgetLocked(lost, gone)
}

func partSet(m map[string][]int32) map[topicPartition]bool {
	s := map[topicPartition]bool{}
	for t, ps := range m {
		for _, part := range ps {
			s[topicPartition{t, part}] = true
		}
	}
	return s
}

// forgetLocked clears the state of partitions that are no longer ours: halts (the next
// owner halts again at the same offset), backoffs and pauses (so that a later
// re-assignment fetches again), and their lag series. Holding the flush token and
// batchMu.
func (p *Pipeline) forgetLocked(parts map[string][]int32, gone map[topicPartition]bool) {
	for k := range gone {
		if _, h := p.halted[k]; h {
			delete(p.halted, k)
			p.status.unhalt(k.topic, k.partition)
		}
		p.batch.Release(k)
		delete(p.fl.noTableTxns, k) // the new owner resumes from the group offset, or re-reads them (their dead letters become orphans)
		delete(p.fl.fromGroup, k)
	}
	p.publishProgressLocked()
	if p.cl != nil {
		p.cl.ResumeFetchPartitions(parts)
	}
	halted := 0.0
	if len(p.halted) > 0 {
		halted = 1
	}
	p.m.PipelineHalted.WithLabelValues(p.cfg.Name).Set(halted)
	p.m.PartitionsBackingOff.WithLabelValues(p.cfg.Name).Set(float64(p.batch.Holding()))
	if p.batch.Holding() == 0 {
		p.status.recovered()
	}
	p.lag.forget(gone)
}
