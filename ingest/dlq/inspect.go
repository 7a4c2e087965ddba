package dlq

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/decode"
)

// Report summarises a pipeline's dead-letter topic for a person deciding what to do.
type Report struct {
	Topic      string         `json:"topic"`
	Total      int            `json:"total"`     // records of this pipeline
	Others     int            `json:"others"`    // records of other pipelines sharing the topic
	ByReason   map[string]int `json:"by_reason"` // ingestd.error.reason
	ByField    map[string]int `json:"by_field"`  // "reason field"
	BySchemaID map[string]int `json:"by_schema_id"`
	ByReplays  map[string]int `json:"by_replay_count"`
	Samples    []Sample       `json:"samples"`
}

// Sample is one dead letter with its original value decoded as JSON-able data.
type Sample struct {
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	Source      string `json:"source"` // topic/partition/offset of the original record
	Key         string `json:"key"`    // the record key: UTF-8 text as is, other bytes as 0x-prefixed hex, "" for none
	Reason      string `json:"reason"`
	Field       string `json:"field,omitempty"`
	SchemaID    string `json:"schema_id,omitempty"`
	Message     string `json:"message"`
	Value       any    `json:"value,omitempty"`        // decoded with the record's own writer schema
	DecodeError string `json:"decode_error,omitempty"` // why Value is missing
}

// Source resolves a schema id to its writer schema (ingest.SchemaSource; decode.Registry).
type Source interface {
	Schema(ctx context.Context, id int) (*decode.WriterSchema, error)
}

// InspectOptions say which dead letters Inspect counts and how it decodes samples.
type InspectOptions struct {
	Topic    string   // the dead-letter topic
	Pipeline string   // count this pipeline's records (ingestd.error.pipeline); others are counted apart
	Samples  int      // records to decode per reason: the first of each partition's, by partition and offset
	Reasons  []string // sample only these reasons (empty: every reason); the counts cover every record
	Schemas  Source   // writer schemas of the samples
	Framed   bool     // values carry the Confluent frame (magic 0 + 4-byte schema id)
	// Format is the pipeline's record format (decode.Format*); json and connect_json
	// samples show the document itself, which is its own schema.
	Format string
	Log    *slog.Logger // warnings while reading; nil discards them
	// FetchError, when not nil, ends the read with its non-nil result (Scan's fatal).
	FetchError func(error) error
}

// Inspect streams the whole dead-letter topic through cl (up to its end offsets now; Scan)
// and counts o.Pipeline's records by reason, field, schema id and replay count, keeping up
// to o.Samples records of each reason (of o.Reasons when set: the first by partition and
// offset) decoded with their own writer schema. It holds the counts and at most
// o.Samples records per reason and partition, copied out of the fetch buffers, so its
// memory does not grow with the topic. It reads only; nothing is committed or produced.
// Errors: listing the end offsets, or reading the topic (Scan).
func Inspect(ctx context.Context, cl *kgo.Client, o InspectOptions) (*Report, error) {
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, o.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", o.Topic, err)
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ranges, err := Ranges(o.Topic, ends[o.Topic])
	if err != nil {
		return nil, err
	}
	rep := &Report{Topic: o.Topic, ByReason: map[string]int{}, ByField: map[string]int{},
		BySchemaID: map[string]int{}, ByReplays: map[string]int{}}
	type reasonPart struct {
		reason string
		part   int32
	}
	kept := map[reasonPart][]*kgo.Record{} // the first o.Samples of each reason in each partition
	err = Scan(ctx, cl, o.Topic, ranges, log, o.FetchError, func(r *kgo.Record) error {
		if name, ok := Header(r, HeaderPipeline); ok && name != o.Pipeline {
			rep.Others++
			return nil
		}
		rep.Total++
		reason, _ := Header(r, HeaderReason)
		field, _ := Header(r, HeaderField)
		id, _ := Header(r, HeaderSchemaID)
		rep.ByReason[reason]++
		rep.ByField[reason+" "+field]++
		if id != "" {
			rep.BySchemaID[id]++
		}
		rep.ByReplays[fmt.Sprint(ReplayCount(r))]++
		k := reasonPart{reason, r.Partition}
		if len(kept[k]) < o.Samples && (len(o.Reasons) == 0 || slices.Contains(o.Reasons, reason)) {
			kept[k] = append(kept[k], detach(r))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var picked []*kgo.Record
	for _, reason := range slices.Sorted(maps.Keys(rep.ByReason)) {
		var rs []*kgo.Record
		for k, recs := range kept {
			if k.reason == reason {
				rs = append(rs, recs...)
			}
		}
		slices.SortFunc(rs, func(a, b *kgo.Record) int {
			return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
		})
		picked = append(picked, rs[:min(len(rs), o.Samples)]...)
	}
	for _, r := range picked {
		rep.Samples = append(rep.Samples, sample(ctx, o, r))
	}
	return rep, nil
}

// detach copies what a sample shows out of r, so that keeping it does not pin the fetch
// buffer r was decoded from.
func detach(r *kgo.Record) *kgo.Record {
	c := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, kgo.RecordHeader{Key: strings.Clone(h.Key), Value: bytes.Clone(h.Value)})
	}
	return c
}

// keyText shows a record key: UTF-8 text without control characters as is, other
// bytes (an Avro or binary key) as 0x-prefixed hex; "" for no key.
func keyText(k []byte) string {
	if utf8.Valid(k) && !strings.ContainsFunc(string(k), unicode.IsControl) {
		return string(k)
	}
	return "0x" + hex.EncodeToString(k)
}

func sample(ctx context.Context, o InspectOptions, r *kgo.Record) Sample {
	s := Sample{Partition: r.Partition, Offset: r.Offset, Source: OriginalKey(r), Key: keyText(r.Key)}
	s.Reason, _ = Header(r, HeaderReason)
	s.Field, _ = Header(r, HeaderField)
	s.SchemaID, _ = Header(r, HeaderSchemaID)
	s.Message, _ = Header(r, HeaderConnectMessage)
	if o.Format == decode.FormatJSON || o.Format == decode.FormatConnectJSON {
		// The document's own text, not a decoded value re-encoded: decoding into a map
		// drops a repeated key (itself a decode_error) and sorts the keys, which would
		// show a document other than the one that failed. Decode checks it and stops
		// after it: bytes after it are cut.
		var doc json.RawMessage
		if err := json.NewDecoder(bytes.NewReader(r.Value)).Decode(&doc); err != nil {
			s.DecodeError = "decode JSON: " + err.Error()
			return s
		}
		s.Value = doc
		return s
	}
	payload, id := r.Value, 0
	if o.Framed {
		var err error
		if id, payload, err = decode.ParseFrame(r.Value); err != nil {
			s.DecodeError = err.Error()
			return s
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, err := o.Schemas.Schema(ctx, id)
	if err != nil {
		s.DecodeError = err.Error()
		return s
	}
	// Another format than Avro: its message (Protobuf's message-index array), then its body
	// transcoded into the Avro binary of the schema derived from it (decode.WriterSchema).
	fail := func(err error) Sample {
		s.DecodeError = "decode with writer schema " + fmt.Sprint(id) + ": " + err.Error()
		return s
	}
	if ws, payload, err = ws.Message(payload); err != nil {
		return fail(err)
	}
	if ws.Avro == nil {
		return fail(ws.DeltaErr)
	}
	if payload, err = ws.Transcode(payload); err != nil {
		return fail(err)
	}
	var v any
	if err := avro.Unmarshal(ws.Avro, payload, &v); err != nil {
		return fail(err)
	}
	s.Value = jsonable(v)
	return s
}

// jsonable turns decoded Avro values into what encodes well as JSON: decimals (*big.Rat)
// become exact decimal strings, maps and slices are converted recursively.
func jsonable(v any) any {
	switch x := v.(type) {
	case *big.Rat:
		for d := 0; d <= 38; d++ {
			s := x.FloatString(d)
			if r, ok := new(big.Rat).SetString(s); ok && r.Cmp(x) == 0 {
				return s
			}
		}
		return x.RatString()
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonable(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonable(e)
		}
		return out
	}
	return v
}
