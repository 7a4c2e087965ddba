package integration

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// The keyed-table cases on a plain keyed topic (no envelope): each record is the row
// {id, v, seq, op}; op = 'd' deletes (table.delete_when), a tombstone deletes the key its
// Kafka key names; the cases that order by a sequence set table.sequence_by: seq. Every
// batch is produced before `ingestd run` starts and read by it in one flush; the daemon
// is stopped (SIGTERM) after each batch and started again for the next, so every batch
// after the first runs on a restarted pipeline that rebuilt its key index from the table.
// After each batch the table is read by delta-rs and by Spark.

const keyedRowSchema = `{"type":"record","name":"Row","namespace":"cases","fields":[
  {"name":"id","type":"long"},
  {"name":"v","type":["null","string"],"default":null},
  {"name":"seq","type":"long"},
  {"name":"op","type":"string"}]}`

// kc is one change: the row {id, v, seq, op}, or a tombstone of key id.
type kc struct {
	id   int64
	v    string
	seq  int64
	op   string
	tomb bool
}

type keyedCase struct {
	name    string // the topic's and table's base name
	source  string // the public report the case comes from
	ordered bool   // table.sequence_by: seq
	cow     bool   // table.upsert_write: copy_on_write
	batches [][]kc
	want    []map[int64]string // the table (id → v) after each batch
	// soft (table.deletes: soft) and changelog (table.mode: changelog) tables are
	// compared row by row instead: rows holds the table's rows after each batch, each
	// as its columns (caseColumns) joined by spaces, NULL as <nil>, sorted.
	soft, changelog bool
	rows            [][]string
}

// caseColumns are the columns a case's rows compare.
func (c keyedCase) caseColumns() []string {
	switch {
	case c.changelog:
		return []string{"id", "v", "op", "_change_operation", "_change_sequence"}
	case c.soft:
		return []string{"id", "v", "_deleted", "_deleted_sequence"}
	}
	return nil
}

var keyedCases = []keyedCase{
	{name: "c47", source: "memiiso/debezium-server-iceberg#661: insert, delete, insert in one batch",
		batches: [][]kc{{{id: 1, v: "hello", op: "c"}, {id: 1, op: "d"}, {id: 1, v: "hallo", op: "c"}}},
		want:    []map[int64]string{{1: "hallo"}}},
	{name: "c48", source: "apache/iceberg#13547: the same key twice in one commit", ordered: true,
		batches: [][]kc{{{id: 1, v: "a", seq: 1, op: "u"}, {id: 1, v: "b", seq: 2, op: "u"}}},
		want:    []map[int64]string{{1: "b"}}},
	{name: "c49", source: "delta-io/delta#218: the same key twice in one MERGE source",
		batches: [][]kc{{{id: 1, v: "a", op: "c"}, {id: 1, v: "b", op: "u"}}, {{id: 1, v: "c", op: "u"}, {id: 1, v: "d", op: "u"}}},
		want:    []map[int64]string{{1: "b"}, {1: "d"}}},
	{name: "c51", source: "apache/spark#55993: a late insert resurrects a deleted row", ordered: true,
		batches: [][]kc{{{id: 1, seq: 5, op: "d"}}, {{id: 1, v: "late", seq: 3, op: "c"}}, {{id: 1, v: "new", seq: 6, op: "c"}}},
		want:    []map[int64]string{{}, {}, {1: "new"}}},
	{name: "c52", source: "lance-format/lance-flink#74: insert then delete in one batch",
		batches: [][]kc{{{id: 7, v: "x", op: "c"}, {id: 7, op: "d"}}},
		want:    []map[int64]string{{}}},
	{name: "c53", source: "airbytehq/airbyte#4160: equal timestamps give a random winner", ordered: true,
		batches: [][]kc{{{id: 6, v: "six", seq: 10, op: "c"}, {id: 6, seq: 11, op: "d"}}, {{id: 9, v: "a", seq: 4, op: "c"}, {id: 9, seq: 4, op: "d"}}},
		want:    []map[int64]string{{}, {}}},
	{name: "c57", source: "apache/iceberg#17542: upsert configured but updates and deletes appended",
		batches: [][]kc{{{id: 1, v: "1", op: "c"}, {id: 1, v: "2", op: "u"}, {id: 1, op: "d"}}},
		want:    []map[int64]string{{}}},
	{name: "c58", source: "apache/hudi#8519: the tombstone after a delete crashes the sink",
		batches: [][]kc{{{id: 1, v: "one", op: "c"}, {id: 2, v: "two", op: "c"}}, {{id: 1, op: "d"}, {id: 1, tomb: true}}, {{id: 2, tomb: true}}},
		want:    []map[int64]string{{1: "one", 2: "two"}, {2: "two"}, {}}},
	{name: "c51stored", source: "apache/spark#55993 with a stored row: the delete is remembered at its own sequence, not the replaced row's", ordered: true,
		batches: [][]kc{{{id: 1, v: "a", seq: 5, op: "c"}, {id: 2, v: "b", seq: 5, op: "c"}}, {{id: 1, seq: 12, op: "d"}, {id: 2, v: "b2", seq: 12, op: "u"}, {id: 2, tomb: true}},
			{{id: 1, v: "late", seq: 8, op: "u"}, {id: 2, v: "late", seq: 8, op: "u"}}, {{id: 1, v: "new", seq: 13, op: "u"}}},
		want: []map[int64]string{{1: "a", 2: "b"}, {}, {}, {1: "new"}}},
	// The cases with stored rows replaced or deleted, again under copy-on-write.
	{name: "c49cow", source: "delta-io/delta#218 under copy-on-write", cow: true,
		batches: [][]kc{{{id: 1, v: "a", op: "c"}, {id: 1, v: "b", op: "u"}, {id: 2, v: "x", op: "c"}}, {{id: 1, v: "c", op: "u"}, {id: 1, v: "d", op: "u"}}},
		want:    []map[int64]string{{1: "b", 2: "x"}, {1: "d", 2: "x"}}},
	{name: "c58cow", source: "apache/hudi#8519 under copy-on-write",
		cow: true, ordered: true,
		batches: [][]kc{{{id: 1, v: "one", seq: 1, op: "c"}, {id: 2, v: "two", seq: 1, op: "c"}}, {{id: 1, seq: 2, op: "d"}, {id: 1, tomb: true}}, {{id: 2, tomb: true}, {id: 3, v: "three", seq: 1, op: "c"}}},
		want:    []map[int64]string{{1: "one", 2: "two"}, {2: "two"}, {3: "three"}}},
	// Soft deletes (table.deletes: soft): the deleted key's row stays, flagged, with the
	// delete's sequence (sequence_by's value, else the record's offset).
	{name: "c47soft", source: "memiiso/debezium-server-iceberg#661 with soft deletes", soft: true,
		batches: [][]kc{{{id: 1, v: "hello", op: "c"}, {id: 1, op: "d"}, {id: 1, v: "hallo", op: "c"}}},
		rows:    [][]string{{"1 hallo false <nil>"}}},
	{name: "c49soft", source: "delta-io/delta#218 with soft deletes; a tombstone keeps the stored row's values", soft: true,
		batches: [][]kc{{{id: 1, v: "a", op: "c"}, {id: 1, v: "b", op: "u"}}, {{id: 1, v: "c", op: "u"}, {id: 1, v: "d", op: "u"}}, {{id: 1, tomb: true}}},
		rows:    [][]string{{"1 b false <nil>"}, {"1 d false <nil>"}, {"1 d true 4"}}},
	{name: "c51soft", source: "apache/spark#55993 with soft deletes: a late insert does not revive the key, a newer one does", soft: true, ordered: true,
		batches: [][]kc{{{id: 1, seq: 5, op: "d"}}, {{id: 1, v: "late", seq: 3, op: "c"}}, {{id: 1, v: "new", seq: 6, op: "c"}}},
		rows:    [][]string{{"1 <nil> true 5"}, {"1 <nil> true 5"}, {"1 new false <nil>"}}},
	{name: "c51softcow", source: "apache/spark#55993 with soft deletes under copy-on-write, deleted by a tombstone", soft: true, ordered: true, cow: true,
		batches: [][]kc{{{id: 1, v: "a", seq: 5, op: "c"}, {id: 2, v: "b", seq: 1, op: "c"}}, {{id: 1, tomb: true}}, {{id: 1, v: "late", seq: 3, op: "u"}}, {{id: 1, v: "new", seq: 6, op: "u"}}},
		rows:    [][]string{{"1 a false <nil>", "2 b false <nil>"}, {"1 a true 5", "2 b false <nil>"}, {"1 a true 5", "2 b false <nil>"}, {"1 new false <nil>", "2 b false <nil>"}}},
	{name: "c52soft", source: "lance-format/lance-flink#74 with soft deletes", soft: true,
		batches: [][]kc{{{id: 7, v: "x", op: "c"}, {id: 7, op: "d"}}},
		rows:    [][]string{{"7 <nil> true 1"}}},
	// Changelogs (table.mode: changelog): every change is a row.
	{name: "c47log", source: "memiiso/debezium-server-iceberg#661 as a changelog", changelog: true,
		batches: [][]kc{{{id: 1, v: "hello", op: "c"}, {id: 1, op: "d"}, {id: 1, v: "hallo", op: "c"}}},
		rows:    [][]string{{"1 <nil> d delete 1", "1 hallo c upsert 2", "1 hello c upsert 0"}}},
	{name: "c51log", source: "apache/spark#55993 as a changelog: the late insert is history too", changelog: true, ordered: true,
		batches: [][]kc{{{id: 1, seq: 5, op: "d"}}, {{id: 1, v: "late", seq: 3, op: "c"}}},
		rows:    [][]string{{"1 <nil> d delete 5"}, {"1 <nil> d delete 5", "1 late c upsert 3"}}},
	{name: "c58log", source: "apache/hudi#8519 as a changelog: tombstones are rows of their key", changelog: true, ordered: true,
		batches: [][]kc{{{id: 1, v: "one", seq: 1, op: "c"}, {id: 2, v: "two", seq: 1, op: "c"}}, {{id: 1, seq: 2, op: "d"}, {id: 1, tomb: true}}, {{id: 2, tomb: true}}},
		rows: [][]string{{"1 one c upsert 1", "2 two c upsert 1"}, {"1 <nil> <nil> delete <nil>", "1 <nil> d delete 2", "1 one c upsert 1", "2 two c upsert 1"},
			{"1 <nil> <nil> delete <nil>", "1 <nil> d delete 2", "1 one c upsert 1", "2 <nil> <nil> delete <nil>", "2 two c upsert 1"}}},
}

func TestKeyedCases(t *testing.T) {
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
	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	type run struct {
		keyedCase
		topic, table string
		id           int
		produced     int64
	}
	var runs []*run
	for _, c := range keyedCases {
		r := &run{keyedCase: c, topic: createTopic(t, s, "keyed-"+c.name, 1), table: filepath.Join(root, c.name)}
		dlq := createTopic(t, s, "keyed-"+c.name+".dlq", 1)
		ss, err := reg.CreateSchema(context.Background(), r.topic+"-value", sr.Schema{Schema: keyedRowSchema, Type: sr.TypeAvro})
		if err != nil {
			t.Fatal(err)
		}
		r.id = ss.ID
		seq := ""
		if c.ordered {
			seq = ", sequence_by: seq"
		}
		if c.cow {
			seq += ", upsert_write: copy_on_write"
		}
		mode := "upsert"
		switch {
		case c.changelog:
			mode = "changelog"
		case c.soft:
			seq += ", deletes: soft"
		}
		writePipeline(t, cfgDir, c.name, fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true, mode: %s, key: [id], delete_when: "op = 'd'", key_format: string%s}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: 1000, max_bytes: 16MiB, max_age: 500ms}
`, c.name, s.brokers, r.topic, c.name, time.Now().UnixNano(), s.registry, r.table, mode, seq, dlq))
		runs = append(runs, r)
	}
	for b := 0; ; b++ {
		var active []*run
		for _, r := range runs {
			if b < len(r.batches) {
				active = append(active, r)
				r.produced += produceKeyed(t, cl, r.topic, r.id, schema, r.batches[b])
			}
		}
		if len(active) == 0 {
			break
		}
		d := startDaemon(t, cfgDir)
		waitFor(t, d, 60*time.Second, fmt.Sprintf("batch %d to be committed", b+1), func() bool {
			for _, r := range active {
				if handled(t, r.table) < r.produced {
					return false
				}
			}
			return true
		})
		if code := d.stop(t); code != 0 {
			t.Fatalf("ingestd exited %d after batch %d", code, b+1)
		}
		for _, r := range active {
			rs := readDeltaRS(t, python, r.table)
			if rs.Unsupported != "" {
				t.Fatalf("%s: delta-rs cannot read the table: %s", r.name, rs.Unsupported)
			}
			if cols := r.caseColumns(); cols != nil {
				want := r.rows[b]
				if got := caseRowsOf(rs.Rows, cols); !slices.Equal(got, want) {
					t.Errorf("%s (%s) after batch %d: delta-rs reads %q, want %q", r.name, r.source, b+1, got, want)
				}
				var sp sparkRead
				spark.call(t, map[string]any{"op": "read", "path": r.table}, &sp)
				if got := caseRowsOf(sp.Rows, cols); !slices.Equal(got, want) {
					t.Errorf("%s (%s) after batch %d: Spark reads %q, want %q", r.name, r.source, b+1, got, want)
				}
				if r.cow || r.changelog {
					checkNoDeletionVectors(t, r.name, r.table)
				}
				continue
			}
			want := r.want[b]
			if got := keyedRowsOf(t, "delta-rs", r.name, rs.Rows); !maps.Equal(got, want) {
				t.Errorf("%s (%s) after batch %d: delta-rs reads %v, want %v", r.name, r.source, b+1, got, want)
			}
			var sp sparkRead
			spark.call(t, map[string]any{"op": "read", "path": r.table}, &sp)
			if got := keyedRowsOf(t, "Spark", r.name, sp.Rows); !maps.Equal(got, want) {
				t.Errorf("%s (%s) after batch %d: Spark reads %v, want %v", r.name, r.source, b+1, got, want)
			}
			if r.cow {
				checkNoDeletionVectors(t, r.name, r.table)
			}
		}
	}
	// Nothing was dead-lettered: every record is a change the table took.
	for _, r := range runs {
		if n := len(readDLQ(t, s, "keyed-"+r.name+".dlq")); n != 0 {
			t.Errorf("%s: %d dead letters, want 0", r.name, n)
		}
	}
}

// produceKeyed writes changes to partition 0 of topic in order (Kafka key: the id as
// text) and returns how many records it wrote.
func produceKeyed(t *testing.T, cl *kgo.Client, topic string, id int, schema avro.Schema, changes []kc) int64 {
	t.Helper()
	var recs []*kgo.Record
	for _, c := range changes {
		r := &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "%d", c.id)}
		if !c.tomb {
			row := map[string]any{"id": c.id, "seq": c.seq, "op": c.op, "v": nil}
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
	return int64(len(recs))
}

// keyedRowsOf maps a reader's rows to id → v, failing on two live rows of one id.
func keyedRowsOf(t *testing.T, who, name string, rows []map[string]any) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, r := range rows {
		id := readerInt(t, name, who, r, "id")
		if _, dup := out[id]; dup {
			t.Errorf("%s: %s reads two live rows of id %d", name, who, id)
		}
		v, _ := r["v"].(string)
		out[id] = v
	}
	return out
}

// caseRowsOf formats a reader's rows as keyedCase.rows holds them: the columns cols of
// each, joined by spaces (NULL as <nil>), sorted.
func caseRowsOf(rows []map[string]any, cols []string) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		vals := make([]any, len(cols))
		for i, c := range cols {
			vals[i] = r[c]
		}
		out = append(out, strings.TrimSuffix(fmt.Sprintln(vals...), "\n"))
	}
	slices.Sort(out)
	return out
}

// checkNoDeletionVectors fails t when the table at path has the deletionVectors feature or
// a file with a deletion vector (a copy-on-write upsert table has neither).
func checkNoDeletionVectors(t *testing.T, name, path string) {
	t.Helper()
	st, err := storage.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(snap.Protocol.ReaderFeatures, deltalog.FeatureDeletionVectors) {
		t.Errorf("%s: copy-on-write table has reader features %v", name, snap.Protocol.ReaderFeatures)
	}
	for _, a := range snap.Files.All() {
		if a.DeletionVector != nil {
			t.Errorf("%s: copy-on-write table's file %s has a deletion vector", name, a.Path)
		}
	}
}
