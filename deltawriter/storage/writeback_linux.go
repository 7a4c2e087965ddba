package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing the n bytes of f at off to the device
// without waiting for them (sync_file_range(2), SYNC_FILE_RANGE_WRITE). It is advisory:
// durability still comes from the fsync of Local.durable, which then finds most of the
// file already written instead of flushing it all while holding the root's drain lock
// that the commits' Puts wait on. An error is ignored: a write the device fails is
// reported by that fsync.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
