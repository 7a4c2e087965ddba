package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// Keyed tables beside other writers (docs/keyed-tables.md, "Other writers, OPTIMIZE and
// VACUUM"), on the real broker and registry, read back by delta-rs and Spark: OPTIMIZE
// and VACUUM every few seconds beside an upsert pipeline, Spark's own UPDATE, DELETE and
// MERGE between and during ingestd's commits, and two upsert pipelines on one table.

// keyedTopic creates a topic, its dead-letter topic and the row schema's subject, and
// returns the topic, the dead-letter topic and the schema id.
func keyedTopic(t *testing.T, s stack, reg *sr.Client, base string) (topic, dlq string, id int) {
	t.Helper()
	topic, dlq = createTopic(t, s, base, 1), createTopic(t, s, base+".dlq", 1)
	ss, err := reg.CreateSchema(context.Background(), topic+"-value", sr.Schema{Schema: keyedRowSchema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	return topic, dlq, ss.ID
}

// keyedPipelineYAML is an upsert pipeline keyed by id (op = 'd' deletes, tombstones by a
// string key), ordered by seq; extra is appended (maintenance, table properties go in
// tableExtra).
func keyedPipelineYAML(name string, s stack, topic, table, dlq, tableExtra, extra string) string {
	return fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true, mode: upsert, key: [id], delete_when: "op = 'd'", key_format: string, sequence_by: seq%s}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: 1000, max_bytes: 16MiB, max_age: 300ms}
`, name, s.brokers, topic, name, time.Now().UnixNano(), s.registry, table, tableExtra, dlq) + extra
}

// keyedModel is the table a stream of changes ordered by seq leaves: per key the change
// with the greatest sequence, absent when that change deletes.
type keyedModel struct {
	mu   sync.Mutex
	last map[int64]kc
}

func newKeyedModel() *keyedModel { return &keyedModel{last: map[int64]kc{}} }

func (m *keyedModel) apply(changes []kc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range changes {
		if p, ok := m.last[c.id]; !ok || c.seq >= p.seq {
			m.last[c.id] = c
		}
	}
}

func (m *keyedModel) rows() map[int64]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int64]string{}
	for id, c := range m.last {
		if !c.tomb && c.op != "d" {
			out[id] = c.v
		}
	}
	return out
}

// randomChanges is n changes over keys [lo, lo+span) with sequences from next: 75 %
// upserts, 15 % op = 'd' deletes and, when tombs, 10 % tombstones (a tombstone's sequence
// in the model is the one it is given here, which is above every earlier change's: ingestd
// gives it the greatest sequence seen before it).
func randomChanges(r *rand.Rand, n int, lo, span int64, next func() int64, tombs bool) []kc {
	out := make([]kc, 0, n)
	for range n {
		id, seq := lo+r.Int64N(span), next()
		switch p := r.IntN(100); {
		case p < 75:
			out = append(out, kc{id: id, v: fmt.Sprintf("v%d", seq), seq: seq, op: "u"})
		case p < 90 || !tombs:
			out = append(out, kc{id: id, seq: seq, op: "d"})
		default:
			out = append(out, kc{id: id, seq: seq, tomb: true})
		}
	}
	return out
}

// checkKeyedReaders reads the table with delta-rs and Spark and compares it with want
// (keyedRowsOf fails on a duplicate key).
func checkKeyedReaders(t *testing.T, spark *sparkSession, python, table, step string, want map[int64]string) {
	t.Helper()
	rs := readDeltaRS(t, python, table)
	if rs.Unsupported != "" {
		t.Fatalf("%s: delta-rs cannot read the table: %s", step, rs.Unsupported)
	}
	if got := keyedRowsOf(t, "delta-rs", step, rs.Rows); !maps.Equal(got, want) {
		t.Errorf("%s: delta-rs reads %d rows %v, want %d rows %v", step, len(got), got, len(want), want)
	}
	var sp sparkRead
	spark.call(t, map[string]any{"op": "read", "path": table}, &sp)
	if got := keyedRowsOf(t, "Spark", step, sp.Rows); !maps.Equal(got, want) {
		t.Errorf("%s: Spark reads %d rows %v, want %d rows %v", step, len(got), got, len(want), want)
	}
}

// logFigures walks a table's commits: OPTIMIZE commits, the files with deletion vectors
// they removed and the deleted rows those held (purged), VACUUM END commits, and the
// live files' physical and deleted rows.
type logFigures struct {
	optimizes, vacuums, dvFilesCompacted int
	rowsPurged, physical, deleted        int64
	files                                int
}

func readLogFigures(t *testing.T, table string) logFigures {
	t.Helper()
	var f logFigures
	snap := openSnapshotT(t, table)
	for v := int64(0); v <= snap.Version; v++ {
		actions := readCommitFile(t, table, v)
		op := ""
		for _, a := range actions {
			if a.CommitInfo != nil {
				op, _ = a.CommitInfo["operation"].(string)
			}
		}
		switch op {
		case "OPTIMIZE":
			f.optimizes++
			for _, a := range actions {
				if a.Remove != nil && a.Remove.DeletionVector != nil {
					f.dvFilesCompacted++
					f.rowsPurged += a.Remove.DeletionVector.Cardinality
				}
			}
		case "VACUUM END":
			f.vacuums++
		}
	}
	for _, a := range snap.Files.All() {
		n, _ := a.NumRecords()
		f.physical += n
		if a.DeletionVector != nil {
			f.deleted += a.DeletionVector.Cardinality
		}
	}
	f.files = snap.Files.Len()
	return f
}

// TestKeyedUpsertBesideOptimizeAndVacuum: an upsert pipeline takes a stream of upserts,
// deletes and tombstones over 40 keys while its own background maintenance runs OPTIMIZE
// every 2 s and VACUUM every 3 s (retention 10 s), and the test runs `ingestd table
// optimize` every second beside it. The table equals the model in delta-rs and Spark, with no
// duplicate key; OPTIMIZE compacted files with deletion vectors (their deleted rows
// purged); the conflicts the pipeline rebuilt are counted from /metrics.
func TestKeyedUpsertBesideOptimizeAndVacuum(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	schema := avro.MustParse(keyedRowSchema)
	topic, dlq, id := keyedTopic(t, s, reg, "kopt")
	table := filepath.Join(t.TempDir(), "kopt")
	dir := t.TempDir()
	writePipeline(t, dir, "kopt", keyedPipelineYAML("kopt", s, topic, table, dlq,
		`, properties: {delta.deletedFileRetentionDuration: "interval 10 seconds"}`,
		"maintenance:\n  optimize: {every: 2s, target_file_size: 1MiB, min_files: 2}\n  vacuum: {every: 3s, retain: 10s}\n"))
	d := startDaemon(t, dir)

	// `ingestd table optimize` every second, racing the background OPTIMIZE and the pipeline.
	stop := make(chan struct{})
	var cliRuns, cliCommits, cliFailed int
	var cliErrs []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if snap, err := openSnapshot(table); err != nil || snap.Version < 0 {
				continue
			}
			out, err := exec.Command(ingestdBin(t), "table", "optimize", "--table", table, "--min-files", "2", "--target-file-size", "1MiB").CombinedOutput()
			cliRuns++
			switch {
			case err != nil:
				cliFailed++
				cliErrs = append(cliErrs, strings.TrimSpace(string(out)))
			case strings.Contains(string(out), ": OPTIMIZE"):
				cliCommits++
			}
		}
	}()

	model := newKeyedModel()
	r := rand.New(rand.NewPCG(28, 1))
	var seq, produced int64
	next := func() int64 { seq++; return seq }
	start := time.Now()
	for round := 0; round < 60; round++ {
		changes := randomChanges(r, 50, 0, 40, next, true)
		model.apply(changes)
		produced += produceKeyed(t, cl, topic, id, schema, changes)
		time.Sleep(300 * time.Millisecond)
	}
	waitForEvery(t, d, 120*time.Second, 200*time.Millisecond, "every change committed", func() bool { return handled(t, table) == produced })
	// One more OPTIMIZE after the pipeline's last commit purges what it left.
	waitForEvery(t, d, 60*time.Second, 500*time.Millisecond, "an OPTIMIZE after the pipeline's last commit", func() bool {
		snap := openSnapshotT(t, table)
		for v := snap.Version; v >= 0; v-- {
			for _, a := range readCommitFile(t, table, v) {
				if a.CommitInfo != nil {
					switch a.CommitInfo["operation"] {
					case "OPTIMIZE":
						return true
					case "MERGE":
						return false
					}
				}
			}
		}
		return false
	})
	close(stop)
	wg.Wait()
	uri := table // the maintenance metrics' table label is table.uri as written
	var m string
	runs := func(job, result string) float64 {
		return max(0, metricValue(m, fmt.Sprintf(`ingestd_maintenance_runs_total{job=%q,result=%q,table=%q}`, job, result, uri)))
	}
	// The OPTIMIZE just seen in the log may be the maintainer's, whose run is counted only
	// after its commit lands (ingest/maintain/maintainer.go runJob): scrape until the
	// counts the checks below need are there.
	waitFor(t, d, 30*time.Second, "background OPTIMIZE and VACUUM runs counted", func() bool {
		m = d.metrics(t)
		return runs("optimize", "success") > 0 && runs("vacuum", "success")+runs("vacuum", "noop") > 0
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}
	elapsed := time.Since(start)
	conflicts := metricValue(m, `ingestd_delta_commit_conflicts_total{pipeline="kopt"}`)
	fig := readLogFigures(t, table)
	want := model.rows()
	t.Logf("%d changes over 40 keys in %v: %d live keys; commit conflicts (rebuilds) %v; background OPTIMIZE success %v lost %v noop %v error %v; VACUUM success %v noop %v error %v; "+
		"CLI OPTIMIZE %d runs, %d commits, %d failed; %d OPTIMIZE commits compacted %d files with deletion vectors, purging %d deleted rows; %d VACUUM END commits; "+
		"at the end %d files, %d physical rows, %d marked deleted; upserted %v deleted %v stale %v superseded %v",
		produced, elapsed.Round(time.Second), len(want), conflicts, runs("optimize", "success"), runs("optimize", "lost"), runs("optimize", "noop"), runs("optimize", "error"),
		runs("vacuum", "success"), runs("vacuum", "noop"), runs("vacuum", "error"), cliRuns, cliCommits, cliFailed, fig.optimizes, fig.dvFilesCompacted, fig.rowsPurged, fig.vacuums,
		fig.files, fig.physical, fig.deleted,
		metricValue(m, `ingestd_keyed_changes_total{outcome="upserted",pipeline="kopt"}`), metricValue(m, `ingestd_keyed_changes_total{outcome="deleted",pipeline="kopt"}`),
		metricValue(m, `ingestd_keyed_changes_total{outcome="stale",pipeline="kopt"}`), metricValue(m, `ingestd_keyed_changes_total{outcome="superseded",pipeline="kopt"}`))
	checkKeyedReaders(t, spark, python, table, "after the run", want)
	if conflicts < 0 {
		t.Errorf("no ingestd_delta_commit_conflicts_total series for the pipeline in /metrics")
	}
	if fig.dvFilesCompacted == 0 || fig.rowsPurged == 0 {
		t.Errorf("OPTIMIZE compacted %d files with deletion vectors (%d deleted rows purged), want some", fig.dvFilesCompacted, fig.rowsPurged)
	}
	if runs("optimize", "error") != 0 || runs("vacuum", "error") != 0 || runs("optimize", "success") == 0 || runs("vacuum", "success")+runs("vacuum", "noop") == 0 {
		t.Errorf("maintenance runs:\n%s", grepLines(m, "ingestd_maintenance_runs_total"))
	}
	for _, e := range cliErrs {
		t.Errorf("ingestd table optimize failed: %s", e)
	}
	if n := len(readDLQ(t, s, dlq)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
}

// sparkSQL runs one Spark SQL statement, retrying it (up to 10 times) when Spark's
// optimistic concurrency lost to another writer's commit; it returns how many retries
// it took.
func sparkSQL(t *testing.T, spark *sparkSession, query string) int {
	t.Helper()
	for retry := 0; ; retry++ {
		_, err := spark.do(map[string]any{"op": "sql", "query": query})
		spark.logSlow(t)
		if err == nil {
			return retry
		}
		var se *sparkError
		if !errors.As(err, &se) || !strings.Contains(se.msg, "Concurrent") || retry >= 10 {
			t.Fatalf("spark: %s: %v", query, err)
		}
	}
}

// TestKeyedSparkWritesBetweenIngestdCommits: Spark (deletion vectors enabled by the
// table's property, which ingestd sets) UPDATEs, DELETEs and MERGEs into an upsert table
// between ingestd's commits, and then while ingestd keeps committing updates of other
// keys. Both writers' effects survive: ingestd's later upserts of other keys neither bring
// Spark's deleted row back nor lose Spark's updates; ingestd's upsert of a key Spark
// updated or inserted replaces Spark's row once.
func TestKeyedSparkWritesBetweenIngestdCommits(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	schema := avro.MustParse(keyedRowSchema)
	topic, dlq, id := keyedTopic(t, s, reg, "kspark")
	table := filepath.Join(t.TempDir(), "kspark")
	dir := t.TempDir()
	writePipeline(t, dir, "kspark", keyedPipelineYAML("kspark", s, topic, table, dlq, "", ""))
	d := startDaemon(t, dir)
	model := newKeyedModel()
	var seq, produced int64
	ingest := func(changes ...kc) {
		t.Helper()
		for i := range changes {
			seq++
			changes[i].seq = seq
		}
		model.apply(changes)
		produced += produceKeyed(t, cl, topic, id, schema, changes)
		waitFor(t, d, 60*time.Second, "ingestd's commit", func() bool { return handled(t, table) == produced })
	}
	// Spark's writes keep the sequence of the row they change (UPDATE, MERGE's update) or
	// take 0 (MERGE's insert): the model takes them as the key's latest state.
	spark1 := func(id int64, v string) {
		model.mu.Lock()
		c := model.last[id]
		model.last[id] = kc{id: id, v: v, seq: c.seq, op: "u"}
		model.mu.Unlock()
	}
	sparkDelete := func(id int64) {
		model.mu.Lock()
		c := model.last[id]
		model.last[id] = kc{id: id, seq: c.seq, op: "d"}
		model.mu.Unlock()
	}
	tbl := fmt.Sprintf("delta.`%s`", table)

	ingest(kc{id: 1, v: "i0", op: "c"}, kc{id: 2, v: "i0", op: "c"}, kc{id: 3, v: "i0", op: "c"}, kc{id: 4, v: "i0", op: "c"},
		kc{id: 5, v: "i0", op: "c"}, kc{id: 6, v: "i0", op: "c"}, kc{id: 7, v: "i0", op: "c"}, kc{id: 8, v: "i0", op: "c"})
	before := openSnapshotT(t, table).Version
	sparkSQL(t, spark, "UPDATE "+tbl+" SET v = 'spark' WHERE id IN (2, 3)")
	spark1(2, "spark")
	spark1(3, "spark")
	sparkSQL(t, spark, "DELETE FROM "+tbl+" WHERE id = 4")
	sparkDelete(4)
	sparkSQL(t, spark, "MERGE INTO "+tbl+" t USING (SELECT CAST(5 AS BIGINT) AS id, 'sm' AS v, CAST(0 AS BIGINT) AS seq, 'u' AS op "+
		"UNION ALL SELECT CAST(9 AS BIGINT), 'sm', CAST(0 AS BIGINT), 'c') s ON t.id = s.id "+
		"WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v, seq, op) VALUES (s.id, s.v, s.seq, s.op)")
	spark1(5, "sm")
	model.apply([]kc{{id: 9, v: "sm", seq: 0, op: "c"}})
	// Spark wrote deletion vectors (its UPDATE, DELETE and MERGE on a table with them enabled).
	var sparkDVs int
	after := openSnapshotT(t, table).Version
	for v := before + 1; v <= after; v++ {
		for _, a := range readCommitFile(t, table, v) {
			if a.Add != nil && a.Add.DeletionVector != nil {
				sparkDVs++
			}
		}
	}
	if after-before != 3 || sparkDVs == 0 {
		t.Fatalf("Spark's 3 statements made versions %d..%d with %d adds carrying a deletion vector, want 3 commits with some", before+1, after, sparkDVs)
	}
	checkKeyedReaders(t, spark, python, table, "after Spark's UPDATE, DELETE and MERGE", model.rows())

	ingest(kc{id: 1, v: "i2", op: "u"}, kc{id: 10, v: "i2", op: "c"}, kc{id: 6, v: "i2", op: "u"})
	checkKeyedReaders(t, spark, python, table, "after ingestd's upserts of other keys", model.rows())
	ingest(kc{id: 2, v: "i3", op: "u"}, kc{id: 9, v: "i3", op: "u"}, kc{id: 5, tomb: true}, kc{id: 3, op: "d"})
	checkKeyedReaders(t, spark, python, table, "after ingestd's upserts and deletes of keys Spark wrote", model.rows())

	// Spark's UPDATE and DELETE of keys 30..36 while ingestd commits updates of 20..29.
	var race []kc
	for k := int64(20); k < 30; k++ {
		race = append(race, kc{id: k, v: "r0", op: "c"})
	}
	ingest(race...)
	race = race[:0]
	for k := int64(30); k < 37; k++ {
		race = append(race, kc{id: k, v: "r0", op: "c"})
	}
	ingest(race...)
	done := make(chan struct{})
	var streamErr error
	go func() {
		defer close(done)
		r := rand.New(rand.NewPCG(28, 2))
		for i := range 40 {
			var cs []kc
			for j := range 5 {
				k := 20 + r.Int64N(10)
				cs = append(cs, kc{id: k, v: fmt.Sprintf("r%d.%d", i+1, j), op: "u"})
			}
			model.mu.Lock()
			for j := range cs {
				seq++
				cs[j].seq = seq
			}
			model.mu.Unlock()
			model.apply(cs)
			var recs []*kgo.Record
			for _, c := range cs {
				body, err := avro.Marshal(schema, map[string]any{"id": c.id, "seq": c.seq, "op": c.op, "v": c.v})
				if err != nil {
					streamErr = err
					return
				}
				var hdr sr.ConfluentHeader
				framed, _ := hdr.AppendEncode(nil, id, nil)
				recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "%d", c.id), Value: append(framed, body...)})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				streamErr = err
				return
			}
			time.Sleep(150 * time.Millisecond)
		}
	}()
	retries := 0
	for i := 1; i <= 4; i++ {
		v := fmt.Sprintf("spark%d", i)
		retries += sparkSQL(t, spark, fmt.Sprintf("UPDATE %s SET v = '%s' WHERE id BETWEEN 30 AND 35", tbl, v))
		for k := int64(30); k <= 35; k++ {
			spark1(k, v)
		}
		if i == 2 {
			retries += sparkSQL(t, spark, "DELETE FROM "+tbl+" WHERE id = 36")
			sparkDelete(36)
		}
	}
	<-done
	if streamErr != nil {
		t.Fatal(streamErr)
	}
	produced += 200
	waitFor(t, d, 60*time.Second, "ingestd's commits of the stream", func() bool { return handled(t, table) == produced })
	m := d.metrics(t)
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}
	conflicts := metricValue(m, `ingestd_delta_commit_conflicts_total{pipeline="kspark"}`)
	t.Logf("commit conflicts (rebuilds) of ingestd: %v; Spark statements retried %d times; table version %d", conflicts, retries, openSnapshotT(t, table).Version)
	checkKeyedReaders(t, spark, python, table, "after Spark's writes during ingestd's stream", model.rows())
	if n := len(readDLQ(t, s, dlq)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
}

// TestKeyedTwoPipelinesOneTable: two upsert pipelines in one daemon write one table from
// two topics, over their own key ranges (0..19, 50..69) and one key both change (100),
// with sequences from one counter (table.sequence_by: seq). Their commits conflict and
// are rebuilt on each other's snapshots; the table equals the model (per key the change
// with the greatest sequence, whichever pipeline committed it last).
func TestKeyedTwoPipelinesOneTable(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	schema := avro.MustParse(keyedRowSchema)
	topicA, dlqA, idA := keyedTopic(t, s, reg, "ktwo-a")
	topicB, dlqB, idB := keyedTopic(t, s, reg, "ktwo-b")
	table := filepath.Join(t.TempDir(), "ktwo")
	dir := t.TempDir()
	writePipeline(t, dir, "ktwo-a", keyedPipelineYAML("ktwo-a", s, topicA, table, dlqA, "", ""))
	writePipeline(t, dir, "ktwo-b", keyedPipelineYAML("ktwo-b", s, topicB, table, dlqB, "", ""))
	d := startDaemon(t, dir)
	model := newKeyedModel()
	var mu sync.Mutex
	var seq int64
	next := func() int64 { mu.Lock(); defer mu.Unlock(); seq++; return seq }
	var produced int64
	var counts [2]int64
	pipes := []struct {
		topic string
		id    int
		lo    int64
		r     *rand.Rand
	}{{topicA, idA, 0, rand.New(rand.NewPCG(28, 10))}, {topicB, idB, 50, rand.New(rand.NewPCG(28, 11))}}
	// Each round produces both topics' changes at once, so that both pipelines' batches
	// fall due (max_age) together and their commits race for the same table version; the
	// pause between rounds lets each round's flushes finish first.
	for range 40 {
		var wg sync.WaitGroup
		for i, p := range pipes {
			changes := randomChanges(p.r, 20, p.lo, 20, next, false)
			for range 3 { // the key both pipelines change
				seq := next()
				if p.r.IntN(4) == 0 {
					changes = append(changes, kc{id: 100, seq: seq, op: "d"})
				} else {
					changes = append(changes, kc{id: 100, v: fmt.Sprintf("%c%d", 'a'+i, seq), seq: seq, op: "u"})
				}
			}
			// Within a topic the sequence follows the offset order.
			model.apply(changes)
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts[i] += produceKeyed(t, cl, p.topic, p.id, schema, changes)
			}()
		}
		wg.Wait()
		time.Sleep(time.Duration(400+pipes[0].r.IntN(200)) * time.Millisecond)
	}
	produced = counts[0] + counts[1]
	waitForEvery(t, d, 120*time.Second, 200*time.Millisecond, "both pipelines' changes committed", func() bool { return handled(t, table) == produced })
	m := d.metrics(t)
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}
	ca := metricValue(m, `ingestd_delta_commit_conflicts_total{pipeline="ktwo-a"}`)
	cb := metricValue(m, `ingestd_delta_commit_conflicts_total{pipeline="ktwo-b"}`)
	sa := metricValue(m, `ingestd_keyed_changes_total{outcome="stale",pipeline="ktwo-a"}`)
	sb := metricValue(m, `ingestd_keyed_changes_total{outcome="stale",pipeline="ktwo-b"}`)
	want := model.rows()
	t.Logf("%d + %d changes; commit conflicts (rebuilds) a=%v b=%v; stale changes a=%v b=%v; table version %d; key 100: %q (present %v)",
		counts[0], counts[1], ca, cb, sa, sb, openSnapshotT(t, table).Version, want[100], want[100] != "")
	checkKeyedReaders(t, spark, python, table, "after both streams", want)
	if ca+cb <= 0 {
		t.Errorf("no commit conflicts between the two pipelines (a=%v b=%v): the test did not make them race", ca, cb)
	}
	for _, q := range []string{dlqA, dlqB} {
		if n := len(readDLQ(t, s, q)); n != 0 {
			t.Errorf("%s: %d dead letters, want 0", q, n)
		}
	}
}
