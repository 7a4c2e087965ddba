package storage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recordSyncs replaces the fsync functions for one test: each fsync'd path is recorded,
// with whether the log entry at entry existed at that moment, and fail (when set) makes
// the fsync of that path fail.
func recordSyncs(t *testing.T, entry string, fail func(path string) error) (synced func() map[string]bool) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{} // path → the entry was visible when it was fsynced
	rec := func(real func(string) error) func(string) error {
		return func(p string) error {
			_, err := os.Stat(entry)
			mu.Lock()
			seen[p] = err == nil
			mu.Unlock()
			if fail != nil {
				if err := fail(p); err != nil {
					return err
				}
			}
			return real(p)
		}
	}
	oldFile, oldDir := syncFile, syncDirFn
	syncFile, syncDirFn = rec(fsyncPath), rec(syncDir)
	t.Cleanup(func() { syncFile, syncDirFn = oldFile, oldDir })
	return func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
}

// newTestLocal returns a Local on a new temporary root, the root, and the path of the
// table's first log entry there.
func newTestLocal(t *testing.T) (l *Local, root, entry string) {
	t.Helper()
	root = t.TempDir()
	l, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	return l, root, filepath.Join(root, "_delta_log", "00000000000000000000.json")
}

func writeObject(t *testing.T, l *Local, p string, data string) {
	t.Helper()
	w, err := l.Create(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// A data file written through Create is visible after Close, and the log entry that
// names it is linked only after the data file and its directory were fsynced (both
// before the entry existed), partition directories included; after the commit nothing is
// pending.
func TestLocalDataFilesDurableBeforeLogEntry(t *testing.T) {
	l, root, entry := newTestLocal(t)
	synced := recordSyncs(t, entry, nil)
	ctx := context.Background()
	writeObject(t, l, "part-0.parquet", "PAR1 data PAR1")
	writeObject(t, l, "yr=1970/part-1.parquet", "PAR1 more PAR1")
	if b, err := os.ReadFile(filepath.Join(root, "part-0.parquet")); err != nil || string(b) != "PAR1 data PAR1" {
		t.Fatalf("data file after Close: %q, %v", b, err)
	}
	if got := synced(); len(got) != 1 || !slices.Contains(keys(got), root) {
		t.Fatalf("fsyncs before the commit: %v, want only the table directory (created by mkdirAll for yr=1970)", keys(got))
	}
	if err := l.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(`{"commitInfo":{}}`)); err != nil {
		t.Fatal(err)
	}
	got := synced()
	for _, p := range []string{filepath.Join(root, "part-0.parquet"), filepath.Join(root, "yr=1970", "part-1.parquet"), root, filepath.Join(root, "yr=1970")} {
		visible, ok := got[p]
		if !ok {
			t.Errorf("%s was never fsynced; fsyncs: %v", p, keys(got))
		} else if visible && p != root {
			t.Errorf("%s was fsynced after the log entry became visible", p)
		}
	}
	if visible, ok := got[filepath.Join(root, "_delta_log")]; !ok || !visible {
		t.Errorf("_delta_log fsynced: %v, visible then: %v; want it fsynced after the link", ok, visible)
	}
	if files, dirs := l.pending.take(); len(files)+len(dirs) != 0 {
		t.Errorf("pending after the commit: %v %v", files, dirs)
	}
}

// A checkpoint written through Create is read by its name, not through a log entry that
// names it: Close fsyncs it before its name exists and its directory after, and leaves
// nothing pending for the next commit's Put, which fsyncs only its own files. A data file
// written through Create stays pending.
func TestLocalLogFileDurableBeforeVisible(t *testing.T) {
	l, root, _ := newTestLocal(t)
	logDir := filepath.Join(root, "_delta_log")
	cp := filepath.Join(logDir, "00000000000000000010.checkpoint.parquet")
	synced := recordSyncs(t, cp, nil)
	writeObject(t, l, "part-0.parquet", "PAR1 data PAR1")
	writeObject(t, l, "_delta_log/00000000000000000010.checkpoint.parquet", "PAR1 checkpoint PAR1")
	if b, err := os.ReadFile(cp); err != nil || string(b) != "PAR1 checkpoint PAR1" {
		t.Fatalf("checkpoint after Close: %q, %v", b, err)
	}
	got := synced()
	var tmps []string
	for p, visible := range got {
		if filepath.Dir(p) == logDir && strings.HasPrefix(filepath.Base(p), tmpPrefix) {
			tmps = append(tmps, p)
			if visible {
				t.Errorf("the checkpoint's temporary file %s was fsynced after the checkpoint became visible", p)
			}
		}
	}
	if len(tmps) != 1 {
		t.Errorf("fsyncs of a temporary file in _delta_log: %v, want exactly one; all fsyncs: %v", tmps, keys(got))
	}
	if visible, ok := got[logDir]; !ok || !visible {
		t.Errorf("_delta_log fsynced: %v, the checkpoint visible then: %v; want it fsynced after the rename", ok, visible)
	}
	if _, ok := got[filepath.Join(root, "part-0.parquet")]; ok {
		t.Error("the data file was fsynced by the checkpoint's Close; want it pending until the next Put")
	}
	files, dirs := l.pending.take()
	if want := []string{filepath.Join(root, "part-0.parquet")}; !slices.Equal(files, want) || !slices.Equal(dirs, []string{root}) {
		t.Errorf("pending after the checkpoint: files %v dirs %v, want %v and [%s]", files, dirs, want, root)
	}
}

// A failed fsync of a pending data file fails the Put before its name exists, and the
// next Put does not fsync it again (a retry's success would prove nothing: ErrDataLost),
// also through another Local of the same root, which shares the pending files.
func TestLocalFailedDataSyncPublishesNothing(t *testing.T) {
	l, root, entry := newTestLocal(t)
	data := filepath.Join(root, "part-0.parquet")
	failing := true
	synced := recordSyncs(t, entry, func(p string) error {
		if p == data && failing {
			return errors.New("EIO")
		}
		return nil
	})
	ctx := context.Background()
	writeObject(t, l, "part-0.parquet", "PAR1 data PAR1")
	err := l.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "EIO") {
		t.Fatalf("PutIfAbsent with a failing data fsync: %v, want the EIO", err)
	}
	if _, err := os.Stat(entry); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log entry after a failed fsync of its data file: %v, want none", err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(root, "_delta_log", tmpPrefix+"*")); len(tmp) != 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
	failing = false
	other, err := NewLocal(root + "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(`{}`)); !errors.Is(err, ErrDataLost) {
		t.Fatalf("PutIfAbsent after a failed fsync of a data file: %v, want ErrDataLost", err)
	}
	if _, err := os.Stat(entry); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log entry after a failed fsync of its data file: %v, want none", err)
	}
	if visible, ok := synced()[data]; !ok || visible {
		t.Fatalf("data file fsynced: %v, after the entry was visible: %v", ok, visible)
	}
}

// A pending data file removed before the commit (a failed flush's cleanup, VACUUM) is
// nothing to fsync: the next Put succeeds.
func TestLocalPendingFileRemoved(t *testing.T) {
	l, root, _ := newTestLocal(t)
	writeObject(t, l, "gone/part-0.parquet", "x")
	if err := os.RemoveAll(filepath.Join(root, "gone")); err != nil {
		t.Fatal(err)
	}
	if err := l.Put(context.Background(), "_last_checkpoint", []byte(`{}`)); err != nil {
		t.Fatalf("Put after a pending file and its directory were removed: %v", err)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Linux reports a failed writeback once: the fsync that sees the error returns EIO, the
// pages are marked clean, and a later fsync of the file (through any descriptor) returns
// success although the data never reached the disk (fsyncgate; PostgreSQL panics rather
// than retry). So once a pending data file's fsync has failed, no later Put under the
// root may take a later fsync's success as the file's durability: not the identical
// PutIfAbsent that Table.putCommit retries 50 ms later, nor a commit whose data file a
// checkpoint's Put drained and failed on, nor a Put through another Local of the root.
func TestLocalFailedDataSyncIsNotRetried(t *testing.T) {
	l, root, entry := newTestLocal(t)
	data := filepath.Join(root, "part-0.parquet")
	var mu sync.Mutex
	dataSyncs := 0
	recordSyncs(t, entry, func(p string) error {
		if p != data {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		dataSyncs++
		if dataSyncs == 1 {
			return errors.New("EIO") // reported once, as the kernel does
		}
		return nil
	})
	ctx := context.Background()
	writeObject(t, l, "part-0.parquet", "PAR1 data PAR1")
	// A background checkpoint's Put drains the data file and meets the EIO.
	if err := l.Put(ctx, "_delta_log/_last_checkpoint", []byte(`{}`)); err == nil {
		t.Fatal("Put with a failing data fsync succeeded")
	}
	// The commit naming the data file, and its identical retries.
	other, err := NewLocal(root + "/")
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range []*Local{l, l, other} {
		err := st.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(`{"add":{"path":"part-0.parquet"}}`))
		if !errors.Is(err, ErrDataLost) {
			t.Errorf("commit attempt %d after the data file's fsync failed: %v, want ErrDataLost", i+1, err)
		}
	}
	if _, err := os.Stat(entry); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log entry naming a data file whose fsync failed is visible: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "_delta_log", "_last_checkpoint")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("_last_checkpoint published after a failed fsync: %v", err)
	}
}

// A new partition directory whose entry in its parent could not be fsynced (mkdirAll's
// fsync of the parent failed, Create returned the error): the flush's retry creates its
// data file in the directory, which now exists, so mkdirAll fsyncs nothing; the commit
// must not be published, as the directory (and so the data file) may vanish in a crash.
func TestLocalNewDirectoryParentSyncFailed(t *testing.T) {
	l, root, entry := newTestLocal(t)
	failed := false
	recordSyncs(t, entry, func(p string) error {
		if p == root && !failed {
			failed = true
			return errors.New("EIO")
		}
		return nil
	})
	ctx := context.Background()
	if _, err := l.Create(ctx, "yr=1970/part-0.parquet"); err == nil {
		t.Fatal("Create with a failing fsync of the new directory's parent succeeded")
	}
	writeObject(t, l, "yr=1970/part-1.parquet", "PAR1 data PAR1") // the flush's retry
	err := l.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(`{"add":{"path":"yr=1970/part-1.parquet"}}`))
	if !errors.Is(err, ErrDataLost) {
		t.Errorf("commit after the new directory's parent fsync failed: %v, want ErrDataLost", err)
	}
	if _, err := os.Stat(entry); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log entry naming a file in a directory whose entry is not durable is visible: %v", err)
	}
}

// Two writers create files in one new partition directory: the first made the directory
// and is fsyncing its parent; the second finds the directory, writes its data file and
// commits. Its log entry must not be linked before the first's fsync of the parent has
// returned (the directory's entry, and so the second's data file, is not durable yet).
func TestLocalNewDirectoryConcurrentCreate(t *testing.T) {
	l, root, entry := newTestLocal(t)
	// _delta_log exists (an existing table): the commit fsyncs root for nothing of its own.
	if err := os.Mkdir(filepath.Join(root, "_delta_log"), 0o755); err != nil {
		t.Fatal(err)
	}
	inSync, release := make(chan struct{}), make(chan struct{})
	var blocked atomic.Bool
	recordSyncs(t, entry, func(p string) error {
		if p == root && blocked.CompareAndSwap(false, true) {
			close(inSync)
			<-release
		}
		return nil
	})
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		w, err := l.Create(ctx, "yr=1970/part-0.parquet")
		if err == nil {
			err = w.Close()
		}
		first <- err
	}()
	<-inSync // yr=1970 exists; the fsync of root that makes it durable has not returned
	second := make(chan error, 1)
	go func() {
		w, err := l.Create(ctx, "yr=1970/part-1.parquet")
		if err == nil {
			if _, err = w.Write([]byte("PAR1 data PAR1")); err == nil {
				err = w.Close()
			}
		}
		if err == nil {
			err = l.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(`{"add":{"path":"yr=1970/part-1.parquet"}}`))
		}
		second <- err
	}()
	var secondErr error
	secondDone := false
	select {
	case secondErr = <-second:
		secondDone = true
		t.Errorf("the second writer committed (err %v) while the new directory's parent fsync had not returned", secondErr)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := os.Stat(entry); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("log entry visible before its data file's directory is durable in its parent: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if !secondDone {
		secondErr = <-second
	}
	if secondErr != nil {
		t.Fatal(secondErr)
	}
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("log entry after both: %v", err)
	}
}

// Two Puts under one root at once (a commit beside a background checkpoint's Put): the
// one that finds nothing pending, because the other took the data file, publishes only
// after the data file's fsync has returned.
func TestLocalConcurrentPutsWaitForTheDrain(t *testing.T) {
	l, root, entry := newTestLocal(t)
	data := filepath.Join(root, "part-0.parquet")
	inSync, release := make(chan struct{}), make(chan struct{})
	recordSyncs(t, entry, func(p string) error {
		if p == data {
			close(inSync)
			<-release
		}
		return nil
	})
	ctx := context.Background()
	writeObject(t, l, "part-0.parquet", "PAR1 data PAR1")
	first := make(chan error, 1)
	go func() { first <- l.Put(ctx, "_delta_log/_last_checkpoint", []byte(`{}`)) }()
	<-inSync // the first Put holds the data file, its fsync not returned
	second := make(chan error, 1)
	go func() { second <- l.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(`{}`)) }()
	select {
	case err := <-second:
		t.Fatalf("the log entry was published (err %v) while its data file's fsync had not returned", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := os.Stat(entry); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("log entry visible before its data file is durable: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

// BenchmarkLocalCommit times one local commit as a flush makes it: a 1 MiB data file
// written through Create and Close, then its log entry through PutIfAbsent, in ms per
// commit. "serial" makes the data file durable before the log entry is written (its
// fsync, then its directory's, as Close did before the data file's durability moved to
// the next Put): four fsync latencies in series; "overlapped" is Local as it is: the
// data file and its directory fsynced concurrently with the log entry's temporary file.
func BenchmarkLocalCommit(b *testing.B) {
	data := make([]byte, 1<<20)
	for _, serial := range []bool{true, false} {
		b.Run(map[bool]string{true: "serial", false: "overlapped"}[serial], func(b *testing.B) {
			root := b.TempDir()
			l, err := NewLocal(root)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			v := 0
			for b.Loop() {
				name := fmt.Sprintf("part-%05d.parquet", v)
				w, err := l.Create(ctx, name)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := w.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				if serial {
					if err := fsyncPath(filepath.Join(root, name)); err != nil {
						b.Fatal(err)
					}
					if err := syncDir(root); err != nil {
						b.Fatal(err)
					}
					l.pending.take()
				}
				if err := l.PutIfAbsent(ctx, fmt.Sprintf("_delta_log/%020d.json", v), []byte(`{"add":{}}`)); err != nil {
					b.Fatal(err)
				}
				v++
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/commit")
		})
	}
}
