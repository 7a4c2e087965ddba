package decode

import (
	"errors"
	"strings"
)

// Reason codes carried by *Error. They are stable: they appear in dead-letter headers.
const (
	ReasonTooShort         = "too_short"          // value of 0..4 bytes: no room for a Confluent frame
	ReasonBadMagic         = "bad_magic"          // first byte is not the Confluent magic 0
	ReasonTruncated        = "truncated"          // the Avro body ended in the middle of a value
	ReasonTrailingBytes    = "trailing_bytes"     // bytes left over after one complete record
	ReasonDecodeError      = "decode_error"       // malformed Avro (bad length, varint, index, …)
	ReasonSchemaNotFound   = "schema_not_found"   // the registry does not know the schema id
	ReasonSchemaParseError = "schema_parse_error" // the registry's schema text is not usable Avro
	ReasonSchemaUnreadable = "schema_unreadable"  // the registry answered the id with a 4xx other than 401/403/404/408/429 (e.g. 400: it cannot parse its own stored schema)
	ReasonSchemaMismatch   = "schema_mismatch"    // writer type cannot be written losslessly to the column
	ReasonNotNullViolation = "not_null_violation" // null for a NOT NULL column
	ReasonUnsupportedType  = "unsupported_type"   // writer schema not representable in Delta
	// ReasonGeneratedColumnMismatch: the record supplies a value for a generated column
	// that is not its expression's result under null-safe equality (Spark's <=>), or the
	// expression cannot be evaluated on the record (PROTOCOL.md, "Generated Columns").
	ReasonGeneratedColumnMismatch = "generated_column_mismatch"
	// ReasonKeyDecodeError: the record key cannot be written to _kafka_key in the
	// configured table.key_format (not UTF-8 for string; empty, not Confluent-framed, an
	// unknown schema id, undecodable or not fitting the column for avro).
	ReasonKeyDecodeError = "key_decode_error"
	// ReasonKafkaColumnCollision: the value's writer schema has a field named like a
	// configured Kafka column (case-insensitively), which ingestd fills from the record.
	ReasonKafkaColumnCollision = "kafka_column_collision"
	// ReasonCheckViolation: the record's row does not satisfy a CHECK constraint or column
	// invariant of the table (its expression is false or NULL, or cannot be evaluated on
	// the row); the ingestd.error.constraint header names every violated one.
	ReasonCheckViolation = "check_violation"
	// ReasonMissingKey: a record of a keyed table (table.mode upsert) whose row lacks a
	// key column or holds NULL in one (or in table.sequence_by's column), or a tombstone
	// whose Kafka key does not name a key (docs/keyed-tables.md). Dead-lettered under every
	// schema policy: no table change can make it fit.
	ReasonMissingKey = "missing_key"
	// ReasonUnsupportedChange: a change event a keyed table cannot apply: a Debezium
	// truncate (op t), which names no key (docs/keyed-tables.md, Change data capture).
	// Dead-lettered under every schema policy.
	ReasonUnsupportedChange = "unsupported_change"
)

// Error is a permanent decode failure for one record (or for every record of one writer
// schema). Reason is one of the Reason* constants; Field is the field path where known
// (`a.b`, `items[].qty`, `m{}.v`, `u.member1`), using the table's spelling for matched
// columns; Err is the underlying cause.
type Error struct {
	Reason string
	Field  string
	Err    error
	// Details are more named facts of the failure, each an ingestd.error.<name> header of
	// its dead letter (generated_column_mismatch: expression, value, expected); nil for
	// most reasons.
	Details map[string]string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("decode: ")
	b.WriteString(e.Reason)
	if e.Field != "" {
		b.WriteString(" at ")
		b.WriteString(e.Field)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrTransient marks failures that must be retried, never dead-lettered: registry 5xx,
// timeouts, refused connections, unparseable registry replies, cancelled contexts. Test with
// errors.Is(err, ErrTransient).
var ErrTransient = errors.New("transient failure")

// ErrRegistryAuth marks a registry answer of 401 or 403 (the credentials in use are
// missing, wrong or not allowed to read schemas): neither transient nor a per-record
// *Error. Every lookup would fail the same way, so the pipeline fails with the message,
// which names the registry URL and the username (never the password). Test with
// errors.Is(err, ErrRegistryAuth); the error is a *RegistryAuthError.
var ErrRegistryAuth = errors.New("schema registry refused the credentials")

// ErrNullRecord is returned by (*Decoder).Decode when the writer schema is [null, record]
// and the record's top-level value is null: the record carries no row, and the pipeline
// skips it and counts it like a tombstone (ingestd_records_skipped_total, reason
// null_record). No column is changed.
var ErrNullRecord = errors.New("decode: top-level record value is null")

// newError builds an *Error.
func newError(reason, field string, err error) *Error {
	return &Error{Reason: reason, Field: field, Err: err}
}

// withField sets the path of an *Error that has none yet and returns err.
func withField(err error, field string) error {
	if e, ok := err.(*Error); ok && e.Field == "" {
		e.Field = field
	}
	return err
}

// ReasonOf returns the reason code of err if it is (or wraps) an *Error, else "".
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// FieldOf returns the field path of err if it is (or wraps) an *Error, else "".
func FieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
