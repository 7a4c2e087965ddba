package ingest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestDLQRecordHeaders(t *testing.T) {
	src := &kgo.Record{Topic: "orders", Partition: 2, Offset: 41, Key: []byte("k"), Value: []byte{0, 0, 0, 0, 7, 1, 2},
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}}}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	first := dlqRecord("orders.dlq", "file:///t", deadLetter{rec: src, reason: "schema_mismatch", field: "channel", message: "m", schemaID: 7, tableVersion: 3,
		ack: ack{commitID: "c-1", txnAppID: "app-orders-2", txnVersion: 41}}, now)
	want := map[string]string{
		"trace": "abc", "__connect.errors.topic": "orders", "__connect.errors.partition": "2", "__connect.errors.offset": "41",
		"__connect.errors.exception.class.name": "ingestd.SchemaMismatchError", "__connect.errors.exception.message": "m",
		"__connect.errors.stage": "TASK_PUT", "ingestd.error.reason": "schema_mismatch", "ingestd.error.field": "channel",
		"ingestd.error.table": "file:///t", "ingestd.error.table_version": "3", "ingestd.error.schema_id": "7",
		"ingestd.error.time": "2026-11-29T12:00:00Z", "ingestd.replay.count": "0",
		"ingestd.commit.id": "c-1", "ingestd.txn.app_id": "app-orders-2", "ingestd.txn.version": "41",
	}
	check := func(r *kgo.Record, want map[string]string) {
		t.Helper()
		if string(r.Value) != string(src.Value) || string(r.Key) != "k" || r.Topic != "orders.dlq" {
			t.Errorf("key/value/topic changed: %q %q %s", r.Key, r.Value, r.Topic)
		}
		got := map[string]string{}
		for _, h := range r.Headers {
			if _, dup := got[h.Key]; dup {
				t.Errorf("header %s appears twice", h.Key)
			}
			got[h.Key] = string(h.Value)
		}
		if len(got) != len(want) {
			t.Errorf("headers %v\nwant %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("header %s = %q, want %q", k, got[k], v)
			}
		}
	}
	check(first, want)
	// Re-failing (e.g. during replay) replaces ingestd's and Connect's headers (the ack
	// headers too), never duplicates them, and keeps the replay count it was given.
	first.Topic, first.Partition, first.Offset = "orders.dlq", 0, 9
	first.Headers = append(first.Headers, kgo.RecordHeader{Key: "ingestd.replay.count", Value: []byte("1")})
	second := dlqRecord("orders.dlq", "file:///t", deadLetter{rec: first, reason: "bad_magic", message: "m2", schemaID: -1, tableVersion: 4,
		ack: ack{commitID: "c-2", txnAppID: "app-replay-orders.dlq-0", txnVersion: 9}}, now)
	want2 := map[string]string{
		"trace": "abc", "__connect.errors.topic": "orders.dlq", "__connect.errors.partition": "0", "__connect.errors.offset": "9",
		"__connect.errors.exception.class.name": "ingestd.BadMagicError", "__connect.errors.exception.message": "m2",
		"__connect.errors.stage": "VALUE_CONVERTER", "ingestd.error.reason": "bad_magic", "ingestd.error.field": "",
		"ingestd.error.table": "file:///t", "ingestd.error.table_version": "4",
		"ingestd.error.time": "2026-11-29T12:00:00Z", "ingestd.replay.count": "1",
		"ingestd.commit.id": "c-2", "ingestd.txn.app_id": "app-replay-orders.dlq-0", "ingestd.txn.version": "9",
	}
	check(second, want2)
}
