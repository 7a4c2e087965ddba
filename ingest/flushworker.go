package ingest

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/batcher"
)

// flushWorker runs the poll loop's flushes in a goroutine of its own, so that the loop
// keeps fetching and batching while a batch is routed, decoded, encoded, uploaded and
// committed: the poll loop never waits for an upload or a commit (docs/architecture.md,
// "Concurrency").
//
// Who owns what. The flush token (flushToken) owns the flush side of the pipeline (fl,
// cm, w.err, and the batch a job carries). At most one batch is in flight, besides the
// one being filled in the batcher:
//   - the poll loop (dispatch) acquires the token to take the next batch, waiting, when
//     one is still in flight, until the worker has settled it (that wait is
//     ingestd_flush_wait_seconds), and sends the token with the batch (flushJob.tok);
//   - from then on the worker goroutine owns the token and the batch; it releases the
//     token once the batch is settled (committed, held back for a retry, halted, or
//     failed for good);
//   - a rebalance callback, the drain and stop acquire and release the token on their
//     own goroutine, so they wait for the flush in flight.
//
// So the next batch is always taken after the previous one's failed records went back
// into the batcher ahead of their partitions' later records (the batcher's held-first
// rule). The batcher itself is guarded by batchMu, which every holder of the token may
// take briefly (never the other way round).
//
// The memory the batch in flight and the batcher hold together: the package
// documentation, Memory.
//
// The worker belongs to one session: startFlushWorker starts it, stop waits for the
// flush in flight and ends it. A permanent failure ends the poll loop through fail, and
// no further batch is handed over.
type flushWorker struct {
	p    *Pipeline
	ctx  context.Context // the flushes' context: flushContext, which outlives a SIGTERM by a grace
	fail func(error)     // ends the poll loop with a permanent flush failure (its cause)
	// live is the session's context (the poll loop's): once it ends (SIGTERM, or the kill -9
	// seam) no further batch is handed over; what is buffered is left to the drain (or
	// dropped by the abandon), as a synchronous loop would have left it.
	live context.Context
	jobs chan flushJob // at most one job: its sender holds the token until the worker releases it
	done chan struct{}
	// err is the permanent failure of the worker's last flush, if any: written and read
	// holding the flush token.
	err error
}

// flushJob is one batch handed to the worker (or, with progress, a txn-only commit of the
// progress made without a table: recordProgressLocked), with the flush token.
type flushJob struct {
	tok      flushToken // the worker releases it once the job is settled
	recs     []*kgo.Record
	sizes    []int64 // sizes[i] is recs[i]'s budget size, in bytes (batcher.Take's buffer: valid while the token is held)
	trigger  batcher.Trigger
	now      time.Time // when the batch was taken
	progress bool
}

// startFlushWorker starts the session's flush worker; its flushes run with ctx, a
// permanent failure calls fail, and no batch is handed over once live has ended.
func (p *Pipeline) startFlushWorker(ctx, live context.Context, fail func(error)) *flushWorker {
	w := &flushWorker{p: p, ctx: ctx, live: live, fail: fail, jobs: make(chan flushJob, 1), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *flushWorker) run() {
	defer close(w.done)
	for job := range w.jobs {
		w.flush(job)
		w.p.releaseFlush(job.tok) // acquired by dispatch, which handed it over with the job
	}
}

// flush runs one job, holding the flush token (job.tok).
func (w *flushWorker) flush(job flushJob) {
	p := w.p
	if h := p.hooks.beforeFlush; h != nil {
		h(job.recs)
	}
	var err error
	if job.progress {
		err = p.recordProgressLocked(w.ctx, job.now)
	} else {
		err = p.flushTakenLocked(w.ctx, job.recs, job.sizes, job.trigger, job.now)
	}
	p.batchMu.Lock()
	p.publishProgressLocked()
	p.wakePollLocked() // the batcher's deadline may have moved (holds, releases, progress)
	p.batchMu.Unlock()
	if err != nil {
		w.err = err
		w.fail(err)
	}
}

// dispatch hands the batch due at now to the worker, first waiting for the flush in
// flight to settle (backpressure: the poll loop stops adding records while a full batch
// waits). With progress, it hands over a txn-only commit of the progress made without a
// table instead, if that is still due once the token is held. It does nothing when
// nothing is due any more, after the worker failed for good, or once the session has
// ended (live: the flush in flight settled while the loop waited; a SIGTERM or a kill -9
// arrived meanwhile, and the batch stays buffered for the drain or the abandon). Called
// by the poll loop without p.batchMu held (the loop unlocks it around dispatch).
func (w *flushWorker) dispatch(progress bool) {
	p := w.p
	start := time.Now()
	tok := p.acquireFlush()
	now := time.Now()
	p.m.FlushWait.WithLabelValues(p.cfg.Name).Observe(now.Sub(start).Seconds())
	if w.err != nil || w.live.Err() != nil {
		p.releaseFlush(tok)
		return
	}
	job := flushJob{tok: tok, now: now}
	p.batchMu.Lock()
	if progress {
		job.progress = p.progressPending && p.batch.Len() == 0 && !now.Before(p.progressDue)
	} else {
		job.recs, job.sizes, job.trigger = p.batch.Take(now, false)
	}
	p.batchMu.Unlock()
	if len(job.recs) == 0 && !job.progress {
		p.releaseFlush(tok)
		return
	}
	w.jobs <- job // the token goes with it: the worker releases it when the job is settled
}

// stop waits for the flush in flight to settle and ends the worker; no job is handed
// over after it.
func (w *flushWorker) stop() {
	tok := w.p.acquireFlush()
	close(w.jobs)
	w.p.releaseFlush(tok)
	<-w.done
}
