// Package batcher buffers a pipeline's records until a flush is due: a record count, a
// byte size or an age bound is reached, or the hold of records kept back after a failed
// flush ends. It is pure: no I/O, no clocks of its own (callers pass the time), no
// goroutines.
//
// Items are grouped by a key (a source partition). The batcher keeps one ordering
// promise: a key's items are handed out oldest first, and never while an older item of
// the same key is still held back, so a key's progress (its Delta txn) never passes an
// item that is still waiting.
package batcher

import "time"

// Limits bound one batch. A zero field means "no bound" for that dimension.
type Limits struct {
	MaxRecords int           // items
	MaxBytes   int64         // bytes, as reported by the caller per item
	MaxAge     time.Duration // since the first item was added
}

// Trigger says why a flush is due.
type Trigger uint8

// Triggers, in the order Due checks them.
const (
	TriggerNone     Trigger = iota // nothing is due
	TriggerRecords                 // Limits.MaxRecords reached
	TriggerBytes                   // Limits.MaxBytes reached
	TriggerAge                     // the oldest fresh item is Limits.MaxAge old
	TriggerRetry                   // the hold of a key with held-back items ended
	TriggerRevoke                  // the caller takes keys that move elsewhere (TakeKeys)
	TriggerShutdown                // the caller drains everything (Take with force)
)

var triggerNames = [...]string{"none", "records", "bytes", "age", "retry", "revoke", "shutdown"}

// String returns the trigger's name, as used in metric labels: "records", "bytes", "age",
// "retry", "revoke", "shutdown" (or "none").
func (t Trigger) String() string {
	if int(t) < len(triggerNames) {
		return triggerNames[t]
	}
	return "unknown"
}

// Triggers returns every trigger a flush can have (all but TriggerNone).
func Triggers() []Trigger {
	return []Trigger{TriggerRecords, TriggerBytes, TriggerAge, TriggerRetry, TriggerRevoke, TriggerShutdown}
}

// Hold is the hold of one key, as set by Batcher.Hold.
type Hold[K comparable] struct {
	Key     K
	Attempt int       // holds of Key since its last Release, this one included: 1 for the first
	Until   time.Time // Take skips Key's items before this time
}

// Batcher holds fresh items (the batch being built, bounded by Limits) and held-back
// items (given back with Hold after a failed flush, each key on hold until a time). It is
// not safe for concurrent use; its owner (one pipeline) serialises access.
type Batcher[K comparable, T any] struct {
	limits  Limits
	key     func(T) K
	fresh   []entry[T]
	bytes   int64     // of fresh
	started time.Time // when the first fresh item was added
	held    []T       // held-back items, each key's oldest first
	holds   map[K]*hold[K]
}

type entry[T any] struct {
	item T
	size int64
}

type hold[K comparable] struct {
	until time.Time
	count int
}

// New returns an empty batcher with the given limits; key returns an item's key.
func New[K comparable, T any](l Limits, key func(T) K) *Batcher[K, T] {
	return &Batcher[K, T]{limits: l, key: key, holds: map[K]*hold[K]{}}
}

// Add appends item, whose size is size bytes, at time now. It returns true when the fresh
// items reach the record or byte bound: the caller should Take and flush.
func (b *Batcher[K, T]) Add(item T, size int64, now time.Time) bool {
	if len(b.fresh) == 0 {
		b.started = now
	}
	b.fresh = append(b.fresh, entry[T]{item, size})
	b.bytes += size
	return b.full() != TriggerNone
}

func (b *Batcher[K, T]) full() Trigger {
	switch {
	case b.limits.MaxRecords > 0 && len(b.fresh) >= b.limits.MaxRecords:
		return TriggerRecords
	case b.limits.MaxBytes > 0 && b.bytes >= b.limits.MaxBytes:
		return TriggerBytes
	}
	return TriggerNone
}

// Due returns why a flush is due at now: TriggerRecords or TriggerBytes when the fresh
// items reach a bound, TriggerAge when the oldest fresh one is MaxAge old, TriggerRetry
// when a held-back item's key is no longer on hold; TriggerNone when nothing is due.
func (b *Batcher[K, T]) Due(now time.Time) Trigger {
	if len(b.fresh) > 0 {
		if t := b.full(); t != TriggerNone {
			return t
		}
		if b.limits.MaxAge > 0 && now.Sub(b.started) >= b.limits.MaxAge {
			return TriggerAge
		}
	}
	for _, it := range b.held {
		if !b.onHold(b.key(it), now) {
			return TriggerRetry
		}
	}
	return TriggerNone
}

func (b *Batcher[K, T]) onHold(k K, now time.Time) bool {
	h := b.holds[k]
	return h != nil && now.Before(h.until)
}

// Take removes and returns the items of every key not on hold at now, held-back items
// first, each key's in order, with the trigger that made the flush due. When nothing is
// due it returns nil, TriggerNone and changes nothing. With force, it returns every item
// (holds are ignored, but kept: see Release) with TriggerShutdown. Fresh items of a key on
// hold are kept behind that key's held-back items; they no longer count toward Limits.
func (b *Batcher[K, T]) Take(now time.Time, force bool) ([]T, Trigger) {
	trigger := TriggerShutdown
	if !force {
		if trigger = b.Due(now); trigger == TriggerNone {
			return nil, TriggerNone
		}
	}
	out := make([]T, 0, len(b.held)+len(b.fresh))
	var kept []T
	for _, it := range b.held {
		if !force && b.onHold(b.key(it), now) {
			kept = append(kept, it)
		} else {
			out = append(out, it)
		}
	}
	if force || len(b.holds) == 0 {
		// No key is on hold: every fresh item goes, and no item's key is computed (a key
		// reads the item, e.g. a Kafka record a whole batch ago: a cache miss each).
		for _, e := range b.fresh {
			out = append(out, e.item)
		}
	} else {
		for _, e := range b.fresh {
			if b.onHold(b.key(e.item), now) {
				kept = append(kept, e.item)
			} else {
				out = append(out, e.item)
			}
		}
	}
	b.held = kept
	// The next batch reuses fresh's array (a batch of max_records grows it once, not every
	// time); clear lets the taken items go.
	clear(b.fresh)
	b.fresh, b.bytes, b.started = b.fresh[:0], 0, time.Time{}
	if len(out) == 0 {
		return nil, TriggerNone
	}
	return out, trigger
}

// TakeKeys removes and returns every item whose key is in keys (e.g. partitions revoked
// in a rebalance), held-back ones first, each key's in order, whatever their holds. The
// holds stay until Release.
func (b *Batcher[K, T]) TakeKeys(keys func(K) bool) []T {
	var out, held []T
	for _, it := range b.held {
		if keys(b.key(it)) {
			out = append(out, it)
		} else {
			held = append(held, it)
		}
	}
	b.held = held
	fresh := b.fresh[:0]
	b.bytes = 0
	for _, e := range b.fresh {
		if keys(b.key(e.item)) {
			out = append(out, e.item)
		} else {
			fresh = append(fresh, e)
			b.bytes += e.size
		}
	}
	clear(b.fresh[len(fresh):])
	b.fresh = fresh
	if len(fresh) == 0 {
		b.fresh, b.started = nil, time.Time{}
	}
	return out
}

// Hold gives back items of a failed flush (as returned by Take or TakeKeys, in that
// order) and puts each of their keys on hold: Take skips a key until now + wait(n), n
// being the number of earlier holds of the key since its last Release (0 for the first),
// so the caller's backoff grows per key. The items go ahead of every other item of their
// key. It returns the new hold of each key, in the order the keys first appear in items.
func (b *Batcher[K, T]) Hold(items []T, now time.Time, wait func(n int) time.Duration) []Hold[K] {
	if len(items) == 0 {
		return nil
	}
	var out []Hold[K]
	seen := map[K]bool{}
	for _, it := range items {
		k := b.key(it)
		if seen[k] {
			continue
		}
		seen[k] = true
		h := b.holds[k]
		if h == nil {
			h = &hold[K]{}
			b.holds[k] = h
		}
		h.until = now.Add(wait(h.count))
		h.count++
		out = append(out, Hold[K]{Key: k, Attempt: h.count, Until: h.until})
	}
	b.held = append(append(make([]T, 0, len(items)+len(b.held)), items...), b.held...)
	return out
}

// Release ends the hold of key (its items were committed, or the key is no longer the
// caller's) and returns how many holds it had; ok is false when key was not on hold.
func (b *Batcher[K, T]) Release(key K) (holds int, ok bool) {
	h := b.holds[key]
	if h == nil {
		return 0, false
	}
	delete(b.holds, key)
	return h.count, true
}

// Deadline returns when a flush falls due without new items: the fresh items' age bound,
// or the earliest end of a hold of a key with held-back items (a held-back item whose key
// is not on hold is due at once: the zero time). ok is false when nothing will fall due.
func (b *Batcher[K, T]) Deadline() (deadline time.Time, ok bool) {
	if len(b.fresh) > 0 && b.limits.MaxAge > 0 {
		deadline, ok = b.started.Add(b.limits.MaxAge), true
	}
	for _, it := range b.held {
		var until time.Time
		if h := b.holds[b.key(it)]; h != nil {
			until = h.until
		}
		if !ok || until.Before(deadline) {
			deadline, ok = until, true
		}
	}
	return deadline, ok
}

// Len returns the number of items, fresh and held back.
func (b *Batcher[K, T]) Len() int { return len(b.fresh) + len(b.held) }

// Holding returns the number of keys on hold (their hold may have ended: a key stays on
// hold until Release).
func (b *Batcher[K, T]) Holding() int { return len(b.holds) }
