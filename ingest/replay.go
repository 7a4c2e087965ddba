package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/batcher"
	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
)

// ErrParkedTopicMissing: a record must be parked and <dlq>.parked does not exist.
var ErrParkedTopicMissing = errors.New("parked topic missing")

// parkedTopic is where records go after MaxReplays failed replays.
func parkedTopic(dlqTopic string) string { return dlqTopic + ".parked" }

// Replay reads the pipeline's dead-letter topic after its replay txn position (appId
// <app_id>-replay-<dlq topic>-<partition>) up to the end offsets at start (or, with
// opts.Until, up to that point in each partition), decodes each record's original value
// with its own schema id, checks it against the table's current schema under the
// pipeline's policy, and writes what fits, exactly once: the replay's txn versions move in
// the same Delta commits, and copies of a dead letter already replayed are skipped
// (dlq.DedupeKey). Each dead letter names the commit meant to acknowledge it
// (ingestd.commit.id, ingestd.txn.app_id, ingestd.txn.version); the Delta log decides
// (dlq.AckIndex.Classify): an orphan (its flush never committed, a later flush handled the
// record) is skipped, a pending one (no commit has moved its txn yet) stops its DLQ
// partition before it. What still fails is re-dead-lettered (replayMode.deadLetter). A
// record that a halt policy refuses stops the replay there.
//
// With opts.Reasons or opts.From, records not selected are carried forward: re-produced
// unchanged (key, value, headers, record timestamp, same partition) to the DLQ before the
// commit that moves the txn past them, so every record read ends landed, re-dead-lettered,
// parked or carried forward, and a later replay sees the carried ones again. A carried
// copy names the replay's commit, so it is a distinct dead letter once that commit lands,
// and an orphan if the replay crashed before it (then the original is read again).
//
// Errors: invalid options; the DLQ topic is missing; a record must be parked and
// <dlq>.parked is missing (ErrParkedTopicMissing); the broker is unreachable; the table
// cannot be written. The summary is returned with every error after the options check.
func Replay(ctx context.Context, cfg *config.Config, deps Deps, opts ReplayOptions) (*ReplaySummary, error) {
	if cfg.DeadLetter.Topic == "" {
		return nil, fmt.Errorf("replay %s: the pipeline has no dead_letter.topic", cfg.Name)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("replay %s: %w", cfg.Name, err)
	}
	if opts.MaxReplays <= 0 {
		opts.MaxReplays = 3
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = 5 * time.Second
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("pipeline", cfg.Name)
	topic := cfg.DeadLetter.Topic
	if err := checkTableExists(ctx, cfg, deps.Table); err != nil {
		return nil, err
	}
	clients := deps.kafkaClients(cfg, log)
	cl, err := clients.ReplayReader()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rm := &replayMode{appID: cfg.AppID, dlqTopic: topic, table: cfg.Table.URI, maxReplays: opts.MaxReplays, dryRun: opts.DryRun,
		landed: map[string]bool{}, carry: map[*kgo.Record]bool{}, adm: kadm.NewClient(cl),
		sum: ReplaySummary{DeadLetterTopic: topic, DeadLettered: map[string]int{}, ByReason: map[string]*ReasonOutcome{}, DryRun: opts.DryRun}}
	r := &replayer{cfg: cfg, log: log, opts: opts, mode: rm, halted: map[topicPartition]HaltedPartition{},
		batch:        batcher.New(batcher.Limits{MaxRecords: cfg.Batch.MaxRecords, MaxBytes: int64(cfg.Batch.MaxBytes)}, partOf),
		lastProgress: time.Now()}
	r.fl = newFlusher(cfg, deps, log, rm, r.halted)
	r.fl.dlq = dlq.NewProducer(cl)
	if !opts.DryRun && opts.filtered() {
		// Carried records go back to the partition they were read from.
		cc, err := clients.CarryProducer()
		if err != nil {
			return nil, err
		}
		defer cc.Close()
		r.fl.carry = dlq.NewProducer(cc)
	}
	ends, err := rm.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	if o, ok := ends.Lookup(topic, 0); !ok || o.Err != nil {
		var why error = fmt.Errorf("no partition 0")
		if ok {
			why = o.Err
		}
		return nil, fmt.Errorf("dead-letter topic %q: %w", topic, why)
	}
	txns := map[string]int64{}
	if snap, err := deps.Table.Snapshot(ctx); err == nil {
		txns = snap.Txns
	} else if !errors.Is(err, deltawriter.ErrTableNotFound) {
		return nil, fmt.Errorf("read table: %w", err)
	}

	// Read every DLQ partition from its start to its end offset now: records at or before
	// the replay's txn version only feed the duplicate check, records past the stop point
	// only the copy check (dlq.Superseded).
	// Without READ the broker answers fetches with errors kgo retries quietly, and the read
	// would end as "no more records": ask first (authorized operations, KIP-430).
	if err := checkRead(ctx, cl, cfg.Kafka, topic); err != nil {
		return nil, err
	}
	byPart, err := dlq.ReadToEnd(ctx, cl, topic, ends[topic], log, readFatal(cfg.Kafka, topic))
	if err != nil {
		return nil, err
	}
	// The commits that acknowledge them (ingestd.commit.id), read once.
	var all []*kgo.Record
	for _, recs := range byPart {
		for _, rec := range recs {
			if r.ours(rec) {
				all = append(all, rec)
			}
		}
	}
	if r.acks, err = dlq.NewAckIndex(ctx, deps.Table.Store(), all); err != nil {
		return nil, fmt.Errorf("read the commits of the dead letters: %w", err)
	}
	sum, err := r.run(ctx, byPart, ends[topic], txns)
	if err == nil && sum.DryRun && sum.Parked > 0 {
		if ok, lerr := rm.parkedExists(ctx); lerr == nil && !ok {
			sum.ParkedTopicMissing = true
		}
	}
	return sum, err
}

// checkTableExists refuses a table ingestd cannot write, and a missing one unless
// table.create is set.
func checkTableExists(ctx context.Context, cfg *config.Config, t *deltawriter.Table) error {
	snap, err := t.Snapshot(ctx)
	switch {
	case errors.Is(err, deltawriter.ErrTableNotFound):
		if !cfg.Table.Create {
			return fmt.Errorf("open table %s: no Delta table there and table.create is false (set table.create: true in %s)", cfg.Table.URI, cfg.File)
		}
		return nil
	case err != nil:
		return fmt.Errorf("open table %s: %w", cfg.Table.URI, err)
	}
	return checkWritable(cfg, snap)
}

// replayer runs one replay: it reads the dead-letter topic, classifies and deduplicates
// its records, batches them and flushes each batch with its flusher in replayMode,
// retrying until it commits.
type replayer struct {
	cfg    *config.Config
	log    *slog.Logger
	opts   ReplayOptions
	fl     *flusher
	mode   *replayMode
	acks   *dlq.AckIndex // the commits that acknowledge the dead letters read
	batch  *batcher.Batcher[topicPartition, *kgo.Record]
	halted map[topicPartition]HaltedPartition

	lastProgress time.Time
}

// ours reports whether a DLQ record is this pipeline's (pipelines may share a DLQ topic).
func (r *replayer) ours(rec *kgo.Record) bool {
	name, ok := dlq.Header(rec, dlq.HeaderPipeline)
	return !ok || name == r.cfg.Name
}

// run replays the records read, partition by partition (see Replay). Each of our dead
// letters is first classified by its acknowledging commit (dlq.AckIndex.Classify):
// orphans are skipped, a pending one stops its partition, real ones are deduplicated by
// dlq.DedupeKey against every real record already replayed (below the txn position, in
// every partition) or read earlier in this run.
func (r *replayer) run(ctx context.Context, byPart map[int32][]*kgo.Record, ends map[int32]kadm.ListedOffset, txns map[string]int64) (*ReplaySummary, error) {
	rm, sum, opts := r.mode, &r.mode.sum, r.opts
	if r.acks == nil {
		r.acks = &dlq.AckIndex{}
	}
	parts := make([]int32, 0, len(byPart))
	for part := range byPart {
		parts = append(parts, part)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	sup := map[int32]map[int64]bool{}
	for _, part := range parts {
		sup[part] = dlq.Superseded(byPart[part]) // dead letters without ack headers only
	}
	// Real dead letters already dealt with by earlier replays, in every partition, before
	// any is processed (a copy may sit in another partition than the original dead letter).
	// Other pipelines' dead letters never count, nor orphans, nor old records that have a
	// later exact copy (their copy is the live one).
	seen := map[string]bool{}
	next := func(part int32) int64 {
		if v, ok := txns[rm.txnAppID(rm.dlqTopic, part)]; ok {
			return v + 1
		}
		return 0
	}
	for _, part := range parts {
		for _, rec := range byPart[part] {
			if rec.Offset < next(part) {
				sum.AlreadyReplayed++
				if r.ours(rec) && !sup[part][rec.Offset] && r.acks.Classify(rec) == dlq.AckReal {
					seen[dlq.DedupeKey(rec)] = true
				}
			}
		}
	}
	for _, part := range parts {
		recs, from := byPart[part], next(part)
		end := ends[part].Offset
		stop := opts.stopOffset(recs, end, from)
		if stop < end {
			r.log.Info("replay stops early in this partition (--until)", "topic", rm.dlqTopic, "partition", part, "stop", stop, "high_watermark", end, "until", opts.Until.String())
		}
		last := from - 1
		pendingAt := int64(-1)
		for i, rec := range recs {
			if rec.Offset < from {
				continue
			}
			if rec.Offset >= stop {
				if r.ours(rec) {
					sum.Remaining++
				}
				continue
			}
			state := dlq.AckReal
			if r.ours(rec) {
				state = r.acks.Classify(rec)
				if state == dlq.AckPending {
					// Its commit may be this run's own (a copy carried by a replay that
					// crashed): flush what is before it and look at the log again.
					if halted, err := r.flush(ctx); err != nil || halted {
						return sum, err
					}
					if err := r.acks.Refresh(ctx); err != nil {
						return sum, fmt.Errorf("read the commits of the dead letters: %w", err)
					}
					state = r.acks.Classify(rec)
				}
				if state == dlq.AckPending {
					// Its flush may still be in flight: the txn must not pass it.
					pendingAt, stop = rec.Offset, rec.Offset
					for _, rest := range recs[i:] {
						if rest.Offset >= end || !r.ours(rest) {
							continue
						}
						sum.Remaining++
						if rest.Offset < opts.stopOffset(recs, end, from) && r.acks.Classify(rest) == dlq.AckPending {
							sum.Pending++
						}
					}
					break
				}
			}
			add := rec
			if !r.ours(rec) {
				// Another pipeline's dead letter (pipelines may share a DLQ topic): not ours
				// to replay. It is passed on without a value, so it writes nothing and the
				// txn moves past it, like past a tombstone.
				sum.OtherPipelines++
				add = withoutValue(rec)
			} else {
				sum.Read++
				key := dlq.DedupeKey(rec)
				switch {
				case state == dlq.AckOrphan:
					// its flush never committed; the record was handled again by a later one
					sum.Orphans++
					add = withoutValue(rec)
				case sup[part][rec.Offset]:
					// an old dead letter with an exact copy later in this partition: that
					// copy is the one replayed
					sum.Duplicates++
					add = withoutValue(rec)
				case seen[key]:
					sum.Duplicates++
					add = withoutValue(rec)
				case !opts.selects(rec):
					rm.carry[rec] = true
				}
				if state == dlq.AckReal && !sup[part][rec.Offset] {
					seen[key] = true
				}
			}
			last = rec.Offset
			if r.batch.Add(add, int64(len(add.Key)+len(add.Value)), time.Now()) {
				if halted, err := r.flush(ctx); err != nil || halted {
					return sum, err
				}
			}
			r.progress(part, rec.Offset, end, stop, false)
		}
		if halted, err := r.flush(ctx); err != nil || halted {
			return sum, err
		}
		if pendingAt >= 0 {
			r.log.Warn("replay stops before a pending dead letter: the flush that produced it has not committed yet "+
				"(it may be in flight, or its pipeline stopped before committing); run the replay again after the pipeline commits",
				"topic", rm.dlqTopic, "partition", part, "offset", pendingAt)
		}
		r.progress(part, last, end, stop, true)
	}
	return sum, nil
}

// flush writes the batch and retries until it is committed (classify): transient failures
// (registry, broker, store) with retryBackoff, a lost commit race by rebuilding on the new
// snapshot (rebuildWait); a fatal failure is returned with its fix. It
// reports whether the replay halted. When ctx ends first it returns ctx's error; nothing
// past the last txn was committed, so a rerun reads the records again. Records
// dead-lettered (or carried forward) by an attempt whose produce succeeded stay so in
// every later attempt (flusher.deadSet): their DLQ copies name the commit id, which the
// attempts share until one commits.
func (r *replayer) flush(ctx context.Context) (halted bool, err error) {
	recs, _, _ := r.batch.Take(time.Now(), true)
	if len(recs) == 0 {
		return len(r.mode.sum.Halted) > 0, nil
	}
	for attempt := 0; ; attempt++ {
		out, err := r.fl.flush(ctx, recs, frameNote{})
		switch v := classify(err); v.action {
		case actNone:
			for _, h := range out.halts {
				r.halted[topicPartition{h.Topic, h.Partition}] = h
			}
			return len(r.mode.sum.Halted) > 0, nil
		case actRebuild:
			observe(r.fl.m, r.log, r.cfg.Name, v, 1, "table changed by another writer; re-running the guard on the new snapshot", "attempt", attempt+1)
			if serr := rebuildWait(ctx, attempt); serr != nil {
				return false, fmt.Errorf("flush: %w", serr)
			}
		case actRetry:
			observe(r.fl.m, r.log, r.cfg.Name, v, len(recs), "flush failed, retrying", "attempt", attempt+1)
			if serr := retryBackoff.Sleep(ctx, attempt); serr != nil {
				return false, fmt.Errorf("flush after %v: %w", err, serr)
			}
		default:
			return false, v.err
		}
	}
}

// progress logs a "replay progress" line when ProgressEvery has passed since the last
// one, or always when force is set.
func (r *replayer) progress(part int32, offset, end, stop int64, force bool) {
	now := time.Now()
	if !force && now.Sub(r.lastProgress) < r.opts.ProgressEvery {
		return
	}
	r.lastProgress = now
	s := &r.mode.sum
	re := 0
	for _, n := range s.DeadLettered {
		re += n
	}
	r.log.Info("replay progress", "topic", r.mode.dlqTopic, "partition", part, "offset", offset, "high_watermark", end, "stop", stop,
		"read", s.Read, "landed", s.Landed, "dead_lettered", re, "parked", s.Parked, "carried", s.Carried,
		"duplicates", s.Duplicates, "orphans", s.Orphans, "pending", s.Pending, "dry_run", r.mode.dryRun)
}

// withoutValue returns a copy of r with no value: flushed like a tombstone, it writes
// nothing and moves the txn past r.
func withoutValue(r *kgo.Record) *kgo.Record {
	c := *r
	c.Value = nil
	return &c
}

// replayMode is the mode of a replay: txns <app_id>-replay-<dlq topic>-<partition>;
// copies of an original already landed in this run are duplicates; records not selected
// are carried forward; what still fails is re-dead-lettered with ingestd.replay.count + 1,
// or parked past maxReplays; each flush is tallied in the summary.
type replayMode struct {
	appID      string
	dlqTopic   string
	table      string
	maxReplays int
	dryRun     bool
	sum        ReplaySummary
	landed     map[string]bool      // dlq.OriginalKey of every record this run committed to the table
	carry      map[*kgo.Record]bool // records to carry forward (not selected by --reason/--from)
	adm        *kadm.Client
	parkedOK   bool // <dlq>.parked was seen to exist
}

func (m *replayMode) txnAppID(topic string, partition int32) string {
	return fmt.Sprintf("%s-replay-%s-%d", m.appID, topic, partition)
}

func (m *replayMode) route(r *kgo.Record) (route, bool) {
	switch {
	case m.landed[dlq.OriginalKey(r)]:
		return routeDuplicate, true // another copy of this original (at any replay count) landed in this run
	case m.carry[r]:
		return routeCarry, true
	}
	return routeGuard, false
}

func (m *replayMode) identity() func(*kgo.Record) string { return dlq.OriginalKey }

// deadLetter re-dead-letters a record that still fails: back to the DLQ with
// ingestd.replay.count + 1, or to <dlq>.parked past maxReplays; the original source
// coordinates and bytes are kept, ingestd's headers replaced.
func (m *replayMode) deadLetter(d dlq.DeadLetter, now time.Time) *kgo.Record {
	topic := m.dlqTopic
	if m.parks(d) {
		topic = parkedTopic(m.dlqTopic)
	}
	return dlq.Refailed(d).Record(topic, m.table, now)
}

// parks reports whether a record that failed again goes to <dlq>.parked.
func (m *replayMode) parks(d dlq.DeadLetter) bool { return dlq.ReplayCount(d.Rec)+1 > m.maxReplays }

// beforeProduce ends a dry run here, tallied; otherwise, when a record must be parked,
// <dlq>.parked must exist. A missing topic fails the replay (permanent: nothing of this
// flush is produced or committed, so a rerun resumes here); a failed metadata request is
// transient.
func (m *replayMode) beforeProduce(ctx context.Context, out *outcome) (bool, error) {
	if m.dryRun {
		m.tally(out)
		return false, nil
	}
	n := 0
	for _, d := range out.fresh {
		if m.parks(d) {
			n++
		}
	}
	if n == 0 || m.parkedOK {
		return true, nil
	}
	ok, err := m.parkedExists(ctx)
	if err != nil {
		return false, &transientError{stage: "parked topic", what: "look up " + parkedTopic(m.dlqTopic), err: err}
	}
	if !ok {
		t := parkedTopic(m.dlqTopic)
		return false, fmt.Errorf("replay: %d record(s) failed more than %d replays and go to %q, which does not exist: create it "+
			"(kafka-topics.sh --bootstrap-server BROKER --create --topic %s) and run the replay again; this batch was not written, "+
			"earlier batches are committed: %w", n, m.maxReplays, t, t, ErrParkedTopicMissing)
	}
	m.parkedOK = true
	return true, nil
}

func (m *replayMode) parkedExists(ctx context.Context) (bool, error) {
	t := parkedTopic(m.dlqTopic)
	ends, err := m.adm.ListEndOffsets(ctx, t)
	if err != nil {
		return false, err
	}
	o, ok := ends.Lookup(t, 0)
	return ok && o.Err == nil, nil
}

// done remembers the originals a commit landed and tallies the flush.
func (m *replayMode) done(_ context.Context, out *outcome) {
	if out.version >= 0 {
		for _, r := range out.written {
			m.landed[dlq.OriginalKey(r)] = true
		}
	}
	m.tally(out)
}

// tally adds one flush's outcome to the summary, by the reason each record was
// dead-lettered with before the replay.
func (m *replayMode) tally(out *outcome) {
	s := &m.sum
	s.Duplicates += out.duplicates
	s.Landed += len(out.written)
	for _, r := range out.written {
		s.reason(r).Landed++
	}
	for _, d := range out.deadLetters() {
		if m.parks(d) {
			s.Parked++
			s.reason(d.Rec).Parked++
		} else {
			s.DeadLettered[d.Reason]++
			s.reason(d.Rec).DeadLettered++
		}
	}
	for _, c := range out.carried {
		s.Carried++
		s.reason(c).Carried++
	}
	s.Halted = append(s.Halted, out.halts...)
}
