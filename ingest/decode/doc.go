// Package decode turns Kafka record values into column values for ingestd's Delta tables:
// Avro, and the formats transcoded into it (docs/formats.md): Protobuf (protobuf.go, read
// from the wire format by protowire.go), JSON Schema (jsonschema.go), plain JSON and Kafka
// Connect JSON (json.go, read in one pass by jsonfast.go). Each of those
// derives an Avro schema from its own (WriterSchema.Avro) and turns every record body into
// that schema's binary encoding, which the compiled Avro decoder writes into the column
// buffers (CompileRecord, RecordDecoder): one column writer, one rollback, one guard. A
// Protobuf body and a plain JSON document of the common shape skip the Avro binary:
// protodirect.go and jsondirect.go read them straight into the columns with the Avro
// decoder's steps, writing exactly what they would, and hand any other body to the
// transcoding.
//
// Envelope (envelope.go) reads Debezium's change events (table.envelope): per envelope
// writer schema the row's writer schema, per body the operation, the sequence fields and
// the row's Avro binary, a sub-slice of the body that the Avro decoder then decodes.
//
// It has four parts:
//
//   - ParseFrame splits a Confluent-framed value: the magic byte 0, a 4-byte big-endian
//     schema id, the Avro binary body.
//   - ToDelta maps an Avro writer schema to a Delta schema (docs/schema-policies.md, "Avro
//     to Delta types"); Kafka Connect and Debezium logical types (connect.name in Avro, a
//     schema name in Kafka Connect JSON) are decided by one table for both formats
//     (connect.go; docs/formats.md, "Kafka Connect and Debezium logical types").
//   - Registry fetches, parses and caches writer schemas by id from a Confluent-compatible
//     schema registry; StaticSchema loads a configured .avsc for raw (unframed) Avro, and
//     ParseWriterSchema parses one schema text.
//   - Compile builds a Decoder per (writer schema, table schema) that appends exactly one
//     row per record straight into per-leaf column buffers, with Dremel repetition and
//     definition levels, without going through map[string]any.
//
// Every permanent failure is an *Error carrying a stable reason code (the Reason*
// constants, which become the ingestd.error.reason header of a dead letter:
// docs/dead-letters-and-replay.md, "Reason codes") and a field path (a.b, items[].qty,
// m{}.v). Transient registry failures wrap ErrTransient instead and are never
// dead-lettered; a registry that refuses the credentials is ErrRegistryAuth.
//
// Field names are opaque: a name outside Avro's grammar, such as "order id", is kept as it
// is (docs/schema-policies.md, "Column names"). hamba/avro checks names only through its
// process-wide switch avro.SkipNameValidation, so this package turns the switch off before
// its first parse and leaves it off for the life of the process: from then on, every
// hamba/avro parse in the process accepts such names.
//
// # Memory
//
// Decode copies a record's string, bytes and fixed values into memory that is never
// reused. DecodeWith and DecodeColumns take a caller-held Arena instead: values live in its
// 64 KiB chunks (a value of 16 KiB or more gets its own allocation), which Reset makes
// reusable, and it keeps at most 64 MiB of chunks. Under Arena.AliasPayloads nothing is
// copied: values are sub-slices of the payload, which keeps the payload's buffer (a
// fetch's, for a Kafka record) alive until the column buffers holding them are dropped.
// DecodeColumns appends a dense column's values as words, or as bytes into the column's
// own buffer, with no parquet.Value built and no arena bytes. A record that fails is cut
// back from every column: no partial row. On any input a decode allocates at most a
// bounded multiple of the payload's length; a transcoded body is at most 1 MiB + 64 × the
// record's body. The one value built rather than copied, a Debezium VariableScaleDecimal's
// text, is at most 16,385 bytes plus its digits (its scale is bounded by PostgreSQL's
// 16,383 digits after the point; a larger one is a decode_error).
//
// A Registry keeps each parsed writer schema for the life of the process (a schema id never
// changes meaning) and a "not found" answer for a TTL (DefaultNegativeTTL).
//
// # Concurrency
//
// A Decoder and a Registry are safe for concurrent use: a Decoder takes its per-record state
// from a pool or from the caller's Arena, and concurrent lookups of one schema id make one
// registry request. An Arena is not: one per goroutine, shared by several decoders only one
// after another. The package starts no goroutines (protocompile's compiler runs its own
// while a .proto schema is compiled, all ended before it returns).
package decode
