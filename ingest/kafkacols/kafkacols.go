// Package kafkacols is the Kafka columns of a table (table.kafka_columns; docs/tables.md,
// "Kafka columns"): the names and Delta types of _kafka_key, _kafka_headers, _kafka_topic,
// _kafka_partition, _kafka_offset and _kafka_timestamp, the check of an existing table's
// columns, and the values of one record: its headers as a map (the last value of a
// repeated key wins, like Java's Headers.lastHeader), its key in the configured format
// (bytes; string: valid UTF-8; avro: Confluent-framed, decoded with its own writer schema
// into the _kafka_key struct, KeyDecoder).
//
// It is pure apart from the decoding: no I/O; key writer schemas are resolved by the
// caller.
package kafkacols

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
)

// The names of table.kafka_columns; the column of each is Prefix + name.
const (
	Key       = "key"       // _kafka_key: binary, string or struct (KeyFormat)
	Headers   = "headers"   // _kafka_headers: map<string, binary>, valueContainsNull
	Topic     = "topic"     // _kafka_topic: string
	Partition = "partition" // _kafka_partition: integer
	Offset    = "offset"    // _kafka_offset: long
	Timestamp = "timestamp" // _kafka_timestamp: timestamp (µs since the epoch, UTC)
)

// Prefix starts every Kafka column's name.
const Prefix = "_kafka_"

// All are the names table.kafka_columns accepts, in the order the columns are appended
// to a table ingestd creates.
var All = []string{Key, Headers, Topic, Partition, Offset, Timestamp}

// Key formats (table.key_format).
const (
	KeyBytes  = "bytes"  // the key's bytes as is (default)
	KeyString = "string" // the key as UTF-8 text; other bytes are a key_decode_error
	KeyAvro   = "avro"   // Confluent-framed Avro, decoded with the writer schema of its own id
)

// KeyFormats are the values table.key_format accepts.
var KeyFormats = []string{KeyBytes, KeyString, KeyAvro}

// Column is the column name of Kafka column c ("offset" → "_kafka_offset").
//
// A known Kafka column's name is a constant (no allocation: the fill names columns on
// every record).
func Column(c string) string {
	switch c {
	case Key:
		return Prefix + Key
	case Headers:
		return Prefix + Headers
	case Topic:
		return Prefix + Topic
	case Partition:
		return Prefix + Partition
	case Offset:
		return Prefix + Offset
	case Timestamp:
		return Prefix + Timestamp
	}
	return Prefix + c
}

// Columns are the column names of cols, in All's order whatever cols' order.
func Columns(cols []string) []string {
	var out []string
	for _, c := range All {
		if slices.Contains(cols, c) {
			out = append(out, Column(c))
		}
	}
	return out
}

// Type is the Delta type of Kafka column c ("key", …) under key format format; the
// key's under KeyAvro is keyType (the key writer schema's Delta struct).
func Type(c, format string, keyType *deltalog.StructType) deltalog.DataType {
	switch c {
	case Key:
		switch format {
		case KeyString:
			return deltalog.String
		case KeyAvro:
			return keyType
		}
		return deltalog.Binary
	case Headers:
		return &deltalog.MapType{KeyType: deltalog.String, ValueType: deltalog.Binary, ValueContainsNull: true}
	case Topic:
		return deltalog.String
	case Partition:
		return deltalog.Integer
	case Offset:
		return deltalog.Long
	case Timestamp:
		return deltalog.Timestamp
	}
	return nil
}

// Fields are the columns a table ingestd creates gets for cols (table.kafka_columns),
// all nullable, in All's order. Under KeyAvro, keyType is the struct of the key's writer
// schema (every field made nullable, as ingestd's columns are); it must not be nil then.
func Fields(cols []string, format string, keyType *deltalog.StructType) ([]*deltalog.StructField, error) {
	var out []*deltalog.StructField
	for _, c := range All {
		if !slices.Contains(cols, c) {
			continue
		}
		var t deltalog.DataType = Type(c, format, nil)
		if c == Key && format == KeyAvro {
			if keyType == nil {
				return nil, errors.New("type column _kafka_key: table.key_format is avro and no key schema is known")
			}
			t = nullableStruct(keyType)
		}
		out = append(out, &deltalog.StructField{Name: Column(c), Type: t, Nullable: true, Metadata: map[string]any{}})
	}
	return out, nil
}

// nullableStruct copies s with every field, element and value nullable.
func nullableStruct(s *deltalog.StructType) *deltalog.StructType {
	out := &deltalog.StructType{Fields: make([]*deltalog.StructField, len(s.Fields))}
	for i, f := range s.Fields {
		out.Fields[i] = &deltalog.StructField{Name: f.Name, Type: nullableType(f.Type), Nullable: true, Metadata: map[string]any{}}
	}
	return out
}

func nullableType(t deltalog.DataType) deltalog.DataType {
	switch t := t.(type) {
	case *deltalog.StructType:
		return nullableStruct(t)
	case *deltalog.ArrayType:
		return &deltalog.ArrayType{ElementType: nullableType(t.ElementType), ContainsNull: true}
	case *deltalog.MapType:
		return &deltalog.MapType{KeyType: t.KeyType, ValueType: nullableType(t.ValueType), ValueContainsNull: true}
	}
	return t
}

// Check verifies that table (an existing table's schema) has every Kafka column of cols
// with its type under format: binary, string, a struct (avro key, any fields),
// map<string, binary> with valueContainsNull, string, integer, long, timestamp. Names
// match as Delta matches them (deltalog.NameKey). The error names every column that is
// missing or of another type, and the fix.
func Check(table *deltalog.StructType, cols []string, format string) error {
	byKey := map[string]*deltalog.StructField{}
	for _, f := range table.Fields {
		byKey[deltalog.NameKey(f.Name)] = f
	}
	var probs []string
	for _, c := range All {
		if !slices.Contains(cols, c) {
			continue
		}
		name := Column(c)
		want := Type(c, format, nil)
		f, ok := byKey[deltalog.NameKey(name)]
		switch {
		case !ok:
			ddl := "a STRUCT of the key's fields"
			if want != nil {
				ddl = strings.ToUpper(want.String())
			}
			probs = append(probs, fmt.Sprintf("column %s is missing (add it: ALTER TABLE … ADD COLUMNS (%s %s), or remove %s from table.kafka_columns)", name, name, ddl, c))
		case c == Key && format == KeyAvro:
			if _, ok := f.Type.(*deltalog.StructType); !ok {
				probs = append(probs, fmt.Sprintf("column %s is %s, but table.key_format avro needs a struct of the key's fields (use key_format bytes or string, or another table)", f.Name, f.Type))
			}
		case c == Headers:
			m, ok := f.Type.(*deltalog.MapType)
			if !ok || m.KeyType.String() != "string" || m.ValueType.String() != "binary" || !m.ValueContainsNull {
				probs = append(probs, fmt.Sprintf("column %s is %s, but Kafka headers need map<string, binary> with nullable values (valueContainsNull: a header value may be null)", f.Name, f.Type))
			}
		case f.Type.String() != want.String():
			fix := "set table.key_format to match, or use another table"
			if c != Key {
				fix = fmt.Sprintf("remove %s from table.kafka_columns, or use another table", c)
			}
			probs = append(probs, fmt.Sprintf("column %s is %s, but ingestd writes %s there (%s)", f.Name, f.Type, want, fix))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("check Kafka columns (table.kafka_columns): %s", strings.Join(probs, "; "))
	}
	return nil
}

// Header is one entry of the _kafka_headers map: a header key and its value, nil for a
// null header value (NULL in the map, not X”).
type Header struct {
	Key   string
	Value []byte
}

// HeaderMap is the _kafka_headers map of a record's headers (KIP-82: an ordered list
// that allows repeated keys): one entry per distinct key, in the order keys first
// appear, holding the value of the key's last occurrence (Java's Headers.lastHeader). A
// null value stays nil. No headers: an empty (non-nil) map, never NULL. The record, and
// its dead-letter copy, keep every header in order; only the column folds repeats.
func HeaderMap(hs []kgo.RecordHeader) []Header {
	return AppendHeaderMap(make([]Header, 0, len(hs)), hs)
}

// AppendHeaderMap is HeaderMap appending to dst (reused by the caller across records).
func AppendHeaderMap(dst []Header, hs []kgo.RecordHeader) []Header {
	base := len(dst)
	var at map[string]int // only for many headers; a few are searched linearly
	if len(hs) > 16 {
		at = make(map[string]int, len(hs))
	}
	for _, h := range hs {
		i := -1
		if at != nil {
			if j, ok := at[h.Key]; ok {
				i = j
			}
		} else {
			for j := base; j < len(dst); j++ {
				if dst[j].Key == h.Key {
					i = j
					break
				}
			}
		}
		if i >= 0 {
			dst[i].Value = h.Value
			continue
		}
		if at != nil {
			at[h.Key] = len(dst)
		}
		dst = append(dst, Header{Key: h.Key, Value: h.Value})
	}
	return dst
}

// StringKey checks a key for key_format string: nil (a null key) and valid UTF-8 pass;
// other bytes are a *decode.Error with decode.ReasonKeyDecodeError (never replaced by
// U+FFFD, which would alter the data silently).
func StringKey(k []byte) error {
	if k == nil || utf8.Valid(k) {
		return nil
	}
	i := decode.InvalidUTF8At(k)
	return &decode.Error{Reason: decode.ReasonKeyDecodeError, Field: Column(Key),
		Err: fmt.Errorf("decode key as string (table.key_format string): byte %d (0x%02x) is not valid UTF-8", i, k[i])}
}

// HeaderKeys checks the header keys of a record for _kafka_headers, a map<string, binary>:
// each must be valid UTF-8 (a Java producer's always is; a key of other bytes in a Delta
// string would make the data file unreadable to readers that check UTF-8, delta-rs
// among them). The first that is not is a *decode.Error with decode.ReasonDecodeError at
// _kafka_headers, naming the header's index and the byte.
func HeaderKeys(hs []kgo.RecordHeader) error {
	for j, h := range hs {
		if utf8.ValidString(h.Key) {
			continue
		}
		i := decode.InvalidUTF8At([]byte(h.Key))
		return &decode.Error{Reason: decode.ReasonDecodeError, Field: Column(Headers),
			Err: fmt.Errorf("header %d: key byte %d (0x%02x) is not valid UTF-8", j, i, h.Key[i])}
	}
	return nil
}

// KeyError is a key_decode_error for the record key: why the key cannot be written.
func KeyError(format string, args ...any) *decode.Error {
	return &decode.Error{Reason: decode.ReasonKeyDecodeError, Field: Column(Key), Err: fmt.Errorf(format, args...)}
}
