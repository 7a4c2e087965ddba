package dlq

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// Dead-letter header names. The __connect.errors.* names are Kafka Connect's, so existing
// DLQ tooling reads them.
const (
	HeaderConnectTopic     = "__connect.errors.topic"
	HeaderConnectPartition = "__connect.errors.partition"
	HeaderConnectOffset    = "__connect.errors.offset"
	HeaderConnectClass     = "__connect.errors.exception.class.name"
	HeaderConnectMessage   = "__connect.errors.exception.message"
	HeaderConnectStage     = "__connect.errors.stage"
	HeaderReason           = "ingestd.error.reason"
	HeaderField            = "ingestd.error.field"
	// HeaderExpression, HeaderValue and HeaderExpected are a generated_column_mismatch's
	// generation expression, the value the record supplies and the expression's result
	// (SQL text: dates yyyy-MM-dd, NULL), from DeadLetter.Details.
	HeaderExpression   = "ingestd.error.expression"
	HeaderValue        = "ingestd.error.value"
	HeaderExpected     = "ingestd.error.expected"
	HeaderTable        = "ingestd.error.table"
	HeaderPipeline     = "ingestd.error.pipeline"
	HeaderTableVersion = "ingestd.error.table_version"
	HeaderSchemaID     = "ingestd.error.schema_id"
	HeaderTime         = "ingestd.error.time"
	// HeaderSourceTimestamp is the source record's Kafka timestamp, ms since the Unix
	// epoch (decimal; -1: none), exact for every broker value: the dead letter's own record
	// timestamp is the time it was dead-lettered (see DeadLetter.Record).
	HeaderSourceTimestamp = "ingestd.error.source_timestamp"
	HeaderReplayCount     = "ingestd.replay.count"
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

// Ack names the commit that acknowledges a record written to the dead-letter topic (see
// HeaderCommitID): the Delta commit whose commitInfo.txnId is CommitID, moving the txn
// TxnAppID to TxnVersion (PROTOCOL.md, Transaction Identifiers).
type Ack struct {
	CommitID   string
	TxnAppID   string
	TxnVersion int64
}

// WithAck returns headers without earlier ack headers, followed by a's three.
func WithAck(headers []kgo.RecordHeader, a Ack) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(headers)+3)
	for _, h := range headers {
		if !slices.Contains(ackHeaders, h.Key) {
			out = append(out, h)
		}
	}
	return append(out,
		kgo.RecordHeader{Key: HeaderCommitID, Value: []byte(a.CommitID)},
		kgo.RecordHeader{Key: HeaderTxnAppID, Value: []byte(a.TxnAppID)},
		kgo.RecordHeader{Key: HeaderTxnVersion, Value: []byte(strconv.FormatInt(a.TxnVersion, 10))})
}

// AckOf reads a DLQ record's ack headers and ingestd.error.table_version; ok is false when
// it lacks any of them (a dead letter written before they existed) or one is malformed.
func AckOf(r *kgo.Record) (a Ack, tableVersion int64, ok bool) {
	id, ok1 := Header(r, HeaderCommitID)
	app, ok2 := Header(r, HeaderTxnAppID)
	ver, ok3 := Header(r, HeaderTxnVersion)
	tv, ok4 := Header(r, HeaderTableVersion)
	if !ok1 || !ok2 || !ok3 || !ok4 || id == "" || app == "" {
		return Ack{}, 0, false
	}
	v, err1 := strconv.ParseInt(ver, 10, 64)
	t, err2 := strconv.ParseInt(tv, 10, 64)
	if err1 != nil || err2 != nil {
		return Ack{}, 0, false
	}
	return Ack{CommitID: id, TxnAppID: app, TxnVersion: v}, t, true
}

// DeadLetter describes why one record goes to the dead-letter topic.
type DeadLetter struct {
	Pipeline string      // the pipeline that dead-lettered it (replay takes only its own)
	Rec      *kgo.Record // the record as read: key, value, headers are kept untouched
	Reason   string      // a stable code of Reasons
	Field    string      // path (`a.b`, `items[].qty`, `m{}.v`), "" if not about one field
	Message  string      // for a person
	// Details become ingestd.error.<name> headers, in name order (decode.Error.Details:
	// e.g. a generated column's expression, the supplied value and the computed one).
	Details      map[string]string
	SchemaID     int   // the record's writer schema id; -1 when unknown
	TableVersion int64 // the table version the record was checked against; -1: no table
	Ack          Ack   // the commit that acknowledges it
}

// Record builds the dead-letter record for topic: key and value untouched; the original
// headers kept except earlier ingestd.error.*, __connect.errors.* and ack headers
// (re-failing replaces them, never duplicates); then the error headers, with
// ingestd.replay.count kept from the original if present (replay increments it) else "0";
// the ack headers (from d.Ack) come last.
//
// The record timestamp is now, the time of dead-lettering (as Kafka Connect's dead-letter
// reporter does), and the source's timestamp travels exactly in
// ingestd.error.source_timestamp (SourceTimestampMillis): a source timestamp would put
// the dead letter under the dead-letter topic's retention by the source's age (a backfill
// of week-old records would be deletable at once), a far-future one is refused by a
// broker's message.timestamp.after.max.ms (1 h by default since Kafka 4), and franz-go's
// producer writes timestamps through int64 nanoseconds, which wrap outside 1677–2262.
func (d DeadLetter) Record(topic, table string, now time.Time) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: d.Rec.Key, Value: d.Rec.Value, Timestamp: now}
	replayCount := "0"
	for _, h := range d.Rec.Headers {
		switch {
		case h.Key == HeaderReplayCount:
			replayCount = string(h.Value)
		case strings.HasPrefix(h.Key, "ingestd.error.") || strings.HasPrefix(h.Key, "__connect.errors.") || slices.Contains(ackHeaders, h.Key):
		default:
			out.Headers = append(out.Headers, h)
		}
	}
	add := func(k, v string) { out.Headers = append(out.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)}) }
	add(HeaderConnectTopic, d.Rec.Topic)
	add(HeaderConnectPartition, strconv.Itoa(int(d.Rec.Partition)))
	add(HeaderConnectOffset, strconv.FormatInt(d.Rec.Offset, 10))
	add(HeaderConnectClass, exceptionClass(d.Reason))
	add(HeaderConnectMessage, d.Message)
	add(HeaderConnectStage, connectStage(d.Reason))
	add(HeaderReason, d.Reason)
	add(HeaderField, d.Field)
	for _, k := range slices.Sorted(maps.Keys(d.Details)) {
		add("ingestd.error."+k, d.Details[k])
	}
	add(HeaderTable, table)
	if d.Pipeline != "" {
		add(HeaderPipeline, d.Pipeline)
	}
	add(HeaderTableVersion, strconv.FormatInt(d.TableVersion, 10))
	if d.SchemaID >= 0 {
		add(HeaderSchemaID, strconv.Itoa(d.SchemaID))
	}
	add(HeaderTime, now.UTC().Format(time.RFC3339Nano))
	add(HeaderSourceTimestamp, strconv.FormatInt(SourceTimestampMillis(d.Rec), 10))
	add(HeaderReplayCount, replayCount)
	out.Headers = WithAck(out.Headers, d.Ack)
	return out
}

// OriginalHeaders are the headers of the source record a dead letter r keeps, in order,
// repeats included: r's headers without ingestd's (ingestd.error.*, ingestd.replay.count,
// the ack headers) and Kafka Connect's (__connect.errors.*).
func OriginalHeaders(r *kgo.Record) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(r.Headers))
	for _, h := range r.Headers {
		if h.Key == HeaderReplayCount || h.Key == HeaderPipeline || strings.HasPrefix(h.Key, "ingestd.error.") ||
			strings.HasPrefix(h.Key, "__connect.errors.") || slices.Contains(ackHeaders, h.Key) {
			continue
		}
		out = append(out, h)
	}
	return out
}

// Refailed is the dead letter of a DLQ record that a replay could not land: the source
// coordinates of the original (Connect's headers) and its bytes, ingestd.replay.count + 1.
// Record then replaces ingestd's other headers.
func Refailed(d DeadLetter) DeadLetter {
	src := *d.Rec
	src.Topic, src.Partition, src.Offset = Original(d.Rec)
	src.Headers = nil
	for _, h := range d.Rec.Headers {
		if h.Key != HeaderReplayCount {
			src.Headers = append(src.Headers, h)
		}
	}
	src.Headers = append(src.Headers, kgo.RecordHeader{Key: HeaderReplayCount, Value: []byte(strconv.Itoa(ReplayCount(d.Rec) + 1))})
	d.Rec = &src
	return d
}

// Carried is the carried-forward copy of a dead letter (a replay did not select it): same
// topic and partition, key, value, headers (so the same ingestd.replay.count) and record
// timestamp, except the ack headers, which name a, the replay commit that moves the DLQ
// partition's txn past r.
func Carried(r *kgo.Record, a Ack) *kgo.Record {
	return &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value,
		Headers: WithAck(r.Headers, a), Timestamp: r.Timestamp}
}

// exceptionClass gives the Connect class-name header a stable, greppable value per reason:
// schema_mismatch → ingestd.SchemaMismatchError.
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

// Header returns the value of r's first header named key.
func Header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// SourceTimestampMillis is the Kafka timestamp of the source record a dead letter r keeps,
// ms since the Unix epoch (-1: none): its ingestd.error.source_timestamp, or, for a record
// without that header (a source record, or a dead letter written before the header
// existed, which kept its source's timestamp), the broker value of r's own timestamp
// (kafkacols.TimestampMillis).
func SourceTimestampMillis(r *kgo.Record) int64 {
	if v, ok := Header(r, HeaderSourceTimestamp); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return kafkacols.TimestampMillis(r.Timestamp)
}

// ReplayCount is r's ingestd.replay.count (0 when absent or malformed).
func ReplayCount(r *kgo.Record) int {
	v, _ := Header(r, HeaderReplayCount)
	n, _ := strconv.Atoi(v)
	return n
}

// Original returns the source coordinates a dead letter records (Connect's headers), or
// the record's own where a header is missing.
func Original(r *kgo.Record) (topic string, partition int32, offset int64) {
	topic, partition, offset = r.Topic, r.Partition, r.Offset
	if t, ok := Header(r, HeaderConnectTopic); ok {
		topic = t
	}
	if v, ok := Header(r, HeaderConnectPartition); ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			partition = int32(n)
		}
	}
	if v, ok := Header(r, HeaderConnectOffset); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			offset = n
		}
	}
	return topic, partition, offset
}

// OriginalKey identifies the source record a dead letter came from: "topic/partition/offset".
func OriginalKey(r *kgo.Record) string {
	t, p, o := Original(r)
	return fmt.Sprintf("%s/%d/%d", t, p, o)
}

// DedupeKey identifies one real dead letter: the txn appId and version that acknowledge it
// (ingestd.txn.app_id, ingestd.txn.version), unique but for exact copies (producer
// retries, an operator re-producing records). A carried-forward copy names the replay's
// appId and DLQ offset, so it has its own key. A dead letter without these headers
// (written before them) falls back to its original topic, partition and offset and its
// replay count.
func DedupeKey(r *kgo.Record) string {
	if a, _, ok := AckOf(r); ok {
		return fmt.Sprintf("txn:%s@%d", a.TxnAppID, a.TxnVersion)
	}
	return fmt.Sprintf("legacy:%s#%d", OriginalKey(r), ReplayCount(r))
}

// copyIdentity hashes a record's exact content: key, value, headers (in order) and
// timestamp (ms). A carried-forward record, and a producer retry, share it with their
// source; two dead-letterings of one original do not (ingestd.error.time differs).
func copyIdentity(r *kgo.Record) uint64 {
	h := fnv.New64a()
	var b [8]byte
	put := func(p []byte) {
		n := uint64(len(p))
		if p == nil {
			n = ^uint64(0)
		}
		for i := range b {
			b[i] = byte(n >> (8 * i))
		}
		h.Write(b[:])
		h.Write(p)
	}
	put(r.Key)
	put(r.Value)
	for _, x := range r.Headers {
		put([]byte(x.Key))
		put(x.Value)
	}
	put([]byte(strconv.FormatInt(r.Timestamp.UnixMilli(), 10)))
	return h.Sum64()
}

// Superseded returns the offsets of the dead letters without ack headers (written before
// them; recs are one DLQ partition's, in offset order) that have an exact copy later in
// the same partition: their old carry-forward rule, where the copy is the live one.
// Records with ack headers never take part: their carried copies have their own
// DedupeKey, and a copy left by a crashed replay is an orphan (AckIndex.Classify).
func Superseded(recs []*kgo.Record) map[int64]bool {
	var c Copies
	for _, r := range recs {
		c.Add(r)
	}
	return c.Superseded()
}

// Copies finds, one record at a time in offset order of one DLQ partition, what
// Superseded finds in a slice: it keeps 16 bytes per dead letter without ack headers
// (its content hash and last offset) and the superseded offsets, never the records. The
// zero value is ready.
type Copies struct {
	last map[uint64]int64
	sup  map[int64]bool
}

// Add takes the next record of the partition.
func (c *Copies) Add(r *kgo.Record) {
	if _, _, ok := AckOf(r); ok {
		return
	}
	if c.last == nil {
		c.last, c.sup = map[uint64]int64{}, map[int64]bool{}
	}
	id := copyIdentity(r)
	if prev, ok := c.last[id]; ok {
		c.sup[prev] = true
	}
	c.last[id] = r.Offset
}

// Superseded returns the offsets of the records added that have an exact copy added
// after them (never nil).
func (c *Copies) Superseded() map[int64]bool {
	if c.sup == nil {
		return map[int64]bool{}
	}
	return c.sup
}
