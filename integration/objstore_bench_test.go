package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// BenchmarkCommitObjectStores measures Delta commits (one add, one txn) on each emulator
// on loopback, with 1, 2 and 4 writers (one deltawriter.Table each) racing on one table:
// per-commit latency p50/p99 (including lost races and their retries) and commits/s.
//
//	scripts/stack.sh start-stores && go test -run '^$' -bench CommitObjectStores -benchtime 40x ./integration/
func BenchmarkCommitObjectStores(b *testing.B) {
	for _, kind := range storeKinds {
		for _, writers := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/writers=%d", kind, writers), func(b *testing.B) {
				o := needStore(b, kind)
				uri := c38Table(b, o)
				ctx := context.Background()
				var mu sync.Mutex
				var lat []time.Duration
				per := (b.N + writers - 1) / writers
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						tbl, err := deltawriter.Open(ctx, mustOpen(b, uri))
						if err != nil {
							b.Error(err)
							return
						}
						for i := 0; i < per; i++ {
							t0 := time.Now()
							for {
								s, err := tbl.Snapshot(ctx)
								if err != nil {
									b.Error(err)
									return
								}
								_, err = tbl.Commit(ctx, deltawriter.Commit{ReadVersion: s.Version, Adds: []deltalog.Add{c38Add(fmt.Sprintf("b%d-%d", w, i))},
									Txns: []deltalog.Txn{{AppID: fmt.Sprintf("bench-%d", w), Version: int64(i)}}})
								if errors.Is(err, deltawriter.ErrCommitAttempts) {
									continue
								}
								if err != nil {
									b.Error(err)
									return
								}
								break
							}
							mu.Lock()
							lat = append(lat, time.Since(t0))
							mu.Unlock()
						}
					}(w)
				}
				wg.Wait()
				el := time.Since(start)
				b.StopTimer()
				slices.Sort(lat)
				if len(lat) == 0 {
					return
				}
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
				b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99_ms")
				b.ReportMetric(float64(len(lat))/el.Seconds(), "commits/s")
			})
		}
	}
}
