package ingest

import (
	"errors"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
)

// envelopeOf is the compiled envelope of one envelope writer schema, or why it cannot be
// read.
type envelopeOf struct {
	env  *decode.Envelope
	fail *decode.Error
}

// envelopeSkipsTombstones reports whether a tombstone is skipped instead of deleting its
// key: in a changelog of Debezium's change events, the delete event before the tombstone
// is the delete's row already. Not for the flattened form, whose deletes may come as
// tombstones alone (ExtractNewRecordState's delete.handling.mode drop), so that no delete
// is lost (docs/keyed-tables.md, Change data capture).
func envelopeSkipsTombstones(cfg *config.Config) bool {
	return cfg.Table.Envelope == config.EnvelopeDebezium && cfg.Table.Changelog()
}

// openDocumentEnvelope opens the envelope of a Kafka Connect JSON record (format
// connect_json): its payload is transcoded into the Avro binary of its writer schema's
// derived Avro schema (decode.WriterSchema.Transcode), which openEnvelope splits as it
// splits an Avro envelope, so decode.Envelope.Split stays the one reader of change
// events. The row's writer schema names connect_json and decodes its bytes as Avro
// (decode.NewEnvelope); the record itself, which a dead letter carries, keeps its JSON.
// A payload that does not fit its schema fails the record (the transcoder's reasons).
func (f *flusher) openDocumentEnvelope(it item) item {
	body, err := it.ws.Transcode(it.payload)
	if err != nil {
		it.fail = asDecodeError(err)
		return it
	}
	it.payload = body
	return f.openEnvelope(it)
}

// openEnvelope reads the envelope of it, a record whose envelope writer schema is it.ws
// (table.envelope): it becomes the record of its row (ws the row's writer schema, payload
// the row's Avro binary, env the change). A truncate (op t) is dead-lettered
// (decode.ReasonUnsupportedChange), a logical decoding message (op m) skipped
// (ingestd_records_skipped_total{reason="debezium_message"}); an envelope that cannot
// be read fails the record (decode.Envelope.Split's reasons), a schema that is not an
// envelope every record of its id (schema_mismatch).
func (f *flusher) openEnvelope(it item) item {
	ws := it.ws
	e, ok := f.envelopes[ws.Key()]
	if !ok {
		env, err := decode.NewEnvelope(f.cfg.Table.Envelope, ws)
		e = envelopeOf{env: env}
		switch {
		case err != nil:
			e.fail = asDecodeError(err)
		case env.Row != nil && env.Row.DeltaErr != nil:
			e.fail = asDecodeError(env.Row.DeltaErr)
		}
		if len(f.envelopes) > 1024 {
			clear(f.envelopes)
		}
		f.envelopes[ws.Key()] = e
	}
	if e.fail != nil {
		it.fail = e.fail
		return it
	}
	ch, err := e.env.Split(it.payload)
	if err != nil {
		it.fail = asDecodeError(err)
		return it
	}
	switch ch.Op {
	case decode.OpMessage:
		f.m.RecordsSkipped.WithLabelValues(f.cfg.Name, "debezium_message").Inc()
		f.log.Info("Debezium logical decoding message skipped: it carries no row", "topic", it.rec.Topic, "partition", it.rec.Partition, "offset", it.rec.Offset)
		it.route, it.ws, it.payload = routeSkip, nil, nil
		return it
	case decode.OpTruncate:
		it.fail = &decode.Error{Reason: decode.ReasonUnsupportedChange, Field: "op",
			Err: errors.New("a Debezium truncate (op t) names no key: delete the table's rows yourself (DELETE FROM <table>) if the truncate should apply, then skip this dead letter")}
		return it
	}
	if e.env.Row == nil {
		it.fail = &decode.Error{Reason: decode.ReasonSchemaMismatch, Err: errors.New("the envelope schema has neither before nor after: no row")}
		return it
	}
	f.envs = append(f.envs, ch)
	it.ws, it.payload, it.env = e.env.Row, ch.Row, int32(len(f.envs))
	return it
}
