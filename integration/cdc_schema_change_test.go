package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
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

// TestCDCSourceSchemaChanges is change data capture end to end while the source tables'
// schemas change: PostgreSQL → Debezium on a Kafka Connect worker → a private broker →
// `ingestd run` (envelope debezium, mode upsert, sequence_by source.lsn) → Delta. The
// worker is killed and started again (Debezium sends again from its last stored offset:
// duplicates the key index absorbs by LSN), the broker is restarted and ingestd killed -9,
// all mid-stream. Five tables, one pipeline each:
//
//   - orders (evolve): ADD COLUMN note text and ADD COLUMN qty integer DEFAULT 7. The
//     table gains both columns. Two gaps are checked as they are: rows not changed since
//     read NULL in qty where PostgreSQL reads 7 (no change event carries an existing
//     row's default), and a NULL written into qty arrives as 7 (Kafka Connect's
//     Struct.get, in the Apicurio converter). Then the source touches those rows.
//   - prices (evolve, allow_table_features [typeWidening]): amount numeric(10,2) →
//     numeric(14,2) → numeric(16,4), Delta type widenings: Spark reads every value exactly
//     at the new type; delta-rs 1.6 refuses the typeWidening reader feature.
//   - ledger (evolve): numeric(10,2) → numeric(12,4), a widening the table has no feature
//     for: the partition halts at the first change after it, the message names amount and
//     the setting that lets it through.
//   - scaled (evolve, typeWidening allowed): numeric(10,2) → numeric(10,4), fewer integer
//     digits: no widening; it halts the same way, the message naming decimal(12,4), which
//     holds both, and the table alter --widen to it.
//   - notes (dead_letter): ADD COLUMN note: every change from the first of the new schema
//     on is a schema_mismatch dead letter naming note.
//
// The halted and dead-lettering tables then hold the source as it was before its change
// (delta-rs). The test applies the fixes the messages name (the setting, the
// command as written), adds notes' column and replays its dead letters, and restarts
// ingestd: every table, read by Spark and (those without typeWidening) delta-rs, equals
// `SELECT … ORDER BY id` of its source, every column exactly (numeric as its text).
func TestCDCSourceSchemaChanges(t *testing.T) {
	t.Parallel() // own database, slot, broker, worker, topics and tables
	s, db, python, spark := needCDC(t)
	start := time.Now()
	kafka := startPrivateKafka(t)
	ks := stack{brokers: kafka.brokers, registry: s.registry, python: s.python}
	t.Logf("private broker at %s after %v", kafka.brokers, time.Since(start).Round(time.Millisecond))

	db.exec(t, `
		CREATE TABLE orders (id int PRIMARY KEY, name text, amount numeric(10,2));
		CREATE TABLE prices (id int PRIMARY KEY, amount numeric(10,2));
		CREATE TABLE ledger (id int PRIMARY KEY, amount numeric(10,2));
		CREATE TABLE scaled (id int PRIMARY KEY, amount numeric(10,2));
		CREATE TABLE notes (id int PRIMARY KEY, name text);
		-- Rows the workload (ids 1-16) never changes: they keep qty's gap until the backfill.
		INSERT INTO orders VALUES (17, 'kept', 17.00), (18, NULL, -18.50), (19, 'kept too', NULL);`)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	w := &ddlWorkload{rng: rand.New(rand.NewPCG(seed, seed>>9)), live: map[string]map[int]bool{}, touched: map[int]bool{}}
	w.run(t, db, 8, "orders", "prices", "ledger", "scaled", "notes") // the snapshot's rows

	wk := startConnect(t, kafka.brokers, s.registry)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	name, prefix := "ddl-"+suffix, "ddl"+suffix
	tables := []string{"orders", "prices", "ledger", "scaled", "notes"}
	var include []string
	for _, tb := range tables {
		include = append(include, "public."+tb)
	}
	wk.PutConnector(t, name, debeziumConnector(db, name, prefix, include, wk.avroConverter(t), nil))
	wk.WaitStreaming(t, name, db, debeziumSlot(name), 120*time.Second)
	topic := func(tb string) string { return prefix + ".public." + tb }
	for _, tb := range tables {
		readTopicN(t, kafka.brokers, topic(tb), 1, 60*time.Second) // the topics exist before ingestd subscribes
	}
	t.Logf("connector streaming after %v", time.Since(start).Round(time.Millisecond))

	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	paths, dlqs := map[string]string{}, map[string]string{}
	schemaOf := map[string]string{
		"orders": "{policy: evolve}",
		"prices": "{policy: evolve, allow_table_features: [typeWidening]}",
		"ledger": "{policy: evolve}",
		"scaled": "{policy: evolve, allow_table_features: [typeWidening]}",
		"notes":  "{policy: dead_letter}",
	}
	for _, tb := range tables {
		paths[tb] = filepath.Join(root, tb)
		dlqs[tb] = createTopic(t, ks, topic(tb)+".dlq", 1)
		writePipeline(t, cfgDir, tb, fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%s, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true, mode: upsert, key: [id], key_format: avro, envelope: debezium, sequence_by: source.lsn}
schema: %s
dead_letter: {topic: %s}
batch: {max_records: %d, max_bytes: 16MiB, max_age: 200ms}
`, tb, kafka.brokers, topic(tb), tb, suffix, s.registry, paths[tb], schemaOf[tb], dlqs[tb], 5+w.rng.IntN(40)))
	}
	d := startDaemon(t, cfgDir)

	// The old schemas, streaming.
	w.run(t, db, 10, tables...)
	// The state the halting and dead-lettering tables keep: the source just before its change.
	before := map[string][]string{}
	for _, tb := range []string{"ledger", "scaled", "notes"} {
		before[tb] = pgRows(t, db, ddlQuery(tb, false))
	}
	db.exec(t, `
		ALTER TABLE orders ADD COLUMN note text;
		ALTER TABLE orders ADD COLUMN qty integer DEFAULT 7;
		ALTER TABLE prices ALTER COLUMN amount TYPE numeric(14,2);
		ALTER TABLE ledger ALTER COLUMN amount TYPE numeric(12,4);
		ALTER TABLE scaled ALTER COLUMN amount TYPE numeric(10,4);
		ALTER TABLE notes ADD COLUMN note text;`)
	w.ddl = 1
	// A NULL written into the column with a DEFAULT (outside the workload's ids).
	db.exec(t, "INSERT INTO orders (id, name, amount, note, qty) VALUES (100, 'explicit null', 1.00, NULL, NULL)")
	w.run(t, db, 6, tables...)

	// The worker dies (SIGKILL: no last offset commit) while changes stream, and comes
	// back: Debezium streams again from its last committed offset (committed every
	// second), so what it sent since comes again.
	killed := make(chan struct{})
	go func() { // owned here: waited for below
		defer close(killed)
		time.Sleep(1500 * time.Millisecond)
		wk.Kill(t)
	}()
	for streaming := true; streaming; { // changes flow until the kill
		select {
		case <-killed:
			streaming = false
		default:
			w.run(t, db, 1, tables...)
			time.Sleep(50 * time.Millisecond)
		}
	}
	w.run(t, db, 4, tables...) // the slot keeps them while the worker is down
	wk.Start(t)
	wk.WaitStreaming(t, name, db, debeziumSlot(name), 120*time.Second)
	t.Logf("worker restarted after %v", time.Since(start).Round(time.Millisecond))
	w.run(t, db, 4, tables...)
	d.kill9(t)
	w.run(t, db, 4, tables...)
	d = startDaemon(t, cfgDir)

	db.exec(t, `ALTER TABLE prices ALTER COLUMN amount TYPE numeric(16,4)`)
	w.ddl = 2
	w.run(t, db, 4, tables...)
	if err := kafka.restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker restarted after %v", time.Since(start).Round(time.Millisecond))
	w.run(t, db, 6, tables...)

	// settle waits until every change Debezium wrote has been handled, or halted at in
	// the pipelines halted (one partition each): the topics' ends are stable once the
	// connector has read the workload's last commit.
	var halts map[string][]haltReport
	settle := func(what string, halted ...string) {
		var want map[string]int64
		waitForEvery(t, d, 120*time.Second, time.Second, what, func() bool {
			now := map[string]int64{}
			for _, tb := range tables {
				now[tb] = int64(len(readDLQ(t, ks, topic(tb))))
			}
			stable := want != nil && maps.Equal(now, want)
			want = now
			if !stable {
				return false
			}
			halts = haltedOf(t, d)
			for _, tb := range tables {
				switch {
				case slices.Contains(halted, tb):
					if len(halts[tb]) != 1 {
						return false
					}
				case len(halts[tb]) != 0:
					t.Fatalf("%s halted: %+v", tb, halts[tb])
				case handled(t, paths[tb]) < want[tb]:
					return false
				}
			}
			return true
		})
	}
	settle("Debezium to publish the workload and ingestd to handle it", "ledger", "scaled")

	// The halts: one per table, at the first change written with the new schema, naming
	// the column, both types and the fix.
	fixes := map[string]string{}
	for tb, want := range map[string][]string{
		"ledger": {"field amount widens decimal(10,2) → decimal(12,4) needs table feature typeWidening", "add typeWidening to schema.allow_table_features"},
		"scaled": {"field amount is decimal(10,4) in the writer schema but decimal(10,2) in the table, neither a widening of the other (decimal(12,4) holds both)",
			"To let it through: ingestd table alter --config " + filepath.Join(cfgDir, "scaled.yaml") + " --enable-feature typeWidening --widen 'amount DECIMAL(12,4)' (holds"},
	} {
		h := halts[tb][0]
		first := firstNewSchema(t, ks, topic(tb))
		if h.Topic != topic(tb) || h.Offset != first || h.Reason != "schema_mismatch" || h.Field != "amount" {
			t.Errorf("%s: halted at %s@%d %s field %q, want %s@%d schema_mismatch field amount", tb, h.Topic, h.Offset, h.Reason, h.Field, topic(tb), first)
		}
		for _, sub := range want {
			if !strings.Contains(h.Message, sub) {
				t.Errorf("%s: halt message lacks %q:\n%s", tb, sub, h.Message)
			}
		}
		fixes[tb] = h.Message
		t.Logf("%s halted at offset %d: %s", tb, h.Offset, h.Message)
	}
	// The dead-letter table: every change written with the new schema is a dead letter
	// (at least once: a kill -9 between the produce and the commit sends it again), with
	// its reason; no other record is one. The new schema's records are told by their
	// schema id, not by offset: a Connect worker restarted after the ALTER can publish
	// changes again with the schema it read them with first, after changes with the new one.
	wantDead := newSchemaOffsets(t, ks, topic("notes"))
	first := firstNewSchema(t, ks, topic("notes"))
	gotDead := map[int64]bool{}
	for _, r := range readDLQ(t, ks, dlqs["notes"]) {
		h := r.headers
		off, err := strconv.ParseInt(h["__connect.errors.offset"], 10, 64)
		if err != nil || h["ingestd.error.reason"] != "schema_mismatch" || h["ingestd.error.field"] != "note" {
			t.Errorf("notes: dead letter of offset %q: reason %q field %q, want schema_mismatch at note", h["__connect.errors.offset"], h["ingestd.error.reason"], h["ingestd.error.field"])
		}
		gotDead[off] = true
	}
	if len(wantDead) == 0 || !maps.Equal(gotDead, wantDead) {
		t.Errorf("notes: dead letters of offsets %v, want the %d records of the new schema (the first at offset %d): %v",
			slices.Sorted(maps.Keys(gotDead)), len(wantDead), first, slices.Sorted(maps.Keys(wantDead)))
	}
	for _, tb := range []string{"orders", "prices", "ledger", "scaled"} {
		if n := len(readDLQ(t, ks, dlqs[tb])); n != 0 {
			t.Errorf("%s: %d dead letters, want 0", tb, n)
		}
	}
	// The halted and dead-lettering tables hold exactly the source as it was before its
	// change: nothing rescaled, nothing of the new schema written (delta-rs; Spark reads
	// them at the end).
	for _, tb := range []string{"ledger", "scaled", "notes"} {
		ddlCompare(t, nil, python, tb, paths[tb], ddlCols(tb, false), before[tb], true)
	}

	// orders: rows not changed since ADD COLUMN … DEFAULT 7 read NULL in qty (PostgreSQL
	// fills in the default without a change event), and a NULL written into qty arrives
	// as 7: Kafka Connect's Struct.get returns a field's default for a null, and the
	// Apicurio converter has no setting that reads around it. The table equals the source
	// with exactly those differences.
	stale := []string{"17", "18", "19"}
	for id := range w.live["orders"] {
		if !w.touched[id] {
			stale = append(stale, strconv.Itoa(id))
		}
	}
	slices.Sort(stale)
	staleQuery := strings.Replace(ddlQuery("orders", true), "coalesce(qty::text, '<nil>')",
		"CASE WHEN id IN ("+strings.Join(stale, ",")+") THEN '<nil>' WHEN id = 100 THEN '7' ELSE coalesce(qty::text, '<nil>') END", 1)
	rs := readDeltaRS(t, python, paths["orders"])
	if rs.Unsupported != "" {
		t.Fatalf("orders: delta-rs cannot read the table: %s", rs.Unsupported)
	}
	if got, want := cdcDeltaRows(t, rs.Rows, ddlCols("orders", true)), pgRows(t, db, staleQuery); !slices.Equal(got, want) {
		t.Errorf("orders before the backfill: delta-rs reads\n %q\nwant (qty NULL for ids %v, 7 for id 100)\n %q", got, stale, want)
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}

	// The fixes. orders: touching the rows sends their whole row, default included.
	db.exec(t, "UPDATE orders SET qty = qty WHERE id IN ("+strings.Join(stale, ",")+"); UPDATE orders SET qty = 5 WHERE id = 100")
	// ledger: the setting its message names.
	cfg, err := os.ReadFile(filepath.Join(cfgDir, "ledger.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writePipeline(t, cfgDir, "ledger", strings.Replace(string(cfg), "schema: {policy: evolve}", "schema: {policy: evolve, allow_table_features: [typeWidening]}", 1))
	// scaled: the command its message names, as written there.
	_, cmdText, _ := strings.Cut(fixes["scaled"], "To let it through: ingestd ")
	cmdText, _, _ = strings.Cut(cmdText, " (holds")
	if out, err := runCLI(t, shellWords(cmdText)...); err != nil {
		t.Fatalf("ingestd %s: %v\n%s", cmdText, err, out)
	}
	// notes: the column, then a replay of its dead letters.
	if out, err := runCLI(t, "table", "alter", "--config", filepath.Join(cfgDir, "notes.yaml"), "--add-column", "note STRING"); err != nil {
		t.Fatalf("table alter notes: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "replay", "--config", filepath.Join(cfgDir, "notes.yaml")); err != nil {
		t.Fatalf("replay notes: %v\n%s", err, out)
	}
	d = startDaemon(t, cfgDir)
	settle("ingestd to write the halted changes and the backfill")
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}

	// Every table equals its source. delta-rs 1.6 cannot read the three with typeWidening.
	for _, tb := range tables {
		cols := ddlCols(tb, true)
		ddlCompare(t, spark, python, tb, paths[tb], cols, pgRows(t, db, ddlQuery(tb, true)), tb == "orders" || tb == "notes")
	}
	// What the worker's kill sent twice (the same change: key, op and LSN), which the key
	// index absorbed: logged, as a kill may fall just after an offset commit.
	cl, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	reg := decode.NewRegistry(cl)
	dups := 0
	for _, tb := range tables {
		seen := map[string]bool{}
		for _, r := range decodeCDC(t, reg, readDLQ(t, ks, topic(tb))) {
			if r.value == nil {
				continue // a tombstone
			}
			src, _ := r.value["source"].(map[string]any)
			k := fmt.Sprint(r.key, r.value["op"], src["lsn"])
			if seen[k] {
				dups++
			}
			seen[k] = true
		}
	}
	t.Logf("%d statements, %d changes sent twice; %v", w.statements, dups, time.Since(start).Round(time.Millisecond))
}

// ddlCompare checks that the Delta table at path, read by Spark (unless spark is nil) and
// (deltaRS) by delta-rs, holds want (pgRows of cols); without deltaRS, that delta-rs
// refuses the table for its typeWidening feature.
func ddlCompare(t *testing.T, spark *sparkSession, python, tb, path string, cols, want []string, deltaRS bool) {
	t.Helper()
	readers := map[string][]map[string]any{}
	rs := readDeltaRS(t, python, path)
	switch {
	case !deltaRS:
		if !strings.Contains(strings.ToLower(rs.Unsupported), "typewidening") {
			t.Errorf("%s: delta-rs 1.6 read a table with typeWidening (unsupported=%q): docs/schema-policies.md says it cannot", tb, rs.Unsupported)
		}
	case rs.Unsupported != "":
		t.Fatalf("%s: delta-rs cannot read the table: %s", tb, rs.Unsupported)
	default:
		readers["delta-rs"] = rs.Rows
	}
	var sp sparkRead
	if spark != nil {
		spark.call(t, map[string]any{"op": "read", "path": path}, &sp)
		readers["Spark"] = sp.Rows
	}
	for who, rows := range readers {
		if got := cdcDeltaRows(t, rows, cols); !slices.Equal(got, want) {
			t.Errorf("%s: %s reads %d rows, want %d:\n got %q\nwant %q", tb, who, len(got), len(want), got, want)
		}
	}
	t.Logf("%s: %d rows equal in %d readers; Spark schema %v", tb, len(want), len(readers), sp.Schema)
}

// shellWords splits s at spaces outside single quotes, dropping the quotes.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, cur.String())
			}
			cur.Reset()
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// ddlWorkload changes the five tables of TestCDCSourceSchemaChanges over small key spaces:
// inserts, updates and deletes, with the columns of the current schema phase (ddl: 0
// before the first ALTERs, 1 after, 2 after prices' second).
type ddlWorkload struct {
	rng        *rand.Rand
	ddl        int
	live       map[string]map[int]bool
	touched    map[int]bool // orders' ids written since its ADD COLUMNs
	statements int
}

// run executes n statements on each of tables.
func (w *ddlWorkload) run(t *testing.T, db *pgDB, n int, tables ...string) {
	t.Helper()
	for range n {
		for _, tb := range tables {
			db.exec(t, w.one(tb))
			w.statements++
		}
	}
}

func (w *ddlWorkload) one(tb string) string {
	r := w.rng
	if w.live[tb] == nil {
		w.live[tb] = map[int]bool{}
	}
	live := w.live[tb]
	id := 1 + r.IntN(16)
	// The halting and dead-lettering tables get no deletes after their change: a delete
	// event goes where its schema sends it, but the tombstone after it deletes the key.
	noDelete := w.ddl > 0 && tb != "orders" && tb != "prices"
	switch {
	case !live[id]:
		live[id] = true
		if tb == "orders" && w.ddl > 0 {
			w.touched[id] = true
			return fmt.Sprintf("INSERT INTO orders (id, name, amount, note, qty) VALUES (%d, %s, %s, %s, %s)", id, w.text(), w.amount(tb), w.text(), w.qty())
		}
		switch tb {
		case "orders":
			return fmt.Sprintf("INSERT INTO orders VALUES (%d, %s, %s)", id, w.text(), w.amount(tb))
		case "notes":
			return fmt.Sprintf("INSERT INTO notes (id, name) VALUES (%d, %s)", id, w.text())
		}
		return fmt.Sprintf("INSERT INTO %s VALUES (%d, %s)", tb, id, w.amount(tb))
	case !noDelete && r.IntN(5) == 0:
		delete(live, id)
		if tb == "orders" {
			delete(w.touched, id)
		}
		return fmt.Sprintf("DELETE FROM %s WHERE id = %d", tb, id)
	}
	switch tb {
	case "orders":
		if w.ddl > 0 && r.IntN(3) > 0 {
			w.touched[id] = true
			return fmt.Sprintf("UPDATE orders SET name = %s, note = %s, qty = %s WHERE id = %d", w.text(), w.text(), w.qty(), id)
		}
		// An update of the old columns only: the event carries the whole row, qty too.
		if w.ddl > 0 {
			w.touched[id] = true
		}
		return fmt.Sprintf("UPDATE orders SET name = %s, amount = %s WHERE id = %d", w.text(), w.amount(tb), id)
	case "notes":
		if w.ddl > 0 {
			return fmt.Sprintf("UPDATE notes SET name = %s, note = %s WHERE id = %d", w.text(), w.text(), id)
		}
		return fmt.Sprintf("UPDATE notes SET name = %s WHERE id = %d", w.text(), id)
	}
	return fmt.Sprintf("UPDATE %s SET amount = %s WHERE id = %d", tb, w.amount(tb), id)
}

func (w *ddlWorkload) text() string {
	if w.rng.IntN(5) == 0 {
		return "NULL"
	}
	return fmt.Sprintf("'t%d é''s'", w.rng.IntN(1000))
}

// qty is never NULL: a NULL in a column with a DEFAULT reaches Kafka as the default
// (see nullQty in the test).
func (w *ddlWorkload) qty() string {
	return strconv.Itoa(w.rng.IntN(2000) - 1000)
}

// amount is a numeric value that uses the digits of tb's column in the current phase:
// up to 8 integer digits and 2 decimals for numeric(10,2), 12 for prices' numeric(14,2),
// 12 and 4 decimals for its numeric(16,4); scaled holds values below 10^6 (its
// numeric(10,4) takes them).
func (w *ddlWorkload) amount(tb string) string {
	r := w.rng
	if r.IntN(6) == 0 {
		return "NULL"
	}
	sign := ""
	if r.IntN(2) == 0 {
		sign = "-"
	}
	switch {
	case tb == "prices" && w.ddl == 1:
		return fmt.Sprintf("%s%d.%02d", sign, r.Int64N(1_000_000_000_000), r.IntN(100))
	case tb == "prices" && w.ddl == 2:
		return fmt.Sprintf("%s%d.%04d", sign, r.Int64N(1_000_000_000_000), r.IntN(10000))
	case tb == "scaled" || tb == "ledger":
		return fmt.Sprintf("%s%d.%02d", sign, r.IntN(1_000_000), r.IntN(100))
	}
	return fmt.Sprintf("%s%d.%02d", sign, r.IntN(100_000_000), r.IntN(100))
}

// ddlCols are the columns of tb as the test compares them (after: with the added ones).
func ddlCols(tb string, after bool) []string {
	switch tb {
	case "orders":
		if after {
			return []string{"id", "name", "amount", "note", "qty"}
		}
		return []string{"id", "name", "amount"}
	case "notes":
		if after {
			return []string{"id", "name", "note"}
		}
		return []string{"id", "name"}
	}
	return []string{"id", "amount"}
}

// ddlQuery selects ddlCols(tb, after) as text, NULL as <nil>, ordered by id.
func ddlQuery(tb string, after bool) string {
	cols := ddlCols(tb, after)
	parts := make([]string, len(cols))
	for i, c := range cols {
		if c == "id" {
			parts[i] = "id::text"
			continue
		}
		parts[i] = fmt.Sprintf("coalesce(%s::text, '<nil>')", c)
	}
	return "SELECT " + strings.Join(parts, ", ") + " FROM " + tb + " ORDER BY " + tb + ".id"
}

// haltReport is a halted partition as /readyz reports it, with its message.
type haltReport struct {
	Topic   string `json:"topic"`
	Offset  int64  `json:"offset"`
	Reason  string `json:"reason"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// haltedOf returns each pipeline's halted partitions from d's /readyz (none while it
// does not answer).
func haltedOf(t *testing.T, d *daemon) map[string][]haltReport {
	t.Helper()
	resp, err := http.Get("http://" + d.listen + "/readyz")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Pipelines []struct {
			Pipeline string       `json:"pipeline"`
			Halted   []haltReport `json:"halted"`
		} `json:"pipelines"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil
	}
	out := map[string][]haltReport{}
	for _, p := range r.Pipelines {
		out[p.Pipeline] = p.Halted
	}
	return out
}

// firstNewSchema is the offset of topic's first record whose value is framed with another
// schema id than its first record's: the first change after the table's schema changed.
// newSchemaOffsets is the set of offsets of topic's records whose writer schema id is
// not the first record's.
func newSchemaOffsets(t *testing.T, s stack, topic string) map[int64]bool {
	t.Helper()
	out := map[int64]bool{}
	firstID := -1
	recs := readDLQ(t, s, topic)
	slices.SortFunc(recs, func(a, b topicRecord) int { return int(a.offset - b.offset) })
	for _, r := range recs {
		if r.value == nil {
			continue
		}
		id, _, err := decode.ParseFrame(r.value)
		if err != nil {
			t.Fatalf("%s@%d: %v", topic, r.offset, err)
		}
		if firstID < 0 {
			firstID = id
		}
		if id != firstID {
			out[r.offset] = true
		}
	}
	return out
}

func firstNewSchema(t *testing.T, s stack, topic string) int64 {
	t.Helper()
	recs := readDLQ(t, s, topic)
	slices.SortFunc(recs, func(a, b topicRecord) int { return int(a.offset - b.offset) })
	firstID := -1
	for _, r := range recs {
		if r.value == nil {
			continue
		}
		id, _, err := decode.ParseFrame(r.value)
		if err != nil {
			t.Fatalf("%s@%d: %v", topic, r.offset, err)
		}
		switch {
		case firstID < 0:
			firstID = id
		case id != firstID:
			return r.offset
		}
	}
	t.Fatalf("%s: no record with a second schema", topic)
	return 0
}
