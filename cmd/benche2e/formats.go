package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Record formats of the benchmark topic (-format): the same 10-field record, field for
// field, as Confluent-framed Avro (recordSchema), Confluent-framed Protobuf (recordProto),
// a plain JSON object whose columns are recordSchema's (ingestd reads it with
// avro_schema_file giving the columns), or that JSON object Confluent-framed under
// recordJSONSchema (json_schema).
const (
	formatAvro       = "avro"
	formatProtobuf   = "protobuf"
	formatJSON       = "json"
	formatJSONSchema = "json_schema"
)

// recordJSONSchema is recordSchema as a JSON Schema (2020-12): ts a date-time string, kind
// a string enum, note nullable and the only property not required. ingestd derives long
// columns from its integers and double columns from its numbers, its columns in name
// order (docs/formats.md, "JSON Schema"); every constraint is one its one-pass transcoder
// enforces, so the validator reads no record.
const recordJSONSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"bench.Event","type":"object","properties":{` +
	`"id":{"type":"integer"},"name":{"type":"string"},"score":{"type":"number"},"active":{"type":"boolean"},` +
	`"ts":{"type":"string","format":"date-time"},"note":{"type":["string","null"]},"count":{"type":"integer"},` +
	`"amount":{"type":"number"},"kind":{"type":"string","enum":["CLICK","VIEW","BUY"]},"tags":{"type":"array","items":{"type":"string"}}},` +
	`"required":["id","name","score","active","ts","count","amount","kind","tags"]}`

// recordProto is recordSchema in Protobuf: ts a google.protobuf.Timestamp, note optional,
// kind an enum.
const recordProto = `syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
enum Kind { CLICK = 0; VIEW = 1; BUY = 2; }
message Event {
  int64 id = 1; string name = 2; double score = 3; bool active = 4; google.protobuf.Timestamp ts = 5;
  optional string note = 6; int32 count = 7; double amount = 8; Kind kind = 9; repeated string tags = 10;
}
`

var kinds = []string{"CLICK", "VIEW", "BUY"}

// appendFormat appends record i stamped ts (µs since the epoch) in format to b; the Avro
// encoder e gives the values (the note's length, and the schema id of the framed formats).
func (e *encoder) appendFormat(format string, b []byte, i int64, ts int64) []byte {
	switch format {
	case formatProtobuf:
		return e.appendProto(b, i, ts)
	case formatJSON:
		return e.appendJSON(b, i, ts)
	case formatJSONSchema:
		b = append(b, 0)
		b = binary.BigEndian.AppendUint32(b, e.schemaID)
		return e.appendJSON(b, i, ts)
	}
	return e.appendRecord(b, i, ts)
}

// appendProto appends record i as Confluent-framed Protobuf: magic 0, the schema id, the
// message-index array [0] (the byte 0), then the message (fields in number order).
func (e *encoder) appendProto(b []byte, i int64, ts int64) []byte {
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, e.schemaID)
	b = append(b, 0)
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(idBase+i))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, fmt.Sprintf("customer-%012d (Ann Example, ann@example.com)", i%1_000_000_000_000))
	if score := float64(i%10_000) / 100; score != 0 { // proto3 does not write a zero
		b = protowire.AppendTag(b, 3, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(score))
	}
	if i%2 == 0 {
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	var t []byte
	t = protowire.AppendTag(t, 1, protowire.VarintType)
	t = protowire.AppendVarint(t, uint64(ts/1_000_000))
	if ns := ts % 1_000_000 * 1000; ns != 0 {
		t = protowire.AppendTag(t, 2, protowire.VarintType)
		t = protowire.AppendVarint(t, uint64(ns))
	}
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	b = protowire.AppendBytes(b, t)
	b = protowire.AppendTag(b, 6, protowire.BytesType)
	b = protowire.AppendString(b, noteText[:e.noteLen])
	b = protowire.AppendTag(b, 7, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(100+i%7000))
	b = protowire.AppendTag(b, 8, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(-1234567.89+float64(i%100)))
	if k := i % 3; k != 0 {
		b = protowire.AppendTag(b, 9, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(k))
	}
	for _, tag := range tags {
		b = protowire.AppendTag(b, 10, protowire.BytesType)
		b = protowire.AppendString(b, tag)
	}
	return b
}

// appendJSON appends record i as one JSON object, keys in recordSchema's order, ts in
// RFC 3339 with microseconds.
func (e *encoder) appendJSON(b []byte, i int64, ts int64) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, idBase+i, 10)
	b = fmt.Appendf(b, `,"name":"customer-%012d (Ann Example, ann@example.com)","score":`, i%1_000_000_000_000)
	b = strconv.AppendFloat(b, float64(i%10_000)/100, 'g', -1, 64)
	b = append(b, `,"active":`...)
	b = strconv.AppendBool(b, i%2 == 0)
	b = append(b, `,"ts":"`...)
	b = time.UnixMicro(ts).UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	b = append(b, `","note":"`...)
	b = append(b, noteText[:e.noteLen]...)
	b = append(b, `","count":`...)
	b = strconv.AppendInt(b, 100+i%7000, 10)
	b = append(b, `,"amount":`...)
	b = strconv.AppendFloat(b, -1234567.89+float64(i%100), 'g', -1, 64)
	b = append(b, `,"kind":"`...)
	b = append(b, kinds[i%3]...)
	b = append(b, `","tags":[`...)
	for k, tag := range tags {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, tag)
	}
	return append(b, "]}"...)
}
