package ingest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/ingest/decode"
)

// DeadLetterReasons are the values of the ingestd.error.reason header that ingestd writes
// (DESIGN.md §3, "Dead letters"), sorted; `replay --reason` accepts these.
var DeadLetterReasons = []string{
	decode.ReasonBadMagic, decode.ReasonDecodeError, decode.ReasonNotNullViolation,
	decode.ReasonSchemaMismatch, decode.ReasonSchemaNotFound, decode.ReasonSchemaParseError,
	decode.ReasonTooShort, decode.ReasonTrailingBytes, decode.ReasonTruncated, decode.ReasonUnsupportedType,
}

// ReplayBound is one end of a replay's range: a dead-letter topic offset, applied to each
// DLQ partition, or a record timestamp (dead letters keep their source record's timestamp,
// and carried-forward records keep theirs). Exactly one of the two is meaningful: Time
// when it is not zero, else Offset.
type ReplayBound struct {
	Offset int64
	Time   time.Time
}

// IsTime reports whether the bound is a timestamp.
func (b ReplayBound) IsTime() bool { return !b.Time.IsZero() }

func (b ReplayBound) String() string {
	if b.IsTime() {
		return b.Time.Format(time.RFC3339Nano)
	}
	return strconv.FormatInt(b.Offset, 10)
}

// ParseReplayBound parses OFFSET (a non-negative integer) or TIME (RFC 3339, e.g.
// 2026-11-29T10:00:00Z). Errors name the value and both accepted forms.
func ParseReplayBound(s string) (ReplayBound, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return ReplayBound{}, fmt.Errorf("parse bound %q: an offset is 0 or more", s)
		}
		return ReplayBound{Offset: n}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return ReplayBound{}, fmt.Errorf("parse bound %q: want a DLQ offset (e.g. 1200) or an RFC 3339 time (e.g. 2026-11-29T10:00:00Z)", s)
	}
	if t.IsZero() {
		return ReplayBound{}, fmt.Errorf("parse bound %q: the zero time selects nothing useful", s)
	}
	return ReplayBound{Time: t}, nil
}

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// MaxReplays is how many times a record may be re-dead-lettered by replays before it
	// goes to <dlq>.parked instead (default 3).
	MaxReplays int
	// DryRun decodes and checks every record but produces and commits nothing.
	DryRun bool
	// Reasons, when not empty, selects the dead letters whose ingestd.error.reason is one
	// of these (DeadLetterReasons); the others are carried forward.
	Reasons []string
	// From, when set, selects the dead letters at DLQ offset >= From.Offset (in each
	// partition) or with record timestamp >= From.Time; the others are carried forward.
	From *ReplayBound
	// Until, when set, stops the replay in each DLQ partition before the first record (after
	// the replay's position) at offset >= Until.Offset or with timestamp >= Until.Time: it is
	// exclusive, and that record and everything after it stay for a later replay.
	Until *ReplayBound
	// ProgressEvery is the interval of the "replay progress" Info log lines (default 5s).
	ProgressEvery time.Duration
}

// filtered reports whether some records may be carried forward.
func (o ReplayOptions) filtered() bool { return len(o.Reasons) > 0 || o.From != nil }

// Validate checks the options: known reasons, and a From that is before Until when both
// are offsets or both are times. Errors name the flag (--reason, --from, --until).
func (o ReplayOptions) Validate() error {
	var errs []error
	for _, r := range o.Reasons {
		if !slices.Contains(DeadLetterReasons, r) {
			errs = append(errs, fmt.Errorf("--reason %q is not a dead-letter reason; use one of %s", r, strings.Join(DeadLetterReasons, ", ")))
		}
	}
	if o.MaxReplays < 0 {
		errs = append(errs, fmt.Errorf("--max-replays %d: must be at least 1", o.MaxReplays))
	}
	if f, u := o.From, o.Until; f != nil && u != nil && f.IsTime() == u.IsTime() {
		if (f.IsTime() && !f.Time.Before(u.Time)) || (!f.IsTime() && f.Offset >= u.Offset) {
			errs = append(errs, fmt.Errorf("--from %s is not before --until %s (--until is exclusive): the range is empty", f, u))
		}
	}
	if u := o.Until; u != nil && !u.IsTime() && u.Offset == 0 {
		errs = append(errs, errors.New("--until 0 stops before the first record (--until is exclusive): the range is empty"))
	}
	return errors.Join(errs...)
}

// selects reports whether a dead letter is selected by --reason and --from.
func (o ReplayOptions) selects(r *kgo.Record) bool {
	if len(o.Reasons) > 0 {
		reason, _ := header(r, HeaderReason)
		if !slices.Contains(o.Reasons, reason) {
			return false
		}
	}
	if f := o.From; f != nil {
		if f.IsTime() {
			return !r.Timestamp.Before(f.Time)
		}
		return r.Offset >= f.Offset
	}
	return true
}

// stopOffset is where the replay stops in one DLQ partition: the first offset it leaves
// alone. recs are the partition's records in offset order, end its end offset at the start
// of the replay, next the first offset after the replay's txn position.
func (o ReplayOptions) stopOffset(recs []*kgo.Record, end, next int64) int64 {
	u := o.Until
	switch {
	case u == nil:
		return end
	case !u.IsTime():
		return min(end, u.Offset)
	}
	for _, r := range recs {
		if r.Offset >= next && !r.Timestamp.Before(u.Time) {
			return r.Offset
		}
	}
	return end
}

// ReasonOutcome counts what a replay did with the dead letters of one reason (the
// ingestd.error.reason they carried in the dead-letter topic).
type ReasonOutcome struct {
	Landed       int `json:"landed"`
	DeadLettered int `json:"dead_lettered"`
	Parked       int `json:"parked"`
	Carried      int `json:"carried"`
}

// ReplaySummary is what a replay did (or, for a dry run, would do).
type ReplaySummary struct {
	DeadLetterTopic string                    `json:"dead_letter_topic"`
	Read            int                       `json:"read"`             // DLQ records after the replay's txn position, before its stop point
	AlreadyReplayed int                       `json:"already_replayed"` // DLQ records at or before it
	Duplicates      int                       `json:"duplicates"`       // copies of a dead letter already replayed or read earlier (same ingestd.txn.app_id and version; the DLQ is at-least-once)
	Orphans         int                       `json:"orphans"`          // dead letters whose flush never committed (another commit handled the record): skipped
	Pending         int                       `json:"pending"`          // dead letters whose commit is not in the table yet: the partition stopped before the first (also in Remaining)
	OtherPipelines  int                       `json:"other_pipelines"`  // dead letters of other pipelines sharing the topic, skipped
	Landed          int                       `json:"landed"`           // rows written to the table
	DeadLettered    map[string]int            `json:"dead_lettered"`    // re-dead-lettered, by the reason they failed with now
	Parked          int                       `json:"parked"`           // sent to <dlq>.parked (past MaxReplays)
	Carried         int                       `json:"carried"`          // not selected by --reason/--from: re-produced unchanged to the DLQ
	Remaining       int                       `json:"remaining"`        // at or past --until or a pending dead letter: left in place for a later replay
	ByReason        map[string]*ReasonOutcome `json:"by_reason"`        // outcomes by the reason the records were dead-lettered with
	Halted          []HaltedPartition         `json:"halted,omitempty"` // a halt policy stopped the replay here
	DryRun          bool                      `json:"dry_run"`
	// ParkedTopicMissing (dry run only): some records would be parked, and <dlq>.parked
	// does not exist yet.
	ParkedTopicMissing bool `json:"parked_topic_missing,omitempty"`
}

func (s *ReplaySummary) reason(r *kgo.Record) *ReasonOutcome {
	name, _ := header(r, HeaderReason)
	return s.reasonNamed(name)
}

func (s *ReplaySummary) reasonNamed(name string) *ReasonOutcome {
	o := s.ByReason[name]
	if o == nil {
		o = &ReasonOutcome{}
		s.ByReason[name] = o
	}
	return o
}

// ErrParkedTopicMissing: a record must be parked and <dlq>.parked does not exist.
var ErrParkedTopicMissing = errors.New("parked topic missing")

// replayRun is the replay state a Pipeline carries while it replays.
type replayRun struct {
	dlqTopic   string
	maxReplays int
	dryRun     bool
	sum        ReplaySummary
	landed     map[string]bool      // originalKey of every record this run committed to the table
	carry      map[*kgo.Record]bool // records to carry forward: flushOnce re-produces them before its commit
	carryCl    *kgo.Client          // producer of carried records, to an explicit partition
	parkedOK   bool                 // <dlq>.parked was seen to exist
	adm        *kadm.Client
	acks       *ackIndex // the commits that acknowledge the dead letters read (classify)

	progressEvery time.Duration
	lastProgress  time.Time
}

// parkedTopic is where records go after MaxReplays failed replays.
func parkedTopic(dlq string) string { return dlq + ".parked" }

// tally adds one flush's outcome to the summary: landing maps each landed original to
// the reason its dead letter carried.
func (r *replayRun) tally(landing map[string]string, dlq []deadLetter, carried []*kgo.Record, halts []HaltedPartition) {
	r.sum.Landed += len(landing)
	for _, reason := range landing {
		r.sum.reasonNamed(reason).Landed++
	}
	for _, d := range dlq {
		if r.parks(d) {
			r.sum.Parked++
			r.sum.reason(d.rec).Parked++
		} else {
			r.sum.DeadLettered[d.reason]++
			r.sum.reason(d.rec).DeadLettered++
		}
	}
	for _, c := range carried {
		r.sum.Carried++
		r.sum.reason(c).Carried++
	}
	r.sum.Halted = append(r.sum.Halted, halts...)
}

// parks reports whether a record that failed again goes to <dlq>.parked.
func (r *replayRun) parks(d deadLetter) bool { return replayCount(d.rec)+1 > r.maxReplays }

// beforeCommit runs in flushOnce before the dead letters are produced: when one of them
// must be parked, <dlq>.parked must exist. A missing topic fails the replay (permanent:
// nothing of this flush is produced or committed, so a rerun resumes here); a failed
// metadata request is transient.
func (r *replayRun) beforeCommit(ctx context.Context, dlq []deadLetter) error {
	n := 0
	for _, d := range dlq {
		if r.parks(d) {
			n++
		}
	}
	if n == 0 || r.parkedOK {
		return nil
	}
	ok, err := r.parkedExists(ctx)
	if err != nil {
		return &transientError{"look up " + parkedTopic(r.dlqTopic), err}
	}
	if !ok {
		t := parkedTopic(r.dlqTopic)
		return fmt.Errorf("replay: %d record(s) failed more than %d replays and go to %q, which does not exist: create it "+
			"(kafka-topics.sh --bootstrap-server BROKER --create --topic %s) and run the replay again; this batch was not written, "+
			"earlier batches are committed: %w", n, r.maxReplays, t, t, ErrParkedTopicMissing)
	}
	r.parkedOK = true
	return nil
}

func (r *replayRun) parkedExists(ctx context.Context) (bool, error) {
	t := parkedTopic(r.dlqTopic)
	ends, err := r.adm.ListEndOffsets(ctx, t)
	if err != nil {
		return false, err
	}
	o, ok := ends.Lookup(t, 0)
	return ok && o.Err == nil, nil
}

// carryRecord is the carried-forward copy of a dead letter: same topic and partition,
// key, value, headers (so the same ingestd.replay.count) and record timestamp, except the
// ack headers, which name the replay commit that moves the DLQ partition's txn past r.
func carryRecord(r *kgo.Record, a ack) *kgo.Record {
	return &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value,
		Headers: withAck(r.Headers, a), Timestamp: r.Timestamp}
}

// produceCarried re-produces the carried records and waits for every acknowledgement
// (bounded like produceDLQ); flushOnce calls it before the commit that moves the txn past
// them, so a crash in between leaves only an extra copy, an orphan by its ack headers
// (see classify) once a later replay commits past the original under another id.
func (r *replayRun) produceCarried(ctx context.Context, recs []*kgo.Record, ackOf func(*kgo.Record) ack) error {
	if len(recs) == 0 {
		return nil
	}
	out := make([]*kgo.Record, len(recs))
	for i, rec := range recs {
		out[i] = carryRecord(rec, ackOf(rec))
	}
	dctx, cancel := context.WithTimeout(ctx, dlqDeliveryTimeout)
	defer cancel()
	if err := r.carryCl.ProduceSync(dctx, out...).FirstErr(); err != nil {
		if dctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("not acknowledged within %v: %w", dlqDeliveryTimeout, err)
		}
		return &transientError{"carry forward to " + r.dlqTopic, err}
	}
	return nil
}

// progress logs a "replay progress" line when ProgressEvery has passed since the last
// one, or always when force is set.
func (r *replayRun) progress(log *slog.Logger, part int32, offset, end, stop int64, force bool) {
	now := time.Now()
	if !force && now.Sub(r.lastProgress) < r.progressEvery {
		return
	}
	r.lastProgress = now
	re := 0
	for _, n := range r.sum.DeadLettered {
		re += n
	}
	log.Info("replay progress", "topic", r.dlqTopic, "partition", part, "offset", offset, "high_watermark", end, "stop", stop,
		"read", r.sum.Read, "landed", r.sum.Landed, "dead_lettered", re, "parked", r.sum.Parked, "carried", r.sum.Carried,
		"duplicates", r.sum.Duplicates, "orphans", r.sum.Orphans, "pending", r.sum.Pending, "dry_run", r.dryRun)
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

// dedupeKey identifies one real dead letter: the txn appId and version that acknowledge
// it (ingestd.txn.app_id, ingestd.txn.version), unique but for exact copies (producer
// retries, an operator re-producing records). A carried-forward copy names the replay's
// appId and DLQ offset, so it has its own key. A dead letter without these headers
// (written before them) falls back to its original topic, partition and offset and its
// replay count.
func dedupeKey(r *kgo.Record) string {
	if a, _, ok := ackOfRecord(r); ok {
		return fmt.Sprintf("txn:%s@%d", a.txnAppID, a.txnVersion)
	}
	return fmt.Sprintf("legacy:%s#%d", originalKey(r), replayCount(r))
}

// copyIdentity identifies a record's exact content: key, value, headers (in order) and
// timestamp. A carried-forward record, and a producer retry, share it with their source;
// two dead-letterings of one original do not (ingestd.error.time differs).
func copyIdentity(r *kgo.Record) uint64 {
	h := fnv.New64a()
	var b [8]byte
	put := func(p []byte) {
		n := uint64(len(p))
		if p == nil {
			n = ^uint64(0)
		}
		for i := range b {
			b[i] = byte(n >> (8 * i))
		}
		h.Write(b[:])
		h.Write(p)
	}
	put(r.Key)
	put(r.Value)
	for _, x := range r.Headers {
		put([]byte(x.Key))
		put(x.Value)
	}
	put([]byte(strconv.FormatInt(r.Timestamp.UnixMilli(), 10)))
	return h.Sum64()
}

// superseded returns the offsets of the dead letters without ack headers (written before
// them; of one DLQ partition, in offset order) that have an exact copy later in the same
// partition: their old carry-forward rule, where the copy is the live one. Records with
// ack headers never take part: their carried copies have their own dedupeKey, and a copy
// left by a crashed replay is an orphan (ackIndex.classify).
func superseded(recs []*kgo.Record) map[int64]bool {
	out := map[int64]bool{}
	later := map[uint64]bool{}
	for i := len(recs) - 1; i >= 0; i-- {
		if _, _, ok := ackOfRecord(recs[i]); ok {
			continue
		}
		id := copyIdentity(recs[i])
		if later[id] {
			out[recs[i].Offset] = true
		}
		later[id] = true
	}
	return out
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
// <app_id>-replay-<dlq topic>-<partition>) up to the end offsets at start (or, with
// opts.Until, up to that point in each partition), decodes each record's original value
// with its own schema id, checks it against the table's current schema under the
// pipeline's policy, and writes what fits, exactly once: the replay's txn versions move in
// the same Delta commits, and copies of a dead letter already replayed are skipped
// (dedupeKey). Each dead letter names the commit meant to acknowledge it (ingestd.commit.id,
// ingestd.txn.app_id, ingestd.txn.version); the Delta log decides (ackIndex.classify): an
// orphan (its flush never committed, a later flush handled the record) is skipped, a
// pending one (no commit has moved its txn yet) stops its DLQ partition before it. What
// still fails is re-dead-lettered (see deadLetterRecord). A record that a halt policy
// refuses stops the replay there.
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
func Replay(ctx context.Context, cfg *Config, deps Deps, opts ReplayOptions) (*ReplaySummary, error) {
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
	p := NewPipeline(cfg, deps)
	dlq := cfg.DeadLetter.Topic
	p.replay = &replayRun{dlqTopic: dlq, maxReplays: opts.MaxReplays, dryRun: opts.DryRun, landed: map[string]bool{},
		carry: map[*kgo.Record]bool{}, progressEvery: opts.ProgressEvery, lastProgress: time.Now(),
		sum: ReplaySummary{DeadLetterTopic: dlq, DeadLettered: map[string]int{}, ByReason: map[string]*ReasonOutcome{}, DryRun: opts.DryRun}}
	if err := p.checkTable(ctx); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Kafka.Brokers...),
		// No RecordDeliveryTimeout: kgo measures it from each record's timestamp, and a
		// dead letter keeps its (old) source timestamp; produceDLQ bounds delivery instead.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.WithLogger(kgoLogger{p.log})}, deps.kafkaOpts()...)...)
	if err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	defer cl.Close()
	p.cl = cl
	p.replay.adm = kadm.NewClient(cl)
	if !opts.DryRun && opts.filtered() {
		// Carried records go back to the partition they were read from.
		cc, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Kafka.Brokers...),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.WithLogger(kgoLogger{p.log.With("client", "carry-forward producer")})}, deps.kafkaOpts()...)...)
		if err != nil {
			return nil, fmt.Errorf("create kafka client: %w", err)
		}
		defer cc.Close()
		p.replay.carryCl = cc
	}
	ends, err := p.replay.adm.ListEndOffsets(ctx, dlq)
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
	txns := map[string]int64{}
	if snap, err := deps.Table.Snapshot(ctx); err == nil {
		txns = snap.Txns
	} else if !isNotFound(err) {
		return nil, fmt.Errorf("read table: %w", err)
	}

	// Read every DLQ partition from its start to its end offset now: records at or before
	// the replay's txn version only feed the duplicate check, records past the stop point
	// only the copy check (superseded).
	byPart, err := readToEnd(ctx, cl, cfg.Kafka, dlq, ends[dlq], p.log)
	if err != nil {
		return nil, err
	}
	// The commits that acknowledge them (ingestd.commit.id), read once.
	var all []*kgo.Record
	for _, recs := range byPart {
		for _, r := range recs {
			if p.ours(r) {
				all = append(all, r)
			}
		}
	}
	if p.replay.acks, err = newAckIndex(ctx, deps.Table.Store(), all); err != nil {
		return nil, fmt.Errorf("read the commits of the dead letters: %w", err)
	}
	sum, err := p.replayParts(ctx, opts, byPart, ends[dlq], txns)
	if err == nil && sum.DryRun && sum.Parked > 0 {
		if ok, lerr := p.replay.parkedExists(ctx); lerr == nil && !ok {
			sum.ParkedTopicMissing = true
		}
	}
	return sum, err
}

// ours reports whether a DLQ record is this pipeline's (pipelines may share a DLQ topic).
func (p *Pipeline) ours(r *kgo.Record) bool {
	name, ok := header(r, HeaderPipeline)
	return !ok || name == p.cfg.Name
}

// replayParts replays the records read, partition by partition (see Replay). Each of our
// dead letters is first classified by its acknowledging commit (ackIndex.classify):
// orphans are skipped, a pending one stops its partition, real ones are deduplicated by
// dedupeKey against every real record already replayed (below the txn position, in
// every partition) or read earlier in this run.
func (p *Pipeline) replayParts(ctx context.Context, opts ReplayOptions, byPart map[int32][]*kgo.Record, ends map[int32]kadm.ListedOffset, txns map[string]int64) (*ReplaySummary, error) {
	dlq, rr := p.replay.dlqTopic, p.replay
	if rr.acks == nil {
		rr.acks = &ackIndex{}
	}
	parts := make([]int32, 0, len(byPart))
	for part := range byPart {
		parts = append(parts, part)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	sup := map[int32]map[int64]bool{}
	for _, part := range parts {
		sup[part] = superseded(byPart[part]) // dead letters without ack headers only
	}
	// Real dead letters already dealt with by earlier replays, in every partition, before
	// any is processed (a copy may sit in another partition than the original dead letter).
	// Other pipelines' dead letters never count, nor orphans, nor old records that have a
	// later exact copy (their copy is the live one).
	seen := map[string]bool{}
	next := func(part int32) int64 {
		if v, ok := txns[p.txnAppID(dlq, part)]; ok {
			return v + 1
		}
		return 0
	}
	for _, part := range parts {
		for _, r := range byPart[part] {
			if r.Offset < next(part) {
				rr.sum.AlreadyReplayed++
				if p.ours(r) && !sup[part][r.Offset] && rr.acks.classify(r) == ackReal {
					seen[dedupeKey(r)] = true
				}
			}
		}
	}
	flush := func() (stop bool, err error) {
		p.mu.Lock()
		err = p.flushLocked(ctx)
		p.mu.Unlock()
		return len(rr.sum.Halted) > 0, err
	}
	for _, part := range parts {
		recs, from := byPart[part], next(part)
		end := ends[part].Offset
		stop := opts.stopOffset(recs, end, from)
		if stop < end {
			p.log.Info("replay stops early in this partition (--until)", "topic", dlq, "partition", part, "stop", stop, "high_watermark", end, "until", opts.Until.String())
		}
		last := from - 1
		pendingAt := int64(-1)
		for i, r := range recs {
			if r.Offset < from {
				continue
			}
			if r.Offset >= stop {
				if p.ours(r) {
					rr.sum.Remaining++
				}
				continue
			}
			rec := r
			state := ackReal
			if p.ours(r) {
				state = rr.acks.classify(r)
				if state == ackPending {
					// Its commit may be this run's own (a copy carried by a replay that
					// crashed): flush what is before it and look at the log again.
					if halted, err := flush(); err != nil || halted {
						return &rr.sum, err
					}
					if err := rr.acks.refresh(ctx); err != nil {
						return &rr.sum, fmt.Errorf("read the commits of the dead letters: %w", err)
					}
					state = rr.acks.classify(r)
				}
				if state == ackPending {
					// Its flush may still be in flight: the txn must not pass it.
					pendingAt, stop = r.Offset, r.Offset
					for _, rest := range recs[i:] {
						if rest.Offset >= end || !p.ours(rest) {
							continue
						}
						rr.sum.Remaining++
						if rest.Offset < opts.stopOffset(recs, end, from) && rr.acks.classify(rest) == ackPending {
							rr.sum.Pending++
						}
					}
					break
				}
			}
			if !p.ours(r) {
				// Another pipeline's dead letter (pipelines may share a DLQ topic): not ours
				// to replay. It is passed on without a value, so it writes nothing and the
				// txn moves past it, like past a tombstone.
				rr.sum.OtherPipelines++
				rec = withoutValue(r)
			} else {
				rr.sum.Read++
				key := dedupeKey(r)
				switch {
				case state == ackOrphan:
					// its flush never committed; the record was handled again by a later one
					rr.sum.Orphans++
					rec = withoutValue(r)
				case sup[part][r.Offset]:
					// an old dead letter with an exact copy later in this partition: that
					// copy is the one replayed
					rr.sum.Duplicates++
					rec = withoutValue(r)
				case seen[key]:
					rr.sum.Duplicates++
					rec = withoutValue(r)
				case !opts.selects(r):
					rr.carry[r] = true
				}
				if state == ackReal && !sup[part][r.Offset] {
					seen[key] = true
				}
			}
			last = r.Offset
			p.mu.Lock()
			full := p.batch.Add(rec, int64(len(rec.Key)+len(rec.Value)), time.Now())
			var ferr error
			if full {
				ferr = p.flushLocked(ctx)
			}
			p.mu.Unlock()
			if ferr != nil {
				return &rr.sum, ferr
			}
			if len(rr.sum.Halted) > 0 {
				return &rr.sum, nil
			}
			rr.progress(p.log, part, r.Offset, end, stop, false)
		}
		if halted, err := flush(); err != nil || halted {
			return &rr.sum, err
		}
		if pendingAt >= 0 {
			p.log.Warn("replay stops before a pending dead letter: the flush that produced it has not committed yet "+
				"(it may be in flight, or its pipeline stopped before committing); run the replay again after the pipeline commits",
				"topic", dlq, "partition", part, "offset", pendingAt)
		}
		rr.progress(p.log, part, last, end, stop, true)
	}
	return &rr.sum, nil
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
// (exclusive) and returns the records by partition, in offset order. A security failure
// (fatalKafkaError, e.g. no READ on the topic) ends it with a *KafkaSecurityError naming
// k's principal.
func readToEnd(ctx context.Context, cl *kgo.Client, k KafkaConfig, topic string, ends map[int32]kadm.ListedOffset, log interface {
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
	// Without READ the broker answers fetches with errors kgo retries quietly, and the read
	// would end as "no more records": ask first (authorized operations, KIP-430).
	if err := checkRead(ctx, cl, k, topic); err != nil {
		return nil, err
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
		var fatal error
		fs.EachError(func(t string, part int32, err error) {
			if se := securityError(k, "READ on topic "+topic, err); se != nil && fatal == nil {
				fatal = se
			}
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				log.Warn("fetch error", "topic", t, "partition", part, "err", err)
			}
		})
		if fatal != nil {
			return nil, fatal
		}
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
