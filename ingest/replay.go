package ingest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
)

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// MaxReplays is how many times a record may be re-dead-lettered by replays before it
	// goes to <dlq>.parked instead (default 3).
	MaxReplays int
	// DryRun decodes and checks every record but produces and commits nothing.
	DryRun bool
}

// ReplaySummary is what a replay did (or, for a dry run, would do).
type ReplaySummary struct {
	DeadLetterTopic string            `json:"dead_letter_topic"`
	Read            int               `json:"read"`             // DLQ records after the replay's txn position
	AlreadyReplayed int               `json:"already_replayed"` // DLQ records at or before it
	Duplicates      int               `json:"duplicates"`       // copies of a record already replayed (DLQ is at-least-once)
	OtherPipelines  int               `json:"other_pipelines"`  // dead letters of other pipelines sharing the topic, skipped
	Landed          int               `json:"landed"`           // rows written to the table
	DeadLettered    map[string]int    `json:"dead_lettered"`    // re-dead-lettered, by reason
	Parked          int               `json:"parked"`           // sent to <dlq>.parked (past MaxReplays)
	Halted          []HaltedPartition `json:"halted,omitempty"` // a halt policy stopped the replay here
	DryRun          bool              `json:"dry_run"`
}

// replayRun is the replay state a Pipeline carries while it replays.
type replayRun struct {
	dlqTopic   string
	maxReplays int
	dryRun     bool
	sum        ReplaySummary
	landed     map[string]bool // originalKey of every record this run committed to the table
}

// parkedTopic is where records go after MaxReplays failed replays.
func parkedTopic(dlq string) string { return dlq + ".parked" }

// tally adds one flush's outcome to the summary.
func (r *replayRun) tally(rows int, dlq []deadLetter, halts []HaltedPartition) {
	r.sum.Landed += rows
	for _, d := range dlq {
		if replayCount(d.rec)+1 > r.maxReplays {
			r.sum.Parked++
		} else {
			r.sum.DeadLettered[d.reason]++
		}
	}
	r.sum.Halted = append(r.sum.Halted, halts...)
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func replayCount(r *kgo.Record) int {
	v, _ := header(r, HeaderReplayCount)
	n, _ := strconv.Atoi(v)
	return n
}

// original returns the source coordinates a dead letter records, or the record's own.
func original(r *kgo.Record) (topic string, partition int32, offset int64) {
	topic, partition, offset = r.Topic, r.Partition, r.Offset
	if t, ok := header(r, HeaderConnectTopic); ok {
		topic = t
	}
	if v, ok := header(r, HeaderConnectPartition); ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			partition = int32(n)
		}
	}
	if v, ok := header(r, HeaderConnectOffset); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			offset = n
		}
	}
	return topic, partition, offset
}

// originalKey identifies the source record a dead letter came from.
func originalKey(r *kgo.Record) string {
	t, p, o := original(r)
	return fmt.Sprintf("%s/%d/%d", t, p, o)
}

// dedupeKey identifies one dead-lettering of one source record: its original topic,
// partition and offset, and how many replays it has been through. Copies of the same
// dead letter (the DLQ is at-least-once) share it; a re-dead-lettered record does not.
func dedupeKey(r *kgo.Record) string {
	return fmt.Sprintf("%s#%d", originalKey(r), replayCount(r))
}

// deadLetterRecord re-dead-letters a record that still fails: back to the DLQ with
// ingestd.replay.count + 1, or to <dlq>.parked past MaxReplays; the original source
// coordinates and bytes are kept, ingestd's headers replaced.
func (r *replayRun) deadLetterRecord(table string, d deadLetter, now time.Time) *kgo.Record {
	count := replayCount(d.rec) + 1
	topic := r.dlqTopic
	if count > r.maxReplays {
		topic = parkedTopic(r.dlqTopic)
	}
	src := *d.rec
	src.Topic, src.Partition, src.Offset = original(d.rec)
	src.Headers = nil
	for _, h := range d.rec.Headers {
		if h.Key != HeaderReplayCount {
			src.Headers = append(src.Headers, h)
		}
	}
	src.Headers = append(src.Headers, kgo.RecordHeader{Key: HeaderReplayCount, Value: []byte(strconv.Itoa(count))})
	d.rec = &src
	return dlqRecord(topic, table, d, now)
}

// Replay reads the pipeline's dead-letter topic after its replay txn position (appId
// <app_id>-replay-<dlq topic>-<partition>) up to the end offsets at start, decodes each
// record's original value with its own schema id, checks it against the table's current
// schema under the pipeline's policy, and writes what fits, exactly once: the replay's
// txn versions move in the same Delta commits, and copies of a dead letter already
// replayed are skipped. What still fails is re-dead-lettered (see deadLetterRecord). A
// record that a halt policy refuses stops the replay there.
//
// Errors: the DLQ (or, when some record may be parked, <dlq>.parked) topic is missing,
// the broker is unreachable, or the table cannot be written.
func Replay(ctx context.Context, cfg *Config, deps Deps, opts ReplayOptions) (*ReplaySummary, error) {
	if cfg.DeadLetter.Topic == "" {
		return nil, fmt.Errorf("replay %s: the pipeline has no dead_letter.topic", cfg.Name)
	}
	if opts.MaxReplays <= 0 {
		opts.MaxReplays = 3
	}
	p := NewPipeline(cfg, deps)
	p.replay = &replayRun{dlqTopic: cfg.DeadLetter.Topic, maxReplays: opts.MaxReplays, dryRun: opts.DryRun, landed: map[string]bool{},
		sum: ReplaySummary{DeadLetterTopic: cfg.DeadLetter.Topic, DeadLettered: map[string]int{}, DryRun: opts.DryRun}}
	if err := p.checkTable(ctx); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Kafka.Brokers...),
		// No RecordDeliveryTimeout: kgo measures it from each record's timestamp, and a
		// dead letter keeps its (old) source timestamp; produceDLQ bounds delivery instead.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.WithLogger(kgoLogger{p.log})}, deps.KafkaOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	defer cl.Close()
	p.cl = cl
	adm := kadm.NewClient(cl)
	dlq := cfg.DeadLetter.Topic
	ends, err := adm.ListEndOffsets(ctx, dlq, parkedTopic(dlq))
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", dlq, err)
	}
	if o, ok := ends.Lookup(dlq, 0); !ok || o.Err != nil {
		var why error = fmt.Errorf("no partition 0")
		if ok {
			why = o.Err
		}
		return nil, fmt.Errorf("dead-letter topic %q: %w", dlq, why)
	}
	if !opts.DryRun {
		if o, ok := ends.Lookup(parkedTopic(dlq), 0); !ok || o.Err != nil {
			return nil, fmt.Errorf("replay needs the topic %q for records that fail more than %d replays: create it (e.g. kafka-topics.sh --create --topic %s)",
				parkedTopic(dlq), opts.MaxReplays, parkedTopic(dlq))
		}
	}
	txns := map[string]int64{}
	if snap, err := deps.Table.Snapshot(ctx); err == nil {
		txns = snap.Txns
	} else if !isNotFound(err) {
		return nil, fmt.Errorf("read table: %w", err)
	}

	// Read every DLQ partition from its start to its end offset now: records at or before
	// the replay's txn version only feed the duplicate check.
	byPart, err := readToEnd(ctx, cl, dlq, ends[dlq], p.log)
	if err != nil {
		return nil, err
	}

	parts := make([]int32, 0, len(byPart))
	for part := range byPart {
		parts = append(parts, part)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	// Copies already dealt with by earlier replays, in every partition, before any is
	// processed (a copy may sit in another partition than the original dead letter).
	// Other pipelines' dead letters never count.
	seen := map[string]bool{}
	ours := func(r *kgo.Record) bool { name, ok := header(r, HeaderPipeline); return !ok || name == cfg.Name }
	covered := func(part int32, r *kgo.Record) bool {
		v, ok := txns[p.txnAppID(dlq, part)]
		return ok && r.Offset <= v
	}
	for _, part := range parts {
		for _, r := range byPart[part] {
			if covered(part, r) {
				p.replay.sum.AlreadyReplayed++
				if ours(r) {
					seen[dedupeKey(r)] = true
				}
			}
		}
	}
	for _, part := range parts {
		for _, r := range byPart[part] {
			if covered(part, r) {
				continue
			}
			rec := r
			if !ours(r) {
				// Another pipeline's dead letter (pipelines may share a DLQ topic): not ours
				// to replay. It is passed on without a value, so it writes nothing and the
				// txn moves past it, like past a tombstone.
				p.replay.sum.OtherPipelines++
				rec = withoutValue(r)
			} else {
				p.replay.sum.Read++
				key := dedupeKey(r)
				if seen[key] {
					p.replay.sum.Duplicates++
					rec = withoutValue(r)
				}
				seen[key] = true
			}
			p.mu.Lock()
			full := p.batch.Add(rec, int64(len(rec.Key)+len(rec.Value)), time.Now())
			var ferr error
			if full {
				ferr = p.flushLocked(ctx)
			}
			p.mu.Unlock()
			if ferr != nil {
				return &p.replay.sum, ferr
			}
			if len(p.replay.sum.Halted) > 0 {
				return &p.replay.sum, nil
			}
		}
		p.mu.Lock()
		ferr := p.flushLocked(ctx)
		p.mu.Unlock()
		if ferr != nil {
			return &p.replay.sum, ferr
		}
		if len(p.replay.sum.Halted) > 0 {
			return &p.replay.sum, nil
		}
	}
	return &p.replay.sum, nil
}

func isNotFound(err error) bool { return errors.Is(err, deltawriter.ErrTableNotFound) }

// withoutValue returns a copy of r with no value: flushed like a tombstone, it writes
// nothing and moves the txn past r.
func withoutValue(r *kgo.Record) *kgo.Record {
	c := *r
	c.Value = nil
	return &c
}

// readToEnd reads every partition of topic from its start to the given end offsets
// (exclusive) and returns the records by partition, in offset order.
func readToEnd(ctx context.Context, cl *kgo.Client, topic string, ends map[int32]kadm.ListedOffset, log interface {
	Warn(string, ...any)
}) (map[int32][]*kgo.Record, error) {
	endOf := map[int32]int64{}
	starts := map[int32]kgo.Offset{}
	for part, o := range ends {
		if o.Err != nil {
			return nil, fmt.Errorf("end offset of %s[%d]: %w", topic, part, o.Err)
		}
		if o.Offset > 0 {
			endOf[part] = o.Offset
			starts[part] = kgo.NewOffset().AtStart()
		}
	}
	byPart := map[int32][]*kgo.Record{}
	if len(starts) == 0 {
		return byPart, nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts})
	defer cl.PurgeTopicsFromConsuming(topic)
	// A partition is complete at its record end-1; when the last offsets are transaction
	// markers (read_committed never returns them) a quiet spell ends the read instead.
	// Stopping early is safe for replay: its txn only covers what it processed.
	for remaining := len(starts); remaining > 0; {
		pctx, cancel := context.WithTimeout(ctx, readQuiet)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if fs.NumRecords() == 0 && pctx.Err() != nil {
			log.Warn("no more records before the end offsets (transaction markers?); stopping the read", "topic", topic, "partitions_unfinished", remaining)
			break
		}
		fs.EachError(func(t string, part int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				log.Warn("fetch error", "topic", t, "partition", part, "err", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			end := endOf[r.Partition]
			if r.Offset >= end {
				return
			}
			byPart[r.Partition] = append(byPart[r.Partition], r)
			if r.Offset == end-1 {
				remaining--
			}
		})
	}
	return byPart, nil
}

// readQuiet is how long readToEnd waits for more records before it takes the rest of a
// partition to be transaction markers.
const readQuiet = 5 * time.Second
