// Package ingest runs pipelines: it consumes a Kafka consumer group, decodes Avro records
// by their writer schema, asks the schema guard what to do with each, writes what fits to
// the Delta table with the source offsets in txn actions of the same commit, and sends what
// does not fit to the dead-letter topic (DESIGN.md §2 and §3).
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingestd/ingestd/batcher"
	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/ingest/decode"
)

// SchemaSource resolves a schema id to its writer schema. decode.Registry implements it
// for Confluent-framed records; a static source serves raw Avro with one .avsc.
// Errors: a *decode.Error with reason schema_not_found for unknown ids (permanent), or an
// error wrapping decode.ErrTransient (retry later).
type SchemaSource interface {
	Schema(ctx context.Context, id int) (*decode.WriterSchema, error)
}

// Deps are what a Pipeline needs besides its config. Constructed by Open for real use;
// tests may pass their own.
type Deps struct {
	Logger    *slog.Logger
	Metrics   *Metrics
	Schemas   SchemaSource
	Framed    bool // records carry the Confluent frame (magic 0 + 4-byte schema id)
	Table     *deltawriter.Table
	KafkaOpts []kgo.Opt // extra client options (e.g. a dialer in tests)
	// KafkaSecurity is kafkaSecurityOpts(cfg.Kafka) (TLS, SASL, client id), set by
	// OpenDeps; every client gets it, before KafkaOpts (see Deps.kafkaOpts).
	KafkaSecurity []kgo.Opt
}

// Pipeline moves one set of topics into one Delta table. Create it with NewPipeline and
// start it with Run; Status may be called from any goroutine.
type Pipeline struct {
	cfg  *Config
	deps Deps
	log  *slog.Logger
	m    *Metrics

	status statusBox

	// mu guards everything below: the poll loop and the rebalance callbacks both flush.
	mu       sync.Mutex
	cl       *kgo.Client
	dlq      *kgo.Client // dead-letter producer; nil: cl produces
	batch    *batcher.Batcher[*kgo.Record]
	halted   map[topicPartition]HaltedPartition
	compiled map[decoderKey]*decode.Decoder

	replay *replayRun // set by Replay (replay.go); nil for the consumer pipeline

	// commitID is commitInfo.txnId of this pipeline's next commit, named in advance in
	// every dead letter (ingestd.commit.id) so that replay can tell whether the commit that
	// acknowledges it is the one that moved its txn (see ackIndex.classify). Every
	// attempt and every non-committing flush reuse it; a new one follows each successful
	// commit. deadSet holds the records whose dead letter (or carried copy) under commitID
	// was acknowledged by the DLQ but not committed yet: every rebuild keeps them
	// dead-lettered instead of deciding again, so a record that fits after a concurrent
	// schema change is not written as well.
	commitID string
	deadSet  map[recordKey]deadEntry
	// noTableTxns holds, per partition, the last offset of dead-letter-only flushes made
	// while the table did not exist (nothing to commit then): the commit that creates the
	// table moves these txns too, under the same commitID the dead letters name, so replay
	// classifies them as real. Dropped with the partition on revoke/loss.
	noTableTxns map[topicPartition]int64
	// beforeCommit, when set (tests only), runs after the dead letters of a flush are
	// acknowledged and before its commit, with their number; an error ends the flush
	// there, like a crash (nothing committed).
	beforeCommit func(deadLetters int) error

	// Decode buffers reused across flushes (guarded by mu, like flushOnce): the string
	// bytes of the batch being decoded, and the column value slices.
	arena   decode.Arena
	colBufs [][]parquet.Value
	// pending holds records whose flush failed transiently (registry, broker, store), in
	// arrival order; their partitions are paused until backoffs[tp].until. Records of a
	// partition are always flushed pending-first, so a partition's txn never passes a
	// record that is still waiting.
	pending  []*kgo.Record
	backoffs map[topicPartition]*partBackoff
	// abandoned makes Run and the revoke callback drop buffered records without flushing:
	// the in-process stand-in for kill -9 used by tests.
	abandoned bool

	// lagMu guards the consumer-lag bookkeeping, also written by adjustOffsets.
	lagMu sync.Mutex
	hwm   map[topicPartition]int64 // high watermark from the latest fetch
	next  map[topicPartition]int64 // next offset to handle: txn version + 1
}

type topicPartition struct {
	topic     string
	partition int32
}

// partBackoff is the retry state of one partition after a transient failure.
type partBackoff struct {
	attempt int
	until   time.Time
}

// Timeouts that keep the poll loop and the rebalance callbacks inside the rebalance
// timeout: one flush attempt is bounded by the registry lookup, the dead-letter delivery
// and the store; a transient failure never blocks the loop, it pauses the partitions.
const (
	rebalanceTimeout     = 2 * time.Minute
	dlqDeliveryTimeout   = 30 * time.Second
	schemaLookupTimeout  = 10 * time.Second
	revokeFlushTimeout   = 45 * time.Second
	shutdownFlushTimeout = 60 * time.Second
	maxPollRecords       = 10_000
	maxConflictRebuilds  = 8
)

// errAbandon, as the cancel cause of Run's context, stops Run like a crash: nothing
// buffered is flushed, no offsets are committed (tests use it with a broker that ignores
// the LeaveGroup, to model kill -9).
var errAbandon = errors.New("pipeline abandoned without flushing")

// NewPipeline returns a pipeline for cfg; it does no I/O.
func NewPipeline(cfg *Config, deps Deps) *Pipeline {
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("pipeline", cfg.Name)
	p := &Pipeline{
		cfg:  cfg,
		deps: deps,
		log:  log,
		m:    deps.Metrics,
		batch: batcher.New[*kgo.Record](batcher.Limits{
			MaxRecords: cfg.Batch.MaxRecords, MaxBytes: int64(cfg.Batch.MaxBytes), MaxAge: cfg.Batch.MaxAge}),
		halted:   map[topicPartition]HaltedPartition{},
		compiled: map[decoderKey]*decode.Decoder{},
		backoffs: map[topicPartition]*partBackoff{},
		hwm:      map[topicPartition]int64{},
		next:     map[topicPartition]int64{},
		commitID: newCommitID(),
		deadSet:  map[recordKey]deadEntry{},

		noTableTxns: map[topicPartition]int64{},
	}
	p.status.s = Status{Pipeline: cfg.Name, State: StateStarting, Since: time.Now()}
	p.m.initPipeline(cfg.Name)
	if rs, ok := deps.Schemas.(registryStatser); ok {
		p.m.addRegistry(cfg.Name, rs)
	}
	return p
}

// Name returns the pipeline name.
func (p *Pipeline) Name() string { return p.cfg.Name }

// Status returns the pipeline's current state.
func (p *Pipeline) Status() Status { return p.status.get() }

// appID is the Delta txn appId of one source partition (DESIGN.md §3, Exactly-once).
func (p *Pipeline) appID(topic string, partition int32) string {
	return fmt.Sprintf("%s-%s-%d", p.cfg.AppID, topic, partition)
}

// Run consumes until ctx is cancelled, then flushes what is buffered, commits it and
// returns nil. A halt does not end Run: halted partitions are paused and reported by
// Status while the others go on. Run returns an error when the pipeline cannot start
// (table refused, dead-letter topic missing, broker unreachable at start) or hits a
// permanent failure; the error is also reported by Status.
func (p *Pipeline) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			p.status.set(StateFailed, err)
			p.log.Error("pipeline failed", "err", err)
		} else {
			p.status.set(StateStopped, nil)
		}
	}()
	if err := p.checkTable(ctx); err != nil {
		return err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(p.cfg.Kafka.Brokers...),
		kgo.ConsumerGroup(p.cfg.Kafka.Group),
		kgo.ConsumeTopics(p.cfg.Kafka.Topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.RebalanceTimeout(rebalanceTimeout),
		kgo.SessionTimeout(p.cfg.Kafka.SessionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(time.Second), // resumed partitions wait at most this for the fetch in flight
		kgo.AdjustFetchOffsetsFn(p.adjustOffsets),
		kgo.OnPartitionsRevoked(p.onRevoked),
		kgo.OnPartitionsLost(p.onLost),
		kgo.WithLogger(kgoLogger{p.log}),
	}
	opts = append(append(opts, p.deps.kafkaOpts()...), kafkaGroupOpts(p.cfg.Kafka)...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("create kafka client: %w", err)
	}
	defer cl.Close()
	var dlq *kgo.Client
	if p.cfg.DeadLetter.Topic != "" {
		// A producer of its own: dead letters never queue behind the consumer, and it is
		// not idempotent (the dead-letter topic is at-least-once by design; replay
		// dedupes), so it needs no producer id: after a broker restart the first produce
		// does not wait for InitProducerId, and no sequence state can wedge a partition.
		dopts := append([]kgo.Opt{
			kgo.SeedBrokers(p.cfg.Kafka.Brokers...),
			kgo.DisableIdempotentWrite(),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(0),
			kgo.WithLogger(kgoLogger{p.log.With("client", "dead-letter producer")}),
		}, p.deps.kafkaOpts()...)
		if dlq, err = kgo.NewClient(dopts...); err != nil {
			return fmt.Errorf("create dead-letter producer: %w", err)
		}
		defer dlq.Close()
	}
	p.mu.Lock()
	p.cl, p.dlq = cl, dlq
	p.mu.Unlock()
	if err := p.checkTopics(ctx, cl); err != nil {
		return err
	}
	if err := p.checkGroupAccess(ctx, cl); err != nil {
		return err
	}
	p.status.set(StateRunning, nil)
	p.log.Info("pipeline started", "topics", p.cfg.Kafka.Topics, "group", p.cfg.Kafka.Group,
		"table", p.cfg.Table.URI, "policy", p.cfg.Schema.Policy)

	var fw fatalWatch // security errors that persist fail the pipeline (kafkasec.go)
	for ctx.Err() == nil {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		p.mu.Lock()
		if d, ok := p.wakeLocked(); ok {
			pollCtx, cancel = context.WithDeadline(ctx, d)
		}
		p.mu.Unlock()
		fs := cl.PollRecords(pollCtx, maxPollRecords)
		cancel()
		if fs.IsClientClosed() {
			break
		}
		if err := p.fetchErrors(fs, &fw); err != nil {
			cl.AllowRebalance() // or Close would wait for the rebalance this poll blocks
			return err
		}
		fs.EachError(func(t string, part int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				p.m.TransientErrors.WithLabelValues(p.cfg.Name, "fetch").Inc()
				p.log.Warn("fetch error", "topic", t, "partition", part, "err", err)
			}
		})
		p.observeFetch(fs)
		now := time.Now()
		var ferr error
		p.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			p.m.RecordsConsumed.WithLabelValues(p.cfg.Name).Inc()
			if _, h := p.halted[topicPartition{r.Topic, r.Partition}]; h {
				return
			}
			if p.batch.Add(r, recordSize(r), now) && ferr == nil {
				ferr = p.flushDueLocked(ctx, now, false) // full: records or bytes bound reached
			}
		})
		if ferr == nil && (p.batch.Due(now) || p.retryDueLocked(now)) {
			ferr = p.flushDueLocked(ctx, now, false)
		}
		p.mu.Unlock()
		cl.AllowRebalance()
		if ferr != nil && ctx.Err() == nil {
			return ferr
		}
	}
	if errors.Is(context.Cause(ctx), errAbandon) {
		p.mu.Lock()
		p.abandoned = true
		p.pending = nil
		p.batch.Take()
		p.mu.Unlock()
		p.log.Warn("pipeline abandoned: buffered records dropped without a flush")
		return nil
	}
	// Shutdown: flush and commit what is buffered, with a bounded time of its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownFlushTimeout)
	defer cancel()
	p.mu.Lock()
	ferr := p.drainLocked(sctx)
	p.mu.Unlock()
	if ferr != nil {
		return fmt.Errorf("flush on shutdown: %w", ferr)
	}
	p.log.Info("pipeline stopped")
	return nil
}

// produceDLQ produces dead letters and waits until every one is acknowledged, or
// fails after dlqDeliveryTimeout. The bound is a context deadline, not kgo's
// RecordDeliveryTimeout: kgo measures that from each record's Timestamp, and a dead
// letter keeps its source record's timestamp, so with any consumer lag above the
// timeout every dead letter would time out at once, forever.
func (p *Pipeline) produceDLQ(ctx context.Context, recs []*kgo.Record) error {
	cl := p.dlq
	if cl == nil {
		cl = p.cl
	}
	dctx, cancel := context.WithTimeout(ctx, dlqDeliveryTimeout)
	defer cancel()
	if err := cl.ProduceSync(dctx, recs...).FirstErr(); err != nil {
		if se := securityError(p.cfg.Kafka, "WRITE on topic "+recs[0].Topic, err); se != nil {
			return se
		}
		if dctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("not acknowledged within %v: %w", dlqDeliveryTimeout, err)
		}
		return err
	}
	return nil
}

func recordSize(r *kgo.Record) int64 { return int64(len(r.Key) + len(r.Value)) }

// wakeLocked is when the poll loop must wake up even without records: the batch's age
// bound or the earliest end of a partition's backoff.
func (p *Pipeline) wakeLocked() (time.Time, bool) {
	d, ok := p.batch.Deadline()
	for _, b := range p.backoffs {
		if !ok || b.until.Before(d) {
			d, ok = b.until, true
		}
	}
	return d, ok
}

// retryDueLocked reports whether a partition's backoff has ended and its records wait.
func (p *Pipeline) retryDueLocked(now time.Time) bool {
	for _, r := range p.pending {
		if b := p.backoffs[topicPartition{r.Topic, r.Partition}]; b == nil || !now.Before(b.until) {
			return true
		}
	}
	return false
}

// flushDueLocked flushes the batch and the pending records whose partition is not in
// backoff (all of them when force is set), oldest first. Transient failures keep the
// records and pause their partitions with a jittered backoff; only a permanent failure
// is returned.
func (p *Pipeline) flushDueLocked(ctx context.Context, now time.Time, force bool) error {
	var recs, keep []*kgo.Record
	waits := func(r *kgo.Record) bool {
		b := p.backoffs[topicPartition{r.Topic, r.Partition}]
		return !force && b != nil && now.Before(b.until)
	}
	for _, r := range p.pending {
		if waits(r) {
			keep = append(keep, r)
		} else {
			recs = append(recs, r)
		}
	}
	for _, r := range p.batch.Take() {
		if waits(r) {
			keep = append(keep, r)
		} else {
			recs = append(recs, r)
		}
	}
	p.pending = keep
	left, err := p.tryFlushLocked(ctx, recs)
	if err != nil && !isTransient(err) && ctx.Err() == nil {
		p.pending = append(p.pending, left...)
		return err
	}
	if len(left) > 0 {
		p.deferLocked(left, err)
	}
	return nil
}

// drainLocked flushes everything buffered, retrying transient failures until ctx ends.
func (p *Pipeline) drainLocked(ctx context.Context) error {
	for {
		if err := p.flushDueLocked(ctx, time.Now(), true); err != nil {
			return err
		}
		if len(p.pending) == 0 {
			return nil
		}
		d, _ := p.wakeLocked()
		if err := sleepCtx(ctx, max(time.Until(d), 50*time.Millisecond)); err != nil {
			n := len(p.pending)
			p.pending = nil
			return fmt.Errorf("%d records not committed (they are read again after a restart): %w", n, err)
		}
	}
}

// tryFlushLocked makes one flush attempt for recs (rebuilding on a fresh snapshot when
// another writer changed the table) and returns the records that were not committed:
// those of partitions waiting for the schema registry (per partition, from the first
// record whose schema could not be fetched), or all of them when the write failed.
func (p *Pipeline) tryFlushLocked(ctx context.Context, recs []*kgo.Record) (left []*kgo.Record, err error) {
	if len(recs) == 0 {
		return nil, nil
	}
	p.m.Batches.WithLabelValues(p.cfg.Name).Inc()
	ready, waiting, werr := p.resolveSchemas(ctx, recs)
	if len(ready) > 0 {
		if err := p.writeLocked(ctx, ready); err != nil {
			return recs, err
		}
		p.committedLocked(ready, waiting)
	}
	return waiting, werr
}

// writeLocked is flushOnce with rebuilds: a winner that changed the schema or moved one
// of our partitions' txn (a zombie or a new owner) makes the batch be rebuilt on the new
// snapshot, which drops what the table already has. Records already dead-lettered under
// p.commitID stay dead-lettered in the rebuilds (p.deadSet), even when they fit now.
func (p *Pipeline) writeLocked(ctx context.Context, recs []*kgo.Record) error {
	for attempt := 0; ; attempt++ {
		err := p.flushOnce(ctx, recs)
		if !errors.Is(err, errSnapshotChanged) {
			return err
		}
		p.m.CommitConflicts.WithLabelValues(p.cfg.Name).Inc()
		p.log.Info("table changed by another writer; rebuilding the commit on the new snapshot", "attempt", attempt+1)
		if attempt+1 >= maxConflictRebuilds {
			return &transientError{"commit", err}
		}
		if attempt >= 2 { // a busy table: back off before racing again
			if serr := sleepCtx(ctx, backoff(attempt-2)); serr != nil {
				return &transientError{"commit", serr}
			}
		}
	}
}

// resolveSchemas looks up the writer schema of every framed record before the flush, so
// that a registry outage holds back only the partitions whose records need a schema
// that is not cached: per partition, the records from the first such one on wait. The
// lookups fill the registry client's cache, which flushOnce then reads.
func (p *Pipeline) resolveSchemas(ctx context.Context, recs []*kgo.Record) (ready, waiting []*kgo.Record, err error) {
	if !p.deps.Framed || p.deps.Schemas == nil {
		return recs, nil, nil
	}
	failed := map[int]bool{}
	waits := map[topicPartition]bool{}
	for _, r := range recs {
		k := topicPartition{r.Topic, r.Partition}
		if waits[k] {
			waiting = append(waiting, r)
			continue
		}
		if _, h := p.halted[k]; h || r.Value == nil {
			ready = append(ready, r)
			continue
		}
		id, _, ferr := decode.ParseFrame(r.Value)
		if ferr == nil && !failed[id] {
			lctx, cancel := context.WithTimeout(ctx, schemaLookupTimeout)
			_, serr := p.deps.Schemas.Schema(lctx, id)
			cancel()
			var de *decode.Error
			if serr != nil && !errors.As(serr, &de) {
				failed[id] = true
				err = &transientError{"schema registry", serr}
			}
		}
		if ferr == nil && failed[id] {
			waits[k] = true
			waiting = append(waiting, r)
			continue
		}
		ready = append(ready, r)
	}
	return ready, waiting, err
}

// committedLocked records a successful flush of recs: partitions that are no longer
// waiting leave their backoff and are resumed, and the lag bookkeeping advances.
func (p *Pipeline) committedLocked(recs, waiting []*kgo.Record) {
	still := map[topicPartition]bool{}
	for _, r := range waiting {
		still[topicPartition{r.Topic, r.Partition}] = true
	}
	last := map[topicPartition]int64{}
	for _, r := range recs {
		last[topicPartition{r.Topic, r.Partition}] = r.Offset
	}
	resume := map[string][]int32{}
	for k, off := range last {
		if _, h := p.halted[k]; h {
			continue
		}
		p.setNext(k, off+1)
		if b := p.backoffs[k]; b != nil && !still[k] {
			delete(p.backoffs, k)
			resume[k.topic] = append(resume[k.topic], k.partition)
			p.log.Info("partition resumed after transient failures", "topic", k.topic, "partition", k.partition, "attempts", b.attempt)
		}
	}
	if len(resume) > 0 && p.cl != nil {
		p.cl.ResumeFetchPartitions(resume)
	}
	if len(p.backoffs) == 0 {
		p.status.recovered()
	}
	p.m.PartitionsBackingOff.WithLabelValues(p.cfg.Name).Set(float64(len(p.backoffs)))
}

// deferLocked keeps recs for a retry after a transient failure: their partitions are
// paused (no more records are fetched for them) and retried after a jittered,
// exponentially growing backoff of their own. Nothing is dead-lettered for it.
func (p *Pipeline) deferLocked(recs []*kgo.Record, cause error) {
	now := time.Now()
	stage := "flush"
	var te *transientError
	if errors.As(cause, &te) {
		stage = te.stage
	} else if errors.Is(cause, decode.ErrTransient) {
		stage = "schema registry"
	}
	pause := map[string][]int32{}
	seen := map[topicPartition]bool{}
	var maxWait time.Duration
	attempt := 0
	for _, r := range recs {
		k := topicPartition{r.Topic, r.Partition}
		if seen[k] {
			continue
		}
		seen[k] = true
		b := p.backoffs[k]
		if b == nil {
			b = &partBackoff{}
			p.backoffs[k] = b
			pause[k.topic] = append(pause[k.topic], k.partition)
		}
		d := backoff(b.attempt)
		b.until = now.Add(d)
		b.attempt++
		maxWait, attempt = max(maxWait, d), max(attempt, b.attempt)
	}
	p.pending = append(p.pending, recs...)
	if len(pause) > 0 && p.cl != nil {
		p.cl.PauseFetchPartitions(pause)
	}
	p.m.TransientErrors.WithLabelValues(p.cfg.Name, stage).Inc()
	p.m.PartitionsBackingOff.WithLabelValues(p.cfg.Name).Set(float64(len(p.backoffs)))
	p.status.retrying(cause)
	p.log.Warn("transient failure: partitions paused, records kept for a retry (nothing dead-lettered)",
		"stage", stage, "err", cause, "partitions", len(seen), "records", len(recs), "attempt", attempt, "retry_in", maxWait.Round(time.Millisecond))
}

// takeLocked removes and returns the buffered records (pending first) of the partitions
// in gone, in their order.
func (p *Pipeline) takeLocked(gone map[topicPartition]bool) []*kgo.Record {
	var out, keep []*kgo.Record
	for _, r := range p.pending {
		if gone[topicPartition{r.Topic, r.Partition}] {
			out = append(out, r)
		} else {
			keep = append(keep, r)
		}
	}
	p.pending = keep
	p.batch.Drop(func(r *kgo.Record) bool {
		if gone[topicPartition{r.Topic, r.Partition}] {
			out = append(out, r)
			return true
		}
		return false
	}, recordSize)
	return out
}

// checkTable opens the table's snapshot (refusing tables ingestd cannot safely write,
// before any byte is written) and fails if it does not exist and table.create is false.
func (p *Pipeline) checkTable(ctx context.Context) error {
	snap, err := p.deps.Table.Snapshot(ctx)
	switch {
	case errors.Is(err, deltawriter.ErrTableNotFound):
		if !p.cfg.Table.Create {
			return fmt.Errorf("open table %s: no Delta table there and table.create is false (set table.create: true in %s)", p.cfg.Table.URI, p.cfg.File)
		}
		return nil
	case err != nil:
		return fmt.Errorf("open table %s: %w", p.cfg.Table.URI, err)
	}
	return p.checkWritable(snap)
}

// checkWritable refuses a table this pipeline cannot append to safely: one with a writer
// feature, constraint or column kind deltawriter does not implement
// (deltawriter.ErrUnsupportedFeature), or a partitioned one (the pipeline writes
// unpartitioned files; PROTOCOL.md, Partition Value Serialization would need one file per
// partition value). It is checked at start-up and again on every snapshot a flush reads,
// before any byte of that flush is written, since another writer may change the table.
func (p *Pipeline) checkWritable(snap *deltawriter.Snapshot) error {
	if err := snap.CheckWritable(); err != nil {
		return fmt.Errorf("refuse table %s: %w", p.cfg.Table.URI, err)
	}
	if cols := snap.Metadata.PartitionColumns; len(cols) > 0 {
		return fmt.Errorf("refuse table %s: it is partitioned by %v, and ingestd pipelines write only unpartitioned tables so far (write to an unpartitioned table, or repartition it with Spark)", p.cfg.Table.URI, cols)
	}
	return nil
}

// checkTopics fails with a clear message when a source topic or the dead-letter topic is
// missing, or when the broker says this client may not read a source or write the
// dead-letter topic (authorized operations, KIP-430; brokers without an authorizer
// report nothing and pass).
func (p *Pipeline) checkTopics(ctx context.Context, cl *kgo.Client) error {
	adm := kadm.NewClient(cl)
	topics := append([]string(nil), p.cfg.Kafka.Topics...)
	if p.cfg.DeadLetter.Topic != "" {
		topics = append(topics, p.cfg.DeadLetter.Topic)
	}
	var details kadm.TopicDetails
	err := retryTransient(ctx, p, "metadata", func() error {
		var err error
		details, err = listTopicsEach(ctx, adm, topics)
		return err
	}, 10) // about 1.5 min of backoff: a broker restarting while we start is not a failure
	if se := securityError(p.cfg.Kafka, "", err); se != nil {
		return se // its message names the principal and the fix
	}
	if err != nil {
		return fmt.Errorf("list topics on %v: %w", p.cfg.Kafka.Brokers, err)
	}
	var problems []string
	for _, t := range topics {
		what, need := "source", kmsg.ACLOperationRead
		if t == p.cfg.DeadLetter.Topic {
			what, need = "dead-letter", kmsg.ACLOperationWrite
		}
		d, ok := details[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			problems = append(problems, fmt.Sprintf("%s topic %q does not exist on %v (create it, e.g. kafka-topics.sh --create --topic %s)", what, t, p.cfg.Kafka.Brokers, t))
		case errors.Is(d.Err, kerr.TopicAuthorizationFailed):
			problems = append(problems, fmt.Sprintf("%s topic %q: %s", what, t, missingACL(p.cfg.Kafka, need.String(), "topic", t)))
		case d.Err != nil:
			problems = append(problems, fmt.Sprintf("%s topic %q: %v", what, t, d.Err))
		case len(d.AuthorizedOperations) > 0 && !slices.Contains(d.AuthorizedOperations, need) && !slices.Contains(d.AuthorizedOperations, kmsg.ACLOperationAll):
			problems = append(problems, fmt.Sprintf("%s topic %q: %s", what, t, missingACL(p.cfg.Kafka, need.String(), "topic", t)))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("check topics: %s", strings.Join(problems, "; "))
	}
	return nil
}

// retryTransient runs fn up to attempts times with jittered exponential backoff.
func retryTransient(ctx context.Context, p *Pipeline, stage string, fn func() error, attempts int) error {
	var err error
	for i := range attempts {
		if err = fn(); err == nil {
			return nil
		}
		if se := securityError(p.cfg.Kafka, "", err); se != nil {
			return se // authentication, authorization, certificates: retrying cannot help
		}
		p.m.TransientErrors.WithLabelValues(p.cfg.Name, stage).Inc()
		if i == attempts-1 {
			break
		}
		if serr := sleepCtx(ctx, backoff(i)); serr != nil {
			return err
		}
	}
	return err
}

// backoff returns the wait before retry n (0-based): 250 ms doubling to 30 s, ±25% jitter.
func backoff(n int) time.Duration {
	d := 250 * time.Millisecond << min(n, 7)
	d = min(d, 30*time.Second)
	return d - d/4 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// adjustOffsets seeks newly assigned partitions to the Delta txn version + 1, or to the
// configured start when the table holds no txn for the partition.
func (p *Pipeline) adjustOffsets(ctx context.Context, m map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	txns := map[string]int64{}
	retention := false
	snap, err := p.deps.Table.Snapshot(ctx)
	switch {
	case errors.Is(err, deltawriter.ErrTableNotFound):
	case err != nil:
		p.m.TransientErrors.WithLabelValues(p.cfg.Name, "read txn versions").Inc()
		return nil, fmt.Errorf("read txn versions: %w", err) // the session fails and rejoins
	default:
		txns, retention = snap.Txns, snap.TxnRetention > 0
	}
	for t, ps := range m {
		for part, committed := range ps {
			k := topicPartition{t, part}
			if v, ok := txns[p.appID(t, part)]; ok {
				ps[part] = kgo.NewOffset().At(v + 1).WithEpoch(-1)
				p.setNext(k, v+1)
				p.log.Info("partition assigned", "topic", t, "partition", part, "offset", v+1, "from", "delta txn")
			} else if eo := committed.EpochOffset(); retention && eo.Offset >= 0 {
				// The table expires txns (delta.setTransactionRetentionDuration) and this
				// partition's expired: the advisory group offset, committed after each
				// Delta commit, is the best record of progress left.
				ps[part] = kgo.NewOffset().At(eo.Offset).WithEpoch(-1)
				p.setNext(k, eo.Offset)
				p.log.Warn("partition assigned without a txn in a table that expires txns; resuming from the Kafka group offset",
					"topic", t, "partition", part, "offset", eo.Offset, "from", "group offset")
			} else if p.cfg.Kafka.StartOffset == "latest" {
				ps[part] = kgo.NewOffset().AtEnd()
				p.log.Info("partition assigned", "topic", t, "partition", part, "from", "latest")
			} else {
				ps[part] = kgo.NewOffset().AtStart()
				p.setNext(k, 0)
				p.log.Info("partition assigned", "topic", t, "partition", part, "from", "earliest")
			}
		}
	}
	return m, nil
}

// onRevoked commits what is buffered for the revoked partitions before they move to
// another member, in one bounded attempt (well inside the rebalance timeout); if that
// fails, the records are dropped and the new owner re-reads them from the txn version.
// Records of the partitions we keep stay buffered.
func (p *Pipeline) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	gone := partSet(revoked)
	if len(gone) == 0 {
		return // the end of a session that moved nothing of ours
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	recs := p.takeLocked(gone)
	if len(recs) > 0 && !p.abandoned {
		fctx, cancel := context.WithTimeout(ctx, revokeFlushTimeout)
		left, err := p.tryFlushLocked(fctx, recs)
		cancel()
		if len(left) > 0 || err != nil {
			p.log.Warn("flush on revoke incomplete; the new owner re-reads these records from the Delta txn",
				"records", len(left), "err", err)
		}
	}
	p.forgetLocked(revoked, gone)
}

// onLost drops buffered records of partitions lost without a clean revoke: another
// member may already own them, and the txn fencing would refuse our commit anyway.
func (p *Pipeline) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	gone := partSet(lost)
	if len(gone) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.takeLocked(gone)); n > 0 {
		p.log.Warn("partitions lost; buffered records dropped (the new owner re-reads them from the Delta txn)", "records", n)
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
// re-assignment fetches again), and their lag series.
func (p *Pipeline) forgetLocked(parts map[string][]int32, gone map[topicPartition]bool) {
	for k := range gone {
		if _, h := p.halted[k]; h {
			delete(p.halted, k)
			p.status.unhalt(k.topic, k.partition)
		}
		delete(p.backoffs, k)
		delete(p.noTableTxns, k) // the new owner re-reads them; their dead letters become orphans
	}
	if p.cl != nil {
		p.cl.ResumeFetchPartitions(parts)
	}
	halted := 0.0
	if len(p.halted) > 0 {
		halted = 1
	}
	p.m.PipelineHalted.WithLabelValues(p.cfg.Name).Set(halted)
	p.m.PartitionsBackingOff.WithLabelValues(p.cfg.Name).Set(float64(len(p.backoffs)))
	if len(p.backoffs) == 0 {
		p.status.recovered()
	}
	p.lagMu.Lock()
	defer p.lagMu.Unlock()
	for k := range gone {
		delete(p.hwm, k)
		delete(p.next, k)
		p.m.ConsumerLag.DeleteLabelValues(p.cfg.Name, k.topic, strconv.Itoa(int(k.partition)))
	}
}

// setNext records that the partition's next offset to handle is next and updates its lag.
func (p *Pipeline) setNext(k topicPartition, next int64) {
	p.lagMu.Lock()
	defer p.lagMu.Unlock()
	if cur, ok := p.next[k]; !ok || next > cur {
		p.next[k] = next
	}
	p.updateLagLocked(k)
}

// observeFetch takes the high watermarks of a poll's partitions for the lag gauge.
func (p *Pipeline) observeFetch(fs kgo.Fetches) {
	p.lagMu.Lock()
	defer p.lagMu.Unlock()
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fp.Err != nil || fp.HighWatermark < 0 {
			return
		}
		k := topicPartition{fp.Topic, fp.Partition}
		p.hwm[k] = fp.HighWatermark
		p.updateLagLocked(k)
	})
}

// updateLagLocked sets ingestd_consumer_lag_records: records in the partition past the
// last one committed to the table (lagMu held).
func (p *Pipeline) updateLagLocked(k topicPartition) {
	h, ok1 := p.hwm[k]
	n, ok2 := p.next[k]
	if !ok1 || !ok2 {
		return
	}
	p.m.ConsumerLag.WithLabelValues(p.cfg.Name, k.topic, strconv.Itoa(int(k.partition))).Set(float64(max(h-n, 0)))
}

// kgoLogger adapts slog to kgo's logger, keeping kgo's chatter at debug and warn levels.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	if k.l.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelInfo // --log-level debug: kgo's connection and group lifecycle too
	}
	return kgo.LogLevelWarn
}
func (k kgoLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	switch level {
	case kgo.LogLevelInfo:
		k.l.Debug("kafka: "+msg, kv...)
	case kgo.LogLevelError:
		k.l.Error("kafka: "+msg, kv...)
	case kgo.LogLevelWarn:
		k.l.Warn("kafka: "+msg, kv...)
	default:
		k.l.Debug("kafka: "+msg, kv...)
	}
}
