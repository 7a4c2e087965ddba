package decode

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// dbzField is one column of the Debezium test table: its Avro type as a Connect Avro
// converter (AvroData) writes it, and its Connect schema as JsonConverter writes it.
type dbzField struct {
	name, avro, connect string
}

// dbzFields covers every logical type of connect.go's table, each field optional as
// Debezium writes a nullable column's schema.
var dbzFields = []dbzField{
	{"dec", `{"type":"bytes","scale":2,"precision":10,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}`,
		`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"}}`},
	// No connect.decimal.precision: AvroData writes its default precision 64.
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
	{"es", `{"type":"string","connect.version":1,"connect.parameters":{"allowed":"a,b,c"},"connect.name":"io.debezium.data.EnumSet"}`,
		`{"type":"string","optional":true,"name":"io.debezium.data.EnumSet","version":1,"parameters":{"allowed":"a,b,c"}}`},
	{"dur", `{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroDuration"}`, `{"type":"int64","optional":true,"name":"io.debezium.time.MicroDuration","version":1}`},
	{"ivl", `{"type":"string","connect.version":1,"connect.name":"io.debezium.time.Interval"}`, `{"type":"string","optional":true,"name":"io.debezium.time.Interval","version":1}`},
	{"bits", `{"type":"bytes","connect.version":1,"connect.parameters":{"length":"3"},"connect.name":"io.debezium.data.Bits"}`,
		`{"type":"bytes","optional":true,"name":"io.debezium.data.Bits","version":1,"parameters":{"length":"3"}}`},
	{"xml", `{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Xml"}`, `{"type":"string","optional":true,"name":"io.debezium.data.Xml","version":1}`},
	{"yr", `{"type":"int","connect.version":1,"connect.name":"io.debezium.time.Year"}`, `{"type":"int32","optional":true,"name":"io.debezium.time.Year","version":1}`},
	{"cdate", `{"type":"int","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Date","logicalType":"date"}`,
		`{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","version":1}`},
	{"ctime", `{"type":"int","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Time","logicalType":"time-millis"}`,
		`{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Time","version":1}`},
	{"cts", `{"type":"long","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Timestamp","logicalType":"timestamp-millis"}`,
		`{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1}`},
}

// dbzDelta is the table the fields map to (docs/formats.md, "Kafka Connect and Debezium
// logical types").
const dbzDelta = "struct<id:integer,dec:decimal(10,2),dec0:decimal(38,0),dec38:decimal(38,10),vdec:string,ts_ms:timestamp_ntz,ts_us:timestamp_ntz," +
	"ts_ns:timestamp_ntz,tstz:timestamp,d:date,t_ms:long,t_us:long,t_ns:long,ttz:string,js:string,uid:string,en:string,es:string,dur:long,ivl:string," +
	"bits:binary,xml:string,yr:integer,cdate:date,ctime:integer,cts:timestamp>"

// dbzAvroSchema is the value schema as a Connect Avro converter writes it.
func dbzAvroSchema(fields []dbzField) string {
	var b strings.Builder
	b.WriteString(`{"type":"record","name":"Value","namespace":"dbserver1.public.alltypes","fields":[{"name":"id","type":"int"}`)
	for _, f := range fields {
		fmt.Fprintf(&b, `,{"name":%q,"type":["null",%s],"default":null}`, f.name, f.avro)
	}
	b.WriteString(`],"connect.name":"dbserver1.public.alltypes.Value"}`)
	return b.String()
}

// dbzConnectSchema is the value schema as JsonConverter writes it.
func dbzConnectSchema(fields []dbzField) string {
	var b strings.Builder
	b.WriteString(`{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}`)
	for _, f := range fields {
		b.WriteString("," + strings.Replace(f.connect, "{", fmt.Sprintf(`{"field":%q,`, f.name), 1))
	}
	b.WriteString(`],"optional":false,"name":"dbserver1.public.alltypes.Value"}`)
	return b.String()
}

// vdec is a VariableScaleDecimal value.
type vdec struct {
	scale int32
	value []byte
}

// unscaledBytes is Java's BigInteger.toByteArray: the shortest big-endian two's complement.
func unscaledBytes(t testing.TB, s string) []byte {
	t.Helper()
	x, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("bad integer %q", s)
	}
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

// vdecOnly is a row whose only non-NULL value is a VariableScaleDecimal.
func vdecOnly(v vdec) dbzRow {
	row := make(dbzRow, len(dbzFields))
	row[3] = v
	return row
}

// dbzRow is one row's values in dbzFields order (nil: NULL).
type dbzRow []any

// avroBody encodes a row as the Avro binary of dbzAvroSchema.
func (row dbzRow) avroBody(id int32) []byte {
	e := avroAppender{}
	e.long(int64(id))
	for _, v := range row {
		if v == nil {
			e.long(0)
			continue
		}
		e.long(1)
		switch v := v.(type) {
		case int32:
			e.long(int64(v))
		case int64:
			e.long(v)
		case string:
			e.text(v)
		case []byte:
			e.str(v)
		case vdec:
			e.long(int64(v.scale))
			e.str(v.value)
		}
	}
	return e.b
}

// connectDoc writes a row as JsonConverter does: bytes as base64, a struct as an object.
func (row dbzRow) connectDoc(t testing.TB, schema string, id int32) []byte {
	payload := map[string]any{"id": id}
	for i, v := range row {
		switch x := v.(type) {
		case []byte:
			v = base64.StdEncoding.EncodeToString(x)
		case vdec:
			v = map[string]any{"scale": x.scale, "value": base64.StdEncoding.EncodeToString(x.value)}
		}
		payload[dbzFields[i].name] = v
	}
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"schema":` + schema + `,"payload":` + string(p) + `}`)
}

// TestConnectLogicalTypes decodes rows of every Debezium and Kafka Connect logical type,
// written as a Connect Avro converter and as JsonConverter write them, and checks that both
// give the same column types and these exact values.
func TestConnectLogicalTypes(t *testing.T) {
	rows := []dbzRow{
		{unscaledBytes(t, "-1234567"), unscaledBytes(t, "-1"), unscaledBytes(t, "12345678901234567890123456789012345678"),
			vdec{4, unscaledBytes(t, "-123450")},
			int64(-1), int64(-1), int64(-1), "2026-12-06T12:00:00.123456789+05:30",
			int32(-1), int32(86_399_999), int64(86_399_999_999), int64(999), "14:30:00.123456+02:00",
			`{"a": [1, 2]}`, "7b3ad5b4-1c1e-4c2b-9c6a-2f0d8f6c1e11", "happy", "a,c", int64(-3_600_000_000), "P1Y2M3DT4H5M6.78S",
			[]byte{0x05}, "<a>x</a>", int32(2026), int32(-719162), int32(3_723_004), int64(-86_400_000)},
		{unscaledBytes(t, "0"), unscaledBytes(t, "99999999999999999999999999999999999999"), unscaledBytes(t, "-99999999999999999999999999999999999999"),
			vdec{3, unscaledBytes(t, "5")},
			int64(1_700_000_000_123), int64(-62_135_596_800_000_000), int64(1_700_000_000_123_456_789), "1969-12-31T23:59:59.9999995Z",
			int32(2_932_896), int32(0), int64(0), int64(86_399_999_999_999), "00:00:00Z",
			"null", "00000000-0000-0000-0000-000000000000", "sad", "", int64(0), "PT0S",
			[]byte{}, "", int32(-1), int32(0), int32(0), int64(0)},
		vdecOnly(vdec{0, unscaledBytes(t, "-7")}),
		vdecOnly(vdec{-3, unscaledBytes(t, "12")}), // Java's 1.2E+4
		make(dbzRow, len(dbzFields)),
	}
	want := map[string][]string{
		"id":    {"0/1:1", "0/1:2", "0/1:3", "0/1:4", "0/1:5"},
		"dec":   {"0/1:-1234567", "0/1:0", "0/0:null", "0/0:null", "0/0:null"},
		"dec0":  {"0/1:0x" + strings.Repeat("ff", 16), "0/1:" + twos(t, "99999999999999999999999999999999999999", 16), "0/0:null", "0/0:null", "0/0:null"},
		"dec38": {"0/1:" + twos(t, "12345678901234567890123456789012345678", 16), "0/1:" + twos(t, "-99999999999999999999999999999999999999", 16), "0/0:null", "0/0:null", "0/0:null"},
		"vdec":  {`0/1:"-12.3450"`, `0/1:"0.005"`, `0/1:"-7"`, `0/1:"12000"`, "0/0:null"},
		// 1969-12-31T23:59:59.999 local; 2023-11-14T22:13:20.123
		"ts_ms": {"0/1:-1000", "0/1:1700000000123000", "0/0:null", "0/0:null", "0/0:null"},
		// 0001-01-01T00:00:00
		"ts_us": {"0/1:-1", "0/1:-62135596800000000", "0/0:null", "0/0:null", "0/0:null"},
		// -1 ns is the microsecond before the epoch; …123456789 ns cut to …123456 µs
		"ts_ns": {"0/1:-1", "0/1:1700000000123456", "0/0:null", "0/0:null", "0/0:null"},
		// 12:00+05:30 is 06:30Z; .9999995 cut to .999999
		"tstz":  {"0/1:1796538600123456", "0/1:-1", "0/0:null", "0/0:null", "0/0:null"},
		"d":     {"0/1:-1", "0/1:2932896", "0/0:null", "0/0:null", "0/0:null"},
		"t_ms":  {"0/1:86399999000", "0/1:0", "0/0:null", "0/0:null", "0/0:null"},
		"t_us":  {"0/1:86399999999", "0/1:0", "0/0:null", "0/0:null", "0/0:null"},
		"t_ns":  {"0/1:0", "0/1:86399999999", "0/0:null", "0/0:null", "0/0:null"},
		"ttz":   {`0/1:"14:30:00.123456+02:00"`, `0/1:"00:00:00Z"`, "0/0:null", "0/0:null", "0/0:null"},
		"js":    {`0/1:"{\"a\": [1, 2]}"`, `0/1:"null"`, "0/0:null", "0/0:null", "0/0:null"},
		"uid":   {`0/1:"7b3ad5b4-1c1e-4c2b-9c6a-2f0d8f6c1e11"`, `0/1:"00000000-0000-0000-0000-000000000000"`, "0/0:null", "0/0:null", "0/0:null"},
		"en":    {`0/1:"happy"`, `0/1:"sad"`, "0/0:null", "0/0:null", "0/0:null"},
		"es":    {`0/1:"a,c"`, `0/1:""`, "0/0:null", "0/0:null", "0/0:null"},
		"dur":   {"0/1:-3600000000", "0/1:0", "0/0:null", "0/0:null", "0/0:null"},
		"ivl":   {`0/1:"P1Y2M3DT4H5M6.78S"`, `0/1:"PT0S"`, "0/0:null", "0/0:null", "0/0:null"},
		"bits":  {`0/1:"\x05"`, `0/1:""`, "0/0:null", "0/0:null", "0/0:null"},
		"xml":   {`0/1:"<a>x</a>"`, `0/1:""`, "0/0:null", "0/0:null", "0/0:null"},
		"yr":    {"0/1:2026", "0/1:-1", "0/0:null", "0/0:null", "0/0:null"},
		"cdate": {"0/1:-719162", "0/1:0", "0/0:null", "0/0:null", "0/0:null"},
		"ctime": {"0/1:3723004", "0/1:0", "0/0:null", "0/0:null", "0/0:null"},
		"cts":   {"0/1:-86400000000", "0/1:0", "0/0:null", "0/0:null", "0/0:null"},
	}

	avroWS := mustWriter(t, 1, dbzAvroSchema(dbzFields))
	if got := avroWS.Delta.String(); got != dbzDelta {
		t.Fatalf("Avro writer schema\n got %s\nwant %s", got, dbzDelta)
	}
	d, pq := mustCompile(t, avroWS, avroWS.Delta, "none")
	cols := make([][]parquet.Value, d.Columns())
	for i, row := range rows {
		var err error
		if cols, err = decodeCase(t, d, row.avroBody(int32(i+1)), cols); err != nil {
			t.Fatalf("Avro row %d: %v", i+1, err)
		}
	}
	if got := renderCols(pq, cols); !reflect.DeepEqual(got, want) {
		t.Errorf("Avro values:\n got %v\nwant %v", got, want)
	}

	src := NewConnectSource()
	cschema := dbzConnectSchema(dbzFields)
	jcols := make([][]parquet.Value, d.Columns())
	var jd *Decoder
	for i, row := range rows {
		ws, body, err := src.Writer(nil, row.connectDoc(t, cschema, int32(i+1)))
		if err != nil || ws.DeltaErr != nil {
			t.Fatal(err, ws.DeltaErr)
		}
		if got := ws.Delta.String(); got != dbzDelta {
			t.Fatalf("Connect JSON writer schema\n got %s\nwant %s", got, dbzDelta)
		}
		if jd == nil {
			jd, _ = mustCompile(t, ws, ws.Delta, "none")
		}
		a, err := ws.Transcode(body)
		if err != nil {
			t.Fatalf("Connect JSON row %d: %v", i+1, err)
		}
		if jcols, err = decodeCase(t, jd, a, jcols); err != nil {
			t.Fatalf("Connect JSON row %d: %v", i+1, err)
		}
	}
	if got := renderCols(pq, jcols); !reflect.DeepEqual(got, want) {
		t.Errorf("Connect JSON values:\n got %v\nwant %v", got, want)
	}
}

// TestConnectLogicalTypesRefused: a logical type Delta cannot hold, or a standard Avro
// logicalType that contradicts the Connect name, makes the writer schema unsupported_type
// at the column, naming the type; Avro and Connect JSON refuse alike.
func TestConnectLogicalTypesRefused(t *testing.T) {
	point := dbzField{"geo",
		`{"type":"record","name":"Point","namespace":"io.debezium.data.geometry","fields":[{"name":"x","type":"double"},{"name":"y","type":"double"},{"name":"wkb","type":["null","bytes"],"default":null},{"name":"srid","type":["null","int"],"default":null}],"connect.doc":"Geometry (POINT)","connect.version":1,"connect.name":"io.debezium.data.geometry.Point"}`,
		`{"type":"struct","fields":[{"type":"float64","optional":false,"field":"x"},{"type":"float64","optional":false,"field":"y"},{"type":"bytes","optional":true,"field":"wkb"},{"type":"int32","optional":true,"field":"srid"}],"optional":true,"name":"io.debezium.data.geometry.Point","version":1}`}
	geometry := dbzField{"shape",
		`{"type":"record","name":"Geometry","namespace":"io.debezium.data.geometry","fields":[{"name":"wkb","type":"bytes"},{"name":"srid","type":["null","int"],"default":null}],"connect.version":1,"connect.name":"io.debezium.data.geometry.Geometry"}`,
		`{"type":"struct","fields":[{"type":"bytes","optional":false,"field":"wkb"},{"type":"int32","optional":true,"field":"srid"}],"optional":true,"name":"io.debezium.data.geometry.Geometry","version":1}`}
	wide := dbzField{"big",
		`{"type":"bytes","scale":2,"precision":50,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"50"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}`,
		`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2","connect.decimal.precision":"50"}}`}
	onString := dbzField{"ts",
		`{"type":"string","connect.name":"io.debezium.time.MicroTimestamp"}`,
		`{"type":"string","optional":true,"name":"io.debezium.time.MicroTimestamp"}`}
	for _, c := range []struct {
		f   dbzField
		msg string
	}{
		{point, "Kafka Connect logical type io.debezium.data.geometry.Point is not supported"},
		{geometry, "Kafka Connect logical type io.debezium.data.geometry.Geometry is not supported"},
		{wide, `Kafka Connect Decimal with scale "2" and precision "50" is outside Delta's decimal(1..38, 0..p)`},
		{onString, "Kafka Connect logical type io.debezium.time.MicroTimestamp on Avro string, want long"},
	} {
		ws, err := ParseWriterSchema(1, dbzAvroSchema([]dbzField{c.f}))
		if err != nil {
			t.Fatal(err)
		}
		jws, _, err := NewConnectSource().Writer(nil, []byte(`{"schema":`+dbzConnectSchema([]dbzField{c.f})+`,"payload":{"id":1}}`))
		if err != nil {
			t.Fatal(err)
		}
		for format, err := range map[string]error{"avro": ws.DeltaErr, "connect_json": jws.DeltaErr} {
			if ReasonOf(err) != ReasonUnsupportedType || FieldOf(err) != c.f.name || !strings.Contains(fmt.Sprint(err), c.msg) {
				t.Errorf("%s %s: %v, want unsupported_type at %s with %q", format, c.f.name, err, c.f.name, c.msg)
			}
		}
	}
	// A standard Avro logicalType beside the Connect name must agree with it (only
	// Connect Avro converters write both).
	for _, c := range []struct{ avro, msg string }{
		{`{"type":"long","connect.name":"io.debezium.time.MicroTimestamp","logicalType":"timestamp-millis"}`,
			"io.debezium.time.MicroTimestamp contradicts the Avro logicalType timestamp-millis"},
		{`{"type":"long","connect.name":"io.debezium.time.NanoTimestamp","logicalType":"timestamp-micros"}`,
			"io.debezium.time.NanoTimestamp contradicts the Avro logicalType timestamp-micros"},
		{`{"type":"int","connect.name":"io.debezium.time.Date","logicalType":"time-millis"}`,
			"io.debezium.time.Date contradicts the Avro logicalType time-millis"},
		{`{"type":"bytes","scale":3,"precision":10,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}`,
			"Kafka Connect Decimal(precision 10, scale 2) contradicts the Avro logicalType decimal(10,3)"},
		{`{"type":"bytes","scale":2,"precision":12,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}`,
			"Kafka Connect Decimal(precision 10, scale 2) contradicts the Avro logicalType decimal(12,2)"},
	} {
		ws, err := ParseWriterSchema(1, dbzAvroSchema([]dbzField{{name: "c", avro: c.avro}}))
		if err != nil {
			t.Fatal(err)
		}
		if ReasonOf(ws.DeltaErr) != ReasonUnsupportedType || FieldOf(ws.DeltaErr) != "c" || !strings.Contains(fmt.Sprint(ws.DeltaErr), c.msg) {
			t.Errorf("%s: %v, want unsupported_type at c with %q", c.avro, ws.DeltaErr, c.msg)
		}
	}
	// The agreeing pairs a converter may write are accepted, and the name decides:
	// MicroTimestamp beside timestamp-micros is still timestamp_ntz.
	ws := mustWriter(t, 1, dbzAvroSchema([]dbzField{
		{name: "a", avro: `{"type":"long","connect.name":"io.debezium.time.MicroTimestamp","logicalType":"timestamp-micros"}`},
		{name: "b", avro: `{"type":"string","connect.name":"io.debezium.data.Uuid","logicalType":"uuid"}`},
		{name: "c", avro: `{"type":"int","connect.name":"io.debezium.time.Time","logicalType":"time-millis"}`},
	}))
	if got := ws.Delta.String(); got != "struct<id:integer,a:timestamp_ntz,b:string,c:long>" {
		t.Errorf("agreeing logical types: %s", got)
	}
}

// TestConnectLogicalValuesDeadLettered: values a column cannot take exactly are
// decode_error dead letters at their column, never rescaled or clamped.
func TestConnectLogicalValuesDeadLettered(t *testing.T) {
	ws := mustWriter(t, 1, dbzAvroSchema(dbzFields))
	cschema := dbzConnectSchema(dbzFields)
	d, _ := mustCompile(t, ws, ws.Delta, "none")
	for _, c := range []struct {
		field int
		v     any
		msg   string
		jmsg  string // JsonConverter's form, where its message differs
	}{
		{0, unscaledBytes(t, "10000000000"), "decimal value exceeds precision 10", "connect Decimal 10000000000 has more than 10 digits"}, // decimal(10,2): 11 digits
		{1, unscaledBytes(t, "1"+strings.Repeat("0", 38)), "exceeds precision 38", "has more than 38 digits"},                             // no precision parameter: 38
		{3, vdec{2, []byte{}}, "VariableScaleDecimal with an empty value", ""},
		{3, vdec{maxVarScale + 1, []byte{1}}, "VariableScaleDecimal scale 16384 outside ±16383", ""},
		{7, "infinity", `ZonedTimestamp "infinity" is not an ISO-8601 date-time with an offset`, ""},
		{7, "2026-12-06T12:00:00", `ZonedTimestamp "2026-12-06T12:00:00" is not an ISO-8601 date-time with an offset`, ""},
		// Outside Delta's date and timestamp range (PROTOCOL.md, "Primitive Types"), one
		// unit past each end; the ends themselves are TestConnectLogicalTypes' values.
		{4, int64(253_402_300_800_000), "timestamp 253402300800000 ms since the epoch (10000-01-01T00:00:00Z) is outside Delta's range", ""},
		{4, int64(math.MinInt64), "timestamp -9223372036854775808 ms since the epoch", ""},
		{5, int64(-62_135_596_800_000_001), "timestamp -62135596800000001 µs since the epoch (0000-12-31T23:59:59.999999Z) is outside Delta's range", ""},
		{5, int64(253_402_300_800_000_000), "timestamp 253402300800000000 µs since the epoch (10000-01-01T00:00:00Z) is outside Delta's range", ""},
		{7, "0000-12-31T23:59:59.999999Z", `ZonedTimestamp "0000-12-31T23:59:59.999999Z" is outside Delta's range`, ""},
		{7, "9999-12-31T23:00:00-05:00", `ZonedTimestamp "9999-12-31T23:00:00-05:00" is outside Delta's range`, ""},
		{8, int32(2_932_897), "date 2932897 days since 1970-01-01 (10000-01-01) is outside Delta's range", ""},
		{22, int32(-719_163), "date -719163 days since 1970-01-01 (0000-12-31) is outside Delta's range", ""},
		{24, int64(-62_135_596_800_001), "timestamp -62135596800001 ms since the epoch (0000-12-31T23:59:59.999Z) is outside Delta's range", ""},
	} {
		row := make(dbzRow, len(dbzFields))
		row[c.field] = c.v
		name := dbzFields[c.field].name
		_, err := decodeCase(t, d, row.avroBody(1), make([][]parquet.Value, d.Columns()))
		if ReasonOf(err) != ReasonDecodeError || FieldOf(err) != name || !strings.Contains(fmt.Sprint(err), c.msg) {
			t.Errorf("Avro %s %v: %v, want decode_error at %s with %q", name, c.v, err, name, c.msg)
		}
		// The same value as JsonConverter writes it.
		ws, body, err := NewConnectSource().Writer(nil, row.connectDoc(t, cschema, 1))
		if err != nil || ws.DeltaErr != nil {
			t.Fatal(err, ws.DeltaErr)
		}
		a, err := ws.Transcode(body)
		if err == nil {
			jd, _ := mustCompile(t, ws, ws.Delta, "none")
			_, err = decodeCase(t, jd, a, make([][]parquet.Value, jd.Columns()))
		}
		if c.jmsg == "" {
			c.jmsg = c.msg
		}
		if ReasonOf(err) != ReasonDecodeError || FieldOf(err) != name || !strings.Contains(fmt.Sprint(err), c.jmsg) {
			t.Errorf("Connect JSON %s %v: %v, want decode_error at %s with %q", name, c.v, err, name, c.jmsg)
		}
	}
}

// TestConnectLogicalIntoPhysicalColumn: a table that took a Debezium column as its
// physical type (long microseconds) is not filled silently from the logical type: the
// decoder refuses, naming the Connect type.
func TestConnectLogicalIntoPhysicalColumn(t *testing.T) {
	ws := mustWriter(t, 1, dbzAvroSchema([]dbzField{{name: "ts", avro: `{"type":"long","connect.name":"io.debezium.time.MicroTimestamp"}`}}))
	table := mustTable(t, `{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}},{"name":"ts","type":"long","nullable":true,"metadata":{}}]}`)
	_, err := Compile(ws, table, "none", mustParquet(t, table, "none"))
	if ReasonOf(err) != ReasonSchemaMismatch || FieldOf(err) != "ts" || !strings.Contains(fmt.Sprint(err), "writer type long/io.debezium.time.MicroTimestamp cannot be written losslessly to column type long") {
		t.Errorf("%v, want schema_mismatch at ts naming long/io.debezium.time.MicroTimestamp", err)
	}
}
