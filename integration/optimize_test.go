package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// OPTIMIZE beside a running pipeline and a second, concurrent OPTIMIZE, on a 500-file
// table with a Spark deletion vector and a checkpoint (TestOptimizeC43), and OPTIMIZE run
// by the pipeline itself (TestBackgroundOptimize).

const eventsAvro = `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"v","type":"string"},
{"name":"dt","type":["null",{"type":"int","logicalType":"date"}]}]}`

// eventDay is the dt of seed id i: 200 files of 50 rows in 2026-11-01, 200 in 2026-11-02,
// 100 with a NULL dt.
func eventDay(i int) *string {
	switch {
	case i < 10_000:
		return sp("2026-11-01")
	case i < 20_000:
		return sp("2026-11-02")
	}
	return nil
}

// seedEvents writes the 500 seed files (ids 0..24,999) in 5 commits, the last one with a
// txn of version 9 for each of the 4 source partitions of topic (offsets 0..9 count as
// already written).
func seedEvents(t *testing.T, tbl *deltawriter.Table, topic string) {
	ctx := context.Background()
	for c := 0; c < 5; c++ {
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pq, err := snap.DataFileSchema()
		if err != nil {
			t.Fatal(err)
		}
		var adds []deltalog.Add
		for f := c * 100; f < (c+1)*100; f++ {
			var rows []map[string]any
			for i := f * 50; i < (f+1)*50; i++ {
				rows = append(rows, map[string]any{"id": int64(i), "v": fmt.Sprintf("v%d", i)})
			}
			cols, err := deltawriter.RowsToColumns(pq, rows)
			if err != nil {
				t.Fatal(err)
			}
			opts := snap.FileOptions()
			day := eventDay(f * 50)
			opts.PartitionValues = map[string]*string{"dt": day}
			dir := deltawriter.HiveDefaultPartition
			if day != nil {
				dir = *day
			}
			opts.Dir = deltawriter.PartitionDir([]string{"dt"}, []string{dir})
			add, err := deltawriter.WriteDataFile(ctx, tbl.Store(), pq, cols, len(rows), opts)
			if err != nil {
				t.Fatal(err)
			}
			adds = append(adds, add)
		}
		commit := deltawriter.Commit{ReadVersion: snap.Version, Adds: adds, EngineInfo: "ingestd/test"}
		if c == 4 {
			for p := 0; p < 4; p++ {
				commit.Txns = append(commit.Txns, deltalog.Txn{AppID: fmt.Sprintf("events-ingest-%s-%d", topic, p), Version: 9})
			}
		}
		if _, err := tbl.Commit(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
}

// eventProducer produces Confluent-framed events to explicit partitions.
type eventProducer struct {
	t      *testing.T
	cl     *kgo.Client
	schema avro.Schema
	id     int
	topic  string
}

func newEventProducer(t *testing.T, s stack, topic string) *eventProducer {
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := reg.CreateSchema(context.Background(), topic+"-value", sr.Schema{Schema: eventsAvro, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	p := &eventProducer{t: t, cl: kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner())), schema: avro.MustParse(eventsAvro), topic: topic, id: ss.ID}
	return p
}

// send produces n records per partition with ids from first; dt alternates between the
// two dates. It returns the ids.
func (p *eventProducer) send(first int64, n int) []int64 {
	var hdr sr.ConfluentHeader
	var recs []*kgo.Record
	var ids []int64
	id := first
	for part := int32(0); part < 4; part++ {
		for i := 0; i < n; i++ {
			day := int(20758 + id%2) // 2026-11-01, 2026-11-02 (days since 1970-01-01)
			body, err := avro.Marshal(p.schema, map[string]any{"id": id, "v": fmt.Sprintf("v%d", id), "dt": &day})
			if err != nil {
				p.t.Error(err)
				return nil
			}
			framed, _ := hdr.AppendEncode(nil, p.id, nil)
			recs = append(recs, &kgo.Record{Topic: p.topic, Partition: part, Value: append(framed, body...)})
			ids = append(ids, id)
			id++
		}
	}
	if err := p.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		p.t.Errorf("produce: %v", err)
	}
	return ids
}

// optimizeRun is one `ingestd table optimize` process.
type optimizeRun struct {
	out    string
	err    error
	maxRSS int64 // KiB
	wall   time.Duration
}

func runOptimize(t *testing.T, args ...string) optimizeRun {
	cmd := exec.Command(ingestdBin(t), append([]string{"table", "optimize"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	r := optimizeRun{out: string(out), wall: time.Since(start)}
	if err != nil {
		r.err = fmt.Errorf("%v: %s", err, stderr.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss
	}
	return r
}

// optimizeVersion is the version an optimize run reports committing ("version N: OPTIMIZE").
func optimizeVersion(t *testing.T, out string) int64 {
	for _, l := range strings.Split(out, "\n") {
		var v int64
		if _, err := fmt.Sscanf(l, "version %d: OPTIMIZE", &v); err == nil {
			return v
		}
	}
	t.Fatalf("no OPTIMIZE commit in output:\n%s", out)
	return -1
}

func readCommitFile(t *testing.T, root string, v int64) []deltalog.Action {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "_delta_log", fmt.Sprintf("%020d.json", v)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	actions, err := deltalog.ParseCommit(f)
	if err != nil {
		t.Fatal(err)
	}
	return actions
}

// checkOptimizeCommit checks one OPTIMIZE commit action by action against the snapshot
// it read (before): per removed file the exact remove, per new file an add with
// dataChange false and stats, no txn or metaData; returns removes per partition (dt
// value or "NULL") and adds per partition.
func checkOptimizeCommit(t *testing.T, actions []deltalog.Action, before logState, predicate string) (removes, adds map[string]int, info deltalog.CommitInfo) {
	removes, adds = map[string]int{}, map[string]int{}
	pv := func(m map[string]*string) string {
		if len(m) != 1 {
			t.Errorf("partitionValues %v: want exactly dt", m)
		}
		if m["dt"] == nil {
			return "NULL"
		}
		return *m["dt"]
	}
	var removedRows, addedRows int64
	for _, a := range actions {
		switch {
		case a.Remove != nil:
			r := a.Remove
			orig, ok := before.Files[deltalog.FileKey(r.Path, r.DeletionVector)]
			if !ok {
				t.Errorf("remove of %s (dv %v): not a live file of the version read", r.Path, r.DeletionVector)
				continue
			}
			if r.DataChange || r.ExtendedFileMetadata == nil || !*r.ExtendedFileMetadata || r.Size == nil || *r.Size != orig.Size ||
				jsonString(r.PartitionValues) != jsonString(orig.PartitionValues) || jsonString(r.DeletionVector) != jsonString(orig.DeletionVector) || r.DeletionTimestamp == nil {
				t.Errorf("remove %s: %s, for add %s", r.Path, jsonString(r), jsonString(orig))
			}
			if _, has := orig.PartitionValues["dt"]; !has {
				t.Errorf("remove %s: partitionValues has no dt key (NULL must be {\"dt\": null})", r.Path)
			}
			n, _ := orig.NumRecords()
			if orig.DeletionVector != nil {
				n -= orig.DeletionVector.Cardinality
			}
			removedRows += n
			removes[pv(r.PartitionValues)]++
		case a.Add != nil:
			if a.Add.DataChange || a.Add.DeletionVector != nil || a.Add.Stats == "" {
				t.Errorf("add %s", jsonString(a.Add))
			}
			n, ok := a.Add.NumRecords()
			if !ok {
				t.Errorf("add %s without numRecords", a.Add.Path)
			}
			addedRows += n
			day := pv(a.Add.PartitionValues)
			if dir := "dt=" + strings.Replace(day, "NULL", deltawriter.HiveDefaultPartition, 1) + "/"; !strings.HasPrefix(a.Add.Path, dir) {
				t.Errorf("add %s outside its partition directory %s", a.Add.Path, dir)
			}
			adds[day]++
		case a.CommitInfo != nil:
			info = a.CommitInfo
		default:
			t.Errorf("unexpected action in an OPTIMIZE commit: %s", jsonString(a))
		}
	}
	if removedRows != addedRows {
		t.Errorf("OPTIMIZE removed %d live rows and added %d", removedRows, addedRows)
	}
	params, _ := info["operationParameters"].(map[string]any)
	metrics, _ := info["operationMetrics"].(map[string]any)
	nr, na := 0, 0
	for _, v := range removes {
		nr += v
	}
	for _, v := range adds {
		na += v
	}
	if info["operation"] != "OPTIMIZE" || info["isBlindAppend"] != false || params["predicate"] != predicate || params["targetSize"] != "268435456" ||
		params["zOrderBy"] != "[]" || params["auto"] != "false" || metrics["numRemovedFiles"] != fmt.Sprint(nr) || metrics["numAddedFiles"] != fmt.Sprint(na) {
		t.Errorf("commitInfo %s", jsonString(info))
	}
	for _, k := range []string{"numRemovedBytes", "numAddedBytes", "minFileSize", "maxFileSize", "p50FileSize", "numDeletionVectorsRemoved"} {
		if _, ok := metrics[k].(string); !ok {
			t.Errorf("operationMetrics.%s %v: want a string", k, metrics[k])
		}
	}
	return removes, adds, info
}

// logState is the live files and txn versions at one version, replayed from the JSON
// commits 0..v (PROTOCOL.md, "Action Reconciliation"), independent of deltawriter's
// snapshot code.
type logState struct {
	Files map[string]deltalog.Add
	Txns  map[string]int64
}

func logStateAt(t *testing.T, root string, v int64) logState {
	t.Helper()
	st := logState{Files: map[string]deltalog.Add{}, Txns: map[string]int64{}}
	for i := int64(0); i <= v; i++ {
		for _, a := range readCommitFile(t, root, i) {
			switch {
			case a.Add != nil:
				st.Files[deltalog.FileKey(a.Add.Path, a.Add.DeletionVector)] = *a.Add
			case a.Remove != nil:
				delete(st.Files, deltalog.FileKey(a.Remove.Path, a.Remove.DeletionVector))
			case a.Txn != nil:
				st.Txns[a.Txn.AppID] = a.Txn.Version
			}
		}
	}
	return st
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// counts checks the row count with Spark and delta-rs, and that delta-rs reads exactly
// the ids want (no duplicate, none missing).
func checkEventCounts(t *testing.T, spark *sparkSession, python, root string, want map[int64]bool, step string) {
	t.Helper()
	var cnt []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT count(*) AS n, count(DISTINCT id) AS d FROM delta.`" + root + "`"}, &cnt)
	if fmt.Sprint(cnt[0]["n"]) != fmt.Sprint(len(want)) || fmt.Sprint(cnt[0]["d"]) != fmt.Sprint(len(want)) {
		t.Errorf("%s: Spark reads %v rows (%v distinct ids), want %d", step, cnt[0]["n"], cnt[0]["d"], len(want))
	}
	r := readDeltaRS(t, python, root)
	seen := map[int64]bool{}
	for _, row := range r.Rows {
		id, _ := row["id"].(json.Number).Int64()
		if seen[id] || !want[id] {
			t.Errorf("%s: delta-rs reads id %d (duplicate %v, expected %v)", step, id, seen[id], want[id])
		}
		seen[id] = true
	}
	if len(seen) != len(want) {
		t.Errorf("%s: delta-rs reads %d distinct ids, want %d", step, len(seen), len(want))
	}
	t.Logf("%s: %d rows in %d files (Spark and delta-rs) at %s", step, len(want), r.Files, time.Now().Format("15:04:05"))
}

// TestOptimizeC43: compaction beside appending writers. delta-rs's compaction failed with
// "Failed to commit transaction: 15" (its retry limit) next to appenders
// (delta-io/delta-rs#2700); running OPTIMIZE twice after a checkpoint tripled a table's
// rows (delta-io/delta-rs#3047); Trino's OPTIMIZE wrote remove actions without the source
// file's deletion vector, so readers replaying the log saw duplicates (trinodb/trino#31253).
//
// The table events(id, v, dt date) partitioned by dt, created by Spark with deletion
// vectors: 500 files of 50 rows (200 in dt=2026-11-01, 200 in 2026-11-02, 100 with dt
// NULL), txns for the pipeline's four partitions, then Spark's DELETE of 10 rows of one
// 2026-11-02 file (a deletion vector) and a checkpoint at version 6: 24,990 rows. The
// pipeline appends to both dates every 2 s while OPTIMIZE A (every partition) and,
// started a second later, OPTIMIZE B (dt = '2026-11-02') run throttled to about 20 s and
// 8 s, and the pipeline is restarted in the middle. Expected: B wins 2026-11-02 and A
// skips that partition; each commit removes exactly the live files of its partitions at
// the version it read (the removed file with a deletion vector carries it) and adds one
// file per partition, all dataChange false, with no txn; no append fails; the txns are
// unchanged and in the next checkpoint; Spark and delta-rs read every id once after every
// step (24,990 plus the appended rows), time travel before B reads the old files, DESCRIBE
// HISTORY shows Spark's OPTIMIZE rows, and two more runs after the checkpoint change no
// row count and end with one file per partition.
func TestOptimizeC43(t *testing.T) {
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "events")
	topic := createTopic(t, s, "events", 4)
	prod := newEventProducer(t, s, topic)
	pre := prod.send(900_000, 10) // offsets 0..9 of every partition: covered by the seed txns

	// The table: created by Spark with deletion vectors on, 500 small files (ids 0..24,999)
	// with the pipeline's txns, then Spark's DELETE of 10 rows of one dt=2026-11-02 file
	// (a deletion vector) at version 6, a checkpoint interval of 6: Spark checkpoints it.
	spark.call(t, map[string]any{"op": "sql", "query": "CREATE TABLE delta.`" + root + "` (id BIGINT, v STRING, dt DATE) USING delta PARTITIONED BY (dt) " +
		"TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '6')"}, nil)
	tbl := openTable(t, root)
	seedEvents(t, tbl, topic)
	spark.call(t, map[string]any{"op": "sql", "query": "DELETE FROM delta.`" + root + "` WHERE id >= 10000 AND id < 10010"}, nil)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dvFiles int
	for _, a := range snap.Files.All() {
		if a.DeletionVector != nil {
			dvFiles++
			if a.DeletionVector.Cardinality != 10 || *a.PartitionValues["dt"] != "2026-11-02" {
				t.Fatalf("Spark's deletion vector: %s", jsonString(a))
			}
		}
	}
	if snap.Version != 6 || snap.Files.Len() != 500 || dvFiles != 1 {
		t.Fatalf("seed: version %d, %d files, %d with a deletion vector", snap.Version, snap.Files.Len(), dvFiles)
	}
	if _, err := os.Stat(filepath.Join(root, "_delta_log", "00000000000000000006.checkpoint.parquet")); err != nil {
		t.Fatalf("no checkpoint at version 6: %v", err)
	}
	want := map[int64]bool{}
	for i := int64(0); i < 25_000; i++ {
		if i < 10_000 || i >= 10_010 {
			want[i] = true
		}
	}
	start := time.Now()
	before := readDeltaRS(t, python, root)
	scan500 := time.Since(start)
	t.Logf("seeded at %s", time.Now().Format("15:04:05"))
	checkEventCounts(t, spark, python, root, want, "seed")

	// The pipeline appends to both dates every 2 s (4 partitions × 5 records).
	dir := t.TempDir()
	writePipeline(t, dir, "events-ingest", fmt.Sprintf(`name: events-ingest
kafka: {brokers: [%q], topics: [%s], group: events-ingest-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: "file://%s"}
schema: {policy: evolve}
batch: {max_records: 1000, max_bytes: 64MiB, max_age: 300ms}
`, s.brokers, topic, time.Now().UnixNano(), s.registry, root))
	d := startDaemon(t, dir)
	var mu sync.Mutex
	stopProducing := make(chan struct{})
	producerDone := make(chan struct{})
	go func() {
		defer close(producerDone)
		next := int64(100_000)
		for {
			ids := prod.send(next, 5)
			next += int64(len(ids))
			mu.Lock()
			for _, id := range ids {
				want[id] = true
			}
			mu.Unlock()
			select {
			case <-stopProducing:
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()

	// Two OPTIMIZE processes, throttled to run ~20 s (all partitions) and ~8 s (dt =
	// 2026-11-02 only) over the same bytes rate: the second wins dt=2026-11-02.
	var total int64
	for _, a := range snap.Files.All() {
		total += a.Size
	}
	rate := fmt.Sprint(total / 20)
	var runA, runB optimizeRun
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		runA = runOptimize(t, "--table", root, "--target-file-size", "256MiB", "--min-files", "10", "--max-rewrite-rate", rate)
	}()
	go func() {
		defer wg.Done()
		time.Sleep(time.Second) // B starts after A, so that A has read the partition B takes
		runB = runOptimize(t, "--table", root, "--target-file-size", "256MiB", "--min-files", "10", "--max-rewrite-rate", rate, "--where", "dt = '2026-11-02'")
	}()
	// Restart the pipeline in the middle of both runs (A takes ~20 s, B ~8 s, from 1 s):
	// it resumes from its txns.
	time.Sleep(6 * time.Second)
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exit %d", code)
	}
	d = startDaemon(t, dir)
	wg.Wait()
	if runA.err != nil || runB.err != nil {
		t.Fatalf("optimize A: %v\n%s\noptimize B: %v\n%s", runA.err, runA.out, runB.err, runB.out)
	}
	t.Logf("optimize A (%v, peak RSS %d KiB):\n%soptimize B (%v, peak RSS %d KiB):\n%s", runA.wall, runA.maxRSS, runA.out, runB.wall, runB.maxRSS, runB.out)
	vA, vB := optimizeVersion(t, runA.out), optimizeVersion(t, runB.out)
	if vB >= vA || !strings.Contains(runA.out, "skipped dt=2026-11-02: a concurrent commit compacted or removed its files first") {
		t.Fatalf("B (dt=2026-11-02, version %d) should win that partition before A (version %d) drops it", vB, vA)
	}
	if runA.wall < 15*time.Second {
		t.Errorf("optimize A ran %v: the throttle should stretch it to ~20 s", runA.wall)
	}
	for _, r := range []optimizeRun{runA, runB} {
		if r.maxRSS > 300<<10 {
			t.Errorf("optimize peak RSS %d KiB, want < 300 MiB", r.maxRSS)
		}
	}
	// Keep appending until the log has a checkpoint after both OPTIMIZE commits.
	waitFor(t, d, 60*time.Second, "a checkpoint after the OPTIMIZE commits", func() bool {
		b, err := os.ReadFile(filepath.Join(root, "_delta_log", "_last_checkpoint"))
		var lc struct{ Version int64 }
		return err == nil && json.Unmarshal(b, &lc) == nil && lc.Version > vA
	})
	close(stopProducing)
	<-producerDone
	mu.Lock()
	n := len(want)
	mu.Unlock()
	waitFor(t, d, 60*time.Second, "every appended record committed", func() bool {
		var c int64
		for app, v := range txnVersions(t, root) {
			if strings.HasPrefix(app, "events-ingest-") {
				c += v + 1
			}
		}
		return c == int64(n-25_000+10+len(pre))
	})
	if m := d.metrics(t); !containsLine(m, `ingestd_pipeline_failures_total{pipeline="events-ingest"} 0`) {
		t.Errorf("pipeline failures:\n%s", grepLines(m, "ingestd_pipeline_failures_total", "ingestd_delta_commit"))
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exit %d", code)
	}

	// The two commits, action by action, against the versions they read.
	snapAt := func(v int64) logState { return logStateAt(t, root, v) }
	// Each OPTIMIZE removes exactly the live files of its partitions at the version it
	// read (seed files and pipeline files alike), all still live just before it.
	perPartition := func(st logState) map[string]int {
		out := map[string]int{}
		for _, a := range st.Files {
			if a.PartitionValues["dt"] == nil {
				out["NULL"]++
			} else {
				out[*a.PartitionValues["dt"]]++
			}
		}
		return out
	}
	readVersion := func(v int64) int64 {
		for _, a := range readCommitFile(t, root, v) {
			if a.CommitInfo != nil {
				n, _ := a.CommitInfo["readVersion"].(json.Number).Int64()
				return n
			}
		}
		t.Fatalf("commit %d has no commitInfo", v)
		return -1
	}
	rvA, rvB := readVersion(vA), readVersion(vB)
	remB, addB, _ := checkOptimizeCommit(t, readCommitFile(t, root, vB), snapAt(vB-1), `["dt = '2026-11-02'"]`)
	remA, addA, _ := checkOptimizeCommit(t, readCommitFile(t, root, vA), snapAt(vA-1), `[]`)
	atB, atA := perPartition(snapAt(rvB)), perPartition(snapAt(rvA))
	if remB["2026-11-02"] != atB["2026-11-02"] || len(remB) != 1 || jsonString(addB) != `{"2026-11-02":1}` ||
		remA["2026-11-01"] != atA["2026-11-01"] || remA["NULL"] != 100 || len(remA) != 2 || jsonString(addA) != `{"2026-11-01":1,"NULL":1}` {
		t.Errorf("B (read %d: %v) removed %v added %v; A (read %d: %v) removed %v added %v", rvB, atB, remB, addB, rvA, atA, remA, addA)
	}
	if remB["2026-11-02"] < 200 || remA["2026-11-01"] < 200 {
		t.Errorf("the seed files were not all compacted: A %v, B %v", remA, remB)
	}
	var dvRemoved bool
	for _, a := range readCommitFile(t, root, vB) {
		dvRemoved = dvRemoved || (a.Remove != nil && a.Remove.DeletionVector != nil && a.Remove.DeletionVector.Cardinality == 10)
	}
	if !dvRemoved {
		t.Error("B's commit has no remove carrying the deletion vector")
	}
	// OPTIMIZE leaves the txns alone; the checkpoint after it carries them.
	for _, v := range []int64{vA, vB} {
		if got, prev := snapAt(v).Txns, snapAt(v-1).Txns; jsonString(got) != jsonString(prev) {
			t.Errorf("txns at %d %v, before %v", v, got, prev)
		}
	}
	var lc struct{ Version int64 }
	b, _ := os.ReadFile(filepath.Join(root, "_delta_log", "_last_checkpoint"))
	_ = json.Unmarshal(b, &lc)
	var cpTxns []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("SELECT txn.appId AS app, txn.version AS v FROM parquet.`%s/_delta_log/%020d.checkpoint.parquet` WHERE txn IS NOT NULL ORDER BY app", root, lc.Version)}, &cpTxns)
	atCP := snapAt(lc.Version).Txns
	if len(cpTxns) != 4 {
		t.Errorf("checkpoint %d txns %v, want the 4 of the pipeline", lc.Version, cpTxns)
	}
	for _, r := range cpTxns {
		if fmt.Sprint(r["v"]) != fmt.Sprint(atCP[fmt.Sprint(r["app"])]) {
			t.Errorf("checkpoint txn %v, log says %d", r, atCP[fmt.Sprint(r["app"])])
		}
	}
	checkEventCounts(t, spark, python, root, want, "after the concurrent OPTIMIZEs and the checkpoint")

	// Time travel to the version before B reads the old files and the same rows as B.
	var tt []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("SELECT (SELECT count(*) FROM delta.`%[1]s` VERSION AS OF %[2]d) AS before, "+
		"(SELECT count(*) FROM delta.`%[1]s` VERSION AS OF %[3]d) AS after, "+
		"(SELECT count(DISTINCT f) FROM (SELECT input_file_name() AS f FROM delta.`%[1]s` VERSION AS OF %[2]d WHERE dt = '2026-11-02' AND id < 25000)) AS files_before, "+
		"(SELECT count(DISTINCT f) FROM (SELECT input_file_name() AS f FROM delta.`%[1]s` VERSION AS OF %[3]d WHERE dt = '2026-11-02' AND id < 25000)) AS files_after", root, vB-1, vB)}, &tt)
	if tt[0]["before"] != tt[0]["after"] || fmt.Sprint(tt[0]["files_before"]) != "200" || fmt.Sprint(tt[0]["files_after"]) != "1" {
		t.Errorf("time travel around OPTIMIZE %d: %v", vB, tt[0])
	}
	// DESCRIBE HISTORY shows the OPTIMIZE commits as Spark's own.
	var hist []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "DESCRIBE HISTORY delta.`" + root + "`"}, &hist)
	var got []string
	for _, h := range hist {
		if h["operation"] == "OPTIMIZE" {
			m, _ := h["operationMetrics"].(map[string]any)
			p, _ := h["operationParameters"].(map[string]any)
			got = append(got, fmt.Sprintf("%v:%v:%v:%v", h["version"], p["predicate"], m["numRemovedFiles"], m["numAddedFiles"]))
		}
	}
	w := []string{fmt.Sprintf("%d:[]:%d:2", vA, remA["2026-11-01"]+remA["NULL"]), fmt.Sprintf("%d:[\"dt = '2026-11-02'\"]:%d:1", vB, remB["2026-11-02"])}
	sort.Strings(got)
	sort.Strings(w)
	if jsonString(got) != jsonString(w) {
		t.Errorf("DESCRIBE HISTORY OPTIMIZE rows %v, want %v", got, w)
	}

	// Two more runs after the checkpoint: same rows, never more.
	for i := 0; i < 2; i++ {
		r := runOptimize(t, "--table", root, "--min-files", "2")
		if r.err != nil {
			t.Fatal(r.err)
		}
		t.Logf("run %d: %s", i+3, r.out)
		checkEventCounts(t, spark, python, root, want, fmt.Sprintf("after OPTIMIZE run %d", i+3))
	}
	start = time.Now()
	after := readDeltaRS(t, python, root)
	t.Logf("delta-rs full scan: %d files %v, %d files %v", before.Files, scan500, after.Files, time.Since(start))
	if after.Files != 3 {
		t.Errorf("%d files after the last OPTIMIZE, want one per partition", after.Files)
	}
}

// TestBackgroundOptimize: a pipeline with maintenance.optimize.every 2s compacts the
// small files of its own table while it runs; the metrics show the runs, the files and
// bytes, and the last success; every row is read once by delta-rs.
func TestBackgroundOptimize(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "bgopt", 1)
	dlq := createTopic(t, s, "bgopt-dlq", 1)
	table := filepath.Join(t.TempDir(), "bgopt")
	dir := t.TempDir()
	writePipeline(t, dir, "bgopt", pipelineYAML("bgopt", s, topic, table, "evolve", dlq, "{max_records: 2000, max_bytes: 64MiB, max_age: 300ms}")+
		"maintenance:\n  optimize: {every: 2s, target_file_size: 1MiB, min_files: 4}\n")
	d := startDaemon(t, dir)
	var produced int
	for i := 0; i < 6; i++ {
		produce(t, s, topic, 10, 0, int64(i*10))
		produced += 10
		waitFor(t, d, 30*time.Second, "the batch committed", func() bool { return handled(t, table) == int64(produced) })
	}
	uri := "file://" + table
	metric := func(m, name string) float64 {
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, name+" ") {
				var v float64
				fmt.Sscan(strings.TrimPrefix(l, name+" "), &v)
				return v
			}
		}
		return 0
	}
	files := fmt.Sprintf(`ingestd_maintenance_files_compacted_total{table=%q}`, uri)
	runs := fmt.Sprintf(`ingestd_maintenance_runs_total{job="optimize",result="success",table=%q}`, uri)
	var m string
	waitFor(t, d, 30*time.Second, "a background OPTIMIZE of the 6 files", func() bool {
		m = d.metrics(t)
		return metric(m, files) >= 4 && metric(m, runs) >= 1
	})
	if metric(m, fmt.Sprintf(`ingestd_maintenance_bytes_rewritten_total{table=%q}`, uri)) <= 0 ||
		metric(m, fmt.Sprintf(`ingestd_maintenance_last_success_timestamp_seconds{job="optimize",table=%q}`, uri)) < float64(time.Now().Add(-time.Minute).Unix()) ||
		metric(m, fmt.Sprintf(`ingestd_maintenance_duration_seconds_count{job="optimize",table=%q}`, uri)) < 1 {
		t.Errorf("maintenance metrics:\n%s", grepLines(m, "ingestd_maintenance_"))
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exit %d", code)
	}
	b, _ := os.ReadFile(d.logs.Name())
	if !strings.Contains(string(b), `"msg":"maintenance run"`) || !strings.Contains(string(b), `"job":"optimize","result":"success"`) {
		t.Errorf("no maintenance run log line:\n%s", grepLines(string(b), "maintenance"))
	}
	snap := openSnapshotT(t, table)
	var optimizes int
	for v := int64(0); v <= snap.Version; v++ {
		for _, a := range readCommitFile(t, table, v) {
			if a.CommitInfo != nil && a.CommitInfo["operation"] == "OPTIMIZE" {
				optimizes++
				p, _ := a.CommitInfo["operationParameters"].(map[string]any)
				if p["auto"] != "true" || a.CommitInfo["engineInfo"] != "ingestd" {
					t.Errorf("background OPTIMIZE commitInfo %s", jsonString(a.CommitInfo))
				}
			}
		}
	}
	r := readTable(t, s, table)
	ids := map[any]bool{}
	for _, row := range r.Rows {
		ids[fmt.Sprint(row["order_id"])] = true
	}
	if optimizes < 1 || len(r.Rows) != produced || len(ids) != produced || r.Files >= 6 {
		t.Errorf("%d OPTIMIZE commits; delta-rs reads %d rows (%d distinct) in %d files, want %d rows in fewer than 6 files", optimizes, len(r.Rows), len(ids), r.Files, produced)
	}
}

// optimizedRow is interop row k%4 (interopRows) with a unique l and s, so that every row
// of a large file differs (its string column has no dictionary).
func optimizedRow(k int) map[string]any {
	r := interopRows()[k%4]
	out := make(map[string]any, len(r)+1)
	for c, v := range r {
		out[c] = v
	}
	out["l"] = int64(10_000_000 + k)
	var b strings.Builder
	fmt.Fprintf(&b, "row %09d of the optimize read-back table, é ✓", k)
	h := uint64(k+1) * 0x9E3779B97F4A7C15
	for range 24 { // 400 bytes that do not compress
		h ^= h >> 29
		h *= 0xBF58476D1CE4E5B9
		fmt.Fprintf(&b, " %016x", h)
	}
	out["s"] = b.String()
	return out
}

// leafIndex is the index of top-level leaf name in schema's columns.
func leafIndex(t *testing.T, schema *parquet.Schema, name string) int {
	t.Helper()
	for i, c := range schema.Columns() {
		if len(c) == 1 && c[0] == name {
			return i
		}
	}
	t.Fatalf("no leaf %s", name)
	return -1
}

// sparkRowsDigest are Spark's row count, distinct l, a sum of per-row hashes over every
// column (maps and structs through to_json: Spark does not hash maps) and the count of a
// range predicate that data skipping answers from add.stats.
const sparkRowsDigest = "SELECT count(*) AS n, count(DISTINCT l) AS d, " +
	"sum(cast(xxhash64(l, b, sh, i, f, d, bo, s, bin, dt, ts, tsn, d5, d15, d30, to_json(st), to_json(arr), to_json(arr2), to_json(m), to_json(m2)) AS decimal(38,0))) AS h, " +
	"count_if(l BETWEEN 10003450 AND 10003549) AS r FROM delta.`%s`"

// TestOptimizeStreamedReadBack: the files OPTIMIZE writes row group by row group, from
// row groups copied as encoded column chunks (two files of 3,000 rows, over 1 MiB each,
// one of them with deleted rows, which is decoded instead), row groups of small files
// whose dictionary-free leaves' pages are copied and the others decoded (eleven small
// files of every type, nulls at every level) and row groups decoded column by column (a
// small file with deleted rows, and the large one), are read back by Spark and delta-rs with the same rows as before, exactly: row
// counts, every value (delta-rs: every row; Spark: a hash of every row's columns), and a
// range predicate Spark answers through the new file's stats.
func TestOptimizeStreamedReadBack(t *testing.T) {
	t.Parallel() // waits on Spark; its own temp dirs
	start := time.Now()
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "optimized")
	tbl := createTableWith(t, root, interopSchema, deltawriter.SchemaChange{Name: "optimized", Enable: []string{deltalog.FeatureDeletionVectors}})
	k := 0
	var adds []deltalog.Add
	for f := 0; f < 14; f++ {
		n := 40 + f%3 // s (about 460 bytes a row) past deltawriter.DefaultMinCopiedChunkBytes: its pages are copied
		if f >= 12 {
			n = 3_000
		}
		rows := make([]map[string]any, n)
		for i := range rows {
			rows[i] = optimizedRow(k)
			k++
		}
		appendRows(t, tbl, rows, nil, nil)
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range snap.Files.All() {
			if !slices.ContainsFunc(adds, func(b deltalog.Add) bool { return b.Path == a.Path }) {
				adds = append(adds, a)
				if f >= 12 && a.Size < 1<<20 {
					t.Fatalf("large file of %d bytes: not past the 1 MiB from which row groups are copied", a.Size)
				}
			}
		}
	}
	// deleted rows in a small file and a large one
	var dels []deltawriter.RowDeletes
	for _, a := range adds {
		if n, _ := a.NumRecords(); n == 41 && len(dels) == 0 {
			dels = append(dels, deltawriter.RowDeletes{Add: a, Rows: []uint64{0, 3}})
		}
	}
	dels = append(dels, deltawriter.RowDeletes{Add: adds[len(adds)-1], Rows: []uint64{1, 500, 2_999}})
	removes, dvAdds, err := deltawriter.DeleteRows(ctx, tbl.Store(), dels, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Operation: "DELETE", Removes: removes, Adds: dvAdds}); err != nil {
		t.Fatal(err)
	}
	live := k - 5

	before := readDeltaRS(t, python, root)
	if len(before.Rows) != live || before.Files != 14 {
		t.Fatalf("delta-rs reads %d rows in %d files before OPTIMIZE, want %d in 14", len(before.Rows), before.Files, live)
	}
	var digestBefore []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf(sparkRowsDigest, root)}, &digestBefore)

	run := runOptimize(t, root, "--min-files", "2", "--json")
	if run.err != nil {
		t.Fatal(run.err)
	}
	var res struct {
		FilesRemoved, FilesAdded int
		RowsWritten              int64
	}
	if err := json.Unmarshal([]byte(run.out), &res); err != nil {
		t.Fatalf("%v: %s", err, run.out)
	}
	if res.FilesRemoved != 14 || res.FilesAdded != 1 || res.RowsWritten != int64(live) {
		t.Fatalf("OPTIMIZE %+v, want 14 files into 1 of %d rows", res, live)
	}
	t.Logf("tables written and read before OPTIMIZE in %v; OPTIMIZE of %d rows: %v, peak RSS %d MiB", time.Since(start).Round(time.Millisecond),
		live, run.wall.Round(time.Millisecond), run.maxRSS>>10)

	after := readDeltaRS(t, python, root)
	if after.Files != 1 || len(after.Rows) != live {
		t.Fatalf("delta-rs reads %d rows in %d files after OPTIMIZE, want %d in 1", len(after.Rows), after.Files, live)
	}
	if b, a := canonRows(t, before.Rows), canonRows(t, after.Rows); !reflect.DeepEqual(a, b) {
		for i := range b {
			if i >= len(a) || a[i] != b[i] {
				t.Fatalf("delta-rs row %d after OPTIMIZE\n%s\nbefore\n%s", i, a[i], b[i])
			}
		}
	}
	var digestAfter []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf(sparkRowsDigest, root)}, &digestAfter)
	if fmt.Sprint(digestBefore) != fmt.Sprint(digestAfter) || fmt.Sprint(digestAfter[0]["n"]) != fmt.Sprint(live) ||
		fmt.Sprint(digestAfter[0]["d"]) != fmt.Sprint(live) || fmt.Sprint(digestAfter[0]["r"]) != "99" {
		// the range holds k = 3450..3549 but k = 3493, row 1 of the last file, is deleted
		t.Fatalf("Spark reads %v after OPTIMIZE, %v before; want %d rows, %d distinct l, 99 in the range", digestAfter, digestBefore, live, live)
	}

	// the new file: row groups copied from the clean large file, the rest decoded
	snap, _ = tbl.Snapshot(ctx)
	for _, a := range snap.Files.All() {
		data, err := tbl.Store().Get(ctx, deltalog.CanonicalPath(a.Path))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		var groups []int64
		for _, rg := range f.Metadata().RowGroups {
			groups = append(groups, rg.NumRows)
		}
		// the clean small files: their dictionary-free leaves' pages copied (s: unique
		// text), in a row group apart from the files with deleted rows, decoded
		clean, sources := int64(0), [][]byte{}
		for _, src := range adds {
			if n, _ := src.NumRecords(); n >= 3_000 || src.Path == dels[0].Add.Path {
				continue
			}
			n, _ := src.NumRecords()
			clean += n
			sd, err := tbl.Store().Get(ctx, deltalog.CanonicalPath(src.Path))
			if err != nil {
				t.Fatal(err)
			}
			sf, err := parquet.OpenFile(bytes.NewReader(sd), int64(len(sd)))
			if err != nil {
				t.Fatal(err)
			}
			m := sf.Metadata().RowGroups[0].Columns[leafIndex(t, sf.Schema(), "s")].MetaData
			sources = append(sources, sd[m.DataPageOffset:m.DataPageOffset+m.TotalCompressedSize])
		}
		if !slices.Contains(groups, 3_000) || !slices.Contains(groups, clean) || len(groups) != 3 || f.NumRows() != int64(live) {
			t.Errorf("new file's row groups hold %v rows, want the copied 3000, the %d of the clean small files and the decoded rest", groups, clean)
		}
		for _, rg := range f.Metadata().RowGroups {
			if rg.NumRows != clean {
				continue
			}
			m := rg.Columns[leafIndex(t, f.Schema(), "s")].MetaData
			chunk := data[m.DataPageOffset : m.DataPageOffset+m.TotalCompressedSize]
			size := 0
			for _, src := range sources {
				size += len(src)
				if !bytes.Contains(chunk, src) {
					t.Errorf("the small files' s pages are not copied into the new file's chunk")
				}
			}
			if m.DictionaryPageOffset != 0 || len(chunk) != size || m.NumValues != clean {
				t.Errorf("s chunk of %d bytes, %d values, dictionary at %d; want the sources' %d bytes, %d values", len(chunk), m.NumValues, m.DictionaryPageOffset, size, clean)
			}
		}
		if n, _ := a.NumRecords(); n != int64(live) {
			t.Errorf("add.stats numRecords %d, want %d", n, live)
		}
	}
}
