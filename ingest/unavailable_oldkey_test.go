package ingest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// A primary-key change (UPDATE docs SET id = 100 WHERE id = 1) under REPLICA IDENTITY
// DEFAULT, as Debezium emits it: a delete of the old key (header __debezium.newkey), its
// tombstone, and a create of the new key whose unchanged TOASTed columns are placeholders,
// with header __debezium.oldkey naming the old key. pkChange is those three records.
func pkChange(from, to int32, lsn int64, small int32, header []byte) []doc {
	return []doc{
		{op: "d", id: from, lsn: lsn},
		{id: from, tomb: true},
		{op: "c", id: to, small: small, big: ptr(placeholder), lsn: lsn, oldKey: header},
	}
}

// simpleHeaderKey is Kafka Connect's default header.converter (SimpleHeaderConverter)
// rendering of the key struct {id}: what Debezium's header holds unless the worker sets
// another converter.
func simpleHeaderKey(id int32) []byte { return fmt.Appendf(nil, `{"id":%d}`, id) }

// connectJSONKey is the key struct {id} through Kafka Connect's JsonConverter with
// schemas.enable=true (key_format connect_json).
func connectJSONKey(id int32) []byte {
	return fmt.Appendf(nil, `{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"pg.public.docs.Key"},"payload":{"id":%d}}`, id)
}

const testToastKey = `{"type":"record","name":"Key","namespace":"pg.public.docs","fields":[{"name":"id","type":"int"}],"connect.name":"pg.public.docs.Key"}`

// bigs are the table's live rows' big values by id (NULL: "<nil>").
func (h *toastHarness) bigs() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	if err := h.liveRows(func(_ deltalog.Add, r map[string]any) error {
		big := "<nil>"
		if s, ok := r["big"].(string); ok {
			big = s
		}
		out[fmt.Sprint(r["id"])] = big
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// wantBigs fails unless the table's rows are exactly want (id → big).
func (h *toastHarness) wantBigs(want map[string]string) {
	h.t.Helper()
	got := h.bigs()
	if len(got) != len(want) {
		h.t.Fatalf("rows by id %v, want ids %v", short(got), short(want))
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			h.t.Fatalf("row %s: big %q (present %v), want %q", id, trim(g), ok, trim(w))
		}
	}
}

func trim(s string) string {
	if len(s) > 16 {
		return fmt.Sprintf("%.16s…(%d bytes)", s, len(s))
	}
	return s
}

func short(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = trim(v)
	}
	return out
}

// idBigs are the table's rows as "id big" (big trimmed, "" for NULL), sorted: a
// changelog's rows, which share their keys.
func (h *toastHarness) idBigs() []string {
	h.t.Helper()
	var out []string
	if err := h.liveRows(func(_ deltalog.Add, r map[string]any) error {
		s, _ := r["big"].(string)
		out = append(out, fmt.Sprintf("%v %s", r["id"], trim(s)))
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// wantOutcomes fails unless ingestd_keyed_unavailable_values_total is exactly want by
// outcome (absent: 0).
func (h *toastHarness) wantOutcomes(want map[string]float64) {
	h.t.Helper()
	for _, o := range []string{unavailableFromFlush, unavailableFromTable, unavailableNull, unavailableDead} {
		if got := h.unavailable(o); got != want[o] {
			h.t.Fatalf("unavailable values %s: %v, want %v (all: %v)", o, got, want[o], want)
		}
	}
}

// Case 1: the old key's value is in the table (an earlier flush, read after a restart):
// the new key keeps it, the old key is gone.
func TestOldKeyValueFromTheTable(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newToastHarness(t)
		big := bigText("pk-1", 9<<10)
		cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.UpsertWrite = write })
		h.send(doc{op: "c", id: 1, small: 1, big: &big, lsn: 10})
		h.run(cfg, 1)
		h.send(pkChange(1, 100, 20, 1, simpleHeaderKey(1))...)
		h.run(cfg, 4)
		h.wantBigs(map[string]string{"100": big})
		h.wantOutcomes(map[string]float64{unavailableFromTable: 1})
		if got := h.deadLetters(); len(got) != 0 {
			t.Fatalf("dead letters %v", got)
		}
	})
}

// Case 2 under each key format the pipeline reads (string, connect_json, avro), with the
// header in that format (a header.converter set to the key converter) and in Connect's
// default SimpleHeaderConverter form: the old key's insert in the same flush gives the
// value; under sequence_by source.lsn too (the change's delete and create share an LSN).
func TestOldKeyValueFromTheFlush(t *testing.T) {
	type format struct {
		name  string
		setup func(h *toastHarness, tb *config.Table) func(int32) []byte // the header of a key
	}
	formats := []format{
		{"string", func(h *toastHarness, _ *config.Table) func(int32) []byte {
			return func(id int32) []byte { return fmt.Appendf(nil, "%d", id) }
		}},
		{"connect_json", func(h *toastHarness, tb *config.Table) func(int32) []byte {
			tb.KeyFormat, h.key = kafkacols.KeyConnectJSON, connectJSONKey
			return connectJSONKey
		}},
		{"avro", func(h *toastHarness, tb *config.Table) func(int32) []byte {
			tb.KeyFormat = kafkacols.KeyAvro
			id := h.register("pg.public.docs-key", testToastKey)
			s := avro.MustParse(testToastKey)
			h.key = func(k int32) []byte { return h.framed(id, s, map[string]any{"id": k}) }
			return h.key
		}},
	}
	for _, f := range formats {
		for _, simple := range []bool{false, true} {
			for _, seq := range []string{"", config.SequenceLSN} {
				name := f.name + "/header_" + map[bool]string{false: "key_format", true: "simple"}[simple] + "/sequence_by=" + seq
				t.Run(name, func(t *testing.T) {
					h := newToastHarness(t)
					big := bigText("pk-2", 9<<10)
					var header func(int32) []byte
					cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) {
						tb.SequenceBy = seq
						header = f.setup(h, tb)
					})
					if simple {
						header = simpleHeaderKey
					}
					h.send(append([]doc{{op: "c", id: 1, small: 1, big: &big, lsn: 10}, {op: "c", id: 2, small: 1, big: ptr("two"), lsn: 11}},
						pkChange(1, 100, 20, 1, header(1))...)...)
					h.run(cfg, 5)
					h.wantBigs(map[string]string{"2": "two", "100": big})
					h.wantOutcomes(map[string]float64{unavailableFromFlush: 1})
				})
			}
		}
	}
}

// Case 3: the old key's update earlier in the flush (after its stored row) gives the value.
func TestOldKeyValueUpdatedInTheFlush(t *testing.T) {
	h := newToastHarness(t)
	cfg := h.toastConfig(config.ModeUpsert, nil)
	h.storeBigs(cfg, 1)
	h.send(append([]doc{{op: "u", id: 1, small: 2, big: ptr("v2"), lsn: 15}}, pkChange(1, 100, 20, 2, simpleHeaderKey(1))...)...)
	h.run(cfg, 5)
	h.wantBigs(map[string]string{"100": "v2"})
	h.wantOutcomes(map[string]float64{unavailableFromFlush: 1})
}

// Case 3b: an update of the old key with the placeholder passes the stored value on
// through the flush, and so through the old key.
func TestOldKeyValueThroughAPlaceholderUpdate(t *testing.T) {
	h := newToastHarness(t)
	cfg := h.toastConfig(config.ModeUpsert, nil)
	big := h.storeBigs(cfg, 1)[1]
	h.send(append([]doc{{op: "u", id: 1, small: 2, big: ptr(placeholder), lsn: 15}}, pkChange(1, 100, 20, 2, simpleHeaderKey(1))...)...)
	h.run(cfg, 5)
	h.wantBigs(map[string]string{"100": big})
	// The update is not written (the delete supersedes it): only the create's value is
	// counted, read from the old key's stored row past the update's placeholder.
	h.wantOutcomes(map[string]float64{unavailableFromTable: 1})
}

// Case 4: a header naming a key without a value anywhere: NULL, counted null.
func TestOldKeyWithoutValue(t *testing.T) {
	h := newToastHarness(t)
	big := bigText("pk-4", 9<<10)
	cfg := h.toastConfig(config.ModeUpsert, nil)
	h.send(doc{op: "c", id: 1, small: 1, big: &big, lsn: 10})
	h.run(cfg, 1)
	h.send(pkChange(7, 100, 20, 1, simpleHeaderKey(7))...)
	h.run(cfg, 4)
	h.wantBigs(map[string]string{"1": big, "100": "<nil>"})
	h.wantOutcomes(map[string]float64{unavailableNull: 1})
}

// Case 5: header bytes that are no key of the table: NULL, counted null, no crash and no
// dead letter; the flush's other rows are written.
func TestOldKeyUndecodableHeader(t *testing.T) {
	for _, header := range [][]byte{{0xff, 0x00, 'x'}, []byte(`{"other":1}`), []byte(`{"id":"x"}`), {}, {0, 0, 0, 0, 9, 1}} {
		t.Run(fmt.Sprintf("%q", header), func(t *testing.T) {
			h := newToastHarness(t)
			big := bigText("pk-5", 9<<10)
			cfg := h.toastConfig(config.ModeUpsert, nil)
			h.send(append([]doc{{op: "c", id: 1, small: 1, big: &big, lsn: 10}}, pkChange(1, 100, 20, 1, header)...)...)
			h.run(cfg, 4)
			h.wantBigs(map[string]string{"100": "<nil>"})
			h.wantOutcomes(map[string]float64{unavailableNull: 1})
			if got := h.deadLetters(); len(got) != 0 {
				t.Fatalf("dead letters %v", got)
			}
		})
	}
}

// Case 6: a changelog takes the old key's earlier change in the same flush (its delete
// and the tombstone passed over); in a later flush, NULL (a changelog is not read back).
func TestOldKeyChangelog(t *testing.T) {
	h := newToastHarness(t)
	big := bigText("pk-6", 9<<10)
	cfg := h.toastConfig(config.ModeChangelog, nil)
	h.send(append([]doc{{op: "c", id: 1, small: 1, big: &big, lsn: 10}}, pkChange(1, 100, 20, 1, simpleHeaderKey(1))...)...)
	h.run(cfg, 4)
	h.send(pkChange(100, 200, 30, 1, simpleHeaderKey(100))...)
	h.run(cfg, 7)
	got := h.idBigs()
	b := trim(big)
	want := []string{"1 " + b, "1 ", "100 " + b, "100 ", "200 "}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("changelog rows (id big)\n%q\nwant\n%q", got, want)
	}
	h.wantOutcomes(map[string]float64{unavailableFromFlush: 1, unavailableNull: 1})
}
