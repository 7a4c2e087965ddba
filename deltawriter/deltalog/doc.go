// Package deltalog holds the Delta Lake protocol model that every other package shares:
// the table schema (struct, array, map, primitive types, field metadata) and the log
// actions (protocol, metaData, add, remove, txn, commitInfo, …) with their JSON forms.
//
// It is a pure leaf package: no I/O, no Kafka, no Avro. Field and type names follow
// PROTOCOL.md ("Schema Serialization Format", "Actions").
package deltalog
