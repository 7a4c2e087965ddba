package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// DataType is a Delta column type: a PrimitiveType, a DecimalType, or a *StructType,
// *ArrayType or *MapType (PROTOCOL.md, "Schema Serialization Format").
type DataType interface {
	// String returns the type in Delta's simple-string form, e.g. "long",
	// "decimal(10,2)", "array<string>", "struct<a:int>".
	String() string
	isDataType()
}

// PrimitiveType is a Delta primitive type name as it appears in schemaString.
type PrimitiveType string

// Delta primitive types (PROTOCOL.md, "Primitive Types"). Decimals are DecimalType.
const (
	String       PrimitiveType = "string"
	Long         PrimitiveType = "long"
	Integer      PrimitiveType = "integer"
	Short        PrimitiveType = "short"
	Byte         PrimitiveType = "byte"
	Float        PrimitiveType = "float"
	Double       PrimitiveType = "double"
	Boolean      PrimitiveType = "boolean"
	Binary       PrimitiveType = "binary"
	Date         PrimitiveType = "date"
	Timestamp    PrimitiveType = "timestamp"
	TimestampNtz PrimitiveType = "timestamp_ntz"
	// Variant, Void and the geospatial types (geometry(<crs>), geography(<crs>[,<alg>]))
	// are parsed so that logs using them can be read; ingestd does not write them.
	Variant PrimitiveType = "variant"
	Void    PrimitiveType = "void"
)

// The range of date and timestamp values (PROTOCOL.md, "Primitive Types"): a date is
// 0001-01-01..9999-12-31, a timestamp (UTC) or timestamp_ntz 0001-01-01 00:00:00 to
// 9999-12-31 23:59:59.999999. A value outside it makes a file's statistics and a
// partition value unreadable to Spark and delta-rs, so writers refuse it per record.
const (
	DateMinDays        int32 = -719162            // 0001-01-01, days since 1970-01-01
	DateMaxDays        int32 = 2932896            // 9999-12-31
	TimestampMinMicros int64 = -62135596800000000 // 0001-01-01T00:00:00Z, µs since the epoch
	TimestampMaxMicros int64 = 253402300799999999 // 9999-12-31T23:59:59.999999Z
)

// IntegerRange returns the range of an integer type: byte, short, integer or long; ok is
// false for any other type.
func IntegerRange(t DataType) (lo, hi int64, ok bool) {
	switch t {
	case Byte:
		return math.MinInt8, math.MaxInt8, true
	case Short:
		return math.MinInt16, math.MaxInt16, true
	case Integer:
		return math.MinInt32, math.MaxInt32, true
	case Long:
		return math.MinInt64, math.MaxInt64, true
	}
	return 0, 0, false
}

// TimeRange returns the range of a column of type t in its stored unit: days for date,
// µs since the epoch for timestamp and timestamp_ntz; ok is false for any other type.
func TimeRange(t DataType) (lo, hi int64, ok bool) {
	switch t {
	case Date:
		return int64(DateMinDays), int64(DateMaxDays), true
	case Timestamp, TimestampNtz:
		return TimestampMinMicros, TimestampMaxMicros, true
	}
	return 0, 0, false
}

func (p PrimitiveType) String() string { return string(p) }
func (PrimitiveType) isDataType()      {}

// DecimalType is decimal(Precision, Scale); Precision is 1..38 and 0 <= Scale <= Precision.
type DecimalType struct {
	Precision int
	Scale     int
}

func (d DecimalType) String() string { return fmt.Sprintf("decimal(%d,%d)", d.Precision, d.Scale) }
func (DecimalType) isDataType()      {}

// StructType is an ordered list of fields. A table schema is a StructType.
type StructType struct {
	Fields []*StructField
}

// StructField is one named field of a StructType. Metadata holds field metadata such as
// "delta.columnMapping.id" (a JSON number, float64 after decoding) and
// "delta.columnMapping.physicalName"; it is kept verbatim across read and write.
type StructField struct {
	Name     string
	Type     DataType
	Nullable bool
	Metadata map[string]any
}

// ArrayType is array<ElementType>; ContainsNull says whether elements may be null.
type ArrayType struct {
	ElementType  DataType
	ContainsNull bool
}

// MapType is map<KeyType, ValueType>; keys are never null.
type MapType struct {
	KeyType           DataType
	ValueType         DataType
	ValueContainsNull bool
}

func (*StructType) isDataType() {}
func (*ArrayType) isDataType()  {}
func (*MapType) isDataType()    {}

func (s *StructType) String() string {
	var b strings.Builder
	b.WriteString("struct<")
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.Name)
		b.WriteByte(':')
		b.WriteString(f.Type.String())
	}
	b.WriteByte('>')
	return b.String()
}

func (a *ArrayType) String() string { return "array<" + a.ElementType.String() + ">" }
func (m *MapType) String() string {
	return "map<" + m.KeyType.String() + "," + m.ValueType.String() + ">"
}

// Field returns the field whose name equals name exactly, or nil.
func (s *StructType) Field(name string) *StructField {
	for _, f := range s.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Clone returns a deep copy of s (metadata maps are copied one level deep).
func (s *StructType) Clone() *StructType {
	if s == nil {
		return nil
	}
	return cloneType(s).(*StructType)
}

func cloneType(t DataType) DataType {
	switch t := t.(type) {
	case *StructType:
		out := &StructType{Fields: make([]*StructField, len(t.Fields))}
		for i, f := range t.Fields {
			nf := *f
			nf.Type = cloneType(f.Type)
			if f.Metadata != nil {
				nf.Metadata = make(map[string]any, len(f.Metadata))
				for k, v := range f.Metadata {
					nf.Metadata[k] = v
				}
			}
			out.Fields[i] = &nf
		}
		return out
	case *ArrayType:
		return &ArrayType{ElementType: cloneType(t.ElementType), ContainsNull: t.ContainsNull}
	case *MapType:
		return &MapType{KeyType: cloneType(t.KeyType), ValueType: cloneType(t.ValueType), ValueContainsNull: t.ValueContainsNull}
	default:
		return t
	}
}

// Column mapping metadata keys (PROTOCOL.md, "Column Mapping").
const (
	MetaColumnMappingID           = "delta.columnMapping.id"
	MetaColumnMappingPhysicalName = "delta.columnMapping.physicalName"
)

// PhysicalName returns the field's physical name under column mapping mode "name" or
// "id", or its logical name when the mode is "none" or the field carries none.
func (f *StructField) PhysicalName(mode ColumnMappingMode) string {
	if mode != ColumnMappingNone {
		if p, ok := f.Metadata[MetaColumnMappingPhysicalName].(string); ok && p != "" {
			return p
		}
	}
	return f.Name
}

// FieldID returns the field's column mapping id and true, or 0 and false if it has none.
func (f *StructField) FieldID() (int, bool) {
	switch v := f.Metadata[MetaColumnMappingID].(type) {
	case float64:
		return int(v), true
	case int:
		return v, true
	case int64:
		return int(v), true
	case json.Number:
		n, err := v.Int64()
		return int(n), err == nil
	}
	return 0, false
}

// ColumnMappingMode is the table property delta.columnMapping.mode.
type ColumnMappingMode string

// Column mapping modes (PROTOCOL.md, "Column Mapping").
const (
	ColumnMappingNone ColumnMappingMode = "none"
	ColumnMappingName ColumnMappingMode = "name"
	ColumnMappingID   ColumnMappingMode = "id"
)

// ---- JSON (PROTOCOL.md, "Schema Serialization Format") ----

type jsonField struct {
	Name     string          `json:"name"`
	Type     json.RawMessage `json:"type"`
	Nullable bool            `json:"nullable"`
	Metadata map[string]any  `json:"metadata"`
}

// MarshalJSON writes {"type":"struct","fields":[…]}; field metadata is always an object.
func (s *StructType) MarshalJSON() ([]byte, error) {
	fields := make([]jsonField, len(s.Fields))
	for i, f := range s.Fields {
		jf, err := f.jsonField()
		if err != nil {
			return nil, err
		}
		fields[i] = jf
	}
	return json.Marshal(struct {
		Type   string      `json:"type"`
		Fields []jsonField `json:"fields"`
	}{"struct", fields})
}

// MarshalJSON writes the field as a schema string does (PROTOCOL.md, "Struct Field"):
// {"name":…,"type":…,"nullable":…,"metadata":{…}} in that order, as Spark writes a column
// in commitInfo.operationParameters (e.g. CHANGE COLUMN's "column").
func (f StructField) MarshalJSON() ([]byte, error) {
	jf, err := f.jsonField()
	if err != nil {
		return nil, err
	}
	return json.Marshal(jf)
}

func (f *StructField) jsonField() (jsonField, error) {
	t, err := marshalType(f.Type)
	if err != nil {
		return jsonField{}, fmt.Errorf("marshal field %q: %w", f.Name, err)
	}
	md := f.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return jsonField{Name: f.Name, Type: t, Nullable: f.Nullable, Metadata: md}, nil
}

func marshalType(t DataType) (json.RawMessage, error) {
	switch t := t.(type) {
	case PrimitiveType, DecimalType:
		return json.Marshal(t.String())
	case *StructType:
		return t.MarshalJSON()
	case *ArrayType:
		e, err := marshalType(t.ElementType)
		if err != nil {
			return nil, err
		}
		return json.Marshal(struct {
			Type         string          `json:"type"`
			ElementType  json.RawMessage `json:"elementType"`
			ContainsNull bool            `json:"containsNull"`
		}{"array", e, t.ContainsNull})
	case *MapType:
		k, err := marshalType(t.KeyType)
		if err != nil {
			return nil, err
		}
		v, err := marshalType(t.ValueType)
		if err != nil {
			return nil, err
		}
		return json.Marshal(struct {
			Type              string          `json:"type"`
			KeyType           json.RawMessage `json:"keyType"`
			ValueType         json.RawMessage `json:"valueType"`
			ValueContainsNull bool            `json:"valueContainsNull"`
		}{"map", k, v, t.ValueContainsNull})
	case nil:
		return nil, fmt.Errorf("nil data type")
	default:
		return nil, fmt.Errorf("unknown data type %T", t)
	}
}

// UnmarshalJSON reads a struct type; see ParseSchema.
func (s *StructType) UnmarshalJSON(b []byte) error {
	t, err := unmarshalType(b)
	if err != nil {
		return err
	}
	st, ok := t.(*StructType)
	if !ok {
		return fmt.Errorf("parse schema: top-level type is %s, want struct", t)
	}
	*s = *st
	return nil
}

// ParseSchema parses a metaData.schemaString. It returns an error naming the offending
// type for unknown primitive types or malformed JSON.
func ParseSchema(schemaString string) (*StructType, error) {
	var s StructType
	if err := json.Unmarshal([]byte(schemaString), &s); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	return &s, nil
}

var decimalRe = regexp.MustCompile(`^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$`)

// ParsePrimitive parses a primitive type name such as "long" or "decimal(10,2)".
// Delta's "decimal" alone means decimal(10,0).
func ParsePrimitive(name string) (DataType, error) {
	switch p := PrimitiveType(name); p {
	case String, Long, Integer, Short, Byte, Float, Double, Boolean, Binary, Date, Timestamp, TimestampNtz, Variant, Void:
		return p, nil
	}
	if strings.HasPrefix(name, "geometry") || strings.HasPrefix(name, "geography") {
		return PrimitiveType(name), nil
	}
	if name == "decimal" {
		return DecimalType{Precision: 10, Scale: 0}, nil
	}
	if m := decimalRe.FindStringSubmatch(name); m != nil {
		p, _ := strconv.Atoi(m[1])
		s, _ := strconv.Atoi(m[2])
		if p < 1 || p > 38 || s > p {
			return nil, fmt.Errorf("parse type %q: precision must be 1..38 and scale <= precision", name)
		}
		return DecimalType{Precision: p, Scale: s}, nil
	}
	return nil, fmt.Errorf("parse type %q: unknown primitive type", name)
}

func unmarshalType(b []byte) (DataType, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return nil, err
		}
		return ParsePrimitive(name)
	}
	var head struct {
		Type              string          `json:"type"`
		Fields            []jsonField     `json:"fields"`
		ElementType       json.RawMessage `json:"elementType"`
		ContainsNull      bool            `json:"containsNull"`
		KeyType           json.RawMessage `json:"keyType"`
		ValueType         json.RawMessage `json:"valueType"`
		ValueContainsNull bool            `json:"valueContainsNull"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&head); err != nil {
		return nil, err
	}
	switch head.Type {
	case "struct":
		st := &StructType{Fields: make([]*StructField, 0, len(head.Fields))}
		for _, f := range head.Fields {
			t, err := unmarshalType(f.Type)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			st.Fields = append(st.Fields, &StructField{Name: f.Name, Type: t, Nullable: f.Nullable, Metadata: normalizeNumbers(f.Metadata)})
		}
		return st, nil
	case "array":
		e, err := unmarshalType(head.ElementType)
		if err != nil {
			return nil, fmt.Errorf("array element: %w", err)
		}
		return &ArrayType{ElementType: e, ContainsNull: head.ContainsNull}, nil
	case "map":
		k, err := unmarshalType(head.KeyType)
		if err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		v, err := unmarshalType(head.ValueType)
		if err != nil {
			return nil, fmt.Errorf("map value: %w", err)
		}
		return &MapType{KeyType: k, ValueType: v, ValueContainsNull: head.ValueContainsNull}, nil
	default:
		return nil, fmt.Errorf("unknown complex type %q", head.Type)
	}
}

// normalizeNumbers turns json.Number metadata values into float64 (integral ids stay exact
// below 2^53), so metadata compares and re-serialises the way it was read.
func normalizeNumbers(m map[string]any) map[string]any {
	for k, v := range m {
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				m[k] = f
			}
		}
	}
	return m
}
