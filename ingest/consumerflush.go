package ingest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/batcher"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/internal/backoff"
)

// flushOnce makes one flush attempt for recs (flusher.flush) and applies its halts. cut
// are the records the flush left for the next one (batch.max_open_partitions: per
// partition, from the first record that would have opened one partition value more; their
// txn did not move past them), in recs order. Flush token held.
func (p *Pipeline) flushOnce(ctx context.Context, recs []*kgo.Record, note frameNote) (cut []*kgo.Record, err error) {
	out, err := p.fl.flush(ctx, recs, note)
	if err != nil {
		return nil, err
	}
	p.batchMu.Lock()
	p.measureDecoded(out)
	p.applyHalts(out.halts, "pipeline halted: a record does not fit the table under policy "+p.cfg.Schema.Policy)
	p.batchMu.Unlock()
	p.watchNotFound(out)
	if len(out.cutAt) > 0 {
		for _, r := range recs {
			if off, ok := out.cutAt[topicPartition{r.Topic, r.Partition}]; ok && r.Offset >= off {
				cut = append(cut, r)
			}
		}
		p.m.PartitionCuts.WithLabelValues(p.cfg.Name).Inc()
		p.log.Info("flush cut at batch.max_open_partitions; the rest of the batch is flushed next",
			"max_open_partitions", p.cfg.Batch.MaxOpenPartitions, "files", out.files, "records_left", len(cut), "partitions_cut", len(out.cutAt))
	}
	return cut, nil
}

// notFoundFlushesWarn is how many flushes in a row must dead-letter every record as
// schema_not_found before the pipeline warns and reports itself degraded: one such flush
// may be a producer that registered its schema elsewhere, two in a row with nothing else
// written look like a registry URL that answers 404 to every id.
const notFoundFlushesWarn = 2

// watchNotFound follows the flushes whose every record was dead-lettered as
// schema_not_found: after notFoundFlushesWarn in a row it logs a WARN naming the schema
// ids and the registry URL and marks the pipeline degraded in /readyz; any flush that
// writes a row or dead-letters for another reason ends it. The count is
// ingestd_schema_not_found_flushes. Flush token held.
func (p *Pipeline) watchNotFound(out *outcome) {
	ids := map[int]bool{}
	n, all := 0, out.rows == 0
	for _, d := range slices.Concat(out.kept, out.fresh) {
		n++
		if d.Reason != decode.ReasonSchemaNotFound {
			all = false
			break
		}
		ids[d.SchemaID] = true
	}
	if n == 0 && out.rows == 0 {
		return // nothing written, nothing dead-lettered (duplicates, tombstones): no verdict
	}
	if !all || n == 0 {
		if p.notFoundFlushes > 0 {
			p.notFoundFlushes = 0
			p.m.SchemaNotFoundFlushes.WithLabelValues(p.cfg.Name).Set(0)
			p.status.undegraded()
		}
		return
	}
	p.notFoundFlushes++
	p.m.SchemaNotFoundFlushes.WithLabelValues(p.cfg.Name).Set(float64(p.notFoundFlushes))
	if p.notFoundFlushes < notFoundFlushesWarn {
		return
	}
	registry := "(none: avro_schema_file)"
	if p.cfg.SchemaRegistry != nil {
		registry = p.cfg.SchemaRegistry.URL
	}
	sorted := slices.Sorted(maps.Keys(ids))
	why := fmt.Sprintf("the last %d flushes dead-lettered every record as schema_not_found (schema ids %v unknown to the schema registry %s): "+
		"check schema_registry.url (Apicurio Registry serves the Confluent API under /apis/ccompat/v7) and that the producers use this registry; "+
		"after fixing it, ingestd replay --reason schema_not_found lands them", p.notFoundFlushes, sorted, redactedURL(registry))
	// Logged before /readyz says degraded, so that whoever sees the state finds its line.
	if p.notFoundFlushes == notFoundFlushesWarn || p.notFoundFlushes%100 == 0 {
		p.log.Warn("every record of the last flushes was dead-lettered as schema_not_found",
			"flushes", p.notFoundFlushes, "records", n, "schema_ids", sorted, "schema_registry", redactedURL(registry),
			"fix", "check schema_registry.url and that the producers use this registry; then ingestd replay --reason schema_not_found")
	}
	p.status.degraded(why)
}

// redactedURL is u with any password in it shown as xxxxx.
func redactedURL(u string) string {
	if pu, err := url.Parse(u); err == nil {
		return pu.Redacted()
	}
	return u
}

// flushDueLocked flushes the buffered records that are due (batcher.Take: a bound or
// the age reached, or a partition's backoff ended; everything when force is set), held
// ones first (flushTakenLocked). Flush token held.
func (p *Pipeline) flushDueLocked(ctx context.Context, now time.Time, force bool) error {
	p.batchMu.Lock()
	recs, sizes, trigger := p.batch.Take(now, force)
	p.batchMu.Unlock()
	return p.flushTakenLocked(ctx, recs, sizes, trigger, now)
}

// flushTakenLocked flushes recs, taken from the batcher at now with their budget sizes
// (sizes[i] is recs[i]'s, in bytes: batcher.Take), and counts the flush by its trigger.
// Transient failures hold the records back with their sizes (so that they still count
// against batch.max_bytes) and pause their partitions with a jittered backoff; only a
// permanent failure is returned. Flush token held.
func (p *Pipeline) flushTakenLocked(ctx context.Context, recs []*kgo.Record, sizes []int64, trigger batcher.Trigger, now time.Time) error {
	if len(recs) == 0 {
		return nil
	}
	p.m.BatchFlushes.WithLabelValues(p.cfg.Name, trigger.String()).Inc()
	left, err := p.tryFlushLocked(ctx, recs)
	p.batchMu.Lock()
	defer p.batchMu.Unlock()
	if h := p.hooks.settle; h != nil {
		h(sizes, p.batch.Bytes())
	}
	if v := classify(err); v.action == actFatal && ctx.Err() == nil {
		// Kept, due at once: the revoke callback of the client's Close tries them once more.
		p.batch.Hold(left, p.sizesOf(left, recs, sizes), now, func(int) time.Duration { return 0 })
		return v.err
	}
	if len(left) > 0 {
		p.deferLocked(left, p.sizesOf(left, recs, sizes), err)
	}
	return nil
}

// drainLocked flushes everything buffered, retrying transient failures until ctx ends.
// Flush token held.
func (p *Pipeline) drainLocked(ctx context.Context) error {
	for {
		if err := p.flushDueLocked(ctx, time.Now(), true); err != nil {
			return err
		}
		p.batchMu.Lock()
		n := p.batch.Len()
		d, _ := p.batch.Deadline()
		p.batchMu.Unlock()
		if n == 0 {
			return nil
		}
		if err := backoff.Wait(ctx, max(time.Until(d), 50*time.Millisecond)); err != nil {
			p.batchMu.Lock()
			recs, _, _ := p.batch.Take(time.Now(), true)
			p.batchMu.Unlock()
			return fmt.Errorf("%d records not committed (they are read again after a restart): %w", len(recs), err)
		}
	}
}

// tryFlushLocked makes one flush attempt for recs (rebuilding on a fresh snapshot when
// another writer changed the table) and returns the records that were not committed:
// those of partitions waiting for the schema registry (per partition, from the first
// record whose schema could not be fetched), or all of them when the write failed.
// Flush token held (each settled commit takes batchMu briefly).
func (p *Pipeline) tryFlushLocked(ctx context.Context, recs []*kgo.Record) (left []*kgo.Record, err error) {
	if len(recs) == 0 {
		return nil, nil
	}
	p.m.Batches.WithLabelValues(p.cfg.Name).Inc()
	ready, waiting, note, werr := p.resolveSchemas(ctx, recs)
	// A flush cut at batch.max_open_partitions leaves the rest for the next flush, made at
	// once: each commits at most that many data files, and its buffers go before the next.
	for len(ready) > 0 {
		cut, err := p.writeLocked(ctx, ready, note) // cut is part of ready: note holds for it too
		if err != nil {
			return remaining(recs, ready, waiting), err
		}
		done := ready
		if len(cut) > 0 {
			done = make([]*kgo.Record, 0, len(ready)-len(cut))
			left := recordSet(cut)
			for _, r := range ready {
				if !left[keyOf(r)] {
					done = append(done, r)
				}
			}
		}
		p.batchMu.Lock()
		p.committedLocked(done, append(cut[:len(cut):len(cut)], waiting...))
		p.batchMu.Unlock()
		ready = cut
	}
	return waiting, werr
}

// remaining returns the records of recs that are in a or b, in recs order (all of recs
// when a and b hold them all).
func remaining(recs, a, b []*kgo.Record) []*kgo.Record {
	if len(a)+len(b) == len(recs) {
		return recs
	}
	keep := recordSet(a)
	for _, r := range b {
		keep[keyOf(r)] = true
	}
	out := make([]*kgo.Record, 0, len(a)+len(b))
	for _, r := range recs {
		if keep[keyOf(r)] {
			out = append(out, r)
		}
	}
	return out
}

func recordSet(recs []*kgo.Record) map[recordKey]bool {
	m := make(map[recordKey]bool, len(recs))
	for _, r := range recs {
		m[keyOf(r)] = true
	}
	return m
}

// writeLocked is flushOnce with rebuilds: a winner that changed the schema or moved one
// of our partitions' txn (a zombie or a new owner) makes the batch be rebuilt on the new
// snapshot, which drops what the table already has. Records already dead-lettered under
// p.commitID stay dead-lettered in the rebuilds (p.deadSet), even when they fit now.
// Flush token held.
func (p *Pipeline) writeLocked(ctx context.Context, recs []*kgo.Record, note frameNote) (cut []*kgo.Record, err error) {
	for attempt := 0; ; attempt++ {
		cut, err := p.flushOnce(ctx, recs, note)
		if classify(err).action != actRebuild {
			return cut, err
		}
		p.observe(verdict{action: actRebuild, err: err}, 1, "table changed by another writer; rebuilding the commit on the new snapshot", "attempt", attempt+1)
		if attempt+1 >= maxConflictRebuilds {
			return nil, &transientError{stage: "commit", err: err}
		}
		if serr := rebuildWait(ctx, attempt); serr != nil { // a busy table: back off before racing again
			return nil, &transientError{stage: "commit", err: serr}
		}
	}
}

// applyHalts pauses halted partitions and reports them (logs, status, metric), holding
// the flush token and batchMu: the poll loop reads halted under batchMu, the flusher
// with the token. The
// partitions' records already buffered behind the halt are dropped by the next flush
// (flusher.collect skips halted partitions), never committed.
func (p *Pipeline) applyHalts(halts []HaltedPartition, msg string) {
	for _, h := range halts {
		k := topicPartition{h.Topic, h.Partition}
		p.halted[k] = h
		p.observe(verdict{action: actHalt, reason: h.Reason}, 1, msg,
			"topic", h.Topic, "partition", h.Partition, "offset", h.Offset, "field", h.Field, "message", h.Message)
		p.status.halt(h) // after the log line and the gauge: whoever sees the halt in /readyz finds both
		if p.cl != nil {
			p.cl.PauseFetchPartitions(map[string][]int32{h.Topic: {h.Partition}})
		}
	}
}

// resolveSchemas looks up the writer schema of every framed record before the flush, so
// that a registry outage holds back only the partitions whose records need a schema
// that is not cached: per partition, the records from the first such one on wait. The
// lookups fill the registry client's cache, which flushOnce then reads. note says
// whether every value in ready is a frame of one schema id (frameNote: collect then reads
// no frame again).
func (p *Pipeline) resolveSchemas(ctx context.Context, recs []*kgo.Record) (ready, waiting []*kgo.Record, note frameNote, err error) {
	if !p.deps.Framed || p.deps.Schemas == nil {
		return recs, nil, frameNote{}, nil
	}
	ready = make([]*kgo.Record, 0, len(recs))
	failed := map[int]bool{}
	waits := map[topicPartition]bool{}
	// uniform stays set while every value in ready is a frame of schema id noteID (the
	// flush's collect then need not read the frames again: frameNote).
	uniform, noteID, noted := true, 0, false
	// okID is the last id this call resolved (or found permanently unknown): a batch holds
	// one or a few writer schemas, so consecutive records repeat it and need no lookup (a
	// lookup is a context with a timer, a sync.Map load and a boxed key: about a quarter of
	// the daemon's CPU at 200 B records when done per record; docs/performance.md).
	okID, haveOK := 0, false
	for _, r := range recs {
		// The partition is read only while some partition waits or is halted: the value is
		// the only field of the record the common case needs.
		if len(waits) > 0 && waits[topicPartition{r.Topic, r.Partition}] {
			waiting = append(waiting, r)
			continue
		}
		if r.Value == nil {
			ready = append(ready, r)
			continue
		}
		if len(p.halted) > 0 {
			if _, h := p.halted[topicPartition{r.Topic, r.Partition}]; h {
				ready = append(ready, r)
				uniform = false // not read here
				continue
			}
		}
		id, _, ferr := decode.ParseFrame(r.Value)
		if ferr == nil && haveOK && id == okID {
			// A record of id okID is in ready already (the one that looked it up): noted.
			if id != noteID {
				uniform = false
			}
			ready = append(ready, r)
			continue
		}
		if ferr == nil && !failed[id] {
			lctx, cancel := context.WithTimeout(ctx, schemaLookupTimeout)
			_, serr := p.deps.Schemas.Schema(lctx, id)
			cancel()
			if errors.Is(serr, decode.ErrRegistryAuth) {
				return nil, recs, frameNote{}, serr // fatal: every lookup fails the same way until a person fixes the credentials
			}
			var de *decode.Error
			if serr != nil && !errors.As(serr, &de) {
				failed[id] = true
				err = &transientError{stage: "schema registry", err: serr}
			} else {
				okID, haveOK = id, true
			}
		}
		if ferr == nil && failed[id] {
			waits[topicPartition{r.Topic, r.Partition}] = true
			waiting = append(waiting, r)
			continue
		}
		switch {
		case ferr != nil:
			uniform = false // a bad frame: collect parses it and makes the failure
		case !noted:
			noteID, noted = id, true
		case id != noteID:
			uniform = false
		}
		ready = append(ready, r)
	}
	return ready, waiting, frameNote{id: noteID, uniform: uniform && noted}, err
}

// committedLocked records a successful flush of recs: partitions that are no longer
// waiting leave their backoff and are resumed, and the lag bookkeeping advances. batchMu held.
func (p *Pipeline) committedLocked(recs, waiting []*kgo.Record) {
	still := map[topicPartition]bool{}
	for _, r := range waiting {
		still[topicPartition{r.Topic, r.Partition}] = true
	}
	last := lastOffsets(recs)
	resume := map[string][]int32{}
	for k, off := range last {
		if _, h := p.halted[k]; h {
			continue
		}
		p.lag.setNext(k, off+1)
		if still[k] {
			continue
		}
		if n, ok := p.batch.Release(k); ok {
			resume[k.topic] = append(resume[k.topic], k.partition)
			p.log.Info("partition resumed after transient failures", "topic", k.topic, "partition", k.partition, "attempts", n)
		}
	}
	if len(resume) > 0 && p.cl != nil {
		p.cl.ResumeFetchPartitions(resume)
	}
	if p.batch.Holding() == 0 {
		p.status.recovered()
	}
	p.m.PartitionsBackingOff.WithLabelValues(p.cfg.Name).Set(float64(p.batch.Holding()))
}

// lastOffsets returns, per partition of recs (each partition's records in offset order),
// the offset of its last record. Records come in runs of one partition: the map is
// written once per run, not per record.
func lastOffsets(recs []*kgo.Record) map[topicPartition]int64 {
	last := map[topicPartition]int64{}
	for i, r := range recs {
		if i+1 < len(recs) {
			if n := recs[i+1]; n.Partition == r.Partition && n.Topic == r.Topic {
				continue // not the run's last
			}
		}
		last[topicPartition{r.Topic, r.Partition}] = r.Offset
	}
	return last
}

// deferLocked keeps recs for a retry after a transient failure, with their budget sizes
// (sizes[i] is recs[i]'s, in bytes: they still count against batch.max_bytes): their
// partitions are paused (no more records are fetched for them) and retried after a
// jittered, exponentially growing backoff of their own. Nothing is dead-lettered for it.
// batchMu held.
func (p *Pipeline) deferLocked(recs []*kgo.Record, sizes []int64, cause error) {
	now := time.Now()
	v := classify(cause)
	if v.action != actRetry { // e.g. ctx ended during the flush: retried like a transient failure
		v = verdict{action: actRetry, stage: "flush", err: cause}
	}
	pause := map[string][]int32{}
	var maxWait time.Duration
	attempt := 0
	holds := p.batch.Hold(recs, sizes, now, retryBackoff.Duration)
	for _, h := range holds {
		if h.Attempt == 1 { // newly held: stop fetching it
			pause[h.Key.topic] = append(pause[h.Key.topic], h.Key.partition)
		}
		maxWait, attempt = max(maxWait, h.Until.Sub(now)), max(attempt, h.Attempt)
	}
	if len(pause) > 0 && p.cl != nil {
		p.cl.PauseFetchPartitions(pause)
	}
	p.m.PartitionsBackingOff.WithLabelValues(p.cfg.Name).Set(float64(p.batch.Holding()))
	msg := "transient failure: partitions paused, records kept for a retry (nothing dead-lettered)"
	if v.stage == "produce dead letters" {
		// Some dead letters may have been acknowledged before the failure: the retry produces
		// them again under the same commit id, and replay skips the copies (dlq.DedupeKey).
		msg = "transient failure: partitions paused, records kept for a retry (dead letters the broker acknowledged before the failure are produced again; replay skips the copies)"
	}
	p.observe(v, len(recs), msg,
		"partitions", len(holds), "records", len(recs), "attempt", attempt, "retry_in", maxWait.Round(time.Millisecond))
	p.status.retrying(cause) // after the log line and the counter: /readyz never shows a state its line has yet to explain
}
