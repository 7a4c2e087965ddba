package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
)

// testToastEnvelope is the envelope Debezium's Postgres connector writes with Kafka
// Connect's AvroConverter for public.docs (id integer primary key, small integer, big
// text, bin bytea, tags text[], note text NOT NULL): the columns a TOASTed value can be
// unavailable in.
const testToastEnvelope = `{"type":"record","name":"Envelope","namespace":"pg.public.docs","fields":[
  {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
    {"name":"id","type":"int"},
    {"name":"small","type":["null","int"],"default":null},
    {"name":"big","type":["null","string"],"default":null},
    {"name":"bin","type":["null","bytes"],"default":null},
    {"name":"tags","type":["null",{"type":"array","items":["null","string"]}],"default":null},
    {"name":"note","type":"string"}],
    "connect.name":"pg.public.docs.Value"}],"default":null},
  {"name":"after","type":["null","Value"],"default":null},
  {"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql","fields":[
    {"name":"version","type":"string"},
    {"name":"connector","type":"string"},
    {"name":"name","type":"string"},
    {"name":"ts_ms","type":"long"},
    {"name":"db","type":"string"},
    {"name":"schema","type":"string"},
    {"name":"table","type":"string"},
    {"name":"lsn","type":["null","long"],"default":null}],
    "connect.name":"io.debezium.connector.postgresql.Source"}},
  {"name":"op","type":"string"},
  {"name":"ts_ms","type":["null","long"],"default":null}],
  "connect.version":2,"connect.name":"pg.public.docs.Envelope"}`

// placeholder is Debezium's default unavailable.value.placeholder.
const placeholder = "__debezium_unavailable_value"

// bigText is n bytes of text without repeats (a sha256 chain in hex): what PostgreSQL
// stores out of line, uncompressed.
func bigText(seed string, n int) string {
	var b strings.Builder
	sum := sha256.Sum256([]byte(seed))
	for b.Len() < n {
		b.WriteString(hex.EncodeToString(sum[:]))
		sum = sha256.Sum256(sum[:])
	}
	return b.String()[:n]
}

// doc is one change of public.docs: op (c, u, r, d); a nil field is NULL, except note
// ("" is "n"); tomb: a tombstone of key id.
type doc struct {
	op    string
	id    int32
	small int32
	big   *string
	bin   []byte
	tags  []string
	note  string
	lsn   int64
	tomb  bool
	// oldKey is the __debezium.oldkey header of a primary-key change's create (nil: none).
	oldKey []byte
}

func ptr[T any](v T) *T { return &v }

type toastHarness struct {
	*harness
	env   avro.Schema
	envID int
	// key is the Kafka key of id in the pipeline's key_format (nil: its decimal text).
	key func(id int32) []byte
}

func newToastHarness(t *testing.T) *toastHarness {
	h := &toastHarness{harness: newHarness(t, 1)}
	id, _, err := h.reg.RegisterSchema("pg.public.docs-value", sr.Schema{Schema: testToastEnvelope, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	if h.env, err = avro.ParseWithCache(testToastEnvelope, "", &avro.SchemaCache{}); err != nil {
		t.Fatal(err)
	}
	h.envID = id
	return h
}

// toastConfig is an upsert (or changelog) pipeline of public.docs' envelopes keyed by id;
// tweak adjusts the table section.
func (h *toastHarness) toastConfig(mode string, tweak func(*config.Table)) *config.Config {
	cfg := h.config()
	cfg.Table.Mode, cfg.Table.Key, cfg.Table.KeyFormat, cfg.Table.Envelope = mode, []string{"id"}, "string", config.EnvelopeDebezium
	if mode == config.ModeUpsert {
		cfg.Table.DeleteHorizon, cfg.Table.Deletes, cfg.Table.UpsertWrite = config.DefaultDeleteHorizon, config.DeletesHard, config.MergeOnRead
	}
	if tweak != nil {
		tweak(&cfg.Table)
	}
	return cfg
}

func (h *toastHarness) record(c doc) *kgo.Record {
	r := &kgo.Record{Topic: h.topic, Partition: 0, Key: fmt.Appendf(nil, "%d", c.id)}
	if h.key != nil {
		r.Key = h.key(c.id)
	}
	if c.oldKey != nil {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "__debezium.oldkey", Value: c.oldKey})
	}
	if c.tomb {
		return r
	}
	note := c.note
	if note == "" {
		note = "n"
	}
	row := map[string]any{"id": c.id, "small": map[string]any{"int": c.small}, "big": nil, "bin": nil, "tags": nil, "note": note}
	if c.big != nil {
		row["big"] = map[string]any{"string": *c.big}
	}
	if c.bin != nil {
		row["bin"] = map[string]any{"bytes": c.bin}
	}
	if c.tags != nil {
		tags := make([]any, len(c.tags))
		for i, s := range c.tags {
			tags[i] = map[string]any{"string": s}
		}
		row["tags"] = map[string]any{"array": tags}
	}
	v := map[string]any{"before": nil, "after": nil, "op": c.op, "ts_ms": map[string]any{"long": 1700000001000 + c.lsn},
		"source": map[string]any{"version": "3.7.1.Final", "connector": "postgresql", "name": "pg", "ts_ms": 1700000000000 + c.lsn,
			"db": "shop", "schema": "public", "table": "docs", "lsn": map[string]any{"long": c.lsn}}}
	if c.op == "d" {
		v["before"] = map[string]any{"pg.public.docs.Value": map[string]any{"id": c.id, "small": nil, "big": nil, "bin": nil, "tags": nil, "note": ""}}
	} else {
		v["after"] = map[string]any{"pg.public.docs.Value": row}
	}
	body, err := avro.Marshal(h.env, v)
	if err != nil {
		h.t.Fatal(err)
	}
	var hdr sr.ConfluentHeader
	framed, err := hdr.AppendEncode(nil, h.envID, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	r.Value = append(framed, body...)
	return r
}

func (h *toastHarness) send(changes ...doc) {
	h.t.Helper()
	var out []*kgo.Record
	for _, c := range changes {
		out = append(out, h.record(c))
	}
	if err := h.producer.ProduceSync(context.Background(), out...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// run runs cfg (a fresh pipeline: its key index is built from the table) until it handled
// n records in all, then stops it.
func (h *toastHarness) run(cfg *config.Config, n int64) {
	h.t.Helper()
	m := h.startWith("toast", cfg, nil)
	h.waitHandled(n, 30*time.Second, m)
	m.stop(h.t)
}

// rows are the table's live rows as "id small big bin tags note" (big as its length and
// first 8 bytes, bin as hex, NULL as <nil>), with the soft delete flag when the table
// has one; sorted.
func (h *toastHarness) rows() []string {
	h.t.Helper()
	var out []string
	if err := h.liveRows(func(_ deltalog.Add, r map[string]any) error {
		big := "<nil>"
		if s, ok := r["big"].(string); ok {
			big = fmt.Sprintf("%d:%.8s", len(s), s)
			if s == placeholder || strings.HasPrefix(s, "__") {
				big = s
			}
		}
		bin := "<nil>"
		switch b := r["bin"].(type) {
		case []byte:
			bin = hex.EncodeToString(b)
		case string:
			bin = hex.EncodeToString([]byte(b))
		case nil:
		default:
			bin = fmt.Sprintf("%T", b)
		}
		line := fmt.Sprintf("%v %v %s %s %v %v", r["id"], r["small"], big, bin, r["tags"], r["note"])
		if d, ok := r["_deleted"]; ok {
			line += fmt.Sprintf(" deleted=%v", d)
		}
		out = append(out, line)
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// createDocsTable creates the table as another writer would, note NOT NULL (a table
// ingestd creates is nullable all the way down).
func (h *toastHarness) createDocsTable() {
	h.t.Helper()
	col := func(name string, t deltalog.DataType, nullable bool) *deltalog.StructField {
		return &deltalog.StructField{Name: name, Type: t, Nullable: nullable, Metadata: map[string]any{}}
	}
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{
		col("id", deltalog.Integer, false), col("small", deltalog.Integer, true), col("big", deltalog.String, true),
		col("bin", deltalog.Binary, true), col("tags", &deltalog.ArrayType{ElementType: deltalog.String, ContainsNull: true}, true),
		col("note", deltalog.String, false),
	}}
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "docs", Schema: schema})
	if err != nil {
		h.t.Fatal(err)
	}
	h.commitOther(0, *create.Protocol, *create.Metadata)
}

func (h *toastHarness) unavailable(outcome string) float64 {
	return testutil.ToFloat64(h.metrics.KeyedUnavailable.WithLabelValues("orders", outcome))
}

func (h *toastHarness) deadLetters() []string {
	return (&keyedHarness{harness: h.harness}).deadLetters()
}

// The case: c{id:1,small:1,big:"<9 KB text>"}, later u{id:1,small:2,big:placeholder}:
// the table holds {1,2,"<9 KB text>"}. The update comes in a later flush of a fresh
// pipeline (a restart: its key index is built from the table), so the value is read
// from the stored row's data file; the bytea and text[] columns keep theirs too. Under
// both upsert writes and soft deletes.
func TestUnavailableValueKeepsTheStoredValue(t *testing.T) {
	big := bigText("doc-1", 9<<10)
	bin := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 3)
	for _, c := range []struct {
		name    string
		write   string
		deletes string
		suffix  string
	}{
		{"merge_on_read", config.MergeOnRead, config.DeletesHard, ""},
		{"copy_on_write", config.CopyOnWrite, config.DeletesHard, ""},
		{"soft_deletes", config.MergeOnRead, config.DeletesSoft, " deleted=false"},
		{"soft_deletes_copy_on_write", config.CopyOnWrite, config.DeletesSoft, " deleted=false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newToastHarness(t)
			cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.UpsertWrite, tb.Deletes = c.write, c.deletes })
			h.send(doc{op: "c", id: 1, small: 1, big: &big, bin: bin, tags: []string{"a", "b"}, lsn: 10},
				doc{op: "c", id: 2, small: 1, big: ptr("two"), lsn: 11})
			h.run(cfg, 2)
			h.send(doc{op: "u", id: 1, small: 2, big: ptr(placeholder), bin: []byte(placeholder), tags: []string{placeholder}, lsn: 20})
			h.run(cfg, 3)
			want := []string{
				fmt.Sprintf("1 2 9216:%.8s deadbeefdeadbeefdeadbeef [a b] n%s", big, c.suffix),
				"2 1 3:two <nil> <nil> n" + c.suffix,
			}
			if got := h.rows(); !slices.Equal(got, want) {
				t.Fatalf("rows\n%v\nwant\n%v", got, want)
			}
			if got := h.rows()[0]; !strings.Contains(got, fmt.Sprintf("9216:%.8s", big)) {
				t.Fatal(got)
			}
			// The stored value itself, not a prefix.
			var stored string
			if err := h.liveRows(func(_ deltalog.Add, r map[string]any) error {
				if fmt.Sprint(r["id"]) == "1" {
					stored, _ = r["big"].(string)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if stored != big {
				t.Fatalf("big is %d bytes, not the inserted 9 KB text", len(stored))
			}
			if got := h.unavailable(unavailableFromTable); got != 3 {
				t.Fatalf("unavailable values from the table %v, want 3 (big, bin, tags)", got)
			}
		})
	}
}

// Within one running pipeline the second flush reads the stored row the first wrote
// (the index points into the file just committed); a custom placeholder is honoured and
// the default text is then an ordinary value.
func TestUnavailableValueCustomPlaceholderAcrossFlushes(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newToastHarness(t)
		big := bigText("doc-2", 9<<10)
		cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.UpsertWrite, tb.UnavailableValue = write, "__unavailable__" })
		m := h.startWith("toast", cfg, nil)
		h.send(doc{op: "c", id: 1, small: 1, big: &big, lsn: 10})
		h.waitHandled(1, 30*time.Second, m)
		h.send(doc{op: "u", id: 1, small: 2, big: ptr("__unavailable__"), lsn: 20}, doc{op: "c", id: 3, small: 1, big: ptr(placeholder), lsn: 21})
		h.waitHandled(3, 30*time.Second, m)
		m.stop(t)
		want := []string{fmt.Sprintf("1 2 9216:%.8s <nil> <nil> n", big), "3 1 " + placeholder + " <nil> <nil> n"}
		if got := h.rows(); !slices.Equal(got, want) {
			t.Fatalf("rows\n%v\nwant\n%v", got, want)
		}
	})
}

// c → u(placeholder) → u(placeholder) in one flush: both updates take the insert's
// values; the last one wins with them. Ordered by source.lsn and by offset.
func TestUnavailableValueChainInOneFlush(t *testing.T) {
	for _, seq := range []string{"", config.SequenceLSN} {
		t.Run("sequence_by="+seq, func(t *testing.T) {
			h := newToastHarness(t)
			big := bigText("doc-3", 9<<10)
			cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.SequenceBy = seq })
			h.send(doc{op: "c", id: 1, small: 1, big: &big, bin: []byte{1, 2}, tags: []string{"x"}, lsn: 10},
				doc{op: "u", id: 1, small: 2, big: ptr(placeholder), bin: []byte(placeholder), tags: []string{placeholder}, lsn: 20},
				doc{op: "u", id: 1, small: 3, big: ptr(placeholder), bin: []byte(placeholder), tags: []string{placeholder}, lsn: 30})
			h.run(cfg, 3)
			want := []string{fmt.Sprintf("1 3 9216:%.8s 0102 [x] n", big)}
			if got := h.rows(); !slices.Equal(got, want) {
				t.Fatalf("rows\n%v\nwant\n%v", got, want)
			}
			if got := h.unavailable(unavailableFromFlush); got != 3 {
				t.Fatalf("unavailable values from the flush %v, want 3 (the winner's big, bin, tags)", got)
			}
		})
	}
}

// A key without a current value (no stored row: its insert came before the table, or it
// was deleted) gets NULL in a nullable column, counted and logged; a NOT NULL column
// cannot, so the change is dead-lettered not_null_violation and nothing of it written.
// A delete earlier in the flush ends the key's value too.
func TestUnavailableValueWithoutStoredRow(t *testing.T) {
	eachUpsertWrite(t, func(t *testing.T, write string) {
		h := newToastHarness(t)
		h.createDocsTable()
		big := bigText("doc-4", 9<<10)
		cfg := h.toastConfig(config.ModeUpsert, func(tb *config.Table) { tb.UpsertWrite = write })
		h.send(doc{op: "c", id: 9, small: 1, lsn: 5})
		h.run(cfg, 1)
		h.send(doc{op: "u", id: 1, small: 2, big: ptr(placeholder), lsn: 20},
			doc{op: "u", id: 2, small: 2, big: ptr("fine"), note: placeholder, lsn: 21},
			doc{op: "c", id: 3, small: 1, big: &big, lsn: 22}, doc{op: "d", id: 3, lsn: 23},
			doc{op: "u", id: 3, small: 2, big: ptr(placeholder), lsn: 24})
		h.run(cfg, 6)
		want := []string{"1 2 <nil> <nil> <nil> n", "3 2 <nil> <nil> <nil> n", "9 1 <nil> <nil> <nil> n"}
		if got := h.rows(); !slices.Equal(got, want) {
			t.Fatalf("rows\n%v\nwant\n%v", got, want)
		}
		if got, want := h.deadLetters(), []string{"not_null_violation:"}; !slices.Equal(got, want) {
			t.Fatalf("dead letters %v, want %v", got, want)
		}
		if n, d := h.unavailable(unavailableNull), h.unavailable(unavailableDead); n != 2 || d != 1 {
			t.Fatalf("null %v dead_lettered %v, want 2 and 1", n, d)
		}
	})
}

// A changelog keeps every change: a placeholder takes the value of the key's latest
// earlier change in the flush; in a later flush, NULL (a changelog is not read back).
func TestUnavailableValueChangelog(t *testing.T) {
	h := newToastHarness(t)
	big := bigText("doc-5", 9<<10)
	cfg := h.toastConfig(config.ModeChangelog, nil)
	h.send(doc{op: "c", id: 1, small: 1, big: &big, lsn: 10}, doc{op: "u", id: 1, small: 2, big: ptr(placeholder), lsn: 20})
	h.run(cfg, 2)
	h.send(doc{op: "u", id: 1, small: 3, big: ptr(placeholder), lsn: 30})
	h.run(cfg, 3)
	b := fmt.Sprintf("9216:%.8s", big)
	want := []string{"1 1 " + b + " <nil> <nil> n", "1 2 " + b + " <nil> <nil> n", "1 3 <nil> <nil> <nil> n"}
	if got := h.rows(); !slices.Equal(got, want) {
		t.Fatalf("rows\n%v\nwant\n%v", got, want)
	}
	if f, n := h.unavailable(unavailableFromFlush), h.unavailable(unavailableNull); f != 1 || n != 1 {
		t.Fatalf("from the flush %v, null %v; want 1 and 1", f, n)
	}
}
