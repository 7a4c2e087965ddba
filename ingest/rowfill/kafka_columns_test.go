package rowfill

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// kafkaFillSetup is a table of value column id plus every Kafka column (key_format
// format), with _kafka_offset NOT NULL as a Spark-created table may have it, and a value
// decoder compiled as the flush compiles it (ValueTable).
func kafkaFillSetup(t *testing.T, format string) (*decode.Decoder, *parquet.Schema, *rowView, *kafkaFill) {
	t.Helper()
	ws, err := decode.ParseWriterSchema(101, `{"type":"record","name":"r","fields":[{"name":"id","type":"long"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Table: config.Table{URI: "file:///t", KafkaColumns: kafkacols.All, KeyFormat: format}}
	kf, err := kafkacols.Fields(cfg.Table.KafkaColumns, format, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range kf {
		if f.Name == "_kafka_offset" {
			f.Nullable = false
		}
	}
	schema := &deltalog.StructType{Fields: append(slices.Clone(ws.Delta.Fields), kf...)}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := decode.Compile(ws, ValueTable(schema, kafkacols.Columns(cfg.Table.KafkaColumns)), deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatalf("compile against a table with a NOT NULL Kafka column: %v", err)
	}
	row, err := newRowView(schema, deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatal(err)
	}
	fills, err := fillsFor(cfg, schema, deltalog.ColumnMappingNone, pq, nil, Options{Keys: newKeySchemas()})
	if err != nil || len(fills) != 1 {
		t.Fatalf("fillsFor: %v, %d fills", err, len(fills))
	}
	return dec, pq, row, fills[0].(*kafkaFill)
}

// leafString renders a leaf's values with their levels: v(rep,def).
func leafString(vs []parquet.Value) string {
	var parts []string
	for _, v := range vs {
		s := "null"
		if !v.IsNull() {
			switch v.Kind() {
			case parquet.ByteArray:
				s = fmt.Sprintf("%q", v.ByteArray())
			default:
				s = v.String()
			}
		}
		parts = append(parts, fmt.Sprintf("%s(%d,%d)", s, v.RepetitionLevel(), v.DefinitionLevel()))
	}
	return strings.Join(parts, " ")
}

func TestKafkaFillLevels(t *testing.T) {
	dec, pq, row, kf := kafkaFillSetup(t, kafkacols.KeyBytes)
	col := func(path ...string) int {
		lc, ok := pq.Lookup(path...)
		if !ok {
			t.Fatalf("no column %v", path)
		}
		return lc.ColumnIndex
	}
	hk, hv := col("_kafka_headers", "key_value", "key"), col("_kafka_headers", "key_value", "value")
	h := func(k string, v []byte) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: v} }
	ts := time.Date(2026, 12, 1, 10, 0, 0, 123_000_000, time.UTC)
	tests := []struct {
		name     string
		rec      *kgo.Record
		key      string
		hk, hv   string
		topic    string
		part     string
		off, tsv string
	}{
		{"null key, no headers: NULL key, empty map", &kgo.Record{Topic: "orders", Partition: 3, Offset: 10, Timestamp: ts},
			"null(0,0)", "null(0,1)", "null(0,1)", `"orders"(0,1)`, "3(0,1)", "10(0,1)", "1796119200123000(0,1)"},
		{"empty key is X'', one header", &kgo.Record{Topic: "orders", Partition: 3, Offset: 11, Timestamp: ts, Key: []byte{}, Headers: []kgo.RecordHeader{h("trace-id", []byte("abc"))}},
			`""(0,1)`, `"trace-id"(0,2)`, `"abc"(0,3)`, `"orders"(0,1)`, "3(0,1)", "11(0,1)", "1796119200123000(0,1)"},
		{"repeated key keeps the last, null value is NULL", &kgo.Record{Topic: "orders", Partition: 3, Offset: 12, Timestamp: ts, Key: []byte("k1"),
			Headers: []kgo.RecordHeader{h("x-tag", []byte("tag1")), h("x-tag", []byte("tag2")), h("other", nil)}},
			`"k1"(0,1)`, `"x-tag"(0,2) "other"(1,2)`, `"tag2"(0,3) null(1,2)`, `"orders"(0,1)`, "3(0,1)", "12(0,1)", "1796119200123000(0,1)"},
		{"binary key and values untouched", &kgo.Record{Topic: "orders", Partition: 3, Offset: 13, Timestamp: ts, Key: []byte{0xFF, 0xFE, 0x00},
			Headers: []kgo.RecordHeader{h("bin", []byte{0x00, 0xFF})}},
			`"\xff\xfe\x00"(0,1)`, `"bin"(0,2)`, `"\x00\xff"(0,3)`, `"orders"(0,1)`, "3(0,1)", "13(0,1)", "1796119200123000(0,1)"},
	}
	cols := newCols(pq)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row.begin(cols)
			if err := dec.DecodeColumns(nil, []byte{byte(2 * (i + 10))}, cols); err != nil {
				t.Fatal(err)
			}
			if err := kf.fill(tt.rec, row); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{"key": leafString(row.leaf(col("_kafka_key"))), "hk": leafString(row.leaf(hk)), "hv": leafString(row.leaf(hv)),
				"topic": leafString(row.leaf(col("_kafka_topic"))), "part": leafString(row.leaf(col("_kafka_partition"))),
				"off": leafString(row.leaf(col("_kafka_offset"))), "ts": leafString(row.leaf(col("_kafka_timestamp")))}
			want := map[string]string{"key": tt.key, "hk": tt.hk, "hv": tt.hv, "topic": tt.topic, "part": tt.part, "off": tt.off, "ts": tt.tsv}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("got  %v\nwant %v", got, want)
			}
			for c := range cols {
				for _, v := range row.leaf(c) {
					if v.Column() != c {
						t.Errorf("leaf %d holds a value of column %d", c, v.Column())
					}
				}
			}
		})
	}
}

func TestKafkaFillStringKey(t *testing.T) {
	dec, pq, row, kf := kafkaFillSetup(t, kafkacols.KeyString)
	cols := newCols(pq)
	row.begin(cols)
	if err := dec.DecodeColumns(nil, []byte{2}, cols); err != nil {
		t.Fatal(err)
	}
	err := kf.fill(&kgo.Record{Topic: "orders", Partition: 3, Offset: 13, Key: []byte{0xFF, 0xFE, 0x00}}, row)
	if decode.ReasonOf(err) != decode.ReasonKeyDecodeError || decode.FieldOf(err) != "_kafka_key" {
		t.Fatalf("a key that is not UTF-8: %v, want key_decode_error at _kafka_key", err)
	}
}

func TestKafkaFillAvroKeyErrors(t *testing.T) {
	ks := newKeySchemas()
	k := &kafkaFill{format: kafkacols.KeyAvro, schemas: ks, decs: map[int]*keyDecoder{}, decErrs: map[int]error{},
		key: topColumn{field: &deltalog.StructField{Name: "_kafka_key", Nullable: true}}}
	ks.Fails[7] = &decode.Error{Reason: decode.ReasonSchemaNotFound, Err: fmt.Errorf("registry: 404")}
	for name, key := range map[string][]byte{
		"empty key":             {},
		"not framed (JSON)":     []byte("{}"),
		"too short for a frame": {0, 0, 1},
		"unknown schema id":     {0, 0, 0, 0, 7, 0x54},
	} {
		err := k.fillKey(key, nil)
		if decode.ReasonOf(err) != decode.ReasonKeyDecodeError {
			t.Errorf("%s: %v, want key_decode_error", name, err)
		}
	}
}

// BenchmarkKafkaFill is the per-record cost of the Kafka columns (every column, bytes
// key, three headers with a repeat) on top of a one-column value decode: the decode alone
// (none) beside decode + fill (all), in one run.
func BenchmarkKafkaFill(b *testing.B) {
	t := &testing.T{}
	dec, pq, row, kf := kafkaFillSetup(t, kafkacols.KeyBytes)
	rec := &kgo.Record{Topic: "orders", Partition: 3, Offset: 12, Timestamp: time.Unix(1_700_000_000, 0), Key: []byte("order-000042"),
		Headers: []kgo.RecordHeader{{Key: "x-tag", Value: []byte("tag1")}, {Key: "x-tag", Value: []byte("tag2")}, {Key: "trace-id", Value: []byte("4bf92f3577b34da6a3ce929d0e0e4736")}}}
	for _, fill := range []bool{false, true} {
		name := map[bool]string{false: "none", true: "all"}[fill]
		b.Run(name, func(b *testing.B) {
			cols := newCols(pq)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if i%4096 == 0 {
					resetCols(cols)
				}
				row.begin(cols)
				if err := dec.DecodeColumns(nil, []byte{0x54}, cols); err != nil {
					b.Fatal(err)
				}
				if fill {
					if err := kf.fill(rec, row); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// With Options.Origin (a replay's: the original record a dead letter keeps) the Kafka
// columns hold the topic, partition, offset, headers and timestamp it gives, not the
// record's (the dead-letter topic's, and the time it was dead-lettered): here a source
// timestamp, 9999-12-31T23:59:59.999Z, that no franz-go-produced record can carry.
func TestKafkaFillUsesOrigin(t *testing.T) {
	dec, pq, row, kf := kafkaFillSetup(t, kafkacols.KeyBytes)
	src := []kgo.RecordHeader{{Key: "x-tag", Value: []byte("tag1")}, {Key: "x-tag", Value: []byte("tag2")}}
	var asked *kgo.Record
	kf.origin = func(r *kgo.Record) Source {
		asked = r
		return Source{Topic: "orders", Partition: 3, Offset: 12, Headers: src, TimestampMs: 253402300799999}
	}
	// The dead letter as it sits in the DLQ, with headers of its own.
	r := &kgo.Record{Topic: "orders.dlq", Partition: 0, Offset: 77, Key: []byte("k1"), Timestamp: time.UnixMilli(1_700_000_000_123),
		Headers: []kgo.RecordHeader{{Key: "ingestd.error.reason", Value: []byte("schema_mismatch")}}}
	cols := newCols(pq)
	row.begin(cols)
	if err := dec.DecodeColumns(nil, []byte{2}, cols); err != nil {
		t.Fatal(err)
	}
	if err := kf.fill(r, row); err != nil {
		t.Fatal(err)
	}
	if asked != r {
		t.Errorf("Origin asked for %v, want the record filled", asked)
	}
	col := func(path ...string) []parquet.Value { lc, _ := pq.Lookup(path...); return row.leaf(lc.ColumnIndex) }
	got := fmt.Sprintf("%s %s %s %s %s %s", leafString(col("_kafka_topic")), leafString(col("_kafka_partition")), leafString(col("_kafka_offset")),
		leafString(col("_kafka_headers", "key_value", "key")), leafString(col("_kafka_headers", "key_value", "value")), leafString(col("_kafka_timestamp")))
	if want := `"orders"(0,1) 3(0,1) 12(0,1) "x-tag"(0,2) "tag2"(0,3) 253402300799999000(0,1)`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func newKeySchemas() KeySchemas {
	return KeySchemas{Schemas: map[int]*decode.WriterSchema{}, Fails: map[int]*decode.Error{}}
}
