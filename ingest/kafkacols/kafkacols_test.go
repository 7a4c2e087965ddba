package kafkacols

import (
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

func TestFieldsAndCheck(t *testing.T) {
	all := []string{Timestamp, Key, Headers, Topic, Partition, Offset} // any order in config
	fs, err := Fields(all, KeyBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := &deltalog.StructType{Fields: fs}
	b, _ := st.MarshalJSON()
	want := `{"type":"struct","fields":[{"name":"_kafka_key","type":"binary","nullable":true,"metadata":{}},` +
		`{"name":"_kafka_headers","type":{"type":"map","keyType":"string","valueType":"binary","valueContainsNull":true},"nullable":true,"metadata":{}},` +
		`{"name":"_kafka_topic","type":"string","nullable":true,"metadata":{}},{"name":"_kafka_partition","type":"integer","nullable":true,"metadata":{}},` +
		`{"name":"_kafka_offset","type":"long","nullable":true,"metadata":{}},{"name":"_kafka_timestamp","type":"timestamp","nullable":true,"metadata":{}}]}`
	if string(b) != want {
		t.Errorf("Fields:\n got %s\nwant %s", b, want)
	}
	if err := Check(st, all, KeyBytes); err != nil {
		t.Errorf("Check of the created columns: %v", err)
	}
	if err := Check(st, all, KeyString); err == nil || !strings.Contains(err.Error(), "column _kafka_key is binary, but ingestd writes string there (set table.key_format to match") {
		t.Errorf("string key on a binary column: %v", err)
	}
	if _, err := Fields([]string{Key}, KeyAvro, nil); err == nil {
		t.Error("an avro key without a key type must fail")
	}
	key := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "order_id", Type: deltalog.Long, Nullable: false}}}
	fs, err = Fields([]string{Key}, KeyAvro, key)
	if err != nil {
		t.Fatal(err)
	}
	if got := fs[0].Type.(*deltalog.StructType).Fields[0]; !got.Nullable || key.Fields[0].Nullable {
		t.Errorf("the created key struct's fields must be nullable, the key schema untouched: %+v", got)
	}
	if err := Check(&deltalog.StructType{Fields: fs}, []string{Key}, KeyAvro); err != nil {
		t.Errorf("avro key struct: %v", err)
	}

	bad := &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "_KAFKA_OFFSET", Type: deltalog.Integer, Nullable: true},
		{Name: "_kafka_headers", Type: &deltalog.MapType{KeyType: deltalog.String, ValueType: deltalog.Binary}, Nullable: true},
		{Name: "_kafka_key", Type: deltalog.Binary, Nullable: true},
	}}
	err = Check(bad, []string{Offset, Headers, Key, Topic}, KeyAvro)
	for _, w := range []string{
		"column _kafka_key is binary, but table.key_format avro needs a struct",
		"column _kafka_headers is map<string,binary>, but Kafka headers need map<string, binary> with nullable values",
		"column _kafka_topic is missing (add it: ALTER TABLE … ADD COLUMNS (_kafka_topic STRING), or remove topic from table.kafka_columns)",
		"column _KAFKA_OFFSET is integer, but ingestd writes long there (remove offset from table.kafka_columns, or use another table)",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Check error %v\n lacks %q", err, w)
		}
	}
}
