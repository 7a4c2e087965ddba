package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter/storage"
)

// The keyed-table property test on the real broker: a random stream of upserts, op = 'd'
// deletes, tombstones and key moves (grp changes) over a small key space, with sequences
// out of order, produced in chunks to a 3-partition topic (each key in partition
// id % 3) while `ingestd run` ingests it into four upsert tables (offset order or
// sequence_by, partitioned by grp or not), one with soft deletes (sequence_by,
// partitioned), one copy-on-write (sequence_by: its deletes remembered in domainMetadata)
// and one changelog (sequence_by), in small random batches; the daemon is killed
// with SIGKILL at random moments and restarted. Once it has handled everything, each table
// read by delta-rs (QueryBuilder, deletion vectors applied) and by Spark equals the model
// (the changes of each key applied in offset order; with sequence_by, stale changes
// dropped and deletes remembered) exactly, and its txns never repeat an offset.
// KEYED_PROPERTY_SEED=<n> reruns a logged seed (stream, chunks and kill delays; not the
// timing).

const keyedPropRowSchema = `{"type":"record","name":"Row","namespace":"cases","fields":[
  {"name":"id","type":"long"},
  {"name":"v","type":["null","string"],"default":null},
  {"name":"seq","type":"long"},
  {"name":"op","type":"string"},
  {"name":"grp","type":"string"}]}`

const (
	kpPartitions = 3
	kpKeys       = 20
	kpChanges    = 500
	// kpMaxKills bounds the restarts (each waits for the killed member's session to
	// expire, about 6 s) to keep the test near 2.5 minutes.
	kpMaxKills = 10
)

// kpChange is one record of the stream: a row (op c, u or d) or a tombstone of id.
type kpChange struct {
	id   int64
	v    string
	seq  int64
	op   string
	grp  string
	tomb bool
}

func (c kpChange) String() string {
	if c.tomb {
		return fmt.Sprintf("tombstone(%d)", c.id)
	}
	return fmt.Sprintf("%s(%d,%s,seq %d,grp %s)", c.op, c.id, c.v, c.seq, c.grp)
}

// kpRow is a live row: v, seq and grp; deleted and delSeq are a soft-deleted row's
// _deleted and _deleted_sequence (false and 0 for a live row or a hard-delete table).
type kpRow struct {
	v       string
	seq     int64
	grp     string
	deleted bool
	delSeq  int64
}

// kpStream is n random changes over keys keys: 60 % upserts (c or u), 25 % op = 'd'
// rows, 15 % tombstones; each key's sequences mostly grow but run up to three behind
// and tie; grp is one of three values at random (a key moves when it changes).
func kpStream(rng *rand.Rand, n, keys int) []kpChange {
	base := make([]int64, keys)
	out := make([]kpChange, 0, n)
	for i := range n {
		id := int64(rng.IntN(keys))
		base[id]++
		c := kpChange{id: id, seq: base[id] + int64(rng.IntN(5)) - 3, grp: string(rune('a' + rng.IntN(3)))}
		switch r := rng.IntN(100); {
		case r < 60:
			c.op, c.v = []string{"c", "u"}[rng.IntN(2)], "r"+strconv.Itoa(i)
		case r < 85:
			c.op = "d"
		default:
			c.tomb = true
		}
		out = append(out, c)
	}
	return out
}

// kpModel applies changes in offset order per key. Without sequence_by the last change
// wins. With it, a change whose sequence is lower than the greatest applied to its key (an
// upsert's or a delete's) is stale; equal sequences go to the later change; a tombstone
// deletes what is current (it takes that greatest sequence; a key never seen is left
// alone). With soft deletes (ordered only here) a delete keeps a row flagged with its
// sequence: an op = 'd' row itself, or for a tombstone the key's current row.
func kpModel(changes []kpChange, ordered bool, soft ...bool) map[int64]kpRow {
	if len(soft) > 0 && soft[0] {
		return kpSoftModel(changes)
	}
	type state struct {
		live, known bool
		row         kpRow
		high        int64
	}
	keys := map[int64]*state{}
	for _, c := range changes {
		k := keys[c.id]
		if k == nil {
			k = &state{}
			keys[c.id] = k
		}
		switch {
		case c.tomb:
			k.live = false
		case ordered && k.known && c.seq < k.high:
		case c.op == "d":
			k.live, k.high, k.known = false, c.seq, true
		default:
			k.live, k.row, k.high, k.known = true, kpRow{v: c.v, seq: c.seq, grp: c.grp}, c.seq, true
		}
	}
	out := map[int64]kpRow{}
	for id, k := range keys {
		if k.live {
			out[id] = k.row
		}
	}
	return out
}

// kpSoftModel is kpModel with sequence_by and soft deletes.
func kpSoftModel(changes []kpChange) map[int64]kpRow {
	type state struct {
		has, known bool
		row        kpRow
		high       int64
	}
	keys := map[int64]*state{}
	for _, c := range changes {
		k := keys[c.id]
		if k == nil {
			k = &state{}
			keys[c.id] = k
		}
		switch {
		case c.tomb:
			if k.has {
				k.row.deleted, k.row.delSeq = true, k.high
			}
		case k.known && c.seq < k.high:
		case c.op == "d":
			k.has, k.high, k.known = true, c.seq, true
			k.row = kpRow{seq: c.seq, grp: c.grp, deleted: true, delSeq: c.seq}
		default:
			k.has, k.high, k.known = true, c.seq, true
			k.row = kpRow{v: c.v, seq: c.seq, grp: c.grp}
		}
	}
	out := map[int64]kpRow{}
	for id, k := range keys {
		if k.has {
			out[id] = k.row
		}
	}
	return out
}

// kpLogWant is what a changelog with sequence_by holds after changes: a row per change,
// formatted as kpLogRow formats a reader's row, sorted. A tombstone's row holds its key
// alone and no sequence.
func kpLogWant(changes []kpChange) []string {
	out := make([]string, 0, len(changes))
	for _, c := range changes {
		if c.tomb {
			out = append(out, kpLogLine(c.id, nil, nil, nil, nil, "delete", nil))
			continue
		}
		var v any = c.v
		if c.v == "" {
			v = nil
		}
		op := "upsert"
		if c.op == "d" {
			op = "delete"
		}
		out = append(out, kpLogLine(c.id, v, c.seq, c.op, c.grp, op, c.seq))
	}
	slices.Sort(out)
	return out
}

// kpLogRows formats a changelog's rows (read as JSON: numbers as json.Number) as
// kpLogWant does, sorted.
func kpLogRows(rows []map[string]any) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, kpLogLine(r["id"], r["v"], r["seq"], r["op"], r["grp"], r["_change_operation"], r["_change_sequence"]))
	}
	slices.Sort(out)
	return out
}

// kpLogLine joins a changelog row's values with spaces (NULL as <nil>), whatever their
// types: json.Number is a string to fmt.Sprint, which would join it without one.
func kpLogLine(vals ...any) string { return strings.TrimSuffix(fmt.Sprintln(vals...), "\n") }

// kpLogCompare fails t when a changelog's rows differ from the changes sent.
func kpLogCompare(t *testing.T, name, who string, want, got []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: %s reads %d rows, want one per change (%d):\n%s\nwant\n%s", name, who, len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// kpGoLog reads the local changelog table at path with deltawriter's reader, as
// kpLogRows formats rows.
func kpGoLog(t *testing.T, name, path string) []string {
	t.Helper()
	snap, err := openTable(t, path).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open("file://" + path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	for _, add := range snap.Files.All() {
		if _, err := snap.ReadDataFile(context.Background(), st, add, func(row map[string]any) error {
			r := map[string]any{}
			for k, v := range row {
				r[k] = v
			}
			rows = append(rows, r)
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return kpLogRows(rows)
}

func TestKeyedPropertyKill9(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	start := time.Now()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("KEYED_PROPERTY_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("KEYED_PROPERTY_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("seed %d (rerun with KEYED_PROPERTY_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	stream := kpStream(rng, kpChanges, kpKeys)

	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	topic := createTopic(t, s, "keyed-prop", kpPartitions)
	ss, err := reg.CreateSchema(context.Background(), topic+"-value", sr.Schema{Schema: keyedPropRowSchema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(keyedPropRowSchema)
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	type table struct {
		name, path           string
		ordered, partitioned bool
		soft, changelog, cow bool
	}
	var tables []table
	for _, tb := range []table{
		{name: "offsets"}, {name: "offsets", partitioned: true}, {name: "seq", ordered: true}, {name: "seq", ordered: true, partitioned: true},
		{name: "seq-soft", ordered: true, partitioned: true, soft: true}, {name: "seq-log", ordered: true, changelog: true},
		{name: "seq-cow", ordered: true, cow: true},
	} {
		mode, extra := "upsert", ""
		if tb.ordered {
			extra = ", sequence_by: seq"
		}
		if tb.partitioned {
			tb.name, extra = tb.name+"-grp", extra+", partition_by: [grp]"
		}
		if tb.soft {
			extra += ", deletes: soft"
		}
		if tb.changelog {
			mode = "changelog"
		}
		if tb.cow {
			extra += ", upsert_write: copy_on_write"
		}
		tb.path = filepath.Join(root, tb.name)
		dlq := createTopic(t, s, "keyed-prop-"+tb.name+".dlq", 1)
		writePipeline(t, cfgDir, tb.name, fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true, mode: %s, key: [id], delete_when: "op = 'd'", key_format: string%s}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: %d, max_bytes: 16MiB, max_age: 100ms}
`, tb.name, s.brokers, topic, tb.name, time.Now().UnixNano(), s.registry, tb.path, mode, extra, dlq, 5+rng.IntN(40)))
		tables = append(tables, tb)
	}

	// Produce the stream in chunks while the daemon ingests. After a chunk: one time in
	// three, once the daemon has committed something since its start, kill -9 it 0-60 ms
	// later (mid-stream when the tables have not handled all that was sent); otherwise wait
	// until every table handled what was sent and compare each, read with deltawriter's
	// reader (deletion vectors applied), with the model of the changes so far (a wrong row
	// later overwritten would be gone by the end), then kill -9 one time in five. Each
	// kill is followed by a restart; at most kpMaxKills kills.
	var ends [kpPartitions]int64
	sent, kills, midStream, checks := 0, 0, 0, 0
	all := func() (n int64) {
		for _, tb := range tables {
			n += handled(t, tb.path)
		}
		return n
	}
	d := startDaemon(t, cfgDir)
	var before int64 // all() when d started
	kill := func() {
		d.kill9(t)
		kills++
		before = all()
		if before < int64(len(tables)*sent) {
			midStream++
		}
		t.Logf("kill -9 #%d with %d of %d changes sent; %d of %d handled over the %d tables", kills, sent, len(stream), before, len(tables)*sent, len(tables))
		d = startDaemon(t, cfgDir)
	}
	for sent < len(stream) {
		chunk := stream[sent:min(sent+5+rng.IntN(25), len(stream))]
		kpProduce(t, cl, topic, ss.ID, schema, chunk)
		for _, c := range chunk {
			ends[c.id%kpPartitions]++
		}
		sent += len(chunk)
		if rng.IntN(3) == 0 && kills < kpMaxKills {
			waitForEvery(t, d, time.Minute, 20*time.Millisecond, "a commit of the restarted daemon", func() bool { return all() > before })
			time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
			kill()
			continue
		}
		waitForEvery(t, d, 2*time.Minute, 100*time.Millisecond, fmt.Sprintf("the %d changes sent handled in every table", sent), func() bool {
			return all() == int64(len(tables)*sent)
		})
		for _, tb := range tables {
			who := fmt.Sprintf("after %d changes, deltawriter", sent)
			if tb.changelog {
				kpLogCompare(t, tb.name, who, kpLogWant(stream[:sent]), kpGoLog(t, tb.name, tb.path))
				continue
			}
			kpCompare(t, tb.name, who, stream[:sent], kpModel(stream[:sent], tb.ordered, tb.soft), kpGoRows(t, tb.name, tb.path))
		}
		checks++
		if t.Failed() {
			t.FailNow()
		}
		if rng.IntN(5) == 0 && kills < kpMaxKills {
			kill()
		}
	}
	// The last start may be a moment ago: let its pipelines run before SIGTERM.
	waitFor(t, d, time.Minute, "the daemon ready", func() bool { r, _ := d.readyz(t); return r.Ready })
	waitForEvery(t, d, 2*time.Minute, 200*time.Millisecond, "every change handled in every table", func() bool {
		for _, tb := range tables {
			if handled(t, tb.path) < int64(len(stream)) {
				return false
			}
		}
		return true
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d on SIGTERM", code)
	}

	// Spark reads the tables in one query (one job instead of one per table on a loaded
	// machine); the columns of the other modes are NULL where a table has none.
	var union []string
	for _, tb := range tables {
		cols := "CAST(NULL AS BOOLEAN) AS _deleted, CAST(NULL AS BIGINT) AS _deleted_sequence, CAST(NULL AS STRING) AS op, CAST(NULL AS STRING) AS _change_operation, CAST(NULL AS BIGINT) AS _change_sequence"
		switch {
		case tb.soft:
			cols = "_deleted, _deleted_sequence, CAST(NULL AS STRING) AS op, CAST(NULL AS STRING) AS _change_operation, CAST(NULL AS BIGINT) AS _change_sequence"
		case tb.changelog:
			cols = "CAST(NULL AS BOOLEAN) AS _deleted, CAST(NULL AS BIGINT) AS _deleted_sequence, op, _change_operation, _change_sequence"
		}
		union = append(union, fmt.Sprintf("SELECT '%s' AS t, id, v, seq, grp, %s FROM delta.`%s`", tb.name, cols, tb.path))
	}
	var spRows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": strings.Join(union, " UNION ALL ")}, &spRows)
	sparkRows := map[string][]map[string]any{}
	for _, r := range spRows {
		name, _ := r["t"].(string)
		sparkRows[name] = append(sparkRows[name], r)
	}
	for _, tb := range tables {
		want := kpModel(stream, tb.ordered, tb.soft)
		txns := kpTxnLog(t, tb.path)
		for p, end := range ends {
			app := fmt.Sprintf("%s-%s-%d", tb.name, topic, p)
			if v, ok := txns[app]; end > 0 && (!ok || v != end-1) {
				t.Errorf("%s: txn %s at %d (present %v), want %d", tb.name, app, v, ok, end-1)
			}
		}
		rs := readDeltaRS(t, python, tb.path)
		if rs.Unsupported != "" {
			t.Fatalf("%s: delta-rs cannot read the table: %s", tb.name, rs.Unsupported)
		}
		if tb.changelog {
			kpLogCompare(t, tb.name, "delta-rs", kpLogWant(stream), kpLogRows(rs.Rows))
			kpLogCompare(t, tb.name, "Spark", kpLogWant(stream), kpLogRows(sparkRows[tb.name]))
			if n := len(readDLQ(t, s, "keyed-prop-"+tb.name+".dlq")); n != 0 {
				t.Errorf("%s: %d dead letters, want 0", tb.name, n)
			}
			t.Logf("%s: %d rows, one per change", tb.name, len(stream))
			continue
		}
		kpCompare(t, tb.name, "delta-rs", stream, want, kpRowsOf(t, tb.name, "delta-rs", rs.Rows))
		kpCompare(t, tb.name, "Spark", stream, want, kpRowsOf(t, tb.name, "Spark", sparkRows[tb.name]))
		if n := len(readDLQ(t, s, "keyed-prop-"+tb.name+".dlq")); n != 0 {
			t.Errorf("%s: %d dead letters, want 0", tb.name, n)
		}
		t.Logf("%s: %d live keys of %d, as the model", tb.name, len(want), kpKeys)
	}
	t.Logf("seed %d: %d changes over %d keys into %d tables, %d kill -9 (%d mid-stream), %d checks of every table on the way, %v",
		seed, len(stream), kpKeys, len(tables), kills, midStream, checks, time.Since(start).Round(time.Second))
}

// kpProduce writes changes to topic, each to partition id % kpPartitions keyed by its id.
func kpProduce(t *testing.T, cl *kgo.Client, topic string, id int, schema avro.Schema, changes []kpChange) {
	t.Helper()
	recs := make([]*kgo.Record, 0, len(changes))
	for _, c := range changes {
		r := &kgo.Record{Topic: topic, Partition: int32(c.id % kpPartitions), Key: fmt.Appendf(nil, "%d", c.id)}
		if !c.tomb {
			row := map[string]any{"id": c.id, "seq": c.seq, "op": c.op, "grp": c.grp, "v": nil}
			if c.v != "" {
				row["v"] = c.v
			}
			body, err := avro.Marshal(schema, row)
			if err != nil {
				t.Fatal(err)
			}
			var hdr sr.ConfluentHeader
			framed, err := hdr.AppendEncode(nil, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Value = append(framed, body...)
		}
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readerInt is column col of row r as a reader renders it (a json.Number), failing t
// (naming the test case name and the reader who) when it is not an integer.
func readerInt(t *testing.T, name, who string, r map[string]any, col string) int64 {
	t.Helper()
	n, ok := r[col].(json.Number)
	if !ok {
		t.Fatalf("%s: %s row without an integer %s: %v", name, who, col, r)
	}
	v, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// kpRowsOf maps a reader's rows to id → row, failing on two live rows of one id.
func kpRowsOf(t *testing.T, name, who string, rows []map[string]any) map[int64]kpRow {
	t.Helper()
	num := func(r map[string]any, col string) int64 { return readerInt(t, name, who, r, col) }
	out := map[int64]kpRow{}
	for _, r := range rows {
		id := num(r, "id")
		if prev, dup := out[id]; dup {
			t.Errorf("%s: %s reads two live rows of id %d: %+v and %v", name, who, id, prev, r)
		}
		row := kpRow{seq: num(r, "seq")}
		row.v, _ = r["v"].(string)
		row.grp, _ = r["grp"].(string)
		row.deleted, _ = r["_deleted"].(bool)
		if r["_deleted_sequence"] != nil {
			row.delSeq = num(r, "_deleted_sequence")
		}
		out[id] = row
	}
	return out
}

// kpCompare fails t with every key whose row differs between the table and the model,
// with the key's changes.
func kpCompare(t *testing.T, name, who string, stream []kpChange, want, got map[int64]kpRow) {
	t.Helper()
	for id := range int64(kpKeys) {
		g, gok := got[id]
		w, wok := want[id]
		if g == w && gok == wok {
			continue
		}
		var hist []string
		for i, c := range stream {
			if c.id == id {
				hist = append(hist, fmt.Sprintf("#%d %v", i, c))
			}
		}
		t.Errorf("%s: %s reads key %d as %+v (present %v), the model %+v (present %v); its changes: %s",
			name, who, id, g, gok, w, wok, strings.Join(hist, ", "))
	}
}

// kpGoRows reads the live rows of the local table at path with deltawriter's reader
// (deletion vectors applied), failing on two live rows of one id.
func kpGoRows(t *testing.T, name, path string) map[int64]kpRow {
	t.Helper()
	snap, err := openTable(t, path).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open("file://" + path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]kpRow{}
	for _, add := range snap.Files.All() {
		if _, err := snap.ReadDataFile(context.Background(), st, add, func(row map[string]any) error {
			id := row["id"].(int64)
			if prev, dup := out[id]; dup {
				return fmt.Errorf("two live rows of id %d: %+v and one in %s", id, prev, add.Path)
			}
			r := kpRow{seq: row["seq"].(int64)}
			r.v, _ = row["v"].(string)
			r.deleted, _ = row["_deleted"].(bool)
			r.delSeq, _ = row["_deleted_sequence"].(int64)
			if g, ok := row["grp"].(string); ok {
				r.grp = g
			} else if pv := add.PartitionValues["grp"]; pv != nil {
				r.grp = *pv
			}
			out[id] = r
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return out
}

// kpTxnLog reads every commit of the local table at path and checks that each appId's
// txn version grows from commit to commit (no offset handled twice); it returns the last.
func kpTxnLog(t *testing.T, path string) map[string]int64 {
	t.Helper()
	last := map[string]int64{}
	for v := 0; ; v++ {
		b, err := os.ReadFile(filepath.Join(path, "_delta_log", fmt.Sprintf("%020d.json", v)))
		if os.IsNotExist(err) {
			return last
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var a struct {
				Txn *struct {
					AppID   string `json:"appId"`
					Version int64  `json:"version"`
				} `json:"txn"`
			}
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				t.Fatalf("%s commit %d: %v", path, v, err)
			}
			if a.Txn == nil {
				continue
			}
			if prev, ok := last[a.Txn.AppID]; ok && a.Txn.Version <= prev {
				t.Errorf("%s commit %d: txn %s at %d after %d: offsets handled twice", path, v, a.Txn.AppID, a.Txn.Version, prev)
			}
			last[a.Txn.AppID] = a.Txn.Version
		}
	}
}
