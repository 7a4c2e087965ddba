package deltawriter

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// foreground counts a table's Snapshot and Commit calls in flight. A background
// checkpoint pauses at each of its yields while any runs: on one core a commit would
// otherwise share the CPU with the checkpoint of a 10⁶-file table (about a second of
// CPU) and wait for its turns, which is what set the commit p99 on big tables
// (docs/performance.md, "Big tables"). The checkpoint goes on in the gaps between
// commits; a table commits at most every few hundred milliseconds, so it is delayed,
// never starved.
type foreground struct {
	n    atomic.Int32 // calls in flight; read without mu on the checkpoint's fast path
	mu   sync.Mutex
	idle chan struct{} // closed when n drops to 0; a new one when n rises from 0
}

// enter counts one call in; every enter is paired with one exit.
func (f *foreground) enter() {
	f.mu.Lock()
	if f.n.Add(1) == 1 {
		f.idle = make(chan struct{})
	}
	f.mu.Unlock()
}

// exit counts one call out and wakes the waiting checkpoint when none is left.
func (f *foreground) exit() {
	f.mu.Lock()
	if f.n.Add(-1) == 0 {
		close(f.idle)
	}
	f.mu.Unlock()
}

// wait returns when no call is in flight or ctx is done.
func (f *foreground) wait(ctx context.Context) {
	if f.n.Load() == 0 {
		return
	}
	f.mu.Lock()
	idle := f.idle
	busy := f.n.Load() > 0
	f.mu.Unlock()
	if !busy {
		return
	}
	select {
	case <-idle:
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

// idle reports whether no checkpoint is pending or being written.
func (c *checkpointer) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done == nil
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
