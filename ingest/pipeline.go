package ingest

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/batcher"
	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
	"github.com/ingestd/ingestd/ingest/maintain"
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
	Logger  *slog.Logger
	Metrics *Metrics
	Schemas SchemaSource
	Framed  bool // records carry the Confluent frame (magic 0 + 4-byte schema id)
	// Documents gives the writer schema of each unframed JSON record (format json,
	// connect_json); nil for Avro and the framed formats, whose ids Schemas resolves.
	Documents decode.DocumentSource
	Table     *deltawriter.Table
	KafkaOpts []kgo.Opt // extra client options (e.g. a dialer in tests)
	// KafkaSecurity is kafkaclient.SecurityOpts(cfg.Kafka) (TLS, SASL, client id), set by
	// OpenDeps; every client gets it, before KafkaOpts (see Deps.kafkaClients).
	KafkaSecurity []kgo.Opt
	// Maintainers is the process's registry of table maintainers (maintain.NewRegistry),
	// so that the pipelines of one table share its background maintenance; nil: a
	// registry of the pipeline's own (its maintenance is shared with no other pipeline).
	Maintainers *maintain.Registry
	// Memory is the process's soft memory limit, which a keyed pipeline raises by its key
	// index's bytes; nil: not managed (GOMEMLIMIT set).
	Memory *MemoryLimit
}

// Shared is what the pipelines of one process share.
type Shared struct {
	// Maintainers: see Deps.Maintainers.
	Maintainers *maintain.Registry
	// Memory: see Deps.Memory.
	Memory *MemoryLimit
}

// kafkaClients is the factory of the Kafka clients of cfg's pipeline built from d: each
// gets the security options (TLS, SASL, client id), then the extra ones (tests'
// dialers); log receives the clients' own logs.
func (d Deps) kafkaClients(cfg *config.Config, log *slog.Logger) kafkaclient.Clients {
	opts := append(append([]kgo.Opt(nil), d.KafkaSecurity...), d.KafkaOpts...)
	return kafkaclient.New(cfg, log, d.Metrics.kafka(), opts)
}

// Pipeline moves one set of topics into one Delta table. Create it with Open (or
// NewPipeline) and start it with Run; Status may be called from any goroutine. Its
// goroutines and locks: the package documentation, Concurrency.
type Pipeline struct {
	cfg  *config.Config
	deps Deps
	log  *slog.Logger
	m    *Metrics

	status statusBox

	// The flush side, owned by whoever holds the flush token (acquireFlush) for a whole
	// flush: the flush worker, a rebalance callback or the drain.
	flushTok chan flushToken // holds the token while nobody owns the flush side
	fl       *flusher        // one batch → one commit; its mode is cm
	cm       *consumerMode   // the consumer's txn app ids, dead letters and advisory offsets

	// The batch side: batchMu is held briefly by the poll loop (add, take), the flush
	// worker (settle a flush: hold back or release its partitions) and the callbacks,
	// after the token when both are held.
	batchMu sync.Mutex
	cl      *kgo.Client
	// clSet is closed once start has set cl: the consumer's first assignment may run
	// before (logEnds waits for it).
	clSet     chan struct{}
	clSetOnce sync.Once
	// batch buffers the records read and not yet committed: fresh ones, and those whose
	// flush failed transiently, held back per partition (their partitions paused) until
	// a jittered, growing backoff ends. A partition's records are always flushed
	// held-first, so its txn never passes a record that is still waiting (batcher): the
	// flush in flight settles (Hold, Release) before the next batch is taken.
	batch *batcher.Batcher[topicPartition, *kgo.Record]
	// halted is written holding both the flush token and batchMu (applyHalts,
	// forgetLocked), so it may be read holding either: the poll loop reads it under
	// batchMu, a flush (fl.halted) with the token.
	halted map[topicPartition]HaltedPartition
	// decodedPerByte is the batch.max_bytes budget's estimate of the decoded bytes (arena
	// copy and column values) one raw record byte becomes in a flush: measured by every
	// flush that wrote rows (outcome.decodedBytes / rawBytes), initialDecodedPerByte
	// before the first. budgetSize charges each record raw × (1 + decodedPerByte). Written
	// holding the token and batchMu (measureDecoded), read holding either.
	decodedPerByte float64
	// chargedPerByte is the decodedPerByte the batcher's records were last charged by
	// all together (batcher.Recharge; measureDecoded): records added since are charged
	// by decodedPerByte, within rechargeDrift of it. Guarded like decodedPerByte.
	chargedPerByte float64
	hooks          hooks              // test seams; zero in production
	maintainers    *maintain.Registry // Deps.Maintainers, or one of the pipeline's own
	// progressDue is when the poll loop next checks for a table to record
	// flusher.noTableTxns in (recordProgressLocked); progressPending is whether there is
	// any (len(fl.noTableTxns) > 0, published under batchMu by the token's holder).
	progressDue     time.Time
	progressPending bool
	// wakePoll ends the poll loop's current poll (nil outside a poll): a settled flush
	// calls it, since the batcher's deadline that poll waits for may have changed.
	wakePoll context.CancelFunc

	lag *consumerLag // ingestd_consumer_lag_records, also written by adjustOffsets

	// notFoundFlushes counts the consecutive flushes whose every record was dead-lettered
	// as schema_not_found (watchNotFound); written by the flush token's holder.
	notFoundFlushes int
	// firstAssigned is closed by the first assignment of the consumer group (assigned).
	firstAssigned     chan struct{}
	firstAssignedOnce sync.Once
	assignStart       time.Time // when the pipeline started waiting for it
}

// flushToken is the right to use a pipeline's flush side (Pipeline.fl and .cm, and what
// they own). A pipeline has exactly one, in Pipeline.flushTok while nobody holds it:
// acquireFlush waits for it, releaseFlush gives it back, on the same goroutine or on
// another one it was handed to (the flush worker's batches, flushJob.tok). The channel
// orders every use of the flush side after the previous holder's.
type flushToken struct{}

// acquireFlush waits until the flush side is free (the flush in flight, if any, has
// settled) and returns its token.
func (p *Pipeline) acquireFlush() flushToken { return <-p.flushTok }

// releaseFlush gives the flush token back; it panics if the token is already back (a
// second release would let two goroutines flush at once).
func (p *Pipeline) releaseFlush(t flushToken) {
	select {
	case p.flushTok <- t:
	default:
		panic("ingest: flush token released twice")
	}
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
)

// hooks are seams for the ingest tests (harness_test.go sets them); production leaves
// them zero and every use checks for nil.
type hooks struct {
	// beforeCommit runs after the dead letters of a flush are acknowledged and before its
	// commit, with their number; an error ends the flush there, like a crash (nothing
	// committed).
	beforeCommit func(deadLetters int) error
	// afterWrite runs when a flush's data files are written, before a keyed flush writes
	// its deletion vectors and before the commit; an error ends the flush there, like a
	// crash (files written, nothing committed).
	afterWrite func() error
	// abandon is asked when Run's loop ends: true stops Run like kill -9 (nothing
	// buffered is flushed, no offsets are committed); abandoned (guarded by batchMu) then makes
	// the revoke callback drop its records too.
	abandon   func(ctx context.Context) bool
	abandoned bool
	// beforeFlush runs in the flush worker before each batch it flushes, holding the flush
	// token (a test may block it to hold a batch in flight).
	beforeFlush func(recs []*kgo.Record)
	// settle runs when a flush of records taken from the batcher has been tried, before they
	// are settled (held back or forgotten), with batchMu held: the budget sizes of the
	// records in flight (bytes each) and the batcher's Bytes (what it holds meanwhile).
	settle func(inFlight []int64, buffered int64)
	// fatalGrace, when positive, replaces fatalGrace in the poll loop's fetch-error check
	// (a test's persisting failure need not last 3 s).
	fatalGrace time.Duration
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
		flushTok:       make(chan flushToken, 1),
		halted:         map[topicPartition]HaltedPartition{},
		lag:            newConsumerLag(cfg.Name, deps.Metrics),
		cm:             &consumerMode{appID: cfg.AppID, topic: cfg.DeadLetter.Topic, table: cfg.Table.URI, log: log},
		decodedPerByte: initialDecodedPerByte(cfg.Format),
		chargedPerByte: initialDecodedPerByte(cfg.Format),
		maintainers:    deps.Maintainers,
		firstAssigned:  make(chan struct{}),
		clSet:          make(chan struct{}),
	}
	if p.maintainers == nil {
		p.maintainers = maintain.NewRegistry()
	}
	p.flushTok <- flushToken{}
	p.fl = newFlusher(cfg, deps, log, p.cm, p.halted)
	p.fl.hooks = &p.hooks
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

// appID is the Delta txn appId of one source partition (docs/architecture.md,
// "Exactly-once").
func (p *Pipeline) appID(topic string, partition int32) string {
	return p.cm.txnAppID(topic, partition)
}
