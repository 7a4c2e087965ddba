package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/ingest/decode"
)

// TestCDCIncrementalSnapshot runs a real Debezium incremental snapshot into an upsert
// table ordered by source.lsn: the connector starts without an initial snapshot
// (snapshot.mode no_data), so the rows already in the source table reach the topic only
// through the execute-snapshot signal (type incremental), as op r events whose
// source.lsn is null, read in chunks while updates, deletes and inserts of the same keys
// stream, and ingestd is killed with SIGKILL and restarted during it. At the end the
// Delta table, read by delta-rs and by Spark, equals the source table with no dead
// letter, and the rows only the snapshot read (keys nothing else touched) hold a NULL
// _source_lsn.
func TestCDCIncrementalSnapshot(t *testing.T) {
	t.Parallel() // own database, slot, topics, worker and table
	s, db, python, spark := needCDC(t)
	start := time.Now()
	db.exec(t, `
		CREATE TABLE items (id int PRIMARY KEY, name text);
		CREATE TABLE debezium_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));
		INSERT INTO items SELECT g, 'seed ' || g FROM generate_series(1, 60) g;`)
	wk := startConnect(t, s.brokers, s.registry)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	name, prefix := "incsnap-"+suffix, "incsnap"+suffix
	wk.PutConnector(t, name, debeziumConnector(db, name, prefix, []string{"public.items"}, wk.avroConverter(t), map[string]string{
		"snapshot.mode":                   "no_data",
		"signal.data.collection":          "public.debezium_signal",
		"publication.autocreate.mode":     "all_tables", // the signal table's inserts reach the connector
		"incremental.snapshot.chunk.size": "8",
	}))
	wk.WaitStreaming(t, name, db, debeziumSlot(name), 120*time.Second)
	topic := prefix + ".public.items"
	db.exec(t, `UPDATE items SET name = 'streamed' WHERE id = 1`)
	readTopicN(t, s.brokers, topic, 1, 60*time.Second) // the topic exists before ingestd subscribes
	t.Logf("connector streaming after %v", time.Since(start).Round(time.Millisecond))

	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	path := filepath.Join(root, "items")
	dlq := createTopic(t, s, topic+".dlq", 1)
	writePipeline(t, cfgDir, "items", fmt.Sprintf(`name: items
kafka: {brokers: [%q], topics: [%s], group: items-%s, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true, mode: upsert, key: [id], key_format: avro, envelope: debezium, sequence_by: source.lsn}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: 7, max_bytes: 16MiB, max_age: 200ms}
`, s.brokers, topic, suffix, s.registry, path, dlq))
	d := startDaemon(t, cfgDir)

	// The workload touches ids 1–40 and 61–70 only: 41–60 reach the table through the
	// snapshot alone.
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	t.Logf("seed %d", seed)
	live := map[int]bool{}
	for id := 1; id <= 60; id++ {
		live[id] = true
	}
	change := func() {
		id := 1 + rng.IntN(50)
		if id > 40 {
			id += 20
		}
		switch {
		case !live[id]:
			live[id] = true
			db.exec(t, fmt.Sprintf("INSERT INTO items VALUES (%d, 'inserted %d')", id, rng.IntN(1000)))
		case rng.IntN(4) == 0:
			delete(live, id)
			db.exec(t, fmt.Sprintf("DELETE FROM items WHERE id = %d", id))
		default:
			db.exec(t, fmt.Sprintf("UPDATE items SET name = 'updated %d' WHERE id = %d", rng.IntN(1000), id))
		}
	}
	for range 10 {
		change()
	}
	db.exec(t, `INSERT INTO debezium_signal VALUES ('s1', 'execute-snapshot', '{"data-collections": ["public.items"], "type": "incremental"}')`)
	for i := range 40 {
		change()
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		if i == 20 {
			d.kill9(t)
			d = startDaemon(t, cfgDir)
		}
	}

	source := pgRows(t, db, `SELECT id::text, coalesce(name, '<nil>') FROM items ORDER BY items.id`)
	cols := []string{"id", "name"}
	waitDeltaRSEquals(t, d, python, path, "items", source, func(rows []map[string]any) []string { return cdcDeltaRows(t, rows, cols) },
		func(diff []string) { logEvents(t, s, topic, diff) })
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}
	var sp sparkRead
	spark.call(t, map[string]any{"op": "read", "path": path}, &sp)
	if got := cdcDeltaRows(t, sp.Rows, cols); !slices.Equal(got, source) {
		t.Errorf("Spark reads %d rows, PostgreSQL holds %d:\n got %q\nwant %q", len(got), len(source), got, source)
	}
	var snapOnly []string
	for _, r := range readDeltaRS(t, python, path).Rows {
		id, err := strconv.Atoi(fmt.Sprint(r["id"]))
		if err != nil {
			t.Fatalf("row %v: id: %v", r, err)
		}
		if id > 40 && id <= 60 {
			snapOnly = append(snapOnly, fmt.Sprintf("%d %v %v", id, r["name"], r["_source_lsn"]))
		}
	}
	slices.Sort(snapOnly)
	var want []string
	for id := 41; id <= 60; id++ {
		want = append(want, fmt.Sprintf("%d seed %d <nil>", id, id))
	}
	slices.Sort(want)
	if !slices.Equal(snapOnly, want) {
		t.Errorf("the rows only the incremental snapshot read: %q, want %q (NULL _source_lsn: nothing of their keys was known)", snapOnly, want)
	}
	if n := len(readDLQ(t, s, dlq)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
	t.Logf("%d rows equal in PostgreSQL, delta-rs and Spark; %v", len(source), time.Since(start).Round(time.Millisecond))
}

// waitDeltaRSEquals waits, polling every 2 s for at most 120 s, until delta-rs reads the
// table at path as want: the source's rows, rendered by render from the reader's rows.
// Debezium publishes a change some time after its commit (its poll interval, the worker's
// load), so the table's state, not a count of the records seen so far, says when ingestd
// has caught up; the table need not exist yet. A failed poll logs how many rows differ, and the rows only in Delta and
// only in the source every fifth (what names the table in the log); on the fifth, onMismatch (if not nil)
// gets both.
func waitDeltaRSEquals(t *testing.T, d *daemon, python, path, what string, want []string,
	render func([]map[string]any) []string, onMismatch func(diff []string)) {
	t.Helper()
	waits := 0
	waitForEvery(t, d, 120*time.Second, 2*time.Second, "the Delta table "+what+" to equal the source table", func() bool {
		if ents, _ := os.ReadDir(filepath.Join(path, "_delta_log")); len(ents) == 0 {
			t.Logf("waiting: the Delta table %s has no commit yet", what)
			return false
		}
		rs := readDeltaRS(t, python, path)
		if rs.Unsupported != "" {
			t.Fatalf("delta-rs cannot read the table %s: %s", what, rs.Unsupported)
		}
		got := render(rs.Rows)
		if slices.Equal(got, want) {
			return true
		}
		var extra, missing []string
		for _, r := range got {
			if !slices.Contains(want, r) {
				extra = append(extra, r)
			}
		}
		for _, r := range want {
			if !slices.Contains(got, r) {
				missing = append(missing, r)
			}
		}
		if waits++; waits%5 != 0 {
			t.Logf("waiting: delta-rs reads %d rows of %s, the source holds %d; %d differ", len(got), what, len(want), len(extra)+len(missing))
			return false
		}
		t.Logf("waiting: delta-rs reads %d rows of %s, the source holds %d (only in Delta %q, only in the source %q)",
			len(got), what, len(want), extra, missing)
		if waits == 5 && onMismatch != nil {
			onMismatch(append(extra, missing...))
		}
		return false
	})
}

// logEvents logs the Debezium events of topic whose key is the id of one of rows ("id
// …"), in offset order: what a mismatch came from.
func logEvents(t *testing.T, s stack, topic string, rows []string) {
	t.Helper()
	ids := map[string]bool{}
	for _, r := range rows {
		ids[strings.Fields(r)[0]] = true
	}
	cl, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range decodeCDC(t, decode.NewRegistry(cl), readDLQ(t, s, topic)) {
		id := fmt.Sprint(r.key["id"])
		if !ids[id] {
			continue
		}
		if r.value == nil {
			t.Logf("id %s: tombstone", id)
			continue
		}
		t.Logf("id %s: op %v source %v after %v", id, r.value["op"], r.value["source"], r.value["after"])
	}
}
