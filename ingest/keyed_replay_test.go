package ingest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/tableops"
	"github.com/ingestd/ingestd/ingest/config"
)

// testKeyedRowV2 is testKeyedRow with a field the table lacks.
const testKeyedRowV2 = `{"type":"record","name":"Row","namespace":"shop","fields":[
  {"name":"id","type":"long"},
  {"name":"v","type":["null","string"],"default":null},
  {"name":"seq","type":"long"},
  {"name":"op","type":"string"},
  {"name":"extra","type":["null","string"],"default":null}]}`

// sendV2 produces r to partition 0 as a record of testKeyedRowV2 (extra set to "x").
func (h *keyedHarness) sendV2(r keyedRec) {
	h.t.Helper()
	id, _, err := h.reg.RegisterSchema("rows-value", sr.Schema{Schema: testKeyedRowV2, Type: sr.TypeAvro})
	if err != nil {
		h.t.Fatal(err)
	}
	body, err := avro.Marshal(avro.MustParse(testKeyedRowV2), map[string]any{"id": r.id, "seq": r.seq, "op": r.op, "v": r.v, "extra": "x"})
	if err != nil {
		h.t.Fatal(err)
	}
	var hdr sr.ConfluentHeader
	framed, err := hdr.AppendEncode(nil, id, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.producer.ProduceSync(context.Background(), &kgo.Record{Topic: h.topic, Partition: 0, Key: fmt.Appendf(nil, "%d", r.id), Value: append(framed, body...)}).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// Replay into keyed tables orders the replayed changes by sequence against what the
// table holds, as the pipeline would have: under schema.policy dead_letter two v2
// changes are dead-lettered (c{1,b,seq:5}, c{2,d,seq:2}) while v1 changes land
// (c{1,a,seq:1}, c{1,c,seq:3}, d{2,seq:9}); the column is added and the dead letters
// replayed. Key 1 takes b (5 is newer than 3); key 2's replayed change is older than its
// delete (9) and stays deleted — flagged under soft deletes. A changelog gains the two
// replayed changes beside the three it had.
func TestReplayIntoKeyedTables(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*config.Config)
		want []string // id:v (soft: id:v:deleted) or, for the changelog, id:v:operation:sequence
	}{
		{"merge_on_read", func(*config.Config) {}, []string{"1:b"}},
		{"copy_on_write", func(cfg *config.Config) { cfg.Table.UpsertWrite = config.CopyOnWrite }, []string{"1:b"}},
		{"soft", func(cfg *config.Config) { cfg.Table.Deletes = config.DeletesSoft }, []string{"1:b:false", "2::true"}},
		{"changelog", func(cfg *config.Config) { cfg.Table.Mode, cfg.Table.DeleteHorizon = config.ModeChangelog, 0 },
			[]string{"1:a:upsert:1", "1:b:upsert:5", "1:c:upsert:3", "2::delete:9", "2:d:upsert:2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newKeyedHarness(t, 1)
			cfg := h.keyedConfig(true)
			cfg.Schema.Policy = config.PolicyDeadLetter
			c.set(cfg)
			h.send(keyedRec{id: 1, v: "a", seq: 1, op: "c"})
			h.sendV2(keyedRec{id: 1, v: "b", seq: 5, op: "c"})
			h.send(keyedRec{id: 1, v: "c", seq: 3, op: "c"})
			h.sendV2(keyedRec{id: 2, v: "d", seq: 2, op: "c"})
			h.send(keyedRec{id: 2, seq: 9, op: "d"})
			m := h.startWith("keyed", cfg, nil)
			h.waitHandled(5, 30*time.Second, m)
			m.stop(t)
			if got := h.deadLetters(); !slices.Equal(got, []string{"schema_mismatch:extra", "schema_mismatch:extra"}) {
				t.Fatalf("dead letters %v, want two schema_mismatch:extra", got)
			}
			col, err := tableops.ParseColumnDef("extra STRING")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tableops.Apply(context.Background(), h.deps(nil).Table, tableops.Alter{AddColumns: []tableops.ColumnDef{col}}); err != nil {
				t.Fatal(err)
			}
			sum, err := h.replay(cfg, nil, ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Landed != 2 {
				t.Fatalf("replay landed %d, want 2: %+v", sum.Landed, sum)
			}
			var got []string
			if err := h.liveRows(func(_ deltalog.Add, row map[string]any) error {
				v, _ := row["v"].(string)
				s := fmt.Sprintf("%d:%s", row["id"], v)
				switch {
				case cfg.Table.Mode == config.ModeChangelog:
					s += fmt.Sprintf(":%v:%v", row["_change_operation"], row["_change_sequence"])
				case cfg.Table.SoftDeletes():
					s += fmt.Sprintf(":%v", row["_deleted"])
				}
				got = append(got, s)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			sort.Strings(got)
			if !slices.Equal(got, c.want) {
				t.Fatalf("table rows after replay %v, want %v", got, c.want)
			}
		})
	}
}
