package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Formats of record values (a pipeline's `format`, docs/formats.md).
const (
	FormatAvro        = "avro"         // Confluent-framed or raw Avro binary
	FormatProtobuf    = "protobuf"     // Confluent-framed Protobuf with the message-index array
	FormatJSONSchema  = "json_schema"  // Confluent-framed JSON validated by a JSON Schema
	FormatJSON        = "json"         // plain JSON objects, no framing
	FormatConnectJSON = "connect_json" // Kafka Connect JsonConverter with schemas.enable: {"schema": …, "payload": …}
)

// RecordDecoder appends exactly one row per record body to column buffers: the call the
// pipeline trunk makes per record, whatever the format. *Decoder (Avro) implements it;
// the other formats transcode each body into the Avro binary of their writer schema's
// derived Avro schema (WriterSchema.Avro) and hand it to a *Decoder compiled from it, so
// every format shares one column-buffer writer, its levels, its dense columns and its
// rollback. Errors, the rollback and the memory contract are (*Decoder).DecodeColumns's.
type RecordDecoder interface {
	DecodeColumns(a *Arena, payload []byte, cols []column.Column) error
	Columns() int
}

// bodyTranscoder turns one record body of a non-Avro format into the Avro binary of its
// writer schema's Avro schema, appended to dst. Errors are *Error (the format's own
// decode failures, with field paths).
type bodyTranscoder interface {
	toAvro(dst, body []byte) ([]byte, error)
}

// avroAppender appends Avro binary encoding (Avro 1.11 specification, "Binary
// Encoding") to b for a bodyTranscoder, up to a bound on the bytes one body may
// expand to (maxExpandFixed, maxExpandFactor).
type avroAppender struct {
	b     []byte
	limit int // the length b may reach before check fails
}

// newAvroAppender appends to dst the Avro binary of a body of n bytes.
func newAvroAppender(dst []byte, n int) avroAppender {
	return avroAppender{b: dst, limit: len(dst) + maxExpandFixed + maxExpandFactor*n}
}

var errExpand = errors.New("record expands beyond the transcoding bound")

// check is a decode_error at path once b has grown past the bound.
func (e *avroAppender) check(path string) error {
	if len(e.b) > e.limit {
		return newError(ReasonDecodeError, path, fmt.Errorf("%w (%d bytes)", errExpand, e.limit))
	}
	return nil
}

// long appends an Avro int or long (zig-zag varint).
func (e *avroAppender) long(v int64) { e.b = binary.AppendVarint(e.b, v) }

// str appends Avro bytes or string: the length, then s.
func (e *avroAppender) str(s []byte) {
	e.long(int64(len(s)))
	e.b = append(e.b, s...)
}

// text is str for a Go string, without copying it into a []byte first.
func (e *avroAppender) text(s string) {
	e.long(int64(len(s)))
	e.b = append(e.b, s...)
}

// CompileRecord is Compile for a writer schema of any format: the Avro *Decoder itself
// for Avro, else a decoder that transcodes each body first (RecordDecoder). Errors are
// Compile's.
func CompileRecord(writer *WriterSchema, table *deltalog.StructType, mode deltalog.ColumnMappingMode, pq *parquet.Schema) (RecordDecoder, error) {
	d, err := Compile(writer, table, mode, pq)
	if err != nil || writer.body == nil {
		return d, err
	}
	td := &transcodingDecoder{avro: d, body: writer.body}
	switch b := writer.body.(type) {
	case *protoBody:
		td.direct = compileProtoDirect(b.top, d)
	case *jsonBody:
		if td.jdirect = compileJSONDirect(b, d); td.jdirect != nil {
			b.direct.Store(true)
		}
	}
	return td, nil
}

// maxScratch is the largest transcode buffer a transcodingDecoder keeps for reuse.
const maxScratch = 1 << 20

// transcodingDecoder is the RecordDecoder of a non-Avro writer schema.
type transcodingDecoder struct {
	avro    *Decoder
	body    bodyTranscoder
	direct  *protoDirect // Protobuf: the bodies it reads skip the transcoding (nil: none)
	jdirect *jsonDirect  // plain JSON: the documents it reads skip the transcoding (nil: none)
	scratch sync.Pool    // *[]byte
}

func (d *transcodingDecoder) Columns() int { return d.avro.Columns() }

// DecodeColumns transcodes payload into a scratch buffer, then decodes it with the Avro
// decoder without aliasing (the scratch buffer is reused by the next record: values the
// columns keep are copied, see Arena); a Protobuf body the direct decoder reads
// (protodirect.go) goes straight into the columns instead, with the same result.
func (d *transcodingDecoder) DecodeColumns(a *Arena, payload []byte, cols []column.Column) error {
	if len(cols) != d.avro.ncols {
		return fmt.Errorf("decode record: got %d columns, the decoder writes %d", len(cols), d.avro.ncols)
	}
	if d.direct != nil && d.direct.decodeColumns(a, payload, cols) {
		return nil
	}
	if d.jdirect != nil && d.jdirect.decodeColumns(a, payload, cols) {
		return nil
	}
	sp, _ := d.scratch.Get().(*[]byte)
	if sp == nil {
		sp = new([]byte)
	}
	b, err := d.body.toAvro((*sp)[:0], payload)
	if err == nil {
		alias := a != nil && a.s.alias
		if alias {
			a.s.alias = false
		}
		err = d.avro.DecodeColumns(a, b, cols)
		if alias {
			a.s.alias = true
		}
	}
	if cap(b) <= maxScratch {
		*sp = b[:0]
		d.scratch.Put(sp)
	}
	return err
}

// Transcode returns the Avro binary of one record body of ws's format, for ws.Avro
// (dlq inspect decodes dead letters with it): body itself for Avro.
func (ws *WriterSchema) Transcode(body []byte) ([]byte, error) {
	if ws.body == nil {
		return body, nil
	}
	return ws.body.toAvro(nil, body)
}

// Key identifies ws among the writer schemas of a batch (the schema guard's decisions,
// compiled decoders): its ID, except for a Protobuf message other than its file's first,
// which shares the file's schema id but not its columns (ID + ordinal<<32).
func (ws *WriterSchema) Key() int {
	if ws.key != 0 {
		return ws.key
	}
	return ws.ID
}

// FormatName is ws's format (one of the Format* constants).
func (ws *WriterSchema) FormatName() string {
	if ws.Format == "" {
		return FormatAvro
	}
	return ws.Format
}

// Message returns the writer schema of the record whose body (the bytes after the
// Confluent frame) is payload, and the body of that message. For Protobuf, payload starts
// with the message-index array (docs/formats.md, "Protobuf framing") that selects the
// message of ws's file; for every other format it is ws and payload unchanged. Errors:
// an *Error with ReasonDecodeError for a malformed or out-of-range message-index array.
func (ws *WriterSchema) Message(payload []byte) (*WriterSchema, []byte, error) {
	if ws.proto == nil {
		return ws, payload, nil
	}
	return ws.proto.message(ws, payload)
}
