package keyindex

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// The benchmarks build a local table of 100 data files with ingestd's writer (id long,
// seq long, a 16-byte string), once per process, and measure Build (keys per second,
// bytes per key from runtime.MemStats) and, beside it, finding one batch of keys'
// rows with the index and with min/max pruning plus a scan of the candidate files' key
// column. Run: go test -run '^$' -bench . -benchtime 3x -cpu 1 ./deltawriter/keyindex/

const benchFiles = 100

var (
	benchMu     sync.Mutex
	benchTables = map[string]*testTable{}
	benchDirs   []string
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range benchDirs {
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}

// benchTable returns a table of n keys 0..n-1 in benchFiles files: spread (a random
// permutation: every file's min/max spans nearly all keys) or clustered (file i holds
// keys i·n/100 … (i+1)·n/100-1 in order).
func benchTable(b *testing.B, n int, clustered bool) *testTable {
	benchMu.Lock()
	defer benchMu.Unlock()
	name := fmt.Sprintf("%d-%v", n, clustered)
	if tt, ok := benchTables[name]; ok {
		return tt
	}
	dir, err := os.MkdirTemp("", "keyindex-bench-")
	if err != nil {
		b.Fatal(err)
	}
	benchDirs = append(benchDirs, dir)
	ctx := context.Background()
	st, err := storage.NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		b.Fatal(err)
	}
	p := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	m := deltalog.Metadata{ID: "4b5e8f7a-0000-4000-8000-000000000002", Format: deltalog.Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString: idSeqSchema, PartitionColumns: []string{}, Configuration: map[string]string{}}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: &p, Metadata: &m}); err != nil {
		b.Fatal(err)
	}
	tt := &testTable{t: b, st: st, tbl: tbl}
	snap := tt.snap()
	pq, err := snap.DataFileSchema()
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	if !clustered {
		r := rand.New(rand.NewPCG(1, 2))
		r.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	per := n / benchFiles
	var adds []deltalog.Add
	leaves := map[string]int{}
	for i, c := range pq.Columns() {
		leaves[c[0]] = i
	}
	for f := range benchFiles {
		cols := make([][]parquet.Value, 3)
		for r := range per {
			id := ids[f*per+r]
			cols[leaves["id"]] = append(cols[leaves["id"]], parquet.Int64Value(id).Level(0, 1, leaves["id"]))
			cols[leaves["seq"]] = append(cols[leaves["seq"]], parquet.Int64Value(id*3).Level(0, 1, leaves["seq"]))
			cols[leaves["v"]] = append(cols[leaves["v"]], parquet.ByteArrayValue(fmt.Appendf(nil, "payload-%08d", id%1e8)).Level(0, 1, leaves["v"]))
		}
		add, err := deltawriter.WriteColumns(ctx, st, pq, deltatest.ColumnsOf(pq, cols), per, snap.FileOptions())
		if err != nil {
			b.Fatal(err)
		}
		adds = append(adds, add)
	}
	tt.commit(adds, nil)
	benchTables[name] = tt
	return tt
}

// BenchmarkBuild reports keys/s of Build and the index's bytes/key (heap growth after a
// GC, runtime.MemStats.HeapAlloc).
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("keys=%dM", n/1_000_000), func(b *testing.B) {
			tt := benchTable(b, n, false)
			snap := tt.snap()
			spec := Spec{Key: []string{"id"}, Sequence: "seq"}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			x, err := Build(context.Background(), tt.st, snap, spec)
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			if s := x.Stats(); s.Keys != n {
				b.Fatalf("%d keys, want %d", s.Keys, n)
			}
			perKey := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
			tableBytes := float64(x.Stats().Bytes) / float64(n)
			runtime.KeepAlive(x)
			x = nil
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			for b.Loop() {
				if _, err := Build(context.Background(), tt.st, snap, spec); err != nil {
					b.Fatal(err)
				}
			}
			reportRates(b, float64(n)*float64(b.N), time.Since(start), cpuTime()-cpu0)
			b.ReportMetric(perKey, "heap-bytes/key")
			b.ReportMetric(tableBytes, "table-bytes/key")
		})
	}
}

// BenchmarkFind finds the rows of a batch of 10 000 keys: with the index (Lookup), and
// with min/max pruning by the files' statistics then a scan of the candidates' key
// column. spread: keys in random order over the files, a uniform batch; clustered: keys
// in order, a batch of consecutive keys (the best case of pruning).
func BenchmarkFind(b *testing.B) {
	const n, batch = 10_000_000, 10_000
	for _, clustered := range []bool{false, true} {
		layout := map[bool]string{false: "spread", true: "clustered"}[clustered]
		tt := benchTable(b, n, clustered)
		snap := tt.snap()
		r := rand.New(rand.NewPCG(3, 4))
		keys := make([]int64, batch)
		start := r.Int64N(n - batch)
		for i := range keys {
			if clustered {
				keys[i] = start + int64(i)
			} else {
				keys[i] = r.Int64N(n)
			}
		}
		enc := make([][]byte, batch)
		for i, k := range keys {
			enc[i] = key(b, long, parquet.Int64Value(k))
		}
		b.Run("index/"+layout, func(b *testing.B) {
			x, err := Build(context.Background(), tt.st, snap, Spec{Key: []string{"id"}, Sequence: "seq"})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			for b.Loop() {
				for _, k := range enc {
					if _, ok := x.Lookup(k); !ok {
						b.Fatal("key not found")
					}
				}
			}
			reportRates(b, float64(batch)*float64(b.N), time.Since(start), cpuTime()-cpu0)
		})
		b.Run("minmax/"+layout, func(b *testing.B) {
			type bounds struct{ lo, hi int64 }
			stats := map[string]bounds{}
			for _, a := range snap.Files.All() {
				var s struct {
					Min struct{ ID int64 } `json:"minValues"`
					Max struct{ ID int64 } `json:"maxValues"`
				}
				if err := json.Unmarshal([]byte(a.Stats), &s); err != nil {
					b.Fatal(err)
				}
				stats[a.Path] = bounds{s.Min.ID, s.Max.ID}
			}
			lay, err := newLayout(snap, Spec{Key: []string{"id"}}, time.UTC)
			if err != nil {
				b.Fatal(err)
			}
			scanned := 0
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			for b.Loop() {
				want := make(map[string]bool, batch)
				var cands []deltalog.Add
				for _, a := range snap.Files.All() {
					s, hit := stats[a.Path], false
					for _, k := range keys {
						if k >= s.lo && k <= s.hi {
							hit = true
							break
						}
					}
					if hit {
						cands = append(cands, a)
					}
				}
				for _, k := range enc {
					want[string(k)] = false
				}
				found := 0
				for _, a := range cands {
					if _, _, err := readFile(context.Background(), tt.st, lay, a, func(rows []row) {
						for _, r := range rows {
							if _, ok := want[string(r.key)]; ok {
								found++
							}
						}
					}, nil); err != nil {
						b.Fatal(err)
					}
				}
				if found != len(want) {
					b.Fatalf("found %d rows, want %d", found, len(want))
				}
				scanned += len(cands)
			}
			reportRates(b, float64(batch)*float64(b.N), time.Since(start), cpuTime()-cpu0)
			b.ReportMetric(float64(scanned)/float64(b.N), "files/batch")
		})
	}
}

// reportRates reports keys per second of wall time and per CPU-second (user + system, all
// threads; with -cpu 1 the run uses one core).
func reportRates(b *testing.B, keys float64, wall, cpu time.Duration) {
	b.ReportMetric(keys/wall.Seconds(), "keys/s")
	if cpu > 0 {
		b.ReportMetric(keys/cpu.Seconds(), "keys/cpu-s")
	}
}
