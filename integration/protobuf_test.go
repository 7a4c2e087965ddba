package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

const (
	pbCommon = `syntax = "proto3";
package shop;
message Money { int64 units = 1; string currency = 2; }
`
	// pbOrdersV1: two top-level messages importing common.proto (Order and Refund), a
	// nested message (Order.Line) and a well-known type import.
	pbOrdersV1 = `syntax = "proto3";
package shop;
import "common.proto";
import "google/protobuf/timestamp.proto";
enum Status { NEW = 0; PAID = 1; }
message Order {
  message Line { string sku = 1; int32 qty = 2; }
  int64 id = 1;
  Money total = 2;
  google.protobuf.Timestamp at = 3;
  Status status = 4;
  uint64 big = 5;
  repeated Line lines = 6;
  optional string note = 7;
}
message Refund { int64 id = 1; Money amount = 2; }
`
	// pbOrdersV2 adds a field to Order (an evolution of the subject).
	pbOrdersV2 = `syntax = "proto3";
package shop;
import "common.proto";
import "google/protobuf/timestamp.proto";
enum Status { NEW = 0; PAID = 1; }
message Order {
  message Line { string sku = 1; int32 qty = 2; }
  int64 id = 1;
  Money total = 2;
  google.protobuf.Timestamp at = 3;
  Status status = 4;
  uint64 big = 5;
  repeated Line lines = 6;
  optional string note = 7;
  string channel = 8;
}
message Refund { int64 id = 1; Money amount = 2; }
`
)

// pbMessages compiles the .proto texts as a producer would and returns the messages by
// full name.
func pbMessages(t *testing.T, main string) map[string]protoreflect.MessageDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"common.proto": pbCommon, "orders.proto": main})})}
	fs, err := c.Compile(context.Background(), "orders.proto")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]protoreflect.MessageDescriptor{}
	var walk func(protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			out[string(ms.Get(i).FullName())] = ms.Get(i)
			walk(ms.Get(i).Messages())
		}
	}
	walk(fs[0].Messages())
	return out
}

// pbMsg is a protojson document as a message of md.
type pbMsg struct {
	md protoreflect.MessageDescriptor
	js string
}

// Protobuf through the real registry (Apicurio's Confluent-compatible API) and a real
// producer (franz-go's sr.Serde, which writes the message-index array): a schema with a
// common.proto reference and a well-known import, records of the file's first message
// ([0], the single byte 0), of its second ([1]) and of a nested message ([0, 0]), an
// evolution (v2 adds a field), a body that is not Protobuf and an index beyond the file's
// messages. Under evolve, one `ingestd run` writes every good record (the second message
// and the nested one add their columns), dead-letters the two bad ones with their reasons,
// and Spark and delta-rs read the exact values back.
func TestProtobufFormat(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	topic := createTopic(t, s, "pb", 1)
	dlq := createTopic(t, s, "pb.dlq", 1)
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.CreateSchema(ctx, topic+"-common", sr.Schema{Schema: pbCommon, Type: sr.TypeProtobuf}); err != nil {
		t.Fatalf("register common.proto: %v", err)
	}
	refs := []sr.SchemaReference{{Name: "common.proto", Subject: topic + "-common", Version: 1}}
	v1, err := reg.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: pbOrdersV1, Type: sr.TypeProtobuf, References: refs})
	if err != nil {
		t.Fatalf("register orders v1: %v", err)
	}
	v2, err := reg.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: pbOrdersV2, Type: sr.TypeProtobuf, References: refs})
	if err != nil {
		t.Fatalf("register orders v2: %v", err)
	}
	m1, m2 := pbMessages(t, pbOrdersV1), pbMessages(t, pbOrdersV2)
	encode := func(v any) ([]byte, error) {
		m := v.(pbMsg)
		d := dynamicpb.NewMessage(m.md)
		if err := protojson.Unmarshal([]byte(m.js), d); err != nil {
			return nil, err
		}
		return proto.MarshalOptions{Deterministic: true}.Marshal(d)
	}
	var serde sr.Serde
	type (
		orderV1 struct{ pbMsg }
		refund  struct{ pbMsg }
		line    struct{ pbMsg }
		orderV2 struct{ pbMsg }
	)
	unwrap := func(fn func(any) ([]byte, error), get func(any) pbMsg) sr.EncodingOpt {
		return sr.EncodeFn(func(v any) ([]byte, error) { return fn(get(v)) })
	}
	serde.Register(v1.ID, orderV1{}, unwrap(encode, func(v any) pbMsg { return v.(orderV1).pbMsg }), sr.Index(0))
	serde.Register(v1.ID, refund{}, unwrap(encode, func(v any) pbMsg { return v.(refund).pbMsg }), sr.Index(1))
	serde.Register(v1.ID, line{}, unwrap(encode, func(v any) pbMsg { return v.(line).pbMsg }), sr.Index(0, 0))
	serde.Register(v2.ID, orderV2{}, unwrap(encode, func(v any) pbMsg { return v.(orderV2).pbMsg }), sr.Index(0))
	values := []any{
		orderV1{pbMsg{m1["shop.Order"], `{"id":"1","total":{"units":"1999","currency":"EUR"},"at":"2024-05-01T10:00:00.123456789Z","status":"PAID","big":"18446744073709551615","lines":[{"sku":"a","qty":2}],"note":""}`}},
		orderV1{pbMsg{m1["shop.Order"], `{"id":"2","status":5}`}},
		refund{pbMsg{m1["shop.Refund"], `{"id":"3","amount":{"units":"-5","currency":"USD"}}`}},
		line{pbMsg{m1["shop.Order.Line"], `{"sku":"z","qty":-1}`}},
		orderV2{pbMsg{m2["shop.Order"], `{"id":"5","channel":"web","lines":[{"sku":"b"},{"sku":"c","qty":3}]}`}},
	}
	var recs []*kgo.Record
	for _, v := range values {
		b, err := serde.Encode(v)
		if err != nil {
			t.Fatalf("encode %v: %v", v, err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Value: b})
	}
	if recs[0].Value[5] != 0 || recs[2].Value[5] != 2 || recs[2].Value[6] != 2 {
		t.Fatalf("the serde's index arrays: %x, %x", recs[0].Value[:7], recs[2].Value[:7])
	}
	hdr := func(id int) []byte { return []byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)} }
	recs = append(recs,
		&kgo.Record{Topic: topic, Value: append(hdr(v1.ID), 0, 0x0a)},          // [0], then a tag without its value
		&kgo.Record{Topic: topic, Value: append(hdr(v1.ID), 2, 8, 0x08, 0x01)}, // [4]: the file has two messages
		&kgo.Record{Topic: topic, Value: append(hdr(v1.ID), 2, 0, 0x08, 0x06)}, // [0] in the long form: id 6
	)
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(dir, "pb")
	writePipeline(t, cfgDir, "pb", fmt.Sprintf(`name: pb
format: protobuf
kafka: {brokers: [%q], topics: [%s], group: pb-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: "file://%s", create: true}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: 2000, max_age: 300ms}
`, s.brokers, topic, time.Now().UnixNano(), s.registry, table, dlq))
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "the 8 records to be handled", func() bool { return handled(t, table) == int64(len(recs)) })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	var dead []string
	for _, r := range readDLQ(t, s, dlq) {
		dead = append(dead, r.headers["ingestd.error.reason"]+"@"+r.headers["__connect.errors.offset"]+"#"+r.headers["ingestd.error.schema_id"])
	}
	slices.Sort(dead)
	if want := fmt.Sprintf("[decode_error@5#%d decode_error@6#%d]", v1.ID, v1.ID); fmt.Sprint(dead) != want {
		t.Errorf("dead letters %v, want %s", dead, want)
	}

	// Columns in the order they were added: Order v1's, Refund's amount, Line's sku and
	// qty, v2's channel.
	want := map[string]string{
		"1":     `{"amount":null,"at":"2024-05-01 10:00:00.123456","big":"18446744073709551615","channel":null,"lines":[{"qty":2,"sku":"a"}],"note":"","qty":null,"sku":null,"status":"PAID","total":{"currency":"EUR","units":1999}}`,
		"2":     `{"amount":null,"at":null,"big":"0","channel":null,"lines":[],"note":null,"qty":null,"sku":null,"status":"5","total":null}`,
		"3":     `{"amount":{"currency":"USD","units":-5},"at":null,"big":null,"channel":null,"lines":null,"note":null,"qty":null,"sku":null,"status":null,"total":null}`,
		"<nil>": `{"amount":null,"at":null,"big":null,"channel":null,"lines":null,"note":null,"qty":-1,"sku":"z","status":null,"total":null}`,
		"5":     `{"amount":null,"at":null,"big":"0","channel":"web","lines":[{"qty":0,"sku":"b"},{"qty":3,"sku":"c"}],"note":null,"qty":null,"sku":null,"status":"NEW","total":null}`,
		"6":     `{"amount":null,"at":null,"big":"0","channel":null,"lines":[],"note":null,"qty":null,"sku":null,"status":"NEW","total":null}`,
	}
	query := "SELECT CAST(id AS STRING) AS id, total, date_format(at, 'yyyy-MM-dd HH:mm:ss.SSSSSS') AS at, status, CAST(big AS STRING) AS big, " +
		"lines, note, amount, sku, qty, channel FROM delta.`" + table + "`"
	var sparkRows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": query}, &sparkRows)
	sameRowMap(t, "Spark", rowsByKey(t, sparkRows), want)

	got := readTable(t, s, table)
	if got.Unsupported != "" {
		t.Fatalf("delta-rs cannot read the table: %s", got.Unsupported)
	}
	if g := got.schemaText(); g != "id int64, total struct<units: int64, currency: string>, at timestamp[us, tz=UTC], status string, big decimal128(20, 0), lines list<element: struct<sku: string, qty: int32>>, note string, amount struct<units: int64, currency: string>, sku string, qty int32, channel string" {
		t.Errorf("delta-rs schema %s", g)
	}
	// delta-rs gives the timestamp as microseconds since the epoch.
	want["1"] = strings.Replace(want["1"], `"at":"2024-05-01 10:00:00.123456"`, `"at":1714557600123456`, 1)
	sameRowMap(t, "delta-rs", rowsByKey(t, got.Rows), want)
}
