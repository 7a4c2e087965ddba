package ingest

import (
	"runtime/debug"
	"sync"
)

// MemoryLimit is the process's soft memory limit (runtime/debug.SetMemoryLimit, bytes)
// when ingestd manages it: a base the command computes from the pipelines' batch.max_bytes
// and its headroom, plus the bytes each keyed pipeline's key index holds. An index lives
// as long as its pipeline and is not part of batch.max_bytes; left out of the limit, a
// 10 M-key index (about 400 MiB) would keep the heap above a limit sized for the batches
// alone, and the collector would run continuously (at 10 M keys it halved the upsert
// flush's throughput). docs/architecture.md, "Memory".
//
// A nil *MemoryLimit is valid and does nothing: the limit is not managed (GOMEMLIMIT is
// set, or a command that sets none).
type MemoryLimit struct {
	mu    sync.Mutex
	base  int64
	extra map[string]int64
	set   func(int64) int64
}

// reserveStep rounds a reservation up, in bytes, so that an index growing by a few keys
// per commit does not reset the runtime's limit at every commit.
const reserveStep = 16 << 20

// NewMemoryLimit returns a MemoryLimit of base bytes that sets the runtime's soft memory
// limit; it does not set it until the first Reserve (the command has already set base).
func NewMemoryLimit(base int64) *MemoryLimit {
	return &MemoryLimit{base: base, extra: map[string]int64{}, set: debug.SetMemoryLimit}
}

// Reserve records that owner (a pipeline's name) holds bytes outside its batches (its
// key index), rounded up to 16 MiB, replacing what it reserved before, and sets the limit
// to the base plus every owner's bytes when that changes. Reserving 0 releases owner's
// share.
func (l *MemoryLimit) Reserve(owner string, bytes int64) {
	if l == nil {
		return
	}
	bytes = (bytes + reserveStep - 1) / reserveStep * reserveStep
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.extra[owner] == bytes {
		return
	}
	if bytes == 0 {
		delete(l.extra, owner)
	} else {
		l.extra[owner] = bytes
	}
	l.set(l.limitLocked())
}

// Limit returns the limit in bytes: the base plus every owner's reserved bytes.
func (l *MemoryLimit) Limit() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limitLocked()
}

func (l *MemoryLimit) limitLocked() int64 {
	n := l.base
	for _, b := range l.extra {
		n += b
	}
	return n
}
