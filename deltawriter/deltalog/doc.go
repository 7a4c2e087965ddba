// Package deltalog holds the Delta Lake protocol model that every other package shares:
// the table schema (struct, array, map, primitive types, field metadata) and the log
// actions (protocol, metaData, add, remove, txn, commitInfo, …) with their JSON forms,
// and the Delta facts that more than one package needs: table feature names
// (features.go), table property and field metadata keys (properties.go), how column
// names match (NameKey) and which need column mapping (NeedsColumnMapping), and the one
// type-widening table (Widening).
//
// It is a pure leaf package: no I/O, no Kafka, no Avro, nothing else of this module.
// Field and type names follow PROTOCOL.md ("Schema Serialization Format", "Actions").
package deltalog
