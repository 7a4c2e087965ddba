package ingest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
)

// changelogConfig is keyedConfig as a changelog.
func (h *keyedHarness) changelogConfig(seqBy bool) *config.Config {
	cfg := h.keyedConfig(seqBy)
	cfg.Table.Mode, cfg.Table.DeleteHorizon = config.ModeChangelog, 0
	return cfg
}

// allRows reads every live row of the table, each formatted by row (the columns named
// in cols, NULL as <nil>), sorted.
func (h *keyedHarness) allRows(cols ...string) []string {
	h.t.Helper()
	var out []string
	if err := h.liveRows(func(_ deltalog.Add, row map[string]any) error {
		var parts []string
		for _, c := range cols {
			parts = append(parts, fmt.Sprint(row[c]))
		}
		out = append(out, strings.Join(parts, " "))
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// A changelog appends every change: updates and deletes of one key in one batch are all
// rows, the tombstone's row holds its key alone, and the sequence is the Kafka offset
// without sequence_by.
func TestChangelogAppendsEveryChangeWithOffsets(t *testing.T) {
	h := newKeyedHarness(t, 1)
	h.send(keyedRec{id: 1, v: "a", seq: 5, op: "c"}, keyedRec{id: 1, v: "b", seq: 6, op: "u"}, keyedRec{id: 1, seq: 7, op: "d"},
		keyedRec{id: 2, v: "x", seq: 1, op: "c"}, keyedRec{id: 2, tomb: true})
	m := h.startWith("changelog", h.changelogConfig(false), nil)
	h.waitHandled(5, 30*time.Second, m)
	m.stop(h.t)
	got := h.allRows("_change_sequence", "id", "v", "seq", "op", "_change_operation")
	want := []string{
		"0 1 a 5 c upsert",
		"1 1 b 6 u upsert",
		"2 1 <nil> 7 d delete",
		"3 2 x 1 c upsert",
		"4 2 <nil> <nil> <nil> delete",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("changelog rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Created with the changelog columns after the value's.
	var fields []string
	for _, f := range h.snapshot().Schema.Fields {
		fields = append(fields, fmt.Sprintf("%s %s %v", f.Name, f.Type, f.Nullable))
	}
	if want := []string{"id long true", "v string true", "seq long true", "op string true", "_change_operation string true", "_change_sequence long true"}; !slices.Equal(fields, want) {
		t.Fatalf("schema %v, want %v", fields, want)
	}
}

// With sequence_by the sequence is the column's value; a tombstone's is NULL (it carries
// none); an older change is a row too (a changelog drops nothing).
func TestChangelogSequenceBy(t *testing.T) {
	h := newKeyedHarness(t, 1)
	h.send(keyedRec{id: 1, v: "a", seq: 50, op: "c"}, keyedRec{id: 1, v: "old", seq: 10, op: "u"}, keyedRec{id: 1, tomb: true})
	m := h.startWith("changelog", h.changelogConfig(true), nil)
	h.waitHandled(3, 30*time.Second, m)
	m.stop(h.t)
	got := h.allRows("id", "v", "_change_operation", "_change_sequence")
	want := []string{"1 <nil> delete <nil>", "1 a upsert 50", "1 old upsert 10"}
	if !slices.Equal(got, want) {
		t.Fatalf("changelog rows %v, want %v", got, want)
	}
	if v := h.snapshot().Version; v != 0 {
		t.Fatalf("table at version %d, want one commit", v)
	}
}

// A table made by another mode lacks the columns a changelog or soft deletes fill: the
// pipeline refuses it at start-up, naming the columns and the fix, and writes nothing.
func TestKeyedModesRefuseTableWithoutTheirColumns(t *testing.T) {
	h := newKeyedHarness(t, 1)
	h.runBatch(h.keyedConfig(false), 1, keyedRec{id: 1, v: "a", op: "c"})
	version := h.snapshot().Version
	for _, c := range []struct {
		name string
		cfg  *config.Config
		want string
	}{
		{"changelog", h.changelogConfig(false), "table.mode changelog fills columns the table lacks: _change_operation STRING, _change_sequence BIGINT (fix: ALTER TABLE <table> ADD COLUMNS (_change_operation STRING, _change_sequence BIGINT)"},
		{"soft deletes", h.softConfig(config.MergeOnRead), "table.deletes soft fills columns the table lacks: _deleted BOOLEAN, _deleted_sequence BIGINT (fix: ALTER TABLE <table> ADD COLUMNS (_deleted BOOLEAN, _deleted_sequence BIGINT)"},
	} {
		m := h.startWith(c.name, c.cfg, nil)
		err := m.stopped(t, 20*time.Second, "the pipeline kept running on a table without its mode's columns")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: Run = %v, want a refusal holding %q", c.name, err, c.want)
		}
	}
	if v := h.snapshot().Version; v != version {
		t.Fatalf("table at version %d, want %d (nothing written)", v, version)
	}
}
