package ingest

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Reservations round up to 16 MiB, replace the owner's earlier one, release at 0, and
// set the runtime's limit only when the sum changes.
func TestMemoryLimitReserve(t *testing.T) {
	const mib = 1 << 20
	var sets []int64
	l := &MemoryLimit{base: 100 * mib, extra: map[string]int64{}, set: func(n int64) int64 { sets = append(sets, n/mib); return 0 }}
	l.Reserve("a", 1)      // 16
	l.Reserve("a", 16*mib) // still 16: no set
	l.Reserve("a", 17*mib) // 32
	l.Reserve("b", 40*mib) // 48
	l.Reserve("a", 0)      // a released
	l.Reserve("zero", 0)   // nothing to release: no set
	if got, want := fmt.Sprint(sets), "[116 132 180 148]"; got != want {
		t.Errorf("limits set (MiB) %s, want %s", got, want)
	}
	if got := l.Limit(); got != 148*mib {
		t.Errorf("Limit() = %d MiB, want 148", got/mib)
	}
	var none *MemoryLimit
	none.Reserve("a", 1) // not managed: no panic, nothing set
}

// A keyed pipeline reserves its key index's bytes in the process's memory limit once the
// index exists (the flush after the table's creation): the limit rises from the base.
func TestKeyedIndexRaisesMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	h := newKeyedHarness(t, 1)
	var mu sync.Mutex
	var last int64
	mem := &MemoryLimit{base: 300 * mib, extra: map[string]int64{}, set: func(n int64) int64 { mu.Lock(); last = n; mu.Unlock(); return 0 }}
	cfg := h.keyedConfig(false)
	run := func(handled int64, recs ...keyedRec) {
		h.send(recs...)
		m := h.startWith("keyed", cfg, func(d *Deps) { d.Memory = mem })
		h.waitHandled(handled, 30*time.Second, m)
		m.stop(t)
	}
	run(2, keyedRec{id: 1, v: "a", op: "c"}, keyedRec{id: 2, v: "b", op: "c"})
	run(3, keyedRec{id: 1, v: "c", op: "c"})
	mu.Lock()
	defer mu.Unlock()
	if last != 316*mib || mem.Limit() != 316*mib {
		t.Errorf("memory limit set to %d MiB (Limit %d MiB), want 316: the 300 MiB base and the index's bytes rounded up to 16 MiB", last/mib, mem.Limit()/mib)
	}
	if got := h.rows(); fmt.Sprint(got) != "map[1:c 2:b]" {
		t.Errorf("rows %v, want map[1:c 2:b]", got)
	}
}
