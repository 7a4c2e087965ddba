package integration

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestCDCManyTablesOnePipeline is one pipeline file for a whole database: PostgreSQL →
// Debezium (one connector, one topic per table) → `ingestd run` with kafka.topic_pattern
// and a table.uri template → one keyed Delta table per source table, all in one consumer
// group. 20 source tables, one of them created while ingestd runs (found by topic
// discovery); half keyed by an integer, the others by text; a random workload of
// inserts, updates and deletes over all of them but one, with ingestd killed with SIGKILL
// once and restarted, and an incremental snapshot (Debezium's execute-snapshot signal) of
// two busy tables and the quiet one in the middle of it: its reads (op r) interleave with
// newer streamed changes and must not overwrite them. The restarted daemon is stopped with
// SIGTERM while its consumers join the group, and the last one at the end: both exit 0
// without an ERROR line. At the end every Delta table, read by delta-rs and by Spark,
// equals its source table row for row.
func TestCDCManyTablesOnePipeline(t *testing.T) {
	t.Parallel() // own database, slot, topics, worker and tables
	s, db, python, spark := needCDC(t)
	start := time.Now()
	const tables = 20
	late := fmt.Sprintf("t%02d", tables-1) // created while ingestd runs
	create := func(i int) string {
		key := "id int PRIMARY KEY"
		if i%2 == 1 {
			key = "id text PRIMARY KEY"
		}
		return fmt.Sprintf("CREATE TABLE t%02d (%s, v text, n numeric(10,2));", i, key)
	}
	var ddl strings.Builder
	for i := range tables - 1 {
		ddl.WriteString(create(i))
	}
	ddl.WriteString("CREATE TABLE debezium_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));")
	db.exec(t, ddl.String())
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>9))
	t.Logf("seed %d", seed)
	w := &manyTablesWorkload{rng: rng, live: map[string]map[int]bool{}}
	for i := range tables - 1 {
		w.live[fmt.Sprintf("t%02d", i)] = map[int]bool{}
	}
	// quiet gets rows before the connector starts and no change after: its topic then
	// holds its initial snapshot's reads, and the incremental snapshot's again.
	const quiet, quietRows = "t18", 8
	w.quiet = quiet
	for range quietRows {
		db.exec(t, w.insert(quiet))
	}
	for range 60 { // the snapshot's rows
		db.exec(t, w.next())
	}

	wk := startConnect(t, s.brokers, s.registry)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	name, prefix := "many-"+suffix, "many"+suffix
	// A publication FOR ALL TABLES (the database is the test's own) streams a table created
	// later without touching the connector.
	wk.PutConnector(t, name, debeziumConnector(db, name, prefix, []string{`public\.t[0-9]+`}, wk.avroConverter(t),
		map[string]string{"publication.autocreate.mode": "all_tables", "signal.data.collection": "public.debezium_signal",
			"incremental.snapshot.chunk.size": "7"}))
	wk.WaitStreaming(t, name, db, debeziumSlot(name), 120*time.Second)
	t.Logf("connector streaming after %v", time.Since(start).Round(time.Millisecond))

	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	dlq := createTopic(t, s, prefix+".dlq", 1)
	writePipeline(t, cfgDir, "cdc", fmt.Sprintf(`name: cdc
kafka: {brokers: [%q], topic_pattern: '%s\.public\.(?P<table>t[0-9]+)', discover_every: 2s, group: cdc-%s, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: "%s/{table}", create: true, mode: upsert, key_format: avro, envelope: debezium, sequence_by: source.lsn}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: 500, max_bytes: 64MiB, max_age: 300ms}
`, s.brokers, regexp.QuoteMeta(prefix), suffix, s.registry, root, dlq))
	d := startDaemon(t, cfgDir)
	for round := range 4 {
		for range 40 + rng.IntN(40) {
			db.exec(t, w.next())
		}
		switch round {
		case 1:
			db.exec(t, create(tables-1))
			w.live[late] = map[int]bool{}
			db.exec(t, `INSERT INTO debezium_signal VALUES ('snap-1', 'execute-snapshot', '{"data-collections": ["public.t00", "public.t01", "public.`+quiet+`"], "type": "incremental"}');`)
		case 2:
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			d.kill9(t)
			d = startDaemon(t, cfgDir)
			// SIGTERM while the restarted daemon's 19 consumers join the group (their
			// rebalances in progress): a clean stop, with no ERROR line.
			time.Sleep(time.Duration(300+rng.IntN(600)) * time.Millisecond)
			d.stopClean(t)
			d = startDaemon(t, cfgDir)
		}
	}
	for range 10 { // the late table surely has rows
		db.exec(t, w.insert(late))
	}

	// Done when every table's topic exists and its end offset is what the table's txns
	// account for, twice in a row (Debezium may still be publishing).
	adm := kadm.NewClient(kafkaClient(t, s))
	topicOf := func(tb string) string { return prefix + ".public." + tb }
	var last string
	waitForEvery(t, d, 180*time.Second, 2*time.Second, "Debezium to publish the workload and ingestd to handle it", func() bool {
		var topics []string
		for tb := range w.live {
			topics = append(topics, topicOf(tb))
		}
		ends, err := adm.ListEndOffsets(context.Background(), topics...)
		if err != nil {
			return false
		}
		var state []string
		done := true
		for tb := range w.live {
			var end int64
			ends.Each(func(o kadm.ListedOffset) {
				if o.Topic == topicOf(tb) && o.Err == nil {
					end += o.Offset
				}
			})
			got := int64(0)
			if end > 0 {
				got = handled(t, filepath.Join(root, tb))
			}
			done = done && end > 0 && got >= end
			state = append(state, fmt.Sprintf("%s:%d/%d", tb, got, end))
		}
		var quietEnd int64
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == topicOf(quiet) {
				quietEnd += o.Offset
			}
		})
		slices.Sort(state)
		now := strings.Join(state, " ")
		stable := now == last
		last = now
		// The quiet table's topic has its rows twice: the initial and the incremental
		// snapshot's reads (the snapshot is over for it, the busy tables' go on).
		return done && stable && quietEnd >= 2*quietRows
	})
	r, _ := d.readyz(t)
	if len(r.Pipelines) != tables {
		t.Errorf("/readyz lists %d pipelines, want one per table (%d): %+v", len(r.Pipelines), tables, r.Pipelines)
	}
	for _, p := range r.Pipelines {
		if p.State != "running" || !strings.HasPrefix(p.Pipeline, "cdc/"+prefix+".public.t") {
			t.Errorf("/readyz: %s is %s, want cdc/<topic> running", p.Pipeline, p.State)
		}
	}
	d.stopClean(t) // 20 consumers leave one group at once: no ERROR line

	names := slices.Sorted(maps.Keys(w.live))
	rows := 0
	for _, tb := range names {
		source := pgRows(t, db, fmt.Sprintf(`SELECT id::text, coalesce(v, '<nil>'), coalesce(n::text, '<nil>') FROM %s`, tb))
		slices.Sort(source)
		path := filepath.Join(root, tb)
		rs := readDeltaRS(t, python, path)
		if rs.Unsupported != "" {
			t.Fatalf("%s: delta-rs cannot read the table: %s", tb, rs.Unsupported)
		}
		var sp sparkRead
		spark.call(t, map[string]any{"op": "read", "path": path}, &sp)
		for who, got := range map[string][]map[string]any{"delta-rs": rs.Rows, "Spark": sp.Rows} {
			var text []string
			for _, r := range got {
				parts := make([]string, 3)
				for i, c := range []string{"id", "v", "n"} {
					parts[i] = "<nil>"
					if r[c] != nil {
						parts[i] = fmt.Sprint(r[c])
					}
				}
				text = append(text, strings.Join(parts, " "))
			}
			slices.Sort(text)
			if !slices.Equal(text, source) {
				t.Errorf("%s: %s reads %d rows, PostgreSQL holds %d:\n got %q\nwant %q", tb, who, len(text), len(source), text, source)
			}
		}
		rows += len(source)
	}
	if n := len(readDLQ(t, s, dlq)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
	t.Logf("%d tables (%s created while ingestd ran), %d rows equal in PostgreSQL, delta-rs and Spark; %d statements, 1 kill -9; %v",
		tables, late, rows, w.statements, time.Since(start).Round(time.Millisecond))
}

// manyTablesWorkload generates single-row changes over many tables with small key
// spaces: inserts of free keys, updates and deletes of live ones.
type manyTablesWorkload struct {
	rng        *rand.Rand
	live       map[string]map[int]bool // table → live ids
	quiet      string                  // a table next leaves alone
	statements int
}

func (w *manyTablesWorkload) next() string {
	names := slices.DeleteFunc(slices.Sorted(maps.Keys(w.live)), func(tb string) bool { return tb == w.quiet })
	tb := names[w.rng.IntN(len(names))]
	var ids []int
	for id := range w.live[tb] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) == 0 || w.rng.IntN(3) == 0 {
		return w.insert(tb)
	}
	id := ids[w.rng.IntN(len(ids))]
	w.statements++
	if w.rng.IntN(4) == 0 {
		delete(w.live[tb], id)
		return fmt.Sprintf("DELETE FROM %s WHERE id = '%d';", tb, id)
	}
	return fmt.Sprintf("UPDATE %s SET v = %s, n = %s WHERE id = '%d';", tb, w.text(), w.numeric(), id)
}

// insert adds a row with a free key to tb (an update if the key space is full).
func (w *manyTablesWorkload) insert(tb string) string {
	w.statements++
	for range 50 {
		id := w.rng.IntN(40)
		if !w.live[tb][id] {
			w.live[tb][id] = true
			return fmt.Sprintf("INSERT INTO %s VALUES ('%d', %s, %s);", tb, id, w.text(), w.numeric())
		}
	}
	return fmt.Sprintf("UPDATE %s SET v = %s;", tb, w.text())
}

func (w *manyTablesWorkload) text() string {
	if w.rng.IntN(8) == 0 {
		return "NULL"
	}
	return fmt.Sprintf("'v%d'", w.rng.IntN(1000))
}

func (w *manyTablesWorkload) numeric() string {
	if w.rng.IntN(8) == 0 {
		return "NULL"
	}
	return fmt.Sprintf("%d.%02d", w.rng.IntN(2_000_000)-1_000_000, w.rng.IntN(100))
}
