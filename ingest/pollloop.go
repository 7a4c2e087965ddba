package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/batcher"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
)

// maxPollRecords bounds the records of one poll (kgo.Client.PollRecords).
const maxPollRecords = 10_000

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
		fs := s.poll(lctx)
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
		var gone []topicPartition
		fs.EachError(func(t string, part int32, err error) {
			switch {
			case errors.Is(err, kerr.UnknownTopicID):
				if s.topicIDUnknown(topicPartition{t, part}, time.Now(), err) {
					gone = append(gone, topicPartition{t, part})
				}
			case !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
				p.observe(verdict{action: actRetry, stage: "fetch", err: err}, 1, "fetch error", "topic", t, "partition", part)
			}
		})
		p.lag.observe(fs)
		if len(s.unknownSince) > 0 {
			fs.EachPartition(func(fp kgo.FetchTopicPartition) {
				if fp.Err == nil {
					delete(s.unknownSince, topicPartition{fp.Topic, fp.Partition})
				}
			})
		}
		s.add(ctx, fs, w)
		if len(gone) > 0 {
			s.haltDeletedTopics(cl, w, gone)
		}
		cl.AllowRebalance()
	}
	return nil
}

// poll fetches records until the batcher's next deadline (or, with nothing buffered and
// progress made without a table pending, until progressDue), until the flush in flight
// settles (wakePollLocked), or until lctx ends. Rebalances wait from its return until
// the loop's AllowRebalance (kgo.BlockRebalanceOnPoll).
func (s *session) poll(lctx context.Context) kgo.Fetches {
	p := s.p
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
	fs := s.cl.PollRecords(pollCtx, maxPollRecords)
	p.batchMu.Lock()
	p.wakePoll = nil
	p.batchMu.Unlock()
	cancel()
	return fs
}

// add buffers the records of fs (not those of halted partitions) and hands every batch
// that fills up to the worker w, waiting for the batch in flight first (backpressure);
// then it hands over what is due (aged, a partition's backoff ended) or the progress
// made without a table that is due to be recorded. Once ctx (the session) has ended, a
// full batch is not handed over and the poll's remaining records are not buffered: they
// are read again from the txn after a restart.
func (s *session) add(ctx context.Context, fs kgo.Fetches, w *flushWorker) {
	p := s.p
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
}

// wakePollLocked ends the poll loop's current poll, if any, so that it recomputes its
// deadline from the batcher. batchMu held.
func (p *Pipeline) wakePollLocked() {
	if p.wakePoll != nil {
		p.wakePoll()
	}
}

// Runtime security errors (poll loop): brokers have been seen to report single spurious
// authorization failures around a re-authentication (kgo reports one on several polls in
// a burst), so a burst is not fatal; a failure still seen fatalGrace after the first one
// is. An authentication failure gets authGrace: after a password rotation the broker may
// know the new password before the password_file has it, and every reconnect re-reads the
// file. A poll that returns records forgets them; so does a quiet minute. At start-up
// every one of these is fatal at once.
const (
	fatalGrace  = 3 * time.Second
	authGrace   = 30 * time.Second
	fatalForget = time.Minute
)

// fatalWatch counts security failures seen by the poll loop (see fatalGrace).
type fatalWatch struct {
	first, last time.Time
	n           int
}

// observe records one failure at now and reports whether it is now fatal: still failing
// grace after the first one.
func (w *fatalWatch) observe(now time.Time, grace time.Duration) bool {
	if w.n > 0 && now.Sub(w.last) > fatalForget {
		w.n = 0
	}
	if w.n == 0 {
		w.first = now
	}
	w.n++
	w.last = now
	return (w.n >= 2 || grace == 0) && now.Sub(w.first) >= grace
}

// fetchErrors checks a poll's errors for security failures: it returns the
// *kafkaclient.SecurityError to fail the pipeline with once w says the failure persists, else
// nil (the poll loop logs and counts the errors as transient as before).
func (p *Pipeline) fetchErrors(fs kgo.Fetches, w *fatalWatch) error {
	var fatal error
	fs.EachError(func(t string, _ int32, err error) {
		need := ""
		if t != "" {
			need = "READ on topic " + t
		}
		if se := kafkaclient.AsSecurityError(p.cfg.Kafka, need, err); se != nil && fatal == nil {
			p.log.Warn("kafka security error", "err", se)
			grace := fatalGrace
			if p.hooks.fatalGrace > 0 {
				grace = p.hooks.fatalGrace
			}
			switch {
			case errors.Is(err, kerr.SaslAuthenticationFailed):
				grace = authGrace
			case errors.Is(err, kerr.FencedInstanceID):
				grace = 0 // kgo does not rejoin after a fence: reported once, fatal at once
			}
			if w.observe(time.Now(), grace) {
				fatal = se
			}
		}
	})
	if fatal == nil && fs.NumRecords() > 0 {
		w.n = 0
	}
	return fatal
}

// ReasonTopicDeleted is the halt reason of a partition whose topic the broker has not
// known by the id the consumer reads it with for unknownTopicGrace (haltDeletedTopics).
const ReasonTopicDeleted = "topic_deleted"

// unknownTopicGrace is how long a partition's fetches must answer UNKNOWN_TOPIC_ID before
// its topic counts as deleted: a topic just created answers it for a moment, until its
// leader learns of it.
const unknownTopicGrace = 10 * time.Second

// topicIDUnknown notes that partition k's fetch answered err, UNKNOWN_TOPIC_ID, at now,
// logging the first such answer, and reports whether the answers have lasted
// unknownTopicGrace. Poll loop only.
func (s *session) topicIDUnknown(k topicPartition, now time.Time, err error) bool {
	since, seen := s.unknownSince[k]
	if !seen {
		if s.unknownSince == nil {
			s.unknownSince = map[topicPartition]time.Time{}
		}
		s.unknownSince[k] = now
		s.p.observe(verdict{action: actRetry, stage: "fetch", err: err}, 1, "fetch error: the broker does not know the topic's id (deleted, or just created); the partition halts if this lasts",
			"topic", k.topic, "partition", k.partition, "grace", unknownTopicGrace.String())
		return false
	}
	return now.Sub(since) >= unknownTopicGrace
}

// haltDeletedTopics halts the partitions of gone, whose fetches have answered
// UNKNOWN_TOPIC_ID for unknownTopicGrace: their topic was deleted, perhaps created again under its
// name, and the client never reads it again. Their fetches are paused at once (the
// client would retry them without end), what is buffered is flushed first (the deleted
// topic's records read before the deletion land in the table), then they halt with
// ReasonTopicDeleted: reading a topic created again from the old topic's txn offsets
// would skip its first records (docs/operations.md, "A topic created again"). Partitions
// already halted are left as they are. Called by the poll loop without p.batchMu held.
func (s *session) haltDeletedTopics(cl *kgo.Client, w *flushWorker, gone []topicPartition) {
	p := s.p
	p.batchMu.Lock()
	pause := map[string][]int32{}
	var fresh []topicPartition
	for _, k := range gone {
		if _, h := p.halted[k]; !h && !slices.Contains(fresh, k) {
			fresh = append(fresh, k)
			pause[k.topic] = append(pause[k.topic], k.partition)
		}
	}
	p.batchMu.Unlock()
	if len(fresh) == 0 {
		return
	}
	cl.PauseFetchPartitions(pause)
	w.dispatch(false)
	tok := p.acquireFlush() // the flush just dispatched has settled
	halts := make([]HaltedPartition, len(fresh))
	for i, k := range fresh {
		next, _ := p.lag.nextOf(k)
		halts[i] = HaltedPartition{Topic: k.topic, Partition: k.partition, Offset: next, Reason: ReasonTopicDeleted,
			Message: fmt.Sprintf("topic %s was deleted while the pipeline read its partition %d (the broker no longer knows the topic's id); "+
				"if it was created again under its name, reading it from the table's txn offsets would skip its first records. "+
				"Fix: stop ingestd; if the topic was created again, run ingestd table reset-offsets --config PIPELINE.yaml --topic %s --to-earliest; "+
				"if it is gone for good, remove it from the pipeline's kafka.topics; then start ingestd",
				k.topic, k.partition, k.topic)}
	}
	p.batchMu.Lock()
	p.applyHalts(halts, "pipeline halted: a source topic was deleted")
	p.batchMu.Unlock()
	p.releaseFlush(tok)
}
