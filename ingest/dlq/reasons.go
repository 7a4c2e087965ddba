package dlq

import "github.com/ingestd/ingestd/ingest/decode"

// Reasons are the values of the ingestd.error.reason header that ingestd writes, sorted;
// `ingestd replay --reason` accepts these. The codes themselves are defined where the
// failures are found (decode.Reason*); this is the one list of them.
var Reasons = []string{
	decode.ReasonBadMagic, decode.ReasonCheckViolation, decode.ReasonDecodeError, decode.ReasonGeneratedColumnMismatch, decode.ReasonKafkaColumnCollision, decode.ReasonKeyDecodeError, decode.ReasonMissingKey, decode.ReasonNotNullViolation,
	decode.ReasonSchemaMismatch, decode.ReasonSchemaNotFound, decode.ReasonSchemaParseError,
	decode.ReasonSchemaUnreadable, decode.ReasonTooShort, decode.ReasonTrailingBytes, decode.ReasonTruncated, decode.ReasonUnsupportedType,
}

// SchemaLevel reports whether reason says the record's writer schema (or a null in it)
// does not fit the table, as opposed to bytes that could not be read: schema-level
// failures follow the table's schema policy; the others go to the dead-letter topic
// whenever one is configured.
func SchemaLevel(reason string) bool {
	switch reason {
	case decode.ReasonSchemaMismatch, decode.ReasonNotNullViolation, decode.ReasonUnsupportedType, decode.ReasonGeneratedColumnMismatch, decode.ReasonKafkaColumnCollision,
		decode.ReasonCheckViolation:
		return true
	}
	return false
}

// FollowsPolicy reports whether a record that failed with reason is routed by the
// table's schema policy (dead-lettered under dead_letter, halted under halt, evolve's
// on_incompatible): the schema-level reasons, and a writer schema the registry refuses to
// serve (schema_unreadable). The others go to the dead-letter topic whenever one is
// configured.
func FollowsPolicy(reason string) bool {
	return SchemaLevel(reason) || reason == decode.ReasonSchemaUnreadable
}

// connectStage maps a reason to Kafka Connect's stage names (__connect.errors.stage).
func connectStage(reason string) string {
	if SchemaLevel(reason) {
		return "TASK_PUT"
	}
	return "VALUE_CONVERTER"
}
