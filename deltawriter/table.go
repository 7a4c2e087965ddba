package deltawriter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// Table is one Delta table. It caches the latest snapshot it has seen and advances it
// incrementally (new commits only). A Table is safe for concurrent use; commits from
// several Tables or processes on the same store are serialised by put-if-absent.
type Table struct {
	store storage.Store
	opts  options

	mu   sync.Mutex
	snap *Snapshot // latest known snapshot; Version -1 when the table does not exist
	// snapShared is set once snap has been handed out (Snapshot, a background
	// checkpoint): it is then immutable, and the next commit advances a copy of it.
	// Until then commits advance it in place, which spares copying every live file per
	// commit.
	snapShared bool
	cpw        checkpointWriter // checkpoints written inside Commit (under mu)

	cp checkpointer // background checkpoints (WithBackgroundCheckpoints)
	fg foreground   // Snapshot and Commit calls in flight, which background checkpoints let pass
}

type options struct {
	logger         *slog.Logger
	maxAttempts    int
	now            func() time.Time
	skipCheckpoint bool
	bgCheckpoint   bool
	afterCP        func(ctx context.Context, t *Table, version int64)
	onStaleHint    func(named int64)
	v2SidecarFiles int
}

// WithBackgroundCheckpoints makes Commit hand due checkpoints to one background goroutine
// per table instead of writing them before it returns, so that commit latency does not
// include them (BenchmarkCommitPath; docs/performance.md). The goroutine runs only while
// a checkpoint is pending; a checkpoint that falls due while another is being written
// waits, and a newer one replaces it (the newest state is always checkpointed, intervals
// may be skipped under load). Readers never depend on a checkpoint being present. Call
// Close (or WaitCheckpoints) before exiting.
func WithBackgroundCheckpoints() Option { return func(o *options) { o.bgCheckpoint = true } }

// WithAfterCheckpoint runs fn on the background checkpoint goroutine after each
// checkpoint it wrote (WithBackgroundCheckpoints; never on the commit path), with the
// checkpoint's version: log cleanup (maintenance.CleanupLog, PROTOCOL.md "Metadata
// Cleanup") runs there. Checkpoints written synchronously by Commit do not run it. fn
// reports its own errors; the next checkpoint runs it again.
func WithAfterCheckpoint(fn func(ctx context.Context, t *Table, version int64)) Option {
	return func(o *options) { o.afterCP = fn }
}

// WaitCheckpoints blocks until the background checkpoints handed out so far are written
// (or have failed; failures are logged).
func (t *Table) WaitCheckpoints() { _ = t.cp.wait(context.Background(), false) }

// Close stops background checkpoints: it waits for the one being written and the one
// pending, if any, and returns nil; when ctx ends first it drops the pending one,
// cancels the one being written and returns ctx.Err(). Commits after Close write their
// checkpoints synchronously. Close does nothing else: the Table stays usable.
func (t *Table) Close(ctx context.Context) error {
	if err := t.cp.wait(ctx, true); err != nil {
		return fmt.Errorf("close table %s: %w", t.store.URI(), err)
	}
	return nil
}

// Option configures a Table.
type Option func(*options)

// WithStaleLastCheckpoint calls fn (on the goroutine reading the snapshot) each time a
// full load of the log finds that _delta_log/_last_checkpoint names a checkpoint version
// that is missing or unreadable (PROTOCOL.md, "Last Checkpoint File"): the table is then
// recovered by listing the log, with a warning on the table's logger; fn counts it
// (ingestd_delta_last_checkpoint_stale_total).
func WithStaleLastCheckpoint(fn func(named int64)) Option {
	return func(o *options) { o.onStaleHint = fn }
}

// staleLastCheckpoint warns about, and reports, a _last_checkpoint naming a checkpoint
// that could not be used (loadSnapshotWarn).
func (t *Table) staleLastCheckpoint(h staleHint) {
	t.opts.logger.Warn("_delta_log/_last_checkpoint names a checkpoint that is missing or unreadable; recovering by listing the whole log",
		"table", t.store.URI(), "last_checkpoint_version", h.named, "err", h.why)
	if t.opts.onStaleHint != nil {
		t.opts.onStaleHint(h.named)
	}
}

// WithLogger sets the logger for non-fatal problems (a failed checkpoint).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMaxCommitAttempts bounds the versions Commit tries before giving up (default 20).
func WithMaxCommitAttempts(n int) Option { return func(o *options) { o.maxAttempts = n } }

// WithV2SidecarFiles sets the most file actions (adds and unexpired tombstones) per
// sidecar file of the V2 checkpoints of a table with the v2Checkpoint feature (default
// 262,144, 4 row groups; n <= 0 keeps it). A table with at most min(n, 1000) file
// actions keeps them inline in the top-level checkpoint file. Smaller sidecars give
// readers that read sidecars in parallel (Spark) more tasks; tests use it to get several
// sidecars from a small table.
func WithV2SidecarFiles(n int) Option { return func(o *options) { o.v2SidecarFiles = n } }

// WithClock sets the time source for commit timestamps (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Open returns the table stored at store. A missing table is not an error: its snapshot
// has Version -1 and Commit with ReadVersion -1 creates it. It returns an error when the
// log exists but cannot be read (non-contiguous versions, unsupported reader protocol,
// malformed actions).
func Open(ctx context.Context, store storage.Store, opts ...Option) (*Table, error) {
	t := &Table{store: store, opts: options{logger: slog.Default(), maxAttempts: 20, now: time.Now}}
	for _, o := range opts {
		o(&t.opts)
	}
	t.cpw.sidecarFiles, t.cp.w.sidecarFiles = t.opts.v2SidecarFiles, t.opts.v2SidecarFiles
	if _, err := t.Snapshot(ctx); err != nil && !errors.Is(err, ErrTableNotFound) {
		return nil, err
	}
	return t, nil
}

// Store returns the table's store.
func (t *Table) Store() storage.Store { return t.store }

// Snapshot returns the latest snapshot, reading only the commits newer than the cached
// one (a full reload happens only when they cannot be applied in order). When the table
// has no commit yet it returns an empty snapshot with Version -1 together with an error
// wrapping ErrTableNotFound.
func (t *Table) Snapshot(ctx context.Context) (*Snapshot, error) {
	defer t.fg.exit(t.fg.enter())
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.refreshLocked(ctx)
	t.snapShared = true
	return s, err
}

// setSnap replaces the cached snapshot with s, which nobody else holds yet when it is
// a different object.
func (t *Table) setSnap(s *Snapshot) {
	if s != t.snap {
		t.snap, t.snapShared = s, false
	}
}

// refreshLocked brings t.snap up to date and returns it. The caller holds t.mu and must
// set t.snapShared if the snapshot escapes the lock.
func (t *Table) refreshLocked(ctx context.Context) (*Snapshot, error) {
	if t.snap != nil && t.snap.Version >= 0 {
		s, err := t.advance(ctx, t.snap)
		if err == nil {
			t.setSnap(s)
			return s, nil
		}
		if !errors.Is(err, errNeedReload) {
			return nil, err
		}
	}
	s, err := loadSnapshotWarn(ctx, t.store, t.opts.now(), t.staleLastCheckpoint)
	if errors.Is(err, ErrTableNotFound) {
		t.setSnap(emptySnapshot())
		return t.snap, err
	}
	if err != nil {
		return nil, err
	}
	t.setSnap(s)
	return s, nil
}

var errNeedReload = errors.New("snapshot cannot be advanced incrementally")

// advance applies the commits after s.Version. It reads <v>.json for v = s.Version+1, …
// until one is missing, instead of listing _delta_log (a listing grows with the table's
// history and would make every commit O(versions)). Commits are immutable and versions
// contiguous, so the first missing version is the end of the log.
func (t *Table) advance(ctx context.Context, s *Snapshot) (*Snapshot, error) {
	var next *Snapshot
	for v := s.Version + 1; ; v++ {
		b, err := t.store.Get(ctx, commitPath(v))
		if storage.IsNotExist(err) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read commit %d: %w", v, err)
		}
		actions, err := deltalog.ParseCommit(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("read commit %d: %w", v, err)
		}
		if next == nil {
			next = s.clone()
		}
		next.apply(actions)
		next.Version = v
	}
	if next == nil {
		if _, err := t.store.Stat(ctx, commitPath(s.Version)); storage.IsNotExist(err) {
			return nil, errNeedReload // log removed or rewritten: a full load reports it
		}
		return s, nil
	}
	if err := next.finish(t.opts.now()); err != nil {
		return nil, err
	}
	return next, nil
}

func (t *Table) logf(msg string, args ...any) {
	if t.opts.logger != nil {
		t.opts.logger.Warn(msg, args...)
	}
}

// String returns the table URI.
func (t *Table) String() string { return fmt.Sprint(t.store.URI()) }
