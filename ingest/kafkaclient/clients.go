package kafkaclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
)

// Clients builds every Kafka client ingestd makes for one pipeline, from the pipeline's
// config: the consumer, the dead-letter producer, the replay's reader and carry-forward
// producer, the `dlq inspect` reader and the log cleanup's admin client. What every
// client shares (seed brokers, the logger, the re-authentication counter) is set once,
// in base; the extra options (the security options of SecurityOpts, then e.g. a test's
// dialer) come last, so they may override any of it. Each client is the caller's to
// Close. The zero Clients is not usable: use New.
type Clients struct {
	cfg   *config.Config
	log   *slog.Logger
	m     *Metrics
	extra []kgo.Opt
}

// New returns the client factory of cfg. log (nil: discard) receives the clients' own
// logs, labelled client=<role>; m (nil: not counted) counts their SASL
// re-authentications; extra are added to every client's options, last.
func New(cfg *config.Config, log *slog.Logger, m *Metrics, extra []kgo.Opt) Clients {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Clients{cfg: cfg, log: log, m: m, extra: extra}
}

// newClient builds the client of role with base's options, then opts, then the extras.
// Errors: "create <role>: <kgo's reason>" (a bad option; no I/O happens here).
func (f Clients) newClient(role string, opts ...kgo.Opt) (*kgo.Client, error) {
	all := append(f.base(role), opts...)
	all = append(all, f.extra...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", role, err)
	}
	return cl, nil
}

// base is what every client of the pipeline shares: where the brokers are, and the logger.
// With SASL, a hook counts re-authentications (reauth.go).
func (f Clients) base(role string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(f.cfg.Kafka.Brokers...),
		kgo.WithLogger(kgoLogger{f.log.With("client", role)}),
	}
	if f.cfg.Kafka.SASL != nil {
		opts = append(opts, kgo.WithHooks(newReauthHook(f.cfg.Name, role, f.m)))
	}
	return opts
}

// ConsumerCallbacks are the group consumer's hooks into the pipeline.
type ConsumerCallbacks struct {
	// Adjust seeks newly assigned partitions (to the Delta txn version + 1):
	// kgo.AdjustFetchOffsetsFn.
	Adjust func(context.Context, map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error)
	// Revoked and Lost run when partitions move away, cleanly or not:
	// kgo.OnPartitionsRevoked and kgo.OnPartitionsLost.
	Revoked, Lost func(context.Context, *kgo.Client, map[string][]int32)
	// Assigned runs after every join of the group, with the partitions newly assigned
	// (possibly none): kgo.OnPartitionsAssigned. nil: not set.
	Assigned func(context.Context, *kgo.Client, map[string][]int32)
}

// Consumer is the pipeline's group consumer of its source topics: offsets are committed
// by the pipeline after each Delta commit (advisory), polls block rebalances until
// AllowRebalance, and only committed transactional records are read. rebalanceTimeout
// bounds a rebalance, the revoke callback included. Errors: newClient's.
func (f Clients) Consumer(rebalanceTimeout time.Duration, cb ConsumerCallbacks) (*kgo.Client, error) {
	k := f.cfg.Kafka
	var assigned []kgo.Opt
	if cb.Assigned != nil {
		assigned = append(assigned, kgo.OnPartitionsAssigned(cb.Assigned))
	}
	return f.newClient("consumer", append(append([]kgo.Opt{
		kgo.ConsumerGroup(k.Group),
		kgo.ConsumeTopics(k.Topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.RebalanceTimeout(rebalanceTimeout),
		kgo.SessionTimeout(k.SessionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(time.Second), // resumed partitions wait at most this for the fetch in flight
		kgo.AdjustFetchOffsetsFn(cb.Adjust),
		kgo.OnPartitionsRevoked(cb.Revoked),
		kgo.OnPartitionsLost(cb.Lost),
	}, assigned...), groupOpts(k)...)...)
}

// DeadLetterProducer is a producer of its own: dead letters never queue behind the
// consumer, and it is not idempotent (the dead-letter topic is at-least-once by design;
// replay dedupes), so it needs no producer id: after a broker restart the first produce
// does not wait for InitProducerId, and no sequence state can wedge a partition.
// Delivery is bounded by the caller's context, not RecordDeliveryTimeout.
func (f Clients) DeadLetterProducer() (*kgo.Client, error) {
	return f.newClient("dead-letter producer",
		kgo.DisableIdempotentWrite(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	)
}

// ReplayReader reads the dead-letter topic for a replay (partitions assigned by the
// replay, committed records only) and produces its re-dead-letters. No
// RecordDeliveryTimeout: kgo measures it from each record's timestamp, and a dead letter
// keeps its (old) source timestamp; the caller's context bounds delivery instead.
func (f Clients) ReplayReader() (*kgo.Client, error) {
	return f.newClient("replay reader", append(f.dlqFetch(), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
}

// dlqFetch bounds what a dead-letter topic reader buffers: one fetch at a time, of at
// most DLQFetchBytes (a record batch larger than that still arrives whole, as the
// protocol requires).
func (f Clients) dlqFetch() []kgo.Opt {
	return []kgo.Opt{kgo.FetchMaxBytes(DLQFetchBytes(int64(f.cfg.Batch.MaxBytes))), kgo.MaxConcurrentFetches(1)}
}

// DLQFetchBytes is the fetch size of the readers of a dead-letter topic (replay, dlq
// inspect) for a pipeline's batch.max_bytes: an eighth of it, between 1 MiB and kgo's
// default of 50 MiB. A replay holds one batch (batch.max_bytes) and this one fetch.
func DLQFetchBytes(maxBytes int64) int32 {
	return int32(min(50<<20, max(1<<20, maxBytes/8)))
}

// CarryProducer re-produces a replay's carried-forward records to the partition they
// were read from.
func (f Clients) CarryProducer() (*kgo.Client, error) {
	return f.newClient("carry-forward producer", kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// InspectReader reads the dead-letter topic for `ingestd dlq inspect` (committed records
// only); it produces nothing.
func (f Clients) InspectReader() (*kgo.Client, error) {
	return f.newClient("dlq inspect reader", append(f.dlqFetch(), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
}

// LogCleanupAdmin describes the dead-letter topic's retention for the log cleanup's
// replay safeguard; it consumes and produces nothing.
func (f Clients) LogCleanupAdmin() (*kgo.Client, error) {
	return f.newClient("log cleanup admin")
}

// TopicDiscovery lists the cluster's topics for a pipeline with kafka.topic_pattern (its
// metadata requests); it consumes and produces nothing.
func (f Clients) TopicDiscovery() (*kgo.Client, error) {
	return f.newClient("topic discovery")
}

// LevelTrace is below slog.LevelDebug: `--log-level trace` adds franz-go's own debug
// logs (every request written and read, SASL steps) to ingestd's debug logs.
const LevelTrace = slog.LevelDebug - 4

// kgoLogger adapts slog to kgo's logger, keeping kgo's chatter at debug and warn levels;
// kgo's debug level only at LevelTrace. A kgo warning or error caused by a cancelled
// context (cancelledErr) is logged at debug: kgo's contexts are cancelled only by the
// client's own Close or LeaveGroup, or by a request context ingestd cancelled on
// shutdown, so it reports a stop, never a fault.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	switch {
	case k.l.Enabled(context.Background(), LevelTrace):
		return kgo.LogLevelDebug
	case k.l.Enabled(context.Background(), slog.LevelDebug):
		return kgo.LogLevelInfo // --log-level debug: kgo's connection and group lifecycle too
	}
	return kgo.LogLevelWarn
}
func (k kgoLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	if (level == kgo.LogLevelError || level == kgo.LogLevelWarn) && cancelledErr(kv) {
		level = kgo.LogLevelInfo
	}
	switch level {
	case kgo.LogLevelInfo:
		k.l.Debug("kafka: "+msg, kv...)
	case kgo.LogLevelError:
		k.l.Error("kafka: "+msg, kv...)
	case kgo.LogLevelWarn:
		k.l.Warn("kafka: "+msg, kv...)
	default:
		k.l.Log(context.Background(), LevelTrace, "kafka: "+msg, kv...)
	}
}

// cancelledErr reports whether the "err" value of kgo's key-value pairs is a context
// cancellation, wrapped or only formatted into the text. The text matters: when a
// consumer closes while it leads a rebalance, kgo's balancer formats the cancelled
// metadata request into its error with %v ("unable to fetch metadata for group topics:
// context canceled"), so kgo's own check for a cancelled context misses it, and it checks
// the client's context, which Close cancels only after leaving the group: kgo then logs
// "group manage loop errored" at error level on a clean shutdown (seen when the many
// consumers of a kafka.topic_pattern pipeline leave one group at once).
func cancelledErr(kv []any) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		if key, _ := kv[i].(string); key != "err" {
			continue
		}
		err, ok := kv[i+1].(error)
		return ok && (errors.Is(err, context.Canceled) || strings.HasSuffix(err.Error(), context.Canceled.Error()))
	}
	return false
}
