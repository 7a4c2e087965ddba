package ingest

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
)

// A keyed table whose key is a timestamp (Avro timestamp-millis), fed rows at 1970-01-01
// and one second later, then two tombstones: one whose key is 2^61 ms (year 73 million,
// outside Delta's range; read through a time.Time it wraps to 1970-01-01 and would delete
// the first row) and one naming the second row. The first is a missing_key dead letter at
// ts and deletes nothing; the second deletes its row, in the upsert and the changelog
// mode alike.
func TestTombstoneKeyOutsideDeltaRange(t *testing.T) {
	for _, mode := range []string{config.ModeUpsert, config.ModeChangelog} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, 1)
			const row = `{"type":"record","name":"R","fields":[{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"v","type":"string"}]}`
			const key = `{"type":"record","name":"K","fields":[{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
			rowID, keyID := h.register("orders-value", row), h.register("orders-key", key)
			frame := func(id int, schema string, v any) []byte {
				// without the logical type, to write any long
				return h.framed(id, avro.MustParse(strings.ReplaceAll(schema, `,"logicalType":"timestamp-millis"`, "")), v)
			}
			recs := []*kgo.Record{
				{Topic: h.topic, Key: frame(keyID, key, map[string]any{"ts": int64(0)}), Value: frame(rowID, row, map[string]any{"ts": int64(0), "v": "epoch"})},
				{Topic: h.topic, Key: frame(keyID, key, map[string]any{"ts": int64(1000)}), Value: frame(rowID, row, map[string]any{"ts": int64(1000), "v": "one"})},
				{Topic: h.topic, Key: frame(keyID, key, map[string]any{"ts": int64(1) << 61})},
				{Topic: h.topic, Key: frame(keyID, key, map[string]any{"ts": int64(1000)})},
			}
			if err := h.producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cfg := h.config()
			cfg.Table.Mode, cfg.Table.Key, cfg.Table.KeyFormat = mode, []string{"ts"}, "avro"
			if mode == config.ModeUpsert {
				cfg.Table.DeleteHorizon = config.DefaultDeleteHorizon
			}
			m := h.startWith("keyed", cfg, nil)
			h.waitHandled(4, 30*time.Second, m)
			m.stop(t)
			var got []string
			if err := h.liveRows(func(_ deltalog.Add, r map[string]any) error {
				got = append(got, fmt.Sprint(r["ts"], " ", r["v"], " ", r["_change_operation"]))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			want := []string{"0 epoch <nil>"}
			if mode == config.ModeChangelog {
				want = []string{"0 epoch upsert", "1000000 <nil> delete", "1000000 one upsert"}
			}
			if !slices.Equal(got, want) {
				t.Errorf("rows %q, want %q", got, want)
			}
			kh := &keyedHarness{harness: h}
			if dl := kh.deadLetters(); !slices.Equal(dl, []string{"missing_key:ts"}) {
				t.Errorf("dead letters %v, want [missing_key:ts]", dl)
			}
		})
	}
}

// A keyed table whose key is a decimal(10,2): a tombstone's Avro key is read by the
// rows' decoder, so it names the row of the same amount (12.34) and deletes it; the row
// of another amount stays.
func TestTombstoneDecimalKey(t *testing.T) {
	h := newHarness(t, 1)
	const row = `{"type":"record","name":"R","fields":[{"name":"amt","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},{"name":"v","type":"string"}]}`
	const key = `{"type":"record","name":"K","fields":[{"name":"amt","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}}]}`
	rowID, keyID := h.register("orders-value", row), h.register("orders-key", key)
	frame := func(id int, schema string, v any) []byte { return h.framed(id, avro.MustParse(schema), v) }
	recs := []*kgo.Record{
		{Topic: h.topic, Key: frame(keyID, key, map[string]any{"amt": big.NewRat(1234, 100)}), Value: frame(rowID, row, map[string]any{"amt": big.NewRat(1234, 100), "v": "a"})},
		{Topic: h.topic, Key: frame(keyID, key, map[string]any{"amt": big.NewRat(-5, 100)}), Value: frame(rowID, row, map[string]any{"amt": big.NewRat(-5, 100), "v": "b"})},
		{Topic: h.topic, Key: frame(keyID, key, map[string]any{"amt": big.NewRat(1234, 100)})},
	}
	if err := h.producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := h.config()
	cfg.Table.Mode, cfg.Table.Key, cfg.Table.KeyFormat, cfg.Table.DeleteHorizon = config.ModeUpsert, []string{"amt"}, "avro", config.DefaultDeleteHorizon
	m := h.startWith("keyed", cfg, nil)
	h.waitHandled(3, 30*time.Second, m)
	m.stop(t)
	var got []string
	if err := h.liveRows(func(_ deltalog.Add, r map[string]any) error {
		got = append(got, fmt.Sprint(r["v"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	kh := &keyedHarness{harness: h}
	if !slices.Equal(got, []string{"b"}) || len(kh.deadLetters()) != 0 {
		t.Errorf("rows %q, dead letters %v; want [b] and none", got, kh.deadLetters())
	}
}
