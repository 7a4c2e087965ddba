package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/maintenance"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// Delete modes of measureVacuumReal: batched is storage.DeleteAll as VACUUM runs it on a
// store with BatchDeleter (S3 DeleteObjects of up to 1,000 keys); single sends the same
// paths through Deleter, one request per object, as DeleteAll does on a store without it.
const (
	deletesBatched = "batched"
	deletesSingle  = "single"
)

// restoreWorkers is the number of puts in flight while the deleted objects are put back.
const restoreWorkers = 16

// measureVacuumReal runs real VACUUMs with the retention retain (negative: the table's;
// Force, so that 0 deletes every unreferenced object an object store has dated at its
// upload) on the table in st, rounds times a batched and a one-by-one VACUUM (the order
// alternating between rounds), and emits one result per VACUUM. Before the first, a dry
// run finds the files to delete and reads their bytes; before every VACUUM but the first,
// they are put back, so that each VACUUM starts from the table as generated (on S3,
// VACUUM commits nothing: the log is unchanged). Each result has the VACUUM's wall and
// CPU seconds, the objects deleted, the delete requests and their wall time, and the data
// files listed afterwards, which must be the live files exactly.
func measureVacuumReal(ctx context.Context, st storage.Store, retain time.Duration, rounds int, base result, emit func(result) error) error {
	tbl, snap, err := loadTable(ctx, st)
	if err != nil {
		return err
	}
	live := snap.Files.Len()
	dry, err := maintenance.Vacuum(ctx, tbl, maintenance.VacuumOptions{Retain: retain, DryRun: true})
	if err != nil {
		return err
	}
	var paths []string
	for _, f := range dry.Files {
		if !f.IsDir {
			paths = append(paths, f.Path)
		}
	}
	if len(paths) == 0 {
		return fmt.Errorf("vacuumreal: the dry run finds nothing to delete in %s", st.URI())
	}
	saved := make([][]byte, len(paths))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(restoreWorkers)
	for i, p := range paths {
		g.Go(func() (err error) {
			saved[i], err = st.Get(gctx, p)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("vacuumreal: read the files to delete: %w", err)
	}
	first := true
	for round := range max(rounds, 1) {
		order := []string{deletesBatched, deletesSingle}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, mode := range order {
			if !first {
				if err := restore(ctx, st, paths, saved); err != nil {
					return err
				}
			}
			first = false
			r := base
			r.Deletes, r.Round, r.Files = mode, round, live
			if err := vacuumOnce(ctx, st, mode, retain, &r); err != nil {
				return err
			}
			if r.Deleted != len(paths) {
				return fmt.Errorf("vacuumreal %s: deleted %d objects, the dry run listed %d", mode, r.Deleted, len(paths))
			}
			after, err := listFiles(ctx, st, "", false)
			if err != nil {
				return err
			}
			for _, p := range after {
				if !strings.HasPrefix(p, "_delta_log/") {
					r.Remaining++
				}
			}
			if r.Remaining != live {
				return fmt.Errorf("vacuumreal %s: %d data files left after VACUUM, want the %d live files", mode, r.Remaining, live)
			}
			if err := emit(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// vacuumOnce opens the table in st through a store that times its deletes (with
// DeleteBatch for mode batched, without it for single), loads it, and runs one real
// VACUUM (timed).
func vacuumOnce(ctx context.Context, st storage.Store, mode string, retain time.Duration, r *result) error {
	td := &timedDeletes{Store: st}
	var ws storage.Store = td
	if mode == deletesBatched {
		ws = timedBatchDeletes{td}
	}
	tbl, err := deltawriter.Open(ctx, ws)
	if err != nil {
		return err
	}
	if _, err := tbl.Snapshot(ctx); err != nil {
		return err
	}
	c0, t0 := cpuSeconds(), time.Now()
	res, err := maintenance.Vacuum(ctx, tbl, maintenance.VacuumOptions{Retain: retain, Force: true})
	r.Wall, r.CPU = time.Since(t0).Seconds(), cpuSeconds()-c0
	if err != nil {
		return err
	}
	r.Deleted = res.Deleted
	r.Requests, r.DeleteWall = td.stats()
	if r.DeleteWall > 0 {
		r.DeletedPerS = float64(r.Deleted) / r.DeleteWall
	}
	return nil
}

// restore puts the deleted objects back with their bytes, then waits past the second of
// the last put: VACUUM deletes what is dated strictly before its start, and S3 dates an
// object to the second.
func restore(ctx context.Context, st storage.Store, paths []string, data [][]byte) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(restoreWorkers)
	for i, p := range paths {
		g.Go(func() error { return st.Put(gctx, p, data[i]) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("vacuumreal: put back the deleted files: %w", err)
	}
	time.Sleep(1100 * time.Millisecond)
	return nil
}

// timedDeletes is a Store whose delete requests are counted and timed, from the start of
// the first to the end of the last; it has Deleter and, as the stores under it do,
// RangeGetter and ListerFrom, but not BatchDeleter (see timedBatchDeletes) nor
// NameLister (VACUUM then lists with sizes and times, as on the object stores).
type timedDeletes struct {
	storage.Store
	mu          sync.Mutex
	first, last time.Time
	requests    int
}

func (t *timedDeletes) begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.requests == 0 {
		t.first = time.Now()
	}
	t.requests++
}

func (t *timedDeletes) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = time.Now()
}

// stats returns the delete requests sent and the seconds from the first's start to the
// last's end.
func (t *timedDeletes) stats() (int, float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.requests == 0 {
		return 0, 0
	}
	return t.requests, t.last.Sub(t.first).Seconds()
}

// Delete implements storage.Deleter: one timed request.
func (t *timedDeletes) Delete(ctx context.Context, p string) error {
	d, ok := t.Store.(storage.Deleter)
	if !ok {
		return fmt.Errorf("delete %s: the store %s cannot delete objects", p, t.URI())
	}
	t.begin()
	defer t.end()
	return d.Delete(ctx, p)
}

// GetRange implements storage.RangeGetter (the checkpoint's ranged reads), through the
// store's own, else a whole read.
func (t *timedDeletes) GetRange(ctx context.Context, p string, off, length int64) ([]byte, error) {
	if rg, ok := t.Store.(storage.RangeGetter); ok {
		return rg.GetRange(ctx, p, off, length)
	}
	b, err := t.Get(ctx, p)
	if err != nil {
		return nil, err
	}
	off = min(max(off, 0), int64(len(b)))
	return b[off:min(off+max(length, 0), int64(len(b)))], nil
}

// ListFrom implements storage.ListerFrom (the log listed from the checkpoint on).
func (t *timedDeletes) ListFrom(ctx context.Context, dir, after string) ([]storage.FileInfo, error) {
	return storage.ListFrom(ctx, t.Store, dir, after)
}

// timedBatchDeletes is timedDeletes with storage.BatchDeleter: each DeleteBatch is one
// timed request.
type timedBatchDeletes struct{ *timedDeletes }

// DeleteBatch implements storage.BatchDeleter.
func (t timedBatchDeletes) DeleteBatch(ctx context.Context, paths []string) (int, error) {
	bd, ok := t.Store.(storage.BatchDeleter)
	if !ok {
		return 0, fmt.Errorf("delete %d objects: the store %s has no batched delete", len(paths), t.URI())
	}
	t.begin()
	defer t.end()
	return bd.DeleteBatch(ctx, paths)
}
