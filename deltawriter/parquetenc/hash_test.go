package parquetenc

import (
	"encoding/binary"
	"testing"
)

// unfmix64 inverts fmix64 (x ^= x>>33 is its own inverse; the multiplications are undone
// by the constants' inverses mod 2^64).
func unfmix64(x uint64) uint64 {
	inv := func(c uint64) uint64 {
		y := c // Newton's iteration for c⁻¹ mod 2^64: each step doubles the correct bits
		for range 6 {
			y *= 2 - c*y
		}
		return y
	}
	x ^= x >> 33
	x *= inv(0xc4ceb9fe1a85ec53)
	x ^= x >> 33
	x *= inv(0xff51afd7ed558ccd)
	x ^= x >> 33
	return x
}

// The dictionary tables are keyed per process: values a producer picks so that the public
// fmix64 sends them all to one slot (20,000 int64s and 8-byte strings whose unkeyed hash
// ends in 20 zero bits) spread over the slots of the keyed mix64 and hashBytes as random
// values would (≈ 17,300 distinct of 65,536; all 20,000 in one slot unkeyed), and
// intDict still tells every one apart.
func TestDictTablesKeyed(t *testing.T) {
	vals := make([]uint64, 20_000)
	for i := range vals {
		vals[i] = unfmix64(uint64(i+1) << 20)
		if fmix64(vals[i])&(1<<20-1) != 0 {
			t.Fatalf("unfmix64 is not fmix64's inverse at %d", i)
		}
	}
	ints, strs := map[uint64]bool{}, map[uint64]bool{}
	for _, v := range vals {
		ints[mix64(v)&(1<<16-1)] = true
		strs[hashBytes(binary.LittleEndian.AppendUint64(nil, v))&(1<<16-1)] = true
	}
	if len(ints) < 15_000 || len(strs) < 15_000 {
		t.Fatalf("crafted values fill %d (int) and %d (8-byte string) of 65,536 slots, want about 17,300", len(ints), len(strs))
	}
	var d intDict
	d.reset()
	for pass := range 2 {
		for i, v := range vals {
			if k, added := d.index(v); int(k) != i || added != (pass == 0) {
				t.Fatalf("pass %d value %d: entry %d added %v", pass, i, k, added)
			}
		}
	}
}
