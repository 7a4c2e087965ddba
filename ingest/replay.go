package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/batcher"
	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
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
// cannot be written. The summary is nil with an error found before the dead letters are
// read (options, the table, the clients, end offsets, READ access, the acknowledgement
// index) and holds what was done with an error met while replaying.
func Replay(ctx context.Context, cfg *config.Config, deps Deps, opts ReplayOptions) (*ReplaySummary, error) {
	if cfg.DeadLetter.Topic == "" {
		return nil, fmt.Errorf("replay %s: the pipeline has no dead_letter.topic", cfg.Name)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("replay %s: %w", cfg.Name, err)
	}
	if cfg.Table.Upsert() && cfg.Table.SequenceBy == "" {
		// Without a sequence a change wins by arriving last: a dead letter replayed now
		// would overwrite every newer row of its key.
		return nil, fmt.Errorf("replay %s: the table is an upsert table without table.sequence_by, so a replayed dead letter would overwrite newer rows of its key; "+
			"set table.sequence_by in %s to a column that orders changes (replay then writes only what is newer than the table's row), or land the dead letters another way", cfg.Name, cfg.File)
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
	if err := probeRegistry(ctx, deps.Schemas, log); err != nil {
		return nil, err // a wrong registry URL would dead-letter every record again
	}
	clients := deps.kafkaClients(cfg, log)
	cl, err := clients.ReplayReader()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	r := newReplayer(cfg, deps, log, opts, cl)
	if !opts.DryRun && opts.filtered() {
		// Carried records go back to the partition they were read from.
		cc, err := clients.CarryProducer()
		if err != nil {
			return nil, err
		}
		defer cc.Close()
		r.fl.carry = dlq.NewProducer(cc)
	}
	ends, err := dlqEndOffsets(ctx, r.mode.adm, topic)
	if err != nil {
		return nil, err
	}
	txns, err := replayTxns(ctx, deps.Table)
	if err != nil {
		return nil, err
	}
	ix, err := r.indexDeadLetters(ctx, cl, deps.Table.Store(), ends, txns)
	if err != nil {
		return nil, err
	}
	r.ackByGroupOffsets(ctx)
	sum, err := r.run(ctx, cl, ix, txns)
	if err == nil && sum.DryRun && sum.Parked > 0 {
		if ok, lerr := r.mode.parkedExists(ctx); lerr == nil && !ok {
			sum.ParkedTopicMissing = true
		}
	}
	return sum, err
}

// ackByGroupOffsets gives the acknowledgement index the pipeline's Kafka group offsets
// (dlq.AckIndex.SetGroupOffsets), so that the dead letters of flushes made before the
// table existed are real, and the replay lands them (creating the table, with
// table.create) instead of reporting them pending until a record that fits creates it.
// Without them (no DESCRIBE on the group, the broker unreachable) those dead letters stay
// pending, as the log says.
func (r *replayer) ackByGroupOffsets(ctx context.Context) {
	if r.acks == nil {
		return
	}
	offs, err := r.mode.adm.FetchOffsets(ctx, r.cfg.Kafka.Group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		r.log.Warn("replay cannot read the pipeline's group offsets; dead letters written before the table existed stay pending until the pipeline creates it",
			"group", r.cfg.Kafka.Group, "err", err)
		return
	}
	cm := &consumerMode{appID: r.cfg.AppID}
	byApp := map[string]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			byApp[cm.txnAppID(o.Topic, o.Partition)] = o.At
		}
	})
	r.acks.SetGroupOffsets(byApp)
}

// newReplayer builds the replayer of one Replay with opts (defaults filled in) and its
// replayMode and flusher: cl reads the DLQ topic, lists its offsets (kadm) and produces
// what is re-dead-lettered; the carry producer, when records are carried, is set by the
// caller.
func newReplayer(cfg *config.Config, deps Deps, log *slog.Logger, opts ReplayOptions, cl *kgo.Client) *replayer {
	topic := cfg.DeadLetter.Topic
	rm := &replayMode{appID: cfg.AppID, dlqTopic: topic, table: cfg.Table.URI, maxReplays: opts.MaxReplays, dryRun: opts.DryRun,
		landed: map[string]bool{}, carry: map[*kgo.Record]bool{}, adm: kadm.NewClient(cl),
		sum: ReplaySummary{DeadLetterTopic: topic, DeadLettered: map[string]int{}, ByReason: map[string]*ReasonOutcome{}, DryRun: opts.DryRun}}
	r := &replayer{cfg: cfg, log: log, opts: opts, mode: rm, halted: map[topicPartition]HaltedPartition{},
		batch:        batcher.New(batcher.Limits{MaxRecords: cfg.Batch.MaxRecords, MaxBytes: int64(cfg.Batch.MaxBytes)}, partOf),
		lastProgress: time.Now()}
	r.fl = newFlusher(cfg, deps, log, rm, r.halted)
	r.fl.dlq = dlq.NewProducer(cl)
	return r
}

// dlqEndOffsets are the end offsets of the dead-letter topic's partitions now, where the
// replay stops reading. Errors: the offsets cannot be listed ("list offsets of"), or the
// topic has no partition 0 or it reports an error (the topic is missing).
func dlqEndOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]kadm.ListedOffset, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
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
	return ends[topic], nil
}

// replayTxns are the table's txn versions by app id (PROTOCOL.md, Transaction
// Identifiers), where each DLQ partition's replay resumes; none for a table not created
// yet. The error is the snapshot's when the log cannot be read.
func replayTxns(ctx context.Context, t *deltawriter.Table) (map[string]int64, error) {
	snap, err := t.Snapshot(ctx)
	if err == nil {
		return snap.Txns, nil
	}
	if !errors.Is(err, deltawriter.ErrTableNotFound) {
		return nil, fmt.Errorf("read table: %w", err)
	}
	return map[string]int64{}, nil
}

// dlqIndex is what the first read of the dead-letter topic keeps for the second: per
// partition, the range read, the offsets of dead letters superseded by an exact later
// copy (dlq.Copies), and the offset where a time --until stops the replay. Its size is
// the number of partitions plus 16 bytes per dead letter without ack headers, whatever
// the size of the topic.
type dlqIndex struct {
	ranges  map[int32]dlq.Range
	sup     map[int32]map[int64]bool
	untilAt map[int32]int64 // first offset past the replay position at or after --until's time
}

// indexDeadLetters streams every DLQ partition from its start to its end offset in ends
// (dlq.Scan) and keeps only what the replay needs before it handles the first record: the
// exact copies (dlq.Copies), --until's stop point by time, and the scope of the
// acknowledging commits (dlq.AckScope), which it then indexes from st into r.acks. txns
// give each partition's replay position. Errors: no READ on the topic (checkRead), a fatal
// fetch error, the commits cannot be read.
func (r *replayer) indexDeadLetters(ctx context.Context, cl *kgo.Client, st storage.Store, ends map[int32]kadm.ListedOffset, txns map[string]int64) (*dlqIndex, error) {
	topic := r.mode.dlqTopic
	// Without READ the broker answers fetches with errors kgo retries quietly, and the read
	// would end as "no more records": ask first (authorized operations, KIP-430).
	if err := checkRead(ctx, cl, r.cfg.Kafka, topic); err != nil {
		return nil, err
	}
	ranges, err := dlq.Ranges(topic, ends)
	if err != nil {
		return nil, err
	}
	ix := &dlqIndex{ranges: ranges, sup: map[int32]map[int64]bool{}, untilAt: map[int32]int64{}}
	copies := map[int32]*dlq.Copies{}
	for part := range ranges {
		copies[part] = &dlq.Copies{}
	}
	var scope dlq.AckScope
	err = dlq.Scan(ctx, cl, topic, ranges, r.log, readFatal(r.cfg.Kafka, topic), func(rec *kgo.Record) error {
		copies[rec.Partition].Add(rec) // dead letters without ack headers only
		if r.ours(rec) {
			scope.Add(rec)
		}
		if _, found := ix.untilAt[rec.Partition]; !found && r.opts.untilStops(rec, r.resumeOffset(txns, rec.Partition)) {
			ix.untilAt[rec.Partition] = rec.Offset
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for part, c := range copies {
		ix.sup[part] = c.Superseded()
	}
	if r.acks, err = scope.Index(ctx, st); err != nil {
		return nil, fmt.Errorf("read the commits of the dead letters: %w", err)
	}
	return ix, nil
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

// run replays the dead-letter topic, partition by partition in partition order, reading
// each again (dlq.Scan) from its replay position to its end offset in ix (see Replay).
// Each of our dead letters is first classified by its acknowledging commit
// (dlq.AckIndex.Classify): orphans are skipped, a pending one stops its partition, real
// ones are deduplicated by dlq.DedupeKey against every real record already replayed
// (below the txn position, in every partition: alreadyReplayed) or read earlier in this
// run. It returns the summary, also with an error (a read's, a flush's, ctx's) and when a
// halt policy stopped the replay (then with a nil error).
func (r *replayer) run(ctx context.Context, cl *kgo.Client, ix *dlqIndex, txns map[string]int64) (*ReplaySummary, error) {
	sum := &r.mode.sum
	if r.acks == nil {
		r.acks = &dlq.AckIndex{}
	}
	seen, err := r.alreadyReplayed(ctx, cl, ix, txns)
	if err != nil {
		return sum, err
	}
	for _, part := range slices.Sorted(maps.Keys(ix.ranges)) {
		end := ix.ranges[part].End
		p := &partitionReplay{part: part, sup: ix.sup[part], from: r.resumeOffset(txns, part), end: end, stop: end}
		if at, ok := ix.untilAt[part]; ok {
			p.stop = at
		} else if u := r.opts.Until; u != nil && !u.IsTime() {
			p.stop = min(end, u.Offset)
		}
		if halted, err := r.replayPartition(ctx, cl, p, seen); err != nil || halted {
			return sum, err
		}
	}
	return sum, nil
}

// resumeOffset is the first offset of DLQ partition part past the replay's txn position
// in txns: its txn version + 1, or 0 when no replay has committed in it.
func (r *replayer) resumeOffset(txns map[string]int64, part int32) int64 {
	if v, ok := txns[r.mode.txnAppID(r.mode.dlqTopic, part)]; ok {
		return v + 1
	}
	return 0
}

// alreadyReplayed reads each partition up to its txn position (dlq.Scan), counts those
// records (AlreadyReplayed) and returns the dlq.DedupeKey of each real dead letter among
// them, from every partition before any is processed (a copy may sit in another partition
// than the original dead letter). Other pipelines' dead letters never count, nor orphans,
// nor old records that have a later exact copy (ix.sup: their copy is the live one).
// Errors: the read's.
func (r *replayer) alreadyReplayed(ctx context.Context, cl *kgo.Client, ix *dlqIndex, txns map[string]int64) (map[string]bool, error) {
	sum := &r.mode.sum
	ranges := map[int32]dlq.Range{}
	for part, rg := range ix.ranges {
		if next := r.resumeOffset(txns, part); next > 0 {
			ranges[part] = dlq.Range{End: min(next, rg.End)}
		}
	}
	seen := map[string]bool{}
	topic := r.mode.dlqTopic
	err := dlq.Scan(ctx, cl, topic, ranges, r.log, readFatal(r.cfg.Kafka, topic), func(rec *kgo.Record) error {
		sum.AlreadyReplayed++
		if r.ours(rec) && !ix.sup[rec.Partition][rec.Offset] && r.acks.Classify(rec) == dlq.AckReal {
			seen[dlq.DedupeKey(rec)] = true
		}
		return nil
	})
	return seen, err
}

// partitionReplay is one DLQ partition's pass through replayer.replayPartition. Offsets
// are the partition's.
type partitionReplay struct {
	part int32
	sup  map[int64]bool
	from int64 // first offset past the replay's txn position
	end  int64 // end offset at the start of the replay

	stop      int64 // first offset left alone: end, --until's point or a pending dead letter
	last      int64 // last offset batched; from-1 before any
	pendingAt int64 // the pending dead letter the partition stopped at; -1 for none
}

// replayPartition streams p from p.from to p.end (dlq.Scan) and replays it up to its stop
// point (--until, or end): each record is classified (ackState); a pending one stops the
// partition there; the others are batched as selectForBatch decides, flushing each full
// batch and the rest at the end. Records at or past the stop point count as Remaining,
// and those of them that are pending and before --until's point as Pending too. So the
// records held are those of one batch (batch.max_records, batch.max_bytes) and the
// client's fetch buffers. seen holds the dlq.DedupeKey of every real dead letter replayed
// before or read earlier in this run, and gains this partition's. It reports whether a
// halt policy stopped the replay, and returns the read's error, a flush's, or that of
// re-reading the acknowledging commits.
func (r *replayer) replayPartition(ctx context.Context, cl *kgo.Client, p *partitionReplay, seen map[string]bool) (halted bool, err error) {
	sum := &r.mode.sum
	if p.stop < p.end {
		r.log.Info("replay stops early in this partition (--until)", "topic", r.mode.dlqTopic, "partition", p.part, "stop", p.stop, "high_watermark", p.end, "until", r.opts.Until.String())
	}
	p.last, p.pendingAt = p.from-1, -1
	until := p.stop
	topic := r.mode.dlqTopic
	err = dlq.Scan(ctx, cl, topic, map[int32]dlq.Range{p.part: {From: p.from, End: p.end}}, r.log, readFatal(r.cfg.Kafka, topic), func(rec *kgo.Record) error {
		if rec.Offset >= p.stop {
			// left for a later replay; after a pending dead letter, the pending ones before
			// --until's point are counted too
			if r.ours(rec) {
				sum.Remaining++
				if p.pendingAt >= 0 && rec.Offset < until && r.acks.Classify(rec) == dlq.AckPending {
					sum.Pending++
				}
			}
			return nil
		}
		state, h, err := r.ackState(ctx, rec)
		if err != nil {
			return err
		}
		if h {
			halted = true
			return dlq.ErrStopScan
		}
		if state == dlq.AckPending {
			// Its flush may still be in flight, so the txn must not pass it.
			p.pendingAt, p.stop = rec.Offset, rec.Offset
			sum.Remaining++
			sum.Pending++
			return nil
		}
		add := r.selectForBatch(rec, state, p.sup, seen)
		p.last = rec.Offset
		if r.batch.Add(add, int64(len(add.Key)+len(add.Value)), time.Now()) {
			if h, err := r.flush(ctx); err != nil {
				return err
			} else if h {
				halted = true
				return dlq.ErrStopScan
			}
		}
		r.progress(p.part, rec.Offset, p.end, p.stop, false)
		return nil
	})
	if err != nil || halted {
		return halted, err
	}
	if halted, err := r.flush(ctx); err != nil || halted {
		return halted, err
	}
	if p.pendingAt >= 0 {
		r.log.Warn("replay stops before a pending dead letter: the flush that produced it has not committed yet "+
			"(it may be in flight, or its pipeline stopped before committing); run the replay again after the pipeline commits",
			"topic", r.mode.dlqTopic, "partition", p.part, "offset", p.pendingAt)
	}
	r.progress(p.part, p.last, p.end, p.stop, true)
	return false, nil
}

// ackState classifies one of our dead letters by its acknowledging commit
// (dlq.AckIndex.Classify); another pipeline's is dlq.AckReal. A pending one may have been
// committed by this run (a copy carried by a replay that crashed): the batch before it is
// flushed and the commits read again first. It reports whether that flush halted the
// replay, and returns the flush's error or Refresh's ("read the commits of the dead
// letters").
func (r *replayer) ackState(ctx context.Context, rec *kgo.Record) (state dlq.AckState, halted bool, err error) {
	if !r.ours(rec) {
		return dlq.AckReal, false, nil
	}
	if state = r.acks.Classify(rec); state != dlq.AckPending {
		return state, false, nil
	}
	if halted, err := r.flush(ctx); err != nil || halted {
		return state, halted, err
	}
	if err := r.acks.Refresh(ctx); err != nil {
		return state, false, fmt.Errorf("read the commits of the dead letters: %w", err)
	}
	return r.acks.Classify(rec), false, nil
}

// selectForBatch returns the record to batch for rec, classified state, and tallies it:
// rec itself to replay, or (marked in replayMode.carry) to carry forward when --reason or
// --from does not select it; a copy without value (withoutValue) to skip it, which writes
// nothing and moves the txn past it: another pipeline's dead letter, an orphan, or a
// duplicate (an old dead letter with an exact copy later in the partition, in sup, or
// one whose dlq.DedupeKey is in seen). A real dead letter without a later copy adds its
// key to seen.
func (r *replayer) selectForBatch(rec *kgo.Record, state dlq.AckState, sup map[int64]bool, seen map[string]bool) *kgo.Record {
	sum := &r.mode.sum
	if !r.ours(rec) {
		// Another pipeline's dead letter (pipelines may share a DLQ topic): not ours
		// to replay. It is passed on without a value, so it writes nothing and the
		// txn moves past it, like past a tombstone.
		sum.OtherPipelines++
		return withoutValue(rec)
	}
	sum.Read++
	add := rec
	key := dlq.DedupeKey(rec)
	switch {
	case state == dlq.AckOrphan:
		// its flush never committed; the record was handled again by a later one
		sum.Orphans++
		add = withoutValue(rec)
	case sup[rec.Offset]:
		// an old dead letter with an exact copy later in this partition: that
		// copy is the one replayed
		sum.Duplicates++
		add = withoutValue(rec)
	case seen[key]:
		sum.Duplicates++
		add = withoutValue(rec)
	case !r.opts.selects(rec):
		r.mode.carry[rec] = true
	}
	if state == dlq.AckReal && !sup[rec.Offset] {
		seen[key] = true
	}
	return add
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
			for _, rec := range recs {
				delete(r.mode.carry, rec) // settled: the map must not pin the batch's fetch buffers
			}
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
