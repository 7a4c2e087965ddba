package rowfill

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

func TestHeaderMap(t *testing.T) {
	h := func(k string, v []byte) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: v} }
	tests := []struct {
		name string
		in   []kgo.RecordHeader
		want string
	}{
		{"no headers: an empty map, not NULL", nil, "[]"},
		{"one", []kgo.RecordHeader{h("trace-id", []byte("abc"))}, `[trace-id=616263]`},
		// Kafka headers are an ordered list that may repeat a key (KIP-82), and a
		// map<string, binary> column keeps one value per key: the last one, like Java's
		// Headers.lastHeader and Flink's MAP<STRING, BYTES> headers column (whose dropped
		// repeats apache/flink-connector-kafka#258 describes), in the position the key
		// first appears. x-tag=tag1, x-tag=tag2, other=null gives x-tag → tag2 and
		// other → NULL (never X''); the dead-letter copy of a record keeps every header.
		{"repeats and null", []kgo.RecordHeader{h("x-tag", []byte("tag1")), h("x-tag", []byte("tag2")), h("other", nil)},
			`[x-tag=74616732 other=<nil>]`},
		{"empty is not null", []kgo.RecordHeader{h("e", []byte{})}, `[e=]`},
		{"a later null replaces a value", []kgo.RecordHeader{h("a", []byte{1}), h("b", []byte{2}), h("a", nil)}, `[a=<nil> b=02]`},
		// Header values are bytes, kept untouched: Azure Event Grid prefixes a binary type
		// byte (0xA1) that string-only consumers mangled; a zero byte and 0xFF too.
		{"binary", []kgo.RecordHeader{h("aeg-event-type", []byte("\xa1\x0cNotification")), h("bin", []byte{0x00, 0xFF})},
			`[aeg-event-type=a10c4e6f74696669636174696f6e bin=00ff]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := headerMap(tt.in)
			if got == nil {
				t.Fatal("headerMap returned nil: the column would be NULL, not an empty map")
			}
			var parts []string
			for _, e := range got {
				v := "<nil>"
				if e.Value != nil {
					v = fmt.Sprintf("%x", e.Value)
				}
				parts = append(parts, e.Key+"="+v)
			}
			if s := "[" + strings.Join(parts, " ") + "]"; s != tt.want {
				t.Errorf("got %s, want %s", s, tt.want)
			}
		})
	}
}

func TestStringKey(t *testing.T) {
	for _, ok := range [][]byte{nil, {}, []byte("k1"), []byte("Zoë"), {0x00, 0x00, 0x00, 0x0E, 0x11, 0x54}} {
		if err := checkStringKey(ok); err != nil {
			t.Errorf("checkStringKey(%x): %v", ok, err)
		}
	}
	err := checkStringKey([]byte{0xFF, 0xFE, 0x00})
	var de *decode.Error
	if !errors.As(err, &de) || de.Reason != decode.ReasonKeyDecodeError || de.Field != "_kafka_key" {
		t.Fatalf("checkStringKey(FF FE 00) = %v, want a key_decode_error at _kafka_key", err)
	}
	if want := "decode: key_decode_error at _kafka_key: decode key as string (table.key_format string): byte 0 (0xff) is not valid UTF-8"; err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
	if err := checkStringKey([]byte("ab\xc3")); err == nil || !strings.Contains(err.Error(), "byte 2 (0xc3)") {
		t.Errorf("truncated UTF-8: %v", err)
	}
}

func TestKeyDecoder(t *testing.T) {
	value := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "id", Type: deltalog.Long, Nullable: true}}}
	keyFields, _ := kafkacols.Fields([]string{kafkacols.Key}, kafkacols.KeyAvro, &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "order_id", Type: deltalog.Long, Nullable: true}, {Name: "region", Type: deltalog.String, Nullable: true}}})
	table := &deltalog.StructType{Fields: append(value.Fields, keyFields...)}
	pq, err := deltawriter.ParquetSchema(table, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := decode.ParseWriterSchema(3601, `{"type":"record","name":"OrderKey","fields":[{"name":"order_id","type":"long"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := compileKey(ws, keyFields[0], deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := kd.Decode([]byte{0x54}) // order_id 42
	if err != nil {
		t.Fatal(err)
	}
	oid, _ := pq.Lookup("_kafka_key", "order_id")
	reg, _ := pq.Lookup("_kafka_key", "region")
	var got []string
	for i, leaf := range kd.Leaves() {
		for _, v := range vals[i] {
			got = append(got, fmt.Sprintf("col%d=%v(r%d,d%d,c%d)", leaf, v, v.RepetitionLevel(), v.DefinitionLevel(), v.Column()))
		}
	}
	// The struct is present (def 1) and order_id set (def 2); region, absent from the key
	// schema, is null inside the present struct (def 1).
	want := []string{fmt.Sprintf("col%d=42(r0,d2,c%d)", oid.ColumnIndex, oid.ColumnIndex), fmt.Sprintf("col%d=<null>(r0,d1,c%d)", reg.ColumnIndex, reg.ColumnIndex)}
	if oid.ColumnIndex > reg.ColumnIndex {
		want[0], want[1] = want[1], want[0]
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("decoded key leaves %v, want %v", got, want)
	}
	for _, bad := range [][]byte{{}, {0x54, 0x00}, {0x80}} {
		if _, err := kd.Decode(bad); decode.ReasonOf(err) != decode.ReasonKeyDecodeError {
			t.Errorf("Decode(%x) = %v, want a key_decode_error", bad, err)
		}
	}

	// A key schema with a field the column lacks would lose it: key_decode_error.
	wide, _ := decode.ParseWriterSchema(3603, `{"type":"record","name":"OrderKey","fields":[{"name":"order_id","type":"long"},{"name":"shard","type":"int"}]}`)
	if _, err := compileKey(wide, keyFields[0], deltalog.ColumnMappingNone, pq); decode.ReasonOf(err) != decode.ReasonKeyDecodeError ||
		!strings.Contains(err.Error(), "key writer schema id 3603 has field shard, which column _kafka_key lacks") {
		t.Errorf("wider key schema: %v", err)
	}
	// A type that does not fit losslessly: key_decode_error.
	str, _ := decode.ParseWriterSchema(3604, `{"type":"record","name":"OrderKey","fields":[{"name":"order_id","type":"string"}]}`)
	if _, err := compileKey(str, keyFields[0], deltalog.ColumnMappingNone, pq); decode.ReasonOf(err) != decode.ReasonKeyDecodeError {
		t.Errorf("string order_id into a long column: %v", err)
	}
}
