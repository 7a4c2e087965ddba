package maintain

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/maintenance"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
)

// engineInfo is the commitInfo.engineInfo of the maintenance commits, the same as the
// pipelines' own commits.
const engineInfo = "ingestd"

// Maintenance job names (the job label of the ingestd_maintenance_* metrics).
const (
	JobOptimize = "optimize"
	JobVacuum   = "vacuum"
)

// Maintenance run results (the result label of ingestd_maintenance_runs_total).
const (
	resultSuccess = "success"
	resultNoop    = "noop"
	resultLost    = "lost"
	resultSkipped = "skipped"
	resultError   = "error"
)

// Registry is the registry of the table maintainers of one process: at most one
// maintainer per table URI, shared by the pipelines of the process that write that table
// (reference-counted: the first to start starts it, the last to stop stops it). The
// process that runs the pipelines creates one (NewRegistry) and hands it to each (the
// ingest package's Deps.Maintainers). Safe for concurrent use; the zero value is not
// usable.
type Registry struct {
	mu sync.Mutex
	m  map[string]*maintainer // by table URI
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]*maintainer{}} }

// maintainer is the owner goroutine of one table's maintenance. Its users count is
// guarded by its registry's mutex (Registry.mu).
type maintainer struct {
	uri    string
	cfg    config.Maintenance
	table  *deltawriter.Table
	log    *slog.Logger
	m      *Metrics
	users  int
	cancel context.CancelFunc
	done   chan struct{}
}

// Start starts (or joins) the maintainer of cfg's table (cfg.Table.URI, the registry's
// key and the table label of the metrics) when cfg has a maintenance block
// (cfg.Maintenance: an optimize or a vacuum job); the returned stop leaves it and, for
// the last user, stops it and waits for the job in progress to return (its context is
// cancelled). stop may be called more than once; only the first call counts. Start
// never blocks on a job: every job runs in the maintainer's goroutine, on a
// *deltawriter.Table of its own opened on store (the table's store), so a pipeline
// commit never waits on it. The goroutine's context is ctx without its cancellation: it
// ends only with the last stop. log (the pipeline's, not nil; the maintainer adds the
// "table" key) and m (nil: nothing counted) are the maintainer's. A maintainer already running for the
// table keeps the maintenance block, logger and metrics of the pipeline that started
// it. Start returns no error: when the table's log cannot be read, it logs
// "maintenance not started: open table" and returns a stop that does nothing.
func (r *Registry) Start(ctx context.Context, cfg *config.Config, store storage.Store, log *slog.Logger, m *Metrics) (stop func()) {
	mc := cfg.Maintenance
	if mc.Optimize == nil && mc.Vacuum == nil {
		return func() {}
	}
	uri := cfg.Table.URI
	r.mu.Lock()
	mt := r.m[uri]
	if mt == nil {
		// Its own Table on the pipeline's store: maintenance commits hold that Table's
		// lock, never the pipeline's.
		t, err := deltawriter.Open(ctx, store, deltawriter.WithLogger(log), deltawriter.WithMaxCommitAttempts(1000))
		if err != nil && !errors.Is(err, deltawriter.ErrTableNotFound) {
			r.mu.Unlock()
			log.Error("maintenance not started: open table", "table", uri, "err", err)
			return func() {}
		}
		mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		mt = &maintainer{uri: uri, cfg: mc, table: t, log: log.With("table", uri), m: m, cancel: cancel, done: make(chan struct{})}
		r.m[uri] = mt
		go mt.run(mctx)
	} else {
		log.Info("maintenance shared with another pipeline of this table; its maintenance block applies", "table", uri)
	}
	mt.users++
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			mt.users--
			last := mt.users == 0
			if last {
				delete(r.m, uri)
			}
			r.mu.Unlock()
			if last {
				mt.cancel()
				<-mt.done
			}
		})
	}
}

// job is one scheduled maintenance job.
type job struct {
	name  string
	every time.Duration
	due   time.Time
}

// run is the owner goroutine: it sleeps until the earliest due job, runs it, and
// schedules its next run every ±10%. The first run of each job is after a random part of
// its interval, so daemons started together do not all compact at once.
func (mt *maintainer) run(ctx context.Context) {
	defer close(mt.done)
	now := time.Now()
	var jobs []*job
	if o := mt.cfg.Optimize; o != nil {
		jobs = append(jobs, &job{name: JobOptimize, every: o.Every, due: now.Add(jitter(o.Every, 0, 1))})
	}
	if v := mt.cfg.Vacuum; v != nil {
		jobs = append(jobs, &job{name: JobVacuum, every: v.Every, due: now.Add(jitter(v.Every, 0, 1))})
	}
	mt.log.Info("maintenance started", "jobs", len(jobs))
	for {
		next := jobs[0]
		for _, j := range jobs[1:] {
			if j.due.Before(next.due) {
				next = j
			}
		}
		tm := time.NewTimer(time.Until(next.due))
		select {
		case <-ctx.Done():
			tm.Stop()
			mt.log.Info("maintenance stopped")
			return
		case <-tm.C:
		}
		mt.runJob(ctx, next.name)
		next.due = time.Now().Add(jitter(next.every, 0.9, 1.1))
	}
}

// jitter returns a random duration in [lo·d, hi·d).
func jitter(d time.Duration, lo, hi float64) time.Duration {
	return time.Duration(float64(d) * (lo + rand.Float64()*(hi-lo)))
}

// runJob runs one job and records its metrics and log line.
func (mt *maintainer) runJob(ctx context.Context, name string) {
	start := time.Now()
	result, args := resultSuccess, []any{}
	var err error
	switch name {
	case JobOptimize:
		o := mt.cfg.Optimize
		var r maintenance.OptimizeResult
		r, err = maintenance.Optimize(ctx, mt.table, maintenance.OptimizeOptions{
			TargetFileSize: int64(o.TargetFileSize), MinFiles: o.MinFiles, MaxRewriteRate: int64(o.MaxRewriteRate),
			Auto: true, EngineInfo: engineInfo, Logger: mt.log})
		if err == nil {
			switch {
			case r.Version < 0 && len(r.Dropped) > 0:
				result = resultLost
			case r.Version < 0:
				result = resultNoop
			}
			mt.m.compacted(mt.uri, r.FilesRemoved, r.BytesRemoved)
			args = append(args, "version", r.Version, "read_version", r.ReadVersion, "files_removed", r.FilesRemoved,
				"files_added", r.FilesAdded, "bytes_rewritten", r.BytesRemoved, "partitions", len(r.Partitions), "partitions_dropped", len(r.Dropped))
		}
	case JobVacuum:
		v := mt.cfg.Vacuum
		var r maintenance.VacuumResult
		retain := v.Retain
		if retain == 0 {
			retain = -1 // the table's delta.deletedFileRetentionDuration
		}
		r, err = maintenance.Vacuum(ctx, mt.table, maintenance.VacuumOptions{Retain: retain, EngineInfo: engineInfo})
		if err == nil {
			if r.Deleted == 0 {
				result = resultNoop
			}
			args = append(args, "files_deleted", r.Deleted, "bytes_deleted", r.Bytes, "start_version", r.StartVersion, "end_version", r.EndVersion)
		}
	}
	if errors.Is(err, deltawriter.ErrTableNotFound) {
		result, err = resultSkipped, nil
	}
	if ctx.Err() != nil && err != nil {
		return // stopping: the job was cancelled, not failed
	}
	d := time.Since(start)
	if err != nil {
		result = resultError
		args = append(args, "err", err)
	}
	mt.m.run(mt.uri, name, result, d)
	args = append([]any{"job", name, "result", result, "duration_ms", d.Milliseconds()}, args...)
	if err != nil {
		mt.log.Warn("maintenance run failed", args...)
		return
	}
	mt.log.Info("maintenance run", args...)
}
