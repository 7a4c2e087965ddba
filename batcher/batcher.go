package batcher

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Limits bound one batch. MaxBytes bounds everything the batcher holds, fresh and
// held-back items together (a memory bound: a batch taken after a failed flush, its
// held-back items first and then fresh ones, stays within it too), except that the
// held-back items of a key on hold count half their size: they are in no batch until
// their hold ends, so they wait beside both the batch being filled and the one the caller
// has in flight (at most one, of at most MaxBytes), and are charged half to each; both
// batches then hold at most MaxBytes minus half of them, and all together stay within
// 2 × MaxBytes (plus the last item of each batch). MaxRecords and MaxAge bound the fresh
// items. A zero field means "no bound" for that dimension.
type Limits struct {
	MaxRecords int           // fresh items
	MaxBytes   int64         // bytes: the sum of the sizes of the items held (as given to Add and Hold), held-back items of a key on hold at half theirs
	MaxAge     time.Duration // since the first fresh item was added
}

// Trigger says why a flush is due.
type Trigger uint8

// Triggers, in the order Due checks them.
const (
	TriggerNone     Trigger = iota // nothing is due
	TriggerRecords                 // Limits.MaxRecords reached (fresh items)
	TriggerBytes                   // Limits.MaxBytes reached (fresh and held-back items)
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

// Batcher holds fresh items (the batch being built) and held-back items (given back with
// Hold after a failed flush, each key on hold until a time), each with its size in bytes.
// Limits.MaxBytes bounds both together: Bytes is always the sum of the sizes of the items
// it holds, fresh and held back, so that what it holds, and so a batch taken after a
// failed flush (its held-back items plus the fresh ones), stays below Limits.MaxBytes
// plus the size of the item that reached it. It is not safe for concurrent use; its owner
// (one pipeline) serialises access.
type Batcher[K comparable, T any] struct {
	limits  Limits
	key     func(T) K
	fresh   []entry[T]
	started time.Time     // when the first fresh item was added
	held    []entry[T]    // held-back items, each key's oldest first
	bytes   int64         // the sum of the sizes of fresh and held
	heldOf  map[K]heldKey // held per key; only keys with some
	holds   map[K]*hold[K]
	sizes   []int64 // the sizes Take returns (its buffer, reused by the next Take)
	// latest is the latest time given to Add, Due, Take or Hold: the batcher's clock never
	// goes back (tick), so a caller's time read before a Take that ended a hold (e.g. the
	// poll's, for all of its records) does not put the key back on hold.
	latest time.Time
}

// tick returns now, or the latest time the batcher was given if that is later, and
// records it.
func (b *Batcher[K, T]) tick(now time.Time) time.Time {
	if now.Before(b.latest) {
		return b.latest
	}
	b.latest = now
	return now
}

type entry[T any] struct {
	item T
	size int64 // bytes, as given to Add or Hold
}

// heldKey is what held holds of one key.
type heldKey struct {
	n     int   // items
	bytes int64 // the sum of their sizes
}

func (b *Batcher[K, T]) addHeld(k K, size int64) {
	h := b.heldOf[k]
	b.heldOf[k] = heldKey{h.n + 1, h.bytes + size}
}

type hold[K comparable] struct {
	until time.Time
	count int
}

// New returns an empty batcher with the given limits; key returns an item's key.
func New[K comparable, T any](l Limits, key func(T) K) *Batcher[K, T] {
	return &Batcher[K, T]{limits: l, key: key, holds: map[K]*hold[K]{}, heldOf: map[K]heldKey{}}
}

// SetMaxBytes changes Limits.MaxBytes to n bytes (0: no bound). The items held stay: a
// batcher that now holds n bytes or more is full (Due returns TriggerBytes), so its owner
// flushes them down to the new bound.
func (b *Batcher[K, T]) SetMaxBytes(n int64) { b.limits.MaxBytes = n }

// Recharge sets the size of every item held, fresh and held back, to size(item) bytes: the
// caller's estimate of what an item costs changed (e.g. it was measured), and the items
// added before the change would otherwise count toward Limits.MaxBytes by the old one,
// cutting the batches they fill early (or late). Bytes becomes the sum of the new sizes;
// a batcher that now reaches the byte bound is due (Due returns TriggerBytes). The sizes
// a Take returned before stay as they were: Hold takes them back as given.
func (b *Batcher[K, T]) Recharge(size func(T) int64) {
	b.bytes = 0
	for i := range b.fresh {
		e := &b.fresh[i]
		e.size = size(e.item)
		b.bytes += e.size
	}
	if len(b.held) == 0 {
		return
	}
	clear(b.heldOf)
	for i := range b.held {
		e := &b.held[i]
		e.size = size(e.item)
		b.bytes += e.size
		b.addHeld(b.key(e.item), e.size)
	}
}

// Add appends item, whose size is size bytes, at time now. It returns true when the fresh
// items reach the record bound, or all the items held (fresh and held back) the byte
// bound (Limits.MaxBytes), and some of them can be taken now: the caller should Take and
// flush.
func (b *Batcher[K, T]) Add(item T, size int64, now time.Time) bool {
	now = b.tick(now)
	if len(b.fresh) == 0 {
		b.started = now
	}
	b.fresh = append(b.fresh, entry[T]{item, size})
	b.bytes += size
	if b.full(now) == TriggerNone {
		return false
	}
	return len(b.holds) == 0 || !b.onHold(b.key(item), now) || b.takeable(now)
}

func (b *Batcher[K, T]) full(now time.Time) Trigger {
	switch {
	case b.limits.MaxRecords > 0 && len(b.fresh) >= b.limits.MaxRecords:
		return TriggerRecords
	case b.limits.MaxBytes > 0 && b.charge(now) >= b.limits.MaxBytes:
		return TriggerBytes
	}
	return TriggerNone
}

// charge is what the items held at now count toward Limits.MaxBytes, in bytes: their
// sizes, the held-back items of keys on hold at half theirs (see Limits.MaxBytes).
func (b *Batcher[K, T]) charge(now time.Time) int64 {
	c := b.bytes
	if len(b.holds) > 0 {
		for k, h := range b.heldOf {
			if b.onHold(k, now) {
				c -= h.bytes - h.bytes/2
			}
		}
	}
	return c
}

// takeable reports whether Take at now would hand out some item: one whose key is not on
// hold. It costs a look at each key with held-back items and, while every one of them is
// on hold, at the fresh items' keys.
func (b *Batcher[K, T]) takeable(now time.Time) bool {
	if len(b.holds) == 0 || b.heldDue(now) {
		return b.Len() > 0
	}
	for _, e := range b.fresh {
		if !b.onHold(b.key(e.item), now) {
			return true
		}
	}
	return false
}

// heldDue reports whether some held-back item's key is no longer on hold at now.
func (b *Batcher[K, T]) heldDue(now time.Time) bool {
	for k := range b.heldOf {
		if !b.onHold(k, now) {
			return true
		}
	}
	return false
}

// Due returns why a flush is due at now: TriggerRecords when the fresh items reach the
// record bound, TriggerBytes when all the items held (fresh and held back) reach the byte
// bound (Limits.MaxBytes), and some can be taken now; TriggerAge when the
// oldest fresh one is MaxAge old, TriggerRetry when a held-back item's key is no longer
// on hold; TriggerNone when nothing is due.
func (b *Batcher[K, T]) Due(now time.Time) Trigger {
	now = b.tick(now)
	if b.Len() == 0 {
		return TriggerNone
	}
	if t := b.full(now); t != TriggerNone && b.takeable(now) {
		return t
	}
	if len(b.fresh) > 0 && b.limits.MaxAge > 0 && now.Sub(b.started) >= b.limits.MaxAge {
		return TriggerAge
	}
	if b.heldDue(now) {
		return TriggerRetry
	}
	return TriggerNone
}

func (b *Batcher[K, T]) onHold(k K, now time.Time) bool {
	h := b.holds[k]
	return h != nil && now.Before(h.until)
}

// Take removes and returns the items of every key not on hold at now, held-back items
// first, each key's in order, with their sizes (sizes[i] is items[i]'s, in bytes, as
// given to Add or Hold) and the trigger that made the flush due. Unless forced it takes
// items only while their sizes sum to less than Limits.MaxBytes, so a batch holds at most
// MaxBytes plus the size of its last item: the items after that stay, in order, and count
// toward the next batch (after a failed flush, the held-back and the fresh items may
// together hold more than one batch). sizes is the batcher's buffer: it is valid until
// the next Take (Hold may be given it). When nothing is due it returns nil, nil,
// TriggerNone and changes nothing. With force, it returns every item (holds are ignored,
// but kept: see Release) with TriggerShutdown. Fresh items of a key on hold are kept
// behind that key's held-back items: they no longer count toward Limits.MaxRecords, but
// still toward Limits.MaxBytes (Bytes).
func (b *Batcher[K, T]) Take(now time.Time, force bool) (items []T, sizes []int64, trigger Trigger) {
	now = b.tick(now)
	trigger = TriggerShutdown
	if !force {
		if trigger = b.Due(now); trigger == TriggerNone {
			return nil, nil, TriggerNone
		}
	}
	limit := b.limits.MaxBytes
	if force || limit <= 0 {
		limit = math.MaxInt64
	}
	out := make([]T, 0, len(b.held)+len(b.fresh))
	sizes = b.sizes[:0]
	var taken int64
	take := func(e entry[T]) {
		out = append(out, e.item)
		sizes = append(sizes, e.size)
		taken += e.size
	}
	// Keys are computed only while some key is on hold (a key reads the item, e.g. a Kafka
	// record a whole batch ago: a cache miss each).
	holds := !force && len(b.holds) > 0
	var kept []entry[T] // the held-back items after the take
	if holds && !b.heldDue(now) {
		kept = b.held // every held-back item's key is on hold: none is looked at
	} else if len(b.held) > 0 {
		for i, e := range b.held {
			if taken >= limit {
				kept = append(kept, b.held[i:]...)
				break
			}
			if holds && b.onHold(b.key(e.item), now) {
				kept = append(kept, e)
				continue
			}
			take(e)
		}
		clear(b.heldOf)
		for _, e := range kept {
			b.addHeld(b.key(e.item), e.size)
		}
	}
	n := 0 // fresh items left by the byte bound: they stay fresh, compacted to the front
	for _, e := range b.fresh {
		if holds {
			if k := b.key(e.item); b.onHold(k, now) {
				kept = append(kept, e)
				b.addHeld(k, e.size)
				continue
			}
		}
		if taken >= limit {
			b.fresh[n] = e
			n++
			continue
		}
		take(e)
	}
	b.held, b.bytes, b.sizes = kept, b.bytes-taken, sizes
	// The next batch reuses fresh's array (a batch of max_records grows it once, not every
	// time); clear lets the taken items go.
	clear(b.fresh[n:])
	b.fresh = b.fresh[:n]
	if n == 0 {
		b.started = time.Time{}
	}
	if len(out) == 0 {
		return nil, nil, TriggerNone
	}
	return out, sizes, trigger
}

// TakeKeys removes and returns every item whose key is in keys (e.g. partitions revoked
// in a rebalance), held-back ones first, each key's in order, whatever their holds, with
// their sizes in bytes (sizes[i] is items[i]'s; a new slice). The holds stay until Release.
func (b *Batcher[K, T]) TakeKeys(keys func(K) bool) (items []T, sizes []int64) {
	take := func(e entry[T]) {
		items = append(items, e.item)
		sizes = append(sizes, e.size)
		b.bytes -= e.size
	}
	var held []entry[T]
	for _, e := range b.held {
		if k := b.key(e.item); keys(k) {
			take(e)
			if h := b.heldOf[k]; h.n == 1 {
				delete(b.heldOf, k)
			} else {
				b.heldOf[k] = heldKey{h.n - 1, h.bytes - e.size}
			}
		} else {
			held = append(held, e)
		}
	}
	b.held = held
	fresh := b.fresh[:0]
	for _, e := range b.fresh {
		if keys(b.key(e.item)) {
			take(e)
		} else {
			fresh = append(fresh, e)
		}
	}
	clear(b.fresh[len(fresh):])
	b.fresh = fresh
	if len(fresh) == 0 {
		b.fresh, b.started = nil, time.Time{}
	}
	return items, sizes
}

// Hold gives back items of a failed flush (as returned by Take or TakeKeys, in that
// order), sizes[i] being items[i]'s size in bytes as Take or TakeKeys returned it (so
// that Bytes stays the sum of the sizes of the items held), and puts each of their keys
// on hold: Take skips a key until now + wait(n), n being the number of earlier holds of
// the key since its last Release (0 for the first), so the caller's backoff grows per
// key. The items go ahead of every other item of their key. It returns the new hold of
// each key, in the order the keys first appear in items. It panics when items and sizes
// differ in length.
func (b *Batcher[K, T]) Hold(items []T, sizes []int64, now time.Time, wait func(n int) time.Duration) []Hold[K] {
	now = b.tick(now)
	if len(items) != len(sizes) {
		panic(fmt.Sprintf("batcher: Hold of %d items with %d sizes", len(items), len(sizes)))
	}
	if len(items) == 0 {
		return nil
	}
	var out []Hold[K]
	held := make([]entry[T], 0, len(items)+len(b.held))
	var last K
	for i, it := range items {
		k := b.key(it)
		held = append(held, entry[T]{it, sizes[i]})
		b.bytes += sizes[i]
		b.addHeld(k, sizes[i])
		if i > 0 && k == last {
			continue // items come in runs of one key: a new hold is looked for once per run
		}
		last = k
		if slices.ContainsFunc(out, func(h Hold[K]) bool { return h.Key == k }) {
			continue
		}
		h := b.holds[k]
		if h == nil {
			h = &hold[K]{}
			b.holds[k] = h
		}
		h.until = now.Add(wait(h.count))
		h.count++
		out = append(out, Hold[K]{Key: k, Attempt: h.count, Until: h.until})
	}
	b.held = append(held, b.held...)
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
	for k := range b.heldOf {
		var until time.Time
		if h := b.holds[k]; h != nil {
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

// Bytes returns the sum of the sizes of the items, fresh and held back, in bytes: what
// Limits.MaxBytes bounds.
func (b *Batcher[K, T]) Bytes() int64 { return b.bytes }

// Holding returns the number of keys on hold (their hold may have ended: a key stays on
// hold until Release).
func (b *Batcher[K, T]) Holding() int { return len(b.holds) }

// Limits returns the batcher's limits (SetMaxBytes changes MaxBytes).
func (b *Batcher[K, T]) Limits() Limits { return b.limits }
