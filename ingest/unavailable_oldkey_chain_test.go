package ingest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
)

// Primary-key changes chained, undone and swapped, updates after them, soft deletes,
// composite keys and late creates. Each test below stores the rows first (one flush),
// then sends what PostgreSQL's statements produce through Debezium in one later flush;
// the expected values are what PostgreSQL holds afterwards.

// storeBigs stores c{id, big} for each id in one flush and returns the values by id.
func (h *toastHarness) storeBigs(cfg *config.Config, ids ...int32) map[int32]string {
	h.t.Helper()
	out := map[int32]string{}
	var docs []doc
	for _, id := range ids {
		b := bigText(fmt.Sprintf("stored-%d", id), 9<<10)
		out[id] = b
		docs = append(docs, doc{op: "c", id: id, small: 1, big: &b, lsn: int64(id)})
	}
	h.send(docs...)
	h.run(cfg, int64(len(ids)))
	return out
}

func eachSeq(t *testing.T, f func(t *testing.T, seq string)) {
	for _, seq := range []string{"", config.SequenceLSN} {
		t.Run("sequence_by="+seq, func(t *testing.T) { f(t, seq) })
	}
}

// Primary-key changes in one flush after the rows were stored, under both orders
// (position, and sequence_by source.lsn); want is what PostgreSQL holds (id → big, the
// stored rows' values by id).
func TestOldKeyChains(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stored []int32
		docs   []doc
		want   func(b map[int32]string) map[string]string
	}{{
		// UPDATE docs SET id = 100 WHERE id = 1; UPDATE docs SET id = 200 WHERE id = 100.
		name: "chained", stored: []int32{1},
		docs: append(pkChange(1, 100, 20, 1, simpleHeaderKey(1)), pkChange(100, 200, 30, 1, simpleHeaderKey(100))...),
		want: func(b map[int32]string) map[string]string { return map[string]string{"200": b[1]} },
	}, {
		// UPDATE docs SET id = 100 WHERE id = 1; UPDATE docs SET small = 3 WHERE id = 100
		// (big unchanged, so the update carries the placeholder).
		name: "update of the new key", stored: []int32{1},
		docs: append(pkChange(1, 100, 20, 1, simpleHeaderKey(1)), doc{op: "u", id: 100, small: 3, big: ptr(placeholder), lsn: 30}),
		want: func(b map[int32]string) map[string]string { return map[string]string{"100": b[1]} },
	}, {
		// UPDATE docs SET id = 100 WHERE id = 1; UPDATE docs SET id = 1 WHERE id = 100.
		name: "changed back", stored: []int32{1},
		docs: append(pkChange(1, 100, 20, 1, simpleHeaderKey(1)), pkChange(100, 1, 30, 1, simpleHeaderKey(100))...),
		want: func(b map[int32]string) map[string]string { return map[string]string{"1": b[1]} },
	}, {
		// A shift visited in descending order (3→4, 2→3, 1→2): each new key's own row was
		// deleted just before.
		name: "shift descending", stored: []int32{1, 2, 3},
		docs: slices.Concat(pkChange(3, 4, 20, 1, simpleHeaderKey(3)), pkChange(2, 3, 21, 1, simpleHeaderKey(2)), pkChange(1, 2, 22, 1, simpleHeaderKey(1))),
		want: func(b map[int32]string) map[string]string { return map[string]string{"2": b[1], "3": b[2], "4": b[3]} },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			eachSeq(t, func(t *testing.T, seq string) {
				h := newToastHarness(t)
				cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.SequenceBy = seq })
				b := h.storeBigs(cfg, tc.stored...)
				h.send(tc.docs...)
				h.run(cfg, int64(len(tc.stored)+len(tc.docs)))
				h.wantBigs(tc.want(b))
			})
		})
	}
}

// Swap through a temporary key, in one transaction (one flush):
// UPDATE docs SET id = 0 WHERE id = 1; UPDATE docs SET id = 1 WHERE id = 2;
// UPDATE docs SET id = 2 WHERE id = 0. PostgreSQL: {1, big2}, {2, big1}.
func TestOldKeySwapViaTemp(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newToastHarness(t)
		cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.UpsertWrite = write })
		b := h.storeBigs(cfg, 1, 2)
		h.send(slices.Concat(pkChange(1, 0, 20, 1, simpleHeaderKey(1)), pkChange(2, 1, 21, 1, simpleHeaderKey(2)), pkChange(0, 2, 22, 1, simpleHeaderKey(0)))...)
		h.run(cfg, 2+9)
		h.wantBigs(map[string]string{"1": b[2], "2": b[1]})
	})
}

// sequence_by source.lsn, the primary-key change's create arriving late (another Kafka
// partition than the old key's changes): UPDATE docs SET id = 100 WHERE id = 1 (LSN 20),
// then INSERT INTO docs VALUES (1, …, 'new') (LSN 30). The old key's delete and the new
// insert land in one flush, the create of 100 in the next. PostgreSQL: {1, new},
// {100, big1}; the stored row of key 1 (LSN 30) is newer than the create (LSN 20) and
// is not the old row: its value must not be taken (NULL would be the fallback).
func TestOldKeyStoredRowNewerThanCreate(t *testing.T) {
	h := newToastHarness(t)
	cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.SequenceBy = config.SequenceLSN })
	h.storeBigs(cfg, 1)
	h.send(doc{op: "d", id: 1, lsn: 20}, doc{id: 1, tomb: true}, doc{op: "c", id: 1, small: 5, big: ptr("new"), lsn: 30})
	h.run(cfg, 1+3)
	h.send(doc{op: "c", id: 100, small: 1, big: ptr(placeholder), lsn: 20, oldKey: simpleHeaderKey(1)})
	h.run(cfg, 1+3+1)
	// The old row of key 1 is no longer what the key index names: NULL, counted, never
	// the later row's value.
	h.wantBigs(map[string]string{"1": "new", "100": "<nil>"})
	h.wantOutcomes(map[string]float64{unavailableNull: 1})
}

// Soft deletes: DELETE FROM docs WHERE id = 100 (an earlier flush: its row is kept,
// flagged deleted), then UPDATE docs SET id = 100 WHERE id = 1. PostgreSQL: {100, big1}.
func TestOldKeyNewKeySoftDeletedEarlier(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newToastHarness(t)
		cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.UpsertWrite, tb.Deletes = write, config.DeletesSoft })
		b := h.storeBigs(cfg, 1, 100)
		h.send(doc{op: "d", id: 100, lsn: 15}, doc{id: 100, tomb: true})
		h.run(cfg, 2+2)
		h.send(pkChange(1, 100, 20, 1, simpleHeaderKey(1))...)
		h.run(cfg, 2+2+3)
		want := []string{"1 <nil> <nil> <nil> <nil>  deleted=true", fmt.Sprintf("100 1 9216:%.8s <nil> <nil> n deleted=false", b[1])}
		if got := h.rows(); !slices.Equal(got, want) {
			t.Fatalf("rows\n%v\nwant\n%v", got, want)
		}
	})
}

// Soft deletes, the old key's stored row in the table: UPDATE docs SET id = 100 WHERE
// id = 1. PostgreSQL: {100, big1}.
func TestOldKeySoftDeletes(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newToastHarness(t)
		cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.UpsertWrite, tb.Deletes = write, config.DeletesSoft })
		b := h.storeBigs(cfg, 1)
		h.send(pkChange(1, 100, 20, 1, simpleHeaderKey(1))...)
		h.run(cfg, 1+3)
		want := []string{"1 <nil> <nil> <nil> <nil>  deleted=true", fmt.Sprintf("100 1 9216:%.8s <nil> <nil> n deleted=false", b[1])}
		if got := h.rows(); !slices.Equal(got, want) {
			t.Fatalf("rows\n%v\nwant\n%v", got, want)
		}
	})
}

// Header forms: a key column named differently in case ({"ID":1}); the header on an
// update whose own key has its value (ignored: no cross-key leak).
func TestOldKeyHeaderForms(t *testing.T) {
	h := newToastHarness(t)
	cfg := h.toastConfig(config.ModeUpsert, nil)
	b := h.storeBigs(cfg, 1, 2)
	h.send(append(pkChange(1, 100, 20, 1, []byte(`{"ID":1}`)),
		doc{op: "u", id: 2, small: 2, big: ptr(placeholder), lsn: 21, oldKey: simpleHeaderKey(100)})...)
	h.run(cfg, 2+4)
	h.wantBigs(map[string]string{"100": b[1], "2": b[2]})
}

// Composite key (id, note) under key_format json, the header's fields in the other
// order: UPDATE docs SET id = 100 WHERE id = 1 AND note = 'k'. PostgreSQL: {100,'k', big1};
// the row (1,'j') is untouched.
func TestOldKeyCompositeHeader(t *testing.T) {
	h := newToastHarness(t)
	cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.Key, tb.KeyFormat = []string{"id", "note"}, "json" })
	note := map[int32]string{}
	h.key = func(id int32) []byte { return fmt.Appendf(nil, `{"id":%d,"note":%q}`, id, note[id]) }
	b1, bj := bigText("k", 9<<10), bigText("j", 9<<10)
	note[1] = "k"
	h.send(doc{op: "c", id: 1, small: 1, big: &b1, note: "k", lsn: 1})
	note[1] = "j"
	h.send(doc{op: "c", id: 1, small: 1, big: &bj, note: "j", lsn: 2})
	h.run(cfg, 2)
	note[1], note[100] = "k", "k"
	h.send(doc{op: "d", id: 1, note: "k", lsn: 20}, doc{id: 1, tomb: true},
		doc{op: "c", id: 100, small: 1, big: ptr(placeholder), note: "k", lsn: 20, oldKey: []byte(`{"note":"k","id":1}`)})
	h.run(cfg, 2+3)
	var got []string
	if err := h.liveRows(func(_ deltalog.Add, r map[string]any) error {
		s, _ := r["big"].(string)
		got = append(got, fmt.Sprintf("%v %v %s", r["id"], r["note"], trim(s)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{"1 j " + trim(bj), "100 k " + trim(b1)}
	if !slices.Equal(got, want) {
		t.Fatalf("rows\n%q\nwant\n%q", got, want)
	}
}

// Two partitions, as Debezium routes a primary-key change: key 1's changes to one
// partition, key 100's create to another. One flush holds UPDATE docs SET big = 'v2'
// WHERE id = 1 (LSN 15) and UPDATE docs SET id = 100 WHERE id = 1 (LSN 20), the create
// of 100 in partition 0 (read first), key 1's changes in partition 1. PostgreSQL:
// {100, 'v2'}.
func TestOldKeyAcrossPartitions(t *testing.T) {
	eachSeq(t, func(t *testing.T, seq string) {
		h := newToastHarness(t)
		h.harness = newHarness(t, 2)
		id, _, err := h.reg.RegisterSchema("pg.public.docs-value", sr.Schema{Schema: testToastEnvelope, Type: sr.TypeAvro})
		if err != nil {
			t.Fatal(err)
		}
		h.envID = id
		cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.SequenceBy = seq })
		b := bigText("p", 9<<10)
		const P100 = 0
		send := func(p int32, docs ...doc) {
			var out []*kgo.Record
			for _, d := range docs {
				r := h.record(d)
				r.Partition = p
				out = append(out, r)
			}
			if err := h.producer.ProduceSync(context.Background(), out...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		send(1-P100, doc{op: "c", id: 1, small: 1, big: &b, lsn: 10})
		h.run(cfg, 1)
		send(P100, doc{op: "c", id: 100, small: 2, big: ptr(placeholder), lsn: 20, oldKey: simpleHeaderKey(1)})
		send(1-P100, doc{op: "u", id: 1, small: 2, big: ptr("v2"), lsn: 15}, doc{op: "d", id: 1, lsn: 20}, doc{id: 1, tomb: true})
		// One flush of the four records, whichever partition is fetched first: a create
		// flushed before the old key's update would take the stored value (ordering
		// across partitions is only what one flush sees).
		cfg.Batch.MaxRecords, cfg.Batch.MaxAge = 4, time.Minute
		h.run(cfg, 1+4)
		h.wantBigs(map[string]string{"100": "v2"})
	})
}

// A changelog, one flush: INSERT (1, big1); UPDATE … SET id = 100 WHERE id = 1;
// UPDATE … SET id = 200 WHERE id = 100. Every change is a row; PostgreSQL's row after
// each is (1, big1), (100, big1), (200, big1), so the creates of 100 and 200 hold big1.
func TestOldKeyChangelogChained(t *testing.T) {
	h := newToastHarness(t)
	cfg := h.toastConfig(config.ModeChangelog, nil)
	b := bigText("cl", 9<<10)
	h.send(append(append([]doc{{op: "c", id: 1, small: 1, big: &b, lsn: 10}}, pkChange(1, 100, 20, 1, simpleHeaderKey(1))...),
		pkChange(100, 200, 30, 1, simpleHeaderKey(100))...)...)
	h.run(cfg, 7)
	got := h.idBigs()
	want := []string{"1 " + trim(b), "1 ", "100 " + trim(b), "100 ", "200 " + trim(b)}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("changelog rows (id big)\n%q\nwant\n%q", got, want)
	}
}
