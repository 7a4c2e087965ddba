package ingest

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/dlq"
)

// A replay fills the Kafka columns from the original record the dead letter keeps: its
// flusher's origin (rowfill.Options.Origin) gives the source topic, partition, offset,
// headers (in order, repeats kept, without the dead letter's own) and timestamp, not the
// DLQ's; a
// consumer's flusher has none (a record's own coordinates).
func TestReplayOriginIsTheDeadLettersSource(t *testing.T) {
	src := &kgo.Record{Topic: "orders", Partition: 3, Offset: 12, Key: []byte("k1"), Timestamp: time.UnixMilli(1_700_000_000_123),
		Headers: []kgo.RecordHeader{{Key: "x-tag", Value: []byte("tag1")}, {Key: "x-tag", Value: []byte("tag2")}}}
	dl := dlq.DeadLetter{Rec: src, Reason: decode.ReasonSchemaMismatch, SchemaID: 101, TableVersion: 1, Ack: dlq.Ack{CommitID: "c", TxnAppID: "a-orders-3", TxnVersion: 12}}
	r := dl.Record("orders.dlq", "orders", time.Now())
	r.Partition, r.Offset = 0, 77 // where the dead letter sits in the DLQ

	origin := newKafkaState(&replayMode{}).origin()
	if origin == nil {
		t.Fatal("a replay's flusher has no origin: its Kafka columns would hold the DLQ's coordinates")
	}
	o := origin(r)
	if got, want := fmt.Sprintf("%s/%d/%d %v %d", o.Topic, o.Partition, o.Offset, o.Headers, o.TimestampMs), `orders/3/12 [{x-tag [116 97 103 49]} {x-tag [116 97 103 50]}] 1700000000123`; got != want {
		t.Errorf("origin of the dead letter: %s, want %s", got, want)
	}
	if newKafkaState(&consumerMode{}).origin() != nil {
		t.Error("a consumer's flusher has an origin; want nil (a record's own coordinates and headers)")
	}
}
