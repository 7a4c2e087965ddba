package dlq

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"sort"
	"time"

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
	Topic    string       // the dead-letter topic
	Pipeline string       // count this pipeline's records (ingestd.error.pipeline); others are counted apart
	Samples  int          // records to decode, the first of each reason first
	Schemas  Source       // writer schemas of the samples
	Framed   bool         // values carry the Confluent frame (magic 0 + 4-byte schema id)
	Log      *slog.Logger // warnings while reading; nil discards them
	// FetchError, when not nil, ends the read with its non-nil result (ReadToEnd's fatal).
	FetchError func(error) error
}

// Inspect reads the whole dead-letter topic through cl (up to its end offsets now) and
// counts o.Pipeline's records by reason, field, schema id and replay count, keeping up to
// o.Samples records (the first of each reason first) decoded with their own writer schema.
// It reads only; nothing is committed or produced. Errors: listing the end offsets, or
// reading the topic (ReadToEnd).
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
	byPart, err := ReadToEnd(ctx, cl, o.Topic, ends[o.Topic], log, o.FetchError)
	if err != nil {
		return nil, err
	}
	samples := o.Samples
	rep := &Report{Topic: o.Topic, ByReason: map[string]int{}, ByField: map[string]int{},
		BySchemaID: map[string]int{}, ByReplays: map[string]int{}}
	parts := make([]int32, 0, len(byPart))
	for part := range byPart {
		parts = append(parts, part)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	var picked []*kgo.Record
	firstOfReason := map[string]bool{}
	for _, part := range parts {
		for _, r := range byPart[part] {
			if name, ok := Header(r, HeaderPipeline); ok && name != o.Pipeline {
				rep.Others++
				continue
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
			if !firstOfReason[reason] && len(picked) < samples {
				firstOfReason[reason] = true
				picked = append(picked, r)
			}
		}
	}
	for _, part := range parts { // fill the rest of the samples in offset order
		for _, r := range byPart[part] {
			if len(picked) >= samples {
				break
			}
			if name, ok := Header(r, HeaderPipeline); (!ok || name == o.Pipeline) && !containsRecord(picked, r) {
				picked = append(picked, r)
			}
		}
	}
	for _, r := range picked {
		rep.Samples = append(rep.Samples, sample(ctx, o, r))
	}
	return rep, nil
}

func containsRecord(rs []*kgo.Record, r *kgo.Record) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

func sample(ctx context.Context, o InspectOptions, r *kgo.Record) Sample {
	s := Sample{Partition: r.Partition, Offset: r.Offset, Source: OriginalKey(r)}
	s.Reason, _ = Header(r, HeaderReason)
	s.Field, _ = Header(r, HeaderField)
	s.SchemaID, _ = Header(r, HeaderSchemaID)
	s.Message, _ = Header(r, HeaderConnectMessage)
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
	var v any
	if err := avro.Unmarshal(ws.Avro, payload, &v); err != nil {
		s.DecodeError = "decode with writer schema " + fmt.Sprint(id) + ": " + err.Error()
		return s
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
