// Package kafkacols names the Kafka columns of a table (table.kafka_columns; see
// docs/tables.md, Kafka columns): the names and Delta types of _kafka_key,
// _kafka_headers, _kafka_topic, _kafka_partition, _kafka_offset and _kafka_timestamp, the
// key formats, and the check of an existing table's columns. It is pure: it imports only
// deltawriter/deltalog. The values of one record (its headers as a map, its key in the
// configured format) are filled by ingest/rowfill.
package kafkacols

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// The names of table.kafka_columns; the column of each is Prefix + name.
const (
	Key       = "key"       // _kafka_key: binary, string (string and the JSON key formats) or struct (avro)
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
	// KeyConnectJSON: Kafka Connect's JsonConverter with schemas.enable=true,
	// {"schema": …, "payload": …}; _kafka_key holds the payload's JSON text.
	KeyConnectJSON = "connect_json"
	// KeyJSON: plain JSON (JsonConverter with schemas.enable=false), an object of the key
	// columns or a bare scalar; _kafka_key holds the key's JSON text.
	KeyJSON = "json"
)

// KeyFormats are the values table.key_format accepts.
var KeyFormats = []string{KeyBytes, KeyString, KeyAvro, KeyConnectJSON, KeyJSON}

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
		case KeyString, KeyConnectJSON, KeyJSON:
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
