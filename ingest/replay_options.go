package ingest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/dlq"
)

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
	// of these (dlq.Reasons); the others are carried forward.
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
		if !slices.Contains(dlq.Reasons, r) {
			errs = append(errs, fmt.Errorf("--reason %q is not a dead-letter reason; use one of %s", r, strings.Join(dlq.Reasons, ", ")))
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
		reason, _ := dlq.Header(r, dlq.HeaderReason)
		if !slices.Contains(o.Reasons, reason) {
			return false
		}
	}
	if f := o.From; f != nil {
		if f.IsTime() {
			return !sourceTime(r).Before(f.Time)
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
		if o.untilStops(r, next) {
			return r.Offset
		}
	}
	return end
}

// untilStops reports whether a time --until stops the replay at r (read in offset order,
// the first such record of its partition is the stop point): r is at or past next, the
// first offset after the replay's txn position, and its timestamp is at or past --until.
func (o ReplayOptions) untilStops(r *kgo.Record, next int64) bool {
	u := o.Until
	return u != nil && u.IsTime() && r.Offset >= next && !sourceTime(r).Before(u.Time)
}

// sourceTime is the Kafka timestamp of the source record a dead letter r keeps
// (dlq.SourceTimestampMillis), which --from and --until TIME compare with: a dead letter's
// own record timestamp is when it was dead-lettered, and a carried copy keeps the header.
func sourceTime(r *kgo.Record) time.Time { return time.UnixMilli(dlq.SourceTimestampMillis(r)) }

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
	name, _ := dlq.Header(r, dlq.HeaderReason)
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
