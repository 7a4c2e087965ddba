package ingest

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ingestd/ingestd/ingest/config"
)

// Incremental snapshots (Debezium's execute-snapshot signal, type incremental) emit
// snapshot reads (op r) whose source.lsn is null: each is ordered by its position, taking
// the greatest sequence of its key seen before it (docs/keyed-tables.md, Change data
// capture).

// In one flush a snapshot read wins over the earlier changes of its key, a later
// streamed change wins over it, and a later change with an LSN below the one it took
// loses; a key nothing is known of keeps a NULL sequence. Nothing is dead-lettered.
func TestEnvelopeDebeziumIncrementalSnapshotReadInOneFlush(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newDbzHarness(t)
		cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
		cfg.Table.UpsertWrite = write
		h.send(h.envelope,
			dbz{op: "u", id: 1, name: "new", lsn: 200}, dbz{op: "r", id: 1, name: "snap", nolsn: true},
			dbz{op: "r", id: 2, name: "snap", nolsn: true}, dbz{op: "u", id: 2, name: "new", lsn: 300},
			dbz{op: "r", id: 3, name: "snap", nolsn: true},
			dbz{op: "u", id: 4, name: "new", lsn: 200}, dbz{op: "r", id: 4, name: "snap", nolsn: true}, dbz{op: "u", id: 4, name: "older", lsn: 150})
		h.run(cfg, 8)
		want := []string{"1 snap 200", "2 new 300", "3 snap <nil>", "4 snap 200"}
		if got := h.rowsOf("id", "name", "_source_lsn"); !slices.Equal(got, want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
		if got := h.deadLetters(); len(got) != 0 {
			t.Fatalf("dead letters %v, want none", got)
		}
		if got := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "superseded")); got != 4 {
			t.Fatalf("superseded changes %v, want 4 (1: new; 2: snap; 4: new, older)", got)
		}
	})
}

// Across flushes of one run and across restarts: the snapshot read's row holds the
// sequence it took (the stored row's), a later streamed change with a lower LSN is stale
// (in the running pipeline, and after a restart, whose key index reads the row's
// _source_lsn), and one with a greater LSN wins.
func TestEnvelopeDebeziumIncrementalSnapshotReadAcrossFlushesAndRestarts(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newDbzHarness(t)
		cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
		cfg.Table.UpsertWrite = write
		h.send(h.envelope, dbz{op: "c", id: 1, name: "ann", lsn: 100}, dbz{op: "u", id: 1, name: "new", lsn: 200},
			dbz{op: "c", id: 2, name: "bob", lsn: 210})
		h.run(cfg, 3)

		// One run, two flushes: the read, then a late update of its key.
		m := h.startWith("dbz", cfg, nil)
		h.send(h.envelope, dbz{op: "r", id: 1, name: "snap", nolsn: true})
		h.waitHandled(4, 30*time.Second, m)
		if got, want := h.rowsOf("id", "name", "_source_lsn"), []string{"1 snap 200", "2 bob 210"}; !slices.Equal(got, want) {
			t.Fatalf("rows after the snapshot read %v, want %v", got, want)
		}
		h.send(h.envelope, dbz{op: "u", id: 1, name: "late", lsn: 150})
		h.waitHandled(5, 30*time.Second, m)
		m.stop(t)
		if got, want := h.rowsOf("id", "name", "_source_lsn"), []string{"1 snap 200", "2 bob 210"}; !slices.Equal(got, want) {
			t.Fatalf("rows after a late update in the same run %v, want %v", got, want)
		}

		// A restart: the index reads 200 from the snapshot read's row.
		h.send(h.envelope, dbz{op: "u", id: 1, name: "late", lsn: 199}, dbz{op: "r", id: 2, name: "snap", nolsn: true})
		h.run(cfg, 7)
		if got, want := h.rowsOf("id", "name", "_source_lsn"), []string{"1 snap 200", "2 snap 210"}; !slices.Equal(got, want) {
			t.Fatalf("rows after a late update past a restart %v, want %v", got, want)
		}
		if got := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "stale")); got != 2 {
			t.Fatalf("stale changes %v, want 2 (the updates at LSN 150 and 199)", got)
		}
		h.send(h.envelope, dbz{op: "u", id: 1, name: "newer", lsn: 201}, dbz{op: "u", id: 2, name: "late", lsn: 209})
		h.run(cfg, 9)
		if got, want := h.rowsOf("id", "name", "_source_lsn"), []string{"1 newer 201", "2 snap 210"}; !slices.Equal(got, want) {
			t.Fatalf("rows after newer and older updates %v, want %v", got, want)
		}
	})
}

// A key whose stored row has a NULL sequence (a read of a key nothing was known of, or a
// row written before the sequence column was added) is older than any sequence after a
// restart: a second read replaces it, and any streamed change wins over it.
func TestEnvelopeDebeziumIncrementalSnapshotReadOverANullSequence(t *testing.T) {
	h := newDbzHarness(t)
	cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
	h.send(h.envelope, dbz{op: "r", id: 1, name: "snap", nolsn: true})
	h.run(cfg, 1)
	h.send(h.envelope, dbz{op: "r", id: 1, name: "snap2", nolsn: true})
	h.run(cfg, 2)
	if got, want := h.rowsOf("id", "name", "_source_lsn"), []string{"1 snap2 <nil>"}; !slices.Equal(got, want) {
		t.Fatalf("rows after a second read %v, want %v", got, want)
	}
	h.send(h.envelope, dbz{op: "u", id: 1, name: "new", lsn: 5})
	h.run(cfg, 3)
	if got, want := h.rowsOf("id", "name", "_source_lsn"), []string{"1 new 5"}; !slices.Equal(got, want) {
		t.Fatalf("rows after an update %v, want %v", got, want)
	}
}

// A snapshot read of a key whose delete is remembered (merge-on-read: the deleted rows in
// the table; copy-on-write: the deletes domains) brings the key back at the delete's
// sequence: the read saw the row live, so it was re-inserted after the delete. Kept
// across a restart: the restarted index finds the live row as new as the deleted one,
// and a late update older than the delete stays stale.
func TestEnvelopeDebeziumIncrementalSnapshotReadAfterARememberedDelete(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newDbzHarness(t)
		cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
		cfg.Table.UpsertWrite = write
		h.send(h.envelope, dbz{op: "c", id: 1, name: "ann", lsn: 100}, dbz{op: "c", id: 2, name: "bob", lsn: 100},
			dbz{op: "c", id: 3, name: "cy", lsn: 100})
		h.run(cfg, 3)

		// One run: the deletes, then (a later flush: remembered in the index) a read of 1.
		m := h.startWith("dbz", cfg, nil)
		h.send(h.envelope, dbz{op: "d", id: 1, lsn: 200}, dbz{id: 1, tomb: true}, dbz{op: "d", id: 2, lsn: 200}, dbz{id: 2, tomb: true},
			dbz{op: "d", id: 3, lsn: 200}, dbz{op: "r", id: 3, name: "snap", nolsn: true})
		h.waitHandled(9, 30*time.Second, m)
		h.send(h.envelope, dbz{op: "r", id: 1, name: "snap", nolsn: true})
		h.waitHandled(10, 30*time.Second, m)
		m.stop(t)
		if got, want := h.rowsOf("id", "name", "_source_lsn"), []string{"1 snap 200", "3 snap 200"}; !slices.Equal(got, want) {
			t.Fatalf("rows %v, want %v (1: after a remembered delete; 3: after a delete in its flush)", got, want)
		}

		// A restart: 2's delete is read from the table, then a read of 2.
		h.send(h.envelope, dbz{op: "r", id: 2, name: "snap", nolsn: true})
		h.run(cfg, 11)
		if got, want := h.rowsOf("id", "name", "_source_lsn"), []string{"1 snap 200", "2 snap 200", "3 snap 200"}; !slices.Equal(got, want) {
			t.Fatalf("rows after a restart %v, want %v", got, want)
		}

		// Another restart: every key is live at 200, so updates older than it are stale,
		// and a newer one replaces the read's row (no second live row of its key).
		h.send(h.envelope, dbz{op: "u", id: 1, name: "late", lsn: 150}, dbz{op: "u", id: 2, name: "late", lsn: 150},
			dbz{op: "u", id: 3, name: "newer", lsn: 250})
		h.run(cfg, 14)
		if got, want := h.rowsOf("id", "name", "_source_lsn"), []string{"1 snap 200", "2 snap 200", "3 newer 250"}; !slices.Equal(got, want) {
			t.Fatalf("rows after late and newer updates past a restart %v, want %v", got, want)
		}
		if got := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "stale")); got != 2 {
			t.Fatalf("stale changes %v, want 2 (the late updates)", got)
		}
	})
}

// A streamed change (c, u, d) without its LSN cannot be ordered: dead-lettered
// missing_key naming source.lsn, while a snapshot read without it is written.
func TestEnvelopeDebeziumStreamedChangeWithoutLSNIsMissingKey(t *testing.T) {
	h := newDbzHarness(t)
	cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
	h.send(h.envelope, dbz{op: "c", id: 1, name: "ann", lsn: 100}, dbz{op: "c", id: 2, name: "bob", nolsn: true},
		dbz{op: "u", id: 1, name: "new", nolsn: true}, dbz{op: "d", id: 1, nolsn: true}, dbz{op: "r", id: 3, name: "snap", nolsn: true})
	h.run(cfg, 5)
	if got, want := h.rowsOf("id", "name", "_source_lsn"), []string{"1 ann 100", "3 snap <nil>"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if got, want := h.deadLetters(), []string{"missing_key:source.lsn", "missing_key:source.lsn", "missing_key:source.lsn"}; !slices.Equal(got, want) {
		t.Fatalf("dead letters %v, want %v", got, want)
	}
}

// The flattened form: __lsn (or __source_ts_ms) null with __op r is ordered by its
// position; with another __op it is missing_key.
func TestEnvelopeDebeziumFlattenedIncrementalSnapshotRead(t *testing.T) {
	for _, tc := range []struct {
		seqBy, column string
		want          []string
	}{
		{config.SequenceLSN, "_source_lsn", []string{"1 snap 200", "2 new 300", "3 snap <nil>"}},
		{config.SequenceSourceTsMs, "_source_ts_ms", []string{"1 snap 1700000000200", "2 new 1700000000300", "3 snap <nil>"}},
	} {
		t.Run(tc.seqBy, func(t *testing.T) {
			h := newDbzHarness(t)
			h.send(h.flattened, dbz{op: "u", id: 1, name: "new", lsn: 200}, dbz{op: "r", id: 1, name: "snap", nolsn: true},
				dbz{op: "r", id: 2, name: "snap", nolsn: true}, dbz{op: "u", id: 2, name: "new", lsn: 300},
				dbz{op: "r", id: 3, name: "snap", nolsn: true}, dbz{op: "u", id: 4, name: "new", nolsn: true})
			h.run(h.dbzConfig(config.ModeUpsert, config.EnvelopeDebeziumFlattened, tc.seqBy), 6)
			if got := h.rowsOf("id", "name", tc.column); !slices.Equal(got, tc.want) {
				t.Fatalf("rows %v, want %v", got, tc.want)
			}
			field := "source.lsn"
			if tc.seqBy == config.SequenceSourceTsMs {
				field = "source.ts_ms"
			}
			if got, want := h.deadLetters(), []string{"missing_key:" + field}; !slices.Equal(got, want) {
				t.Fatalf("dead letters %v, want %v", got, want)
			}
		})
	}
}

// Soft deletes: a snapshot read revives a soft-deleted key at the delete's sequence; a
// tombstone after a read in its flush flags the read's row with the sequence the read
// took (NULL when nothing of the key was known); a late update older than it stays stale
// after a restart.
func TestEnvelopeDebeziumIncrementalSnapshotReadSoftDeletes(t *testing.T) {
	h := newDbzHarness(t)
	cfg := h.dbzConfig(config.ModeUpsert, config.EnvelopeDebezium, config.SequenceLSN)
	cfg.Table.Deletes = config.DeletesSoft
	h.send(h.envelope, dbz{op: "c", id: 1, name: "ann", lsn: 100}, dbz{op: "d", id: 1, lsn: 200}, dbz{op: "c", id: 4, name: "dan", lsn: 100},
		dbz{op: "r", id: 5, name: "snap", nolsn: true})
	h.run(cfg, 4)
	cols := []string{"id", "name", "_deleted", "_deleted_sequence", "_source_lsn"}
	if got, want := h.rowsOf(cols...), []string{"1 <nil> true 200 200", "4 dan false <nil> 100", "5 snap false <nil> <nil>"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	// 5: a tombstone of a stored row whose sequence is NULL copies it flagged, NULL too.
	h.send(h.envelope, dbz{op: "r", id: 1, name: "snap", nolsn: true},
		dbz{op: "r", id: 2, name: "snap", nolsn: true}, dbz{id: 2, tomb: true},
		dbz{op: "r", id: 4, name: "snap", nolsn: true}, dbz{id: 4, tomb: true}, dbz{id: 5, tomb: true})
	h.run(cfg, 10)
	want := []string{"1 snap false <nil> 200", "2 snap true <nil> <nil>", "4 snap true 100 100", "5 snap true <nil> <nil>"}
	if got := h.rowsOf(cols...); !slices.Equal(got, want) {
		t.Fatalf("rows after the snapshot reads %v, want %v", got, want)
	}
	h.send(h.envelope, dbz{op: "u", id: 1, name: "late", lsn: 150}, dbz{op: "u", id: 4, name: "late", lsn: 99})
	h.run(cfg, 12)
	if got := h.rowsOf(cols...); !slices.Equal(got, want) {
		t.Fatalf("rows after late updates past a restart %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(h.metrics.KeyedChanges.WithLabelValues("orders", "stale")); got != 2 {
		t.Fatalf("stale changes %v, want 2 (the late updates)", got)
	}
}

// A changelog: a snapshot read's _change_sequence (and _source_lsn) is the greatest
// sequence of its key among the flush's earlier changes, NULL when there is none.
func TestEnvelopeDebeziumIncrementalSnapshotReadChangelog(t *testing.T) {
	h := newDbzHarness(t)
	h.send(h.envelope, dbz{op: "r", id: 1, name: "snap", nolsn: true}, dbz{op: "u", id: 1, name: "new", lsn: 200},
		dbz{op: "r", id: 1, name: "snap2", nolsn: true}, dbz{op: "u", id: 1, name: "older", lsn: 150},
		dbz{op: "r", id: 1, name: "snap3", nolsn: true}, dbz{op: "c", id: 2, name: "bob", nolsn: true})
	h.run(h.dbzConfig(config.ModeChangelog, config.EnvelopeDebezium, config.SequenceLSN), 6)
	want := []string{"1 new upsert 200 200", "1 older upsert 150 150", "1 snap upsert <nil> <nil>", "1 snap2 upsert 200 200", "1 snap3 upsert 200 200"}
	if got := h.rowsOf("id", "name", "_change_operation", "_change_sequence", "_source_lsn"); !slices.Equal(got, want) {
		t.Fatalf("changelog rows %v, want %v", got, want)
	}
	if got, want := h.deadLetters(), []string{"missing_key:source.lsn"}; !slices.Equal(got, want) {
		t.Fatalf("dead letters %v, want %v", got, want)
	}
}
