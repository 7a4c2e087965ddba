package main

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// heapObjects is the runtime metric sampled by watchHeap: bytes of heap objects, live or
// not yet swept.
const heapObjects = "/memory/classes/heap/objects:bytes"

// watchHeap collects garbage, then samples the heap's objects every millisecond in a
// goroutine until the returned stop is called; stop ends the goroutine and returns the
// highest sample above the heap at the start, in bytes: the memory one operation holds
// (its garbage included, up to the collector's pacing), beside what was loaded before it.
func watchHeap() (stop func() uint64) {
	runtime.GC()
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		s := []metrics.Sample{{Name: heapObjects}}
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak - min(peak, base)
	}
}
