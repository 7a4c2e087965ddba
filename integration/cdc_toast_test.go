package integration

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCDCToastedColumnsKept is Debezium's unavailable-value placeholder end to end:
// PostgreSQL (a table with REPLICA IDENTITY DEFAULT whose text, bytea and text[] columns
// hold incompressible values stored out of line: TOASTed) → Debezium's PostgreSQL
// connector (Avro through the registry) → `ingestd run` into two upsert tables, one per
// upsert write. Updates of the small column alone make Debezium send
// __debezium_unavailable_value for the TOASTed columns (checked in the topic); some
// arrive while ingestd runs (the value comes from the flush or the row it just wrote),
// some while it is killed with SIGKILL (the restarted pipeline's index is rebuilt from
// the table, and the value is read from the stored row's data file), and a primary-key
// change of a row whose TOASTed columns are unchanged takes them from the old key's
// stored row (header __debezium.oldkey). At the end each
// Delta table, read by delta-rs and by Spark, equals `SELECT … ORDER BY id` of the
// source (the large values compared by MD5), with no dead letter.
func TestCDCToastedColumnsKept(t *testing.T) {
	t.Parallel() // own database, slot, topics, worker and tables
	s, db, python, spark := needCDC(t)
	start := time.Now()
	// STORAGE EXTERNAL: out of line and never compressed, so every value over the TOAST
	// threshold (about 2 KB) is TOASTed; md5 text is incompressible anyway.
	db.exec(t, `
		CREATE TABLE docs (id int PRIMARY KEY, small int, big text, bin bytea, tags text[], note text NOT NULL DEFAULT 'n');
		ALTER TABLE docs ALTER COLUMN big SET STORAGE EXTERNAL, ALTER COLUMN bin SET STORAGE EXTERNAL, ALTER COLUMN tags SET STORAGE EXTERNAL;
		CREATE FUNCTION rnd_text(n int) RETURNS text LANGUAGE sql AS
			$$ SELECT string_agg(md5(random()::text || i), '') FROM generate_series(1, n) i $$;`)
	// big: 9,600 characters of md5 hex; bin: 4,800 random bytes; tags: 300 md5 strings.
	insert := func(ids ...int) {
		for _, id := range ids {
			db.exec(t, `INSERT INTO docs (id, small, big, bin, tags) VALUES ($1, 1, rnd_text(300), decode(rnd_text(150), 'hex'),
				ARRAY(SELECT md5(random()::text || i) FROM generate_series(1, 300) i))`, id)
		}
	}
	insert(1, 2, 3) // snapshot reads
	wk := startConnect(t, s.brokers, s.registry)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	name, prefix := "toast-"+suffix, "toast"+suffix
	topic := prefix + ".public.docs"
	wk.PutConnector(t, name, debeziumConnector(db, name, prefix, []string{"public.docs"}, wk.avroConverter(t), nil))
	wk.WaitStreaming(t, name, db, debeziumSlot(name), 120*time.Second)
	readTopicN(t, s.brokers, topic, 3, 60*time.Second)
	t.Logf("connector streaming after %v", time.Since(start).Round(time.Millisecond))

	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	writes := []string{"merge_on_read", "copy_on_write"}
	paths := map[string]string{}
	for _, w := range writes {
		paths[w] = filepath.Join(root, w)
		dlq := createTopic(t, s, topic+"."+w+".dlq", 1)
		writePipeline(t, cfgDir, w, fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%s, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true, mode: upsert, upsert_write: %s, key: [id], key_format: avro, envelope: debezium, sequence_by: source.lsn}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: 50, max_bytes: 16MiB, max_age: 300ms}
`, w, s.brokers, topic, w, suffix, s.registry, paths[w], w, dlq))
	}
	// caughtUp waits until Debezium has published events change events (one per row the
	// statements so far touched: Debezium's poll interval can hold the last ones back for a
	// while, so no count seen so far is taken for the end) and both tables have handled them.
	caughtUp := func(d *daemon, what string, events int) {
		t.Helper()
		readTopicN(t, s.brokers, topic, events, 60*time.Second)
		waitForEvery(t, d, 60*time.Second, 500*time.Millisecond, what, func() bool {
			for _, w := range writes {
				if handled(t, paths[w]) < int64(events) {
					return false
				}
			}
			return true
		})
	}

	d := startDaemon(t, cfgDir)
	// While ingestd runs: new rows, and updates of the small column alone (placeholders),
	// two of them in one transaction (one flush: the second takes the first's filled value).
	insert(4, 5)
	db.exec(t, `UPDATE docs SET small = small + 1 WHERE id IN (1, 4)`)
	db.exec(t, `BEGIN; UPDATE docs SET small = small + 10 WHERE id = 5; UPDATE docs SET small = small + 10 WHERE id = 5; COMMIT`)
	caughtUp(d, "the first changes", 9) // 3 snapshot reads, 2 inserts, 4 updates
	d.kill9(t)
	// While ingestd is down: placeholders whose value only the table's files hold (the
	// restarted pipeline rebuilds its key index from the table).
	db.exec(t, `UPDATE docs SET small = small + 100 WHERE id IN (1, 2, 3, 4, 5)`)
	db.exec(t, `UPDATE docs SET big = rnd_text(300) WHERE id = 2`) // a new large value is sent whole
	db.exec(t, `UPDATE docs SET small = small + 1000 WHERE id = 2`)
	d = startDaemon(t, cfgDir)
	caughtUp(d, "the changes made while ingestd was down", 16) // and 7 updates
	// A primary-key change of a row whose TOASTed columns are unchanged: Debezium sends a
	// delete of key 3 (header __debezium.newkey), its tombstone, and a create of key 30
	// whose TOASTed columns are placeholders, with header __debezium.oldkey naming key 3.
	// Key 30 has no value of its own: the stored row of key 3 (written before the restart)
	// gives it.
	db.exec(t, `UPDATE docs SET id = 30 WHERE id = 3`)
	caughtUp(d, "the primary-key change", 19)
	// A chain in one transaction: key 4 becomes 40, then 40 becomes 41, then 41's small
	// column changes (a delete, tombstone and create per key change, then an update; each
	// create and the update carry the placeholders): key 41 keeps key 4's values.
	db.exec(t, `BEGIN; UPDATE docs SET id = 40 WHERE id = 4; UPDATE docs SET id = 41 WHERE id = 40; UPDATE docs SET small = small + 1 WHERE id = 41; COMMIT`)
	caughtUp(d, "the chained primary-key changes", 26)
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}
	placeholders := 0
	events := readDLQ(t, s, topic)
	if len(events) != 26 {
		t.Fatalf("Debezium published %d change events, want 26: one per row each statement touched, and each primary-key change's delete, tombstone and create", len(events))
	}
	pkCreates := 0
	for _, r := range events {
		if bytes.Contains(r.value, []byte("__debezium_unavailable_value")) {
			placeholders++
		}
		if old, ok := r.headers["__debezium.oldkey"]; ok {
			// The header is written by the worker's header.converter (here the default,
			// SimpleHeaderConverter), not by the key converter.
			t.Logf("the primary-key change's create: header __debezium.oldkey %q, placeholder %v", old,
				bytes.Contains(r.value, []byte("__debezium_unavailable_value")))
			if !bytes.Contains(r.value, []byte("__debezium_unavailable_value")) {
				t.Fatalf("the primary-key change's create carries no placeholder: the TOASTed columns were sent whole")
			}
			pkCreates++
		}
	}
	if pkCreates != 3 {
		t.Fatalf("%d change events have the header __debezium.oldkey, want 3: the primary-key changes were not a delete and a create each", pkCreates)
	}
	if placeholders < 10 {
		t.Fatalf("%d change events carry Debezium's placeholder, want at least 10: the columns were not TOASTed", placeholders)
	}

	source := pgRows(t, db, `SELECT id::text, small::text, length(big)::text, md5(big), md5(bin), md5(array_to_string(tags, '|')), note
		FROM docs ORDER BY docs.id`)
	var ids []string
	for _, r := range source {
		ids = append(ids, strings.Fields(r)[0])
	}
	if got := strings.Join(ids, " "); got != "1 2 5 30 41" {
		t.Fatalf("source ids %s, want 1 2 5 30 41: %q", got, source)
	}
	for _, w := range writes {
		rs := readDeltaRS(t, python, paths[w])
		if rs.Unsupported != "" {
			t.Fatalf("%s: delta-rs cannot read the table: %s", w, rs.Unsupported)
		}
		var sp sparkRead
		spark.call(t, map[string]any{"op": "read", "path": paths[w]}, &sp)
		for who, rows := range map[string][]map[string]any{"delta-rs": rs.Rows, "Spark": sp.Rows} {
			// Equal to the source, the large values by length and MD5: keys 30 and 41 hold
			// keys 3's and 4's big, bin and tags exactly, and keys 3, 4 and 40 are gone.
			if got := toastRows(t, rows); !slices.Equal(got, source) {
				t.Errorf("%s: %s reads\n%q\nPostgreSQL holds\n%q", w, who, got, source)
			}
		}
		if n := len(readDLQ(t, s, topic+"."+w+".dlq")); n != 0 {
			t.Errorf("%s: %d dead letters, want 0", w, n)
		}
	}
	t.Logf("%d placeholders kept the stored values in both tables; %v", placeholders, time.Since(start).Round(time.Millisecond))
}

// toastRows renders a reader's docs rows as the source query does: id, small, the
// length of big and the MD5 of big, bin (hex from the readers) and tags joined by '|',
// note; sorted by id.
func toastRows(t *testing.T, rows []map[string]any) []string {
	t.Helper()
	sum := func(b []byte) string { h := md5.Sum(b); return hex.EncodeToString(h[:]) }
	type row struct {
		id   int
		text string
	}
	var out []row
	for _, r := range rows {
		id, err := strconv.Atoi(fmt.Sprint(r["id"]))
		if err != nil {
			t.Fatalf("row id %v: %v", r["id"], err)
		}
		big, _ := r["big"].(string)
		bin, err := hex.DecodeString(fmt.Sprint(r["bin"]))
		if err != nil {
			t.Fatalf("row %d bin: %v", id, err)
		}
		var tags []string
		list, _ := r["tags"].([]any)
		for _, x := range list {
			tags = append(tags, fmt.Sprint(x))
		}
		out = append(out, row{id, strings.Join([]string{strconv.Itoa(id), fmt.Sprint(r["small"]), strconv.Itoa(len(big)), sum([]byte(big)),
			sum(bin), sum([]byte(strings.Join(tags, "|"))), fmt.Sprint(r["note"])}, " ")})
	}
	slices.SortFunc(out, func(a, b row) int { return a.id - b.id })
	texts := make([]string, len(out))
	for i, r := range out {
		texts[i] = r.text
	}
	return texts
}
