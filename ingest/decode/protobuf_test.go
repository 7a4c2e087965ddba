package decode

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// pbRich covers every mapping decision of docs/formats.md, "Protobuf to Delta types".
const pbRich = `syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/any.proto";
import "google/protobuf/empty.proto";
enum Color { RED = 0; GREEN = 1; }
message Rec {
  bool b = 1; int32 i32 = 2; sint32 s32 = 3; uint32 u32 = 4; int64 i64 = 5; uint64 u64 = 6; fixed64 f64 = 7;
  float f = 8; double d = 9; string s = 10; bytes by = 11; Color color = 12;
  optional int32 opt = 13;
  oneof choice { string text = 14; int64 num = 15; }
  map<string, int64> counts = 16; map<int32, Inner> by_id = 17;
  repeated string tags = 18; repeated Inner items = 19;
  google.protobuf.Timestamp ts = 20; google.protobuf.Duration dur = 21;
  google.protobuf.Int64Value w_i64 = 22; google.protobuf.StringValue w_s = 23; google.protobuf.UInt64Value w_u64 = 24;
  google.protobuf.Struct st = 25; google.protobuf.Value val = 26; google.protobuf.Any any = 27;
  Inner inner = 28;
  google.protobuf.Empty nothing = 29;
  message Inner { string name = 1; }
}
message Node { string v = 1; Node next = 2; }
message Outer { message Mid { message Leaf { int64 n = 1; } } int32 o = 1; }
`

func mustProto(t testing.TB, text string, files map[string]string) *WriterSchema {
	t.Helper()
	ws, err := CompileProtobuf(7, text, files)
	if err != nil {
		t.Fatalf("compile protobuf: %v", err)
	}
	return ws
}

// pbBody marshals the protojson document js as ws's message.
func pbBody(t testing.TB, ws *WriterSchema, js string) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(ws.body.(*protoBody).md)
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatalf("protojson: %v", err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pbValue is the record's transcoded body as Avro values (what dlq inspect shows).
func pbValue(t testing.TB, ws *WriterSchema, body []byte) map[string]any {
	t.Helper()
	a, err := ws.Transcode(body)
	if err != nil {
		t.Fatalf("transcode: %v", err)
	}
	var v map[string]any
	if err := avro.Unmarshal(ws.Avro, a, &v); err != nil {
		t.Fatalf("avro unmarshal of the transcoded body: %v", err)
	}
	return v
}

func TestProtobufDeltaSchema(t *testing.T) {
	ws := mustProto(t, pbRich, nil)
	if ws.DeltaErr != nil {
		t.Fatal(ws.DeltaErr)
	}
	want := "struct<b:boolean,i32:integer,s32:integer,u32:long,i64:long,u64:decimal(20,0),f64:decimal(20,0),f:float,d:double,s:string,by:binary,color:string," +
		"opt:integer,text:string,num:long,counts:map<string,long>,by_id:map<string,struct<name:string>>,tags:array<string>,items:array<struct<name:string>>," +
		"ts:timestamp,dur:long,w_i64:long,w_s:string,w_u64:decimal(20,0),st:string,val:string,any:string,inner:struct<name:string>>"
	if got := ws.Delta.String(); got != want {
		t.Fatalf("delta schema\n got %s\nwant %s", got, want)
	}
	// Presence decides nullability: proto3 implicit-presence scalars, repeated and map
	// fields are NOT NULL (absent is the zero value); optional, oneof members, messages and
	// wrappers are nullable.
	var nullable []string
	for _, f := range ws.Delta.Fields {
		if f.Nullable {
			nullable = append(nullable, f.Name)
		}
	}
	if got := strings.Join(nullable, ","); got != "opt,text,num,ts,dur,w_i64,w_s,w_u64,st,val,any,inner" {
		t.Fatalf("nullable columns %s", got)
	}
}

func TestProtobufValues(t *testing.T) {
	ws := mustProto(t, pbRich, nil)
	body := pbBody(t, ws, `{"b":true,"i32":-5,"s32":-7,"u32":4294967295,"i64":"-9223372036854775808","u64":"18446744073709551615","f64":"128",
	 "f":1.5,"d":-2.25,"s":"héllo","by":"AAEC","color":"GREEN","opt":0,"num":"42",
	 "counts":{"b":2,"a":1},"by_id":{"10":{"name":"ten"},"9":{"name":"nine"}},"tags":["x","y"],"items":[{"name":"i1"},{}],
	 "ts":"2024-03-01T12:34:56.123456789Z","dur":"-1.500000999s","w_i64":"0","w_s":"","w_u64":"1",
	 "st":{"z":1,"a":[true,null,"s"]},"val":2.5,"any":{"@type":"type.googleapis.com/google.protobuf.Empty"},
	 "inner":{"name":"in"},"nothing":{}}`)
	got := pbValue(t, ws, body)
	dec := func(s string) *big.Rat { r, _ := new(big.Rat).SetString(s); return r }
	want := map[string]any{
		"b": true, "i32": -5, "s32": -7, "u32": int64(4294967295), "i64": int64(-9223372036854775808),
		"u64": dec("18446744073709551615"), "f64": dec("128"), "f": float32(1.5), "d": -2.25, "s": "héllo", "by": []byte{0, 1, 2},
		"color": "GREEN", "opt": 0, "text": nil, "num": int64(42),
		"counts": map[string]any{"a": int64(1), "b": int64(2)},
		"by_id":  map[string]any{"10": map[string]any{"name": "ten"}, "9": map[string]any{"name": "nine"}},
		"tags":   []any{"x", "y"}, "items": []any{map[string]any{"name": "i1"}, map[string]any{"name": ""}},
		// nanoseconds below the microsecond are dropped; a Duration is microseconds, truncated toward zero
		"ts":    time.Date(2024, 3, 1, 12, 34, 56, 123456000, time.UTC),
		"dur":   int64(-1500000),
		"w_i64": int64(0), "w_s": "", "w_u64": dec("1"),
		"st": `{"a":[true,null,"s"],"z":1}`, "val": `2.5`,
		"any":     `{"@type":"type.googleapis.com/google.protobuf.Empty","value":""}`,
		"inner":   map[string]any{"t.Rec.Inner": map[string]any{"name": "in"}}, // hamba names a union's record branch
		"nothing": nil,                                                         // google.protobuf.Empty: no column (a null-typed Avro field)
	}
	for k, w := range want {
		g := got[k]
		if gr, ok := g.(*big.Rat); ok {
			if wr, ok := w.(*big.Rat); !ok || gr.Cmp(wr) != 0 {
				t.Errorf("%s = %v, want %v", k, g, w)
			}
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s = %#v, want %#v", k, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d fields, want %d: %v", len(got), len(want), got)
	}
}

func TestProtobufPresenceAndOpenEnums(t *testing.T) {
	ws := mustProto(t, pbRich, nil)
	// Absent everywhere: implicit-presence scalars are their zero values, tracked presence is null.
	got := pbValue(t, ws, nil)
	for k, w := range map[string]any{"i32": 0, "s": "", "color": "RED", "opt": nil, "text": nil, "num": nil, "ts": nil, "w_i64": nil, "inner": nil, "tags": []any{}, "counts": map[string]any{}} {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("absent %s = %#v, want %#v", k, got[k], w)
		}
	}
	// An enum number the schema does not name (proto3 enums are open) is its number as text.
	got = pbValue(t, ws, pbBody(t, ws, `{"color":7,"text":"t"}`))
	if got["color"] != "7" || got["text"] != "t" || got["num"] != nil {
		t.Fatalf("color %#v text %#v num %#v", got["color"], got["text"], got["num"])
	}
}

func TestProtobufColumns(t *testing.T) {
	ws := mustProto(t, `syntax = "proto3"; message M { uint64 id = 1; string name = 2; optional int32 n = 3; repeated string tags = 4; }`, nil)
	table := ws.Delta
	pq := mustParquet(t, table, deltalog.ColumnMappingNone)
	d, err := CompileRecord(ws, table, deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatal(err)
	}
	cols := make([]column.Column, d.Columns())
	for i, l := range column.Leaves(pq) {
		cols[i].Reset(l)
	}
	var a Arena
	a.AliasPayloads()
	for _, js := range []string{`{"id":"18446744073709551615","name":"a","n":3,"tags":["x"]}`, `{"name":"bb"}`} {
		if err := d.DecodeColumns(&a, pbBody(t, ws, js), cols); err != nil {
			t.Fatal(err)
		}
	}
	if !a.AliasesPayloads() {
		t.Fatal("the arena no longer aliases payloads")
	}
	rows := map[string][]string{}
	for i := range cols {
		name := strings.Join(pq.Columns()[i], ".")
		for j := range cols[i].Len() {
			rows[name] = append(rows[name], render(cols[i].At(j)))
		}
	}
	want := map[string][]string{
		"id":                {"0/1:0x00ffffffffffffffff", "0/1:0x000000000000000000"}, // decimal(20,0): 2^64-1 and 0
		"name":              {`0/1:"a"`, `0/1:"bb"`},
		"n":                 {"0/1:3", "0/0:null"},
		"tags.list.element": {`0/3:"x"`, "0/1:null"},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("columns\n got %q\nwant %q", rows, want)
	}
}

func TestProtobufRecursionRefusedPerSchema(t *testing.T) {
	ws := mustProto(t, pbRich, nil)
	node, body, err := ws.Message([]byte{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(body) != 0 || ReasonOf(node.DeltaErr) != ReasonUnsupportedType || FieldOf(node.DeltaErr) != "next" ||
		!strings.Contains(node.DeltaErr.Error(), "recursive message t.Node -> t.Node") {
		t.Fatalf("recursive message: %v", node.DeltaErr)
	}
}

func TestProtobufMessageIndexes(t *testing.T) {
	ws := mustProto(t, pbRich, nil)
	for _, c := range []struct {
		in   string // hex
		name string // the selected message; "" for an error
		rest string
		why  string
	}{
		{"00ff", "t.Rec", "ff", ""},
		{"0200ff", "t.Rec", "ff", ""},                // count 1, index 0: the long form of [0]
		{"0202", "t.Node", "", ""},                   // [1]
		{"0604000000", "t.Outer.Mid.Leaf", "00", ""}, // [2, 0, 0]
		{"0404000a", "t.Outer.Mid", "0a", ""},        // [2, 0]
		{"060400020a", "", "", "index 1 at depth 2"}, // [2, 0, 1]: Mid has one nested message
		{"0208", "", "", "index 4 at depth 0"},       // [4]: the file has 3 messages
		{"01", "", "", "outside 1..32"},              // count -1
		{"42", "", "", "outside 1..32"},              // count 33
		{"0201", "", "", "outside 0..2147483647"},    // index -1
		{"02", "", "", "unexpected end"},
		{"", "", "", "unexpected end"},
		{"ffffffffffffffffffffff", "", "", "overflows"},
	} {
		in, _ := hex.DecodeString(c.in)
		got, rest, err := ws.Message(in)
		if c.name == "" {
			if err == nil || !strings.Contains(err.Error(), c.why) {
				t.Errorf("%s: %v, want an error with %q", c.in, err, c.why)
			}
			continue
		}
		if err != nil || hex.EncodeToString(rest) != c.rest {
			t.Errorf("%s: %v rest %x", c.in, err, rest)
			continue
		}
		n := ""
		if got.Avro != nil {
			n = got.Avro.(*avro.RecordSchema).FullName()
		} else if strings.Contains(got.DeltaErr.Error(), c.name) {
			n = c.name
		}
		if n != c.name {
			t.Errorf("%s: message %s, want %s", c.in, n, c.name)
		}
	}
	// Each message of the file has its own Key; the first shares the schema id.
	a, _, _ := ws.Message([]byte{0})
	b, _, _ := ws.Message([]byte{2, 2})
	b2, _, _ := ws.Message([]byte{2, 2})
	if a.Key() != 7 || b.Key() == 7 || b.ID != 7 || b != b2 {
		t.Fatalf("keys %d %d (%v)", a.Key(), b.Key(), b == b2)
	}
}

func TestProtobufImports(t *testing.T) {
	common := `syntax = "proto3"; package c; message Money { int64 units = 1; string currency = 2; }`
	ws := mustProto(t, `syntax = "proto3"; package o; import "common.proto"; import "google/protobuf/timestamp.proto";
message Order { c.Money total = 1; google.protobuf.Timestamp at = 2; }`, map[string]string{"common.proto": common})
	if got := ws.Delta.String(); got != "struct<total:struct<units:long,currency:string>,at:timestamp>" {
		t.Fatal(got)
	}
	if _, err := CompileProtobuf(8, `syntax = "proto3"; import "missing.proto"; message M { int32 a = 1; }`, nil); ReasonOf(err) != ReasonSchemaParseError {
		t.Fatalf("missing import: %v", err)
	}
}

func TestProtobufBadBodies(t *testing.T) {
	ws := mustProto(t, pbRich, nil)
	for _, c := range []struct {
		hex, reason, field string
	}{
		{"0a", ReasonDecodeError, ""},                             // field 1 tag without its value
		{"520203", ReasonDecodeError, ""},                         // string field 10 with invalid UTF-8 (proto3 checks it)
		{"a2010b0880b0a4bc8bfdffffff01", ReasonDecodeError, "ts"}, // Timestamp with seconds -100000000000 (before year 1)
	} {
		b, _ := hex.DecodeString(c.hex)
		_, err := ws.Transcode(b)
		if ReasonOf(err) != c.reason || FieldOf(err) != c.field {
			t.Errorf("%s: %v", c.hex, err)
		}
	}
}

func TestProtobufWKTJSONIsStable(t *testing.T) {
	ws := mustProto(t, pbRich, nil)
	got := pbValue(t, ws, pbBody(t, ws, `{"st":{"k":{"b":[1,2,{"c":"d"}]},"a":"x"}}`))
	var v any
	s := got["st"].(string)
	if err := json.Unmarshal([]byte(s), &v); err != nil || s != `{"a":"x","k":{"b":[1,2,{"c":"d"}]}}` {
		t.Fatalf("struct JSON %s %v", s, err)
	}
}

// Confluent's serializers register a schema, by default, as the base64 of its serialized
// FileDescriptorProto, and Apicurio serves that form back: it compiles to the same writer
// schemas as the .proto text (message index [2], well-known imports included), and a
// reference in that form resolves too.
func TestProtobufBase64Descriptor(t *testing.T) {
	text := mustProto(t, pbRich, nil)
	fdp := protodesc.ToFileDescriptorProto(text.body.(*protoBody).md.ParentFile())
	raw, err := proto.Marshal(fdp)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(raw)
	fromB64 := mustProto(t, b64, nil)
	for _, idx := range [][]int{{0}, {2}, {2, 0, 0}} {
		var path []byte // the message-index array: count, then each index, zig-zag varints
		path = protowire.AppendVarint(path, protowire.EncodeZigZag(int64(len(idx))))
		for _, i := range idx {
			path = protowire.AppendVarint(path, protowire.EncodeZigZag(int64(i)))
		}
		a, _, err := text.Message(path)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := fromB64.Message(path)
		if err != nil {
			t.Fatal(err)
		}
		if a.Delta.String() != b.Delta.String() || a.Avro.String() != b.Avro.String() {
			t.Fatalf("message %v: from base64 %s / %s, from text %s / %s", idx, b.Delta, b.Avro, a.Delta, a.Avro)
		}
	}
	body := pbBody(t, text, `{"s":"x","i64":"-5","ts":"1970-01-01T00:00:01.000001Z"}`)
	if got, want := fmt.Sprint(pbValue(t, fromB64, body)), fmt.Sprint(pbValue(t, text, body)); got != want {
		t.Fatalf("value from base64 %s, from text %s", got, want)
	}
	// A reference in base64, imported by a main file in text.
	common := mustProto(t, `syntax = "proto3"; package c; message Money { int64 units = 1; }`, nil)
	craw, err := proto.Marshal(protodesc.ToFileDescriptorProto(common.body.(*protoBody).md.ParentFile()))
	if err != nil {
		t.Fatal(err)
	}
	ws := mustProto(t, `syntax = "proto3"; import "c.proto"; message P { c.Money price = 1; }`,
		map[string]string{"c.proto": base64.RawStdEncoding.EncodeToString(craw)})
	if got := ws.Delta.String(); got != "struct<price:struct<units:long>>" {
		t.Fatalf("delta schema %s", got)
	}
	if _, err := CompileProtobuf(9, base64.StdEncoding.EncodeToString([]byte("not a descriptor")), nil); ReasonOf(err) != ReasonSchemaParseError {
		t.Fatalf("base64 of garbage: %v, want schema_parse_error", err)
	}
}
