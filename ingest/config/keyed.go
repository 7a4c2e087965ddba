package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// DefaultDeleteHorizon is table.delete_horizon when an upsert pipeline leaves it out.
const DefaultDeleteHorizon = 24 * time.Hour

// validateKeyed checks the keys of a keyed table (table.mode, key, sequence_by,
// delete_when, delete_horizon, upsert_write, deletes): what can be checked without the table's schema. The
// key and sequence columns' presence and types are checked at start-up against the
// table, and on create against the writer schema (docs/keyed-tables.md).
func (c *Config) validateKeyed(bad func(path, msg, fix string)) {
	t := &c.Table
	switch t.Mode {
	case ModeAppend, ModeUpsert, ModeChangelog:
	default:
		bad("$.table.mode", fmt.Sprintf("table.mode %q is not append, upsert or changelog", t.Mode),
			"use append (every record a new row), upsert (the latest row per table.key) or changelog (every change a row, with its operation and sequence)")
		return
	}
	c.validateEnvelope(bad)
	if !t.Keyed() {
		for _, k := range []struct {
			path, name string
			set        bool
		}{
			{"$.table.key", "table.key", len(t.Key) > 0},
			{"$.table.sequence_by", "table.sequence_by", t.SequenceBy != ""},
			{"$.table.delete_when", "table.delete_when", t.DeleteWhen != ""},
			{"$.table.delete_horizon", "table.delete_horizon", t.DeleteHorizon != 0},
			{"$.table.upsert_write", "table.upsert_write", t.UpsertWrite != ""},
			{"$.table.deletes", "table.deletes", t.Deletes != ""},
		} {
			if k.set {
				bad(k.path, k.name+" is set but table.mode is append, which ignores it", "set table.mode: upsert, or remove "+k.name)
			}
		}
		return
	}
	if t.Changelog() {
		// A changelog appends every change: nothing is replaced, so nothing is remembered
		// or rewritten, and a delete is a row by definition.
		for _, k := range []struct {
			path, name string
			set        bool
		}{
			{"$.table.delete_horizon", "table.delete_horizon", t.DeleteHorizon != 0},
			{"$.table.upsert_write", "table.upsert_write", t.UpsertWrite != ""},
			{"$.table.deletes", "table.deletes", t.Deletes != ""},
		} {
			if k.set {
				bad(k.path, k.name+" is set but table.mode is changelog, which appends every change (a delete is a row with _change_operation 'delete')",
					"remove "+k.name+", or set table.mode: upsert")
			}
		}
	}
	if len(t.Key) == 0 && t.KeyFormat != kafkacols.KeyAvro {
		bad("$.table", "table.mode is "+t.Mode+" but table.key is missing", "name the key columns, e.g. key: [id], or set key_format: avro to key the table by the fields of the Avro record key")
	}
	seen := map[string]bool{}
	for i, k := range t.Key {
		path := fmt.Sprintf("$.table.key[%d]", i)
		switch nk := deltalog.NameKey(k); {
		case strings.TrimSpace(k) == "":
			bad(path, "table.key: an empty column name", "name a top-level column of the row, e.g. key: [id]")
		case seen[nk]:
			bad(path, fmt.Sprintf("table.key: column %q is listed twice", k), "list each key column once")
		default:
			seen[nk] = true
		}
	}
	if t.SequenceBy != "" && !t.SequenceByEnvelope() && seen[deltalog.NameKey(t.SequenceBy)] {
		bad("$.table.sequence_by", fmt.Sprintf("table.sequence_by %q is a key column", t.SequenceBy), "order changes by a column that changes with each change, e.g. an update timestamp or a log sequence number")
	}
	if t.DeleteWhen != "" {
		n, err := expr.Parse(t.DeleteWhen)
		if err == nil {
			err = expr.CheckSupported(n)
		}
		if err != nil {
			bad("$.table.delete_when", fmt.Sprintf("table.delete_when %q: %v", t.DeleteWhen, err), "write a boolean Spark SQL expression over the row's columns, e.g. delete_when: \"op = 'd'\"")
		}
	}
	if t.Upsert() && t.Deletes != DeletesHard && t.Deletes != DeletesSoft {
		bad("$.table.deletes", fmt.Sprintf("table.deletes %q is not hard or soft", t.Deletes),
			"use hard (a deleted key's row is gone) or soft (its row stays with _deleted = true and the delete's sequence)")
	}
	if t.Upsert() && t.UpsertWrite != MergeOnRead && t.UpsertWrite != CopyOnWrite {
		bad("$.table.upsert_write", fmt.Sprintf("table.upsert_write %q is not merge_on_read or copy_on_write", t.UpsertWrite),
			"use merge_on_read (deletion vectors: cheap writes, readers must support them) or copy_on_write (files rewritten: every Delta reader reads them)")
	}
	if t.DeleteHorizon < 0 {
		bad("$.table.delete_horizon", "table.delete_horizon is negative", "use a duration such as 24h")
	}
	if c.DeadLetter.Topic == "" {
		bad("$.dead_letter", "table.mode is "+t.Mode+" but dead_letter.topic is missing: a record without its key (or with a NULL key column) goes to the dead-letter topic under every policy",
			"set dead_letter: {topic: <topic>.dlq}")
	}
	if len(c.Table.KafkaColumns) > 0 {
		for i, k := range c.Table.KafkaColumns {
			if seen[deltalog.NameKey(k)] {
				bad(fmt.Sprintf("$.table.kafka_columns[%d]", i), fmt.Sprintf("table.kafka_columns: %q is a key column", k), "key an upsert table by columns of the row")
			}
		}
	}
}

// SequenceByEnvelope reports whether table.sequence_by names a path of the record's
// envelope (SequenceLSN, SequenceSourceTsMs) rather than a column of the row.
func (t Table) SequenceByEnvelope() bool {
	return t.Envelope != "" && (t.SequenceBy == SequenceLSN || t.SequenceBy == SequenceSourceTsMs)
}

// DefaultUnavailableValue is Debezium's default unavailable.value.placeholder: the value
// it sends for an unchanged TOASTed column it does not have (table.unavailable_value).
const DefaultUnavailableValue = "__debezium_unavailable_value"

// Placeholder is the value that marks a column of a change as unavailable
// (table.unavailable_value, DefaultUnavailableValue when unset); "" without an envelope,
// where no value is a placeholder.
func (t Table) Placeholder() string {
	switch {
	case t.Envelope == "":
		return ""
	case t.UnavailableValue == "":
		return DefaultUnavailableValue
	}
	return t.UnavailableValue
}

// validateEnvelope checks table.envelope: a known envelope, on a keyed table, of Avro or
// Kafka Connect JSON values; that a sequence_by envelope path and table.unavailable_value have an envelope.
func (c *Config) validateEnvelope(bad func(path, msg, fix string)) {
	t := &c.Table
	if t.UnavailableValue != "" && t.Envelope == "" {
		bad("$.table.unavailable_value", "table.unavailable_value is set but table.envelope is not",
			"set table.envelope: debezium (or debezium_flattened), or remove table.unavailable_value")
	}
	seen := map[string]bool{}
	for i, f := range t.EnvelopeColumns {
		path := fmt.Sprintf("$.table.envelope_columns[%d]", i)
		switch {
		case t.Envelope == "":
			bad(path, "table.envelope_columns is set but table.envelope is not", "set table.envelope: debezium (or debezium_flattened), or remove table.envelope_columns")
			return
		case !slices.Contains(EnvelopeFields, f):
			bad(path, fmt.Sprintf("table.envelope_columns: %q is not op, lsn, source_ts_ms or ts_ms", f), "list some of op, lsn, source_ts_ms, ts_ms")
		case seen[f]:
			bad(path, fmt.Sprintf("table.envelope_columns: %q is listed twice", f), "list each field once")
		}
		seen[f] = true
	}
	switch t.Envelope {
	case "":
		if t.SequenceBy == SequenceLSN || t.SequenceBy == SequenceSourceTsMs {
			bad("$.table.sequence_by", fmt.Sprintf("table.sequence_by %q names a Debezium envelope field but table.envelope is not set", t.SequenceBy),
				"set table.envelope: debezium (or debezium_flattened), or name a top-level column of the row")
		}
		return
	case EnvelopeDebezium, EnvelopeDebeziumFlattened:
	default:
		bad("$.table.envelope", fmt.Sprintf("table.envelope %q is not debezium or debezium_flattened", t.Envelope),
			"use debezium (Debezium's change events: before, after, source, op) or debezium_flattened (ExtractNewRecordState's rows with __op, __deleted, __lsn)")
		return
	}
	if !t.Keyed() {
		bad("$.table.envelope", fmt.Sprintf("table.envelope %s is set but table.mode is append: a change stream's deletes and updates need a keyed table", t.Envelope),
			"set table.mode: upsert (the current rows) or changelog (every change a row), with table.key")
	}
	if c.Format != FormatAvro && c.Format != FormatConnectJSON {
		bad("$.table.envelope", fmt.Sprintf("table.envelope %s reads the change events of format avro or connect_json, but format is %s", t.Envelope, c.Format),
			"use format: avro (Kafka Connect's AvroConverter) or connect_json (its JsonConverter with schemas.enable=true), or remove table.envelope")
	}
}
