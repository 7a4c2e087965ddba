package ingest

import (
	"slices"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/ingest/config"
)

// softConfig is keyedConfig with soft deletes, ordered by seq, written as write says.
func (h *keyedHarness) softConfig(write string) *config.Config {
	cfg := h.keyedConfig(true)
	cfg.Table.Deletes, cfg.Table.UpsertWrite = config.DeletesSoft, write
	return cfg
}

// Soft deletes, in both write modes, across restarts (each batch is a new pipeline whose
// key index is built from the table): a delete_when row is kept as the deleted row; a
// tombstone keeps the stored row's values (copied) or the flush's row it deletes; an
// older change does not overwrite a newer soft delete; a newer one revives the key.
func TestKeyedSoftDeletes(t *testing.T) {
	for _, write := range []string{config.MergeOnRead, config.CopyOnWrite} {
		t.Run(write, func(t *testing.T) {
			t.Parallel()
			h := newKeyedHarness(t, 1)
			cfg := h.softConfig(write)
			cols := []string{"id", "v", "seq", "op", "_deleted", "_deleted_sequence"}
			check := func(step string, want ...string) {
				t.Helper()
				if got := h.allRows(cols...); !slices.Equal(got, want) {
					t.Fatalf("%s: rows\n%s\nwant\n%s", step, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			h.runBatch(cfg, 3, keyedRec{id: 1, v: "a", seq: 1, op: "c"}, keyedRec{id: 2, v: "b", seq: 1, op: "c"}, keyedRec{id: 3, v: "c", seq: 1, op: "c"})
			check("inserts", "1 a 1 c false <nil>", "2 b 1 c false <nil>", "3 c 1 c false <nil>")
			h.runBatch(cfg, 7, keyedRec{id: 1, seq: 5, op: "d"}, keyedRec{id: 2, tomb: true},
				keyedRec{id: 3, v: "c2", seq: 2, op: "u"}, keyedRec{id: 3, tomb: true})
			check("deletes", "1 <nil> 5 d true 5", "2 b 1 c true 1", "3 c2 2 u true 2")
			h.runBatch(cfg, 9, keyedRec{id: 1, v: "old", seq: 4, op: "u"}, keyedRec{id: 2, v: "revived", seq: 3, op: "u"})
			check("older and newer changes", "1 <nil> 5 d true 5", "2 revived 3 u false <nil>", "3 c2 2 u true 2")
			if write == config.CopyOnWrite {
				for _, add := range h.snapshot().Files.All() {
					if add.DeletionVector != nil {
						t.Fatalf("copy-on-write file %s has a deletion vector", add.Path)
					}
				}
			}
		})
	}
}
