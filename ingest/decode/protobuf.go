package decode

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Protobuf records (docs/formats.md, "Protobuf"): the Confluent frame, then the
// message-index array, then the message's binary body. The registry's schema text is a
// .proto file (or a base64 FileDescriptorProto) compiled with protocompile (its imports:
// the schema's references, fetched from the registry, and the well-known types, compiled
// in); the body is read from the wire format by a decoder compiled per message
// (protowire.go) into the Avro binary of an Avro schema derived from the message, which
// the Avro decoder writes into the column buffers; the bodies of the common shape go
// straight into the column buffers instead (protodirect.go).

const (
	// maxMessageIndexes bounds the message-index array's count (the nesting depth of the
	// selected message).
	maxMessageIndexes = 32
	// maxProtoRecursion is the nesting depth of messages a body may have.
	maxProtoRecursion = 64
	// Transcoding may expand a body (an empty nested message is 2 bytes of Protobuf and
	// every field of the record in Avro), at most to maxExpandFixed + maxExpandFactor × the
	// body's length; beyond it the record is a decode_error.
	maxExpandFixed  = 1 << 20
	maxExpandFactor = 64
	// protoMainFile is the name the schema's own text is compiled under.
	protoMainFile = "ingestd-registry-schema.proto"
)

// protoFile is a Protobuf schema id's compiled file: its messages' writer schemas by
// message-index path, built on first use.
type protoFile struct {
	id    int
	file  protoreflect.FileDescriptor
	first *WriterSchema // message [0]

	mu     sync.Mutex
	byPath map[string]*WriterSchema
	next   int // the next ordinal (WriterSchema.Key)
}

// loadProtobuf compiles a PROTOBUF registry answer, its references resolved through the
// registry (each subject version fetched once), and returns the writer schema of its first
// message, which selects the others (Message).
func (r *Registry) loadProtobuf(ctx context.Context, id int, s sr.Schema) (*WriterSchema, error) {
	files := map[string]string{protoMainFile: s.Schema}
	if err := r.protoRefs(ctx, id, s.References, files, 0); err != nil {
		return nil, err
	}
	return CompileProtobuf(id, s.Schema, files)
}

// protoRefs fetches every referenced .proto (recursively, each once) into files by its
// import path. Well-known types (google/protobuf/*.proto) are compiled in and never fetched.
func (r *Registry) protoRefs(ctx context.Context, id int, refs []sr.SchemaReference, files map[string]string, depth int) error {
	if depth > maxReferenceDepth {
		return newError(ReasonSchemaParseError, "", fmt.Errorf("look up schema %d: references nested deeper than %d", id, maxReferenceDepth))
	}
	for _, ref := range refs {
		if _, done := files[ref.Name]; done || isStandardImport(ref.Name) {
			continue
		}
		rs, err := r.client.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return r.classify(fmt.Sprintf("look up schema %d reference %s (subject %q version %d)", id, ref.Name, ref.Subject, ref.Version), err)
		}
		if rs.Type != sr.TypeProtobuf {
			return newError(ReasonSchemaParseError, "", fmt.Errorf("look up schema %d reference %s: schema type %s, want PROTOBUF", id, ref.Name, rs.Type))
		}
		files[ref.Name] = rs.Schema.Schema
		if err := r.protoRefs(ctx, id, rs.References, files, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func isStandardImport(name string) bool {
	_, ok := standardImports[name]
	return ok
}

// standardImports are the files protocompile.WithStandardImports serves.
var standardImports = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range []string{"any", "api", "descriptor", "duration", "empty", "field_mask", "source_context", "struct", "timestamp", "type", "wrappers"} {
		m["google/protobuf/"+n+".proto"] = true
	}
	return m
}()

// CompileProtobuf compiles the .proto text of schema id, or the base64 of its serialized
// FileDescriptorProto (protoSources); files holds it under any name plus every file it
// imports by import path (the well-known types need not be there). It returns the writer schema of its first message; Message selects the others. Errors: an
// *Error with ReasonSchemaParseError when the text does not compile or has no message. A
// message that cannot be represented in Delta (recursive) has DeltaErr set.
func CompileProtobuf(id int, text string, files map[string]string) (*WriterSchema, error) {
	all := make(map[string]string, len(files)+1)
	for k, v := range files {
		all[k] = v
	}
	all[protoMainFile] = text
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(protoSources(all)),
		MaxParallelism: 1,
	}
	out, err := c.Compile(context.Background(), protoMainFile)
	if err != nil {
		return nil, newError(ReasonSchemaParseError, "", fmt.Errorf("compile protobuf schema %d: %w", id, err))
	}
	fd := out[0]
	if fd.Messages().Len() == 0 {
		return nil, newError(ReasonSchemaParseError, "", fmt.Errorf("compile protobuf schema %d: the file defines no message", id))
	}
	pf := &protoFile{id: id, file: fd, byPath: map[string]*WriterSchema{}, next: 1}
	pf.first = newProtoWriter(id, id, fd.Messages().Get(0))
	pf.first.proto = pf
	pf.byPath["0"] = pf.first
	return pf.first, nil
}

// protoSources resolves the files of one schema by import path: .proto text, or the
// base64 of a serialized FileDescriptorProto, the form Confluent's serializers register
// by default (auto.register.schemas) and some registries (Apicurio) serve back unchanged.
type protoSources map[string]string

// FindFileByPath implements protocompile.Resolver. Errors: protoregistry.NotFound for a
// file it does not hold.
func (m protoSources) FindFileByPath(path string) (protocompile.SearchResult, error) {
	text, ok := m[path]
	if !ok {
		return protocompile.SearchResult{}, protoregistry.NotFound
	}
	if fdp := descriptorFromBase64(text); fdp != nil {
		fdp.Name = proto.String(path) // the name it is imported by, whatever it was registered as
		return protocompile.SearchResult{Proto: fdp}, nil
	}
	return protocompile.SearchResult{Source: strings.NewReader(text)}, nil
}

// descriptorFromBase64 returns the FileDescriptorProto that text encodes in base64
// (standard alphabet, padded or not), or nil when text is not one: .proto text always has
// a space or a line break, base64 has none.
func descriptorFromBase64(text string) *descriptorpb.FileDescriptorProto {
	text = strings.TrimSpace(text)
	if text == "" || strings.ContainsAny(text, " \t\r\n;{") {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(text); err != nil {
			return nil
		}
	}
	fdp := &descriptorpb.FileDescriptorProto{}
	if err := proto.Unmarshal(raw, fdp); err != nil || len(fdp.GetMessageType()) == 0 && len(fdp.GetEnumType()) == 0 {
		return nil
	}
	return fdp
}

// message selects the writer schema of payload's message-index array and returns the body
// after it.
func (pf *protoFile) message(ws *WriterSchema, payload []byte) (*WriterSchema, []byte, error) {
	if len(payload) > 0 && payload[0] == 0 { // the common [0], written as the single byte 0
		return pf.first, payload[1:], nil
	}
	path, rest, err := ParseMessageIndexes(payload)
	if err != nil {
		return nil, nil, err
	}
	if len(path) == 1 && path[0] == 0 {
		return pf.first, rest, nil
	}
	var kb strings.Builder
	for i, p := range path {
		if i > 0 {
			kb.WriteByte('.')
		}
		kb.WriteString(strconv.Itoa(p))
	}
	k := kb.String()
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if w, ok := pf.byPath[k]; ok {
		return w, rest, nil
	}
	md, err := pf.lookup(path)
	if err != nil {
		return nil, nil, err
	}
	if len(pf.byPath) >= 1024 {
		return nil, nil, malformed("protobuf schema %d: more than 1024 distinct message indexes", pf.id)
	}
	w := newProtoWriter(pf.id, pf.id+pf.next<<32, md)
	pf.next++
	pf.byPath[k] = w
	return w, rest, nil
}

// lookup returns the message at a message-index path: the top-level message path[0],
// then its nested message path[1], and so on (Confluent wire format, "message indexes").
func (pf *protoFile) lookup(path []int) (protoreflect.MessageDescriptor, error) {
	msgs := pf.file.Messages()
	var md protoreflect.MessageDescriptor
	for i, p := range path {
		if p >= msgs.Len() {
			return nil, malformed("message index %v: index %d at depth %d, but %s has %d messages there", path, p, i, pf.scope(md), msgs.Len())
		}
		md = msgs.Get(p)
		msgs = md.Messages()
	}
	return md, nil
}

func (pf *protoFile) scope(md protoreflect.MessageDescriptor) string {
	if md == nil {
		return fmt.Sprintf("schema %d", pf.id)
	}
	return string(md.FullName())
}

// ParseMessageIndexes reads the message-index array at the start of a Protobuf body:
// zig-zag varints, the count first, then that many indexes; a count of 0 (the single byte
// 0x00) means [0], the first message. It returns the path and the bytes after the array.
// Errors: an *Error with ReasonTruncated when the array is cut short, ReasonDecodeError
// for an overlong varint, a negative count or index, or a count above 32.
func ParseMessageIndexes(b []byte) (path []int, rest []byte, err error) {
	n, k := binary.Varint(b)
	if err := varintErr(k, "message-index count"); err != nil {
		return nil, nil, err
	}
	b = b[k:]
	switch {
	case n == 0:
		return []int{0}, b, nil
	case n < 0 || n > maxMessageIndexes:
		return nil, nil, malformed("message-index count %d is outside 1..%d", n, maxMessageIndexes)
	}
	path = make([]int, n)
	for i := range path {
		v, k := binary.Varint(b)
		if err := varintErr(k, "message index"); err != nil {
			return nil, nil, err
		}
		if v < 0 || v > math.MaxInt32 {
			return nil, nil, malformed("message index %d is outside 0..%d", v, math.MaxInt32)
		}
		path[i], b = int(v), b[k:]
	}
	return path, b, nil
}

func varintErr(k int, what string) error {
	switch {
	case k == 0:
		return newError(ReasonTruncated, "", fmt.Errorf("parse %s: %w", what, errEOF))
	case k < 0:
		return malformed("parse %s: varint overflows 64 bits", what)
	}
	return nil
}

// newProtoWriter derives the Avro schema and the transcoder of message md.
func newProtoWriter(id, key int, md protoreflect.MessageDescriptor) *WriterSchema {
	ws := &WriterSchema{ID: id, Format: FormatProtobuf}
	if key != id {
		ws.key = key
	}
	g := &protoGen{defined: map[protoreflect.FullName]bool{}}
	top, avroJSON, err := g.message(md, "")
	if err != nil {
		ws.DeltaErr = err
		return ws
	}
	text, err := json.Marshal(avroJSON)
	if err != nil {
		ws.DeltaErr = newError(ReasonUnsupportedType, "", fmt.Errorf("derive avro schema of %s: %w", md.FullName(), err))
		return ws
	}
	parsed, err := ParseWriterSchema(id, string(text))
	if err != nil {
		ws.DeltaErr = newError(ReasonUnsupportedType, "", fmt.Errorf("derive avro schema of %s: %w", md.FullName(), err))
		return ws
	}
	ws.Avro, ws.Delta, ws.DeltaErr = parsed.Avro, parsed.Delta, parsed.DeltaErr
	ws.body = &protoBody{md: md, top: top}
	return ws
}

// pbKind is how one Protobuf value is written in Avro.
type pbKind uint8

const (
	pbBool pbKind = iota + 1
	pbInt32
	pbInt64
	pbUint32 // → long
	pbUint64 // → decimal(20,0)
	pbFloat
	pbDouble
	pbString
	pbBytes
	pbEnum      // → its name, or its number as text
	pbMessage   // → record
	pbTimestamp // google.protobuf.Timestamp → timestamp-micros
	pbDuration  // google.protobuf.Duration → long microseconds
	pbWrapper   // google.protobuf.*Value wrappers → the wrapped value
	pbJSON      // google.protobuf.Struct, Value, ListValue → JSON text
	pbAny       // google.protobuf.Any → {"@type": …, "value": base64} text
	pbEmpty     // google.protobuf.Empty → no column
)

type pbType struct {
	kind    pbKind
	enum    protoreflect.EnumDescriptor
	msg     *pbMsg  // pbMessage
	wrapped *pbType // pbWrapper: the type of its field "value"

	// The wire decoder's (protowire.go):
	pk    protoreflect.Kind // the Protobuf kind of one value
	utf8  bool              // a string kind whose values must be valid UTF-8
	names []string          // pbEnum: value names by number, for numbers 0..len-1 ("" for none)
	wkt   protoreflect.FullName
}

type pbField struct {
	fd       protoreflect.FieldDescriptor
	path     string
	typ      pbType // the value's, an element's or a map value's
	list     bool
	isMap    bool
	key      pbKind // a map's key kind
	nullable bool   // [null, T]: the field tracks presence

	// The wire decoder's (protowire.go):
	num    protowire.Number
	kk     protoreflect.Kind // a map key's Protobuf kind
	kutf8  bool              // a string map key must be valid UTF-8
	oneof  int               // 1 + the index of the field's oneof in pbMsg.oneofs; 0 for none
	zero   []byte            // the Avro encoding of an absent non-nullable singular value
	wt     protowire.Type    // the wire type of one value (a map's entries: bytes)
	pack   bool              // repeated values may come packed (bytes)
	occurs bool              // every occurrence is kept: a message, repeated or map field
	utf8v  bool              // the value's strings must be valid UTF-8 (a map's: checked per entry)
}

type pbMsg struct {
	fields []pbField

	// The wire decoder's (protowire.go):
	md       protoreflect.MessageDescriptor
	byNum    []int32 // field number → 1 + index in fields, for numbers below len(byNum)
	byNumMap map[protowire.Number]int
	oneofs   [][]int // the indexes in fields of each real oneof's members
	required []int   // the indexes in fields of the required fields (proto2)
	inOrder  bool    // fields are in ascending number order and none is required: messageInOrder may try first
}

// protoGen derives Avro schemas from message descriptors.
type protoGen struct {
	defined map[protoreflect.FullName]bool
	stack   []protoreflect.FullName
}

var uint64Decimal = map[string]any{"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0}

// avroRecord and avroField keep Avro's field order when marshalled.
type avroRecord struct {
	Type        string      `json:"type"`
	Name        string      `json:"name"`
	Fields      []avroField `json:"fields"`
	ConnectName string      `json:"connect.name,omitempty"` // Kafka Connect JSON's struct names (connect.go)
}

type avroField struct {
	Name string `json:"name"`
	Type any    `json:"type"`
}

func (g *protoGen) message(md protoreflect.MessageDescriptor, path string) (*pbMsg, any, error) {
	name := md.FullName()
	if slices.Contains(g.stack, name) {
		chain := make([]string, 0, len(g.stack)+1)
		for _, n := range g.stack {
			chain = append(chain, string(n))
		}
		chain = append(chain, string(name))
		return nil, nil, newError(ReasonUnsupportedType, path, fmt.Errorf("convert schema: recursive message %s", strings.Join(chain, " -> ")))
	}
	g.stack = append(g.stack, name)
	defer func() { g.stack = g.stack[:len(g.stack)-1] }()
	m := &pbMsg{md: md}
	rec := avroRecord{Type: "record", Name: avroName(name), Fields: []avroField{}}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		fp := joinPath(path, string(fd.Name()))
		f := pbField{fd: fd, path: fp}
		var at any
		var err error
		switch {
		case fd.IsMap():
			f.isMap = true
			if f.key, err = keyKind(fd.MapKey()); err != nil {
				return nil, nil, withField(err, fp)
			}
			var vt any
			if f.typ, vt, err = g.value(fd.MapValue(), fp+"{}"); err != nil {
				return nil, nil, err
			}
			at = map[string]any{"type": "map", "values": vt}
		case fd.IsList():
			f.list = true
			var et any
			if f.typ, et, err = g.value(fd, fp+"[]"); err != nil {
				return nil, nil, err
			}
			at = map[string]any{"type": "array", "items": et}
		default:
			if f.typ, at, err = g.value(fd, fp); err != nil {
				return nil, nil, err
			}
			if f.typ.kind != pbEmpty && fd.HasPresence() {
				f.nullable = true
				at = []any{"null", at}
			}
		}
		f.num = fd.Number()
		if fd.IsMap() {
			f.kk, f.kutf8 = fd.MapKey().Kind(), enforceUTF8(fd.MapKey())
		}
		m.fields = append(m.fields, f)
		rec.Fields = append(rec.Fields, avroField{Name: string(fd.Name()), Type: at})
	}
	if err := m.index(); err != nil {
		return nil, nil, withField(err, path)
	}
	if g.defined[name] {
		return m, avroName(name), nil
	}
	g.defined[name] = true
	return m, rec, nil
}

// avroName is a Protobuf full name as an Avro full name (a file without a package gives a
// name without a namespace).
func avroName(n protoreflect.FullName) string { return string(n) }

func keyKind(fd protoreflect.FieldDescriptor) (pbKind, error) {
	t, _, err := (&protoGen{}).scalar(fd)
	return t.kind, err
}

// value maps the type of one value of fd (an element for a repeated field).
func (g *protoGen) value(fd protoreflect.FieldDescriptor, path string) (pbType, any, error) {
	if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
		return g.scalar(fd)
	}
	t, at, err := g.messageValue(fd, path)
	t.pk, t.wkt = fd.Kind(), fd.Message().FullName()
	return t, at, err
}

func (g *protoGen) messageValue(fd protoreflect.FieldDescriptor, path string) (pbType, any, error) {
	md := fd.Message()
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		return pbType{kind: pbTimestamp}, map[string]any{"type": "long", "logicalType": "timestamp-micros"}, nil
	case "google.protobuf.Duration":
		return pbType{kind: pbDuration}, "long", nil
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		return pbType{kind: pbJSON}, "string", nil
	case "google.protobuf.Any":
		return pbType{kind: pbAny}, "string", nil
	case "google.protobuf.Empty":
		return pbType{kind: pbEmpty}, "null", nil
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value", "google.protobuf.UInt64Value",
		"google.protobuf.Int32Value", "google.protobuf.UInt32Value", "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		inner, at, err := g.scalar(md.Fields().ByNumber(1))
		if err != nil {
			return pbType{}, nil, withField(err, path)
		}
		return pbType{kind: pbWrapper, wrapped: &inner}, at, nil
	}
	m, at, err := g.message(md, path)
	if err != nil {
		return pbType{}, nil, err
	}
	return pbType{kind: pbMessage, msg: m}, at, nil
}

func (g *protoGen) scalar(fd protoreflect.FieldDescriptor) (pbType, any, error) {
	t, at, err := g.scalarKind(fd)
	t.pk = fd.Kind()
	t.utf8 = fd.Kind() == protoreflect.StringKind && enforceUTF8(fd)
	if t.kind == pbEnum {
		t.names = enumNames(t.enum)
	}
	return t, at, err
}

func (g *protoGen) scalarKind(fd protoreflect.FieldDescriptor) (pbType, any, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return pbType{kind: pbBool}, "boolean", nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return pbType{kind: pbInt32}, "int", nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return pbType{kind: pbUint32}, "long", nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return pbType{kind: pbInt64}, "long", nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return pbType{kind: pbUint64}, uint64Decimal, nil
	case protoreflect.FloatKind:
		return pbType{kind: pbFloat}, "float", nil
	case protoreflect.DoubleKind:
		return pbType{kind: pbDouble}, "double", nil
	case protoreflect.StringKind:
		return pbType{kind: pbString}, "string", nil
	case protoreflect.BytesKind:
		return pbType{kind: pbBytes}, "bytes", nil
	case protoreflect.EnumKind:
		return pbType{kind: pbEnum, enum: fd.Enum()}, "string", nil
	}
	return pbType{}, nil, newError(ReasonUnsupportedType, "", fmt.Errorf("convert schema: unsupported protobuf kind %s", fd.Kind()))
}

// Timestamp and Duration ranges (google/protobuf/timestamp.proto, duration.proto); a
// Timestamp's, 0001-01-01T00:00:00Z..9999-12-31T23:59:59Z, is Delta's too.
const (
	minTimestampSeconds = deltalog.TimestampMinMicros / 1_000_000
	maxTimestampSeconds = deltalog.TimestampMaxMicros / 1_000_000
	maxDurationSeconds  = 315576000000
)
