package ingest

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Dead-letter header names (DESIGN.md §3, "Dead letters"). The __connect.errors.* names
// are Kafka Connect's, so existing DLQ tooling reads them.
const (
	HeaderConnectTopic     = "__connect.errors.topic"
	HeaderConnectPartition = "__connect.errors.partition"
	HeaderConnectOffset    = "__connect.errors.offset"
	HeaderConnectClass     = "__connect.errors.exception.class.name"
	HeaderConnectMessage   = "__connect.errors.exception.message"
	HeaderConnectStage     = "__connect.errors.stage"
	HeaderReason           = "ingestd.error.reason"
	HeaderField            = "ingestd.error.field"
	HeaderTable            = "ingestd.error.table"
	HeaderPipeline         = "ingestd.error.pipeline"
	HeaderTableVersion     = "ingestd.error.table_version"
	HeaderSchemaID         = "ingestd.error.schema_id"
	HeaderTime             = "ingestd.error.time"
	HeaderReplayCount      = "ingestd.replay.count"
	// HeaderCommitID is commitInfo.txnId of the Delta commit meant to acknowledge the dead
	// letter (move HeaderTxnAppID's txn to HeaderTxnVersion or past it).
	HeaderCommitID = "ingestd.commit.id"
	// HeaderTxnAppID is the txn appId that acknowledges the dead letter: the source
	// partition's (<app_id>-<topic>-<partition>), or for a replay's records the replay's of
	// the DLQ partition (<app_id>-replay-<dlq topic>-<partition>).
	HeaderTxnAppID = "ingestd.txn.app_id"
	// HeaderTxnVersion is the offset (decimal) that txn passes when the record is
	// acknowledged: the source offset, or for a replay's records the DLQ record's offset.
	HeaderTxnVersion = "ingestd.txn.version"
)

// ackHeaders are the headers that name a record's acknowledging commit; every dead
// letter, re-dead-letter, parked and carried-forward record carries them, freshly set.
var ackHeaders = []string{HeaderCommitID, HeaderTxnAppID, HeaderTxnVersion}

// ack names the commit that acknowledges a record written to the DLQ (see HeaderCommitID).
type ack struct {
	commitID   string
	txnAppID   string
	txnVersion int64
}

// withAck returns headers without earlier ack headers, followed by a's.
func withAck(headers []kgo.RecordHeader, a ack) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(headers)+3)
	for _, h := range headers {
		if !slices.Contains(ackHeaders, h.Key) {
			out = append(out, h)
		}
	}
	return append(out,
		kgo.RecordHeader{Key: HeaderCommitID, Value: []byte(a.commitID)},
		kgo.RecordHeader{Key: HeaderTxnAppID, Value: []byte(a.txnAppID)},
		kgo.RecordHeader{Key: HeaderTxnVersion, Value: []byte(strconv.FormatInt(a.txnVersion, 10))})
}

// deadLetter describes why one record goes to the dead-letter topic.
type deadLetter struct {
	pipeline     string // the pipeline that dead-lettered it (replay only takes its own)
	rec          *kgo.Record
	reason       string // stable code: bad_magic, too_short, schema_mismatch, …
	field        string // path, "" if not about one field
	message      string // for a person
	schemaID     int    // -1 when unknown
	tableVersion int64
	ack          ack // the commit that acknowledges it
}

// stage maps a reason to Kafka Connect's stage names.
func stage(reason string) string {
	switch reason {
	case "schema_mismatch", "not_null_violation", "unsupported_type":
		return "TASK_PUT"
	default:
		return "VALUE_CONVERTER"
	}
}

// exceptionClass gives the Connect class-name header a stable, greppable value per reason.
func exceptionClass(reason string) string {
	var b strings.Builder
	b.WriteString("ingestd.")
	for _, part := range strings.Split(reason, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	b.WriteString("Error")
	return b.String()
}

// dlqRecord builds the dead-letter record: key and value bytes untouched, the original
// headers kept except earlier ingestd.error.* and __connect.errors.* headers (re-failing
// replaces them, never duplicates), then the error headers. ingestd.replay.count is kept
// from the original if present (replay increments it), else "0"; the ack headers
// (ingestd.commit.id, ingestd.txn.app_id, ingestd.txn.version) come last, from d.ack.
func dlqRecord(topic, table string, d deadLetter, now time.Time) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: d.rec.Key, Value: d.rec.Value, Timestamp: d.rec.Timestamp}
	replayCount := "0"
	for _, h := range d.rec.Headers {
		switch {
		case h.Key == HeaderReplayCount:
			replayCount = string(h.Value)
		case strings.HasPrefix(h.Key, "ingestd.error.") || strings.HasPrefix(h.Key, "__connect.errors.") || slices.Contains(ackHeaders, h.Key):
		default:
			out.Headers = append(out.Headers, h)
		}
	}
	add := func(k, v string) { out.Headers = append(out.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)}) }
	add(HeaderConnectTopic, d.rec.Topic)
	add(HeaderConnectPartition, strconv.Itoa(int(d.rec.Partition)))
	add(HeaderConnectOffset, strconv.FormatInt(d.rec.Offset, 10))
	add(HeaderConnectClass, exceptionClass(d.reason))
	add(HeaderConnectMessage, d.message)
	add(HeaderConnectStage, stage(d.reason))
	add(HeaderReason, d.reason)
	add(HeaderField, d.field)
	add(HeaderTable, table)
	if d.pipeline != "" {
		add(HeaderPipeline, d.pipeline)
	}
	add(HeaderTableVersion, strconv.FormatInt(d.tableVersion, 10))
	if d.schemaID >= 0 {
		add(HeaderSchemaID, strconv.Itoa(d.schemaID))
	}
	add(HeaderTime, now.UTC().Format(time.RFC3339Nano))
	add(HeaderReplayCount, replayCount)
	out.Headers = withAck(out.Headers, d.ack)
	return out
}
