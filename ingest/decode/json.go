package decode

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// JSON records (docs/formats.md, "Plain JSON" and "Kafka Connect JSON"). A document's
// columns are a jNode tree; its Avro schema is derived from the tree, and each body is
// transcoded into that schema's binary for the Avro decoder, like Protobuf's.

const (
	// maxJSONDepth bounds the nesting of arrays and objects in one document.
	maxJSONDepth = 64
	// maxJSONWriters bounds the writer schemas a JSON source keeps (a cache, rebuilt).
	maxJSONWriters = 256
)

// jKind is how one JSON value becomes an Avro value.
type jKind uint8

const (
	jBool jKind = iota + 1
	jInt
	jLong
	jFloat
	jDouble
	jString
	jBinary     // a base64 string
	jDate       // "YYYY-MM-DD"
	jTimestamp  // RFC 3339 with an offset → microseconds UTC
	jTsNtz      // RFC 3339 without an offset → microseconds
	jDecimal    // a JSON number, exact
	jDecimalB64 // Connect Decimal: base64 of the unscaled big-endian two's complement, or a number
	jStruct
	jArray
	jMap
)

type jNode struct {
	kind        jKind
	nullable    bool
	open        bool // jStruct: keys that are not fields are ignored (JSON Schema's open objects)
	prec, scale int
	// connect and params are a Kafka Connect schema's name and parameters, carried into
	// the Avro schema as connect.name and connect.parameters (connect.go decides them).
	connect string
	params  map[string]string
	fields  []jField // jStruct
	byName  map[string]int
	byKey   map[string]int // deltalog.NameKey → index
	plain   []bool         // per field: its name is a JSON string's text as it is (no quote, backslash nor control byte; UTF-8)
	// succ guesses the one-pass transcoder's next key: succ[0] the field of a document's
	// first key, succ[i+1] the field whose key came after field i's, as in the last
	// document read (concurrent decoders may overwrite each other's guesses: a guess is
	// checked against the key's text, never trusted).
	succ         []atomic.Int32
	elem, values *jNode
	// js are the checks the one-pass transcoder adds for a JSON Schema whose validator it
	// stands in for (jsonschema.go, jsGen): it gives up on what they refuse, and the
	// validator then reads the document.
	js   jsChecks
	enum map[string]bool // a JSON Schema string's enum, its string members
}

type jField struct {
	name string
	node *jNode
}

func (n *jNode) index() {
	n.byName = make(map[string]int, len(n.fields))
	n.byKey = make(map[string]int, len(n.fields))
	n.plain = make([]bool, len(n.fields))
	n.succ = make([]atomic.Int32, len(n.fields)+1)
	for i := range n.succ {
		n.succ[i].Store(int32(i))
	}
	for i, f := range n.fields {
		n.byName[f.name] = i
		n.byKey[deltalog.NameKey(f.name)] = i
		n.plain[i] = utf8.ValidString(f.name) && !strings.ContainsFunc(f.name, func(r rune) bool { return r == '"' || r == '\\' || r < 0x20 })
	}
}

// field finds a key's field: by name, else case-insensitively (deltalog.NameKey).
func (n *jNode) field(k string) (int, bool) {
	if i, ok := n.byName[k]; ok {
		return i, true
	}
	i, ok := n.byKey[deltalog.NameKey(k)]
	return i, ok
}

// fromDelta is the node of a Delta type (plain JSON's conventions); ok is false for a
// type JSON records cannot fill (byte, short, variant, a map whose keys are not strings).
func fromDelta(t deltalog.DataType, nullable bool) (*jNode, bool) {
	n := &jNode{nullable: nullable}
	switch t := t.(type) {
	case deltalog.DecimalType:
		n.kind, n.prec, n.scale = jDecimal, t.Precision, t.Scale
	case *deltalog.StructType:
		n.kind = jStruct
		for _, f := range t.Fields {
			c, ok := fromDelta(f.Type, f.Nullable)
			if !ok {
				return nil, false
			}
			n.fields = append(n.fields, jField{f.Name, c})
		}
		if len(n.fields) == 0 {
			return nil, false
		}
		n.index()
	case *deltalog.ArrayType:
		e, ok := fromDelta(t.ElementType, t.ContainsNull)
		if !ok {
			return nil, false
		}
		n.kind, n.elem = jArray, e
	case *deltalog.MapType:
		v, ok := fromDelta(t.ValueType, t.ValueContainsNull)
		if !ok || t.KeyType != deltalog.String {
			return nil, false
		}
		n.kind, n.values = jMap, v
	case deltalog.PrimitiveType:
		k, ok := map[deltalog.PrimitiveType]jKind{deltalog.Boolean: jBool, deltalog.Integer: jInt, deltalog.Long: jLong, deltalog.Float: jFloat,
			deltalog.Double: jDouble, deltalog.String: jString, deltalog.Binary: jBinary, deltalog.Date: jDate, deltalog.Timestamp: jTimestamp,
			deltalog.TimestampNtz: jTsNtz}[t]
		if !ok {
			return nil, false
		}
		n.kind = k
	default:
		return nil, false
	}
	return n, true
}

// avroSchema is the node's Avro schema (a value json.Marshal writes).
func (n *jNode) avroSchema(names *int) any {
	var t any
	switch n.kind {
	case jBool:
		t = "boolean"
	case jInt:
		t = "int"
	case jLong:
		t = "long"
	case jFloat:
		t = "float"
	case jDouble:
		t = "double"
	case jString:
		t = "string"
	case jBinary:
		t = "bytes"
	case jDate:
		t = map[string]any{"type": "int", "logicalType": "date"}
	case jTimestamp:
		t = map[string]any{"type": "long", "logicalType": "timestamp-micros"}
	case jTsNtz:
		t = map[string]any{"type": "long", "logicalType": "local-timestamp-micros"}
	case jDecimal:
		t = map[string]any{"type": "bytes", "logicalType": "decimal", "precision": n.prec, "scale": n.scale}
	case jDecimalB64:
		t = map[string]any{"type": "bytes", "logicalType": "decimal", "precision": n.prec, "scale": n.scale}
	case jStruct:
		*names++
		rec := avroRecord{Type: "record", Name: "r" + strconv.Itoa(*names), Fields: make([]avroField, len(n.fields)), ConnectName: n.connect}
		for i, f := range n.fields {
			rec.Fields[i] = avroField{Name: f.name, Type: f.node.avroSchema(names)}
		}
		t = rec
	case jArray:
		t = map[string]any{"type": "array", "items": n.elem.avroSchema(names)}
	case jMap:
		t = map[string]any{"type": "map", "values": n.values.avroSchema(names)}
	}
	if n.connect != "" && n.kind != jStruct {
		m, ok := t.(map[string]any)
		if !ok {
			m = map[string]any{"type": t}
		}
		m[connectNameProp] = n.connect
		// Kafka Connect's own logical types also get their standard Avro logicalType,
		// as AvroData writes them (and so dlq inspect shows dates and times).
		if cl, ok := connectLogicals[n.connect]; ok && strings.HasPrefix(n.connect, connectNamespaces[0]) && m["logicalType"] == nil {
			m["logicalType"] = cl.logical[0]
		}
		if len(n.params) > 0 {
			m[connectParamsProp] = n.params
		}
		t = m
	}
	if n.nullable {
		return []any{"null", t}
	}
	return t
}

// jsonWriter builds the writer schema of a top-level struct node.
func jsonWriter(id, key int, format string, top *jNode) *WriterSchema {
	ws := &WriterSchema{ID: id, Format: format, key: key}
	names := 0
	top.nullable = false
	text, err := json.Marshal(top.avroSchema(&names))
	if err == nil {
		var parsed *WriterSchema
		if parsed, err = ParseWriterSchema(id, string(text)); err == nil {
			ws.Avro, ws.Delta, ws.DeltaErr = parsed.Avro, parsed.Delta, parsed.DeltaErr
			jb := &jsonBody{top: top}
			if format == FormatJSON {
				jb.rd = newJSONReader(top)
			}
			ws.body = jb
			return ws
		}
	}
	ws.DeltaErr = newError(ReasonUnsupportedType, "", fmt.Errorf("derive avro schema: %w", err))
	return ws
}

// DocumentSource gives the writer schema of one unframed JSON record and the body to
// decode (for Kafka Connect JSON, the payload inside the envelope). table is the table's
// current schema (nil before it exists). Errors are *Error: the record is a dead letter.
type DocumentSource interface {
	Writer(table *deltalog.StructType, value []byte) (*WriterSchema, []byte, error)
}

// JSONSource is the DocumentSource of plain JSON (format json): a record's writer schema
// is the base schema (the schema file's, else the table's columns less the excluded Kafka
// columns and the generated columns the record does not send) plus the top-level keys the
// base lacks, each with the type its value infers (docs/formats.md, "Plain JSON"). It is
// safe for concurrent use.
type JSONSource struct {
	file    *deltalog.StructType // a schema file's columns; nil: the table's
	exclude map[string]bool      // NameKey of the Kafka columns

	mu      sync.Mutex
	table   *deltalog.StructType // the table the cache was built for
	base    *jNode
	cache   map[string]*WriterSchema
	nextKey int
	memo    jMemo
}

// NewJSONSource returns the source of plain JSON records; file is the columns of the
// pipeline's schema file (nil: the table's), exclude the names of its Kafka columns.
func NewJSONSource(file *deltalog.StructType, exclude []string) *JSONSource {
	s := &JSONSource{file: file, exclude: map[string]bool{}, nextKey: 1}
	for _, e := range exclude {
		s.exclude[deltalog.NameKey(e)] = true
	}
	return s
}

// Writer implements DocumentSource: value must be one JSON object (no framing).
func (s *JSONSource) Writer(table *deltalog.StructType, value []byte) (*WriterSchema, []byte, error) {
	if ws := s.baseWriter(table); ws != nil && (ws.directAhead(&s.memo, value) || ws.transcodeAhead(&s.memo, value, true)) {
		return ws, value, nil
	}
	sc := &jScanner{b: value}
	keys, err := sc.topKeys()
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh(table)
	var extra []jField
	var sig strings.Builder
	newKeys := map[string]bool{}
	// With the table as the base, a record's key is as its value infers, like a new
	// key's, where the value's JSON type is not its column's: a type change the guard
	// decides (docs/schema-policies.md, "Decision table"), not an unreadable value. And a
	// record without a key of a NOT NULL column is a writer lacking that column. A schema
	// file is the records' declared writer schema: there, both are the record's fault.
	retyped := map[int]*jNode{}
	present := map[int]bool{}
	for _, k := range keys {
		if i, ok := s.base.field(k.name); ok {
			present[i] = true
			if s.file != nil {
				continue
			}
			f := s.base.fields[i]
			if n, err := retype(f.node, value[k.start:k.end], f.name); err != nil {
				return nil, nil, err
			} else if n != nil {
				retyped[i] = n
				sig.WriteString("\x01" + strconv.Quote(f.name) + n.signature() + "\x00")
			}
			continue
		}
		if err := sameColumn(newKeys, k.name, k.name); err != nil {
			return nil, nil, err
		}
		if s.exclude[deltalog.NameKey(k.name)] {
			return nil, nil, newError(ReasonKafkaColumnCollision, k.name, fmt.Errorf("the record has a key named like the Kafka column %s", k.name))
		}
		if gen := generatedColumn(table, k.name); gen != nil {
			n, ok := fromDelta(gen.Type, gen.Nullable)
			if ok {
				extra = append(extra, jField{gen.Name, n})
				sig.WriteString(gen.Name + "\x00=\x00")
				continue
			}
		}
		n, err := inferJSON(value[k.start:k.end], k.name, 0)
		if err != nil {
			return nil, nil, err
		}
		if n == nil {
			continue // null, [] or {}: no type to add a column with; the value is dropped
		}
		extra = append(extra, jField{k.name, n})
		sig.WriteString(k.name + "\x00" + n.signature() + "\x00")
	}
	var fields []jField
	for i, f := range s.base.fields {
		switch {
		case retyped[i] != nil:
			f.node = retyped[i]
		case s.file == nil && !present[i] && !f.node.nullable:
			sig.WriteString("\x02" + strconv.Quote(f.name) + "\x00")
			continue
		}
		fields = append(fields, f)
	}
	key := sig.String()
	if ws, ok := s.cache[key]; ok {
		return ws, value, nil
	}
	top := &jNode{kind: jStruct, fields: append(fields, extra...)}
	top.index()
	ws := jsonWriter(0, s.nextKey<<32, FormatJSON, top)
	ws.keepTranscodings(&s.memo)
	s.nextKey++
	s.cache[key] = ws
	return ws, value, nil
}

// refresh rebuilds the cache for a new table (or a full cache); s.mu is held.
func (s *JSONSource) refresh(table *deltalog.StructType) {
	if s.base == nil || table != s.table || len(s.cache) > maxJSONWriters {
		s.table, s.cache = table, map[string]*WriterSchema{}
		s.base = s.baseNode(table)
	}
}

// baseWriter is the cached writer schema of a record that has only the base's keys (nil
// until such a record came).
func (s *JSONSource) baseWriter(table *deltalog.StructType) *WriterSchema {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh(table)
	return s.cache[""]
}

// baseNode is the base schema's node for table: the file's, else the table's columns a
// JSON record can fill, less the Kafka and generated columns.
func (s *JSONSource) baseNode(table *deltalog.StructType) *jNode {
	src := s.file
	if src == nil {
		src = table
	}
	top := &jNode{kind: jStruct}
	if src != nil {
		for _, f := range src.Fields {
			if s.exclude[deltalog.NameKey(f.Name)] || (s.file == nil && f.Metadata[deltalog.MetaGenerationExpression] != nil) {
				continue
			}
			if n, ok := fromDelta(f.Type, f.Nullable); ok {
				top.fields = append(top.fields, jField{f.Name, n})
			}
		}
	}
	top.index()
	return top
}

func generatedColumn(table *deltalog.StructType, name string) *deltalog.StructField {
	if table == nil {
		return nil
	}
	k := deltalog.NameKey(name)
	for _, f := range table.Fields {
		if deltalog.NameKey(f.Name) == k && f.Metadata[deltalog.MetaGenerationExpression] != nil {
			return f
		}
	}
	return nil
}

// signature identifies an inferred type.
func (n *jNode) signature() string {
	switch n.kind {
	case jStruct:
		var b strings.Builder
		b.WriteString("{")
		for _, f := range n.fields {
			b.WriteString(strconv.Quote(f.name) + ":" + f.node.signature() + ",")
		}
		return b.String() + "}"
	case jArray:
		return "[" + n.elem.signature() + "]"
	}
	return strconv.Itoa(int(n.kind))
}

// inferJSON is the type of a new column from its first value (docs/formats.md, "Plain
// JSON"): string → string, an integer within 64 bits → long, another number → double,
// true/false → boolean, an object → a struct of its keys' types, an array → an array of
// its items' type; nil for null, [] and {} (and keys whose values are all of those).
func inferJSON(v []byte, path string, depth int) (*jNode, error) {
	if depth > maxJSONDepth {
		return nil, newError(ReasonDecodeError, path, fmt.Errorf("JSON nested deeper than %d", maxJSONDepth))
	}
	sc := &jScanner{b: v}
	sc.ws()
	switch c := sc.peek(); {
	case c == 'n':
		return nil, nil
	case c == 't' || c == 'f':
		return &jNode{kind: jBool, nullable: true}, nil
	case c == '"':
		return &jNode{kind: jString, nullable: true}, nil
	case c == '{':
		n := &jNode{kind: jStruct, nullable: true}
		keys, err := sc.topKeys()
		if err != nil {
			return nil, withField(err, path)
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if err := sameColumn(seen, k.name, path+"."+k.name); err != nil {
				return nil, err
			}
			c, err := inferJSON(v[k.start:k.end], path+"."+k.name, depth+1)
			if err != nil {
				return nil, err
			}
			if c != nil {
				n.fields = append(n.fields, jField{k.name, c})
			}
		}
		if len(n.fields) == 0 {
			return nil, nil
		}
		n.index()
		return n, nil
	case c == '[':
		items, err := sc.arrayItems()
		if err != nil {
			return nil, withField(err, path)
		}
		var elem *jNode
		for _, it := range items {
			e, err := inferJSON(v[it[0]:it[1]], path+"[]", depth+1)
			if err != nil {
				return nil, err
			}
			if e == nil {
				continue
			}
			if elem == nil {
				elem = e
			} else if elem.signature() != e.signature() {
				return nil, newError(ReasonDecodeError, path, errors.New("a new array field's items have different JSON types: no column type fits them"))
			}
		}
		if elem == nil {
			return nil, nil
		}
		return &jNode{kind: jArray, nullable: true, elem: elem}, nil
	default:
		num := strings.TrimSpace(string(v))
		if _, err := strconv.ParseInt(num, 10, 64); err == nil {
			return &jNode{kind: jLong, nullable: true}, nil
		}
		return &jNode{kind: jDouble, nullable: true}, nil
	}
}

// retype is the node of an existing top-level column's key for a value whose JSON type
// the column does not take (a string for a number column, a number for a string column,
// an integer beyond 32 bits for an integer column, a fraction for a long column): the
// value's inferred type, keeping the column's nullability; nil when the value fits, is
// null, or infers nothing ([] or {}): its conversion then decides.
func retype(col *jNode, v []byte, path string) (*jNode, error) {
	if jsonTypeFits(col, v) {
		return nil, nil
	}
	n, err := inferJSON(v, path, 0)
	if n != nil {
		n.nullable = col.nullable
	}
	return n, err
}

// jsonTypeFits reports whether a column of node n takes JSON value v's type: null always
// (its nullability is the decoder's), a number for a number column (an integer literal
// within 32 or 64 bits for an integer or long), a string for a string, binary, date or
// timestamp, an object for a struct or map, an array for an array, true or false for a
// boolean. Whether the value converts exactly is the decoder's (a decode_error).
func jsonTypeFits(n *jNode, v []byte) bool {
	sc := &jScanner{b: v}
	sc.ws()
	c := sc.peek()
	switch {
	case c == 'n':
		return true
	case c == 't' || c == 'f':
		return n.kind == jBool
	case c == '"':
		return n.kind == jString || n.kind == jBinary || n.kind == jDate || n.kind == jTimestamp || n.kind == jTsNtz || n.kind == jDecimalB64
	case c == '{':
		return n.kind == jStruct || n.kind == jMap
	case c == '[':
		return n.kind == jArray
	}
	switch n.kind {
	case jInt:
		_, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 32)
		return err == nil
	case jLong:
		_, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
		return err == nil
	case jFloat, jDouble, jDecimal, jDecimalB64:
		return true
	}
	return false
}

// sameColumn records name in seen (by deltalog.NameKey) and returns a decode_error at
// path when another key of the same object already named that column: Delta matches
// columns case-insensitively, so {"ID": 1, "id": 2} cannot be two new columns, as it
// cannot fill one existing column twice.
func sameColumn(seen map[string]bool, name, path string) error {
	k := deltalog.NameKey(name)
	if seen[k] {
		return newError(ReasonDecodeError, path, errors.New("two keys name the same column (case-insensitively)"))
	}
	seen[k] = true
	return nil
}

// ConnectSource is the DocumentSource of Kafka Connect JSON with embedded schemas
// (format connect_json): {"schema": …, "payload": …} as JsonConverter writes it with
// schemas.enable. Writer schemas are cached by the schema's text. It is safe for
// concurrent use.
type ConnectSource struct {
	mu      sync.Mutex
	cache   map[string]*WriterSchema
	nextKey int
	memo    jMemo
}

// NewConnectSource returns the source of Kafka Connect JSON records.
func NewConnectSource() *ConnectSource {
	return &ConnectSource{cache: map[string]*WriterSchema{}, nextKey: 1}
}

// Writer implements DocumentSource; table is not used: the record names its schema.
func (s *ConnectSource) Writer(_ *deltalog.StructType, value []byte) (*WriterSchema, []byte, error) {
	if schema, payload, ok := fastEnvelope(value); ok {
		s.mu.Lock()
		ws := s.cache[string(schema)]
		s.mu.Unlock()
		if ws != nil && ws.transcodeAhead(&s.memo, payload, false) {
			return ws, payload, nil
		}
	}
	sc := &jScanner{b: value}
	keys, err := sc.topKeys()
	if err != nil {
		return nil, nil, err
	}
	var schema, payload []byte
	for _, k := range keys {
		switch k.name {
		case "schema":
			schema = value[k.start:k.end]
		case "payload":
			payload = value[k.start:k.end]
		}
	}
	if schema == nil || payload == nil {
		return nil, nil, malformed(`a Kafka Connect JSON record is {"schema": …, "payload": …}; this one lacks %s`, map[bool]string{true: "schema", false: "payload"}[schema == nil])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ws, ok := s.cache[string(schema)]; ok {
		return ws, payload, nil
	}
	if len(s.cache) >= maxJSONWriters {
		clear(s.cache)
	}
	ws := connectWriter(s.nextKey<<32, schema)
	ws.keepTranscodings(&s.memo)
	s.nextKey++
	s.cache[string(schema)] = ws
	return ws, payload, nil
}

// ConnectNull reports whether body, the payload Writer returned for a Kafka Connect JSON
// record (format connect_json), is JSON null: {"schema": …, "payload": null} is
// JsonConverter's form of a null value, so under an optional schema the record is a
// tombstone. Under a required schema JsonConverter refuses it, and so does ConnectNull:
// true with an *Error (decode_error). Other formats: false.
func (ws *WriterSchema) ConnectNull(body []byte) (bool, error) {
	if ws.Format != FormatConnectJSON || string(bytes.TrimSpace(body)) != "null" {
		return false, nil
	}
	if !ws.optional {
		return true, newError(ReasonDecodeError, "", errors.New(`a null payload under a Kafka Connect schema that is not optional (JsonConverter refuses it; a tombstone's schema has "optional": true)`))
	}
	return true, nil
}

// connectWriter is the writer schema of the Kafka Connect schema text schema, under
// key; a schema that does not parse or map to a struct gives one whose DeltaErr says why.
func connectWriter(key int, schema []byte) *WriterSchema {
	var cs connectSchema
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&cs); err != nil {
		return &WriterSchema{Format: FormatConnectJSON, key: key, DeltaErr: newError(ReasonSchemaParseError, "", fmt.Errorf("parse the Kafka Connect schema: %w", err))}
	}
	top, err := cs.node("", 0)
	if err == nil && top.kind != jStruct {
		err = newError(ReasonUnsupportedType, "", errors.New("convert schema: the Kafka Connect schema's top level is not a struct"))
	}
	if err != nil {
		return &WriterSchema{Format: FormatConnectJSON, key: key, DeltaErr: err}
	}
	ws := jsonWriter(0, key, FormatConnectJSON, top)
	ws.optional = cs.Optional
	return ws
}

// connectSchema is a Kafka Connect schema in JsonConverter's JSON form.
type connectSchema struct {
	Type       string            `json:"type"`
	Optional   bool              `json:"optional"`
	Name       string            `json:"name"`
	Field      string            `json:"field"`
	Fields     []connectSchema   `json:"fields"`
	Items      *connectSchema    `json:"items"`
	Keys       *connectSchema    `json:"keys"`
	Values     *connectSchema    `json:"values"`
	Parameters map[string]string `json:"parameters"`
}

// node maps a Connect schema (docs/formats.md, "Kafka Connect JSON").
func (c *connectSchema) node(path string, depth int) (*jNode, error) {
	if depth > maxJSONDepth {
		return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("convert schema: nested deeper than %d", maxJSONDepth))
	}
	// The name and parameters travel into the Avro schema, where connect.go maps them as
	// a Connect Avro converter's connect.name and connect.parameters.
	n := &jNode{nullable: c.Optional, connect: c.Name, params: c.Parameters}
	if c.Name == connectDecimal && c.Type == "bytes" {
		prec, scale, err := connectDecimalParams(c.Parameters)
		if err != nil {
			return nil, newError(ReasonUnsupportedType, path, err)
		}
		n.kind, n.prec, n.scale = jDecimalB64, prec, scale
		return n, nil
	}
	switch c.Type {
	case "boolean":
		n.kind = jBool
	case "int8", "int16", "int32":
		n.kind = jInt
	case "int64":
		n.kind = jLong
	case "float", "float32":
		n.kind = jFloat
	case "double", "float64":
		n.kind = jDouble
	case "string":
		n.kind = jString
	case "bytes":
		n.kind = jBinary
	case "array":
		if c.Items == nil {
			return nil, newError(ReasonUnsupportedType, path, errors.New("convert schema: array without items"))
		}
		e, err := c.Items.node(path+"[]", depth+1)
		if err != nil {
			return nil, err
		}
		n.kind, n.elem = jArray, e
	case "map":
		if c.Keys == nil || c.Values == nil || c.Keys.Type != "string" {
			return nil, newError(ReasonUnsupportedType, path, errors.New("convert schema: a map needs string keys and values"))
		}
		v, err := c.Values.node(path+"{}", depth+1)
		if err != nil {
			return nil, err
		}
		n.kind, n.values = jMap, v
	case "struct":
		n.kind = jStruct
		for i := range c.Fields {
			f := &c.Fields[i]
			fn, err := f.node(joinPath(path, f.Field), depth+1)
			if err != nil {
				return nil, err
			}
			n.fields = append(n.fields, jField{f.Field, fn})
		}
		if len(n.fields) == 0 && path != "" {
			return nil, newError(ReasonUnsupportedType, path, errors.New("convert schema: a struct without fields"))
		}
		n.index()
	default:
		return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("convert schema: unsupported Kafka Connect type %q", c.Type))
	}
	return n, nil
}

// jsonBody transcodes JSON documents of one writer schema.
type jsonBody struct {
	top  *jNode
	memo *jMemo // its source's transcodings made while choosing writer schemas (nil: none)
	// rd reads the documents of plain JSON of the common shape (jsondirect.go; nil: none);
	// direct is set once a decoder with a direct path was compiled for this writer
	// schema, from then on the writer-schema step keeps reads rather than transcodings.
	rd     *jsonReader
	direct atomic.Bool
}

func (j *jsonBody) toAvro(dst, body []byte) (out []byte, err error) {
	defer recoverPanic(&err)
	if out, ok := j.memo.take(j, dst, body); ok {
		return out, nil
	}
	if out, _, ok := fastJSON(dst, body, j.top, false, false); ok {
		return out, nil
	}
	return j.slowAvro(dst, body)
}

// slowAvro is the two-pass transcoder: the reference of the one-pass one (jsonfast.go),
// and the one that reports every failure.
func (j *jsonBody) slowAvro(dst, body []byte) (out []byte, err error) {
	e := &jEncoder{newAvroAppender(dst, len(body))}
	sc := &jScanner{b: body}
	sc.ws()
	if err := e.value(j.top, sc, "", 0); err != nil {
		return nil, err
	}
	sc.ws()
	if sc.i != len(sc.b) {
		return nil, newError(ReasonTrailingBytes, "", fmt.Errorf("decode JSON: %d bytes after the document", len(sc.b)-sc.i))
	}
	return e.b, nil
}

type jEncoder struct{ avroAppender }

func wrongType(path string, n *jNode, got byte) error {
	return newError(ReasonDecodeError, path, fmt.Errorf("JSON %s where the column wants %s", jsonKindName(got), n.want()))
}

func jsonKindName(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func (n *jNode) want() string {
	return map[jKind]string{jBool: "true or false", jInt: "an integer within 32 bits", jLong: "an integer within 64 bits", jFloat: "a number",
		jDouble: "a number", jString: "a string", jBinary: "a base64 string", jDate: `a date string "YYYY-MM-DD"`,
		jTimestamp: "an RFC 3339 timestamp string with an offset", jTsNtz: "an RFC 3339 timestamp string without an offset",
		jDecimal:    fmt.Sprintf("a number with at most %d digits after the point and %d before", n.scale, n.prec-n.scale),
		jDecimalB64: "a base64 string of the unscaled value, or a number", jStruct: "an object", jArray: "an array", jMap: "an object"}[n.kind]
}

// value encodes the JSON value at sc as n.
func (e *jEncoder) value(n *jNode, sc *jScanner, path string, depth int) error {
	if depth > maxJSONDepth {
		return newError(ReasonDecodeError, path, fmt.Errorf("JSON nested deeper than %d", maxJSONDepth))
	}
	if err := e.check(path); err != nil {
		return err
	}
	c := sc.peek()
	if c == 'n' {
		if err := sc.literal("null"); err != nil {
			return withField(err, path)
		}
		if !n.nullable {
			return newError(ReasonNotNullViolation, path, errors.New("null for a NOT NULL column"))
		}
		e.b = append(e.b, 0)
		return nil
	}
	if n.nullable {
		e.b = append(e.b, 2)
	}
	switch n.kind {
	case jBool:
		switch c {
		case 't':
			e.b = append(e.b, 1)
			return withField(sc.literal("true"), path)
		case 'f':
			e.b = append(e.b, 0)
			return withField(sc.literal("false"), path)
		}
		return wrongType(path, n, c)
	case jInt, jLong:
		num, err := sc.number()
		if err != nil {
			return withField(err, path)
		}
		if num == nil {
			return wrongType(path, n, c)
		}
		bitsz := 64
		if n.kind == jInt {
			bitsz = 32
		}
		v, perr := strconv.ParseInt(string(num), 10, bitsz)
		if perr != nil {
			return newError(ReasonDecodeError, path, fmt.Errorf("JSON number %s where the column wants %s", num, n.want()))
		}
		e.long(v)
	case jFloat, jDouble:
		num, err := sc.number()
		if err != nil {
			return withField(err, path)
		}
		if num == nil {
			return wrongType(path, n, c)
		}
		if n.kind == jFloat {
			f, perr := strconv.ParseFloat(string(num), 32)
			if perr != nil {
				return newError(ReasonDecodeError, path, fmt.Errorf("JSON number %s does not fit a float", num))
			}
			e.b = binary.LittleEndian.AppendUint32(e.b, math.Float32bits(float32(f)))
		} else {
			f, perr := strconv.ParseFloat(string(num), 64)
			if perr != nil {
				return newError(ReasonDecodeError, path, fmt.Errorf("JSON number %s does not fit a double", num))
			}
			e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(f))
		}
	case jDecimal, jDecimalB64:
		if n.kind == jDecimalB64 && c == '"' {
			s, err := sc.str()
			if err != nil {
				return withField(err, path)
			}
			raw, derr := base64.StdEncoding.DecodeString(s)
			if derr != nil || len(raw) == 0 {
				return newError(ReasonDecodeError, path, fmt.Errorf("connect Decimal %q is not base64 of an unscaled value", s))
			}
			u := new(big.Int).SetBytes(raw)
			if raw[0]&0x80 != 0 {
				u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(raw))))
			}
			if len(strings.TrimPrefix(u.String(), "-")) > n.prec {
				return newError(ReasonDecodeError, path, fmt.Errorf("connect Decimal %s has more than %d digits", u, n.prec))
			}
			e.str(raw)
			return nil
		}
		num, err := sc.number()
		if err != nil {
			return withField(err, path)
		}
		if num == nil {
			return wrongType(path, n, c)
		}
		u, derr := unscaled(string(num), n.prec, n.scale)
		if derr != nil {
			return newError(ReasonDecodeError, path, derr)
		}
		e.str(bigTwos(u))
	case jString, jBinary, jDate, jTimestamp, jTsNtz:
		if c != '"' {
			return wrongType(path, n, c)
		}
		s, err := sc.str()
		if err != nil {
			return withField(err, path)
		}
		switch n.kind {
		case jString:
			e.text(s)
		case jBinary:
			raw, derr := base64.StdEncoding.DecodeString(s)
			if derr != nil {
				return newError(ReasonDecodeError, path, fmt.Errorf("binary value is not base64: %v", derr))
			}
			e.str(raw)
		case jDate:
			d, perr := time.Parse(time.DateOnly, s)
			if perr != nil {
				return newError(ReasonDecodeError, path, fmt.Errorf("date %q is not YYYY-MM-DD", s))
			}
			if d.Year() < 1 {
				return newError(ReasonDecodeError, path, fmt.Errorf("date %q is outside 0001-01-01..9999-12-31", s))
			}
			e.long(d.Unix() / 86400)
		case jTimestamp, jTsNtz:
			layout := time.RFC3339Nano
			if n.kind == jTsNtz {
				layout = "2006-01-02T15:04:05.999999999"
			}
			ts, perr := time.Parse(layout, s)
			if perr != nil {
				return newError(ReasonDecodeError, path, fmt.Errorf("timestamp %q is not %s", s, n.want()))
			}
			if y := ts.UTC().Year(); y < 1 || y > 9999 { // in UTC: Delta's range (PROTOCOL.md, "Primitive Types")
				return newError(ReasonDecodeError, path, fmt.Errorf("timestamp %q is outside 0001-01-01..9999-12-31", s))
			}
			if ts.Nanosecond()%1000 != 0 {
				return newError(ReasonDecodeError, path, fmt.Errorf("timestamp %q has digits below the microsecond, which the column cannot hold", s))
			}
			e.long(ts.UnixMicro())
		}
	case jStruct:
		if c != '{' {
			return wrongType(path, n, c)
		}
		keys, err := sc.topKeys()
		if err != nil {
			if path == "" {
				return err
			}
			return underField(err, path)
		}
		spans := make([][2]int, len(n.fields))
		for _, k := range keys {
			i, ok := n.field(k.name)
			if !ok {
				if path == "" || n.open {
					continue // a top-level key the writer schema lacks (a null, [] or {} not inferred), or a key JSON Schema allows
				}
				return newError(ReasonDecodeError, joinPath(path, k.name), errors.New("the key is not a field of the column's struct (plain JSON adds top-level columns only)"))
			}
			if spans[i][1] != 0 {
				return newError(ReasonDecodeError, joinPath(path, k.name), errors.New("two keys name the same column (case-insensitively)"))
			}
			spans[i] = [2]int{k.start, k.end}
		}
		for i, f := range n.fields {
			fp := joinPath(path, f.name)
			if spans[i][1] == 0 {
				if !f.node.nullable {
					return newError(ReasonNotNullViolation, fp, errors.New("the key is missing for a NOT NULL column"))
				}
				e.b = append(e.b, 0)
				continue
			}
			sub := &jScanner{b: sc.b[:spans[i][1]], i: spans[i][0]}
			if err := e.value(f.node, sub, fp, depth+1); err != nil {
				return err
			}
		}
	case jArray:
		if c != '[' {
			return wrongType(path, n, c)
		}
		items, err := sc.arrayItems()
		if err != nil {
			return withField(err, path)
		}
		if len(items) > 0 {
			e.long(int64(len(items)))
			for _, it := range items {
				if err := e.value(n.elem, &jScanner{b: sc.b[:it[1]], i: it[0]}, path+"[]", depth+1); err != nil {
					return err
				}
			}
		}
		e.b = append(e.b, 0)
	case jMap:
		if c != '{' {
			return wrongType(path, n, c)
		}
		keys, err := sc.topKeys()
		if err != nil {
			return withField(err, path)
		}
		if len(keys) > 0 {
			e.long(int64(len(keys)))
			for _, k := range keys {
				e.text(k.name)
				if err := e.value(n.values, &jScanner{b: sc.b[:k.end], i: k.start}, path+"{}", depth+1); err != nil {
					return err
				}
			}
		}
		e.b = append(e.b, 0)
	}
	return nil
}

// underField puts err's field path under name (name, or name.path).
func underField(err error, name string) error {
	if e, ok := err.(*Error); ok {
		if e.Field == "" {
			e.Field = name
		} else {
			e.Field = name + "." + e.Field
		}
	}
	return err
}

// unscaled is the unscaled integer of a JSON number for decimal(prec, scale), exactly:
// digits beyond the scale or the precision are an error, never rounded.
func unscaled(num string, prec, scale int) (*big.Int, error) {
	r, ok := new(big.Rat).SetString(num)
	if !ok || len(num) > 400 {
		return nil, fmt.Errorf("JSON number %s is not a decimal", num)
	}
	r.Mul(r, new(big.Rat).SetInt(bigPow10(scale)))
	if !r.IsInt() {
		return nil, fmt.Errorf("JSON number %s has more than %d digits after the point", num, scale)
	}
	u := r.Num()
	if len(strings.TrimPrefix(u.String(), "-")) > prec {
		return nil, fmt.Errorf("JSON number %s has more than %d digits before the point", num, prec-scale)
	}
	return u, nil
}

// bigTwos is u's big-endian two's complement in the fewest bytes.
func bigTwos(u *big.Int) []byte {
	if u.Sign() >= 0 {
		b := u.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	n := (u.BitLen() + 8) / 8
	m := new(big.Int).Add(u, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	b := m.FillBytes(make([]byte, n))
	return b
}

// jScanner reads one JSON document (RFC 8259) from b: every value is checked as it is
// read or skipped, objects may not repeat a key, and nesting is bounded.
type jScanner struct {
	b []byte
	i int
}

type jKey struct {
	name       string
	start, end int // the value's span
}

func (s *jScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jScanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *jScanner) syntax(format string, args ...any) error {
	return newError(ReasonDecodeError, "", fmt.Errorf("invalid JSON at offset %d: "+format, append([]any{s.i}, args...)...))
}

func (s *jScanner) literal(l string) error {
	if !strings.HasPrefix(string(s.b[s.i:min(len(s.b), s.i+len(l))]), l) {
		return s.syntax("want %s", l)
	}
	s.i += len(l)
	return nil
}

// topKeys reads an object and returns its keys with their values' spans (checked).
// Errors: not an object, invalid JSON, a repeated key (the path names it).
func (s *jScanner) topKeys() ([]jKey, error) {
	if s.peek() != '{' {
		if s.i >= len(s.b) {
			return nil, s.syntax("the document is empty, want an object")
		}
		// The first byte names the kind of a valid value only: "not json" is no null.
		if !json.Valid(s.b[s.i:]) {
			return nil, s.syntax("not a JSON value, want an object")
		}
		return nil, newError(ReasonDecodeError, "", fmt.Errorf("JSON %s where a record wants an object", jsonKindName(s.b[s.i])))
	}
	s.i++
	var keys []jKey
	var seen map[string]bool
	if s.peek() == '}' {
		s.i++
		return nil, nil
	}
	for {
		if s.peek() != '"' {
			return nil, s.syntax("want a key")
		}
		k, err := s.str()
		if err != nil {
			return nil, err
		}
		if s.peek() != ':' {
			return nil, s.syntax("want ':'")
		}
		s.i++
		s.ws()
		start := s.i
		if err := s.skip(0); err != nil {
			return nil, underField(err, k)
		}
		if len(keys) < 16 {
			for _, o := range keys {
				if o.name == k {
					return nil, newError(ReasonDecodeError, k, errors.New("the key appears twice in one object"))
				}
			}
		} else {
			if seen == nil {
				seen = make(map[string]bool, 32)
				for _, o := range keys {
					seen[o.name] = true
				}
			}
			if seen[k] {
				return nil, newError(ReasonDecodeError, k, errors.New("the key appears twice in one object"))
			}
			seen[k] = true
		}
		keys = append(keys, jKey{k, start, s.i})
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return keys, nil
		default:
			return nil, s.syntax("want ',' or '}'")
		}
	}
}

// arrayItems reads an array and returns its items' spans (checked).
func (s *jScanner) arrayItems() ([][2]int, error) {
	s.peek()
	s.i++ // '['
	var items [][2]int
	if s.peek() == ']' {
		s.i++
		return nil, nil
	}
	for {
		s.ws()
		start := s.i
		if err := s.skip(0); err != nil {
			return nil, err
		}
		items = append(items, [2]int{start, s.i})
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return items, nil
		default:
			return nil, s.syntax("want ',' or ']'")
		}
	}
}

// skip checks and passes one value.
func (s *jScanner) skip(depth int) error {
	if depth > maxJSONDepth {
		return newError(ReasonDecodeError, "", fmt.Errorf("JSON nested deeper than %d", maxJSONDepth))
	}
	switch c := s.peek(); c {
	case '{':
		s.i++
		var keys []string
		if s.peek() == '}' {
			s.i++
			return nil
		}
		for {
			if s.peek() != '"' {
				return s.syntax("want a key")
			}
			k, err := s.str()
			if err != nil {
				return err
			}
			if slices.Contains(keys, k) {
				return newError(ReasonDecodeError, k, errors.New("the key appears twice in one object"))
			}
			if len(keys) > 1<<16 {
				return newError(ReasonDecodeError, "", errors.New("an object of more than 65536 keys"))
			}
			keys = append(keys, k)
			if s.peek() != ':' {
				return s.syntax("want ':'")
			}
			s.i++
			if err := s.skip(depth + 1); err != nil {
				return underField(err, k)
			}
			switch s.peek() {
			case ',':
				s.i++
			case '}':
				s.i++
				return nil
			default:
				return s.syntax("want ',' or '}'")
			}
		}
	case '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return nil
			default:
				return s.syntax("want ',' or ']'")
			}
		}
	case '"':
		_, err := s.str()
		return err
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	case 0:
		return s.syntax("unexpected end")
	default:
		n, err := s.number()
		if err == nil && n == nil {
			return s.syntax("unexpected %q", c)
		}
		return err
	}
}

// number reads a JSON number's text; nil (no error) when the value is not a number.
func (s *jScanner) number() ([]byte, error) {
	s.ws()
	start, i := s.i, s.i
	b := s.b
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) || b[i] < '0' || b[i] > '9' {
		if i == start {
			return nil, nil
		}
		return nil, s.syntax("invalid number")
	}
	if b[i] == '0' {
		i++
	} else {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, s.syntax("invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, s.syntax("invalid number")
		}
	}
	s.i = i
	return b[start:i], nil
}

// str reads a JSON string and returns its value (escapes decoded; UTF-8 checked).
func (s *jScanner) str() (string, error) {
	s.ws()
	s.i++ // '"'
	start := s.i
	esc := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			if !esc {
				if !utf8.Valid(raw) {
					return "", newError(ReasonDecodeError, "", errors.New("JSON string is not valid UTF-8"))
				}
				return string(raw), nil
			}
			var out string
			if err := json.Unmarshal(s.b[start-1:s.i], &out); err != nil {
				return "", s.syntax("invalid string escape")
			}
			// encoding/json turns a \u escape of a lone UTF-16 surrogate into U+FFFD: a
			// value other than the one sent, so it is refused like invalid UTF-8.
			if loneSurrogate(raw) {
				return "", newError(ReasonDecodeError, "", errors.New("JSON string escapes a lone UTF-16 surrogate, which is not a Unicode character"))
			}
			if !utf8.Valid(raw) {
				return "", newError(ReasonDecodeError, "", errors.New("JSON string is not valid UTF-8"))
			}
			return out, nil
		case c == '\\':
			esc = true
			s.i += 2
		case c < 0x20:
			return "", s.syntax("control character in a string")
		default:
			s.i++
		}
	}
	return "", s.syntax("unterminated string")
}

// loneSurrogate reports whether the escapes of a JSON string's text (between its quotes)
// hold a \u escape of a UTF-16 surrogate that is not a high surrogate (D800–DBFF)
// directly followed by an escaped low one (DC00–DFFF) (RFC 8259, section 7).
func loneSurrogate(raw []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // a one-letter escape such as \\ or \"
			continue
		}
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 11
		case utf16.IsSurrogate(r):
			return true
		default:
			i += 5
		}
	}
	return false
}
