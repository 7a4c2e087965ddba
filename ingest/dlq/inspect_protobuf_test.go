package dlq

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/decode"
)

type oneSchema struct{ ws *decode.WriterSchema }

func (o oneSchema) Schema(context.Context, int) (*decode.WriterSchema, error) { return o.ws, nil }

// dlq inspect decodes a Protobuf dead letter with its own schema: the message its
// message-index array selects ([1], the file's second message), as the values of the
// schema derived from it.
func TestInspectDecodesProtobuf(t *testing.T) {
	ws, err := decode.CompileProtobuf(9, `syntax = "proto3"; message A { int64 a = 1; } message B { uint64 n = 1; string s = 2; optional int32 o = 3; }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	// [1], then n = 300 (field 1, varint), s = "hi" (field 2, length 2)
	value := []byte{0, 0, 0, 0, 9, 2, 2, 0x08, 0xac, 0x02, 0x12, 2, 'h', 'i'}
	src := &kgo.Record{Topic: "src", Value: value}
	r := DeadLetter{Pipeline: "p", Rec: src, Reason: "schema_mismatch", SchemaID: 9, TableVersion: 0}.Record("d", "t", time.Now())
	s := sample(context.Background(), InspectOptions{Schemas: oneSchema{ws}, Framed: true}, r)
	b, _ := json.Marshal(s.Value)
	if s.DecodeError != "" || string(b) != `{"n":"300","o":null,"s":"hi"}` {
		t.Fatalf("sample value %s, decode error %q", b, s.DecodeError)
	}
}

// A plain JSON dead letter is shown as its document, numbers exact.
func TestInspectShowsJSON(t *testing.T) {
	src := &kgo.Record{Topic: "src", Value: []byte(`{"id": 9007199254740993, "x": [1.10]}`)}
	r := DeadLetter{Pipeline: "p", Rec: src, Reason: "decode_error", SchemaID: -1, TableVersion: 0}.Record("d", "t", time.Now())
	s := sample(context.Background(), InspectOptions{Schemas: oneSchema{}, Format: decode.FormatJSON}, r)
	b, _ := json.Marshal(s.Value)
	if s.DecodeError != "" || string(b) != `{"id":9007199254740993,"x":[1.10]}` {
		t.Fatalf("sample value %s, decode error %q", b, s.DecodeError)
	}
}

// A plain JSON dead letter is shown as it was sent: a repeated key (a decode_error) and
// the producer's key order stay, so the sample is the document that failed, not a
// rewritten one; bytes after the document (trailing_bytes) are not shown.
func TestInspectShowsJSONAsSent(t *testing.T) {
	src := &kgo.Record{Topic: "src", Value: []byte(`{"name": "a", "id": 2, "name": "b"} trailing`)}
	r := DeadLetter{Pipeline: "p", Rec: src, Reason: "decode_error", SchemaID: -1, TableVersion: 0}.Record("d", "t", time.Now())
	s := sample(context.Background(), InspectOptions{Schemas: oneSchema{}, Format: decode.FormatJSON}, r)
	b, _ := json.Marshal(s.Value)
	if s.DecodeError != "" || string(b) != `{"name":"a","id":2,"name":"b"}` {
		t.Fatalf("sample value %s, decode error %q", b, s.DecodeError)
	}
}
