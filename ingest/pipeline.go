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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingestd/ingestd/batcher"
	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	ingestdlq "github.com/ingestd/ingestd/ingest/dlq"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
	"github.com/ingestd/ingestd/internal/backoff"
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
	// KafkaSecurity is kafkaclient.SecurityOpts(cfg.Kafka) (TLS, SASL, client id), set by
	// OpenDeps; every client gets it, before KafkaOpts (see Deps.kafkaClients).
	KafkaSecurity []kgo.Opt
}

// kafkaClients is the factory of the Kafka clients of cfg's pipeline built from d: each
// gets the security options (TLS, SASL, client id), then the extra ones (tests'
// dialers); log receives the clients' own logs.
func (d Deps) kafkaClients(cfg *config.Config, log *slog.Logger) kafkaclient.Clients {
	opts := append(append([]kgo.Opt(nil), d.KafkaSecurity...), d.KafkaOpts...)
	return kafkaclient.New(cfg, log, d.Metrics.kafka(), opts)
}

// Pipeline moves one set of topics into one Delta table. Create it with NewPipeline and
// start it with Run; Status may be called from any goroutine.
type Pipeline struct {
	cfg  *config.Config
	deps Deps
	log  *slog.Logger
	m    *Metrics

	status statusBox

	// Two locks split a pipeline's state (lock order: mu, the flush lock, before batchMu,
	// before lagMu):
	//
	// mu is the flush side, held for a whole flush by whoever runs one: the session's
	// flush worker (flushworker.go; the poll loop locks it to take a batch and hands it,
	// locked, to the worker, which unlocks it once the batch is settled), a rebalance
	// callback, or the drain. So at most one batch is in flight, and a callback that locks
	// it waits for the flush in flight. It guards fl and cm (the flusher's state: commit
	// id, dead-letter set, noTableTxns, fromGroup, decoders and buffers).
	mu sync.Mutex
	fl *flusher      // one batch → one commit; its mode is cm
	cm *consumerMode // the consumer's txn app ids, dead letters and advisory offsets

	// batchMu is the batch side, held briefly by the poll loop (add, take), the flush worker
	// (settle a flush: hold back or release its partitions) and the callbacks.
	batchMu sync.Mutex
	cl      *kgo.Client
	// batch buffers the records read and not yet committed: fresh ones, and those whose
	// flush failed transiently, held back per partition (their partitions paused) until
	// a jittered, growing backoff ends. A partition's records are always flushed
	// held-first, so its txn never passes a record that is still waiting (batcher): the
	// flush in flight settles (Hold, Release) before the next batch is taken.
	batch *batcher.Batcher[topicPartition, *kgo.Record]
	// halted is written with both locks held (applyHalts, forgetLocked), so it may be read
	// under either: the poll loop reads it under batchMu, a flush (fl.halted) under mu.
	halted map[topicPartition]HaltedPartition
	// decodedPerByte is the batch.max_bytes budget's estimate of the decoded bytes (arena
	// copy and column values) one raw record byte becomes in a flush: measured by every
	// flush that wrote rows (outcome.decodedBytes / rawBytes), initialDecodedPerByte
	// before the first. budgetSize charges each record raw × (1 + decodedPerByte). Written
	// with both locks held (measureDecoded), read under either.
	decodedPerByte float64
	hooks          hooks // test seams; zero in production
	// progressDue is when the poll loop next checks for a table to record
	// flusher.noTableTxns in (recordProgressLocked); progressPending is whether there is
	// any (len(fl.noTableTxns) > 0, published under batchMu by the holder of mu).
	progressDue     time.Time
	progressPending bool
	// wakePoll ends the poll loop's current poll (nil outside a poll): a settled flush
	// calls it, since the batcher's deadline that poll waits for may have changed.
	wakePoll context.CancelFunc

	// lagMu guards the consumer-lag bookkeeping, also written by adjustOffsets.
	lagMu sync.Mutex
	hwm   map[topicPartition]int64 // high watermark from the latest fetch
	next  map[topicPartition]int64 // next offset to handle: txn version + 1
}

type topicPartition struct {
	topic     string
	partition int32
}

func partOf(r *kgo.Record) topicPartition { return topicPartition{r.Topic, r.Partition} }

// Timeouts that keep the poll loop and the rebalance callbacks inside the rebalance
// timeout: one flush attempt is bounded by the registry lookup, the dead-letter delivery
// and the store; a transient failure never blocks the loop, it pauses the partitions.
const (
	rebalanceTimeout     = 2 * time.Minute
	schemaLookupTimeout  = 10 * time.Second
	revokeFlushTimeout   = 45 * time.Second
	shutdownFlushTimeout = 60 * time.Second
	maxPollRecords       = 10_000
	metadataAttempts     = 10 // start-up topic check: about 1.5 min of retryBackoff
	// missingTopicAttempts is how many times the start-up check looks for a topic the
	// broker says does not exist before it fails (about 4 s of retryBackoff): a broker
	// that has just restarted may answer Metadata before it has loaded its topics, and a
	// topic created just before the daemon started may not have reached every broker yet.
	missingTopicAttempts = 5
)

// hooks are seams for the ingest tests (helpers_test.go sets them); production leaves
// them zero and every use checks for nil.
type hooks struct {
	// beforeCommit runs after the dead letters of a flush are acknowledged and before its
	// commit, with their number; an error ends the flush there, like a crash (nothing
	// committed).
	beforeCommit func(deadLetters int) error
	// abandon is asked when Run's loop ends: true stops Run like kill -9 (nothing
	// buffered is flushed, no offsets are committed); abandoned (guarded by batchMu) then makes
	// the revoke callback drop its records too.
	abandon   func(ctx context.Context) bool
	abandoned bool
	// beforeFlush runs in the flush worker before each batch it flushes, with mu held
	// (a test may block it to hold a batch in flight).
	beforeFlush func(recs []*kgo.Record)
	// settle runs when a flush of records taken from the batcher has been tried, before they
	// are settled (held back or forgotten), with batchMu held: the budget sizes of the
	// records in flight (bytes each) and the batcher's Bytes (what it holds meanwhile).
	settle func(inFlight []int64, buffered int64)
}

// NewPipeline returns a pipeline for cfg; it does no I/O.
func NewPipeline(cfg *config.Config, deps Deps) *Pipeline {
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
		batch: batcher.New(batcher.Limits{
			MaxRecords: cfg.Batch.MaxRecords, MaxBytes: batchBytes(cfg), MaxAge: cfg.Batch.MaxAge}, partOf),
		halted:         map[topicPartition]HaltedPartition{},
		hwm:            map[topicPartition]int64{},
		next:           map[topicPartition]int64{},
		cm:             &consumerMode{appID: cfg.AppID, topic: cfg.DeadLetter.Topic, table: cfg.Table.URI, log: log},
		decodedPerByte: initialDecodedPerByte,
	}
	p.fl = newFlusher(cfg, deps, log, p.cm, p.halted)
	p.fl.hooks = &p.hooks
	p.status.s = Status{Pipeline: cfg.Name, State: StateStarting, Since: time.Now()}
	p.m.initPipeline(cfg.Name)
	if rs, ok := deps.Schemas.(registryStatser); ok {
		p.m.addRegistry(cfg.Name, rs)
	}
	return p
}

// batchBytes is the bytes bound of one batch, in budgetSize bytes: half of
// batch.max_bytes, because the batch in flight (flushWorker) and the one being filled
// share it, so that both together stay within batch.max_bytes and the soft memory limit
// that ingestd run derives from it (issue 15: peak RSS ≤ max_bytes + 256 MiB). 0: no bound.
func batchBytes(cfg *config.Config) int64 { return int64(cfg.Batch.MaxBytes) / 2 }

// Name returns the pipeline name.
func (p *Pipeline) Name() string { return p.cfg.Name }

// Status returns the pipeline's current state.
func (p *Pipeline) Status() Status { return p.status.get() }

// appID is the Delta txn appId of one source partition (DESIGN.md §3, Exactly-once).
func (p *Pipeline) appID(topic string, partition int32) string {
	return p.cm.txnAppID(topic, partition)
}

// Run consumes until ctx is cancelled, then flushes what is buffered, commits it and
// returns nil. A halt does not end Run: halted partitions are paused and reported by
// Status while the others go on. Run returns an error when the pipeline cannot start
// (table refused, dead-letter topic missing, broker unreachable at start) or hits a
// permanent failure; the error is also reported by Status.
//
// Run goes through three phases: start (check the table, build the Kafka clients, check
// the topics), loop (poll, batch, flush, until ctx ends) and drain (flush and commit what
// is buffered, in a bounded time of its own).
func (p *Pipeline) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			p.status.set(StateFailed, err)
			p.observe(verdict{action: actFatal, err: err}, 1, "pipeline failed")
		} else {
			p.status.set(StateStopped, nil)
		}
	}()
	s, err := p.start(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	// Background maintenance (maintain.go) runs beside the loop, off the commit path; it
	// stops when Run returns.
	defer p.startMaintenance(ctx)()
	if err := s.loop(ctx); err != nil {
		return err
	}
	if p.hooks.abandon != nil && p.hooks.abandon(ctx) {
		s.abandon()
		return nil
	}
	return s.drain(ctx)
}

// session is one run of a pipeline after a successful start: the Kafka clients it
// made, which close closes.
type session struct {
	p   *Pipeline
	cl  *kgo.Client // group consumer; also the advisory offset committer
	dlq *kgo.Client // dead-letter producer; nil without a dead-letter topic
}

// start refuses a table the pipeline cannot write, builds the consumer and the
// dead-letter producer (kafkaClients) and checks the source and dead-letter topics; the
// pipeline is running once it returns. On error nothing stays open.
func (p *Pipeline) start(ctx context.Context) (*session, error) {
	if err := p.checkTable(ctx); err != nil {
		return nil, err
	}
	clients := p.deps.kafkaClients(p.cfg, p.log)
	cl, err := clients.Consumer(rebalanceTimeout, kafkaclient.ConsumerCallbacks{Adjust: p.adjustOffsets, Revoked: p.onRevoked, Lost: p.onLost})
	if err != nil {
		return nil, err
	}
	s := &session{p: p, cl: cl}
	if p.cfg.DeadLetter.Topic != "" {
		if s.dlq, err = clients.DeadLetterProducer(); err != nil {
			s.close()
			return nil, err
		}
	}
	p.mu.Lock()
	p.batchMu.Lock()
	p.cl, p.cm.cl = s.cl, s.cl
	if s.dlq != nil {
		p.fl.dlq = ingestdlq.NewProducer(s.dlq)
	}
	p.batchMu.Unlock()
	p.mu.Unlock()
	if err := p.checkTopics(ctx, cl); err != nil {
		s.close()
		return nil, err
	}
	if err := p.checkGroupAccess(ctx, cl); err != nil {
		s.close()
		return nil, err
	}
	p.status.set(StateRunning, nil)
	p.log.Info("pipeline started", "topics", p.cfg.Kafka.Topics, "group", p.cfg.Kafka.Group,
		"table", p.cfg.Table.URI, "policy", p.cfg.Schema.Policy)
	return s, nil
}

// close closes the consumer first (leaving the group runs the revoke callback, whose
// flush may still produce dead letters), then the dead-letter producer.
func (s *session) close() {
	s.cl.Close()
	if s.dlq != nil {
		s.dlq.Close()
	}
}

// loop polls until ctx ends, adding records to the batch and flushing what is due (a
// bound, the age, or a partition's backoff). It returns nil when ctx ends or the client
// is closed, and the error of a flush that failed for good (classify: fatal).
func (s *session) loop(ctx context.Context) error {
	p, cl := s.p, s.cl
	var fw fatalWatch // security errors that persist fail the pipeline (fetchErrors)
	// An advisory offset commit still refused for group authorization after its retries
	// fails the pipeline from kgo's callback: it ends the poll (offsetcommit.go).
	lctx, failLoop := context.WithCancelCause(ctx)
	defer failLoop(nil)
	p.cm.commits.setup(p.log, failLoop, func(err error) error {
		msg := "kafka authorization failed: " + kafkaclient.MissingACL(p.cfg.Kafka, "READ", "group", p.cfg.Kafka.Group)
		return &kafkaclient.SecurityError{Msg: "commit group offsets: " + msg, Err: err}
	})
	// Flushes run to their end when ctx ends (SIGTERM) in the middle of one: an interrupted
	// dead-letter produce would leave records in the DLQ that the drain produces again.
	fctx, stop := flushContext(ctx, shutdownFlushTimeout)
	defer stop()
	// The flush worker flushes while the loop polls; it stops (the flush in flight settles)
	// before fctx ends and before the drain, the abandon or the client's close.
	w := p.startFlushWorker(fctx, ctx, failLoop)
	defer w.stop()
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithCancel(lctx)
		p.batchMu.Lock()
		d, ok := p.batch.Deadline()
		if p.progressPending && p.batch.Len() == 0 {
			d, ok = p.progressDue, true // wake to record progress made without a table
		}
		if ok {
			pollCtx, cancel = context.WithDeadline(lctx, d)
		}
		// The flush in flight may change the deadline (a hold, progress to record): when it
		// settles it ends this poll (wakePollLocked), and the next one waits for the new one.
		p.wakePoll = cancel
		p.batchMu.Unlock()
		fs := cl.PollRecords(pollCtx, maxPollRecords)
		p.batchMu.Lock()
		p.wakePoll = nil
		p.batchMu.Unlock()
		cancel()
		if fs.IsClientClosed() {
			return nil
		}
		if lctx.Err() != nil && ctx.Err() == nil {
			cl.AllowRebalance()
			return context.Cause(lctx) // a failed advisory commit, or a flush that failed for good
		}
		if err := p.fetchErrors(fs, &fw); err != nil {
			cl.AllowRebalance() // or Close would wait for the rebalance this poll blocks
			return err
		}
		fs.EachError(func(t string, part int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				p.observe(verdict{action: actRetry, stage: "fetch", err: err}, 1, "fetch error", "topic", t, "partition", part)
			}
		})
		p.observeFetch(fs)
		now := time.Now()
		p.batchMu.Lock()
		consumed := p.m.RecordsConsumed.WithLabelValues(p.cfg.Name) // once per poll, not per record
		ended := false                                              // the session ended (SIGTERM, kill -9 seam) while this poll's records were added
		fs.EachRecord(func(r *kgo.Record) {
			if ended {
				return // not buffered: read again from the txn after a restart
			}
			consumed.Inc()
			if len(p.halted) > 0 {
				if _, h := p.halted[topicPartition{r.Topic, r.Partition}]; h {
					return
				}
			}
			if p.batch.Add(r, p.budgetSize(r), now) {
				if ctx.Err() != nil {
					// Full after the session ended: hand nothing more to the worker (it would
					// commit past a SIGTERM's drain or a kill -9) and buffer no more.
					ended = true
					return
				}
				// Full (records or bytes bound): hand it to the worker, waiting for the batch in
				// flight first, then go on adding.
				p.batchMu.Unlock()
				w.dispatch(false)
				p.batchMu.Lock()
			}
		})
		due := p.batch.Due(time.Now()) != batcher.TriggerNone // aged, or a partition's backoff ended
		progress := !due && p.progressPending && p.batch.Len() == 0 && !now.Before(p.progressDue)
		p.batchMu.Unlock()
		if due || progress {
			w.dispatch(progress)
		}
		cl.AllowRebalance()
	}
	return nil
}

// drain is the shutdown (SIGTERM): once the loop's flush in flight has settled, flush and
// commit what is buffered, retrying transient failures for at most shutdownFlushTimeout
// (ctx has ended; its values are kept).
func (s *session) drain(ctx context.Context) error {
	p := s.p
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownFlushTimeout)
	defer cancel()
	p.mu.Lock() // the loop's flush worker has stopped: nothing is in flight
	ferr := p.drainLocked(sctx)
	p.mu.Unlock()
	if ferr != nil {
		return fmt.Errorf("flush on shutdown: %w", ferr)
	}
	p.log.Info("pipeline stopped")
	return nil
}

// progressEvery is how often an idle pipeline holding progress made while the table did
// not exist (flusher.noTableTxns) checks whether a table exists now, to commit that
// progress as txns: another member, or another pipeline, may have created it.
const progressEvery = 5 * time.Second

// recordProgressLocked commits, as a txn-only commit, the progress of dead-letter-only
// flushes made while the table did not exist, once a table exists (so that replay finds
// the commit their dead letters name, or the group offset position it names, instead of
// waiting for this partition's next record). Without a table it does nothing; a transient
// failure is retried at the next check. mu held.
func (p *Pipeline) recordProgressLocked(ctx context.Context, now time.Time) error {
	p.batchMu.Lock()
	p.progressDue = now.Add(progressEvery)
	p.batchMu.Unlock()
	// Without a table the flush commits nothing and keeps noTableTxns for the next check.
	_, err := p.writeLocked(ctx, nil, frameNote{})
	if v := classify(err); v.action == actRetry {
		p.observe(v, 0, "commit of progress made without a table failed; retried later")
		return nil
	}
	return err
}

// flushContext is ctx without its cancellation, for the flushes of the poll loop: once ctx
// ends, a flush in flight gets grace to finish (its dead letters acknowledged, its commit
// made) before the returned context ends too. stop releases it.
func flushContext(ctx context.Context, grace time.Duration) (fctx context.Context, stop func()) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var t *time.Timer
	var mu sync.Mutex
	unhook := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		t = time.AfterFunc(grace, cancel)
	})
	return fctx, func() {
		unhook()
		mu.Lock()
		if t != nil {
			t.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// abandon ends the session like kill -9 (tests only, see hooks.abandon): buffered records
// are dropped without a flush, and the revoke callback of close flushes nothing. The
// loop's flush in flight, if any, has settled (it may have committed, like a crash after
// the commit).
func (s *session) abandon() {
	p := s.p
	p.batchMu.Lock()
	p.hooks.abandoned = true
	p.batch.Take(time.Now(), true) // dropped
	p.batchMu.Unlock()
	p.log.Warn("pipeline abandoned: buffered records dropped without a flush")
}

// flushOnce makes one flush attempt for recs (flusher.flush) and applies its halts. cut
// are the records the flush left for the next one (batch.max_open_partitions: per
// partition, from the first record that would have opened one partition value more; their
// txn did not move past them), in recs order. mu held.
func (p *Pipeline) flushOnce(ctx context.Context, recs []*kgo.Record, note frameNote) (cut []*kgo.Record, err error) {
	out, err := p.fl.flush(ctx, recs, note)
	if err != nil {
		return nil, err
	}
	p.batchMu.Lock()
	p.measureDecoded(out)
	p.applyHalts(out.halts)
	p.batchMu.Unlock()
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

func recordSize(r *kgo.Record) int64 { return int64(len(r.Key) + len(r.Value)) }

// initialDecodedPerByte is decodedPerByte before a flush has measured it: a 200-byte
// record of 10 fields decodes to ~13 column values of 24 bytes and its 195-byte body,
// charged though no longer copied (outcome.decodedBytes) (≈ 2.5 decoded bytes per raw
// byte); a 1 KB one to ≈ 1.3. The larger keeps
// the first batch within batch.max_bytes for both.
const initialDecodedPerByte = 2.5

// recordOverhead is the memory a buffered record takes besides its bytes, in bytes: the
// client's kgo.Record and the flush's item (≈ 250 bytes, more than a 200-byte record).
const recordOverhead = int64(unsafe.Sizeof(kgo.Record{}) + unsafe.Sizeof(item{}))

// budgetSize is r's charge against batch.max_bytes, in bytes: its key and value, plus the
// decoded values the flush will build from them (decodedPerByte) and recordOverhead, so
// that the budget bounds the memory a batch takes while it is written, not only its raw
// bytes (issue 15).
func (p *Pipeline) budgetSize(r *kgo.Record) int64 {
	n := recordSize(r)
	return n + int64(float64(n)*p.decodedPerByte) + recordOverhead
}

// measureDecoded updates decodedPerByte from a flush's outcome (both locks held: the
// poll loop's budgetSize reads it under batchMu).
func (p *Pipeline) measureDecoded(out *outcome) {
	if out.rawBytes > 0 && out.decodedBytes > 0 {
		p.decodedPerByte = float64(out.decodedBytes) / float64(out.rawBytes)
	}
}

// flushDueLocked flushes the buffered records that are due (batcher.Take: a bound or
// the age reached, or a partition's backoff ended; everything when force is set), held
// ones first (flushTakenLocked). mu held.
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
// permanent failure is returned. mu held.
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

// sizesOf returns the budget sizes of left, records of recs given back after a failed
// flush (tryFlushLocked: the whole of recs, or some of its records), in left's order:
// sizes[i] is recs[i]'s charge against batch.max_bytes, in bytes, as the batcher handed it
// out, so that a record given back keeps the charge it was added with. A record of left
// that is not in recs (tryFlushLocked returns none) is charged its budgetSize now.
// batchMu held (budgetSize reads decodedPerByte).
func (p *Pipeline) sizesOf(left, recs []*kgo.Record, sizes []int64) []int64 {
	if len(left) == len(recs) && (len(left) == 0 || &left[0] == &recs[0]) {
		return sizes // all of recs: tryFlushLocked returns recs itself
	}
	of := make(map[*kgo.Record]int64, len(left))
	for _, r := range left {
		of[r] = -1
	}
	for i, r := range recs {
		if _, ok := of[r]; ok {
			of[r] = sizes[i]
		}
	}
	out := make([]int64, len(left))
	for i, r := range left {
		if out[i] = of[r]; out[i] < 0 {
			out[i] = p.budgetSize(r)
		}
	}
	return out
}

// drainLocked flushes everything buffered, retrying transient failures until ctx ends.
// mu held.
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
// mu held (each settled commit takes batchMu briefly).
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
// mu held.
func (p *Pipeline) writeLocked(ctx context.Context, recs []*kgo.Record, note frameNote) (cut []*kgo.Record, err error) {
	for attempt := 0; ; attempt++ {
		cut, err := p.flushOnce(ctx, recs, note)
		if classify(err).action != actRebuild {
			return cut, err
		}
		p.observe(verdict{action: actRebuild, err: err}, 1, "table changed by another writer; rebuilding the commit on the new snapshot", "attempt", attempt+1)
		if attempt+1 >= maxConflictRebuilds {
			return nil, &transientError{"commit", err}
		}
		if serr := rebuildWait(ctx, attempt); serr != nil { // a busy table: back off before racing again
			return nil, &transientError{"commit", serr}
		}
	}
}

// applyHalts pauses halted partitions and reports them (logs, status, metric). Both
// locks held: the poll loop reads halted under batchMu, the flusher under mu. The
// partitions' records already buffered behind the halt are dropped by the next flush
// (flusher.collect skips halted partitions), never committed.
func (p *Pipeline) applyHalts(halts []HaltedPartition) {
	for _, h := range halts {
		k := topicPartition{h.Topic, h.Partition}
		p.halted[k] = h
		p.status.halt(h)
		p.observe(verdict{action: actHalt, reason: h.Reason}, 1, "pipeline halted: a record does not fit the table under policy "+p.cfg.Schema.Policy,
			"topic", h.Topic, "partition", h.Partition, "offset", h.Offset, "field", h.Field, "message", h.Message)
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
	// the daemon's CPU at 200 B records when done per record; BENCHMARKS.md, "End to end").
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
				err = &transientError{"schema registry", serr}
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
		p.setNext(k, off+1)
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
	p.status.retrying(cause)
	msg := "transient failure: partitions paused, records kept for a retry (nothing dead-lettered)"
	if v.stage == "produce dead letters" {
		// Some dead letters may have been acknowledged before the failure: the retry produces
		// them again under the same commit id, and replay skips the copies (dlq.DedupeKey).
		msg = "transient failure: partitions paused, records kept for a retry (dead letters the broker acknowledged before the failure are produced again; replay skips the copies)"
	}
	p.observe(v, len(recs), msg,
		"partitions", len(holds), "records", len(recs), "attempt", attempt, "retry_in", maxWait.Round(time.Millisecond))
}

// checkTable opens the table's snapshot (refusing tables ingestd cannot safely write,
// before any byte is written) and fails if it does not exist and table.create is false.
func (p *Pipeline) checkTable(ctx context.Context) error {
	return checkTableExists(ctx, p.cfg, p.deps.Table)
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
	var err error
	// About 1.5 min of backoff: a broker restarting while we start is not a failure. A
	// topic reported missing is looked for again, missingTopicAttempts times in all,
	// before it is one (missingTopics).
	var missing []string
	for attempt, missingSeen := 0, 0; ; attempt++ {
		if details, err = listTopicsEach(ctx, adm, topics); err == nil {
			missing = missingTopics(topics, details)
			if len(missing) == 0 {
				break
			}
			if missingSeen++; missingSeen >= missingTopicAttempts {
				break
			}
			p.log.Warn("topics not found on the broker; looking again (a broker that has just started may not list them yet)",
				"topics", missing, "attempt", missingSeen)
			if retryBackoff.Sleep(ctx, missingSeen-1) != nil {
				break
			}
			continue
		}
		if se := kafkaclient.AsSecurityError(p.cfg.Kafka, "", err); se != nil {
			return se // authentication, authorization, certificates: retrying cannot help; it names the principal and the fix
		}
		p.observe(verdict{action: actRetry, stage: "metadata", err: err}, 1, "list topics failed", "attempt", attempt+1)
		if attempt+1 >= metadataAttempts || retryBackoff.Sleep(ctx, attempt) != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("list topics on %v: %w", p.cfg.Kafka.Brokers, err)
	}
	if len(missing) > 0 && ctx.Err() != nil { // stopped while looking again: not a verdict on the topics
		return fmt.Errorf("check topics: %w", context.Cause(ctx))
	}
	var problems []string
	for _, t := range topics {
		what, need := "source", kmsg.ACLOperationRead
		if t == p.cfg.DeadLetter.Topic {
			what, need = "dead-letter", kmsg.ACLOperationWrite
		}
		d, ok := details[t]
		switch {
		case topicMissing(d, ok):
			problems = append(problems, fmt.Sprintf("%s topic %q does not exist on %v (create it, e.g. kafka-topics.sh --create --topic %s)", what, t, p.cfg.Kafka.Brokers, t))
		case errors.Is(d.Err, kerr.TopicAuthorizationFailed):
			problems = append(problems, fmt.Sprintf("%s topic %q: %s", what, t, kafkaclient.MissingACL(p.cfg.Kafka, need.String(), "topic", t)))
		case d.Err != nil:
			problems = append(problems, fmt.Sprintf("%s topic %q: %v", what, t, d.Err))
		case len(d.AuthorizedOperations) > 0 && !slices.Contains(d.AuthorizedOperations, need) && !slices.Contains(d.AuthorizedOperations, kmsg.ACLOperationAll):
			problems = append(problems, fmt.Sprintf("%s topic %q: %s", what, t, kafkaclient.MissingACL(p.cfg.Kafka, need.String(), "topic", t)))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("check topics: %s", strings.Join(problems, "; "))
	}
	return nil
}

// missingTopics returns the topics that details (a ListTopics answer) says do not exist:
// absent from it, or with UNKNOWN_TOPIC_OR_PARTITION.
func missingTopics(topics []string, details kadm.TopicDetails) []string {
	var out []string
	for _, t := range topics {
		if d, ok := details[t]; topicMissing(d, ok) {
			out = append(out, t)
		}
	}
	return out
}

// topicMissing reports whether a topic's ListTopics detail (ok: the answer has one) says
// it does not exist.
func topicMissing(d kadm.TopicDetail, ok bool) bool {
	return !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition)
}

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
			} else if eo.Offset > 0 {
				// Records before eo.Offset were dead-lettered while no table existed.
				ps[part] = kgo.NewOffset().At(eo.Offset).WithEpoch(-1)
				p.setNext(k, eo.Offset)
				p.mu.Lock()
				p.fl.fromGroup[k] = eo.Offset - 1
				p.fl.noTableTxns[k] = max(p.fl.noTableTxns[k], eo.Offset-1)
				p.batchMu.Lock()
				p.publishProgressLocked()
				p.batchMu.Unlock()
				p.mu.Unlock()
				p.log.Info("partition assigned", "topic", t, "partition", part, "offset", eo.Offset, "from", "group offset (no txn yet)")
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
// Records of the partitions we keep stay buffered. It first waits for the flush in flight.
func (p *Pipeline) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	gone := partSet(revoked)
	if len(gone) == 0 {
		return // the end of a session that moved nothing of ours
	}
	// Wait for the flush in flight (it may hold records of these partitions, or fail and
	// give them back to the batcher), then take what is buffered for them.
	p.mu.Lock()
	defer p.mu.Unlock()
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
	p.mu.Lock() // the flush in flight settles first (its commit is fenced by the txns if another member moved them)
	defer p.mu.Unlock()
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
// re-assignment fetches again), and their lag series. Both locks held.
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
	p.lagMu.Lock()
	defer p.lagMu.Unlock()
	for k := range gone {
		delete(p.hwm, k)
		delete(p.next, k)
		p.m.ConsumerLag.DeleteLabelValues(p.cfg.Name, k.topic, strconv.Itoa(int(k.partition)))
	}
}

// wakePollLocked ends the poll loop's current poll, if any, so that it recomputes its
// deadline from the batcher. batchMu held.
func (p *Pipeline) wakePollLocked() {
	if p.wakePoll != nil {
		p.wakePoll()
	}
}

// publishProgressLocked tells the poll loop whether progress made without a table waits
// to be recorded (flusher.noTableTxns). Both locks held.
func (p *Pipeline) publishProgressLocked() {
	p.progressPending = len(p.fl.noTableTxns) > 0
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
