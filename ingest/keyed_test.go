package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/keyindex"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
)

// testKeyedRow is the row of the keyed-table tests: a key, a value, a sequence and an
// operation column (the Debezium-shaped cases as a plain topic).
const testKeyedRow = `{"type":"record","name":"Row","namespace":"shop","fields":[
  {"name":"id","type":"long"},
  {"name":"v","type":["null","string"],"default":null},
  {"name":"seq","type":"long"},
  {"name":"op","type":"string"}]}`

// keyedRec is one change of a keyed test: a record of testKeyedRow, or a tombstone of
// key id (tomb).
type keyedRec struct {
	id   int64
	v    string
	seq  int64
	op   string
	tomb bool
}

// keyedHarness is the harness with testKeyedRow registered.
type keyedHarness struct {
	*harness
	id     int
	schema avro.Schema
}

func newKeyedHarness(t *testing.T, partitions int32) *keyedHarness {
	h := newHarness(t, partitions)
	id, _, err := h.reg.RegisterSchema("rows-value", sr.Schema{Schema: testKeyedRow, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	s, err := avro.Parse(testKeyedRow)
	if err != nil {
		t.Fatal(err)
	}
	return &keyedHarness{harness: h, id: id, schema: s}
}

// keyedConfig is an upsert pipeline keyed by id; seqBy orders by seq when set; deletes
// are op = 'd'.
func (h *keyedHarness) keyedConfig(seqBy bool) *config.Config {
	cfg := h.config()
	cfg.Table.Mode, cfg.Table.Key, cfg.Table.DeleteWhen, cfg.Table.KeyFormat = config.ModeUpsert, []string{"id"}, "op = 'd'", "string"
	cfg.Table.DeleteHorizon = config.DefaultDeleteHorizon
	if seqBy {
		cfg.Table.SequenceBy = "seq"
	}
	return cfg
}

// send produces recs to partition 0 in order.
func (h *keyedHarness) send(recs ...keyedRec) {
	h.t.Helper()
	h.sendTo(h.topic, recs...)
}

// sendTo produces recs to partition 0 of topic in order.
func (h *keyedHarness) sendTo(topic string, recs ...keyedRec) {
	h.t.Helper()
	var out []*kgo.Record
	for _, r := range recs {
		k := fmt.Appendf(nil, "%d", r.id)
		if r.tomb {
			out = append(out, &kgo.Record{Topic: topic, Partition: 0, Key: k})
			continue
		}
		row := map[string]any{"id": r.id, "seq": r.seq, "op": r.op, "v": nil}
		if r.v != "" {
			row["v"] = r.v
		}
		body, err := avro.Marshal(h.schema, row)
		if err != nil {
			h.t.Fatal(err)
		}
		var hdr sr.ConfluentHeader
		framed, err := hdr.AppendEncode(nil, h.id, nil)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, &kgo.Record{Topic: topic, Partition: 0, Key: k, Value: append(framed, body...)})
	}
	if err := h.producer.ProduceSync(context.Background(), out...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// rows reads the table's live rows as id → v (as Spark and delta-rs read them: deletion
// vectors applied); a second live row of one id fails the test.
func (h *keyedHarness) rows() map[int64]string {
	h.t.Helper()
	out := map[int64]string{}
	if err := h.liveRows(func(_ deltalog.Add, row map[string]any) error {
		id := row["id"].(int64)
		if _, dup := out[id]; dup {
			return fmt.Errorf("two live rows for id %d", id)
		}
		v, _ := row["v"].(string)
		out[id] = v
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// liveRows calls fn with each live row of the table (deletion vectors applied, as Spark
// and delta-rs read them) and the add of its file, file by file; an error of fn or of a
// read stops it and is returned.
func (h *harness) liveRows(fn func(add deltalog.Add, row map[string]any) error) error {
	h.t.Helper()
	snap := h.snapshot()
	st, err := storage.Open("file://" + h.tableDir)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, add := range snap.Files.All() {
		if _, err := snap.ReadDataFile(context.Background(), st, add, func(row map[string]any) error { return fn(add, row) }); err != nil {
			return err
		}
	}
	return nil
}

// runBatch produces recs, runs a keyed pipeline until it handled them (one flush: the
// batch bound is above len(recs) and the records are produced before it starts), stops it
// and returns the table's rows.
func (h *keyedHarness) runBatch(cfg *config.Config, handled int64, recs ...keyedRec) map[int64]string {
	h.t.Helper()
	h.send(recs...)
	m := h.startWith("keyed", cfg, nil)
	h.waitHandled(handled, 30*time.Second, m)
	m.stop(h.t)
	return h.rows()
}

func TestKeyedInsertDeleteInsertInOneBatch(t *testing.T) {
	h := newKeyedHarness(t, 1)
	got := h.runBatch(h.keyedConfig(false), 3,
		keyedRec{id: 1, v: "hello", op: "c"}, keyedRec{id: 1, op: "d"}, keyedRec{id: 1, v: "hallo", op: "c"})
	if want := map[int64]string{1: "hallo"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v", got, want)
	}
}

func TestKeyedInsertThenDeleteInOneBatchLeavesNoRow(t *testing.T) {
	h := newKeyedHarness(t, 1)
	got := h.runBatch(h.keyedConfig(false), 3,
		keyedRec{id: 7, v: "x", op: "c"}, keyedRec{id: 7, op: "d"}, keyedRec{id: 8, v: "y", op: "c"})
	if want := map[int64]string{8: "y"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v", got, want)
	}
	// No data file holds row 7, live or not.
	snap := h.snapshot()
	if snap.Files.Len() != 1 {
		t.Fatalf("%d data files, want 1", snap.Files.Len())
	}
	for _, add := range snap.Files.All() {
		if n, _ := add.NumRecords(); n != 1 || add.DeletionVector != nil {
			t.Fatalf("data file %s has %d rows and deletion vector %v, want 1 row (8) and none", add.Path, n, add.DeletionVector)
		}
	}
}

func TestKeyedUpsertConfiguredInsertUpdateDeleteLeavesEmptyTable(t *testing.T) {
	h := newKeyedHarness(t, 1)
	got := h.runBatch(h.keyedConfig(false), 3,
		keyedRec{id: 1, v: "1", op: "c"}, keyedRec{id: 1, v: "2", op: "u"}, keyedRec{id: 1, op: "d"})
	if len(got) != 0 {
		t.Fatalf("table rows %v, want none", got)
	}
	if v := h.snapshot().Version; v != 0 {
		t.Fatalf("table at version %d, want the one commit that created it", v)
	}
}

func TestKeyedEqualSequencesTheLaterRecordWins(t *testing.T) {
	h := newKeyedHarness(t, 1)
	got := h.runBatch(h.keyedConfig(true), 3,
		keyedRec{id: 6, v: "a", seq: 10, op: "c"}, keyedRec{id: 6, seq: 10, op: "d"}, keyedRec{id: 5, v: "b", seq: 1, op: "c"})
	if want := map[int64]string{5: "b"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v (6 deleted)", got, want)
	}
}

func TestKeyedTombstoneDeletesItsKey(t *testing.T) {
	h := newKeyedHarness(t, 1)
	got := h.runBatch(h.keyedConfig(false), 3,
		keyedRec{id: 1, v: "a", op: "c"}, keyedRec{id: 2, v: "b", op: "c"}, keyedRec{id: 1, tomb: true})
	if want := map[int64]string{2: "b"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v", got, want)
	}
}

func TestKeyedNullKeyIsDeadLetteredMissingKey(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(false)
	cfg.Table.Key = []string{"v"} // v is NULL in the first record
	cfg.Schema.Policy = config.PolicyHalt
	got := h.runBatch(cfg, 2, keyedRec{id: 1, op: "c"}, keyedRec{id: 2, v: "b", op: "c"})
	if want := map[int64]string{2: "b"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v", got, want)
	}
	var reasons []string
	for _, r := range h.readTopicAll(h.dlq) {
		for _, hd := range r.Headers {
			if hd.Key == "ingestd.error.reason" {
				reasons = append(reasons, string(hd.Value))
			}
		}
	}
	if !slices.Equal(reasons, []string{"missing_key"}) {
		t.Fatalf("dead-letter reasons %v, want [missing_key] (under halt too)", reasons)
	}
}

// Two versions of one key survive a crash (apache/iceberg#17455): c{1,a} is committed;
// u{1,b} is written to a data file and the process dies (kill -9) before the commit; the
// restarted pipeline reads u{1,b} again and u{1,c} in one flush. Exactly one live row
// {1,c}; the killed flush's data file is not referenced; each offset is handled once.
func TestKeyedCrashBeforeCommitLeavesOneRow(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(false)
	h.send(keyedRec{id: 1, v: "a", op: "c"})
	inFlight, release := newLatch(), newLatch()
	t.Cleanup(release.open)
	var commits atomic.Int32
	a := h.startHooked("a", cfg, nil, func(hk *hooks) {
		hk.beforeCommit = func(int) error {
			if commits.Add(1) == 2 { // the flush of u{1,b}: its data file is written
				inFlight.open()
				release.wait()
				return &transientError{stage: "commit", err: errors.New("injected: the process died here")}
			}
			return nil
		}
	})
	h.waitHandled(1, 30*time.Second, a)
	h.send(keyedRec{id: 1, v: "b", op: "u"})
	waitFor(t, 30*time.Second, func() error {
		if !inFlight.isOpen() {
			return errors.New("the flush of u{1,b} has not reached its commit")
		}
		return nil
	})
	a.cancel(errAbandon) // kill -9 before the commit
	release.open()
	<-a.done
	a.done <- nil
	if got := h.rows(); !maps.Equal(got, map[int64]string{1: "a"}) {
		t.Fatalf("after the crash the table holds %v, want {1: a}", got)
	}
	killed := h.unreferenced() // the killed flush's data files
	if len(killed) == 0 {
		t.Fatal("the killed flush left no data file: the crash did not come after the write")
	}
	h.send(keyedRec{id: 1, v: "c", op: "u"})
	b := h.startWith("b", cfg, nil)
	h.waitHandled(3, 30*time.Second, b)
	b.stop(t)
	if got := h.rows(); !maps.Equal(got, map[int64]string{1: "c"}) {
		t.Fatalf("table rows %v, want {1: c}", got)
	}
	snap := h.snapshot()
	for _, add := range snap.Files.All() {
		if killed[add.Path] {
			t.Fatalf("the killed flush's data file %s is referenced by the table", add.Path)
		}
	}
	if v := snap.Txns["orders-orders-0"]; v != 2 {
		t.Fatalf("txn version %d, want 2 (offsets 0..2 handled once)", v)
	}
}

// deadLetters are the dead-letter topic's records as "reason:field" (their
// ingestd.error.reason and ingestd.error.field headers), in topic order.
func (h *keyedHarness) deadLetters() []string {
	var got []string
	for _, r := range h.readTopicAll(h.dlq) {
		var reason, field string
		for _, hd := range r.Headers {
			switch hd.Key {
			case "ingestd.error.reason":
				reason = string(hd.Value)
			case "ingestd.error.field":
				field = string(hd.Value)
			}
		}
		got = append(got, reason+":"+field)
	}
	return got
}

// unreferenced lists the Parquet files in the table directory that no live add names,
// by path relative to the table root.
func (h *keyedHarness) unreferenced() map[string]bool {
	h.t.Helper()
	out := h.dataFiles()
	for _, add := range h.snapshot().Files.All() {
		delete(out, add.Path)
	}
	return out
}

// dataFiles lists the Parquet files in the table directory, by path relative to its root.
func (h *keyedHarness) dataFiles() map[string]bool {
	h.t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(h.tableDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".parquet") && !strings.Contains(p, "_delta_log") {
			rel, _ := filepath.Rel(h.tableDir, p)
			out[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// A late insert does not resurrect a deleted row across a restart (apache/spark#55993,
// apache/hudi#4880): d{1,seq:5} while the table lacks key 1, the pipeline stopped; the
// restarted pipeline reads c{1,seq:3} (stale: the table remembers the delete's sequence
// 5) and then c{1,seq:6} (written).
//
// Under merge-on-read the table keeps the delete's sequence in a row marked deleted in a
// deletion vector; under copy-on-write, which keeps no deleted row, in a domainMetadata
// record of the commit's deletes (keyindex.DeletesDomainPrefix).
func TestKeyedDeleteRememberedAcrossRestart(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newKeyedHarness(t, 1)
		cfg := h.keyedConfig(true)
		cfg.Table.UpsertWrite = write
		steps := []struct {
			rec  keyedRec
			want map[int64]string
		}{
			{keyedRec{id: 2, v: "other", seq: 1, op: "c"}, map[int64]string{2: "other"}},
			{keyedRec{id: 1, seq: 5, op: "d"}, map[int64]string{2: "other"}},
			{keyedRec{id: 1, v: "late", seq: 3, op: "c"}, map[int64]string{2: "other"}},
			{keyedRec{id: 1, v: "new", seq: 6, op: "c"}, map[int64]string{1: "new", 2: "other"}},
		}
		for i, s := range steps {
			if got := h.runBatch(cfg, int64(i+1), s.rec); !maps.Equal(got, s.want) {
				t.Fatalf("after %+v on a restarted pipeline: table rows %v, want %v", s.rec, got, s.want)
			}
			if i == 1 { // after the delete: key 2 live, key 1's delete remembered
				keys := testutil.ToFloat64(h.metrics.KeyIndex.WithLabelValues("orders", "keys"))
				deletes := testutil.ToFloat64(h.metrics.KeyIndex.WithLabelValues("orders", "remembered_deletes"))
				if keys != 1 || deletes != 1 {
					t.Fatalf("ingestd_key_index keys %v remembered_deletes %v after the delete, want 1 and 1", keys, deletes)
				}
			}
		}
		if n := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "stale")); n != 1 {
			t.Fatalf("ingestd_keyed_changes_total{outcome=stale} = %v, want 1 (c{1,seq:3})", n)
		}
		snap := h.snapshot()
		domains := snap.Domains(keyindex.DeletesDomainPrefix)
		if write == config.MergeOnRead {
			if len(domains) != 0 || snap.SupportsFeature(deltalog.FeatureDomainMetadata) {
				t.Fatalf("merge-on-read table has deletes domains %v (domainMetadata feature %v), want none", domains, snap.SupportsFeature(deltalog.FeatureDomainMetadata))
			}
			return
		}
		if len(domains) != 1 || !strings.Contains(domains[0].Configuration, `"seqs":[5]`) {
			t.Fatalf("copy-on-write table's deletes domains %+v, want one holding the delete of key 1 at sequence 5", domains)
		}
		if snap.SupportsFeature(deltalog.FeatureDeletionVectors) {
			t.Fatalf("copy-on-write table has the deletionVectors feature: %+v", snap.Protocol)
		}
	})
}

// Remembered deletes past table.delete_horizon leave the table: each commit that records
// deletes removes the domains older than the horizon, and a pipeline started later no
// longer finds them (an older change is then written as new, as documented).
func TestKeyedCopyOnWriteDeletesDomainsExpire(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(true)
	cfg.Table.UpsertWrite = config.CopyOnWrite
	cfg.Table.DeleteHorizon = 2 * time.Second
	h.runBatch(cfg, 2, keyedRec{id: 1, v: "a", seq: 1, op: "c"}, keyedRec{id: 1, seq: 5, op: "d"})
	if d := h.snapshot().Domains(keyindex.DeletesDomainPrefix); len(d) != 1 {
		t.Fatalf("deletes domains %+v after the first delete, want 1", d)
	}
	time.Sleep(3 * time.Second) // past the horizon: domain names carry whole seconds
	got := h.runBatch(cfg, 4, keyedRec{id: 2, v: "b", seq: 1, op: "c"}, keyedRec{id: 2, seq: 9, op: "d"})
	if len(got) != 0 {
		t.Fatalf("table rows %v, want none", got)
	}
	d := h.snapshot().Domains(keyindex.DeletesDomainPrefix)
	if len(d) != 1 || !strings.Contains(d[0].Configuration, `"seqs":[9]`) {
		t.Fatalf("deletes domains %+v, want only the second commit's (key 2 at sequence 9): the first is past the horizon", d)
	}
	// Key 1's delete is forgotten: an older change comes back as new.
	if got := h.runBatch(cfg, 5, keyedRec{id: 1, v: "old", seq: 3, op: "c"}); !maps.Equal(got, map[int64]string{1: "old"}) {
		t.Fatalf("table rows %v, want 1:old (the delete at sequence 5 is past the horizon)", got)
	}
}

// A commit without deletes also drops the deletes domains past the horizon: a table whose
// deletes stop (a backfill of deletes, then only upserts) does not keep them, and carry
// them in every checkpoint, for ever.
func TestKeyedCopyOnWriteDeletesDomainsExpireWithoutDeletes(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(true)
	cfg.Table.UpsertWrite = config.CopyOnWrite
	cfg.Table.DeleteHorizon = 2 * time.Second
	h.runBatch(cfg, 2, keyedRec{id: 1, v: "a", seq: 1, op: "c"}, keyedRec{id: 1, seq: 5, op: "d"})
	if d := h.snapshot().Domains(keyindex.DeletesDomainPrefix); len(d) != 1 {
		t.Fatalf("deletes domains %+v after the delete, want 1", d)
	}
	time.Sleep(3 * time.Second) // past the horizon: domain names carry whole seconds
	if got := h.runBatch(cfg, 3, keyedRec{id: 2, v: "b", seq: 1, op: "c"}); !maps.Equal(got, map[int64]string{2: "b"}) {
		t.Fatalf("table rows %v, want 2:b", got)
	}
	if d := h.snapshot().Domains(keyindex.DeletesDomainPrefix); len(d) != 0 {
		t.Fatalf("deletes domains %+v after a commit past the horizon, want none", d)
	}
}

// The commit that creates the table remembers its deletes like any other, though the
// pipeline has no key index before the table exists: a running pipeline's first flush
// (creating the table) writes c{2} and deletes key 1 (c{1,seq:10} then a tombstone); the
// next flush of the same process reads c{1,seq:5}, older than the delete, which is
// stale. Under both upsert writes (copy-on-write records the creating commit's deletes in
// a deletes domain).
func TestKeyedCreatingCommitRemembersItsDeletes(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newKeyedHarness(t, 1)
		cfg := h.keyedConfig(true)
		cfg.Table.UpsertWrite = write
		h.send(keyedRec{id: 1, v: "a", seq: 10, op: "c"}, keyedRec{id: 1, tomb: true}, keyedRec{id: 2, v: "b", seq: 1, op: "c"})
		m := h.startWith("keyed", cfg, nil)
		h.waitHandled(3, 30*time.Second, m)
		if v := h.snapshot().Version; v != 0 {
			t.Fatalf("table at version %d after the first flush, want 0 (the creating commit)", v)
		}
		h.send(keyedRec{id: 1, v: "late", seq: 5, op: "u"})
		h.waitHandled(4, 30*time.Second, m)
		m.stop(t)
		if got, want := h.rows(), map[int64]string{2: "b"}; !maps.Equal(got, want) {
			t.Fatalf("table rows %v, want %v (c{1,seq:5} is older than the delete)", got, want)
		}
		if n := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "stale")); n != 1 {
			t.Fatalf("ingestd_keyed_changes_total{outcome=stale} = %v, want 1", n)
		}
	})
}

// A key whose partition value changes moves: its row in the old partition is deleted and
// the new one written in the new partition; a tombstone finds its row in any partition.
func TestKeyedPartitionedKeyMoves(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(false)
	cfg.Table.PartitionBy = []string{"op"}
	if got := h.runBatch(cfg, 2, keyedRec{id: 1, v: "a", op: "x"}, keyedRec{id: 2, v: "b", op: "x"}); !maps.Equal(got, map[int64]string{1: "a", 2: "b"}) {
		t.Fatalf("first batch: %v", got)
	}
	if got := h.runBatch(cfg, 4, keyedRec{id: 1, v: "a2", op: "y"}, keyedRec{id: 2, tomb: true}); !maps.Equal(got, map[int64]string{1: "a2"}) {
		t.Fatalf("after the move and the tombstone: table rows %v, want {1: a2}", got)
	}
	live := map[string]int64{}
	snap := h.snapshot()
	for _, add := range snap.Files.All() {
		n, _ := add.NumRecords()
		if add.DeletionVector != nil {
			n -= add.DeletionVector.Cardinality
		}
		live[*add.PartitionValues["op"]] += n
	}
	if want := map[string]int64{"y": 1}; !maps.Equal(live, want) {
		t.Fatalf("live rows by partition %v, want %v", live, want)
	}
}

// A tombstone names its key in a Confluent-framed Avro key (table.key_format avro): a
// record key by its fields, matched to the key columns by name; a key whose schema lacks
// a key column is dead-lettered missing_key naming the column.
func TestKeyedTombstoneWithAvroKey(t *testing.T) {
	h := newKeyedHarness(t, 1)
	keyID, _, err := h.reg.RegisterSchema("orders-key", sr.Schema{Schema: `{"type":"record","name":"K","fields":[{"name":"ID","type":"long"}]}`, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	otherID, _, err := h.reg.RegisterSchema("other-key", sr.Schema{Schema: `{"type":"record","name":"O","fields":[{"name":"name","type":"string"}]}`, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	avroKey := func(id int, schema string, v map[string]any) []byte {
		body, err := avro.Marshal(avro.MustParse(schema), v)
		if err != nil {
			t.Fatal(err)
		}
		var hdr sr.ConfluentHeader
		framed, err := hdr.AppendEncode(nil, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		return append(framed, body...)
	}
	cfg := h.keyedConfig(false)
	cfg.Table.KeyFormat = "avro"
	h.send(keyedRec{id: 1, v: "a", op: "c"}, keyedRec{id: 2, v: "b", op: "c"})
	recs := []*kgo.Record{
		{Topic: h.topic, Key: avroKey(keyID, `{"type":"record","name":"K","fields":[{"name":"ID","type":"long"}]}`, map[string]any{"ID": int64(1)})},
		{Topic: h.topic, Key: avroKey(otherID, `{"type":"record","name":"O","fields":[{"name":"name","type":"string"}]}`, map[string]any{"name": "x"})},
	}
	if err := h.producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := h.startWith("keyed", cfg, nil)
	h.waitHandled(4, 30*time.Second, m)
	m.stop(t)
	if got := h.rows(); !maps.Equal(got, map[int64]string{2: "b"}) {
		t.Fatalf("table rows %v, want {2: b}", got)
	}
	if got := h.deadLetters(); !slices.Equal(got, []string{"missing_key:id"}) {
		t.Fatalf("dead letters %v, want [missing_key:id] (the key schema lacks id)", got)
	}
}

// Without table.key, an upsert pipeline with key_format avro keys the table by the fields
// of the Kafka key's Avro record (subject <topic>-key); a topic whose key schema is not a
// record fails at start-up naming the fix.
func TestKeyedKeyDefaultsToTheAvroKeyFields(t *testing.T) {
	h := newKeyedHarness(t, 1)
	if _, _, err := h.reg.RegisterSchema("orders-key", sr.Schema{Schema: `{"type":"record","name":"K","fields":[{"name":"id","type":"long"}]}`, Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	cfg := h.keyedConfig(false)
	cfg.Table.Key, cfg.Table.KeyFormat = nil, "avro"
	got := h.runBatch(cfg, 3, keyedRec{id: 1, v: "a", op: "c"}, keyedRec{id: 1, v: "b", op: "u"}, keyedRec{id: 2, v: "c", op: "c"})
	if want := map[int64]string{1: "b", 2: "c"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v (keyed by id)", got, want)
	}
	if !slices.Equal(cfg.Table.Key, []string{"id"}) {
		t.Fatalf("table.key became %v, want [id]", cfg.Table.Key)
	}

	h2 := newKeyedHarness(t, 1)
	if _, _, err := h2.reg.RegisterSchema("orders-key", sr.Schema{Schema: `"string"`, Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	cfg2 := h2.keyedConfig(false)
	cfg2.Table.Key, cfg2.Table.KeyFormat = nil, "avro"
	m := h2.startWith("keyed", cfg2, nil)
	select {
	case err := <-m.done:
		m.done <- nil
		if err == nil || !strings.Contains(err.Error(), "is not an Avro record whose fields could name the key columns: set table.key") {
			t.Fatalf("start-up error %v, want the refusal naming table.key", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pipeline did not fail at start-up")
	}
}

// Copy-on-write (table.upsert_write): replaced and deleted rows leave by rewriting their
// files, so the table has no deletion vector and no deletionVectors feature, and holds
// exactly the latest row per key.
func TestKeyedCopyOnWrite(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(true)
	cfg.Table.UpsertWrite = config.CopyOnWrite
	steps := []struct {
		recs []keyedRec
		want map[int64]string
	}{
		{[]keyedRec{{id: 1, v: "a", seq: 1, op: "c"}, {id: 2, v: "b", seq: 1, op: "c"}, {id: 3, v: "c", seq: 1, op: "c"}}, map[int64]string{1: "a", 2: "b", 3: "c"}},
		{[]keyedRec{{id: 1, v: "a2", seq: 2, op: "u"}, {id: 2, seq: 2, op: "d"}, {id: 3, v: "old", seq: 0, op: "u"}}, map[int64]string{1: "a2", 3: "c"}},
		{[]keyedRec{{id: 3, tomb: true}, {id: 4, v: "d", seq: 1, op: "c"}}, map[int64]string{1: "a2", 4: "d"}},
	}
	n := int64(0)
	for i, s := range steps {
		n += int64(len(s.recs))
		if got := h.runBatch(cfg, n, s.recs...); !maps.Equal(got, s.want) {
			t.Fatalf("after batch %d: table rows %v, want %v", i+1, got, s.want)
		}
	}
	snap := h.snapshot()
	if slices.Contains(snap.Protocol.ReaderFeatures, "deletionVectors") || snap.Metadata.Configuration["delta.enableDeletionVectors"] == "true" {
		t.Fatalf("protocol %+v, configuration %v: a copy-on-write table needs no deletion vectors", snap.Protocol, snap.Metadata.Configuration)
	}
	var rows int64
	for _, add := range snap.Files.All() {
		if add.DeletionVector != nil {
			t.Fatalf("file %s has a deletion vector", add.Path)
		}
		r, _ := add.NumRecords()
		rows += r
	}
	if rows != 2 {
		t.Fatalf("the files hold %d rows, want 2: copy-on-write leaves no replaced row behind", rows)
	}
}

// A delete newer than the row it deletes is remembered at its own sequence across a
// restart: c{1,seq:7} beside c{2}, then d{1,seq:9} (the stored row carries 7 and stays in
// its file, which still holds 2), then on a restarted pipeline c{1,seq:8} is stale.
func TestKeyedDeleteNewerThanItsRowRememberedAcrossRestart(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newKeyedHarness(t, 1)
		cfg := h.keyedConfig(true)
		cfg.Table.UpsertWrite = write
		steps := []struct {
			recs []keyedRec
			want map[int64]string
		}{
			{[]keyedRec{{id: 1, v: "a", seq: 7, op: "c"}, {id: 2, v: "b", seq: 1, op: "c"}}, map[int64]string{1: "a", 2: "b"}},
			{[]keyedRec{{id: 1, seq: 9, op: "d"}}, map[int64]string{2: "b"}},
			{[]keyedRec{{id: 1, v: "late", seq: 8, op: "c"}}, map[int64]string{2: "b"}},
			{[]keyedRec{{id: 1, v: "new", seq: 9, op: "u"}}, map[int64]string{1: "new", 2: "b"}},
		}
		n := int64(0)
		for _, s := range steps {
			n += int64(len(s.recs))
			if got := h.runBatch(cfg, n, s.recs...); !maps.Equal(got, s.want) {
				t.Fatalf("after %+v on a restarted pipeline: table rows %v, want %v", s.recs, got, s.want)
			}
		}
	})
}

// A tombstone that deletes the only row of a data file is remembered across a restart
// (merge-on-read: the file stays, every row marked deleted, and its row carries the
// delete's sequence; copy-on-write: a deletes domain), so c{1,seq:6} after the restart is
// stale and c{1,seq:7} (equal: the later record) wins.
func TestKeyedTombstoneOfAFilesOnlyRowRememberedAcrossRestart(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newKeyedHarness(t, 1)
		cfg := h.keyedConfig(true)
		cfg.Table.UpsertWrite = write
		steps := []struct {
			rec  keyedRec
			want map[int64]string
		}{
			{keyedRec{id: 1, v: "a", seq: 7, op: "c"}, map[int64]string{1: "a"}},
			{keyedRec{id: 1, tomb: true}, map[int64]string{}},
			{keyedRec{id: 1, v: "late", seq: 6, op: "c"}, map[int64]string{}},
			{keyedRec{id: 1, v: "new", seq: 7, op: "c"}, map[int64]string{1: "new"}},
		}
		for i, s := range steps {
			if got := h.runBatch(cfg, int64(i+1), s.rec); !maps.Equal(got, s.want) {
				t.Fatalf("after %+v on a restarted pipeline: table rows %v, want %v", s.rec, got, s.want)
			}
		}
	})
}

// A delete of a key the table holds is remembered across a restart with the delete's
// sequence, not the replaced row's: c{1,seq:10} is written, d{1,seq:50} deletes it, and
// the restarted pipeline drops c{1,seq:40} as stale (the delete's own row is kept in the
// flush's file, marked deleted, beside the replaced row's mark) and writes c{1,seq:60}.
func TestKeyedDeleteOfAStoredRowRememberedAcrossRestart(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newKeyedHarness(t, 1)
		cfg := h.keyedConfig(true)
		cfg.Table.UpsertWrite = write
		steps := []struct {
			rec  keyedRec
			want map[int64]string
		}{
			{keyedRec{id: 1, v: "first", seq: 10, op: "c"}, map[int64]string{1: "first"}},
			{keyedRec{id: 1, seq: 50, op: "d"}, map[int64]string{}},
			{keyedRec{id: 1, v: "late", seq: 40, op: "u"}, map[int64]string{}},
			{keyedRec{id: 1, v: "new", seq: 60, op: "u"}, map[int64]string{1: "new"}},
		}
		for i, s := range steps {
			if got := h.runBatch(cfg, int64(i+1), s.rec); !maps.Equal(got, s.want) {
				t.Fatalf("after %+v on a restarted pipeline: table rows %v, want %v", s.rec, got, s.want)
			}
		}
		if n := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "stale")); n != 1 {
			t.Fatalf("ingestd_keyed_changes_total{outcome=stale} = %v, want 1 (c{1,seq:40})", n)
		}
	})
}

// A tombstone whose string key is not a value of the (one) key column is dead-lettered
// missing_key naming that column, as keyed-tables.md says of every unreadable key.
func TestKeyedTombstoneStringKeyNotAnInteger(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(false)
	h.send(keyedRec{id: 1, v: "a", op: "c"})
	if err := h.producer.ProduceSync(context.Background(), &kgo.Record{Topic: h.topic, Partition: 0, Key: []byte("x1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := h.startWith("keyed", cfg, nil)
	h.waitHandled(2, 30*time.Second, m)
	m.stop(t)
	if got := h.rows(); !maps.Equal(got, map[int64]string{1: "a"}) {
		t.Fatalf("table rows %v, want {1: a}", got)
	}
	if got := h.deadLetters(); !slices.Equal(got, []string{"missing_key:id"}) {
		t.Fatalf("dead letters %v, want [missing_key:id]", got)
	}
}

// A tombstone after a halted record of its partition waits for the partition to resume:
// c{2} is written, the v2 record halts partition 0 (schema.policy halt, a new field), and
// the tombstone of key 1 behind it is not applied in that flush, so key 1 stays live. A
// later delete must not become visible before the records it follows.
func TestKeyedTombstoneAfterHaltWaitsForThePartition(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(false)
	cfg.Schema.Policy = config.PolicyHalt
	if got := h.runBatch(cfg, 1, keyedRec{id: 1, v: "a", op: "c"}); !maps.Equal(got, map[int64]string{1: "a"}) {
		t.Fatalf("first batch: table rows %v, want 1:a", got)
	}
	const v2 = `{"type":"record","name":"Row","namespace":"shop","fields":[
  {"name":"id","type":"long"},
  {"name":"v","type":["null","string"],"default":null},
  {"name":"seq","type":"long"},
  {"name":"op","type":"string"},
  {"name":"extra","type":["null","string"],"default":null}]}`
	id2, _, err := h.reg.RegisterSchema("rows-value", sr.Schema{Schema: v2, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	body, err := avro.Marshal(avro.MustParse(v2), map[string]any{"id": int64(3), "seq": int64(0), "op": "c", "v": nil, "extra": "new"})
	if err != nil {
		t.Fatal(err)
	}
	var hdr sr.ConfluentHeader
	framed, err := hdr.AppendEncode(nil, id2, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.send(keyedRec{id: 2, v: "b", op: "c"})
	if err := h.producer.ProduceSync(context.Background(), &kgo.Record{Topic: h.topic, Partition: 0, Key: []byte("3"), Value: append(framed, body...)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	h.send(keyedRec{id: 1, tomb: true})
	m := h.startWith("keyed", cfg, nil)
	waitFor(t, 30*time.Second, func() error {
		if st := m.p.Status(); st.State != StateHalted || len(st.Halted) != 1 || st.Halted[0].Offset != 2 {
			return fmt.Errorf("status %+v, want halted at offset 2", st)
		}
		return nil
	})
	m.stop(t)
	if got, want := h.rows(), map[int64]string{1: "a", 2: "b"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v: the tombstone at offset 3 is behind the halt at offset 2", got, want)
	}
}

// The same for a cut: in a table partitioned by seq with batch.max_open_partitions 1,
// c{2,b} would open a second partition value and is left for the next flush, with everything after it in its
// partition — the tombstone of key 1 included. Between the two commits the table holds
// 1:a; at the end 2:b.
func TestKeyedTombstoneAfterCutWaitsForTheNextFlush(t *testing.T) {
	h := newKeyedHarness(t, 1)
	cfg := h.keyedConfig(false)
	cfg.Table.PartitionBy = []string{"seq"}
	cfg.Batch.MaxOpenPartitions = 1
	h.send(keyedRec{id: 1, v: "a", seq: 1, op: "c"}, keyedRec{id: 2, v: "b", seq: 2, op: "c"}, keyedRec{id: 1, tomb: true})
	between, release := newLatch(), newLatch()
	var commits atomic.Int32
	m := h.startHooked("keyed", cfg, nil, func(hk *hooks) {
		hk.beforeCommit = func(int) error {
			if commits.Add(1) == 2 {
				between.open()
				release.wait()
			}
			return nil
		}
	})
	t.Cleanup(release.open) // before the member's own cleanup, which waits for the held commit
	waitFor(t, 30*time.Second, func() error {
		if !between.isOpen() {
			return errors.New("the second flush has not reached its commit")
		}
		return nil
	})
	if got, want := h.rows(), map[int64]string{1: "a"}; !maps.Equal(got, want) {
		t.Fatalf("after the cut flush the table holds %v, want %v: the tombstone at offset 2 is behind the cut at offset 1", got, want)
	}
	release.open()
	h.waitHandled(3, 30*time.Second, m)
	m.stop(t)
	if got, want := h.rows(), map[int64]string{2: "b"}; !maps.Equal(got, want) {
		t.Fatalf("table rows %v, want %v", got, want)
	}
}

// eachUpsertWrite runs f as a subtest under each upsert write mode (merge_on_read,
// copy_on_write), named after it.
func eachUpsertWrite(t *testing.T, f func(t *testing.T, write string)) {
	for _, write := range []string{config.MergeOnRead, config.CopyOnWrite} {
		t.Run(write, func(t *testing.T) { f(t, write) })
	}
}
