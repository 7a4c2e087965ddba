package ingest

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchNote1K is cmd/benche2e's note text; benchFlushRecords1K cuts it to the length that
// makes its record 1024 bytes framed, as the end-to-end benchmark's 1024-byte record.
var benchNote1K = strings.Repeat("first purchase after the spring campaign; gift wrap requested. ", 200)

// benchFlushRecords1K is n framed ~1 KB records of benchFlushAvro (cmd/benche2e's 1024-byte
// record: a long customer string, an 872-byte note, four tags) over 4 partitions in runs
// of 500, their values back to back in one buffer, as a fetch hands them out.
func benchFlushRecords1K(b testing.TB, n int) []*kgo.Record {
	const run = 500
	sch := avro.MustParse(benchFlushAvro)
	recs := make([]*kgo.Record, n)
	offsets := [4]int64{}
	var buf []byte
	ends := make([]int, n)
	for i := range recs {
		v := map[string]any{"id": int64(1_000_000_000_000 + i), "name": fmt.Sprintf("customer-%012d (Ann Example, ann@example.com)", i),
			"score": float64(i) / 3, "active": i%2 == 0, "ts": int64(1_700_000_000_000_000 + i), "note": map[string]any{"string": benchNote1K[:872]},
			"count": int32(100 + i%7000), "amount": float64(i%100_000) / 100, "kind": "VIEW",
			"tags": []string{"web", "promo-spring-2024", "eu-west-1", "returning-customer!!!"}}
		body, err := avro.Marshal(sch, v)
		if err != nil {
			b.Fatal(err)
		}
		buf = append(append(buf, 0, 0, 0, 0, 7), body...)
		if i == 0 && len(buf) != 1024 {
			b.Fatalf("record is %d bytes framed, want 1024", len(buf))
		}
		ends[i] = len(buf)
		part := int32(i / run % 4)
		recs[i] = &kgo.Record{Topic: "bench", Partition: part, Offset: offsets[part], Key: []byte(fmt.Sprint(i))}
		offsets[part]++
	}
	start := 0
	for i := range recs {
		recs[i].Value = buf[start:ends[i]:ends[i]]
		start = ends[i]
	}
	return recs
}

// refetch gives recs fresh value buffers (a copy in one new allocation), as each batch of
// the daemon arrives in new fetch buffers.
func refetch(recs []*kgo.Record) {
	n := 0
	for _, r := range recs {
		n += len(r.Value)
	}
	buf := make([]byte, 0, n)
	for _, r := range recs {
		s := len(buf)
		buf = append(buf, r.Value...)
		r.Value = buf[s:len(buf):len(buf)]
	}
}

// minflt is the process's minor page faults so far (getrusage ru_minflt).
func minflt() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Minflt
}

// BenchmarkFlush1K times a consumer flush of batches of 12,500 ~1 KB records (the
// end-to-end benchmark's batch at 1 KB, unpartitioned, the default column forms) to a local
// table directory, with the records in fresh buffers each batch ("fresh": a copy, as each
// batch arrives in new fetch buffers) or the same ones ("same"). Besides ns/record and the
// process's cpu-ns/record it reports the route stage's (decode into the columns) wall
// time a record and the minor page faults per flush of each stage (flt-fetch: the copy,
// which ns/record includes): the column buffers are kept across flushes, so a steady-state
// flush faults in none of them.
func BenchmarkFlush1K(b *testing.B) {
	const n = 12_500
	for _, fresh := range []bool{true, false} {
		b.Run(map[bool]string{true: "fresh", false: "same"}[fresh], func(b *testing.B) {
			recs := benchFlushRecords1K(b, n)
			ctx := context.Background()
			tbl := benchTable(ctx, b)
			p := benchFlushPipeline(b, n, tbl, nil)
			p.fl.levelled = false
			t := tableState{version: -1, txns: map[string]int64{}}
			var fPrep, fRoute, fWrite, fRel, fFetch int64
			var tRoute time.Duration
			cpu0 := processCPU(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m0 := minflt()
				if fresh {
					refetch(recs)
				}
				m1 := minflt()
				ready, items, prep := benchPrepare(ctx, b, p, t, recs)
				m2 := minflt()
				t0 := time.Now()
				out := p.fl.route(t, prep, items)
				tRoute += time.Since(t0)
				m3 := minflt()
				if _, err := p.fl.writeFiles(ctx, prep, out); err != nil {
					b.Fatal(err)
				}
				m4 := minflt()
				p.fl.releaseCols(prep)
				endFlush(p.fl, items)
				p.committedLocked(ready, nil)
				m5 := minflt()
				fFetch += m1 - m0
				fPrep += m2 - m1
				fRoute += m3 - m2
				fWrite += m4 - m3
				fRel += m5 - m4
			}
			b.StopTimer()
			N := float64(b.N)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/record")
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(n*b.N), "cpu-ns/record")
			b.ReportMetric(float64(tRoute.Nanoseconds())/float64(n*b.N), "route-ns/record")
			b.ReportMetric(float64(fFetch)/N, "flt-fetch/op")
			b.ReportMetric(float64(fPrep)/N, "flt-prep/op")
			b.ReportMetric(float64(fRoute)/N, "flt-route/op")
			b.ReportMetric(float64(fWrite)/N, "flt-write/op")
			b.ReportMetric(float64(fRel)/N, "flt-rel/op")
		})
	}
}
