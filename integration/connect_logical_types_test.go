package integration

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// lcField is one column of a Debezium-captured table: its value schema as a Connect Avro
// converter (AvroData: connect.name, connect.parameters, and a standard logicalType for
// Connect's own types) and as JsonConverter (name, parameters) write it.
type lcField struct{ name, avro, connect string }

var lcFields = []lcField{
	{"dec", `{"type":"bytes","scale":2,"precision":10,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}`,
		`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"}}`},
	{"dec0", `{"type":"bytes","scale":0,"precision":64,"connect.version":1,"connect.parameters":{"scale":"0"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}`,
		`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"0"}}`},
	{"dec38", `{"type":"bytes","scale":10,"precision":38,"connect.version":1,"connect.parameters":{"scale":"10","connect.decimal.precision":"38"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}`,
		`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"10","connect.decimal.precision":"38"}}`},
	{"vdec", `{"type":"record","name":"VariableScaleDecimal","namespace":"io.debezium.data","fields":[{"name":"scale","type":"int"},{"name":"value","type":"bytes"}],"connect.doc":"Variable scaled decimal","connect.version":1,"connect.name":"io.debezium.data.VariableScaleDecimal"}`,
		`{"type":"struct","fields":[{"type":"int32","optional":false,"field":"scale"},{"type":"bytes","optional":false,"field":"value"}],"optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,"doc":"Variable scaled decimal"}`},
	{"ts_ms", `{"type":"long","connect.version":1,"connect.name":"io.debezium.time.Timestamp"}`, `{"type":"int64","optional":true,"name":"io.debezium.time.Timestamp","version":1}`},
	{"ts_us", `{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroTimestamp"}`, `{"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1}`},
	{"ts_ns", `{"type":"long","connect.version":1,"connect.name":"io.debezium.time.NanoTimestamp"}`, `{"type":"int64","optional":true,"name":"io.debezium.time.NanoTimestamp","version":1}`},
	{"tstz", `{"type":"string","connect.version":1,"connect.name":"io.debezium.time.ZonedTimestamp"}`, `{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","version":1}`},
	{"d", `{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Date"}`, `{"type":"int32","optional":true,"name":"io.debezium.time.Date","version":1}`},
	{"t_ms", `{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Time"}`, `{"type":"int32","optional":true,"name":"io.debezium.time.Time","version":1}`},
	{"t_us", `{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroTime"}`, `{"type":"int64","optional":true,"name":"io.debezium.time.MicroTime","version":1}`},
	{"t_ns", `{"type":"long","connect.version":1,"connect.name":"io.debezium.time.NanoTime"}`, `{"type":"int64","optional":true,"name":"io.debezium.time.NanoTime","version":1}`},
	{"ttz", `{"type":"string","connect.version":1,"connect.name":"io.debezium.time.ZonedTime"}`, `{"type":"string","optional":true,"name":"io.debezium.time.ZonedTime","version":1}`},
	{"js", `{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}`, `{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1}`},
	{"uid", `{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Uuid"}`, `{"type":"string","optional":true,"name":"io.debezium.data.Uuid","version":1}`},
	{"en", `{"type":"string","connect.version":1,"connect.parameters":{"allowed":"sad,ok,happy"},"connect.name":"io.debezium.data.Enum"}`,
		`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"sad,ok,happy"}}`},
	{"dur", `{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroDuration"}`, `{"type":"int64","optional":true,"name":"io.debezium.time.MicroDuration","version":1}`},
	{"ivl", `{"type":"string","connect.version":1,"connect.name":"io.debezium.time.Interval"}`, `{"type":"string","optional":true,"name":"io.debezium.time.Interval","version":1}`},
	{"bits", `{"type":"bytes","connect.version":1,"connect.parameters":{"length":"3"},"connect.name":"io.debezium.data.Bits"}`,
		`{"type":"bytes","optional":true,"name":"io.debezium.data.Bits","version":1,"parameters":{"length":"3"}}`},
	{"cdate", `{"type":"int","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Date","logicalType":"date"}`,
		`{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1}`},
	{"ctime", `{"type":"int","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Time","logicalType":"time-millis"}`,
		`{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Time","version":1}`},
	{"cts", `{"type":"long","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Timestamp","logicalType":"timestamp-millis"}`,
		`{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1}`},
}

// lcGeo is a PostGIS point column: no Delta type holds it.
var lcGeo = lcField{"geo",
	`{"type":"record","name":"Point","namespace":"io.debezium.data.geometry","fields":[{"name":"x","type":"double"},{"name":"y","type":"double"},{"name":"wkb","type":["null","bytes"],"default":null},{"name":"srid","type":["null","int"],"default":null}],"connect.version":1,"connect.name":"io.debezium.data.geometry.Point"}`,
	`{"type":"struct","fields":[{"type":"float64","optional":false,"field":"x"},{"type":"float64","optional":false,"field":"y"},{"type":"bytes","optional":true,"field":"wkb"},{"type":"int32","optional":true,"field":"srid"}],"optional":true,"name":"io.debezium.data.geometry.Point","version":1}`}

func lcAvroSchema(fields []lcField) string {
	var b strings.Builder
	b.WriteString(`{"type":"record","name":"Value","namespace":"dbserver1.public.alltypes","fields":[{"name":"id","type":"int"}`)
	for _, f := range fields {
		fmt.Fprintf(&b, `,{"name":%q,"type":["null",%s],"default":null}`, f.name, f.avro)
	}
	b.WriteString(`],"connect.name":"dbserver1.public.alltypes.Value"}`)
	return b.String()
}

func lcConnectSchema(fields []lcField) string {
	var b strings.Builder
	b.WriteString(`{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}`)
	for _, f := range fields {
		b.WriteString("," + strings.Replace(f.connect, "{", fmt.Sprintf(`{"field":%q,`, f.name), 1))
	}
	b.WriteString(`],"optional":false,"name":"dbserver1.public.alltypes.Value"}`)
	return b.String()
}

// lcVdec is a VariableScaleDecimal value.
type lcVdec struct {
	scale int32
	value []byte
}

// lcUnscaled is Java's BigInteger.toByteArray of s.
func lcUnscaled(s string) []byte {
	x, _ := new(big.Int).SetString(s, 10)
	n := len(x.Bytes()) + 1
	u := new(big.Int).Set(x)
	if x.Sign() < 0 {
		u.Add(u, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	b := u.FillBytes(make([]byte, n))
	for len(b) > 1 && ((b[0] == 0 && b[1]&0x80 == 0) || (b[0] == 0xff && b[1]&0x80 != 0)) {
		b = b[1:]
	}
	return b
}

// lcAvro is the Confluent-framed Avro of one row (values in field order, nil: NULL).
func lcAvro(schemaID int, id int32, row []any) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(schemaID))
	b = binary.AppendVarint(b, int64(id))
	str := func(s []byte) { b = append(binary.AppendVarint(b, int64(len(s))), s...) }
	for _, v := range row {
		if v == nil {
			b = binary.AppendVarint(b, 0)
			continue
		}
		b = binary.AppendVarint(b, 1)
		switch v := v.(type) {
		case int32:
			b = binary.AppendVarint(b, int64(v))
		case int64:
			b = binary.AppendVarint(b, v)
		case string:
			str([]byte(v))
		case []byte:
			str(v)
		case lcVdec:
			b = binary.AppendVarint(b, int64(v.scale))
			str(v.value)
		}
	}
	return b
}

// lcConnect is one row as JsonConverter writes it with schemas.enable.
func lcConnect(t *testing.T, fields []lcField, id int32, row []any) []byte {
	payload := map[string]any{"id": id}
	for i, v := range row {
		switch x := v.(type) {
		case []byte:
			v = base64.StdEncoding.EncodeToString(x)
		case lcVdec:
			v = map[string]any{"scale": x.scale, "value": base64.StdEncoding.EncodeToString(x.value)}
		}
		payload[fields[i].name] = v
	}
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"schema":` + lcConnectSchema(fields) + `,"payload":` + string(p) + `}`)
}

// TestConnectLogicalTypes lands a table with every Kafka Connect and Debezium logical type
// ingestd maps, produced in the shape Debezium's records have (a value schema with
// connect.name properties, registered in the real registry, Confluent-framed; and the same
// rows as Kafka Connect JSON), and reads both tables back with Spark and delta-rs: the
// same column types and exact values from both formats. A PostGIS point column is an
// unsupported_type dead letter naming the column and the logical type.
func TestConnectLogicalTypes(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	avroTopic, jsonTopic, dlq := createTopic(t, s, "lt.avro", 1), createTopic(t, s, "lt.json", 1), createTopic(t, s, "lt.dlq", 1)

	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	value, err := reg.CreateSchema(ctx, avroTopic+"-value", sr.Schema{Schema: lcAvroSchema(lcFields)})
	if err != nil {
		t.Fatalf("register the value schema: %v", err)
	}
	geo, err := reg.CreateSchema(ctx, avroTopic+"-geo-value", sr.Schema{Schema: lcAvroSchema([]lcField{lcGeo})})
	if err != nil {
		t.Fatalf("register the point schema: %v", err)
	}
	rows := [][]any{
		{lcUnscaled("-1234567"), lcUnscaled("-1"), lcUnscaled("12345678901234567890123456789012345678"), lcVdec{4, lcUnscaled("-123450")},
			int64(-1), int64(-1), int64(-1), "2026-12-06T12:00:00.123456789+05:30", int32(-1), int32(86_399_999), int64(86_399_999_999), int64(999),
			"14:30:00.123456+02:00", `{"a": [1, 2]}`, "7b3ad5b4-1c1e-4c2b-9c6a-2f0d8f6c1e11", "happy", int64(-3_600_000_000), "P1Y2M3DT4H5M6.78S",
			[]byte{0x05}, int32(-719162), int32(3_723_004), int64(-86_400_000)},
		{lcUnscaled("0"), lcUnscaled("99999999999999999999999999999999999999"), lcUnscaled("-99999999999999999999999999999999999999"), lcVdec{3, lcUnscaled("5")},
			int64(1_700_000_000_123), int64(-62_135_596_800_000_000), int64(1_700_000_000_123_456_789), "1969-12-31T23:59:59.9999995Z", int32(2_932_896), int32(0), int64(0), int64(86_399_999_999_999),
			"00:00:00Z", "null", "00000000-0000-0000-0000-000000000000", "sad", int64(0), "PT0S",
			[]byte{}, int32(0), int32(0), int64(0)},
		make([]any, len(lcFields)),
	}
	rows[2][3] = lcVdec{-3, lcUnscaled("12")}
	var recs []*kgo.Record
	for i, row := range rows {
		recs = append(recs, &kgo.Record{Topic: avroTopic, Value: lcAvro(value.ID, int32(i+1), row)},
			&kgo.Record{Topic: jsonTopic, Value: lcConnect(t, lcFields, int32(i+1), row)})
	}
	recs = append(recs, &kgo.Record{Topic: avroTopic, Value: lcAvro(geo.ID, 4, []any{nil})},
		&kgo.Record{Topic: jsonTopic, Value: lcConnect(t, []lcField{lcGeo}, 4, []any{nil})})
	// One unit past an end of Delta's date and timestamp range, in four of the forms
	// (offsets 4–7, ids 5–8): decode_error dead letters at the field, so that the table
	// stays readable (a file with such a value has statistics delta-rs cannot parse).
	outOfRange := []struct {
		field string
		v     any
	}{
		{"ts_ms", int64(253_402_300_800_000)},   // 10000-01-01T00:00:00.000
		{"tstz", "0000-12-31T23:59:59.999999Z"}, // PostgreSQL's '0001-12-31 BC'
		{"d", int32(2_932_897)},                 // 10000-01-01
		{"cts", int64(-62_135_596_800_001)},     // 0000-12-31T23:59:59.999Z
	}
	for i, c := range outOfRange {
		row := make([]any, len(lcFields))
		row[slices.IndexFunc(lcFields, func(f lcField) bool { return f.name == c.field })] = c.v
		recs = append(recs, &kgo.Record{Topic: avroTopic, Value: lcAvro(value.ID, int32(5+i), row)},
			&kgo.Record{Topic: jsonTopic, Value: lcConnect(t, lcFields, int32(5+i), row)})
	}
	if err := kafkaClient(t, s).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	pipeline := func(name, format, topic, extra string) {
		writePipeline(t, cfgDir, name, fmt.Sprintf(`name: %s
format: %s
%s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
table: {uri: "file://%s", create: true}
schema: {policy: evolve, on_incompatible: dead_letter, allow_table_features: [timestampNtz]}
dead_letter: {topic: %s}
batch: {max_records: 2000, max_age: 300ms}
`, name, format, extra, s.brokers, topic, name, time.Now().UnixNano(), filepath.Join(dir, name), dlq))
	}
	pipeline("avro", "avro", avroTopic, fmt.Sprintf("schema_registry: {url: %q}", s.registry))
	pipeline("conn", "connect_json", jsonTopic, "")
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "every record to be handled", func() bool {
		return handled(t, filepath.Join(dir, "avro")) == 8 && handled(t, filepath.Join(dir, "conn")) == 8
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	var dead, wantDead []string
	for _, r := range readDLQ(t, s, dlq) {
		msg, field := r.headers["__connect.errors.exception.message"], r.headers["ingestd.error.field"]
		if field == "geo" && !strings.Contains(msg, "Kafka Connect logical type io.debezium.data.geometry.Point is not supported") ||
			field != "geo" && !strings.Contains(msg, "is outside Delta's range") {
			t.Errorf("dead letter at %s: message %q names neither the logical type nor Delta's range", field, msg)
		}
		dead = append(dead, r.headers["__connect.errors.topic"]+":"+r.headers["__connect.errors.offset"]+":"+r.headers["ingestd.error.reason"]+"@"+field)
	}
	for _, topic := range []string{avroTopic, jsonTopic} {
		wantDead = append(wantDead, topic+":3:unsupported_type@geo")
		for i, c := range outOfRange {
			wantDead = append(wantDead, fmt.Sprintf("%s:%d:decode_error@%s", topic, 4+i, c.field))
		}
	}
	slices.Sort(dead)
	slices.Sort(wantDead)
	if got, want := strings.Join(dead, " "), strings.Join(wantDead, " "); got != want {
		t.Errorf("dead letters\n got %s\nwant %s", got, want)
	}

	want := canonRows(t, []map[string]any{
		{"id": 1, "dec": "-12345.67", "dec0": "-1", "dec38": "1234567890123456789012345678.9012345678", "vdec": "-12.3450",
			"ts_ms": -1000, "ts_us": -1, "ts_ns": -1, "tstz": 1796538600123456, "d": "1969-12-31",
			"t_ms": 86399999000, "t_us": 86399999999, "t_ns": 0, "ttz": "14:30:00.123456+02:00", "js": `{"a": [1, 2]}`,
			"uid": "7b3ad5b4-1c1e-4c2b-9c6a-2f0d8f6c1e11", "en": "happy", "dur": -3600000000, "ivl": "P1Y2M3DT4H5M6.78S",
			"bits": "05", "cdate": "0001-01-01", "ctime": 3723004, "cts": -86400000000},
		{"id": 2, "dec": "0.00", "dec0": "99999999999999999999999999999999999999", "dec38": "-9999999999999999999999999999.9999999999", "vdec": "0.005",
			"ts_ms": 1700000000123000, "ts_us": -62135596800000000, "ts_ns": 1700000000123456, "tstz": -1, "d": "9999-12-31",
			"t_ms": 0, "t_us": 0, "t_ns": 86399999999, "ttz": "00:00:00Z", "js": "null",
			"uid": "00000000-0000-0000-0000-000000000000", "en": "sad", "dur": 0, "ivl": "PT0S",
			"bits": "", "cdate": "1970-01-01", "ctime": 0, "cts": 0},
		lcNullRow(3, map[string]any{"vdec": "12000"}),
	})
	wantTypes := "id:int dec:decimal(10,2) dec0:decimal(38,0) dec38:decimal(38,10) vdec:string ts_ms:timestamp_ntz ts_us:timestamp_ntz ts_ns:timestamp_ntz " +
		"tstz:timestamp d:date t_ms:bigint t_us:bigint t_ns:bigint ttz:string js:string uid:string en:string dur:bigint ivl:string bits:binary " +
		"cdate:date ctime:int cts:timestamp"
	for _, name := range []string{"avro", "conn"} {
		var r sparkRead
		spark.call(t, map[string]any{"op": "read", "path": filepath.Join(dir, name)}, &r)
		var types []string
		for _, f := range r.Schema {
			types = append(types, f.Name+":"+f.Type)
		}
		if got := strings.Join(types, " "); got != wantTypes {
			t.Errorf("Spark types of %s:\n got %s\nwant %s", name, got, wantTypes)
		}
		sameRows(t, "Spark "+name, r.Rows, want)
		dr := readDeltaRS(t, python, filepath.Join(dir, name))
		if dr.Unsupported != "" {
			t.Fatalf("delta-rs cannot read %s: %s", name, dr.Unsupported)
		}
		sameRows(t, "delta-rs "+name, dr.Rows, want)
	}
}

// lcNullRow is a row of NULLs but for id and set.
func lcNullRow(id int, set map[string]any) map[string]any {
	row := map[string]any{"id": id}
	for _, f := range lcFields {
		row[f.name] = nil
	}
	for k, v := range set {
		row[k] = v
	}
	return row
}
