package batcher

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// item is a test record: a key (partition) and a sequence number within it (offset).
type item struct {
	key int
	seq int
}

func keyOf(it item) int { return it.key }

func newTest(l Limits) *Batcher[int, item] { return New[int, item](l, keyOf) }

func wait(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

func TestBounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name    string
		limits  Limits
		sizes   []int64
		wantAt  int // index of the Add that returns full, -1 if none
		trigger Trigger
	}{
		{"records", Limits{MaxRecords: 3}, []int64{1, 1, 1, 1}, 2, TriggerRecords},
		{"bytes", Limits{MaxBytes: 10}, []int64{4, 4, 4}, 2, TriggerBytes},
		{"bytes exact", Limits{MaxBytes: 8}, []int64{4, 4}, 1, TriggerBytes},
		{"no bound", Limits{}, []int64{100, 100}, -1, TriggerNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTest(tt.limits)
			got := -1
			for i, s := range tt.sizes {
				if b.Add(item{0, i}, s, t0) && got < 0 {
					got = i
				}
			}
			if got != tt.wantAt {
				t.Fatalf("full at %d, want %d", got, tt.wantAt)
			}
			items, _, trig := b.Take(t0, false)
			if trig != tt.trigger {
				t.Fatalf("trigger %v, want %v", trig, tt.trigger)
			}
			if tt.trigger != TriggerNone && len(items) != len(tt.sizes) {
				t.Fatalf("took %d items, want %d", len(items), len(tt.sizes))
			}
		})
	}
}

func TestAgeAndTake(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := New[string, string](Limits{MaxAge: 10 * time.Second}, func(string) string { return "" })
	if b.Due(t0) != TriggerNone {
		t.Fatal("empty batch is due")
	}
	if _, ok := b.Deadline(); ok {
		t.Fatal("empty batch has a deadline")
	}
	b.Add("a", 1, t0)
	b.Add("b", 2, t0.Add(5*time.Second))
	if d, _ := b.Deadline(); !d.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("deadline %v, want first add + 10s", d)
	}
	if b.Due(t0.Add(9*time.Second)) != TriggerNone {
		t.Fatal("due before max age")
	}
	if items, _, trig := b.Take(t0.Add(9*time.Second), false); items != nil || trig != TriggerNone || b.Len() != 2 {
		t.Fatalf("take before max age = %v, %v; len %d", items, trig, b.Len())
	}
	if b.Due(t0.Add(10*time.Second)) != TriggerAge {
		t.Fatal("not due at max age")
	}
	items, _, trig := b.Take(t0.Add(10*time.Second), false)
	if len(items) != 2 || items[0] != "a" || items[1] != "b" || b.Len() != 0 || trig != TriggerAge {
		t.Fatalf("take = %v (%v), len %d", items, trig, b.Len())
	}
	b.Add("c", 1, t0.Add(time.Hour))
	if d, _ := b.Deadline(); !d.Equal(t0.Add(time.Hour + 10*time.Second)) {
		t.Fatalf("deadline after take %v: age must restart at the first new item", d)
	}
}

func TestTakeKeys(t *testing.T) {
	t0 := time.Unix(0, 0)
	b := newTest(Limits{MaxBytes: 100})
	for i := range 6 {
		b.Add(item{i % 2, i}, int64(i), t0)
	}
	got, _ := b.TakeKeys(func(k int) bool { return k == 0 })
	if !slices.Equal(got, []item{{0, 0}, {0, 2}, {0, 4}}) {
		t.Fatalf("taken %v, want key 0's items in order", got)
	}
	if b.bytes != 1+3+5 {
		t.Fatalf("bytes after TakeKeys = %d, want 9", b.bytes)
	}
	rest, _, _ := b.Take(t0, true)
	if !slices.Equal(rest, []item{{1, 1}, {1, 3}, {1, 5}}) {
		t.Fatalf("left %v, want [1 3 5] of key 1", rest)
	}
	b.Add(item{0, 7}, 7, t0)
	b.TakeKeys(func(int) bool { return true })
	if b.Len() != 0 || b.bytes != 0 {
		t.Fatal("TakeKeys of every key left items")
	}
	if _, ok := b.Deadline(); ok {
		t.Fatal("deadline after taking everything")
	}
}

// TestHolds: key 0's flush fails and its items are held back; key 1 goes on; key 0's
// new items wait behind its held ones; the retry hands them out held first, in order.
func TestHolds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	b := newTest(Limits{MaxRecords: 3, MaxAge: 10 * time.Second})
	b.Add(item{0, 0}, 1, at(0))
	b.Add(item{1, 0}, 1, at(0))
	if !b.Add(item{0, 1}, 1, at(0)) {
		t.Fatal("third item did not fill the batch")
	}
	got, _, trig := b.Take(at(0), false)
	if trig != TriggerRecords || !slices.Equal(got, []item{{0, 0}, {1, 0}, {0, 1}}) {
		t.Fatalf("first take = %v (%v)", got, trig)
	}
	// key 0 failed from its first item; key 1 was committed.
	hs := b.Hold([]item{{0, 0}, {0, 1}}, []int64{1, 1}, at(10), wait(5*time.Second))
	if len(hs) != 1 || hs[0] != (Hold[int]{Key: 0, Attempt: 1, Until: at(15)}) {
		t.Fatalf("holds = %+v", hs)
	}
	if b.Holding() != 1 || b.Len() != 2 {
		t.Fatalf("holding %d keys, %d items; want 1, 2", b.Holding(), b.Len())
	}
	if d, ok := b.Deadline(); !ok || !d.Equal(at(15)) {
		t.Fatalf("deadline %v %v, want the hold's end", d, ok)
	}
	// New items of both keys fill the batch: key 1's go, key 0's stay behind its held ones.
	b.Add(item{1, 1}, 1, at(11))
	b.Add(item{0, 2}, 1, at(11))
	b.Add(item{1, 2}, 1, at(11))
	got, _, trig = b.Take(at(11), false)
	if trig != TriggerRecords || !slices.Equal(got, []item{{1, 1}, {1, 2}}) {
		t.Fatalf("take during key 0's hold = %v (%v), want key 1's items only", got, trig)
	}
	if d, _ := b.Deadline(); !d.Equal(at(15)) {
		t.Fatalf("deadline %v, want the hold's end", d)
	}
	if tr := b.Due(at(14)); tr != TriggerNone {
		t.Fatalf("due %v during the hold", tr)
	}
	if tr := b.Due(at(15)); tr != TriggerRetry {
		t.Fatalf("due %v at the hold's end, want retry", tr)
	}
	got, sizes, trig := b.Take(at(15), false)
	if trig != TriggerRetry || !slices.Equal(got, []item{{0, 0}, {0, 1}, {0, 2}}) {
		t.Fatalf("retry take = %v (%v), want key 0's items held first, in order", got, trig)
	}
	// It fails again: the next wait grows with the number of holds.
	hs = b.Hold(got, sizes, at(15), func(n int) time.Duration { return time.Duration(n+1) * 10 * time.Second })
	if hs[0].Attempt != 2 || !hs[0].Until.Equal(at(35)) {
		t.Fatalf("second hold = %+v", hs[0])
	}
	if got, _, trig := b.Take(at(30), false); got != nil || trig != TriggerNone {
		t.Fatalf("take during the hold = %v (%v)", got, trig)
	}
	got, _, trig = b.Take(at(30), true)
	if trig != TriggerShutdown || !slices.Equal(got, []item{{0, 0}, {0, 1}, {0, 2}}) {
		t.Fatalf("forced take = %v (%v)", got, trig)
	}
	if n, ok := b.Release(0); !ok || n != 2 {
		t.Fatalf("release = %d %v, want 2 holds", n, ok)
	}
	if _, ok := b.Release(0); ok || b.Holding() != 0 {
		t.Fatal("released twice")
	}
	// A held-back item whose key is not on hold any more is due at once.
	b.Hold([]item{{2, 0}}, []int64{1}, at(30), wait(time.Hour))
	b.Release(2)
	if d, ok := b.Deadline(); !ok || !d.IsZero() || b.Due(at(30)) != TriggerRetry {
		t.Fatalf("released key's item: deadline %v %v, due %v", d, ok, b.Due(at(30)))
	}
}

func TestTriggerNames(t *testing.T) {
	want := []string{"records", "bytes", "age", "retry", "revoke", "shutdown"}
	var got []string
	for _, tr := range Triggers() {
		got = append(got, tr.String())
	}
	if !slices.Equal(got, want) || TriggerNone.String() != "none" {
		t.Fatalf("trigger names %v", got)
	}
}

// TestHeldFirstProperty: a random consumer adds items per key in sequence, with random
// sizes, takes them (on time, forced, or by key), commits a prefix of each key's taken
// items and holds the rest back with the sizes Take gave. Whatever the order of
// operations, every key's items are committed exactly in sequence: a key's commit never
// passes an item that is still waiting, and nothing is lost or repeated; every item comes
// out with the size it was added with, and Bytes is always the sum of the sizes of the
// items held (fresh and held back).
func TestHeldFirstProperty(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		b := newTest(Limits{MaxRecords: 1 + rng.IntN(8), MaxBytes: int64(5 + rng.IntN(40)), MaxAge: time.Duration(1+rng.IntN(5)) * time.Second})
		now := time.Unix(0, 0)
		const keys = 4
		next := [keys]int{}      // next sequence to add
		committed := [keys]int{} // next sequence expected to commit
		size := map[item]int64{} // each item's size, as added
		var holding int64        // the sum of the sizes of the items added and not committed
		check := func(what string, items []item, sizes []int64) {
			t.Helper()
			if len(sizes) != len(items) {
				t.Fatalf("seed %d: %s: %d items with %d sizes", seed, what, len(items), len(sizes))
			}
			for i, it := range items {
				if sizes[i] != size[it] {
					t.Fatalf("seed %d: %s: item %+v of size %d came out with size %d", seed, what, it, size[it], sizes[i])
				}
			}
		}
		flush := func(items []item, sizes []int64) {
			t.Helper()
			check("take", items, sizes)
			back, backSizes, done := settleRandomly(t, seed, rng, b, items, sizes, committed[:])
			holding -= done
			b.Hold(back, backSizes, now, func(n int) time.Duration { return time.Duration(rng.IntN(3)+n) * time.Second })
		}
		for op := range 300 {
			now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
			switch op := rng.IntN(10); {
			case op < 6:
				k := rng.IntN(keys)
				it := item{k, next[k]}
				size[it] = int64(rng.IntN(10))
				holding += size[it]
				if b.Add(it, size[it], now) {
					items, sizes, _ := b.Take(now, false)
					flush(items, sizes)
				}
				next[k]++
			case op < 8:
				items, sizes, _ := b.Take(now, false)
				flush(items, sizes)
			case op < 9:
				items, sizes, _ := b.Take(now, true)
				flush(items, sizes)
			default:
				k := rng.IntN(keys)
				flush(b.TakeKeys(func(x int) bool { return x == k }))
			}
			if b.Bytes() != holding {
				t.Fatalf("seed %d, op %d: Bytes = %d, want %d (the sizes of the %d items held)", seed, op, b.Bytes(), holding, b.Len())
			}
		}
		for b.Len() > 0 {
			items, sizes, _ := b.Take(now, true)
			check("final take", items, sizes)
			for _, it := range items {
				if it.seq != committed[it.key] {
					t.Fatalf("seed %d: final key %d committed %d, want %d", seed, it.key, it.seq, committed[it.key])
				}
				committed[it.key]++
			}
		}
		if committed != next {
			t.Fatalf("seed %d: committed %v of %v", seed, committed, next)
		}
	}
}

// Take hands the batch out in one array of its exact size and keeps the fresh items'
// array for the next batch, cleared (no taken item stays reachable from it): a
// steady-state batch allocates only the slice Take returns.
func TestTakeReusesFreshArray(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const n = 1000
	b := newTest(Limits{MaxRecords: n})
	batch := func() []item {
		for i := 0; i < n; i++ {
			b.Add(item{i % 4, i}, 1, t0)
		}
		out, _, trig := b.Take(t0, false)
		if trig != TriggerRecords || len(out) != n || cap(out) != n {
			t.Fatalf("took %d items (cap %d) by %v, want %d by records", len(out), cap(out), trig, n)
		}
		return out
	}
	batch()
	if cap(b.fresh) < n {
		t.Fatalf("fresh capacity %d after Take, want the batch's %d kept", cap(b.fresh), n)
	}
	for i, e := range b.fresh[:cap(b.fresh)] {
		if e != (entry[item]{}) {
			t.Fatalf("fresh[%d] = %+v after Take, want it cleared", i, e)
		}
	}
	if allocs := testing.AllocsPerRun(20, func() { batch() }); allocs != 1 {
		t.Fatalf("a steady-state batch allocates %v times, want 1 (the slice Take returns)", allocs)
	}
	// The ordering promise is unchanged: a second batch is handed out in order.
	if got := batch(); got[0] != (item{0, 0}) || got[n-1] != (item{(n - 1) % 4, n - 1}) {
		t.Fatalf("batch out of order: first %+v, last %+v", got[0], got[n-1])
	}
}

// Without a key on hold, Take hands out every fresh item without computing a key; with
// one on hold, it computes them and keeps that key's items back.
func TestTakeComputesKeysOnlyWithHolds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	calls := 0
	b := New[int, item](Limits{MaxRecords: 4}, func(it item) int { calls++; return it.key })
	for i := 0; i < 4; i++ {
		b.Add(item{i % 2, i}, 1, t0)
	}
	if out, _, _ := b.Take(t0, false); len(out) != 4 || calls != 0 {
		t.Fatalf("took %d items with %d key calls, want 4 and 0", len(out), calls)
	}
	b.Hold([]item{{1, -1}}, []int64{1}, t0, wait(time.Minute))
	calls = 0
	for i := 0; i < 4; i++ {
		b.Add(item{i % 2, i}, 1, t0)
	}
	out, _, _ := b.Take(t0, false)
	if !slices.Equal(out, []item{{0, 0}, {0, 2}}) || calls == 0 {
		t.Fatalf("took %v with %d key calls, want key 0's items and key 1's kept back", out, calls)
	}
}

// TestHeldItemsCountTowardBytes: items given back with Hold keep the sizes they were added
// with: after Take → Hold → Add → Take the batcher's Bytes is the sum of the held and the
// fresh items' sizes, Due by bytes fires when held and fresh items together reach
// MaxBytes (held items on hold at half their size; not the fresh ones alone), and the
// retried take hands every item out with its size. While every item's key is on hold, a
// full batcher is not due (nothing could be taken), and it is due again once a key with
// items can be taken.
func TestHeldItemsCountTowardBytes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	b := newTest(Limits{MaxBytes: 100, MaxAge: time.Hour})
	b.Add(item{0, 0}, 30, at(0))
	b.Add(item{0, 1}, 25, at(0))
	b.Add(item{1, 0}, 45, at(0))
	items, sizes, trig := b.Take(at(0), false)
	if trig != TriggerBytes || !slices.Equal(sizes, []int64{30, 25, 45}) || b.Bytes() != 0 {
		t.Fatalf("first take: %v sizes %v by %v, Bytes %d; want sizes [30 25 45] by bytes, Bytes 0", items, sizes, trig, b.Bytes())
	}
	// Key 0's two items failed: they go back with their sizes (straight from Take's
	// buffer), key 1's was committed.
	b.Hold(items[:2], sizes[:2], at(1), wait(10*time.Second))
	if b.Bytes() != 55 || b.Len() != 2 {
		t.Fatalf("after Hold: Bytes %d, Len %d; want 55 (30 + 25), 2", b.Bytes(), b.Len())
	}
	// Fresh items of key 1 (not on hold) and key 0 (on hold): 55 / 2 + 20 + 10 = 57, not due.
	if b.Add(item{1, 1}, 20, at(2)) || b.Add(item{0, 2}, 10, at(2)) {
		t.Fatal("Add reported a full batcher at 57 of 100 bytes")
	}
	if b.Bytes() != 85 || b.Due(at(2)) != TriggerNone {
		t.Fatalf("Bytes %d, due %v; want 85, none", b.Bytes(), b.Due(at(2)))
	}
	// 57 + 43 = 100: the fresh items alone (73) are below the bound; with the held ones
	// (at half while on hold) they reach it.
	if !b.Add(item{1, 2}, 43, at(3)) {
		t.Fatal("Add did not report the byte bound reached by held and fresh items together")
	}
	if tr := b.Due(at(3)); tr != TriggerBytes {
		t.Fatalf("due %v at 100 of 100 bytes (55 held on hold, at half), want bytes", tr)
	}
	// Key 0 is still on hold: key 1's fresh items go; key 0's fresh one stays behind its
	// held ones and still counts.
	items, sizes, trig = b.Take(at(3), false)
	if trig != TriggerBytes || !slices.Equal(items, []item{{1, 1}, {1, 2}}) || !slices.Equal(sizes, []int64{20, 43}) {
		t.Fatalf("take during key 0's hold: %v sizes %v by %v; want key 1's [20 43] by bytes", items, sizes, trig)
	}
	if b.Bytes() != 65 || b.Len() != 3 {
		t.Fatalf("after the take: Bytes %d, Len %d; want 65 (30 + 25 + 10), 3", b.Bytes(), b.Len())
	}
	// Only key 0's items (on hold) and a fresh one of key 0 fill the batcher (65 / 2 + 80 =
	// 112): nothing can be taken, so nothing is due before the hold ends, and Take changes
	// nothing.
	if b.Add(item{0, 3}, 80, at(4)) {
		t.Fatal("Add reported a flush due while every item's key is on hold")
	}
	if tr := b.Due(at(4)); tr != TriggerNone || b.Bytes() != 145 {
		t.Fatalf("due %v, Bytes %d while every item's key is on hold; want none, 145", tr, b.Bytes())
	}
	if items, sizes, tr := b.Take(at(4), false); items != nil || sizes != nil || tr != TriggerNone || b.Bytes() != 145 {
		t.Fatalf("take while every item's key is on hold: %v %v %v, Bytes %d", items, sizes, tr, b.Bytes())
	}
	// The hold ends: the held items count in full, the retry hands out key 0's items, held
	// first, each with its size (65 < 100 before the last: all four).
	if tr := b.Due(at(11)); tr != TriggerBytes {
		t.Fatalf("due %v once the hold ended with 145 bytes held, want bytes", tr)
	}
	items, sizes, _ = b.Take(at(11), false)
	if !slices.Equal(items, []item{{0, 0}, {0, 1}, {0, 2}, {0, 3}}) || !slices.Equal(sizes, []int64{30, 25, 10, 80}) || b.Bytes() != 0 {
		t.Fatalf("retry take: %v sizes %v, Bytes %d; want key 0's items in order, sizes [30 25 10 80], Bytes 0", items, sizes, b.Bytes())
	}
	// TakeKeys hands sizes out too and takes them off Bytes.
	b.Hold(items, sizes, at(12), wait(time.Minute))
	b.Add(item{1, 3}, 7, at(12))
	got, gotSizes := b.TakeKeys(func(k int) bool { return k == 0 })
	if len(got) != 4 || !slices.Equal(gotSizes, []int64{30, 25, 10, 80}) || b.Bytes() != 7 {
		t.Fatalf("TakeKeys(0): %d items sizes %v, Bytes %d; want 4, [30 25 10 80], 7", len(got), gotSizes, b.Bytes())
	}
}

// Hold panics when it is not given one size per item: a batcher that lost an item's size
// would no longer bound its bytes.
func TestHoldNeedsSizes(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Hold of 2 items with 1 size did not panic")
		}
	}()
	newTest(Limits{}).Hold([]item{{0, 0}, {0, 1}}, []int64{1}, time.Unix(0, 0), wait(time.Second))
}

// TestTakeBoundsBytes: after a failed flush the held-back items and those added behind
// them may hold more than one batch; the retry takes items, in order, only while they sum
// to less than MaxBytes (a batch: at most MaxBytes plus its last item), and the rest stay,
// in order, counted by Bytes, for the next take. A forced take takes everything.
func TestTakeBoundsBytes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	b := newTest(Limits{MaxBytes: 100, MaxAge: time.Minute})
	b.Add(item{0, 0}, 60, at(0))
	b.Add(item{1, 0}, 50, at(0))
	items, sizes, _ := b.Take(at(0), false)
	b.Hold(items, sizes, at(0), wait(5*time.Second)) // both keys failed
	b.Add(item{1, 1}, 50, at(1))
	b.Add(item{1, 2}, 5, at(2))
	b.Add(item{0, 1}, 7, at(2))
	if b.Bytes() != 172 {
		t.Fatalf("Bytes %d, want 172 (60 + 50 held, 50 + 5 + 7 fresh)", b.Bytes())
	}
	items, sizes, trig := b.Take(at(5), false)
	if trig != TriggerBytes || !slices.Equal(items, []item{{0, 0}, {1, 0}}) || !slices.Equal(sizes, []int64{60, 50}) {
		t.Fatalf("retry take: %v sizes %v by %v; want the held [60 50] by bytes (110: the bound and its last item)", items, sizes, trig)
	}
	if b.Bytes() != 62 || b.Len() != 3 {
		t.Fatalf("after the retry take: Bytes %d, Len %d; want 62 (50 + 5 + 7), 3", b.Bytes(), b.Len())
	}
	// The holds ended: the fresh items left by the bound stay fresh, with their age (the
	// first was added at 1 s), not due before it or more bytes.
	if tr := b.Due(at(60)); tr != TriggerNone {
		t.Fatalf("due %v with 62 of 100 bytes before the age bound, want none", tr)
	}
	items, sizes, trig = b.Take(at(61), false)
	if trig != TriggerAge || !slices.Equal(items, []item{{1, 1}, {1, 2}, {0, 1}}) || !slices.Equal(sizes, []int64{50, 5, 7}) || b.Bytes() != 0 {
		t.Fatalf("second take: %v sizes %v by %v, Bytes %d; want [{1 1} {1 2} {0 1}] sizes [50 5 7] by age, Bytes 0", items, sizes, trig, b.Bytes())
	}
	// Without holds, fresh items past the bound stay fresh (with their age) for the next take.
	for i := range 4 {
		b.Add(item{2, i}, 40, at(100))
	}
	items, _, _ = b.Take(at(100), false)
	if len(items) != 3 || b.Bytes() != 40 || b.Len() != 1 {
		t.Fatalf("take of 4 × 40 bytes: %d items, Bytes %d, Len %d; want 3 (120), 40, 1", len(items), b.Bytes(), b.Len())
	}
	if d, ok := b.Deadline(); !ok || !d.Equal(at(160)) {
		t.Fatalf("deadline %v %v of the item left, want its age bound %v", d, ok, at(160))
	}
	for i := range 4 {
		b.Add(item{3, i}, 40, at(101))
	}
	if items, _, _ := b.Take(at(101), true); len(items) != 5 || items[0] != (item{2, 3}) || b.Bytes() != 0 {
		t.Fatalf("forced take: %v, Bytes %d; want all 5 items from {2 3}, Bytes 0", items, b.Bytes())
	}
}

// The batcher's clock never goes back: a time read before a Take that found a key's hold
// ended (the poll loop reads one for all the records of a poll) does not put the key back
// on hold, so its held-back items left by the byte bound count in full.
func TestClockNeverGoesBack(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	b := newTest(Limits{MaxBytes: 100})
	b.Hold([]item{{0, 0}, {0, 1}, {0, 2}}, []int64{60, 60, 60}, at(0), wait(5*time.Second))
	if got := b.charge(at(1)); got != 90 {
		t.Fatalf("charge of 180 bytes on hold = %d, want 90 (half)", got)
	}
	items, _, trig := b.Take(at(5), false) // the hold ended: 60 + 60 in flight, 60 left
	if len(items) != 2 || trig != TriggerBytes || b.Bytes() != 60 {
		t.Fatalf("retry took %d items by %v, Bytes %d; want 2 by bytes, 60", len(items), trig, b.Bytes())
	}
	// A time from before the take: key 0 is not on hold any more, its 60 count in full.
	if b.Add(item{1, 0}, 30, at(4)) || b.charge(b.latest) != 90 || !b.latest.Equal(at(5)) {
		t.Fatalf("charge after an Add at a time before the take = %d, want 90 (60 + 30: the hold ended) at %v", b.charge(b.latest), b.latest)
	}
	if !b.Add(item{1, 1}, 10, at(4)) {
		t.Fatal("Add at 100 of 100 bytes did not report the bound")
	}
}

// TestHeldFirstPropertyInFlight is TestHeldFirstProperty as the pipeline's flush worker
// uses the batcher: one batch in flight at a time, fresh items added (and Due asked)
// while it is in flight, and the batch settled later, a prefix of each key committed
// and the rest given back with Hold and the sizes slice Take returned (the batcher's
// buffer, read only once the batch settles: flushJob.sizes). Every key's items are
// committed exactly in sequence, once each, with the sizes they were added with; the
// taken sizes are unchanged when the batch settles; no batch holds more than MaxBytes
// plus its last item (unforced); Bytes is the sum of the sizes of the items held, the
// batch in flight aside.
func TestHeldFirstPropertyInFlight(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		l := Limits{MaxRecords: 1 + rng.IntN(8), MaxBytes: int64(5 + rng.IntN(40)), MaxAge: time.Duration(1+rng.IntN(5)) * time.Second}
		b := newTest(l)
		now := time.Unix(0, 0)
		const keys = 3
		next := [keys]int{}
		committed := [keys]int{}
		size := map[item]int64{}
		var buffered int64 // the sizes of the items added, neither committed nor in flight
		var flight []item
		var flightSizes, flightCopy []int64
		take := func(force bool) {
			t.Helper()
			items, sizes, _ := b.Take(now, force)
			if len(items) == 0 {
				return
			}
			var sum int64
			for i, it := range items {
				if sizes[i] != size[it] {
					t.Fatalf("seed %d: item %+v of size %d taken with size %d", seed, it, size[it], sizes[i])
				}
				if !force && sum >= l.MaxBytes {
					t.Fatalf("seed %d: item %d of the batch taken after %d bytes; MaxBytes is %d", seed, i, sum, l.MaxBytes)
				}
				sum += sizes[i]
			}
			buffered -= sum
			flight, flightSizes, flightCopy = items, sizes, slices.Clone(sizes)
		}
		settle := func() {
			t.Helper()
			if !slices.Equal(flightSizes, flightCopy) {
				t.Fatalf("seed %d: the sizes of the batch in flight changed before it settled: %v, taken as %v", seed, flightSizes, flightCopy)
			}
			back, backSizes, _ := settleRandomly(t, seed, rng, b, flight, flightSizes, committed[:])
			for _, n := range backSizes {
				buffered += n
			}
			if len(back) == len(flight) && rng.IntN(2) == 0 {
				back, backSizes = flight, flightSizes // the whole batch given back with Take's own slice
			}
			b.Hold(back, backSizes, now, func(n int) time.Duration { return time.Duration(rng.IntN(3)+n) * time.Second })
			flight, flightSizes, flightCopy = nil, nil, nil
		}
		for op := range 400 {
			now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
			switch op := rng.IntN(10); {
			case op < 6:
				k := rng.IntN(keys)
				it := item{k, next[k]}
				size[it] = int64(rng.IntN(10))
				buffered += size[it]
				due := b.Add(it, size[it], now)
				next[k]++
				if due && flight == nil {
					take(false)
				}
			case op < 7:
				b.Due(now)
			case op < 9:
				if flight == nil {
					take(false)
				} else {
					settle()
				}
			default:
				if flight != nil {
					settle()
				}
				take(true)
			}
			if b.Bytes() != buffered {
				t.Fatalf("seed %d, op %d: Bytes = %d, want %d", seed, op, b.Bytes(), buffered)
			}
		}
		if flight != nil {
			settle()
		}
		for b.Len() > 0 {
			items, _, _ := b.Take(now, true)
			for _, it := range items {
				if it.seq != committed[it.key] {
					t.Fatalf("seed %d: final key %d committed %d, want %d", seed, it.key, it.seq, committed[it.key])
				}
				committed[it.key]++
			}
		}
		if committed != next {
			t.Fatalf("seed %d: committed %v of %v", seed, committed, next)
		}
	}
}

// settleRandomly settles a flushed batch (sizes[i] is items[i]'s, in bytes) the way a
// flush that fails for some keys does: per key, in the order keys first appear, a random
// prefix of its items (all of them two times in three) is committed, each of which must
// be the key's next sequence (committed[key], advanced), and a key committed whole is
// released. It returns the rest, in order, with their sizes, for Hold, and the bytes
// committed.
func settleRandomly(t *testing.T, seed uint64, rng *rand.Rand, b *Batcher[int, item], items []item, sizes []int64, committed []int) (back []item, backSizes []int64, done int64) {
	t.Helper()
	byKey := map[int][]int{} // indexes into items
	var order []int
	for i, it := range items {
		if _, ok := byKey[it.key]; !ok {
			order = append(order, it.key)
		}
		byKey[it.key] = append(byKey[it.key], i)
	}
	for _, k := range order {
		idx := byKey[k]
		cut := len(idx)
		if rng.IntN(3) == 0 {
			cut = rng.IntN(len(idx) + 1)
		}
		for _, i := range idx[:cut] {
			if it := items[i]; it.seq != committed[k] {
				t.Fatalf("seed %d: key %d committed %d, want %d (a waiting item was passed)", seed, k, it.seq, committed[k])
			}
			committed[k]++
			done += sizes[i]
		}
		if cut < len(idx) {
			for _, i := range idx[cut:] {
				back = append(back, items[i])
				backSizes = append(backSizes, sizes[i])
			}
		} else {
			b.Release(k)
		}
	}
	return back, backSizes, done
}

// A lowered byte bound makes a batcher that holds more than it full at once, and a Take
// then hands out only what fits the new bound; a raised one takes more before full.
func TestSetMaxBytes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newTest(Limits{MaxBytes: 100})
	for i := range 5 {
		if b.Add(item{0, i}, 10, t0) {
			t.Fatalf("full after %d items of 10 bytes under a 100-byte bound", i+1)
		}
	}
	if got := b.Due(t0); got != TriggerNone {
		t.Fatalf("Due = %v before the bound is lowered, want none", got)
	}
	b.SetMaxBytes(30)
	if got := b.Due(t0); got != TriggerBytes {
		t.Fatalf("Due = %v after lowering the bound to 30 bytes with 50 held, want bytes", got)
	}
	items, _, _ := b.Take(t0, false)
	if len(items) != 3 || b.Bytes() != 20 {
		t.Fatalf("took %d items leaving %d bytes, want 3 (30 bytes) leaving 20", len(items), b.Bytes())
	}
	b.SetMaxBytes(0)
	if b.Add(item{0, 9}, 1<<40, t0) {
		t.Fatal("full with no byte bound")
	}
}

// Recharge replaces the sizes of the items held, fresh and held back, by the caller's new
// estimate: the bytes bound then cuts by it (items charged too much by an old estimate do
// not cut a batch early, items charged too little make it due), held-back items keep
// counting at half while on hold, and Take hands out the new sizes.
func TestRecharge(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	b := newTest(Limits{MaxRecords: 10, MaxBytes: 100, MaxAge: time.Hour})
	// Six items charged 20 bytes each by an estimate that was too high: full at the fifth.
	full := -1
	for i := range 6 {
		if b.Add(item{i % 2, i}, 20, at(0)) && full < 0 {
			full = i
		}
	}
	if full != 4 || b.Due(at(0)) != TriggerBytes {
		t.Fatalf("full at item %d, due %v; want full at item 4 (100 of 100 bytes), bytes", full, b.Due(at(0)))
	}
	// Measured: each costs 10 + its seq. 10+11+...+15 = 75 bytes, below the bound.
	b.Recharge(func(it item) int64 { return int64(10 + it.seq) })
	if b.Bytes() != 75 || b.Due(at(0)) != TriggerNone {
		t.Fatalf("after Recharge: Bytes %d, due %v; want 75, none", b.Bytes(), b.Due(at(0)))
	}
	if b.Add(item{0, 6}, 16, at(0)) || b.Add(item{1, 7}, 8, at(0)) {
		t.Fatal("full below the bound after Recharge (75 + 16 + 8 = 99 of 100 bytes)")
	}
	if !b.Add(item{0, 8}, 1, at(0)) {
		t.Fatal("not full at 100 of 100 bytes")
	}
	items, sizes, trig := b.Take(at(0), false)
	if trig != TriggerBytes || len(items) != 9 || !slices.Equal(sizes, []int64{10, 11, 12, 13, 14, 15, 16, 8, 1}) || b.Bytes() != 0 {
		t.Fatalf("take: %d items sizes %v by %v, Bytes %d; want 9, [10 11 12 13 14 15 16 8 1] by bytes, 0", len(items), sizes, trig, b.Bytes())
	}
	// Key 0's items fail and are held back (50 bytes, 25 while on hold); a fresh item of
	// key 1 (30 bytes): 55 charged, not due.
	var back []item
	var backSizes []int64
	for i, it := range items {
		if it.key == 0 {
			back, backSizes = append(back, it), append(backSizes, sizes[i])
		}
	}
	b.Hold(back, backSizes, at(1), wait(10*time.Second))
	b.Add(item{1, 9}, 30, at(1))
	if b.Bytes() != 83 || b.Due(at(1)) != TriggerNone {
		t.Fatalf("with key 0 held back: Bytes %d, due %v; want 83 (10+12+14+16+1 held, 30 fresh), none", b.Bytes(), b.Due(at(1)))
	}
	// The estimate doubles: 106 held (53 while on hold) + 60 fresh = 113: due, key 1's
	// fresh item can go.
	b.Recharge(func(it item) int64 { return 2 * int64(10+it.seq) })
	if b.Bytes() != 2*(10+12+14+16+18)+2*19 || b.Due(at(1)) != TriggerBytes {
		t.Fatalf("after doubling: Bytes %d, due %v; want %d, bytes", b.Bytes(), b.Due(at(1)), 2*(10+12+14+16+18)+2*19)
	}
	items, sizes, _ = b.Take(at(1), false)
	if !slices.Equal(items, []item{{1, 9}}) || !slices.Equal(sizes, []int64{38}) {
		t.Fatalf("take during key 0's hold: %v sizes %v; want [{1 9}] sizes [38]", items, sizes)
	}
	// The hold ends: the held items count in full (106 bytes), and a batch takes them up
	// to the bound by their new sizes.
	items, sizes, trig = b.Take(at(11), false)
	if trig != TriggerBytes || len(items) != 4 || !slices.Equal(sizes, []int64{20, 24, 28, 32}) || b.Bytes() != 36 {
		t.Fatalf("retry take: %d items sizes %v by %v, Bytes %d; want 4, [20 24 28 32] by bytes, 36", len(items), sizes, trig, b.Bytes())
	}
}
