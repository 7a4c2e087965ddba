package batcher

import (
	"testing"
	"time"
)

func TestBounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name   string
		limits Limits
		sizes  []int64
		wantAt int // index of the Add that returns full, -1 if none
	}{
		{"records", Limits{MaxRecords: 3}, []int64{1, 1, 1, 1}, 2},
		{"bytes", Limits{MaxBytes: 10}, []int64{4, 4, 4}, 2},
		{"bytes exact", Limits{MaxBytes: 8}, []int64{4, 4}, 1},
		{"no bound", Limits{}, []int64{100, 100}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New[int](tt.limits)
			got := -1
			for i, s := range tt.sizes {
				if b.Add(i, s, t0) && got < 0 {
					got = i
				}
			}
			if got != tt.wantAt {
				t.Fatalf("full at %d, want %d", got, tt.wantAt)
			}
		})
	}
}

func TestAgeAndTake(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := New[string](Limits{MaxAge: 10 * time.Second})
	if b.Due(t0) {
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
	if b.Due(t0.Add(9 * time.Second)) {
		t.Fatal("due before max age")
	}
	if !b.Due(t0.Add(10 * time.Second)) {
		t.Fatal("not due at max age")
	}
	items := b.Take()
	if len(items) != 2 || items[0] != "a" || items[1] != "b" || b.Len() != 0 || b.Bytes() != 0 {
		t.Fatalf("take = %v, len %d bytes %d", items, b.Len(), b.Bytes())
	}
	b.Add("c", 1, t0.Add(time.Hour))
	if d, _ := b.Deadline(); !d.Equal(t0.Add(time.Hour + 10*time.Second)) {
		t.Fatalf("deadline after take %v: age must restart at the first new item", d)
	}
}

func TestDrop(t *testing.T) {
	b := New[int](Limits{})
	for i := range 6 {
		b.Add(i, int64(i), time.Unix(0, 0))
	}
	b.Drop(func(v int) bool { return v%2 == 0 }, func(v int) int64 { return int64(v) })
	got := b.Take()
	if len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 5 {
		t.Fatalf("after drop %v, want [1 3 5]", got)
	}
	b.Add(7, 7, time.Unix(0, 0))
	b.Drop(func(int) bool { return true }, func(v int) int64 { return int64(v) })
	if b.Len() != 0 || b.Bytes() != 0 {
		t.Fatal("drop all left items")
	}
	if _, ok := b.Deadline(); ok {
		t.Fatal("deadline after dropping everything")
	}
}
