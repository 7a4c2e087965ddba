// Package batcher accumulates items until a record count, a byte size or an age bound is
// reached. It is pure: no I/O, no clocks of its own (callers pass the time), no goroutines.
package batcher

import "time"

// Limits bound one batch. A zero field means "no bound" for that dimension.
type Limits struct {
	MaxRecords int           // items
	MaxBytes   int64         // bytes, as reported by the caller per item
	MaxAge     time.Duration // since the first item was added
}

// Batcher holds the items of the batch being built. It is not safe for concurrent use;
// its owner (one pipeline) serialises access.
type Batcher[T any] struct {
	limits  Limits
	items   []T
	bytes   int64
	started time.Time
}

// New returns an empty batcher with the given limits.
func New[T any](l Limits) *Batcher[T] { return &Batcher[T]{limits: l} }

// Add appends item, whose size is size bytes, at time now. It returns true when the batch
// has reached its record or byte bound and should be flushed.
func (b *Batcher[T]) Add(item T, size int64, now time.Time) bool {
	if len(b.items) == 0 {
		b.started = now
	}
	b.items = append(b.items, item)
	b.bytes += size
	return b.Full()
}

// Full reports whether the record or byte bound is reached.
func (b *Batcher[T]) Full() bool {
	return (b.limits.MaxRecords > 0 && len(b.items) >= b.limits.MaxRecords) ||
		(b.limits.MaxBytes > 0 && b.bytes >= b.limits.MaxBytes)
}

// Due reports whether the batch is non-empty and full or older than MaxAge at now.
func (b *Batcher[T]) Due(now time.Time) bool {
	if len(b.items) == 0 {
		return false
	}
	return b.Full() || (b.limits.MaxAge > 0 && now.Sub(b.started) >= b.limits.MaxAge)
}

// Deadline returns when the current batch reaches MaxAge; ok is false for an empty batch
// or when there is no age bound.
func (b *Batcher[T]) Deadline() (deadline time.Time, ok bool) {
	if len(b.items) == 0 || b.limits.MaxAge <= 0 {
		return time.Time{}, false
	}
	return b.started.Add(b.limits.MaxAge), true
}

// Len returns the number of items; Bytes their total size in bytes.
func (b *Batcher[T]) Len() int     { return len(b.items) }
func (b *Batcher[T]) Bytes() int64 { return b.bytes }

// Take returns the items in insertion order and leaves the batcher empty.
func (b *Batcher[T]) Take() []T {
	items := b.items
	b.items, b.bytes, b.started = nil, 0, time.Time{}
	return items
}

// Drop removes the items for which drop returns true (e.g. records of partitions lost in a
// rebalance), keeping order; size recomputes the byte total of what remains.
func (b *Batcher[T]) Drop(drop func(T) bool, size func(T) int64) {
	kept := b.items[:0]
	b.bytes = 0
	for _, it := range b.items {
		if !drop(it) {
			kept = append(kept, it)
			b.bytes += size(it)
		}
	}
	clear(b.items[len(kept):])
	b.items = kept
	if len(kept) == 0 {
		b.started = time.Time{}
	}
}
