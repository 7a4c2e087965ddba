package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sync/errgroup"
)

// Local is a Store on a POSIX filesystem. Put and PutIfAbsent write a hidden temporary
// file in the target directory, fsync it, publish it with rename (Put) or link (PutIfAbsent,
// which fails with EEXIST if the name is taken — never check-then-rename), and fsync the
// directory so the new name is durable.
//
// A file written through Create (a data file, a deletion vector) is published by Close
// with rename but made durable later: Close adds it to the root's pending files, and the
// next Put or PutIfAbsent under the same root — the log entry that names it — first
// fsyncs every pending file and its directory, concurrently with its own
// temporary file, and publishes its name only after all of them are durable. A crash
// before that may leave a data file empty or missing, but never one that a durable log
// entry names (PROTOCOL.md, "Delta Log Entries": the files an add names must exist before
// the commit is visible). A local commit so waits for two fsync latencies (its temporary
// file beside the data files and their directories, then its own directory) instead of
// four in series (BenchmarkLocalCommit; docs/performance.md). A failed fsync of a pending
// file or directory, or of a new directory's parent, is never retried: every later Put
// under the root fails with ErrDataLost. A file Create writes under _delta_log (a
// checkpoint, a sidecar) is different: readers find it by its name, so its Close fsyncs
// it before the rename and its directory after, on the writer's goroutine (the background
// checkpoint's, not the next commit's).
type Local struct {
	root    string
	pending *pendingFiles
}

// ErrDataLost is wrapped by the Put and PutIfAbsent of a Local whose root had an fsync
// fail (a pending data file, its directory, or a new directory's parent): Linux reports a
// failed writeback once and marks the pages clean, so a later fsync's success does not
// make the data durable (PostgreSQL's "fsyncgate"), and any log entry published after it
// could name a file that a crash empties or removes. Nothing more is published under the
// root by this process; a restart writes the batch again into new files.
var ErrDataLost = errors.New("an fsync under the table root failed: files written before it may not be on disk; restart ingestd to write them again")

// pendingFiles are the files of one root published by a Writer's Close and not yet
// fsynced, by full path.
type pendingFiles struct {
	// drain is held through a Put's fsyncs (Local.durable): a Put that finds nothing
	// pending because another Put took the files must not publish before their fsyncs
	// have returned.
	drain sync.Mutex
	// mkdir is held for writing while mkdirAll creates directories and fsyncs their
	// parents, and for reading by mkdirAll's check that a directory exists: a Create that
	// finds a new directory finds it durable in its parent (or the root lost).
	mkdir sync.RWMutex
	mu    sync.Mutex
	files map[string]struct{}
	lost  error // the first failed fsync (wrapping ErrDataLost): no Put publishes after it
}

// pendingByRoot shares one pendingFiles between the Locals of one root, so that a log
// entry written through any of them makes the files written through the others durable.
var pendingByRoot sync.Map // root → *pendingFiles

// syncFile and syncDirFn are fsync(2) of a file and of a directory by path; tests replace
// them to record the order of the fsyncs.
var (
	syncFile  = fsyncPath
	syncDirFn = syncDir
)

// maxConcurrentSyncs bounds the fsyncs in flight while a Put drains the pending files (a
// partitioned flush may leave hundreds).
const maxConcurrentSyncs = 16

// NewLocal returns a Store rooted at the absolute directory root. The directory need
// not exist yet; it is created on the first write.
func NewLocal(root string) (*Local, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("open local store %q: path must be absolute", root)
	}
	root = filepath.Clean(root)
	pf, _ := pendingByRoot.LoadOrStore(root, &pendingFiles{files: map[string]struct{}{}})
	return &Local{root: root, pending: pf.(*pendingFiles)}, nil
}

// add records a file published by a Writer's Close and not yet durable.
func (p *pendingFiles) add(file string) {
	p.mu.Lock()
	p.files[file] = struct{}{}
	p.mu.Unlock()
}

// take returns and forgets the pending files, and returns the directories holding them
// (each once).
func (p *pendingFiles) take() (files, dirs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for f := range p.files {
		files = append(files, f)
		if d := filepath.Dir(f); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	clear(p.files)
	return files, dirs
}

// fail records that the fsync of path failed and returns the root's lost error (the
// first such failure, wrapping ErrDataLost): a later fsync of the file cannot be
// trusted, so no later Put under the root publishes anything.
func (p *pendingFiles) fail(path string, err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost == nil {
		p.lost = fmt.Errorf("%w: fsync %s: %w", ErrDataLost, path, err)
	}
	return p.lost
}

// lostErr returns the root's lost error, or nil when no fsync under it has failed.
func (p *pendingFiles) lostErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// fsyncPath opens the file at path and fsyncs it: the data written through any
// descriptor of the file becomes durable (fsync(2)).
func fsyncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// durable fsyncs tmp (a Put's temporary file, which the caller then publishes) and,
// concurrently, every pending file of the root and each pending file's directory, after
// any other Put's drain of the root has returned. A file or directory removed since (a
// data file VACUUM or a failed flush's cleanup removed) is nothing to make durable. A failed fsync of a pending file or
// directory is not retried (a retry's success proves nothing: see ErrDataLost): it and
// every later call return the root's lost error. A failed fsync of tmp alone fails this
// Put only (the pending files were made durable).
func (l *Local) durable(tmp *os.File) error {
	l.pending.drain.Lock()
	defer l.pending.drain.Unlock()
	if err := l.pending.lostErr(); err != nil {
		return err
	}
	files, dirs := l.pending.take()
	var g errgroup.Group
	g.SetLimit(maxConcurrentSyncs)
	var tmpErr error
	g.Go(func() error { tmpErr = tmp.Sync(); return nil })
	paths := slices.Concat(files, dirs)
	errs := make([]error, len(paths))
	for i, p := range paths {
		fsync := syncFile
		if i >= len(files) {
			fsync = syncDirFn
		}
		g.Go(func() error {
			if err := fsync(p); !errors.Is(err, fs.ErrNotExist) { // removed since: nothing to make durable
				errs[i] = err
			}
			return nil
		})
	}
	_ = g.Wait()
	for i, err := range errs {
		if err != nil {
			return l.pending.fail(paths[i], err)
		}
	}
	return tmpErr
}

// Root returns the absolute directory of the table root.
func (l *Local) Root() string { return l.root }

// URI returns file://<root>.
func (l *Local) URI() string { return "file://" + filepath.ToSlash(l.root) }

func (l *Local) abs(p string) (string, error) {
	rel, err := cleanRel(p)
	if err != nil {
		return "", err
	}
	return filepath.Join(l.root, rel), nil
}

// Get implements Store.
func (l *Local) Get(ctx context.Context, p string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a, err := l.abs(p)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", p, err)
	}
	b, err := os.ReadFile(a)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", p, err)
	}
	return b, nil
}

// GetRange implements RangeGetter: length bytes from offset off of the file at p.
func (l *Local) GetRange(ctx context.Context, p string, off, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a, err := l.abs(p)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", p, err)
	}
	f, err := os.Open(a)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", p, err)
	}
	defer f.Close()
	b := make([]byte, length)
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return b, nil
	}
	return nil, fmt.Errorf("get %s: %d bytes at %d: %w", p, n, off, err)
}

// Stat implements Store.
func (l *Local) Stat(ctx context.Context, p string) (FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return FileInfo{}, err
	}
	a, err := l.abs(p)
	if err != nil {
		return FileInfo{}, fmt.Errorf("stat %s: %w", p, err)
	}
	fi, err := os.Stat(a)
	if err != nil {
		return FileInfo{}, fmt.Errorf("stat %s: %w", p, err)
	}
	return FileInfo{Name: fi.Name(), Size: fi.Size(), ModTime: fi.ModTime(), IsDir: fi.IsDir()}, nil
}

// List implements Store: ListPages gathered and sorted by name.
func (l *Local) List(ctx context.Context, dir string) ([]FileInfo, error) {
	var out []FileInfo
	err := l.ListPages(ctx, dir, func(page []FileInfo) error {
		out = append(out, page...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ListPages implements Store: getdents of MaxListPage entries at a time, an lstat per
// entry. Entries whose names start with ".tmp-" (in-flight writes of this store) are
// skipped.
func (l *Local) ListPages(ctx context.Context, dir string, fn func(page []FileInfo) error) error {
	return l.readDirPages(ctx, dir, true, fn, nil)
}

const tmpPrefix = ".tmp-"

// ListNamePages implements NameLister: getdents only, no lstat per entry and no sort.
func (l *Local) ListNamePages(ctx context.Context, dir string, fn func(page []FileInfo) error) error {
	return l.readDirPages(ctx, dir, false, fn, nil)
}

// ListNamePagesTemps implements TempLister: ListNamePages, and temp is called with the
// name of each ".tmp-" file in dir (an in-flight write, or one a killed writer left).
func (l *Local) ListNamePagesTemps(ctx context.Context, dir string, fn func(page []FileInfo) error, temp func(name string)) error {
	return l.readDirPages(ctx, dir, false, fn, temp)
}

// readDirPages reads directory dir ("" or "." is the root) MaxListPage entries at a time
// and calls fn with each non-empty page, with sizes and times (sorted by name) when info
// is set, and temp (when not nil) with the name of each temporary file, which pages
// leave out. A missing dir gives no page.
func (l *Local) readDirPages(ctx context.Context, dir string, info bool, fn func(page []FileInfo) error, temp func(name string)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a := l.root
	if dir != "" && dir != "." {
		var err error
		if a, err = l.abs(dir); err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
	}
	f, err := os.Open(a)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	defer f.Close()
	page := make([]FileInfo, 0, MaxListPage)
	for {
		ents, rerr := f.ReadDir(MaxListPage)
		page = page[:0]
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				if temp != nil && !e.IsDir() {
					temp(e.Name())
				}
				continue
			}
			fi := FileInfo{Name: e.Name(), IsDir: e.IsDir()}
			if info {
				st, err := e.Info()
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed since it was read
				}
				if err != nil {
					return fmt.Errorf("list %s: %w", dir, err)
				}
				fi.Size, fi.ModTime, fi.IsDir = st.Size(), st.ModTime(), st.IsDir()
			}
			page = append(page, fi)
		}
		if len(page) > 0 {
			if info {
				slices.SortFunc(page, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) })
			}
			if err := fn(page); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("list %s: %w", dir, rerr)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Delete implements Deleter: it removes the file, or the directory when it is empty, at p.
// A missing p is not an error; a non-empty directory is, wrapping ErrNotEmpty (VACUUM
// deletes files first and their directories once empty, and keeps a directory that
// gained an entry since it was listed).
func (l *Local) Delete(ctx context.Context, p string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a, err := l.abs(p)
	if err != nil {
		return fmt.Errorf("delete %s: %w", p, err)
	}
	if err := os.Remove(a); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("delete %s: %w", p, ErrNotEmpty)
		}
		return fmt.Errorf("delete %s: %w", p, err)
	}
	return nil
}

// Put implements Store: temp file + fsync + rename + directory fsync.
func (l *Local) Put(ctx context.Context, p string, data []byte) error {
	return l.put(ctx, p, data, false)
}

// PutIfAbsent implements Store: temp file + fsync + link(2) (EEXIST if taken) + remove
// temp + directory fsync. It returns an error wrapping ErrExist when p exists.
func (l *Local) PutIfAbsent(ctx context.Context, p string, data []byte) error {
	return l.put(ctx, p, data, true)
}

func (l *Local) put(ctx context.Context, p string, data []byte, exclusive bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w, err := l.Create(ctx, p)
	if err != nil {
		return err
	}
	lw := w.(*localWriter)
	lw.exclusive, lw.publishes = exclusive, true
	if _, err := lw.Write(data); err != nil {
		_ = lw.Abort()
		return err
	}
	return lw.Close()
}

// Create implements Store. The object is written to a hidden temporary file next to p
// and published by Close with rename (replacing any existing object).
func (l *Local) Create(ctx context.Context, p string) (Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a, err := l.abs(p)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", p, err)
	}
	dir := filepath.Dir(a)
	if err := l.mkdirAll(dir); err != nil {
		return nil, fmt.Errorf("create %s: %w", p, err)
	}
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", p, err)
	}
	// CreateTemp makes 0600 files; table files must be readable by other engines' users
	// (Spark, Trino service accounts) like any file the process creates (umask applies).
	if err := f.Chmod(os.FileMode(0o644 &^ umask)); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("create %s: %w", p, err)
	}
	return &localWriter{f: f, final: a, rel: p, local: l, logFile: isLogPath(p)}, nil
}

// isLogPath reports whether p (relative to the root) is under _delta_log: a checkpoint,
// a sidecar or a log entry, which readers find by its name (a listing) rather than
// through a durable log entry that names it.
func isLogPath(p string) bool {
	return strings.HasPrefix(filepath.ToSlash(filepath.Clean(p)), "_delta_log/")
}

// mkdirAll creates dir and its missing parents, fsyncing each parent whose entries
// changed so the new directories survive a crash. A Create that finds dir existing while
// another creates it waits for that one's fsyncs (pending.mkdir); a failed fsync of a
// parent makes the root lost (a later Create finds the directory and fsyncs nothing).
func (l *Local) mkdirAll(dir string) error {
	l.pending.mkdir.RLock()
	fi, err := os.Stat(dir)
	l.pending.mkdir.RUnlock()
	if err == nil && fi.IsDir() {
		return nil
	}
	l.pending.mkdir.Lock()
	defer l.pending.mkdir.Unlock()
	return l.mkdirAllLocked(dir)
}

func (l *Local) mkdirAllLocked(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := l.mkdirAllLocked(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	if err := syncDirFn(parent); err != nil {
		return l.pending.fail(parent, err)
	}
	return nil
}

type localWriter struct {
	f         *os.File
	final     string
	rel       string
	local     *Local
	exclusive bool // publish with link(2): fail if final exists
	publishes bool // a Put: durable with every pending file before it is published
	// logFile: a Create'd file under _delta_log (a checkpoint, a sidecar), fsynced before
	// it is published and its directory after: readers find it by its name.
	logFile bool
	done    bool
	written int64 // bytes written
	queued  int64 // bytes handed to startWriteback
}

// writebackChunk is how many bytes a Create'd file accumulates before their writeback to
// the device is started (startWriteback). A file of many MiB (a checkpoint of 10⁶ files
// is 17 MB, a data file up to the batch's size) is then mostly on the device when the
// next Put fsyncs it, so that Put, and the commits waiting behind its drain lock, do not
// wait for all of it (BenchmarkPutAfterLargeCreate: the slowest Put after a 17 MiB data
// file 2.0–2.3 ms instead of 8.7–11.2 ms). A variable for that benchmark.
var writebackChunk int64 = 4 << 20

func (w *localWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	w.written += int64(n)
	if err != nil {
		return n, fmt.Errorf("write %s: %w", w.rel, err)
	}
	if w.written-w.queued >= writebackChunk {
		startWriteback(w.f, w.queued, w.written-w.queued)
		w.queued = w.written
	}
	return n, nil
}

func (w *localWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	_ = w.f.Close()
	return os.Remove(w.f.Name())
}

// Close publishes the object under its final name. A Put's object (publishes) is made
// durable first, with every pending file of the root (Local.durable), then linked or
// renamed, and its directory fsynced. A Create's object under _delta_log (a checkpoint or
// a sidecar: readers find it by its name, so a crash must not leave that name on a file
// that is empty or short) is fsynced, renamed, and its directory fsynced, by the writer
// that made it and not by the next commit's Put. Any other Create'd object is renamed and
// becomes pending, durable when the next Put under the root returns (see Local).
func (w *localWriter) Close() error {
	if w.done {
		return fmt.Errorf("close %s: writer already closed", w.rel)
	}
	w.done = true
	tmp := w.f.Name()
	if w.publishes {
		if err := w.local.durable(w.f); err != nil {
			_ = w.f.Close()
			_ = os.Remove(tmp)
			return fmt.Errorf("sync %s and the files before it: %w", w.rel, err)
		}
	} else if w.logFile {
		if err := syncFile(tmp); err != nil {
			_ = w.f.Close()
			_ = os.Remove(tmp)
			return fmt.Errorf("sync %s: %w", w.rel, err)
		}
	}
	if err := w.f.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("close %s: %w", w.rel, err)
	}
	if w.exclusive {
		err := os.Link(tmp, w.final)
		_ = os.Remove(tmp)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("put %s: %w", w.rel, ErrExist)
			}
			return fmt.Errorf("link %s: %w", w.rel, err)
		}
	} else if err := os.Rename(tmp, w.final); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rename %s: %w", w.rel, err)
	}
	if !w.publishes && !w.logFile {
		w.local.pending.add(w.final)
		return nil
	}
	if err := syncDirFn(filepath.Dir(w.final)); err != nil {
		return fmt.Errorf("sync directory of %s: %w", w.rel, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
