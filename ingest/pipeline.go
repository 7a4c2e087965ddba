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
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
	batch    *batcher.Batcher[*kgo.Record]
	halted   map[topicPartition]HaltedPartition
	compiled map[decoderKey]*decode.Decoder
}

type topicPartition struct {
	topic     string
	partition int32
}

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
	}
	p.status.s = Status{Pipeline: cfg.Name, State: StateStarting, Since: time.Now()}
	p.m.PipelineHalted.WithLabelValues(cfg.Name).Set(0)
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
		kgo.RebalanceTimeout(2 * time.Minute),
		kgo.SessionTimeout(p.cfg.Kafka.SessionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordDeliveryTimeout(30 * time.Second),
		kgo.ProducerLinger(0),
		kgo.AdjustFetchOffsetsFn(p.adjustOffsets),
		kgo.OnPartitionsRevoked(p.onRevoked),
		kgo.OnPartitionsLost(p.onLost),
		kgo.WithLogger(kgoLogger{p.log}),
	}
	opts = append(opts, p.deps.KafkaOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("create kafka client: %w", err)
	}
	defer cl.Close()
	p.mu.Lock()
	p.cl = cl
	p.mu.Unlock()
	if err := p.checkTopics(ctx, cl); err != nil {
		return err
	}
	p.status.set(StateRunning, nil)
	p.log.Info("pipeline started", "topics", p.cfg.Kafka.Topics, "group", p.cfg.Kafka.Group,
		"table", p.cfg.Table.URI, "policy", p.cfg.Schema.Policy)

	for ctx.Err() == nil {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		p.mu.Lock()
		if d, ok := p.batch.Deadline(); ok {
			pollCtx, cancel = context.WithDeadline(ctx, d)
		}
		p.mu.Unlock()
		fs := cl.PollRecords(pollCtx, 10_000)
		cancel()
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(t string, part int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				p.m.TransientErrors.WithLabelValues(p.cfg.Name, "fetch").Inc()
				p.log.Warn("fetch error", "topic", t, "partition", part, "err", err)
			}
		})
		now := time.Now()
		var ferr error
		p.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			p.m.RecordsConsumed.WithLabelValues(p.cfg.Name).Inc()
			if _, h := p.halted[topicPartition{r.Topic, r.Partition}]; h || ferr != nil {
				return
			}
			if p.batch.Add(r, int64(len(r.Key)+len(r.Value)), now) {
				ferr = p.flushLocked(ctx) // full: records or bytes bound reached
			}
		})
		if ferr == nil && p.batch.Due(now) {
			ferr = p.flushLocked(ctx)
		}
		p.mu.Unlock()
		cl.AllowRebalance()
		if ferr != nil && ctx.Err() == nil {
			return ferr
		}
	}
	// Shutdown: flush and commit what is buffered, with a bounded time of its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	p.mu.Lock()
	ferr := p.flushLocked(sctx)
	p.mu.Unlock()
	if ferr != nil {
		return fmt.Errorf("flush on shutdown: %w", ferr)
	}
	p.log.Info("pipeline stopped")
	return nil
}

// checkTable opens the table's snapshot (refusing tables ingestd cannot safely write,
// before any byte is written) and fails if it does not exist and table.create is false.
func (p *Pipeline) checkTable(ctx context.Context) error {
	_, err := p.deps.Table.Snapshot(ctx)
	switch {
	case errors.Is(err, deltawriter.ErrTableNotFound):
		if !p.cfg.Table.Create {
			return fmt.Errorf("open table %s: no Delta table there and table.create is false (set table.create: true in %s)", p.cfg.Table.URI, p.cfg.File)
		}
		return nil
	case err != nil:
		return fmt.Errorf("open table %s: %w", p.cfg.Table.URI, err)
	}
	return nil
}

// checkTopics fails with a clear message when a source or the dead-letter topic is missing.
func (p *Pipeline) checkTopics(ctx context.Context, cl *kgo.Client) error {
	adm := kadm.NewClient(cl)
	topics := append([]string(nil), p.cfg.Kafka.Topics...)
	if p.cfg.DeadLetter.Topic != "" {
		topics = append(topics, p.cfg.DeadLetter.Topic)
	}
	var details kadm.TopicDetails
	err := retryTransient(ctx, p, "metadata", func() error {
		var err error
		details, err = adm.ListTopics(ctx, topics...)
		return err
	}, 5)
	if err != nil {
		return fmt.Errorf("list topics on %v: %w", p.cfg.Kafka.Brokers, err)
	}
	for _, t := range topics {
		d, ok := details[t]
		if !ok || d.Err != nil {
			what := "source"
			if t == p.cfg.DeadLetter.Topic {
				what = "dead-letter"
			}
			return fmt.Errorf("check topics: %s topic %q does not exist on %v (create it, e.g. kafka-topics.sh --create --topic %s)", what, t, p.cfg.Kafka.Brokers, t)
		}
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
	snap, err := p.deps.Table.Snapshot(ctx)
	switch {
	case errors.Is(err, deltawriter.ErrTableNotFound):
	case err != nil:
		return nil, fmt.Errorf("read txn versions: %w", err)
	default:
		txns = snap.Txns
	}
	for t, ps := range m {
		for part := range ps {
			if v, ok := txns[p.appID(t, part)]; ok {
				ps[part] = kgo.NewOffset().At(v + 1).WithEpoch(-1)
				p.log.Info("partition assigned", "topic", t, "partition", part, "offset", v+1, "from", "delta txn")
			} else if p.cfg.Kafka.StartOffset == "latest" {
				ps[part] = kgo.NewOffset().AtEnd()
				p.log.Info("partition assigned", "topic", t, "partition", part, "from", "latest")
			} else {
				ps[part] = kgo.NewOffset().AtStart()
				p.log.Info("partition assigned", "topic", t, "partition", part, "from", "earliest")
			}
		}
	}
	return m, nil
}

// onRevoked flushes what is buffered before the partitions move to another member; if
// the flush fails the records are dropped and the new owner re-reads them from the txn.
func (p *Pipeline) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.flushLocked(ctx); err != nil {
		p.log.Warn("flush on revoke failed; the new owner re-reads from the Delta txn", "err", err)
		p.batch.Take()
	}
	p.forget(revoked)
}

// onLost drops buffered records of partitions lost without a clean revoke.
func (p *Pipeline) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gone := map[topicPartition]bool{}
	for t, ps := range lost {
		for _, part := range ps {
			gone[topicPartition{t, part}] = true
		}
	}
	p.batch.Drop(func(r *kgo.Record) bool { return gone[topicPartition{r.Topic, r.Partition}] },
		func(r *kgo.Record) int64 { return int64(len(r.Key) + len(r.Value)) })
	p.forget(lost)
}

func (p *Pipeline) forget(parts map[string][]int32) {
	for t, ps := range parts {
		for _, part := range ps {
			delete(p.halted, topicPartition{t, part})
		}
	}
}

// kgoLogger adapts slog to kgo's logger, keeping kgo's chatter at debug and warn levels.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }
func (k kgoLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	switch level {
	case kgo.LogLevelError:
		k.l.Error("kafka: "+msg, kv...)
	case kgo.LogLevelWarn:
		k.l.Warn("kafka: "+msg, kv...)
	default:
		k.l.Debug("kafka: "+msg, kv...)
	}
}
