package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/dlq"
	"github.com/ingestd/ingestd/ingest/kafkacols"
	"github.com/ingestd/ingestd/ingest/rowfill"
)

// kafkaState is what a flusher keeps for the Kafka columns (table.kafka_columns) across
// flushes: the key writer schemas resolved by id (key_format avro) or cached by their
// Kafka Connect schema text (key_format connect_json), which every flush's
// rowfill.Stage reads, and whether its records are dead letters (a replay: the columns
// then hold the original record's coordinates and headers, replayOrigin).
type kafkaState struct {
	replay bool
	keys   rowfill.KeySchemas
	// subjectKey is the id of the latest schema of subject <topic>-key, looked up when a
	// batch that creates the table has no record whose key resolves (0: none).
	subjectKey int
}

// latestIDSource is a schema source that also answers a subject's latest schema id
// (decode.Registry).
type latestIDSource interface {
	LatestID(ctx context.Context, subject string) (int, error)
}

func newKafkaState(md mode) *kafkaState {
	_, replay := md.(*replayMode)
	return &kafkaState{replay: replay, keys: rowfill.KeySchemas{Schemas: map[int]*decode.WriterSchema{}, Fails: map[int]*decode.Error{}, Connect: decode.NewConnectSource()}}
}

// origin is the rowfill.Options.Origin of the flusher's records: nil for the consumer (a
// record's own coordinates and headers), replayOrigin for a replay.
func (ks *kafkaState) origin() func(*kgo.Record) rowfill.Source {
	if ks.replay {
		return replayOrigin
	}
	return nil
}

// replayOrigin is the source record a dead letter keeps (dlq.Original,
// dlq.OriginalHeaders, dlq.SourceTimestampMillis): its topic, partition, offset, headers
// and timestamp, which a replay's Kafka columns hold instead of the dead-letter topic's.
func replayOrigin(r *kgo.Record) rowfill.Source {
	topic, partition, offset := dlq.Original(r)
	return rowfill.Source{Topic: topic, Partition: partition, Offset: offset, Headers: dlq.OriginalHeaders(r), TimestampMs: dlq.SourceTimestampMillis(r)}
}

// kafkaColumns are the columns the pipeline fills from the record rather than from its
// value: the Kafka columns (_kafka_key, …; table.kafka_columns) and the keyed mode's
// (rowfill.ModeColumns: a changelog's operation and sequence, soft deletes' flag and
// sequence). The guard leaves them out of its comparison and the decoder writes
// placeholders there, which the row stage replaces.
func kafkaColumns(cfg *config.Config) []string {
	cols := kafkacols.Columns(cfg.Table.KafkaColumns)
	if mc := rowfill.ModeColumns(cfg); len(mc) > 0 {
		cols = append(slices.Clip(cols), mc...)
	}
	return cols
}

// avroKeys reports whether the pipeline decodes keys as Avro into _kafka_key.
func avroKeys(cfg *config.Config) bool {
	return cfg.Table.KeyFormat == kafkacols.KeyAvro && slices.Contains(cfg.Table.KafkaColumns, kafkacols.Key)
}

// resolveKeys looks up, before the flush decides anything, the key writer schemas of
// the records the guard routes (key_format avro): during the flush a key's schema is
// then never I/O. A key that is not Confluent-framed is left to the fill (a
// key_decode_error). Errors: a *transientError when the registry fails transiently, the
// registry's refusal of the credentials (permanent); a schema id the registry does not
// serve is a per-record key_decode_error, remembered for this flush only.
//
// Without a table, when no routed record's key resolves, it also looks up the latest
// schema of subject <topic>-key (Confluent's TopicNameStrategy; the first such topic of
// the batch, in record order) to type the _kafka_key column of the table the batch may
// create (kafkaState.subjectKey; an unknown subject leaves it 0).
func (f *flusher) resolveKeys(ctx context.Context, t tableState, items []item) error {
	// A keyed table's tombstones name their key in an Avro key (rowfill.Stage.Tombstone).
	tombstones := f.cfg.Table.Keyed() && f.cfg.Table.KeyFormat == kafkacols.KeyAvro
	if !avroKeys(f.cfg) && !tombstones {
		return nil
	}
	ks := f.kafka
	clear(ks.keys.Fails)
	ks.subjectKey = 0
	resolved := false
	if len(ks.keys.Schemas) > 1024 {
		clear(ks.keys.Schemas)
	}
	// A primary-key change's create names the old key in a header that may be an Avro key
	// too (a header.converter set to the key converter): the unavailable values it has
	// are taken from that key (fillUnavailable).
	oldKeys := tombstones && f.placeholder != ""
	for i := range items {
		it := &items[i]
		if oldKeys && it.route == routeGuard && it.fail == nil {
			if _, err := f.resolveKeyID(ctx, oldKeyHeader(it.rec)); err != nil {
				return err
			}
		}
		tomb := tombstones && it.tomb
		if (it.route != routeGuard || it.fail != nil || !avroKeys(f.cfg)) && !tomb || len(it.rec.Key) == 0 {
			continue
		}
		ok, err := f.resolveKeyID(ctx, it.rec.Key)
		if err != nil {
			return err
		}
		resolved = resolved || ok
	}
	if t.exists() || resolved || !avroKeys(f.cfg) {
		return nil
	}
	src, ok := f.deps.Schemas.(latestIDSource)
	if !ok {
		return nil
	}
	for _, it := range items {
		if it.route != routeGuard {
			continue
		}
		subject := it.rec.Topic + "-key"
		id, err := src.LatestID(ctx, subject)
		var de *decode.Error
		switch {
		case errors.As(err, &de):
			return nil // no such subject: the table cannot be typed (kafkaFieldsToCreate says so)
		case errors.Is(err, decode.ErrRegistryAuth):
			return err
		case err != nil:
			return &transientError{stage: "resolve key schema", what: "resolve the latest schema of subject " + subject, err: err}
		}
		ws, err := f.deps.Schemas.Schema(ctx, id)
		switch {
		case errors.As(err, &de):
			return nil
		case errors.Is(err, decode.ErrRegistryAuth):
			return err
		case err != nil:
			return &transientError{stage: "resolve key schema", what: "resolve key schema id " + strconv.Itoa(id), err: err}
		}
		ks.keys.Schemas[id], ks.subjectKey = ws, id
		return nil
	}
	return nil
}

// resolveKeyID resolves the writer schema of key, a Confluent-framed Avro key, into
// f.kafka.keys (a schema id the registry does not serve into its Fails) and reports
// whether it resolved; a key that is not framed is left alone (false). Errors: a
// *transientError when the registry fails transiently, decode.ErrRegistryAuth.
func (f *flusher) resolveKeyID(ctx context.Context, key []byte) (bool, error) {
	ks := f.kafka
	if len(key) == 0 {
		return false, nil
	}
	id, _, err := decode.ParseFrame(key)
	if err != nil {
		return false, nil
	}
	if _, ok := ks.keys.Schemas[id]; ok {
		return true, nil
	}
	if _, ok := ks.keys.Fails[id]; ok {
		return false, nil
	}
	ws, err := f.deps.Schemas.Schema(ctx, id)
	var de *decode.Error
	switch {
	case errors.As(err, &de):
		ks.keys.Fails[id] = de
		return false, nil
	case errors.Is(err, decode.ErrRegistryAuth):
		return false, err
	case err != nil:
		return false, &transientError{stage: "resolve key schema", what: "resolve key schema id " + strconv.Itoa(id), err: err}
	}
	ks.keys.Schemas[id] = ws
	return true, nil
}

// oldKeyHeader is the value of rec's __debezium.oldkey header (rowfill.OldKeyHeader):
// the key before a primary-key change; nil without one.
func oldKeyHeader(rec *kgo.Record) []byte {
	for _, h := range rec.Headers {
		if h.Key == rowfill.OldKeyHeader {
			return h.Value
		}
	}
	return nil
}

// kafkaFieldsToCreate are the Kafka columns a flush that creates the table appends to
// its schema, then the keyed mode's columns (rowfill.ModeFields; nil when it creates
// none). Under key_format avro the _kafka_key struct is
// the Delta form of the key writer schema of the first routed record whose key resolves
// (resolveKeys), else the latest schema of subject <topic>-key; without either, the
// table cannot be typed and the flush fails (permanent), naming the fix.
func (f *flusher) kafkaFieldsToCreate(t tableState, create bool, items []item) ([]*deltalog.StructField, error) {
	if t.exists() || !create {
		return nil, nil
	}
	if len(f.cfg.Table.KafkaColumns) == 0 {
		return rowfill.ModeFields(f.cfg), nil
	}
	var keyType *deltalog.StructType
	if avroKeys(f.cfg) {
		schemas := f.kafka.keys.Schemas
		for _, it := range items {
			if it.route != routeGuard || it.fail != nil || len(it.rec.Key) == 0 {
				continue
			}
			if id, _, err := decode.ParseFrame(it.rec.Key); err == nil {
				if ws := schemas[id]; ws != nil && ws.DeltaErr == nil {
					keyType = ws.Delta
					break
				}
			}
		}
		if ws := schemas[f.kafka.subjectKey]; keyType == nil && f.kafka.subjectKey != 0 && ws != nil && ws.DeltaErr == nil {
			keyType = ws.Delta // no keyed record in the batch: the latest <topic>-key schema
		}
		if keyType == nil {
			return nil, fmt.Errorf("create table %s: table.key_format is avro, and no record of the first batch has a Confluent-framed key whose schema the registry serves, nor does the registry have a subject <topic>-key, so the _kafka_key struct cannot be typed "+
				"(register the key schema under <topic>-key, create the table with a _kafka_key STRUCT column, or use key_format bytes in %s)", f.cfg.Table.URI, f.cfg.File)
		}
	}
	fields, err := kafkacols.Fields(f.cfg.Table.KafkaColumns, f.cfg.Table.KeyFormat, keyType)
	if err != nil {
		return nil, err
	}
	return append(fields, rowfill.ModeFields(f.cfg)...), nil
}

// withColumns returns schema with cols appended (a copy; schema itself when cols is
// empty).
func withColumns(schema *deltalog.StructType, cols []*deltalog.StructField) *deltalog.StructType {
	if len(cols) == 0 || schema == nil {
		return schema
	}
	out := *schema
	out.Fields = append(slices.Clone(schema.Fields), cols...)
	return &out
}
