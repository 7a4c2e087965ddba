package deltawriter

import (
	"context"
	"runtime"
	"sync"
)

// foreground counts a table's Snapshot and Commit calls in flight. A background
// checkpoint pauses at each of its yields until the calls in flight at that yield have
// returned: on one core a commit would otherwise share the CPU with the checkpoint of a
// 10⁶-file table (about a second of CPU) and wait for its turns, which is what set the
// commit p99 on big tables (docs/performance.md, "Big tables"). Calls that start while
// the checkpoint waits join the next cohort, which the checkpoint waits for only at its
// next yield: callers whose calls overlap, so that one is always in flight, delay the
// checkpoint by one call per yield and never starve it.
type foreground struct {
	mu  sync.Mutex
	cur *cohort // the cohort new calls join; nil when none has joined since the last seal
}

// cohort is a set of calls in flight; done is closed when the last one returns.
type cohort struct {
	n    int
	done chan struct{}
}

// enter counts one call in and returns its cohort, to hand to exit.
func (f *foreground) enter() *cohort {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil {
		f.cur = &cohort{done: make(chan struct{})}
	}
	f.cur.n++
	return f.cur
}

// exit counts one call of cohort c out and wakes the waiting checkpoint when none of c
// is left.
func (f *foreground) exit(c *cohort) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.n--; c.n == 0 {
		close(c.done)
		if f.cur == c {
			f.cur = nil
		}
	}
}

// wait returns when the calls in flight now have returned, or ctx is done. Calls that
// enter meanwhile start a new cohort.
func (f *foreground) wait(ctx context.Context) {
	f.mu.Lock()
	c := f.cur
	f.cur = nil
	f.mu.Unlock()
	if c == nil {
		return
	}
	select {
	case <-c.done:
	case <-ctx.Done():
	}
}

// checkpointer is the single owner of a table's background checkpoints
// (WithBackgroundCheckpoints). At most one goroutine writes them; it starts when a
// checkpoint falls due and exits when none is pending. A checkpoint that falls due while
// another is being written waits in a one-snapshot slot, where a newer one replaces it
// (a checkpoint is a full copy of the table state, so the newer one covers the older).
// Close stops it.
type checkpointer struct {
	mu      sync.Mutex
	pending *Snapshot          // newest due snapshot not being written yet
	done    chan struct{}      // closed when the owner goroutine exits; nil when none runs
	cancel  context.CancelFunc // cancels the owner goroutine's context
	closed  bool

	w checkpointWriter // owned by the goroutine
}

// submit hands snapshot s (immutable) to the owner goroutine, starting it if needed. It
// returns false when the checkpointer is closed; the caller then writes synchronously.
func (c *checkpointer) submit(ctx context.Context, t *Table, s *Snapshot) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.pending = s
	if c.done == nil {
		gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c.done, c.cancel = make(chan struct{}), cancel
		go c.run(gctx, t, c.done)
	}
	return true
}

func (c *checkpointer) run(ctx context.Context, t *Table, done chan struct{}) {
	for {
		c.mu.Lock()
		s := c.pending
		c.pending = nil
		if s == nil || ctx.Err() != nil {
			c.done = nil
			c.cancel()
			close(done)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		// Yield between steps, and stay out of the way of Snapshot and Commit calls: on
		// a single core the committing goroutine, back from an fsync, must not wait for
		// the checkpoint's turns.
		c.w.yield = func() {
			runtime.Gosched()
			t.fg.wait(ctx)
		}
		if err := c.w.write(ctx, t.store, s, t.opts.now()); err != nil {
			t.logf("write checkpoint", "version", s.Version, "err", err)
		} else if t.opts.afterCP != nil {
			t.opts.afterCP(ctx, t, s.Version)
		}
	}
}

// wait blocks until no background checkpoint is pending or being written, or ctx is
// done. When stop is set, no further checkpoint is accepted and, if ctx ends first, the
// pending one is dropped and the one being written is cancelled.
func (c *checkpointer) wait(ctx context.Context, stop bool) error {
	c.mu.Lock()
	if stop {
		c.closed = true
	}
	done := c.done
	c.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		if stop {
			c.mu.Lock()
			c.pending = nil
			if c.done == done {
				c.cancel()
			}
			c.mu.Unlock()
		}
		return ctx.Err()
	}
}
