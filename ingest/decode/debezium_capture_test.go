package decode

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// testdata/debezium holds what Debezium 3.7.1.Final (PostgreSQL connector, pgoutput) on
// Kafka Connect 4.4.0 wrote for one table of PostgreSQL 15, through Apicurio's
// AvroConverter 2.6.13.Final (Confluent framing; value-<id>.avsc are the registry's
// schemas, avro-values.txt the values in hex) and through JsonConverter with
// schemas.enable (connect-json-values.jsonl), the same seven change events in both:
//
//	create type mood as enum ('sad','ok','happy');
//	create table alltypes(id int primary key, n_10_2 numeric(10,2), n_38_0 numeric(38,0),
//	  n_50_2 numeric(50,2), n_var numeric, m money, ts timestamp, ts3 timestamp(3),
//	  ts0 timestamp(0), tstz timestamptz, d date, t time, t3 time(3), ttz timetz,
//	  iv interval, js json, jb jsonb, u uuid, x xml, b3 bit(3), vb varbit(5), b1 bit(1),
//	  e mood, ip inet, pt point, i2 int2, i8 int8, f4 float4, f8 float8, bo bool, tx text,
//	  ba bytea, arr int[]);
//	-- events 0-2 (schema 89): rows 1-3 of dbzCaptureRows
//	alter table alltypes drop column n_50_2;
//	insert into alltypes(id, pt) values (21, '(1.5,2.5)');  -- event 3 (schema 103)
//	alter table alltypes drop column pt;
//	insert into alltypes select id+30, … from alltypes where id in (1,2,3);  -- events 4-6 (schema 105)

// dbzCapture reads the captured values: Avro (framed) and Connect JSON, in event order.
func dbzCapture(t *testing.T) (avroValues [][]byte, connectValues [][]byte) {
	t.Helper()
	read := func(name string, each func(string)) {
		f, err := os.Open("testdata/debezium/" + name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			each(sc.Text())
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	read("avro-values.txt", func(l string) {
		b, err := hex.DecodeString(l)
		if err != nil {
			t.Fatal(err)
		}
		avroValues = append(avroValues, b)
	})
	read("connect-json-values.jsonl", func(l string) { connectValues = append(connectValues, []byte(l)) })
	if len(avroValues) != 7 || len(connectValues) != 7 {
		t.Fatalf("%d Avro and %d Connect JSON values, want 7 of each", len(avroValues), len(connectValues))
	}
	return avroValues, connectValues
}

func dbzCaptureSchema(t *testing.T, id int) *WriterSchema {
	t.Helper()
	text, err := os.ReadFile(fmt.Sprintf("testdata/debezium/value-%d.avsc", id))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := ParseWriterSchema(id, string(text))
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestDebeziumCaptured decodes what Debezium really wrote: a numeric(50,2) column and a
// point column are refused at the column with the logical type named, in both formats; the
// table without them lands with the same column types and values from Avro and from
// Kafka Connect JSON.
func TestDebeziumCaptured(t *testing.T) {
	avroValues, connectValues := dbzCapture(t)
	src := NewConnectSource()
	for _, c := range []struct {
		id, event  int
		field, msg string
	}{
		{89, 0, "before.n_50_2", `Kafka Connect Decimal with scale "2" and precision "50" is outside Delta's decimal(1..38, 0..p)`},
		{103, 3, "before.pt", "Kafka Connect logical type io.debezium.data.geometry.Point is not supported"},
	} {
		if got := int(avroValues[c.event][4]); got != c.id {
			t.Fatalf("event %d has schema id %d, want %d", c.event, got, c.id)
		}
		jws, _, err := src.Writer(nil, connectValues[c.event])
		if err != nil {
			t.Fatal(err)
		}
		for format, err := range map[string]error{"avro": dbzCaptureSchema(t, c.id).DeltaErr, "connect_json": jws.DeltaErr} {
			if ReasonOf(err) != ReasonUnsupportedType || FieldOf(err) != c.field || !strings.Contains(fmt.Sprint(err), c.msg) {
				t.Errorf("%s schema of event %d: %v, want unsupported_type at %s with %q", format, c.event, err, c.field, c.msg)
			}
		}
	}

	ws := dbzCaptureSchema(t, 105)
	if ws.DeltaErr != nil {
		t.Fatal(ws.DeltaErr)
	}
	d, pq := mustCompile(t, ws, ws.Delta, "none")
	cols := make([][]parquet.Value, d.Columns())
	for e := 4; e < 7; e++ {
		id, payload, err := ParseFrame(avroValues[e])
		if err != nil || id != 105 {
			t.Fatalf("event %d: %v, schema id %d", e, err, id)
		}
		if cols, err = decodeCase(t, d, payload, cols); err != nil {
			t.Fatalf("Avro event %d: %v", e, err)
		}
	}
	got := renderCols(pq, cols)
	var jd *Decoder
	jcols := make([][]parquet.Value, d.Columns())
	for e := 4; e < 7; e++ {
		jws, body, err := src.Writer(nil, connectValues[e])
		if err != nil || jws.DeltaErr != nil {
			t.Fatal(err, jws.DeltaErr)
		}
		if jd == nil {
			if g, w := jws.Delta.String(), ws.Delta.String(); g != w {
				t.Fatalf("Connect JSON schema\n%s\nAvro schema\n%s", g, w)
			}
			jd, _ = mustCompile(t, jws, jws.Delta, "none")
		}
		a, err := jws.Transcode(body)
		if err != nil {
			t.Fatal(err)
		}
		if jcols, err = decodeCase(t, jd, a, jcols); err != nil {
			t.Fatalf("Connect JSON event %d: %v", e, err)
		}
	}
	// The two connectors differ in their source blocks (names, positions, times): the
	// rows are compared.
	after := func(m map[string][]string) map[string][]string {
		out := map[string][]string{}
		for k, v := range m {
			if strings.HasPrefix(k, "after.") || k == "op" {
				out[k] = v
			}
		}
		return out
	}
	if g, w := after(renderCols(pq, jcols)), after(got); !reflect.DeepEqual(g, w) {
		t.Errorf("Connect JSON rows differ from Avro's:\n%v\n%v", g, w)
	}
	var afterType string
	for _, f := range ws.Delta.Fields {
		if f.Name == "after" {
			afterType = f.Type.String()
		}
	}
	if want := "struct<id:integer,n_10_2:decimal(10,2),n_38_0:decimal(38,0),n_var:string,m:decimal(38,2),ts:timestamp_ntz,ts3:timestamp_ntz,ts0:timestamp_ntz," +
		"tstz:timestamp,d:date,t:long,t3:long,ttz:string,iv:long,js:string,jb:string,u:string,x:string,b3:binary,vb:binary,b1:boolean,e:string,ip:string," +
		"i2:integer,i8:long,f4:float,f8:double,bo:boolean,tx:string,ba:binary,arr:array<integer>>"; afterType != want {
		t.Errorf("after:\n got %s\nwant %s", afterType, want)
	}
	want := map[string][]string{
		"op":                     {`0/1:"c"`, `0/1:"c"`, `0/1:"c"`},
		"after.id":               {"0/2:31", "0/2:32", "0/2:33"},
		"after.n_10_2":           {"0/2:-1234567", "0/2:0", "0/1:null"},
		"after.n_38_0":           {"0/2:" + twos(t, "12345678901234567890123456789012345678", 16), "0/2:" + twos(t, "-1", 16), "0/1:null"},
		"after.n_var":            {`0/2:"-12.345"`, `0/2:"0.005"`, `0/2:"12000"`}, // Debezium sent -12.3450 with scale 3
		"after.m":                {"0/2:" + twos(t, "-1234", 16), "0/2:" + twos(t, "0", 16), "0/1:null"},
		"after.ts":               {"0/2:-1", "0/2:1700000000123456", "0/1:null"},
		"after.ts3":              {"0/2:1700000000123000", "0/1:null", "0/1:null"},
		"after.ts0":              {"0/2:-62135596800000000", "0/1:null", "0/1:null"},
		"after.tstz":             {"0/2:1796538600123456", "0/2:-1", "0/1:null"},
		"after.d":                {"0/2:-1", "0/2:2932896", "0/1:null"},
		"after.t":                {"0/2:86399999999", "0/2:0", "0/1:null"},
		"after.t3":               {"0/2:45296789000", "0/1:null", "0/1:null"},
		"after.ttz":              {`0/2:"12:30:00.123456Z"`, `0/2:"00:00:00Z"`, "0/1:null"},
		"after.iv":               {"0/2:37091106780000", "0/2:-3600000000", "0/1:null"},
		"after.js":               {`0/2:"{\"a\": [1, 2]}"`, `0/2:"null"`, "0/1:null"},
		"after.jb":               {`0/2:"{\"b\": 1}"`, `0/2:"null"`, "0/1:null"},
		"after.u":                {`0/2:"7b3ad5b4-1c1e-4c2b-9c6a-2f0d8f6c1e11"`, `0/2:"00000000-0000-0000-0000-000000000000"`, "0/1:null"},
		"after.x":                {`0/2:"<a>x</a>"`, `0/2:""`, "0/1:null"},
		"after.b3":               {`0/2:"\x05"`, `0/2:""`, "0/1:null"},
		"after.vb":               {`0/2:"\x19"`, `0/2:""`, "0/1:null"},
		"after.b1":               {"0/2:true", "0/2:false", "0/1:null"},
		"after.e":                {`0/2:"happy"`, `0/2:"sad"`, "0/1:null"},
		"after.ip":               {`0/2:"10.0.0.1/8"`, `0/2:"::1"`, "0/1:null"},
		"after.i2":               {"0/2:-3", "0/1:null", "0/1:null"},
		"after.i8":               {"0/2:9007199254740993", "0/1:null", "0/1:null"},
		"after.f4":               {"0/2:1.5", "0/1:null", "0/1:null"},
		"after.f8":               {"0/2:-2.25", "0/1:null", "0/1:null"},
		"after.bo":               {"0/2:true", "0/2:false", "0/1:null"},
		"after.tx":               {`0/2:"zürich"`, `0/2:""`, "0/1:null"},
		"after.ba":               {`0/2:"\x00\xff"`, `0/2:""`, "0/1:null"},
		"after.arr.list.element": {"0/4:1", "1/4:2", "1/4:3", "0/2:null", "0/1:null"},
	}
	if g := after(got); !reflect.DeepEqual(g, want) {
		for k := range want {
			if !reflect.DeepEqual(g[k], want[k]) {
				t.Errorf("%s: %v, want %v", k, g[k], want[k])
			}
		}
		for k := range g {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected column %s", k)
			}
		}
	}
}
