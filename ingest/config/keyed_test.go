package config

import (
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/ingest/internal/configtest"
)

// keyedConfig is goodConfig as an upsert pipeline with the table block spread over lines
// 4–9, so that errors name each key's own line.
const keyedConfig = `name: customers
kafka: {brokers: ["k:9092"], topics: [customers]}
schema_registry: {url: "http://r:8081"}
table:
  uri: "file:///tmp/t"
  create: true
  mode: upsert
  key: [id]
  sequence_by: updated_at
schema: {policy: evolve}
dead_letter: {topic: customers.dlq}
`

func TestKeyedConfigDefaults(t *testing.T) {
	cfgs, err := Load(configtest.Write(t, keyedConfig))
	if err != nil {
		t.Fatal(err)
	}
	c := cfgs[0]
	if !c.Table.Keyed() || c.Table.DeleteHorizon != 24*time.Hour || c.Table.SequenceBy != "updated_at" {
		t.Fatalf("keyed %v, delete_horizon %v, sequence_by %q; want true, 24h, updated_at", c.Table.Keyed(), c.Table.DeleteHorizon, c.Table.SequenceBy)
	}
	if c.Table.Deletes != DeletesHard || c.Table.SoftDeletes() || !c.Table.Upsert() {
		t.Fatalf("deletes %q soft %v upsert %v; want hard, false, true", c.Table.Deletes, c.Table.SoftDeletes(), c.Table.Upsert())
	}
	cfgs, err = Load(configtest.Write(t, strings.Replace(keyedConfig, "mode: upsert", "mode: changelog", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfgs[0]; !c.Table.Keyed() || !c.Table.Changelog() || c.Table.Upsert() || c.Table.DeleteHorizon != 0 || c.Table.UpsertWrite != "" || c.Table.Deletes != "" || c.Table.CopyOnWrite() {
		t.Fatalf("changelog: keyed %v changelog %v upsert %v horizon %v upsert_write %q deletes %q; want true, true, false, 0, empty, empty",
			c.Table.Keyed(), c.Table.Changelog(), c.Table.Upsert(), c.Table.DeleteHorizon, c.Table.UpsertWrite, c.Table.Deletes)
	}
	cfgs, err = Load(configtest.Write(t, goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfgs[0]; c.Table.Mode != ModeAppend || c.Table.Keyed() || c.Table.DeleteHorizon != 0 {
		t.Fatalf("default mode %q keyed %v horizon %v, want append, false, 0", c.Table.Mode, c.Table.Keyed(), c.Table.DeleteHorizon)
	}
}

func TestKeyedConfigErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown mode", strings.Replace(keyedConfig, "mode: upsert", "mode: merge", 1),
			`p.yaml:7: table.mode "merge" is not append, upsert or changelog (fix: use append (every record a new row), upsert (the latest row per table.key) or changelog (every change a row, with its operation and sequence))`},
		{"unknown deletes", strings.Replace(keyedConfig, "  key: [id]\n", "  key: [id]\n  deletes: gone\n", 1),
			`p.yaml:9: table.deletes "gone" is not hard or soft (fix: use hard (a deleted key's row is gone) or soft (its row stays with _deleted = true and the delete's sequence))`},
		{"changelog with upsert keys", strings.Replace(keyedConfig, "mode: upsert\n  key: [id]\n", "mode: changelog\n  key: [id]\n  deletes: soft\n  upsert_write: copy_on_write\n", 1),
			"p.yaml:10: table.upsert_write is set but table.mode is changelog, which appends every change (a delete is a row with _change_operation 'delete') (fix: remove table.upsert_write, or set table.mode: upsert)\n" +
				"p.yaml:9: table.deletes is set but table.mode is changelog, which appends every change (a delete is a row with _change_operation 'delete') (fix: remove table.deletes, or set table.mode: upsert)"},
		{"changelog without key", strings.Replace(keyedConfig, "mode: upsert\n  key: [id]\n", "mode: changelog\n", 1),
			`p.yaml:4: table.mode is changelog but table.key is missing (fix: name the key columns, e.g. key: [id], or set key_format: avro to key the table by the fields of the Avro record key)`},
		{"no key", strings.Replace(keyedConfig, "  key: [id]\n", "", 1),
			`p.yaml:4: table.mode is upsert but table.key is missing (fix: name the key columns, e.g. key: [id], or set key_format: avro to key the table by the fields of the Avro record key)`},
		{"key twice", strings.Replace(keyedConfig, "key: [id]", "key: [id, ID]", 1),
			`p.yaml:8: table.key: column "ID" is listed twice (fix: list each key column once)`},
		{"sequence is a key column", strings.Replace(keyedConfig, "sequence_by: updated_at", "sequence_by: Id", 1),
			`p.yaml:9: table.sequence_by "Id" is a key column (fix: order changes by a column that changes with each change, e.g. an update timestamp or a log sequence number)`},
		{"delete_when does not parse", strings.Replace(keyedConfig, "  sequence_by: updated_at\n", "  delete_when: \"op = \"\n", 1),
			`p.yaml:9: table.delete_when "op = ": parse expression "op = ": at offset 5: unexpected end of expression (fix: write a boolean Spark SQL expression over the row's columns, e.g. delete_when: "op = 'd'")`},
		{"no dead-letter topic", strings.Replace(keyedConfig, "dead_letter: {topic: customers.dlq}\n", "", 1),
			`p.yaml:1: table.mode is upsert but dead_letter.topic is missing: a record without its key (or with a NULL key column) goes to the dead-letter topic under every policy (fix: set dead_letter: {topic: <topic>.dlq})`},
		{"keyed keys on an append table", strings.Replace(keyedConfig, "mode: upsert", "mode: append", 1),
			"p.yaml:8: table.key is set but table.mode is append, which ignores it (fix: set table.mode: upsert, or remove table.key)\n" +
				"p.yaml:9: table.sequence_by is set but table.mode is append, which ignores it (fix: set table.mode: upsert, or remove table.sequence_by)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorsOf(t, tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// envelopeConfig is keyedConfig reading Debezium change events ordered by their LSN
// (table.envelope on line 10).
var envelopeConfig = strings.Replace(keyedConfig, "  sequence_by: updated_at\n", "  sequence_by: source.lsn\n  envelope: debezium\n", 1)

// envelopeJSONConfig reads Debezium's change events through Kafka Connect's JsonConverter.
var envelopeJSONConfig = strings.Replace(strings.Replace(envelopeConfig, `schema_registry: {url: "http://r:8081"}`, "format: connect_json", 1),
	"  key: [id]\n", "  key: [id]\n  key_format: connect_json\n", 1)

func TestEnvelopeConfig(t *testing.T) {
	for _, env := range []string{EnvelopeDebezium, EnvelopeDebeziumFlattened} {
		cfgs, err := Load(configtest.Write(t, strings.Replace(envelopeConfig, "envelope: debezium", "envelope: "+env, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if c := cfgs[0]; c.Table.Envelope != env || !c.Table.SequenceByEnvelope() || c.Table.SequenceBy != SequenceLSN {
			t.Fatalf("envelope %q, sequence_by %q (envelope path %v); want %s, source.lsn, true", c.Table.Envelope, c.Table.SequenceBy, c.Table.SequenceByEnvelope(), env)
		}
	}
	// Kafka Connect JSON change events, keyed by JSON keys with or without their schema.
	for _, kf := range []string{"connect_json", "json"} {
		cfgs, err := Load(configtest.Write(t, strings.Replace(envelopeJSONConfig, "key_format: connect_json", "key_format: "+kf, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if c := cfgs[0]; c.Format != FormatConnectJSON || c.Table.KeyFormat != kf || c.Table.Envelope != EnvelopeDebezium {
			t.Fatalf("format %s, key_format %s, envelope %s; want connect_json, %s, debezium", c.Format, c.Table.KeyFormat, c.Table.Envelope, kf)
		}
	}
	cfgs, err := Load(configtest.Write(t, strings.Replace(envelopeConfig, "source.lsn", "lsn", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfgs[0]; c.Table.SequenceByEnvelope() {
		t.Fatalf("sequence_by %q is a column, not an envelope path", c.Table.SequenceBy)
	}
	// table.unavailable_value: Debezium's default placeholder with an envelope, the one set
	// otherwise, none without an envelope.
	if got := cfgs[0].Table.Placeholder(); got != "__debezium_unavailable_value" {
		t.Fatalf("default placeholder %q", got)
	}
	cfgs, err = Load(configtest.Write(t, strings.Replace(envelopeConfig, "  envelope: debezium\n", "  envelope: debezium\n  unavailable_value: __toast__\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfgs[0].Table.Placeholder(); got != "__toast__" {
		t.Fatalf("placeholder %q, want __toast__", got)
	}
	cfgs, err = Load(configtest.Write(t, keyedConfig))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfgs[0].Table.Placeholder(); got != "" {
		t.Fatalf("placeholder without an envelope %q, want none", got)
	}
}

func TestEnvelopeConfigErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown envelope", strings.Replace(envelopeConfig, "envelope: debezium", "envelope: maxwell", 1),
			`p.yaml:10: table.envelope "maxwell" is not debezium or debezium_flattened (fix: use debezium (Debezium's change events: before, after, source, op) or debezium_flattened (ExtractNewRecordState's rows with __op, __deleted, __lsn))`},
		{"append table", strings.Replace(envelopeConfig, "  mode: upsert\n  key: [id]\n  sequence_by: source.lsn\n", "", 1),
			`p.yaml:7: table.envelope debezium is set but table.mode is append: a change stream's deletes and updates need a keyed table (fix: set table.mode: upsert (the current rows) or changelog (every change a row), with table.key)`},
		{"not avro", strings.Replace(envelopeConfig, "schema: {policy: evolve}\n", "schema: {policy: evolve}\nformat: protobuf\n", 1),
			`p.yaml:10: table.envelope debezium reads the change events of format avro or connect_json, but format is protobuf (fix: use format: avro (Kafka Connect's AvroConverter) or connect_json (its JsonConverter with schemas.enable=true), or remove table.envelope)`},
		{"plain json", strings.Replace(envelopeJSONConfig, "format: connect_json", "format: json", 1),
			`p.yaml:11: table.envelope debezium reads the change events of format avro or connect_json, but format is json (fix: use format: avro (Kafka Connect's AvroConverter) or connect_json (its JsonConverter with schemas.enable=true), or remove table.envelope)`},
		{"avro keys of JSON values", strings.Replace(envelopeJSONConfig, "key_format: connect_json", "key_format: avro", 1),
			`p.yaml:9: table.key_format avro reads Confluent-framed Avro keys through schema_registry, which format connect_json has none of (fix: use key_format connect_json for keys of Kafka Connect's JsonConverter with schemas.enable=true ({"schema": …, "payload": …}), or json without schemas)`},
		{"envelope columns", strings.Replace(envelopeConfig, "  envelope: debezium\n", "  envelope: debezium\n  envelope_columns: [op, xid, op]\n", 1),
			"p.yaml:11: table.envelope_columns: \"xid\" is not op, lsn, source_ts_ms or ts_ms (fix: list some of op, lsn, source_ts_ms, ts_ms)\n" +
				"p.yaml:11: table.envelope_columns: \"op\" is listed twice (fix: list each field once)"},
		{"envelope columns without envelope", strings.Replace(keyedConfig, "  key: [id]\n", "  key: [id]\n  envelope_columns: [op]\n", 1),
			`p.yaml:9: table.envelope_columns is set but table.envelope is not (fix: set table.envelope: debezium (or debezium_flattened), or remove table.envelope_columns)`},
		{"unavailable value without envelope", strings.Replace(keyedConfig, "  key: [id]\n", "  key: [id]\n  unavailable_value: x\n", 1),
			`p.yaml:9: table.unavailable_value is set but table.envelope is not (fix: set table.envelope: debezium (or debezium_flattened), or remove table.unavailable_value)`},
		{"envelope path without envelope", strings.Replace(envelopeConfig, "  envelope: debezium\n", "", 1),
			`p.yaml:9: table.sequence_by "source.lsn" names a Debezium envelope field but table.envelope is not set (fix: set table.envelope: debezium (or debezium_flattened), or name a top-level column of the row)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorsOf(t, tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
