package keyindex

import (
	"math/rand/v2"
	"testing"
)

// The shards against a map: random inserts and removals keep every key findable, no
// absent key found, and every shard above its floor between minLoad and maxLoad.
func TestTableModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var tb table
	model := map[fp]uint32{}
	var keys []fp
	for step := range 200_000 {
		if len(keys) == 0 || r.IntN(10) < 6 || step < 50_000 {
			k := fp{r.Uint64(), r.Uint64()}
			sh := tb.shard(k.hi)
			if sh.find(k.hi, k.lo) >= 0 {
				t.Fatalf("step %d: absent key found", step)
			}
			row := uint32(step)
			sh.insert(slot{hi: k.hi, lo: k.lo, file: 1, row: row})
			model[k] = row
			keys = append(keys, k)
			continue
		}
		j := r.IntN(len(keys))
		k := keys[j]
		keys[j] = keys[len(keys)-1]
		keys = keys[:len(keys)-1]
		sh := tb.shard(k.hi)
		i := sh.find(k.hi, k.lo)
		if i < 0 {
			t.Fatalf("step %d: key missing", step)
		}
		sh.remove(i)
		delete(model, k)
	}
	if tb.len() != len(model) {
		t.Fatalf("%d keys, model %d", tb.len(), len(model))
	}
	for k, row := range model {
		sh := tb.shard(k.hi)
		i := sh.find(k.hi, k.lo)
		if i < 0 || sh.slots[i].row != row {
			t.Fatalf("key %v: slot %d", k, i)
		}
	}
	for i := range tb.shards {
		s := &tb.shards[i]
		if load := float64(s.n) / float64(len(s.slots)); len(s.slots) > minSlots && (load < minLoad || load > maxLoad) {
			t.Errorf("shard %d: %d keys in %d slots (load %.3f)", i, s.n, len(s.slots), load)
		}
	}
	// Bytes per key within the documented bounds.
	if b := float64(tb.slotCount()*SlotBytes) / float64(tb.len()); b < 32/maxLoad || b > 32/minLoad {
		t.Errorf("%.1f bytes per key", b)
	}
	// filter: drop half, the rest still found at the target load.
	n := 0
	for i := range tb.shards {
		tb.shards[i].filter(func(e *slot) bool { n++; return e.row%2 == 0 })
	}
	for k, row := range model {
		sh := tb.shard(k.hi)
		if i := sh.find(k.hi, k.lo); (i >= 0) != (row%2 == 0) {
			t.Fatalf("after filter: key with row %d at slot %d", row, i)
		}
	}
	if n != len(model) {
		t.Errorf("filter visited %d keys, want %d", n, len(model))
	}
}
