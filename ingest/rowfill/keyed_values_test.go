package rowfill

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
)

// A tombstone's Avro or Kafka Connect JSON key is read by the decoder the table's rows are
// read with, so that it names the key its row was written with: a date or timestamp key
// (Avro logical types, Connect and Debezium types) converts exactly as the same value in
// a record, whatever the process's time zone; one outside Delta's range is missing_key at
// the column (it names no row) instead of wrapping to a key inside it.
func TestTombstoneKeyTimes(t *testing.T) {
	// The process zone must not move a local-timestamp key (hamba/avro's time.Time would).
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = ny

	zigzag := func(v int64) []byte { return binary.AppendVarint(nil, v) }
	for _, c := range []struct {
		name   string
		col    deltalog.DataType
		avro   string // the key field's Avro type; "" for a Connect JSON key
		body   []byte // Avro: the key's body
		ctype  string // Connect JSON: the field's type, name and payload value
		cname  string
		cvalue string
		want   int64 // µs or days
		err    string
	}{
		{name: "timestamp-millis", col: deltalog.Timestamp, avro: `{"type":"long","logicalType":"timestamp-millis"}`, body: zigzag(253_402_300_799_999), want: 253_402_300_799_999_000},
		{name: "timestamp-millis 2^61 (would wrap to 0)", col: deltalog.Timestamp, avro: `{"type":"long","logicalType":"timestamp-millis"}`, body: zigzag(1 << 61),
			err: "decode: missing_key at k: decode a tombstone's key: decode: decode_error at k: timestamp 2305843009213693952 ms since the epoch"},
		{name: "local-timestamp-micros under New York", col: deltalog.TimestampNtz, avro: `{"type":"long","logicalType":"local-timestamp-micros"}`, body: zigzag(1_700_000_000_000_000), want: 1_700_000_000_000_000},
		{name: "local-timestamp-micros at the end", col: deltalog.TimestampNtz, avro: `{"type":"long","logicalType":"local-timestamp-micros"}`, body: zigzag(deltalog.TimestampMaxMicros), want: deltalog.TimestampMaxMicros},
		{name: "date past the end", col: deltalog.Date, avro: `{"type":"int","logicalType":"date"}`, body: zigzag(2_932_897),
			err: "decode: missing_key at k: decode a tombstone's key: decode: decode_error at k: date 2932897 days since 1970-01-01 (10000-01-01) is outside Delta's range"},
		{name: "Debezium MicroTimestamp", col: deltalog.TimestampNtz, avro: `{"type":"long","connect.name":"io.debezium.time.MicroTimestamp"}`, body: zigzag(-1), want: -1},
		{name: "Connect Timestamp", col: deltalog.Timestamp, ctype: "int64", cname: "org.apache.kafka.connect.data.Timestamp", cvalue: "253402300799999", want: 253_402_300_799_999_000},
		{name: "Connect Timestamp 2^61", col: deltalog.Timestamp, ctype: "int64", cname: "org.apache.kafka.connect.data.Timestamp", cvalue: "2305843009213693952",
			err: "decode: missing_key at k: decode a tombstone's key: decode: decode_error at k: timestamp 2305843009213693952 ms since the epoch"},
		{name: "Connect Date", col: deltalog.Date, ctype: "int32", cname: "org.apache.kafka.connect.data.Date", cvalue: "-719162", want: -719162},
		{name: "Debezium Date past the end", col: deltalog.Date, ctype: "int32", cname: "io.debezium.time.Date", cvalue: "2932897", err: "is outside Delta's range"},
		{name: "Debezium MicroTimestamp (JSON)", col: deltalog.TimestampNtz, ctype: "int64", cname: "io.debezium.time.MicroTimestamp", cvalue: "1700000000000000", want: 1_700_000_000_000_000},
		{name: "Debezium Timestamp (JSON)", col: deltalog.TimestampNtz, ctype: "int64", cname: "io.debezium.time.Timestamp", cvalue: "1700000000123", want: 1_700_000_000_123_000},
		{name: "Debezium ZonedTimestamp", col: deltalog.Timestamp, ctype: "string", cname: "io.debezium.time.ZonedTimestamp", cvalue: `"2026-01-01T05:30:00+05:30"`, want: 1_767_225_600_000_000},
		{name: "Debezium ZonedTimestamp in year 0", col: deltalog.Timestamp, ctype: "string", cname: "io.debezium.time.ZonedTimestamp", cvalue: `"0000-12-31T23:59:59Z"`,
			err: `ZonedTimestamp "0000-12-31T23:59:59Z" is outside Delta's range`},
	} {
		k := &keyFill{key: []keyColumn{{name: "k", field: &deltalog.StructField{Name: "k", Type: c.col}}}}
		var ws *decode.WriterSchema
		body := c.body
		if c.avro != "" {
			if ws, err = decode.ParseWriterSchema(7, `{"type":"record","name":"K","fields":[{"name":"k","type":`+c.avro+`}]}`); err != nil {
				t.Fatal(err)
			}
		} else {
			doc := `{"schema":{"type":"struct","fields":[{"field":"k","type":"` + c.ctype + `","optional":false,"name":"` + c.cname + `"}]},"payload":{"k":` + c.cvalue + `}}`
			ws, body, err = decode.NewConnectSource().Writer(nil, []byte(doc))
			if err == nil {
				body, err = ws.Transcode(body)
			}
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		vals, err := k.decodeKey(ws, body, "key")
		switch {
		case c.err != "":
			if decode.ReasonOf(err) != decode.ReasonMissingKey || decode.FieldOf(err) != "k" || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v %v, want missing_key at k with %q", c.name, vals, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.col == deltalog.Date && int64(vals[0].Int32()) != c.want, c.col != deltalog.Date && vals[0].Int64() != c.want:
			t.Errorf("%s: %v, want %d", c.name, vals[0], c.want)
		}
	}
}

// A one-column key may be a primitive Avro key (read as a record of one field named after
// the column); a record key names each key column by a field, other fields ignored, and
// one without a key column's field, or with a field that does not fit it, names no key.
// An integer field may be wider than its column when its value fits.
func TestTombstoneKeyShapes(t *testing.T) {
	two := &keyFill{key: []keyColumn{
		{name: "id", field: &deltalog.StructField{Name: "id", Type: deltalog.Long}},
		{name: "ts", field: &deltalog.StructField{Name: "ts", Type: deltalog.Timestamp}},
	}}
	one := &keyFill{key: []keyColumn{{name: "ts", field: &deltalog.StructField{Name: "ts", Type: deltalog.Timestamp}}}}
	small := &keyFill{key: []keyColumn{{name: "n", field: &deltalog.StructField{Name: "n", Type: deltalog.Integer}}}}
	micros := &keyFill{key: []keyColumn{{name: "t", field: &deltalog.StructField{Name: "t", Type: deltalog.Long}}}}
	day := &keyFill{key: []keyColumn{{name: "a\x7fb", field: &deltalog.StructField{Name: "a\x7fb", Type: deltalog.Date}}}}
	id := &keyFill{key: []keyColumn{{name: "id", field: &deltalog.StructField{Name: "id", Type: deltalog.Long}}}}
	sym := &keyFill{key: []keyColumn{{name: "s", field: &deltalog.StructField{Name: "s", Type: deltalog.String}}}}
	enc := func(vs ...int64) (b []byte) {
		for _, v := range vs {
			b = binary.AppendVarint(b, v)
		}
		return b
	}
	for _, c := range []struct {
		name   string
		k      *keyFill
		schema string
		body   []byte
		want   []int64
		err    string
	}{
		{"primitive", one, `{"type":"long","logicalType":"timestamp-micros"}`, enc(-5), []int64{-5}, ""},
		{"record, an extra field and names in another case", two, `{"type":"record","name":"K","fields":[{"name":"shard","type":"string"},{"name":"TS","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"ID","type":"int"}]}`,
			append(append(enc(2), 'e', 'u'), enc(7, -42)...), []int64{-42, 7000}, ""},
		{"a long key for an integer column", small, `{"type":"record","name":"K","fields":[{"name":"n","type":"long"}]}`, enc(-1 << 31), []int64{-1 << 31}, ""},
		{"a long key beyond an integer column", small, `{"type":"record","name":"K","fields":[{"name":"n","type":"long"}]}`, enc(1 << 31), nil,
			"decode: missing_key at n: a tombstone's key: 2147483648 does not fit key column n (integer)"},
		// A primitive key keeps its properties: Debezium's Time (ms since midnight) is µs
		// in its long column, as in the row (a plain int would name 5000 µs, another row).
		{"primitive Debezium Time", micros, `{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Time"}`, enc(5000), []int64{5_000_000}, ""},
		{"primitive Debezium Date, a column name JSON must escape", day, `{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Date"}`, enc(19000), []int64{19000}, ""},
		{"an enum named like the wrapper", sym, `{"type":"enum","name":"ingestd_tombstone_key","symbols":["A","B"]}`, enc(1), nil, ""},
		{"nullable record", id, `["null",{"type":"record","name":"K","fields":[{"name":"id","type":"long"}]}]`, enc(1, 42), []int64{42}, ""},
		{"nullable record, null", id, `["null",{"type":"record","name":"K","fields":[{"name":"id","type":"long"}]}]`, enc(0), nil, "decode: missing_key: a tombstone's key is null"},
		{"primitive for two columns", two, `"long"`, enc(1), nil, "decode: missing_key: a tombstone's key: its long schema is not a record with the key columns"},
		{"no field for a key column", two, `{"type":"record","name":"K","fields":[{"name":"id","type":"long"}]}`, enc(1), nil, "decode: missing_key at ts: a tombstone's key has no value for key column ts"},
		{"null key column", two, `{"type":"record","name":"K","fields":[{"name":"id","type":"long"},{"name":"ts","type":["null",{"type":"long","logicalType":"timestamp-micros"}]}]}`,
			enc(1, 0), nil, "decode: missing_key at ts: a tombstone's key has no value for key column ts"},
		{"a field that does not fit", two, `{"type":"record","name":"K","fields":[{"name":"id","type":"string"},{"name":"ts","type":"long"}]}`,
			append(enc(1), '7'), nil, "decode: missing_key at id: a tombstone's key: decode: schema_mismatch at id"},
	} {
		ws, err := decode.ParseWriterSchema(9, c.schema)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := c.k.decodeKey(ws, c.body, "key")
		if c.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), c.err) {
				t.Errorf("%s: %v %v, want %q", c.name, vals, err, c.err)
			}
			continue
		}
		if c.k == sym {
			if err != nil || string(vals[0].ByteArray()) != "B" {
				t.Errorf("%s: %v %v, want B", c.name, vals, err)
			}
			continue
		}
		if err != nil || len(vals) != len(c.want) {
			t.Errorf("%s: %v %v", c.name, vals, err)
			continue
		}
		for i, v := range vals {
			x := v.Int64()
			if v.Kind() == parquet.Int32 {
				x = int64(v.Int32())
			}
			if x != c.want[i] {
				t.Errorf("%s: key column %d = %v, want %d", c.name, i, v, c.want[i])
			}
		}
	}
}

// A primitive Kafka Connect JSON key (ExtractField$Key leaves one) names a one-column key
// as a primitive Avro key does, its Connect type kept; a struct key is not rewritten.
func TestConnectPrimitiveKey(t *testing.T) {
	k := &keyFill{key: []keyColumn{{name: "day", field: &deltalog.StructField{Name: "day", Type: deltalog.Date}}}}
	key := connectRecordKey([]byte(`{"schema":{"type":"int32","optional":false,"name":"io.debezium.time.Date"},"payload":19000}`), "day")
	if want := `{"schema":{"type":"struct","optional":false,"fields":[{"field":"day","name":"io.debezium.time.Date","optional":false,"type":"int32"}]},"payload":{"day":19000}}`; string(key) != want {
		t.Fatalf("wrapped key\n got %s\nwant %s", key, want)
	}
	ws, body, err := decode.NewConnectSource().Writer(nil, key)
	if err == nil {
		body, err = ws.Transcode(body)
	}
	if err != nil {
		t.Fatal(err)
	}
	vals, err := k.decodeKey(ws, body, "key")
	if err != nil || vals[0].Int32() != 19000 {
		t.Errorf("%v %v, want day 19000", vals, err)
	}
	for _, same := range []string{
		`{"schema":{"type":"struct","fields":[{"field":"day","type":"int32"}]},"payload":{"day":1}}`,
		`not JSON`, `{"payload":1}`, `[1]`,
	} {
		if got := connectRecordKey([]byte(same), "day"); got != nil {
			t.Errorf("%s: rewritten as %s", same, got)
		}
	}
}
