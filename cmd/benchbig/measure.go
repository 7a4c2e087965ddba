package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/maintenance"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// result is one measurement (zero fields are omitted).
type result struct {
	What        string  `json:"what"`
	Dir         string  `json:"dir"`
	Files       int     `json:"files"`
	Wall        float64 `json:"wallS"`
	CPU         float64 `json:"cpuS"`
	HeapPerFile float64 `json:"heapBytesPerFile,omitempty"`
	AllocMiB    float64 `json:"allocMiB,omitempty"`
	PeakRSSMiB  float64 `json:"peakRssMiB,omitempty"`
	HeapPeakMiB float64 `json:"heapPeakMiB,omitempty"`
	P50         float64 `json:"p50S,omitempty"`
	P99         float64 `json:"p99S,omitempty"`
	Count       int     `json:"count,omitempty"`
	// commits: those that began while a background checkpoint was being written (from
	// the commit of a version that is a multiple of delta.checkpointInterval to the end of
	// that checkpoint), their count and p99, and the p99 of the others.
	DuringCPCount int     `json:"duringCheckpointCount,omitempty"`
	DuringCPP99   float64 `json:"duringCheckpointP99S,omitempty"`
	OthersP99     float64 `json:"othersP99S,omitempty"`
	ListingWall   float64 `json:"listingWallS,omitempty"`
	CandidateDel  int     `json:"toDelete,omitempty"`
	// A real VACUUM (vacuumreal): how its deletes were sent, the round, the objects
	// deleted, the delete requests, the wall time from the first request's start to the
	// last one's end, objects deleted per second of it, and the data files listed after.
	Deletes     string  `json:"deletes,omitempty"`
	Round       int     `json:"round,omitempty"`
	Deleted     int     `json:"deleted,omitempty"`
	Requests    int     `json:"deleteRequests,omitempty"`
	DeleteWall  float64 `json:"deleteWallS,omitempty"`
	DeletedPerS float64 `json:"deletedPerS,omitempty"`
	Remaining   int     `json:"dataFilesAfter,omitempty"`
}

func measureCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	dir := fs.String("dir", "", "table directory on local disk")
	uri := fs.String("uri", "", "table URI instead of -dir (s3://bucket/prefix, gs://…, az://…, file:///path)")
	what := fs.String("what", "load", "load|checkpoint|vacuum|vacuumreal|refresh|commits|startup")
	n := fs.Int("n", 50, "commits (refresh, commits)")
	pace := fs.Duration("pace", 200*time.Millisecond, "pause between commits (commits): a pipeline commits every max_age, not back to back")
	retain := fs.Duration("retain", -1, "VACUUM's retention (vacuum, vacuumreal); negative: the table's delta.deletedFileRetentionDuration")
	rounds := fs.Int("rounds", 1, "rounds of a batched and a one-by-one real VACUUM (vacuumreal)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile (pprof) of the whole measurement to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	start := time.Now()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	u, err := tableURI(*dir, *uri)
	if err != nil {
		return fmt.Errorf("measure: %w", err)
	}
	ctx := context.Background()
	st, err := openStore(ctx, u, false)
	if err != nil {
		return fmt.Errorf("measure: %w", err)
	}
	r := result{What: *what, Dir: u}
	switch *what {
	case "load":
		err = measureLoad(ctx, st, &r)
	case "checkpoint":
		err = measureCheckpoint(ctx, st, &r)
	case "vacuum":
		err = measureVacuum(ctx, st, *retain, &r)
	case "vacuumreal":
		enc := json.NewEncoder(stdout)
		err = measureVacuumReal(ctx, st, *retain, *rounds, r, func(r result) error {
			r.PeakRSSMiB = peakRSSMiB()
			return enc.Encode(r)
		})
		if err == nil {
			return nil
		}
	case "refresh":
		err = measureRefresh(ctx, st, *n, &r)
	case "commits":
		err = measureCommits(ctx, st, *n, *pace, &r)
	case "startup":
		err = measureStartup(ctx, st, start, &r)
	default:
		err = fmt.Errorf("measure: unknown -what %q", *what)
	}
	if err != nil {
		return fmt.Errorf("measure %s: %w", *what, err)
	}
	r.PeakRSSMiB = peakRSSMiB()
	return json.NewEncoder(stdout).Encode(r)
}

// cpuSeconds is the process's user and system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// peakRSSMiB is VmHWM of /proc/self/status (0 where there is none).
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// measureLoad loads the latest snapshot (checkpoint + tail) and lists its files' paths,
// the equivalent of delta-rs' DeltaTable(...) + files(); then the heap it holds.
func measureLoad(ctx context.Context, st storage.Store, r *result) error {
	h0 := heapAlloc()
	c0, t0 := cpuSeconds(), time.Now()
	tbl, snap, err := loadTable(ctx, st)
	if err != nil {
		return err
	}
	paths := make([]string, 0, snap.Files.Len())
	for _, a := range snap.Files.All() {
		paths = append(paths, a.Path)
	}
	r.Wall, r.CPU = time.Since(t0).Seconds(), cpuSeconds()-c0
	r.Files = len(paths)
	paths = nil
	h1 := heapAlloc()
	r.HeapPerFile = float64(int64(h1)-int64(h0)) / float64(max(r.Files, 1))
	runtime.KeepAlive(tbl)
	runtime.KeepAlive(paths)
	return nil
}

// measureCheckpoint loads the table, then writes a checkpoint of it (timed).
func measureCheckpoint(ctx context.Context, st storage.Store, r *result) error {
	tbl, snap, err := loadTable(ctx, st)
	if err != nil {
		return err
	}
	r.Files = snap.Files.Len()
	a0 := totalAlloc()
	c0, t0 := cpuSeconds(), time.Now()
	if _, err := tbl.Checkpoint(ctx); err != nil {
		return err
	}
	r.Wall, r.CPU = time.Since(t0).Seconds(), cpuSeconds()-c0
	r.AllocMiB = float64(totalAlloc()-a0) / (1 << 20)
	return nil
}

// measureVacuum loads the table, lists it (the store's listing time, for reference), then
// runs a VACUUM dry run with the retention retain (negative: the table's; timed;
// heapPeakMiB: the most heap it held beside the loaded snapshot, sampled every
// millisecond).
func measureVacuum(ctx context.Context, st storage.Store, retain time.Duration, r *result) error {
	tbl, snap, err := loadTable(ctx, st)
	if err != nil {
		return err
	}
	r.Files = snap.Files.Len()
	t0 := time.Now()
	if _, err := listAll(ctx, st, ""); err != nil {
		return err
	}
	r.ListingWall = time.Since(t0).Seconds()
	stop := watchHeap()
	a0 := totalAlloc()
	c0, t0 := cpuSeconds(), time.Now()
	res, err := maintenance.Vacuum(ctx, tbl, maintenance.VacuumOptions{Retain: retain, DryRun: true})
	r.Wall, r.CPU = time.Since(t0).Seconds(), cpuSeconds()-c0
	r.HeapPeakMiB = float64(stop()) / (1 << 20)
	if err != nil {
		return err
	}
	r.AllocMiB = float64(totalAlloc()-a0) / (1 << 20)
	r.CandidateDel = len(res.Files)
	return nil
}

// loadTable opens the table in st and loads its latest snapshot.
func loadTable(ctx context.Context, st storage.Store) (*deltawriter.Table, *deltawriter.Snapshot, error) {
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	return tbl, snap, nil
}

// listAll lists every object under dir, recursively and a page at a time, as VACUUM
// does (names only where the store has storage.NameLister), and returns how many.
func listAll(ctx context.Context, st storage.Store, dir string) (int, error) {
	list := st.ListPages
	if nl, ok := st.(storage.NameLister); ok {
		list = nl.ListNamePages
	}
	n := 0
	err := list(ctx, dir, func(page []storage.FileInfo) error {
		for _, e := range page {
			if !e.IsDir {
				n++
				continue
			}
			p := e.Name
			if dir != "" {
				p = dir + "/" + e.Name
			}
			k, err := listAll(ctx, st, p)
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	return n, err
}

// benchAdd is the add of one more file (its data file need not exist: these
// measurements read the log only).
func benchAdd(snap *deltawriter.Snapshot, i int) deltalog.Add {
	a := deltalog.Add{Path: fmt.Sprintf("part-bench-%08d.parquet", i), PartitionValues: map[string]*string{}, Size: 500,
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: stubStats}
	if len(snap.Metadata.PartitionColumns) > 0 {
		d := "2026-12-06"
		a.PartitionValues["date"] = &d
		a.Path = "date=" + d + "/" + a.Path
	}
	return a
}

// measureRefresh: another writer commits one file; the time of Snapshot on a loaded
// Table to take it in (n times: p50 and max as p99).
func measureRefresh(ctx context.Context, st storage.Store, n int, r *result) error {
	tbl, snap, err := loadTable(ctx, st)
	if err != nil {
		return err
	}
	r.Files = snap.Files.Len()
	var ds []float64
	c0 := cpuSeconds()
	for i := range n {
		a := benchAdd(snap, 1_000_000_000+i)
		ts := time.Now().UnixMilli()
		data, err := deltalog.EncodeCommit([]deltalog.Action{{Add: &a}, {Txn: &deltalog.Txn{AppID: "other", Version: int64(i), LastUpdated: &ts}}})
		if err != nil {
			return err
		}
		if err := st.PutIfAbsent(ctx, fmt.Sprintf("_delta_log/%020d.json", snap.Version+1), data); err != nil {
			return err
		}
		t0 := time.Now()
		next, err := tbl.Snapshot(ctx)
		if err != nil {
			return err
		}
		ds = append(ds, time.Since(t0).Seconds())
		if next.Version != snap.Version+1 || next.Files.Len() != snap.Files.Len()+1 {
			return fmt.Errorf("refresh: version %d with %d files after %d with %d", next.Version, next.Files.Len(), snap.Version, snap.Files.Len())
		}
		snap = next
	}
	r.CPU = cpuSeconds() - c0
	r.Count, r.P50, r.P99 = len(ds), quantile(ds, 0.5), quantile(ds, 0.99)
	return nil
}

// measureCommits: n commits of one file and a txn, each after a Snapshot (as a flush
// does), with background checkpoints every delta.checkpointInterval commits as in the
// daemon; p50 and p99 of Snapshot + Commit, and p99 of those that began while a
// checkpoint was being written and of the others.
func measureCommits(ctx context.Context, st storage.Store, n int, pace time.Duration, r *result) error {
	var cpMu sync.Mutex
	var writing int64 = -1 // the version of the checkpoint being written; -1: none
	tbl, err := deltawriter.Open(ctx, st, deltawriter.WithBackgroundCheckpoints(),
		deltawriter.WithAfterCheckpoint(func(_ context.Context, _ *deltawriter.Table, v int64) {
			cpMu.Lock()
			if writing <= v {
				writing = -1
			}
			cpMu.Unlock()
		}))
	if err != nil {
		return err
	}
	defer tbl.Close(context.Background())
	var ds, during, others []float64
	c0 := cpuSeconds()
	for i := range n {
		cpMu.Lock()
		busy := writing >= 0
		cpMu.Unlock()
		t0 := time.Now()
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			return err
		}
		v, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Adds: []deltalog.Add{benchAdd(snap, 2_000_000_000+i)},
			Txns: []deltalog.Txn{{AppID: benchApp, Version: snap.Txns[benchApp] + 1}}})
		if err != nil {
			return err
		}
		d := time.Since(t0).Seconds()
		ds = append(ds, d)
		if busy {
			during = append(during, d)
		} else {
			others = append(others, d)
		}
		if interval, err := snap.Metadata.IntProperty(deltalog.PropCheckpointInterval, 10); err == nil && interval > 0 && v%interval == 0 {
			cpMu.Lock()
			writing = v
			cpMu.Unlock()
		}
		r.Files = snap.Files.Len() + 1
		time.Sleep(pace)
	}
	r.CPU = cpuSeconds() - c0
	r.Count, r.P50, r.P99 = len(ds), quantile(ds, 0.5), quantile(ds, 0.99)
	r.DuringCPCount, r.DuringCPP99, r.OthersP99 = len(during), quantile(during, 0.99), quantile(others, 0.99)
	tbl.WaitCheckpoints()
	return nil
}

// measureStartup: the Delta side of a pipeline's start, from the process's start to its
// first commit landed: Open (the snapshot load) and one commit.
func measureStartup(ctx context.Context, st storage.Store, start time.Time, r *result) error {
	tbl, err := deltawriter.Open(ctx, st, deltawriter.WithBackgroundCheckpoints())
	if err != nil {
		return err
	}
	defer tbl.Close(context.Background())
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return err
	}
	_, err = tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Adds: []deltalog.Add{benchAdd(snap, 3_000_000_000)},
		Txns: []deltalog.Txn{{AppID: benchApp, Version: snap.Txns[benchApp] + 1}}})
	if err != nil {
		return err
	}
	r.Wall, r.CPU, r.Files = time.Since(start).Seconds(), cpuSeconds(), snap.Files.Len()+1
	return nil
}

// quantile is the q-quantile of xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
