package ingest

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
)

// BenchmarkUpsertTable is the upsert benchmark of scripts/bench-upsert.sh (make
// bench-upsert; BENCHMARKS.md, Upserts at 10 M rows): batches of changes of
// BenchmarkFlushUpsert's ~200-byte record applied to a table that already holds
// UPSERT_BENCH_ROWS rows. It runs only with UPSERT_BENCH_DIR set, in one of two phases
// (UPSERT_BENCH_PHASE), each its own process so that the measured one's peak RSS holds
// no set-up:
//
//   - create: DIR/base, an append table of keys 0…ROWS-1 written by ingestd's append
//     flush in files of 1,000,000 rows; DIR/changes, an append table whose commit i
//     (version i) holds batch i of the changes, in record order, for the peers
//     (scripts/bench/upsert_peers.py) to apply the same batches; DIR/plan.json, the
//     variants, their batch counts and the live rows the model expects after each.
//   - ingestd: DIR/ingestd (a copy of DIR/base made by the script) gets the batches
//     through an upsert pipeline (table.key id, delete_when kind = 'BUY'), its key index
//     built first and measured (CPU, bytes per key); beside it, in the same process and
//     interleaved batch by batch, an append pipeline writes the same batches to
//     DIR/append (the baseline). One JSON line per variant and one for the index go to
//     DIR/results.jsonl.
//   - memory: the ingestd phase without the append pipeline (whose column buffers would
//     count in the peak RSS too), on a fresh copy of DIR/base: one JSON line, the peak RSS.
//
// The variants, applied in this order to the same table, are UPSERT_BENCH_BATCHES
// batches of UPSERT_BENCH_BATCH changes each (newChangeGen's: 5 % deletes of stored
// keys, update=P % of the rest updates a stored key, uniform or among the first 1 %
// ("hot"), the others insert new keys). The generator is seeded, so both phases make the
// same batches. CPU is the process's (getrusage, every thread), around the flush only.
func BenchmarkUpsertTable(b *testing.B) {
	dir := os.Getenv("UPSERT_BENCH_DIR")
	if dir == "" {
		b.Skip("UPSERT_BENCH_DIR is not set: run scripts/bench-upsert.sh")
	}
	rows, batch, batches := benchEnvInt(b, "UPSERT_BENCH_ROWS", 10_000_000), benchEnvInt(b, "UPSERT_BENCH_BATCH", 100_000),
		benchEnvInt(b, "UPSERT_BENCH_BATCHES", 3)
	switch phase := os.Getenv("UPSERT_BENCH_PHASE"); phase {
	case "create":
		upsertBenchCreate(b, dir, rows, batch, batches)
	case "ingestd":
		upsertBenchIngestd(b, dir, rows, batch, batches, true)
	case "memory":
		upsertBenchIngestd(b, dir, rows, batch, batches, false)
	default:
		b.Fatalf("UPSERT_BENCH_PHASE=%q: want create, ingestd or memory", phase)
	}
}

// upsertBenchVariants are BenchmarkUpsertTable's variants, in the order they are applied.
var upsertBenchVariants = []struct {
	name   string
	update float64
	hot    bool
}{{"update=1", 0.01, false}, {"update=10", 0.10, false}, {"update=100", 1, false}, {"update=100/hot", 1, true}}

// upsertBenchPlan is DIR/plan.json.
type upsertBenchPlan struct {
	Rows     int                  `json:"rows"`
	Batch    int                  `json:"batch"`
	Variants []upsertBenchVariant `json:"variants"`
}

type upsertBenchVariant struct {
	Name      string `json:"name"`
	Batches   int    `json:"batches"`
	LiveAfter int    `json:"live_after"`
}

func upsertBenchCreate(b *testing.B, dir string, rows, batch, batches int) {
	ctx := context.Background()
	base := benchPipelineAt(ctx, b, filepath.Join(dir, "base"), batch)
	g := newChangeGen(b, rows)
	offset := int64(0)
	for done := 0; done < rows; done += 1_000_000 {
		benchFlushAt(ctx, b, base, g.inserts(min(1_000_000, rows-done)), &offset)
	}
	changes := benchPipelineAt(ctx, b, filepath.Join(dir, "changes"), batch)
	plan := upsertBenchPlan{Rows: rows, Batch: batch}
	live, coffset := rows, int64(0)
	for _, v := range upsertBenchVariants {
		for range batches {
			recs, added, deleted := g.changes(batch, v.update, v.hot, true)
			live += added - deleted
			benchFlushAt(ctx, b, changes, recs, &coffset)
		}
		plan.Variants = append(plan.Variants, upsertBenchVariant{Name: v.name, Batches: batches, LiveAfter: live})
	}
	out, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plan.json"), out, 0o644); err != nil {
		b.Fatal(err)
	}
}

// upsertBenchIngestd is the ingestd phase (baseline: with the append pipeline, reporting
// speed) or the memory phase (without, reporting the peak RSS only).
func upsertBenchIngestd(b *testing.B, dir string, rows, batch, batches int, baseline bool) {
	ctx := context.Background()
	up := benchPipelineAt(ctx, b, filepath.Join(dir, "ingestd"), batch)
	keyed := *up.cfg
	keyed.Table.Mode, keyed.Table.Key, keyed.Table.DeleteWhen = config.ModeUpsert, []string{"id"}, "kind = 'BUY'"
	up = NewPipeline(&keyed, up.deps)
	app := benchPipelineAt(ctx, b, filepath.Join(dir, "append"), batch)
	g := newChangeGen(b, rows)
	g.liveKeys = make([]int64, rows) // the stored keys, as the create phase left them
	for i := range g.liveKeys {
		g.liveKeys[i] = int64(i)
	}
	g.next = int64(rows)
	res, err := os.OpenFile(filepath.Join(dir, "results.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Close()
	emit := func(v map[string]any) {
		if !baseline && v["what"] != "memory" {
			return
		}
		line, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := res.Write(append(line, '\n')); err != nil {
			b.Fatal(err)
		}
	}
	// The peak RSS counts from here: the index build and the flushes (and the generator's
	// list of live keys, 8 bytes a key, reported beside it).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("peak RSS not reset (%v): it includes the set-up", err)
	}
	snap, err := up.deps.Table.Snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	cpu0, wall0 := processCPU(b), time.Now()
	if err := up.fl.keyed.sync(ctx, up.deps.Table.Store(), snap); err != nil {
		b.Fatal(err)
	}
	buildCPU, buildWall := processCPU(b)-cpu0, time.Since(wall0)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	st := up.fl.keyed.ix.Stats()
	emit(map[string]any{"what": "index", "keys": st.Keys, "files": st.Files, "table_bytes": st.Bytes,
		"table_bytes_per_key": float64(st.Bytes) / float64(st.Keys), "heap_bytes_per_key": float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(st.Keys),
		"build_cpu_s": float64(buildCPU) / 1e9, "build_wall_s": buildWall.Seconds()})
	// The base table's txn holds offsets 0…rows-1 of the append that wrote it: the changes
	// follow them, or exactly-once would skip them as already committed.
	offset, aoffset := int64(rows), int64(0)
	live, turn := rows, 0
	for _, v := range upsertBenchVariants {
		var ucpu, acpu int64
		var uwall, awall time.Duration
		for range batches {
			recs, added, deleted := g.changes(batch, v.update, v.hot, true)
			live += added - deleted
			// Each flush starts on a collected heap: the generator's garbage (several times
			// the batch) would otherwise be swept and marked on the first flush's account.
			// The two pipelines take turns going first: the second reads the records from
			// a warm cache.
			upsert := func() {
				runtime.GC()
				c0, w0 := processCPU(b), time.Now()
				pprof.Do(ctx, pprof.Labels("pipeline", "upsert"), func(ctx context.Context) { benchFlushAt(ctx, b, up, recs, &offset) })
				ucpu, uwall = ucpu+processCPU(b)-c0, uwall+time.Since(w0)
			}
			appendOnly := func() {
				runtime.GC()
				c0, w0 := processCPU(b), time.Now()
				pprof.Do(ctx, pprof.Labels("pipeline", "append"), func(ctx context.Context) { benchFlushAt(ctx, b, app, recs, &aoffset) })
				acpu, awall = acpu+processCPU(b)-c0, awall+time.Since(w0)
			}
			if !baseline {
				upsert()
				continue
			}
			if turn++; turn%2 == 0 {
				upsert()
				appendOnly()
			} else {
				appendOnly()
				upsert()
			}
		}
		got := benchLiveRows(ctx, b, up)
		if got != int64(live) {
			b.Fatalf("%s: the table holds %d live rows, the model %d", v.name, got, live)
		}
		n := float64(batch * batches)
		ist := up.fl.keyed.ix.Stats()
		emit(map[string]any{"what": "variant", "variant": v.name, "changes": batch * batches, "live_after": live,
			"ingestd_cpu_s": float64(ucpu) / 1e9, "ingestd_wall_s": uwall.Seconds(), "ingestd_changes_per_cpu_s": n / (float64(ucpu) / 1e9),
			"append_cpu_s": float64(acpu) / 1e9, "append_wall_s": awall.Seconds(), "append_changes_per_cpu_s": n / (float64(acpu) / 1e9),
			"index_keys": ist.Keys, "index_bytes": ist.Bytes, "load": benchLoad()})
		b.ReportMetric(n/(float64(ucpu)/1e9), v.name+"-changes/cpu-s")
	}
	emit(map[string]any{"what": "memory", "peak_rss_bytes": benchVmHWM(b), "generator_bytes": 8 * cap(g.liveKeys),
		"max_bytes": up.cfg.Batch.MaxBytes, "index_bytes": up.fl.keyed.ix.Stats().Bytes})
}

// benchPipelineAt is an append pipeline (benchFlushPipeline's) writing the local table at
// path, flushing batches of up to n records.
func benchPipelineAt(ctx context.Context, b *testing.B, path string, n int) *Pipeline {
	st, err := storage.Open("file://" + path)
	if err != nil {
		b.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		b.Fatal(err)
	}
	return benchFlushPipeline(b, n, tbl, nil)
}

// benchFlushAt flushes recs through p at the next offsets.
func benchFlushAt(ctx context.Context, b *testing.B, p *Pipeline, recs []*kgo.Record, offset *int64) {
	for _, r := range recs {
		r.Offset = *offset
		*offset++
	}
	if _, err := p.fl.flush(ctx, recs, frameNote{id: 7, uniform: true}); err != nil {
		b.Fatal(err)
	}
}

// benchLiveRows is the live rows of p's table: its files' records less their deletion
// vectors' cardinalities.
func benchLiveRows(ctx context.Context, b *testing.B, p *Pipeline) int64 {
	snap, err := p.deps.Table.Snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var rows int64
	for _, a := range snap.Files.All() {
		n, _ := a.NumRecords()
		if a.DeletionVector != nil {
			n -= a.DeletionVector.Cardinality
		}
		rows += n
	}
	return rows
}

func benchEnvInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// benchVmHWM is the process's peak RSS (VmHWM), in bytes.
func benchVmHWM(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// benchLoad is the 1-minute load average.
func benchLoad() string {
	s, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Fields(string(s))[0]
}
