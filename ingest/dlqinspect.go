package ingest

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

// DLQReport summarises a pipeline's dead-letter topic for a person deciding what to do.
type DLQReport struct {
	Topic      string         `json:"topic"`
	Total      int            `json:"total"`     // records of this pipeline
	Others     int            `json:"others"`    // records of other pipelines sharing the topic
	ByReason   map[string]int `json:"by_reason"` // ingestd.error.reason
	ByField    map[string]int `json:"by_field"`  // "reason field"
	BySchemaID map[string]int `json:"by_schema_id"`
	ByReplays  map[string]int `json:"by_replay_count"`
	Samples    []DLQSample    `json:"samples"`
}

// DLQSample is one dead letter with its original value decoded as JSON-able data.
type DLQSample struct {
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

// InspectDLQ reads the whole dead-letter topic of cfg (up to its end offsets now) and
// counts this pipeline's records by reason, field, schema id and replay count, keeping up
// to samples records (the first of each reason first) decoded with their own writer
// schema. It reads only; nothing is committed or produced.
func InspectDLQ(ctx context.Context, cfg *Config, deps Deps, samples int) (*DLQReport, error) {
	if cfg.DeadLetter.Topic == "" {
		return nil, fmt.Errorf("inspect %s: the pipeline has no dead_letter.topic", cfg.Name)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Kafka.Brokers...), kgo.FetchIsolationLevel(kgo.ReadCommitted())}, deps.kafkaOpts()...)...)
	if err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, cfg.DeadLetter.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", cfg.DeadLetter.Topic, err)
	}
	log := deps.Logger
	if log == nil {
		log = discardLogger()
	}
	byPart, err := readToEnd(ctx, cl, cfg.Kafka, cfg.DeadLetter.Topic, ends[cfg.DeadLetter.Topic], log)
	if err != nil {
		return nil, err
	}
	rep := &DLQReport{Topic: cfg.DeadLetter.Topic, ByReason: map[string]int{}, ByField: map[string]int{},
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
			if name, ok := header(r, HeaderPipeline); ok && name != cfg.Name {
				rep.Others++
				continue
			}
			rep.Total++
			reason, _ := header(r, HeaderReason)
			field, _ := header(r, HeaderField)
			id, _ := header(r, HeaderSchemaID)
			rep.ByReason[reason]++
			rep.ByField[reason+" "+field]++
			if id != "" {
				rep.BySchemaID[id]++
			}
			rep.ByReplays[fmt.Sprint(replayCount(r))]++
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
			if name, ok := header(r, HeaderPipeline); (!ok || name == cfg.Name) && !containsRecord(picked, r) {
				picked = append(picked, r)
			}
		}
	}
	for _, r := range picked {
		rep.Samples = append(rep.Samples, sample(ctx, deps, r))
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

func sample(ctx context.Context, deps Deps, r *kgo.Record) DLQSample {
	t, p, o := original(r)
	s := DLQSample{Partition: r.Partition, Offset: r.Offset, Source: fmt.Sprintf("%s/%d/%d", t, p, o)}
	s.Reason, _ = header(r, HeaderReason)
	s.Field, _ = header(r, HeaderField)
	s.SchemaID, _ = header(r, HeaderSchemaID)
	s.Message, _ = header(r, HeaderConnectMessage)
	payload, id := r.Value, 0
	if deps.Framed {
		var err error
		if id, payload, err = decode.ParseFrame(r.Value); err != nil {
			s.DecodeError = err.Error()
			return s
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, err := deps.Schemas.Schema(ctx, id)
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

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

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
