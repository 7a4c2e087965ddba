package maintenance

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// DefaultDeletedFileRetention is delta.deletedFileRetentionDuration when the table does
// not set it (PROTOCOL.md, "Add File and Remove File"; Spark's default, 7 days).
const DefaultDeletedFileRetention = 7 * 24 * time.Hour

// ErrRetentionTooShort is wrapped by Vacuum when VacuumOptions.Retain is shorter than the
// table's delta.deletedFileRetentionDuration and Force is not set.
var ErrRetentionTooShort = errors.New("retention shorter than the table's delta.deletedFileRetentionDuration")

// VacuumOptions are the settings of one VACUUM.
type VacuumOptions struct {
	// Retain is how long files stay after they stop being referenced: a file is deleted
	// when it was removed (remove.deletionTimestamp) longer than Retain ago, or, for a file
	// no version references (a crashed flush's leftover), when its modification time in the
	// store is older than Retain. Negative: the table's delta.deletedFileRetentionDuration
	// (default 7 days).
	Retain time.Duration
	// Force allows a Retain shorter than the table's delta.deletedFileRetentionDuration
	// (Spark's spark.databricks.delta.retentionDurationCheck.enabled=false). Files of a
	// flush still in flight, and those a reader of a version inside the table's retention
	// needs, may then be deleted.
	Force bool
	// DryRun lists the files that would be deleted, deletes nothing and commits nothing.
	DryRun bool
	// Now is the clock (default time.Now): the retention window ends at Now() - Retain.
	Now func() time.Time
	// EngineInfo is the commitInfo.engineInfo of the VACUUM START / END commits.
	EngineInfo string
}

// vacuumDeletes is the number of delete requests VACUUM keeps in flight.
const vacuumDeletes = 16

// VacuumFile is one file (or empty directory) VACUUM deletes, or would delete.
type VacuumFile struct {
	Path  string `json:"path"` // relative to the table root, slash-separated, not URI-encoded
	Size  int64  `json:"size"` // bytes; 0 for a directory
	IsDir bool   `json:"isDir,omitempty"`
}

// VacuumResult says what a VACUUM did.
type VacuumResult struct {
	DryRun bool `json:"dryRun"`
	// Retention is the retention applied (JSON: nanoseconds); DeleteBefore = the clock at
	// start - Retention.
	Retention    time.Duration `json:"retentionNanos"`
	DeleteBefore time.Time     `json:"deleteBefore"`
	// TableRetention is the table's delta.deletedFileRetentionDuration (JSON: nanoseconds).
	TableRetention time.Duration `json:"tableRetentionNanos"`
	// Files are the files and empty directories deleted (or, with DryRun, to delete),
	// sorted by path. A directory that is no longer empty when VACUUM deletes it (a file
	// written there since the listing, or being written) is kept and left out.
	Files []VacuumFile `json:"files"`
	// Bytes is the total size of Files.
	Bytes int64 `json:"bytes"`
	// Deleted counts the objects actually deleted (0 with DryRun).
	Deleted int `json:"deleted"`
	// Dirs is the number of directories listed (the table root included), Spark's
	// numVacuumedDirectories.
	Dirs int `json:"dirs"`
	// StartVersion and EndVersion are the VACUUM START and VACUUM END commits, -1 when
	// none was written (DryRun, or a store on which Spark does not log vacuums: S3).
	StartVersion int64 `json:"startVersion"`
	EndVersion   int64 `json:"endVersion"`
}

// Vacuum deletes the files of table t that no version inside the retention window
// references (Delta's VACUUM; PROTOCOL.md, "Add File and Remove File", and Spark's
// VacuumCommand):
//   - files removed (remove.deletionTimestamp) longer than the retention ago;
//   - files no action of the snapshot references, live add or tombstone, whose store
//     modification time is older than the retention: leftovers of flushes that crashed
//     before their commit (an in-flight flush writes files newer than that);
//   - deletion vector files (deletion_vector_<uuid>.bin) of such files;
//   - on a store whose writes in the making are hidden temporary files
//     (storage.TempLister: local disk's ".tmp-…"), those in the directories listed
//     whose modification time is older than the retention and a day: left by a writer
//     killed mid-write (one in flight is written to minutes ago at most, and keeps its
//     directory, which is then not listed as empty);
//   - directories left empty.
//
// Apart from stale temporary files, it never touches _delta_log nor any other hidden name
// (one starting with "_" or "."), except partition directories ("<partition column>=…", "_kafka_partition=3"),
// "_change_data" and "_delta_index" (Spark's DeltaTableUtils.isHiddenDirectory); "metadata"
// (UniForm Iceberg) is kept too. Files outside the table root are never deleted.
//
// The table must be writable by ingestd (Snapshot.CheckWritable; PROTOCOL.md "VACUUM
// Protocol Check": with the vacuumProtocolCheck feature a vacuum must honour the writer
// protocol, and ingestd always does). A Retain shorter than the table's
// delta.deletedFileRetentionDuration is refused (ErrRetentionTooShort) unless Force or
// DryRun.
//
// Unless DryRun, it commits "VACUUM START" (operationParameters retentionCheckEnabled,
// specifiedRetentionMillis, defaultRetentionMillis; metrics numFilesToDelete,
// sizeOfDataToDelete) before deleting and "VACUUM END" (status COMPLETED or FAILED; metrics
// numDeletedFiles, numVacuumedDirectories) after, commitInfo-only commits like Spark's on
// the stores where Spark logs vacuums (local, GCS, Azure; not S3).
//
// Memory: the snapshot, one listing page (storage.MaxListPage entries) per directory
// level, and the candidates. Those are gathered before any delete, dry run or not: the
// result lists them and VACUUM START counts them before the first delete.
//
// Errors: no table; the table not writable; the retention refused; listing, deleting or
// committing failed (wrapped store errors; files already deleted stay deleted, a rerun
// finishes the job).
func Vacuum(ctx context.Context, t *deltawriter.Table, o VacuumOptions) (VacuumResult, error) {
	res := VacuumResult{DryRun: o.DryRun, StartVersion: -1, EndVersion: -1}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return res, fmt.Errorf("vacuum %s: %w", t, err)
	}
	if err := snap.CheckWritable(); err != nil {
		return res, fmt.Errorf("vacuum %s: %w", t, err)
	}
	tableRet, err := snap.Metadata.DurationProperty(deltalog.PropDeletedFileRetention, DefaultDeletedFileRetention)
	if err != nil {
		return res, fmt.Errorf("vacuum %s: %w", t, err)
	}
	res.TableRetention = tableRet
	specified := o.Retain >= 0
	retain := o.Retain
	if !specified {
		retain = tableRet
	}
	// A dry run deletes nothing, so it needs no --force to show what a shorter
	// retention would delete; the result's TableRetention lets the caller say a real run
	// would.
	if retain < tableRet && !o.Force && !o.DryRun {
		setting := tableRet.String() + ", the default"
		if v, ok := snap.Metadata.Configuration[deltalog.PropDeletedFileRetention]; ok {
			setting = fmt.Sprintf("%q = %s", v, tableRet)
		}
		return res, fmt.Errorf("vacuum %s: --retain %s is shorter than the table's %s (%s): files that readers of versions inside that window, or flushes in flight, still need could be deleted; use --retain %s or longer, or add --force if no writer is running and no reader needs older versions: %w",
			t, retain, deltalog.PropDeletedFileRetention, setting, tableRet, ErrRetentionTooShort)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	res.Retention = retain
	res.DeleteBefore = now().Add(-retain)
	cutoffMs := res.DeleteBefore.UnixMilli()

	st := t.Store()
	valid := map[string]bool{}
	keep := func(p string, dv *deltalog.DeletionVector) {
		if rel, ok := relativePath(st.URI(), p); ok {
			valid[rel] = true
			for d := path.Dir(rel); d != "."; d = path.Dir(d) {
				valid[d] = true
			}
		}
		if rel, ok := dvPath(dv); ok {
			valid[rel] = true
			for d := path.Dir(rel); d != "."; d = path.Dir(d) {
				valid[d] = true
			}
		}
	}
	// A live file whose key is its clean relative path is looked up in the snapshot's
	// file table (snap.Files.Has) rather than copied into valid: only its directories
	// are, and the few other live files (absolute paths, deletion vectors).
	lastDir := ""
	for k, a := range snap.Files.All() {
		if a.DeletionVector != nil || strings.Contains(k, "://") || strings.HasPrefix(k, "/") || path.Clean(k) != k {
			keep(a.Path, a.DeletionVector)
			continue
		}
		if d := path.Dir(k); d != lastDir {
			lastDir = d
			for ; d != "."; d = path.Dir(d) {
				valid[d] = true
			}
		}
	}
	live := func(rel string) bool { return valid[rel] || snap.Files.Has(rel) }
	for _, r := range snap.Tombstones() {
		if r.DeletionTimestamp != nil && *r.DeletionTimestamp >= cutoffMs {
			keep(r.Path, r.DeletionVector)
		}
	}
	w := vacuumWalk{st: st, live: live, partCols: partitionDirPrefixes(snap), res: &res, now: now()}
	w.list = st.ListPages
	if nl, ok := st.(storage.NameLister); ok {
		w.list, w.lazy = nl.ListNamePages, true // sizes and times of the unreferenced files only
	}
	if tl, ok := st.(storage.TempLister); ok {
		w.temps = map[string][]string{}
		w.list, w.lazy = func(ctx context.Context, dir string, fn func(page []storage.FileInfo) error) error {
			return tl.ListNamePagesTemps(ctx, dir, fn, func(name string) { w.temps[dir] = append(w.temps[dir], path.Join(dir, name)) })
		}, true
	}
	if _, err := w.walk(ctx, ""); err != nil {
		return res, fmt.Errorf("vacuum %s: %w", t, err)
	}
	dirs := w.dirs

	for _, d := range dirs {
		res.Files = append(res.Files, VacuumFile{Path: d, IsDir: true})
	}
	slices.SortFunc(res.Files, func(a, b VacuumFile) int { return strings.Compare(a.Path, b.Path) })
	if o.DryRun {
		return res, nil
	}
	del, ok := st.(storage.Deleter)
	if !ok {
		return res, fmt.Errorf("vacuum %s: the store cannot delete objects", t)
	}
	logged := logsVacuum(st.URI())
	if logged {
		params := map[string]string{
			"retentionCheckEnabled":  strconv.FormatBool(!o.Force),
			"defaultRetentionMillis": strconv.FormatInt(tableRet.Milliseconds(), 10),
		}
		if specified {
			params["specifiedRetentionMillis"] = strconv.FormatInt(retain.Milliseconds(), 10)
		}
		v, err := t.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Operation: "VACUUM START", OperationParameters: params,
			OperationMetrics: map[string]string{"numFilesToDelete": strconv.Itoa(len(res.Files)), "sizeOfDataToDelete": strconv.FormatInt(res.Bytes, 10)},
			EngineInfo:       o.EngineInfo})
		if err != nil {
			return res, fmt.Errorf("vacuum %s: commit VACUUM START: %w", t, err)
		}
		res.StartVersion = v
	}
	// Files first (sorted), then directories deepest first, so that each is empty by then.
	var delErr error
	files := make([]string, 0, len(res.Files))
	for _, f := range res.Files {
		if !f.IsDir {
			files = append(files, f.Path)
		}
	}
	n, err := storage.DeleteAll(ctx, st, files, vacuumDeletes)
	res.Deleted += n
	if err != nil {
		delErr = err
	}
	if delErr == nil {
		slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		var kept []string
		for _, d := range dirs {
			if err := del.Delete(ctx, d); err != nil {
				if errors.Is(err, storage.ErrNotEmpty) {
					// A writer put a file there since the listing, or is writing one
					// (in-flight files are not listed): the directory is in use.
					kept = append(kept, d)
					continue
				}
				delErr = fmt.Errorf("delete %s: %w", d, err)
				break
			}
			res.Deleted++
		}
		if len(kept) > 0 {
			res.Files = slices.DeleteFunc(res.Files, func(f VacuumFile) bool { return f.IsDir && slices.Contains(kept, f.Path) })
		}
	}
	if logged {
		end := deltawriter.Commit{ReadVersion: res.StartVersion, Operation: "VACUUM END", OperationParameters: map[string]string{"status": "COMPLETED"},
			OperationMetrics: map[string]string{"numDeletedFiles": strconv.Itoa(res.Deleted), "numVacuumedDirectories": strconv.Itoa(res.Dirs)},
			EngineInfo:       o.EngineInfo}
		if delErr != nil {
			end.OperationParameters["status"] = "FAILED"
			end.OperationMetrics = map[string]string{}
		}
		v, err := t.Commit(context.WithoutCancel(ctx), end)
		if err != nil && delErr == nil {
			return res, fmt.Errorf("vacuum %s: commit VACUUM END: %w", t, err)
		}
		if err == nil {
			res.EndVersion = v
		}
	}
	if delErr != nil {
		return res, fmt.Errorf("vacuum %s: %w", t, delErr)
	}
	return res, nil
}

// vacuumWalk lists a table's directories for VACUUM a page at a time and keeps only the
// candidates (res.Files, dirs), so that a directory of millions of files costs one page
// per directory level on top of the snapshot and the result.
type vacuumWalk struct {
	st       storage.Store
	list     func(ctx context.Context, dir string, fn func(page []storage.FileInfo) error) error
	lazy     bool // list gives names only: Stat the unreferenced files
	live     func(rel string) bool
	partCols []string
	res      *VacuumResult // Files, Bytes and Dirs are added to
	dirs     []string      // directories left empty, to delete after the files
	// temps holds, by directory, the temporary files its listing reported
	// (storage.TempLister; nil on other stores); now is VACUUM's clock.
	temps map[string][]string
	now   time.Time
}

// walk adds the deletable entries under dir and reports whether dir has no entry at all.
func (w *vacuumWalk) walk(ctx context.Context, dir string) (empty bool, err error) {
	n := 0
	var inner error // an error of a subdirectory or a Stat, not of this listing
	err = w.list(ctx, dir, func(page []storage.FileInfo) error {
		n += len(page)
		inner = w.page(ctx, dir, page)
		return inner
	})
	if inner != nil {
		return false, inner
	}
	if err != nil {
		return false, fmt.Errorf("list %s: %w", dir, err)
	}
	if temps := w.temps[dir]; len(temps) > 0 {
		delete(w.temps, dir)
		stale, err := staleTemps(ctx, w.st, temps, w.res.DeleteBefore, w.now)
		if err != nil {
			return false, err
		}
		for _, f := range stale {
			w.res.Files = append(w.res.Files, VacuumFile{Path: f.Name, Size: f.Size})
			w.res.Bytes += f.Size
		}
		n += len(temps) - len(stale) // a write in flight keeps its directory
	}
	w.res.Dirs++
	return n == 0, nil
}

// page adds the deletable entries of one listing page of dir, walking into its
// subdirectories.
func (w *vacuumWalk) page(ctx context.Context, dir string, page []storage.FileInfo) error {
	for _, e := range page {
		rel := e.Name
		if dir != "" {
			rel = dir + "/" + e.Name
		}
		if hiddenName(e.Name, w.partCols) {
			continue
		}
		if e.IsDir {
			empty, err := w.walk(ctx, rel)
			if err != nil {
				return err
			}
			if empty && !w.live(rel) {
				w.dirs = append(w.dirs, rel)
			}
			continue
		}
		if w.live(rel) {
			continue
		}
		if w.lazy {
			fi, err := w.st.Stat(ctx, rel)
			if storage.IsNotExist(err) {
				continue // deleted since the listing
			}
			if err != nil {
				return fmt.Errorf("stat %s: %w", rel, err)
			}
			e.Size, e.ModTime = fi.Size, fi.ModTime
		}
		if e.ModTime.Before(w.res.DeleteBefore) {
			w.res.Files = append(w.res.Files, VacuumFile{Path: rel, Size: e.Size})
			w.res.Bytes += e.Size
		}
	}
	return nil
}

// logsVacuum reports whether Spark writes VACUUM START / END commits on the table's store
// by default (spark.databricks.delta.vacuum.logging.enabled unset): Delta 4.x logs on
// file, gs, abfs(s), wasb(s), adl and hdfs, not on s3 (VacuumCommand.shouldLogVacuum).
func logsVacuum(uri string) bool {
	return !strings.HasPrefix(uri, "s3://") && !strings.HasPrefix(uri, "s3a://")
}

// relativePath returns an add/remove path relative to the table root, decoded, or false
// when it names a file outside the table.
func relativePath(root, p string) (string, bool) {
	c := deltalog.CanonicalPath(p)
	if !strings.Contains(c, "://") && !strings.HasPrefix(c, "/") {
		return path.Clean(c), true
	}
	r := deltalog.CanonicalPath(strings.TrimRight(root, "/"))
	if rel, ok := strings.CutPrefix(c, r+"/"); ok && rel != "" {
		return path.Clean(rel), true
	}
	return "", false
}

// partitionDirPrefixes are the "<column>=" prefixes of partition directory names (logical
// and physical column names: Spark names directories by the physical name under column
// mapping).
func partitionDirPrefixes(s *deltawriter.Snapshot) []string {
	var out []string
	for _, c := range s.Metadata.PartitionColumns {
		out = append(out, c+"=")
		if s.Schema != nil {
			for _, f := range s.Schema.Fields {
				if strings.EqualFold(f.Name, c) {
					out = append(out, f.PhysicalName(s.ColumnMapping)+"=")
				}
			}
		}
	}
	return out
}

// hiddenName is Spark's DeltaTableUtils.isHiddenDirectory: names starting with "_" or "."
// are not the table's data, except partition directories, _delta_index and _change_data;
// "metadata" is reserved for UniForm's Iceberg metadata.
func hiddenName(name string, partPrefixes []string) bool {
	if name == "metadata" {
		return true
	}
	if !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".") {
		return false
	}
	if strings.HasPrefix(name, "_delta_index") || strings.HasPrefix(name, "_change_data") {
		return false
	}
	for _, p := range partPrefixes {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return true
}

// dvPath returns the table-relative path of an on-disk deletion vector stored relative to
// the table (storageType "u": PROTOCOL.md, "Deletion Vector Descriptor Schema":
// pathOrInlineDv is a random prefix followed by the 20-character Z85 encoding of a UUID,
// the file is <prefix>/deletion_vector_<uuid>.bin), or false for inline ("i") and absolute
// ("p") ones.
func dvPath(dv *deltalog.DeletionVector) (string, bool) {
	if dv == nil || dv.StorageType != "u" || len(dv.PathOrInlineDv) < 20 {
		return "", false
	}
	enc := dv.PathOrInlineDv
	prefix, z := enc[:len(enc)-20], enc[len(enc)-20:]
	b, err := z85Decode(z)
	if err != nil {
		return "", false
	}
	uuid := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	name := "deletion_vector_" + uuid + ".bin"
	if prefix != "" {
		return prefix + "/" + name, true
	}
	return name, true
}

const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// z85Decode decodes ZeroMQ's Z85 (RFC 32/Z85), which Delta uses for deletion vector ids:
// every 5 characters are one big-endian 32-bit word.
func z85Decode(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, fmt.Errorf("decode z85 %q: length %d is not a multiple of 5", s, len(s))
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		var v uint64
		for _, c := range []byte(s[i : i+5]) {
			d := strings.IndexByte(z85Alphabet, c)
			if d < 0 {
				return nil, fmt.Errorf("decode z85 %q: invalid character %q", s, c)
			}
			v = v*85 + uint64(d)
		}
		if v > 0xFFFFFFFF {
			return nil, fmt.Errorf("decode z85 %q: word overflows", s)
		}
		out = append(out, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return out, nil
}
