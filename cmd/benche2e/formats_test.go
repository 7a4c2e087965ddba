package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The Protobuf, JSON and JSON Schema records carry the Avro record's values, field for
// field; the JSON Schema record is the JSON one framed, and its schema accepts it.
func TestFormatsCarryTheAvroRecord(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(recordJSONSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("bench.json", doc); err != nil {
		t.Fatal(err)
	}
	jsch, err := c.Compile("bench.json")
	if err != nil {
		t.Fatal(err)
	}
	files, err := (&protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"bench.proto": recordProto})})}).Compile(context.Background(), "bench.proto")
	if err != nil {
		t.Fatal(err)
	}
	md := files[0].Messages().Get(0)
	sch := avro.MustParse(recordSchema)
	enc, err := newEncoder(7, 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int64{0, 1, 2, 12_345_678} {
		ts := int64(1_796_131_462_828_123)
		var want map[string]any
		if err := avro.Unmarshal(sch, enc.appendRecord(nil, i, ts)[frameHeaderLen:], &want); err != nil {
			t.Fatal(err)
		}
		want["ts"] = want["ts"].(time.Time).UnixMicro()

		pb := enc.appendFormat(formatProtobuf, nil, i, ts)
		if !bytes.Equal(pb[:6], []byte{0, 0, 0, 0, 7, 0}) {
			t.Fatalf("protobuf frame % x", pb[:6])
		}
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(pb[6:], m); err != nil {
			t.Fatal(err)
		}
		fs := md.Fields()
		tsm := m.Get(fs.ByName("ts")).Message()
		var tags []any
		for k := range m.Get(fs.ByName("tags")).List().Len() {
			tags = append(tags, m.Get(fs.ByName("tags")).List().Get(k).String())
		}
		got := map[string]any{"id": m.Get(fs.ByName("id")).Int(), "name": m.Get(fs.ByName("name")).String(), "score": m.Get(fs.ByName("score")).Float(),
			"active": m.Get(fs.ByName("active")).Bool(), "ts": tsm.Get(tsm.Descriptor().Fields().ByNumber(1)).Int()*1_000_000 + tsm.Get(tsm.Descriptor().Fields().ByNumber(2)).Int()/1000,
			"note": m.Get(fs.ByName("note")).String(), "count": int(m.Get(fs.ByName("count")).Int()), "amount": m.Get(fs.ByName("amount")).Float(),
			"kind": string(fs.ByName("kind").Enum().Values().ByNumber(m.Get(fs.ByName("kind")).Enum()).Name()), "tags": tags}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("record %d in protobuf\n got %v\nwant %v", i, got, want)
		}

		var js map[string]any
		if err := json.Unmarshal(enc.appendFormat(formatJSON, nil, i, ts), &js); err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339Nano, js["ts"].(string))
		if err != nil {
			t.Fatal(err)
		}
		js["id"], js["ts"], js["count"] = int64(js["id"].(float64)), at.UnixMicro(), int(js["count"].(float64))
		if !reflect.DeepEqual(js, want) {
			t.Fatalf("record %d in JSON\n got %v\nwant %v", i, js, want)
		}

		framed := enc.appendFormat(formatJSONSchema, nil, i, ts)
		if !bytes.Equal(framed[:frameHeaderLen], []byte{0, 0, 0, 0, 7}) || !bytes.Equal(framed[frameHeaderLen:], enc.appendFormat(formatJSON, nil, i, ts)) {
			t.Fatalf("record %d in json_schema: %q, want the frame of schema 7 and the JSON record", i, framed)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(framed[frameHeaderLen:]))
		if err != nil {
			t.Fatal(err)
		}
		if err := jsch.Validate(inst); err != nil {
			t.Fatalf("record %d does not match recordJSONSchema: %v", i, err)
		}
		inst.(map[string]any)["kind"] = "OTHER"
		if err := jsch.Validate(inst); err == nil {
			t.Fatal("recordJSONSchema accepts a kind outside its enum")
		}
	}
}
