package keyindex

import (
	"math"
	"math/bits"
)

// The key table: open addressing with Robin Hood linear probing, split into numShards
// shards by the fingerprint's top bits so that each shard grows and shrinks on its own
// (a resize copies 1/256 of the table, never all of it). A slot is 32 bytes and holds no
// pointer, so the garbage collector never scans the table.

const (
	shardBits = 8
	numShards = 1 << shardBits
	minSlots  = 8 // per shard: the table's floor is numShards·minSlots·32 bytes = 64 KiB

	// A shard grows when an insert would pass maxLoad and shrinks when a removal leaves it
	// below minLoad, each time to targetLoad: so every shard above its floor holds between
	// 0.7 and 0.9 keys per slot, 35.6 to 45.7 bytes per key.
	maxLoad    = 0.9
	targetLoad = 0.8
	minLoad    = 0.7
)

// SlotBytes is the size of one slot of the key table in bytes.
const SlotBytes = 32

// slot is one key: its 128-bit fingerprint (hi, lo), and either one live row (file id,
// row position, sequence) or a remembered delete (flagDeleted; row holds the delete's
// time in Unix seconds, seq its sequence). file == 0 marks an empty slot.
type slot struct {
	hi, lo uint64
	file   uint32
	row    uint32
	seq    int64
}

const (
	flagOverflow = 1 << 31 // more live rows of the key are in Index.over
	flagDeleted  = 1 << 30 // a remembered delete, no live row
	fileMask     = 1<<30 - 1
)

type shard struct {
	slots []slot
	n     int
}

type table struct{ shards [numShards]shard }

func (t *table) shard(hi uint64) *shard { return &t.shards[hi>>(64-shardBits)] }

// presize sizes every shard for n keys in all at the target load.
func (t *table) presize(n int) {
	per := int(math.Ceil(float64(n) / numShards / targetLoad))
	for i := range t.shards {
		if s := &t.shards[i]; s.n == 0 {
			s.slots = make([]slot, max(minSlots, per))
		}
	}
}

func (t *table) len() int {
	n := 0
	for i := range t.shards {
		n += t.shards[i].n
	}
	return n
}

func (t *table) slotCount() int {
	n := 0
	for i := range t.shards {
		n += len(t.shards[i].slots)
	}
	return n
}

// home is the slot a fingerprint's probe starts at (Lemire's multiply-shift range
// reduction of lo, which is independent of the shard-selecting bits of hi).
func (s *shard) home(lo uint64) int {
	h, _ := bits.Mul64(lo, uint64(len(s.slots)))
	return int(h)
}

// dist is how far slot i is from the home of the key it holds.
func (s *shard) dist(i int) int {
	d := i - s.home(s.slots[i].lo)
	if d < 0 {
		d += len(s.slots)
	}
	return d
}

// find returns the index of the slot holding (hi, lo), or -1.
func (s *shard) find(hi, lo uint64) int {
	if len(s.slots) == 0 {
		return -1
	}
	i, d := s.home(lo), 0
	for {
		e := &s.slots[i]
		if e.file == 0 {
			return -1
		}
		if e.lo == lo && e.hi == hi {
			return i
		}
		if s.dist(i) < d { // Robin Hood: the key would sit here if it were present
			return -1
		}
		d++
		if i++; i == len(s.slots) {
			i = 0
		}
	}
}

// insert adds e, whose fingerprint must be absent, growing the shard past maxLoad.
func (s *shard) insert(e slot) {
	if len(s.slots) == 0 || float64(s.n+1) > maxLoad*float64(len(s.slots)) {
		s.resize(int(math.Ceil(float64(s.n+1) / targetLoad)))
	}
	s.place(e)
}

// place puts e into the shard without a load check.
func (s *shard) place(e slot) {
	i, d := s.home(e.lo), 0
	for {
		c := &s.slots[i]
		if c.file == 0 {
			*c = e
			s.n++
			return
		}
		if cd := s.dist(i); cd < d {
			e, *c = *c, e
			d = cd
		}
		d++
		if i++; i == len(s.slots) {
			i = 0
		}
	}
}

// remove empties slot i (backward-shift deletion, no tombstones) and shrinks the shard
// below minLoad.
func (s *shard) remove(i int) {
	for {
		j := i + 1
		if j == len(s.slots) {
			j = 0
		}
		if s.slots[j].file == 0 || s.dist(j) == 0 {
			s.slots[i] = slot{}
			break
		}
		s.slots[i] = s.slots[j]
		i = j
	}
	s.n--
	if len(s.slots) > minSlots && float64(s.n) < minLoad*float64(len(s.slots)) {
		s.resize(int(math.Ceil(float64(s.n) / targetLoad)))
	}
}

// resize re-places every key into a new array of n slots (at least minSlots).
func (s *shard) resize(n int) {
	old := s.slots
	s.slots, s.n = make([]slot, max(minSlots, n)), 0
	for _, e := range old {
		if e.file != 0 {
			s.place(e)
		}
	}
}

// filter keeps the slots for which keep returns true (keep may change the slot, but not
// its fingerprint) and re-places them at the target load.
func (s *shard) filter(keep func(e *slot) bool) {
	kept := s.slots[:0:0]
	for i := range s.slots {
		if e := &s.slots[i]; e.file != 0 && keep(e) {
			kept = append(kept, *e)
		}
	}
	if len(kept) == s.n && float64(s.n) >= minLoad*float64(len(s.slots)) {
		// Nothing removed: write the changed slots back in place.
		k := 0
		for i := range s.slots {
			if s.slots[i].file != 0 {
				s.slots[i] = kept[k]
				k++
			}
		}
		return
	}
	s.slots, s.n = make([]slot, max(minSlots, int(math.Ceil(float64(len(kept))/targetLoad)))), 0
	for _, e := range kept {
		s.place(e)
	}
}
