package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
			p.observe(verdict{action: actFatal, err: err}, 1, "pipeline failed")
			p.status.set(StateFailed, err) // after the log line and ingestd_pipeline_failures_total
		} else {
			p.status.set(StateStopped, nil)
		}
	}()
	s, err := p.start(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Stopped (SIGTERM) while starting: nothing was consumed, so nothing is left to
			// flush; a stop, not a failure.
			p.log.Info("pipeline stopped while starting", "err", err)
			return nil
		}
		return err
	}
	defer s.close()
	// Background maintenance (ingest/maintain) runs beside the loop, off the commit path;
	// it stops when Run returns.
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

// startMaintenance starts (or joins) the background maintenance of the pipeline's table
// in its registry (Deps.Maintainers), when the pipeline has a maintenance block; the
// returned stop leaves it (maintain.Registry.Start).
func (p *Pipeline) startMaintenance(ctx context.Context) (stop func()) {
	return p.maintainers.Start(ctx, p.cfg, p.deps.Table.Store(), p.log, p.m.Maintenance)
}

// session is one run of a pipeline after a successful start: the Kafka clients it
// made, which close closes.
type session struct {
	p   *Pipeline
	cl  *kgo.Client // group consumer; also the advisory offset committer
	dlq *kgo.Client // dead-letter producer; nil without a dead-letter topic
	// waitWarn fires the warning about a first assignment that is late (awaitAssignment).
	waitWarn *time.Timer
	// unknownSince is when each partition's fetches began to answer UNKNOWN_TOPIC_ID, until
	// one answers without an error (topicIDUnknown); poll loop only.
	unknownSince map[topicPartition]time.Time
}

// close closes the consumer first (leaving the group runs the revoke callback, whose
// flush may still produce dead letters), then the dead-letter producer.
func (s *session) close() {
	if s.waitWarn != nil {
		s.waitWarn.Stop()
	}
	s.cl.Close()
	if s.dlq != nil {
		s.dlq.Close()
	}
}

// drain is the shutdown (SIGTERM): once the loop's flush in flight has settled, flush and
// commit what is buffered, retrying transient failures for at most shutdownFlushTimeout
// (ctx has ended; its values are kept).
func (s *session) drain(ctx context.Context) error {
	p := s.p
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownFlushTimeout)
	defer cancel()
	tok := p.acquireFlush() // the loop's flush worker has stopped: nothing is in flight
	ferr := p.drainLocked(sctx)
	p.releaseFlush(tok)
	// The advisory offset commits of the last flushes are answered before close leaves
	// the group (else the client warns of an answer after the session ended).
	p.cm.commits.wait(commitWaitOnStop)
	if ferr != nil {
		return fmt.Errorf("flush on shutdown: %w", ferr)
	}
	p.log.Info("pipeline stopped")
	return nil
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
