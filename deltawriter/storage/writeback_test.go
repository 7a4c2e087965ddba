package storage

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

// BenchmarkPutAfterLargeCreate times the Put that makes a 17 MiB Create'd data file
// durable (the log entry of a flush of one large file), the file written over about
// 0.3 s as a flush or an OPTIMIZE writes a file, with its writeback started every writebackChunk
// bytes ("writeback") and left to the kernel until the fsync ("fsync-only").
func BenchmarkPutAfterLargeCreate(b *testing.B) {
	for _, c := range []struct {
		name  string
		chunk int64
	}{{"fsync-only", math.MaxInt64}, {"writeback", writebackChunk}} {
		b.Run(c.name, func(b *testing.B) {
			old := writebackChunk
			writebackChunk = c.chunk
			b.Cleanup(func() { writebackChunk = old })
			ctx := context.Background()
			l, err := NewLocal(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			page := make([]byte, 64<<10)
			for i := range page {
				page[i] = byte(i * 7)
			}
			var puts []time.Duration
			for i := 0; b.Loop(); i++ {
				w, err := l.Create(ctx, "part-0.parquet")
				if err != nil {
					b.Fatal(err)
				}
				for j := 0; j < 272; j++ {
					page[0] = byte(i + j)
					if _, err := w.Write(page); err != nil {
						b.Fatal(err)
					}
					time.Sleep(time.Millisecond)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				t := time.Now()
				if err := l.Put(ctx, "_delta_log/00000000000000000001.json", []byte("{}")); err != nil {
					b.Fatal(err)
				}
				puts = append(puts, time.Since(t))
			}
			slices.Sort(puts)
			b.ReportMetric(float64(puts[len(puts)/2].Microseconds())/1000, "put-p50-ms")
			b.ReportMetric(float64(puts[len(puts)-1].Microseconds())/1000, "put-max-ms")
		})
	}
}
