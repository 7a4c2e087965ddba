package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Linux reports a failed writeback once: the fsync that sees the error returns EIO, the
// pages are marked clean, and a later fsync of the file (through any descriptor) returns
// success although the data never reached the disk (fsyncgate; PostgreSQL panics rather
// than retry). So once a pending data file's fsync has failed, no later Put under the
// root may take a later fsync's success as the file's durability: not the identical
// PutIfAbsent that Table.putCommit retries 50 ms later, nor a commit whose data file a
// checkpoint's Put drained and failed on, nor a Put through another Local of the root.
func TestLocalFailedDataSyncIsNotRetried(t *testing.T) {
	root := t.TempDir()
	l, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "part-0.parquet")
	entry := filepath.Join(root, "_delta_log", "00000000000000000000.json")
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
	root := t.TempDir()
	l, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(root, "_delta_log", "00000000000000000000.json")
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
	err = l.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(`{"add":{"path":"yr=1970/part-1.parquet"}}`))
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
	root := t.TempDir()
	l, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(root, "_delta_log", "00000000000000000000.json")
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
