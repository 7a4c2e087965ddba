//go:build unix

package keyindex

import (
	"syscall"
	"time"
)

// cpuTime is the process's user plus system CPU time so far (every thread: the
// benchmark's goroutines and the garbage collector), which a shared machine's other load
// does not inflate as it does wall time.
func cpuTime() time.Duration {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
