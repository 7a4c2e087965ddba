package integration

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCDCConnectJSON is TestCDCPostgresToDelta through Kafka Connect's default converter:
// Debezium's PostgreSQL connector with JsonConverter (schemas.enable=true) for keys and
// values, so every record carries its Connect schema and no registry is involved →
// `ingestd run` with format connect_json, table.envelope debezium, mode upsert,
// key_format connect_json, sequence_by source.lsn. One table (REPLICA IDENTITY DEFAULT: a
// delete's before holds the key alone) of an int primary key, numeric(12,2),
// timestamptz, date, uuid, jsonb and text, all with NULLs; rows present before the
// connector starts arrive as snapshot reads, then a random workload of inserts, updates,
// deletes (each followed by its tombstone), primary-key changes and transactions runs
// while ingestd is killed with SIGKILL once. At the end the Delta table, read by delta-rs
// and by Spark, equals `SELECT … ORDER BY id` every column exactly, with no dead letter.
func TestCDCConnectJSON(t *testing.T) {
	t.Parallel() // own database, slot, topics, worker and table
	s, db, python, spark := needCDC(t)
	start := time.Now()
	db.exec(t, `CREATE TABLE items (id int PRIMARY KEY, amount numeric(12,2), at timestamptz, day date, uid uuid, doc jsonb, note text)`)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>9))
	t.Logf("seed %d", seed)
	w := &jsonCDCWorkload{cdcWorkload: newCDCWorkload(rng), live: map[int]bool{}}
	for range 30 { // the snapshot's rows
		db.exec(t, w.next())
	}
	wk := startConnect(t, s.brokers, s.registry)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	name, prefix := "cj-"+suffix, "cj"+suffix
	topic := prefix + ".public.items"
	wk.PutConnector(t, name, debeziumConnector(db, name, prefix, []string{"public.items"}, jsonConverter(), nil))
	wk.WaitStreaming(t, name, db, debeziumSlot(name), 120*time.Second)
	readTopicN(t, s.brokers, topic, 1, 60*time.Second) // the topic exists before ingestd subscribes
	t.Logf("connector streaming after %v", time.Since(start).Round(time.Millisecond))

	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	path := filepath.Join(root, "items")
	dlq := createTopic(t, s, topic+".dlq", 1)
	writePipeline(t, cfgDir, "items", fmt.Sprintf(`name: items
kafka: {brokers: [%q], topics: [%s], group: items-%s, start_offset: earliest, session_timeout: 6s}
format: connect_json
table: {uri: %q, create: true, mode: upsert, key: [id], key_format: connect_json, envelope: debezium, sequence_by: source.lsn}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: %d, max_bytes: 16MiB, max_age: 300ms}
`, s.brokers, topic, suffix, path, dlq, 20+rng.IntN(150)))
	d := startDaemon(t, cfgDir)
	for round := range 3 {
		for range 25 + rng.IntN(25) {
			db.exec(t, w.next())
		}
		if round == 1 {
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			d.kill9(t)
			d = startDaemon(t, cfgDir)
		}
	}
	source := pgRows(t, db, `SELECT id::text, coalesce(amount::text, '<nil>'), coalesce((extract(epoch FROM at) * 1000000)::bigint::text, '<nil>'),
		coalesce(day::text, '<nil>'), coalesce(uid::text, '<nil>'), coalesce(doc::text, '<nil>'), coalesce(note, '<nil>') FROM items ORDER BY items.id`)
	cols := []string{"id", "amount", "at", "day", "uid", "doc", "note"}
	render := func(rows []map[string]any) []string {
		got := cdcDeltaRows(t, rows, cols)
		for i, r := range got { // a date reads as YYYY-MM-DD, or with a midnight time
			got[i] = strings.Replace(r, "T00:00:00", "", 1)
		}
		return got
	}
	// First the table's state (Debezium may publish the workload's last commits seconds
	// after it ran), then every change (and tombstone) Debezium wrote has been handled: the
	// topic's end is stable and the table's txn has reached it.
	waitDeltaRSEquals(t, d, python, path, "items", source, render, nil)
	want := int64(-1)
	waitForEvery(t, d, 120*time.Second, time.Second, "Debezium to publish the workload and ingestd to handle it", func() bool {
		now := int64(len(readDLQ(t, s, topic)))
		if now != want {
			want = now
			return false
		}
		return handled(t, path) >= want
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}

	rs := readDeltaRS(t, python, path)
	if rs.Unsupported != "" {
		t.Fatalf("delta-rs cannot read the table: %s", rs.Unsupported)
	}
	var sp sparkRead
	spark.call(t, map[string]any{"op": "read", "path": path}, &sp)
	for who, rows := range map[string][]map[string]any{"delta-rs": rs.Rows, "Spark": sp.Rows} {
		if got := render(rows); !slices.Equal(got, source) {
			t.Errorf("%s reads %d rows, PostgreSQL holds %d:\n got %q\nwant %q", who, len(got), len(source), got, source)
		}
	}
	if n := len(readDLQ(t, s, dlq)); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
	t.Logf("%d rows equal in PostgreSQL, delta-rs and Spark after %d records; %d statements; %v",
		len(source), want, w.statements, time.Since(start).Round(time.Millisecond))
}

// jsonCDCWorkload is cdcWorkload's generator for TestCDCConnectJSON's items table.
type jsonCDCWorkload struct {
	*cdcWorkload
	live map[int]bool
}

func (w *jsonCDCWorkload) next() string {
	w.statements++
	if w.rng.IntN(6) == 0 { // a transaction of mixed changes
		var b strings.Builder
		b.WriteString("BEGIN;")
		for range 2 + w.rng.IntN(4) {
			b.WriteString(w.one() + ";")
		}
		b.WriteString("COMMIT;")
		return b.String()
	}
	return w.one()
}

func (w *jsonCDCWorkload) one() string {
	r := w.rng
	id := 1 + r.IntN(25)
	switch {
	case !w.live[id]:
		w.live[id] = true
		return fmt.Sprintf("INSERT INTO items VALUES (%d, %s, %s, %s, %s, %s, %s)", id, w.numeric(), w.ts(), w.day(), w.uuid(), w.doc(), w.text())
	case r.IntN(5) == 0:
		delete(w.live, id)
		return fmt.Sprintf("DELETE FROM items WHERE id = %d", id)
	case r.IntN(7) == 0: // a primary-key change: Debezium's delete of id, its tombstone and a create of to
		to := 1 + r.IntN(25)
		if w.live[to] {
			return fmt.Sprintf("UPDATE items SET note = %s WHERE id = %d", w.text(), id)
		}
		delete(w.live, id)
		w.live[to] = true
		return fmt.Sprintf("UPDATE items SET id = %d WHERE id = %d", to, id)
	default:
		return fmt.Sprintf("UPDATE items SET amount = %s, at = %s, day = %s, uid = %s, doc = %s, note = %s WHERE id = %d",
			w.numeric(), w.ts(), w.day(), w.uuid(), w.doc(), w.text(), id)
	}
}

func (w *jsonCDCWorkload) day() string {
	if w.rng.IntN(6) == 0 {
		return "NULL"
	}
	return "'" + time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, w.rng.IntN(200*365)).Format(time.DateOnly) + "'"
}

func (w *jsonCDCWorkload) uuid() string {
	if w.rng.IntN(6) == 0 {
		return "NULL"
	}
	return fmt.Sprintf("'%08x-%04x-4%03x-8%03x-%012x'", w.rng.Uint32(), w.rng.IntN(1<<16), w.rng.IntN(1<<12), w.rng.IntN(1<<12), w.rng.Int64N(1<<48))
}

func (w *jsonCDCWorkload) doc() string {
	switch w.rng.IntN(4) {
	case 0:
		return "NULL"
	case 1:
		return `'[1, 2.50, null, "x"]'`
	}
	return fmt.Sprintf(`'{"n": %d, "s": "é\"%d", "nested": {"ok": %v}}'`, w.rng.Int64N(1<<60), w.rng.IntN(100), w.rng.IntN(2) == 0)
}
