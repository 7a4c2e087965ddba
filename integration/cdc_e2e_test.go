package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// TestCDCPostgresToDelta is change data capture end to end on real services: PostgreSQL
// (the stack's) → Debezium's PostgreSQL connector on a Kafka Connect worker started by the
// test (Avro in the Confluent framing through the stack's registry) → the stack's broker
// → `ingestd run` with table.envelope: debezium, mode upsert, sequence_by source.lsn →
// Delta. Two tables: accounts (REPLICA IDENTITY DEFAULT: a delete's before image holds
// the key alone) and events (FULL). Rows present before the connector starts arrive as
// snapshot reads; then a random workload of inserts, updates, deletes, primary-key
// changes and multi-statement transactions runs while ingestd is killed with SIGKILL and
// restarted. At the end each Delta table, read by delta-rs and by Spark, equals
// `SELECT … ORDER BY id` of its source table, every column exactly (numeric as its decimal
// text, timestamptz in µs, NULLs), with one row per key. events is partitioned by at_date,
// a generated column CAST(at AS DATE): the workload's updates move rows between dates (and
// to and from the NULL partition), so each row's at_date must equal the UTC date of its
// at, and every live file of the snapshot must hold only live rows of its own partition.
func TestCDCPostgresToDelta(t *testing.T) {
	t.Parallel() // own database, slots, topics, worker and tables
	s, db, python, spark := needCDC(t)
	start := time.Now()
	db.exec(t, `
		CREATE TABLE accounts (id int PRIMARY KEY, name text, balance numeric(12,2), opened timestamptz, active bool);
		CREATE TABLE events (id bigint PRIMARY KEY, kind text NOT NULL, amount numeric(12,2), at timestamptz);
		ALTER TABLE events REPLICA IDENTITY FULL;`)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	t.Logf("seed %d", seed)
	w := newCDCWorkload(rng)
	for range 40 { // the snapshot's rows
		db.exec(t, w.next())
	}
	wk := startConnect(t, s.brokers, s.registry)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	name, prefix := "e2e-"+suffix, "e2e"+suffix
	wk.PutConnector(t, name, debeziumConnector(db, name, prefix, []string{"public.accounts", "public.events"}, wk.avroConverter(t), nil))
	wk.WaitStreaming(t, name, db, debeziumSlot(name), 120*time.Second)
	for _, tb := range []string{"accounts", "events"} {
		readTopicN(t, s.brokers, prefix+".public."+tb, 1, 60*time.Second) // the topics exist before ingestd subscribes
	}
	t.Logf("connector streaming after %v", time.Since(start).Round(time.Millisecond))

	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	paths := map[string]string{}
	// events is partitioned by the UTC date of at, a generated column: an update that
	// changes at moves its row to another partition, and a NULL at is the NULL partition.
	layout := map[string]string{"accounts": "", "events": `, partition_by: [at_date], generated_columns: {at_date: "CAST(at AS DATE)"}`}
	for _, tb := range []string{"accounts", "events"} {
		paths[tb] = filepath.Join(root, tb)
		topic := prefix + ".public." + tb
		dlq := createTopic(t, s, topic+".dlq", 1)
		writePipeline(t, cfgDir, tb, fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%s, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true, mode: upsert, key: [id], key_format: avro, envelope: debezium, sequence_by: source.lsn%s}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: %d, max_bytes: 16MiB, max_age: 300ms}
`, tb, s.brokers, topic, tb, suffix, s.registry, paths[tb], layout[tb], dlq, 20+rng.IntN(200)))
	}
	d := startDaemon(t, cfgDir)
	kills := 0
	for round := range 6 {
		for range 30 + rng.IntN(40) {
			db.exec(t, w.next())
		}
		if round%2 == 1 {
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			d.kill9(t)
			kills++
			d = startDaemon(t, cfgDir)
		}
	}
	queries := map[string]string{
		"accounts": `SELECT id::text, coalesce(name, '<nil>'), coalesce(balance::text, '<nil>'),
			coalesce((extract(epoch FROM opened) * 1000000)::bigint::text, '<nil>'), coalesce(active::text, '<nil>') FROM accounts ORDER BY accounts.id`,
		"events": `SELECT id::text, kind, coalesce(amount::text, '<nil>'),
			coalesce((extract(epoch FROM at) * 1000000)::bigint::text, '<nil>'),
			coalesce(((at AT TIME ZONE 'UTC')::date)::text, '<nil>') FROM events ORDER BY events.id`,
	}
	cols := map[string][]string{"accounts": {"id", "name", "balance", "opened", "active"}, "events": {"id", "kind", "amount", "at", "at_date"}}
	// First the tables' state (Debezium may publish the workload's last commits seconds
	// after it ran), then every change (and tombstone) Debezium wrote has been handled: the
	// topics' ends are stable and the tables' txns have reached them.
	for _, tb := range []string{"accounts", "events"} {
		waitDeltaRSEquals(t, d, python, paths[tb], tb, pgRows(t, db, queries[tb]),
			func(rows []map[string]any) []string { return cdcDeltaRows(t, rows, cols[tb]) },
			func(diff []string) { logEvents(t, s, prefix+".public."+tb, diff) })
	}
	produced := func(tb string) int64 { return int64(len(readDLQ(t, s, prefix+".public."+tb))) }
	var want map[string]int64
	waitForEvery(t, d, 180*time.Second, 2*time.Second, "Debezium to publish the workload and ingestd to handle it", func() bool {
		now := map[string]int64{"accounts": produced("accounts"), "events": produced("events")}
		if want == nil || now["accounts"] != want["accounts"] || now["events"] != want["events"] {
			want = now
			return false
		}
		return handled(t, paths["accounts"]) >= want["accounts"] && handled(t, paths["events"]) >= want["events"]
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}

	for _, tb := range []string{"accounts", "events"} {
		source := pgRows(t, db, queries[tb])
		rs := readDeltaRS(t, python, paths[tb])
		if rs.Unsupported != "" {
			t.Fatalf("%s: delta-rs cannot read the table: %s", tb, rs.Unsupported)
		}
		var sp sparkRead
		spark.call(t, map[string]any{"op": "read", "path": paths[tb]}, &sp)
		for who, rows := range map[string][]map[string]any{"delta-rs": rs.Rows, "Spark": sp.Rows} {
			got := cdcDeltaRows(t, rows, cols[tb])
			if !slices.Equal(got, source) {
				t.Errorf("%s: %s reads %d rows, PostgreSQL holds %d:\n got %q\nwant %q", tb, who, len(got), len(source), got, source)
			}
		}
		if n := len(readDLQ(t, s, prefix+".public."+tb+".dlq")); n != 0 {
			t.Errorf("%s: %d dead letters, want 0", tb, n)
		}
		t.Logf("%s: %d rows equal in PostgreSQL, delta-rs and Spark after %d changes", tb, len(source), want[tb])
	}
	files, parts := cdcCheckPartitions(t, paths["events"], "at", "at_date")
	t.Logf("events: %d live files in %d partitions checked row by row", files, parts)
	t.Logf("%d kill -9 of ingestd; %d statements; %v", kills, w.statements, time.Since(start).Round(time.Millisecond))
}

// cdcWorkload generates SQL for the two tables over a small key space (collisions:
// updates and deletes of live keys, re-inserts of deleted ones), with primary-key changes
// and multi-statement transactions.
type cdcWorkload struct {
	rng        *rand.Rand
	accounts   map[int]bool // live ids
	events     map[int64]bool
	statements int
}

func newCDCWorkload(rng *rand.Rand) *cdcWorkload {
	return &cdcWorkload{rng: rng, accounts: map[int]bool{}, events: map[int64]bool{}}
}

// next returns one statement or transaction.
func (w *cdcWorkload) next() string {
	w.statements++
	if w.rng.IntN(8) == 0 { // a transaction of mixed changes
		var b strings.Builder
		b.WriteString("BEGIN;")
		for range 2 + w.rng.IntN(4) {
			b.WriteString(w.one())
			b.WriteString(";")
		}
		b.WriteString("COMMIT;")
		return b.String()
	}
	return w.one()
}

func (w *cdcWorkload) one() string {
	r := w.rng
	if r.IntN(2) == 0 {
		id := 1 + r.IntN(30)
		switch {
		case !w.accounts[id]:
			w.accounts[id] = true
			return fmt.Sprintf("INSERT INTO accounts VALUES (%d, %s, %s, %s, %s)", id, w.text(), w.numeric(), w.ts(), w.boolean())
		case r.IntN(6) == 0:
			delete(w.accounts, id)
			return fmt.Sprintf("DELETE FROM accounts WHERE id = %d", id)
		case r.IntN(8) == 0: // a primary-key change: Debezium's delete of id and create of to
			to := 1 + r.IntN(30)
			if w.accounts[to] {
				return fmt.Sprintf("UPDATE accounts SET name = %s WHERE id = %d", w.text(), id)
			}
			delete(w.accounts, id)
			w.accounts[to] = true
			return fmt.Sprintf("UPDATE accounts SET id = %d WHERE id = %d", to, id)
		default:
			return fmt.Sprintf("UPDATE accounts SET name = %s, balance = %s, opened = %s, active = %s WHERE id = %d", w.text(), w.numeric(), w.ts(), w.boolean(), id)
		}
	}
	id := int64(1+r.IntN(30)) * 1_000_000_007
	switch {
	case !w.events[id]:
		w.events[id] = true
		return fmt.Sprintf("INSERT INTO events VALUES (%d, %s, %s, %s)", id, w.kind(), w.numeric(), w.ts())
	case r.IntN(5) == 0:
		delete(w.events, id)
		return fmt.Sprintf("DELETE FROM events WHERE id = %d", id)
	default:
		return fmt.Sprintf("UPDATE events SET kind = %s, amount = %s, at = %s WHERE id = %d", w.kind(), w.numeric(), w.ts(), id)
	}
}

func (w *cdcWorkload) text() string {
	if w.rng.IntN(6) == 0 {
		return "NULL"
	}
	return fmt.Sprintf("'n%d é''s'", w.rng.IntN(1000))
}

func (w *cdcWorkload) kind() string { return fmt.Sprintf("'k%d'", w.rng.IntN(5)) }

func (w *cdcWorkload) numeric() string {
	if w.rng.IntN(6) == 0 {
		return "NULL"
	}
	return fmt.Sprintf("%d.%02d", w.rng.IntN(2_000_000_000)-1_000_000_000, w.rng.IntN(100))
}

func (w *cdcWorkload) ts() string {
	if w.rng.IntN(6) == 0 {
		return "NULL"
	}
	// 1950–2050, to the microsecond, written with an offset.
	us := w.rng.Int64N(100*365*86400*1_000_000) - 20*365*86400*1_000_000
	return "'" + time.UnixMicro(us).In(time.FixedZone("", 5*3600+1800)).Format("2006-01-02 15:04:05.999999-07:00") + "'"
}

func (w *cdcWorkload) boolean() string {
	return [...]string{"true", "false", "NULL"}[w.rng.IntN(3)]
}

// pgRows runs query and returns each row's columns (all text) joined by " ".
func pgRows(t *testing.T, db *pgDB, query string) []string {
	t.Helper()
	rows, err := db.conn.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// cdcDeltaRows renders a reader's rows as pgRows does: cols in order, NULL as <nil>,
// timestamps as µs since the epoch, decimals as their text; sorted by id.
func cdcDeltaRows(t *testing.T, rows []map[string]any, cols []string) []string {
	t.Helper()
	type row struct {
		id   int64
		text string
	}
	var out []row
	for _, r := range rows {
		parts := make([]string, len(cols))
		for i, c := range cols {
			v := r[c]
			switch x := v.(type) {
			case nil:
				parts[i] = "<nil>"
			case string:
				if ts, err := time.Parse(time.RFC3339Nano, x); err == nil && (c == "opened" || c == "at") {
					parts[i] = strconv.FormatInt(ts.UnixMicro(), 10)
				} else if ts, err := time.Parse("2006-01-02T15:04:05.999999", x); err == nil && (c == "opened" || c == "at") {
					parts[i] = strconv.FormatInt(ts.UnixMicro(), 10)
				} else {
					parts[i] = x
				}
			default:
				parts[i] = fmt.Sprint(x)
			}
		}
		id, err := strconv.ParseInt(fmt.Sprint(r["id"]), 10, 64)
		if err != nil {
			t.Fatalf("row %v: id: %v", r, err)
		}
		out = append(out, row{id, strings.Join(parts, " ")})
	}
	slices.SortFunc(out, func(a, b row) int { return int(min(max(a.id-b.id, -1), 1)) })
	texts := make([]string, len(out))
	for i, r := range out {
		texts[i] = r.text
	}
	return texts
}

// cdcCheckPartitions checks that every live data file of the table at path holds only live
// rows of its own partition: for each row, the file's partitionValues[dateCol] (and its
// directory, Spark's layout) is the UTC date of the row's timestamp column tsCol, NULL
// (__HIVE_DEFAULT_PARTITION__) when tsCol is NULL. It returns the number of live files and
// of partition values.
func cdcCheckPartitions(t *testing.T, path, tsCol, dateCol string) (files, partitions int) {
	t.Helper()
	ctx := context.Background()
	snap := openSnapshotT(t, path)
	st, err := storage.NewLocal(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Metadata.PartitionColumns; !slices.Equal(got, []string{dateCol}) {
		t.Fatalf("partition columns %q, want [%s]", got, dateCol)
	}
	values := map[string]bool{}
	for _, add := range snap.Files.All() {
		files++
		pv := add.PartitionValues[dateCol]
		values[pvString(pv)] = true
		dir := dateCol + "=" + deltawriter.HiveDefaultPartition
		if pv != nil {
			dir = dateCol + "=" + *pv
		}
		if !strings.HasPrefix(add.Path, dir+"/") {
			t.Errorf("file %s (partition %s) is not in directory %s", add.Path, pvString(pv), dir)
		}
		if _, err := snap.ReadDataFile(ctx, st, add, func(row map[string]any) error {
			want := "null"
			switch v := row[tsCol].(type) {
			case nil:
			case int64:
				want = pvString(sp(time.UnixMicro(v).UTC().Format(time.DateOnly)))
			case time.Time:
				want = pvString(sp(v.UTC().Format(time.DateOnly)))
			default:
				return fmt.Errorf("column %s holds %T %v", tsCol, v, v)
			}
			if want != pvString(pv) {
				t.Errorf("file %s (partition %s) holds a live row of id %v whose %s %v is in partition %s", add.Path, pvString(pv), row["id"], tsCol, row[tsCol], want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return files, len(values)
}
