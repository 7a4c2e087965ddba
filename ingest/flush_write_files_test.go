package ingest

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// forEachConcurrent runs every call once, at most GOMAXPROCS at a time, and each result
// lands at its own index whatever the finishing order.
func TestForEachConcurrentOrderAndBound(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	const n = 40
	got := make([]int, n)
	var running, peak atomic.Int64
	err := forEachConcurrent(context.Background(), n, func(_ context.Context, i int) error {
		r := running.Add(1)
		for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
		}
		time.Sleep(time.Duration(n-i) * 100 * time.Microsecond) // later calls finish first
		got[i] = i * i
		running.Add(-1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != i*i {
			t.Fatalf("result %d = %d, want %d", i, v, i*i)
		}
	}
	if p := peak.Load(); p != 3 {
		t.Fatalf("%d calls ran at once, want GOMAXPROCS = 3", p)
	}
}

// The first error is returned, cancels the calls in flight, skips the calls not yet
// started, and every started call has returned before forEachConcurrent does.
func TestForEachConcurrentFirstErrorWins(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	first := errors.New("upload 0 failed")
	var started, finished atomic.Int64
	cancelled := make(chan struct{}, 1)
	inFlight := make(chan struct{}, 1)
	err := forEachConcurrent(context.Background(), 50, func(ctx context.Context, i int) error {
		started.Add(1)
		defer finished.Add(1)
		if i == 0 {
			select { // another call is in flight
			case <-inFlight:
			case <-time.After(10 * time.Second):
				return errors.New("no other call started while call 0 ran")
			}
			return first
		}
		select {
		case inFlight <- struct{}{}:
		default:
		}
		select { // an upload that only ends when cancelled
		case <-ctx.Done():
			cancelled <- struct{}{}
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("not cancelled")
		}
	})
	if err != first {
		t.Fatalf("got %v, want the first error %v", err, first)
	}
	if s, f := started.Load(), finished.Load(); s != 2 || f != 2 {
		t.Fatalf("%d calls started and %d finished, want 2 and 2 (the rest skipped, none left running)", s, f)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("the call in flight was not cancelled")
	}
}

// With GOMAXPROCS=1 the calls run inline, in order, and stop at the first error.
func TestForEachConcurrentInline(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var order []int
	boom := errors.New("boom")
	err := forEachConcurrent(context.Background(), 5, func(_ context.Context, i int) error {
		order = append(order, i) // no race: inline
		if i == 2 {
			return boom
		}
		return nil
	})
	if err != boom || len(order) != 3 || order[0] != 0 || order[2] != 2 {
		t.Fatalf("err %v, calls %v; want boom after calls 0, 1, 2", err, order)
	}
}
