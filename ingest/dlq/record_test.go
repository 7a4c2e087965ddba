package dlq

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// wrappedMillis is a record timestamp as franz-go's consumer builds it from the broker's ms:
// time.Unix(0, ms*1e6), the product wrapping modulo 2^64 outside 1677–2262.
func wrappedMillis(ms int64) time.Time { return time.Unix(0, int64(uint64(ms)*1e6)) }

// A dead letter's headers; its record timestamp is the time of dead-lettering and the
// source's timestamp (here 9999-12-31T23:59:59.999Z, which franz-go's producer could not
// write: it goes through int64 ns) is ingestd.error.source_timestamp, exact, through a
// re-failure and Refailed.
func TestDLQRecordHeaders(t *testing.T) {
	src := &kgo.Record{Topic: "orders", Partition: 2, Offset: 41, Key: []byte("k"), Value: []byte{0, 0, 0, 0, 7, 1, 2},
		Timestamp: wrappedMillis(253402300799999), Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}}}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	first := DeadLetter{Rec: src, Reason: "schema_mismatch", Field: "channel", Message: "m", SchemaID: 7, TableVersion: 3,
		Ack: Ack{CommitID: "c-1", TxnAppID: "app-orders-2", TxnVersion: 41}}.Record("orders.dlq", "file:///t", now)
	want := map[string]string{
		"trace": "abc", "__connect.errors.topic": "orders", "__connect.errors.partition": "2", "__connect.errors.offset": "41",
		"__connect.errors.exception.class.name": "ingestd.SchemaMismatchError", "__connect.errors.exception.message": "m",
		"__connect.errors.stage": "TASK_PUT", "ingestd.error.reason": "schema_mismatch", "ingestd.error.field": "channel",
		"ingestd.error.table": "file:///t", "ingestd.error.table_version": "3", "ingestd.error.schema_id": "7",
		"ingestd.error.time": "2026-11-29T12:00:00Z", "ingestd.error.source_timestamp": "253402300799999", "ingestd.replay.count": "0",
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
	if !first.Timestamp.Equal(now) {
		t.Errorf("dead letter's record timestamp %v, want the time of dead-lettering %v", first.Timestamp, now)
	}
	if got := SourceTimestampMillis(first); got != 253402300799999 {
		t.Errorf("SourceTimestampMillis(dead letter) = %d, want 253402300799999", got)
	}
	if got := SourceTimestampMillis(src); got != 253402300799999 {
		t.Errorf("SourceTimestampMillis(source record) = %d, want 253402300799999 (recovered from the wrapped ns)", got)
	}
	later := now.Add(time.Hour)
	refailed := Refailed(DeadLetter{Rec: first, Reason: "bad_magic", Message: "m3", SchemaID: -1, TableVersion: 5}).Record("orders.dlq", "file:///t", later)
	if v, _ := Header(refailed, HeaderSourceTimestamp); v != "253402300799999" || !refailed.Timestamp.Equal(later) {
		t.Errorf("refailed: source timestamp %q at record time %v, want 253402300799999 at %v", v, refailed.Timestamp, later)
	}
	// Re-failing (e.g. during replay) replaces ingestd's and Connect's headers (the ack
	// headers too), never duplicates them, and keeps the replay count it was given.
	first.Topic, first.Partition, first.Offset = "orders.dlq", 0, 9
	first.Headers = append(first.Headers, kgo.RecordHeader{Key: "ingestd.replay.count", Value: []byte("1")})
	second := DeadLetter{Rec: first, Reason: "bad_magic", Message: "m2", SchemaID: -1, TableVersion: 4,
		Ack: Ack{CommitID: "c-2", TxnAppID: "app-replay-orders.dlq-0", TxnVersion: 9}}.Record("orders.dlq", "file:///t", now)
	want2 := map[string]string{
		"trace": "abc", "__connect.errors.topic": "orders.dlq", "__connect.errors.partition": "0", "__connect.errors.offset": "9",
		"__connect.errors.exception.class.name": "ingestd.BadMagicError", "__connect.errors.exception.message": "m2",
		"__connect.errors.stage": "VALUE_CONVERTER", "ingestd.error.reason": "bad_magic", "ingestd.error.field": "",
		"ingestd.error.table": "file:///t", "ingestd.error.table_version": "4",
		"ingestd.error.time": "2026-11-29T12:00:00Z", "ingestd.error.source_timestamp": "253402300799999", "ingestd.replay.count": "1",
		"ingestd.commit.id": "c-2", "ingestd.txn.app_id": "app-replay-orders.dlq-0", "ingestd.txn.version": "9",
	}
	check(second, want2)
}

func dlqTestRecord(off int64, reason string, ts time.Time, value string) *kgo.Record {
	return &kgo.Record{Topic: "d", Offset: off, Timestamp: ts, Value: []byte(value), Headers: []kgo.RecordHeader{
		{Key: HeaderConnectTopic, Value: []byte("src")}, {Key: HeaderConnectPartition, Value: []byte("0")},
		{Key: HeaderConnectOffset, Value: []byte(fmt.Sprint(100 + off))},
		{Key: HeaderReason, Value: []byte(reason)}, {Key: HeaderReplayCount, Value: []byte("0")}}}
}

func TestSuperseded(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	a := dlqTestRecord(0, "bad_magic", t0, "a")
	b := dlqTestRecord(1, "bad_magic", t0, "b")
	// a second dead-lettering of a's original: same coordinates, another error time
	a2 := dlqTestRecord(2, "bad_magic", t0, "a")
	a2.Headers = append(a2.Headers, kgo.RecordHeader{Key: HeaderTime, Value: []byte("2026-11-29T10:00:01Z")})
	// copies as the carry-forward of releases before the ack headers made them: exact
	copyOf := func(r *kgo.Record, off int64) *kgo.Record {
		c := *r
		c.Headers, c.Offset = slices.Clone(r.Headers), off
		return &c
	}
	recs := []*kgo.Record{a, b, a2, copyOf(a, 3), copyOf(b, 4), copyOf(a, 5)}
	got := Superseded(recs)
	want := map[int64]bool{0: true, 1: true, 3: true} // a → 3 → 5 live; b → 4 live; a2 live
	if !reflect.DeepEqual(got, want) {
		t.Errorf("superseded = %v, want %v", got, want)
	}
	// Records with ack headers never take part: their copies are told apart by the log.
	withAcks := func(r *kgo.Record) *kgo.Record {
		c := *r
		c.Headers = WithAck(append(slices.Clone(r.Headers), kgo.RecordHeader{Key: HeaderTableVersion, Value: []byte("3")}),
			Ack{CommitID: "c1", TxnAppID: "orders-orders-0", TxnVersion: r.Offset})
		return &c
	}
	if got := Superseded([]*kgo.Record{withAcks(a), copyOf(withAcks(a), 1)}); len(got) != 0 {
		t.Errorf("superseded with ack headers = %v, want none", got)
	}
	a.Headers = WithAck(a.Headers, Ack{CommitID: "c1", TxnAppID: "orders-orders-0", TxnVersion: 16})
	c := Carried(a, Ack{CommitID: "c2", TxnAppID: "orders-replay-orders.dlq-0", TxnVersion: 0})
	wantHeaders := append(slices.Clone(a.Headers[:len(a.Headers)-3]),
		kgo.RecordHeader{Key: HeaderCommitID, Value: []byte("c2")},
		kgo.RecordHeader{Key: HeaderTxnAppID, Value: []byte("orders-replay-orders.dlq-0")},
		kgo.RecordHeader{Key: HeaderTxnVersion, Value: []byte("0")})
	if c.Partition != a.Partition || !bytes.Equal(c.Value, a.Value) || !reflect.DeepEqual(c.Headers, wantHeaders) || !c.Timestamp.Equal(a.Timestamp) {
		t.Errorf("Carried changed the record beyond its ack headers: %+v", c)
	}
	c.Headers[0].Key = "x"
	if a.Headers[0].Key == "x" {
		t.Error("Carried shares the header slice")
	}
}

// TestDLQRecordDetails: a generated_column_mismatch's details become ingestd.error.*
// headers (expression, value, expected), dropped when the record re-fails otherwise.
func TestDLQRecordDetails(t *testing.T) {
	src := &kgo.Record{Topic: "orders", Partition: 0, Offset: 4, Value: []byte{0, 0, 0, 0, 7}}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := DeadLetter{Rec: src, Reason: "generated_column_mismatch", Field: "event_date", Message: "m", SchemaID: 7, TableVersion: 3,
		Details: map[string]string{"expression": "CAST(created_at AS DATE)", "value": "2023-01-10", "expected": "2023-01-09"}}.Record("d", "t", now)
	got := map[string]string{}
	for _, h := range r.Headers {
		got[h.Key] = string(h.Value)
	}
	if got[HeaderExpression] != "CAST(created_at AS DATE)" || got[HeaderValue] != "2023-01-10" || got[HeaderExpected] != "2023-01-09" ||
		got[HeaderField] != "event_date" || got[HeaderConnectClass] != "ingestd.GeneratedColumnMismatchError" || got[HeaderConnectStage] != "TASK_PUT" {
		t.Errorf("headers %v", got)
	}
	r.Topic, r.Offset = "d", 0
	again := DeadLetter{Rec: r, Reason: "bad_magic", Message: "m2", SchemaID: -1, TableVersion: 4}.Record("d", "t", now)
	for _, h := range again.Headers {
		if h.Key == HeaderExpression || h.Key == HeaderValue || h.Key == HeaderExpected {
			t.Errorf("re-failed record keeps %s", h.Key)
		}
	}
}

// OriginalHeaders gives a replay the source record's headers back: in order, repeats and
// null values kept, without ingestd's and Kafka Connect's.
func TestOriginalHeaders(t *testing.T) {
	src := &kgo.Record{Topic: "orders", Partition: 3, Offset: 12, Key: []byte("k1"), Value: []byte{0, 0, 0, 0, 1, 2},
		Headers: []kgo.RecordHeader{{Key: "x-tag", Value: []byte("tag1")}, {Key: "x-tag", Value: []byte("tag2")}, {Key: "other"}}}
	dl := DeadLetter{Rec: src, Reason: "key_decode_error", Field: "_kafka_key", SchemaID: 5, TableVersion: 2, Ack: Ack{CommitID: "c", TxnAppID: "a-orders-3", TxnVersion: 12}}
	r := dl.Record("orders.dlq", "orders", time.Unix(0, 0))
	got := OriginalHeaders(r)
	if len(got) != 3 || got[0].Key != "x-tag" || string(got[0].Value) != "tag1" || string(got[1].Value) != "tag2" || got[2].Key != "other" || got[2].Value != nil {
		t.Errorf("OriginalHeaders = %+v, want the three source headers in order", got)
	}
	if again := OriginalHeaders(Refailed(DeadLetter{Rec: r}).Rec); len(again) != 3 {
		t.Errorf("after a re-failure: %+v", again)
	}
}
