package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// recordSchema is the benchmark record: BenchmarkB1's 10-field record (ingest/decode) with
// its decimal(12,2) `amount` replaced by a double, because kafka-delta-ingest cannot decode
// Avro decimals (it panics with `expected decimal got [...]`). Every other field is B1's:
// long, string, double, boolean, timestamp-micros, nullable string, int, double, enum,
// array<string>. The same schema serves the 200-byte and the ~1 KB record; only the
// length of `note` differs.
const recordSchema = `{"type":"record","name":"Event","namespace":"bench","fields":[` +
	`{"name":"id","type":"long"},` +
	`{"name":"name","type":"string"},` +
	`{"name":"score","type":"double"},` +
	`{"name":"active","type":"boolean"},` +
	`{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},` +
	`{"name":"note","type":["null","string"]},` +
	`{"name":"count","type":"int"},` +
	`{"name":"amount","type":"double"},` +
	`{"name":"kind","type":{"type":"enum","name":"Kind","symbols":["CLICK","VIEW","BUY"]}},` +
	`{"name":"tags","type":{"type":"array","items":"string"}}]}`

// idBase is added to the record index to make the id: it keeps every id's zig-zag varint
// 6 bytes long (ids up to about 1.1e12 + 1e11), so every record of a run has the same size.
const idBase = 1_000_000_000_000

// frameHeaderLen is the Confluent wire-format header: magic byte 0 and a 4-byte schema id.
const frameHeaderLen = 5

var tags = []string{"web", "promo-spring-2024", "eu-west-1", "returning-customer!!!"}

// encoder writes benchmark records as Confluent-framed Avro binary (Avro 1.11 spec,
// "Binary Encoding"), every record exactly size bytes long.
type encoder struct {
	schemaID uint32
	size     int
	noteLen  int
}

// newEncoder returns an encoder whose records are size bytes framed (header included).
// size must be at least 200; an error names the smallest size possible.
func newEncoder(schemaID uint32, size int) (*encoder, error) {
	e := &encoder{schemaID: schemaID, size: size}
	probe := e.appendRecord(nil, 0, 1_700_000_000_000_000) // note empty
	e.noteLen = size - len(probe)
	if e.noteLen < 1 || e.noteLen > 8191 { // 1..2-byte varint length keeps the arithmetic exact
		return nil, fmt.Errorf("make encoder: a record of %d bytes is not possible (%d..%d)", size, len(probe)+1, len(probe)+8000)
	}
	// The note's length prefix grows from one to two bytes past 63 bytes.
	if e.noteLen > 63 {
		e.noteLen--
	}
	if got := len(e.appendRecord(nil, 0, 1_700_000_000_000_000)); got != size {
		return nil, fmt.Errorf("make encoder: record is %d bytes, want %d", got, size)
	}
	return e, nil
}

var noteText = strings.Repeat("first purchase after the spring campaign; gift wrap requested. ", 200)

// appendRecord appends record i (id idBase+i) stamped ts (µs since the epoch) to b.
func (e *encoder) appendRecord(b []byte, i int64, ts int64) []byte {
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, e.schemaID)
	b = appendLong(b, idBase+i)
	b = appendString(b, fmt.Sprintf("customer-%012d (Ann Example, ann@example.com)", i%1_000_000_000_000))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(i%10_000)/100))
	if i%2 == 0 {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendLong(b, ts)
	b = appendLong(b, 1) // union branch 1: string
	b = appendString(b, noteText[:e.noteLen])
	b = appendLong(b, 100+i%7000) // 2-byte zig-zag varint for every i
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(-1234567.89+float64(i%100)))
	b = appendLong(b, i%3)
	b = appendLong(b, int64(len(tags)))
	for _, t := range tags {
		b = appendString(b, t)
	}
	return appendLong(b, 0)
}

func appendLong(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64((v<<1)^(v>>63)))
}

func appendString(b []byte, s string) []byte {
	b = appendLong(b, int64(len(s)))
	return append(b, s...)
}
