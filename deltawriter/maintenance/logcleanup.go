package maintenance

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// DefaultLogRetention is delta.logRetentionDuration when the table does not set it
// (PROTOCOL.md, "Metadata Cleanup"; Spark's default, 30 days).
const DefaultLogRetention = 30 * 24 * time.Hour

// LogCleanupOptions are the settings of one log cleanup.
type LogCleanupOptions struct {
	// MinRetention is a floor under the table's delta.logRetentionDuration: no log file
	// younger than it is deleted. ingest sets it from the dead-letter topic (the replay
	// safeguard: replay reads the commits after a dead letter's table version to tell
	// real dead letters from orphans, so those commits must outlive every dead letter
	// still in the topic). Negative: never delete anything.
	MinRetention time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Sidecars, when not nil, remembers across runs which sidecars each checkpoint file
	// references, so that a run reads only the checkpoints written since the last one
	// (a v2Checkpoint table keeps a checkpoint per interval for the whole retention:
	// thousands). nil: every checkpoint is read when an old sidecar is there.
	Sidecars *SidecarRefs
}

// SidecarRefs caches the sidecars each checkpoint file references, for log cleanup runs
// of one table (LogCleanupOptions.Sidecars). A checkpoint file is immutable once written,
// but a classic-named one can be replaced by another writer checkpointing the same
// version with other sidecars, so an entry is keyed by the file's name, size and
// modification time as listed: a replaced file is read again. Entries of files no longer
// listed are dropped at each run, so it holds at most the checkpoints in _delta_log. Safe
// for concurrent use.
type SidecarRefs struct {
	mu sync.Mutex
	m  map[sidecarRefKey][]string
}

type sidecarRefKey struct {
	name    string
	size    int64
	modTime int64 // UnixNano
}

// NewSidecarRefs returns an empty cache.
func NewSidecarRefs() *SidecarRefs { return &SidecarRefs{m: map[sidecarRefKey][]string{}} }

// refs returns the sidecars that checkpoint e references, from the cache or read from st.
func (c *SidecarRefs) refs(ctx context.Context, st storage.Store, e storage.FileInfo) ([]string, error) {
	if c == nil {
		return deltawriter.CheckpointSidecars(ctx, st, e.Name)
	}
	k := sidecarRefKey{e.Name, e.Size, e.ModTime.UnixNano()}
	c.mu.Lock()
	r, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := deltawriter.CheckpointSidecars(ctx, st, e.Name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.m[k] = r
	c.mu.Unlock()
	return r, nil
}

// keep drops the entries whose keys are not in listed.
func (c *SidecarRefs) keep(listed map[sidecarRefKey]bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if !listed[k] {
			delete(c.m, k)
		}
	}
}

// LogCleanupResult says what a log cleanup did.
type LogCleanupResult struct {
	// Checkpoint is the checkpoint version the log now starts from: every log file of a
	// lower version was deleted (-1: nothing was deleted).
	Checkpoint int64
	// Deleted are the deleted paths, relative to the table root, ascending.
	Deleted []string
	// Retention is the retention applied: max(delta.logRetentionDuration, MinRetention).
	Retention time.Duration
}

// logFile is one _delta_log entry that log cleanup knows.
type logFile struct {
	name    string
	version int64 // for compacted logs, the end version of the range
	modTime time.Time
	commit  bool
	cp      bool // a checkpoint file (classic, part of a multi-part one, or V2)
}

// CleanupLog deletes the expired part of the table's log (PROTOCOL.md, "Metadata
// Cleanup"), as Spark does after a checkpoint: it finds the newest checkpoint C such that
// every commit below C is older than the retention (the store's modification time, made
// non-decreasing with the version, as Spark's BufferingLogDeletionIterator does) and
// deletes every commit (<v>.json), checkpoint (classic, multi-part, V2 UUID-named),
// checksum (<v>.crc) and compacted log (<a>.<b>.compacted.json) of a version below C.
// What a reader needs to reconstruct any version from C on is kept: checkpoint C and
// every commit after it. _last_checkpoint and unknown names are never touched.
//
// Then the sidecars (steps 4 and 5 of "Metadata Cleanup"): every file in
// _delta_log/_sidecars/ that no checkpoint left in _delta_log references
// (deltawriter.CheckpointSidecars, read after the deletions, from a fresh listing) is
// deleted once its modification time is before both the retention cutoff and a day ago
// (the protocol keeps a day's sidecars for checkpoints being written). That includes the
// sidecars of the deleted checkpoints and those a writer left when it failed before
// writing its top-level checkpoint file. This step runs even when no log file is old
// enough to go; _sidecars/ is listed once and the checkpoints are read only when an old
// sidecar is there.
//
// Last, on a store whose writes in the making are hidden temporary files
// (storage.TempLister: local disk's ".tmp-…"), the temporary files in _delta_log and
// _sidecars older than the retention and a day: a commit, checkpoint or sidecar whose
// writer was killed mid-write.
//
// The retention is the table's delta.logRetentionDuration (default 30 days) or
// o.MinRetention, whichever is longer; with delta.enableExpiredLogCleanup = false, or a
// negative MinRetention, nothing is deleted. Errors: listing, reading a kept checkpoint
// (no sidecar is then deleted) or deleting (wrapped store errors; what was deleted stays
// deleted, the next run continues).
func CleanupLog(ctx context.Context, t *deltawriter.Table, o LogCleanupOptions) (LogCleanupResult, error) {
	res := LogCleanupResult{Checkpoint: -1}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return res, fmt.Errorf("clean up log of %s: %w", t, err)
	}
	if v, ok := snap.Metadata.Configuration[deltalog.PropEnableExpiredLogCleanup]; ok && strings.EqualFold(strings.TrimSpace(v), "false") {
		return res, nil
	}
	if o.MinRetention < 0 {
		return res, nil
	}
	ret, err := snap.Metadata.DurationProperty(deltalog.PropLogRetentionDuration, DefaultLogRetention)
	if err != nil {
		return res, fmt.Errorf("clean up log of %s: %w", t, err)
	}
	res.Retention = max(ret, o.MinRetention)
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	cutoff := now().Add(-res.Retention)

	st := t.Store()
	ents, err := st.List(ctx, "_delta_log")
	if err != nil {
		return res, fmt.Errorf("clean up log of %s: %w", t, err)
	}
	var files []logFile
	commits := map[int64]time.Time{}
	cps := map[int64]bool{}
	var maxV int64 = -1
	for _, e := range ents {
		if e.IsDir {
			continue
		}
		f, ok := parseLogName(e.Name)
		if !ok {
			continue
		}
		f.modTime = e.ModTime
		files = append(files, f)
		if f.commit {
			commits[f.version] = e.ModTime
			maxV = max(maxV, f.version)
		}
		if f.cp {
			cps[f.version] = true
		}
	}
	if len(commits) == 0 {
		return res, nil
	}
	// expiredTo: every commit version <= expiredTo is expired (times made monotone);
	// versions below the oldest present were removed before.
	lo := minKey(commits)
	expiredTo := lo - 1
	var last time.Time
	for v := lo; v <= maxV; v++ {
		mt, ok := commits[v]
		if !ok {
			break // a gap: the log is not contiguous here, keep everything from it
		}
		if !mt.After(last) && !last.IsZero() {
			mt = last.Add(time.Millisecond)
		}
		last = mt
		if !mt.Before(cutoff) {
			break
		}
		expiredTo = v
	}
	// The newest checkpoint C <= expiredTo+1: commits below C are all expired.
	c := int64(-1)
	for v := range cps {
		if v <= expiredTo+1 && v > c && v <= maxV {
			c = v
		}
	}
	del, ok := st.(storage.Deleter)
	if !ok {
		if c <= 0 {
			return res, nil
		}
		return res, fmt.Errorf("clean up log of %s: the store cannot delete objects", t)
	}
	if c > 0 {
		res.Checkpoint = c
		for _, f := range files {
			if f.version >= c {
				continue
			}
			p := "_delta_log/" + f.name
			if err := del.Delete(ctx, p); err != nil {
				return res, fmt.Errorf("clean up log of %s: delete %s: %w", t, p, err)
			}
			res.Deleted = append(res.Deleted, p)
		}
	}
	if err := cleanupSidecars(ctx, st, del, o.Sidecars, cutoff, now(), &res); err != nil {
		return res, fmt.Errorf("clean up log of %s: %w", t, err)
	}
	err = cleanupTemps(ctx, st, del, cutoff, now(), &res)
	slices.Sort(res.Deleted)
	if err != nil {
		return res, fmt.Errorf("clean up log of %s: %w", t, err)
	}
	return res, nil
}

// cleanupTemps deletes the temporary files (storage.TempLister) in _delta_log and in
// _delta_log/_sidecars older than cutoff and than staleTempAge before now: a checkpoint,
// sidecar or commit whose writer was killed mid-write. It appends them to res.Deleted.
func cleanupTemps(ctx context.Context, st storage.Store, del storage.Deleter, cutoff, now time.Time, res *LogCleanupResult) error {
	for _, dir := range []string{"_delta_log", sidecarDir} {
		paths, err := listTemps(ctx, st, dir)
		if err != nil {
			return err
		}
		stale, err := staleTemps(ctx, st, paths, cutoff, now)
		if err != nil {
			return err
		}
		for _, f := range stale {
			if err := del.Delete(ctx, f.Name); err != nil {
				return fmt.Errorf("delete %s: %w", f.Name, err)
			}
			res.Deleted = append(res.Deleted, f.Name)
		}
	}
	return nil
}

// sidecarDir holds the sidecar files of V2 checkpoints (PROTOCOL.md, "Sidecar Files").
const sidecarDir = "_delta_log/_sidecars"

// cleanupSidecars deletes the sidecars older than cutoff and than a day before now that
// no checkpoint in _delta_log references (CleanupLog; cache, when not nil, holds what
// earlier runs read), appending them to res.Deleted.
func cleanupSidecars(ctx context.Context, st storage.Store, del storage.Deleter, cache *SidecarRefs, cutoff, now time.Time, res *LogCleanupResult) error {
	if day := now.Add(-24 * time.Hour); day.Before(cutoff) {
		cutoff = day
	}
	ents, err := st.List(ctx, sidecarDir)
	if err != nil {
		return err
	}
	var old []string
	for _, e := range ents {
		if !e.IsDir && e.ModTime.Before(cutoff) {
			old = append(old, e.Name)
		}
	}
	if len(old) == 0 {
		return nil
	}
	// Listed after the sidecars: a checkpoint written since references sidecars written
	// after the listing above, or ones this listing finds.
	logEnts, err := st.List(ctx, "_delta_log")
	if err != nil {
		return err
	}
	used := map[string]bool{}
	listed := map[sidecarRefKey]bool{}
	for _, e := range logEnts {
		if e.IsDir {
			continue
		}
		if f, ok := parseLogName(e.Name); !ok || !isCheckpointName(f.name) {
			continue
		}
		listed[sidecarRefKey{e.Name, e.Size, e.ModTime.UnixNano()}] = true
		refs, err := cache.refs(ctx, st, e)
		if err != nil {
			return err
		}
		for _, r := range refs {
			used[r] = true
		}
	}
	cache.keep(listed)
	for _, name := range old {
		if used[name] {
			continue
		}
		p := sidecarDir + "/" + name
		if err := del.Delete(ctx, p); err != nil {
			return fmt.Errorf("delete %s: %w", p, err)
		}
		res.Deleted = append(res.Deleted, p)
	}
	return nil
}

// isCheckpointName reports whether a _delta_log name (parseLogName) is a checkpoint file,
// complete multi-part sets and their parts included.
func isCheckpointName(name string) bool {
	rest := name[21:]
	return strings.HasPrefix(rest, "checkpoint.") && (strings.HasSuffix(rest, ".parquet") || strings.HasSuffix(rest, ".json"))
}

func minKey(m map[int64]time.Time) int64 {
	lo := int64(-1)
	for v := range m {
		if lo < 0 || v < lo {
			lo = v
		}
	}
	return lo
}

// parseLogName recognises the _delta_log names log cleanup deletes (PROTOCOL.md, "Delta
// Log Entries", "Checkpoints", "Version Checksum File", "Log Compaction Files").
func parseLogName(name string) (logFile, bool) {
	if len(name) < 21 || name[20] != '.' {
		return logFile{}, false
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil {
		return logFile{}, false
	}
	f := logFile{name: name, version: v}
	rest := name[21:]
	switch {
	case rest == "json":
		f.commit = true
	case rest == "crc":
	case strings.HasPrefix(rest, "checkpoint.") && (strings.HasSuffix(rest, ".parquet") || strings.HasSuffix(rest, ".json")):
		f.cp = true
		// A multi-part checkpoint counts once all its parts are there; log cleanup only
		// needs to know a checkpoint exists at a version it keeps, and keeping more is safe.
		if strings.Count(rest, ".") == 3 && !isCompletePart(rest) {
			f.cp = false
		}
	case strings.HasSuffix(rest, ".compacted.json"):
		end, err := strconv.ParseInt(strings.TrimSuffix(rest, ".compacted.json"), 10, 64)
		if err != nil {
			return logFile{}, false
		}
		f.version = end
	default:
		return logFile{}, false
	}
	return f, true
}

// isCompletePart reports whether "checkpoint.<part>.<parts>.parquet" is the single part of
// a one-part multi-part checkpoint; the parts of larger ones are not trusted as the start
// of the kept log (ingestd never writes them; a C from them is simply not chosen).
func isCompletePart(rest string) bool {
	f := strings.Split(strings.TrimSuffix(strings.TrimPrefix(rest, "checkpoint."), ".parquet"), ".")
	if len(f) != 2 {
		return true // V2 UUID-named
	}
	return f[0] == "0000000001" && f[1] == "0000000001"
}
