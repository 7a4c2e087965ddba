package decode

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// maxDecimalPrecision is the largest precision Delta's decimal type admits.
const maxDecimalPrecision = 38

// ToDelta converts an Avro writer schema into the Delta schema of the rows it carries
// (docs/schema-policies.md, "Avro to Delta types"):
//
//   - boolean, int, long, float, double → boolean, integer, long, float, double;
//   - string, enum, uuid → string; bytes, fixed → binary;
//   - decimal(p,s) on bytes or fixed → decimal(p,s); an invalid annotation (p < 1, p > 38,
//     s < 0, s > p, or a fixed too small for p) is ignored and the underlying type used;
//   - date → date; timestamp-millis/micros → timestamp; local-timestamp-millis/micros →
//     timestamp_ntz; time-millis → integer; time-micros → long; other logical types → the
//     underlying type;
//   - a Kafka Connect logical type named by the "connect.name" property decides over the
//     above (connect.go; docs/formats.md, "Kafka Connect and Debezium logical types"):
//     Debezium's timestamps → timestamp_ntz, ZonedTimestamp → timestamp, times → long
//     microseconds since midnight, VariableScaleDecimal (a record) → string, Connect's
//     Decimal → decimal(p,s) from its parameters; an unknown name under
//     org.apache.kafka.connect.data., io.debezium.data. or io.debezium.time., a name on
//     another physical type, or a logicalType contradicting the name is unsupported_type;
//   - record → struct; array → array (containsNull when items admit null); map → map<string,
//     …> (valueContainsNull when values admit null);
//   - [null,T], [T,null], [T] → T, nullable; a union with ≥ 2 non-null branches → struct<
//     member0, member1, …> with one nullable field per non-null branch, in branch order;
//   - a field of type null (or a union of only null) carries no data and is omitted.
//
// A StructField is Nullable exactly when its Avro type admits null. The top-level schema
// must be a record or a union of null and one record. Errors are *Error with reason
// ReasonUnsupportedType: recursive records (Field names the path where the cycle closes,
// Err the chain of record names), a non-record top level, nested records with no data
// fields (Parquet cannot hold an empty group), arrays or maps of null, and two fields of one
// record whose names are equal case-insensitively after Unicode NFC (Delta cannot hold
// both), and a column nested more than MaxNestingDepth levels deep.
func ToDelta(s avro.Schema) (*deltalog.StructType, error) {
	rec, _, err := topRecord(s)
	if err != nil {
		return nil, err
	}
	c := &converter{}
	st, err := c.record(rec, "", true)
	if err != nil {
		return nil, err
	}
	for _, f := range st.Fields {
		if path, depth := deepest(f.Type, f.Name, 1); depth > MaxNestingDepth {
			return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("convert schema: column %s nests %d levels of struct, array and map, more than %d: delta-rs cannot open a table whose schema nests deeper (its schema JSON passes serde_json's recursion limit)", path, depth, MaxNestingDepth))
		}
	}
	return st, nil
}

// MaxNestingDepth is how many levels of struct, array and map one column may nest (a
// top-level struct column is 1). Each struct level is three levels of the Delta schema's
// JSON (field, type, fields), and delta-rs reads that JSON with serde_json's recursion
// limit of 128: a table with a column of 42 nested structs cannot be opened by delta-rs
// at all (41 can), so ingestd never creates or evolves one past 32.
const MaxNestingDepth = 32

// deepest returns the path and depth (levels of struct, array and map, t's own included)
// of t's most deeply nested part; path names t, depth is t's level.
func deepest(t deltalog.DataType, path string, level int) (string, int) {
	switch t := t.(type) {
	case *deltalog.StructType:
		best, bestDepth := path, level
		for _, f := range t.Fields {
			if p, d := deepest(f.Type, joinPath(path, f.Name), level+1); d > bestDepth {
				best, bestDepth = p, d
			}
		}
		return best, bestDepth
	case *deltalog.ArrayType:
		return deepest(t.ElementType, path+"[]", level+1)
	case *deltalog.MapType:
		return deepest(t.ValueType, path+"{}", level+1)
	}
	return path, level - 1
}

// topRecord returns the record of a top-level schema that is a record or a union of null
// and one record, and whether that union admits null.
func topRecord(s avro.Schema) (*avro.RecordSchema, bool, error) {
	s = deref(s)
	switch t := s.(type) {
	case *avro.RecordSchema:
		return t, false, nil
	case *avro.UnionSchema:
		var rec *avro.RecordSchema
		nullable := false
		for _, b := range t.Types() {
			b = deref(b)
			if b.Type() == avro.Null {
				nullable = true
				continue
			}
			r, ok := b.(*avro.RecordSchema)
			if !ok || rec != nil {
				return nil, false, newError(ReasonUnsupportedType, "", fmt.Errorf("convert schema: top-level union must be [null, record], got %s", s.String()))
			}
			rec = r
		}
		if rec == nil {
			return nil, false, newError(ReasonUnsupportedType, "", fmt.Errorf("convert schema: top-level union has no record branch"))
		}
		return rec, nullable, nil
	}
	return nil, false, newError(ReasonUnsupportedType, "", fmt.Errorf("convert schema: top-level type is %s, want a record", s.Type()))
}

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

type converter struct {
	stack []string // full names of the records being converted, outermost first
}

func (c *converter) record(rs *avro.RecordSchema, path string, top bool) (*deltalog.StructType, error) {
	for _, name := range c.stack {
		if name == rs.FullName() {
			chain := strings.Join(append(append([]string(nil), c.stack...), rs.FullName()), " -> ")
			return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("convert schema: recursive record %s", chain))
		}
	}
	c.stack = append(c.stack, rs.FullName())
	defer func() { c.stack = c.stack[:len(c.stack)-1] }()

	st := &deltalog.StructType{Fields: make([]*deltalog.StructField, 0, len(rs.Fields()))}
	seen := make(map[string]string, len(rs.Fields()))
	for _, f := range rs.Fields() {
		fp := joinPath(path, f.Name())
		t, nullable, omit, err := c.convert(f.Type(), fp)
		if err != nil {
			return nil, err
		}
		if omit {
			continue
		}
		k := deltalog.NameKey(f.Name())
		if other, dup := seen[k]; dup {
			return nil, newError(ReasonUnsupportedType, fp, fmt.Errorf("convert schema: fields %q and %q of record %s differ only by case", other, f.Name(), rs.FullName()))
		}
		seen[k] = f.Name()
		st.Fields = append(st.Fields, &deltalog.StructField{Name: f.Name(), Type: t, Nullable: nullable})
	}
	if len(st.Fields) == 0 && !top {
		return nil, newError(ReasonUnsupportedType, path, fmt.Errorf("convert schema: record %s has no fields that carry data", rs.FullName()))
	}
	return st, nil
}

// convert maps one Avro type; omit reports a type that carries no data (null).
func (c *converter) convert(s avro.Schema, path string) (t deltalog.DataType, nullable, omit bool, err error) {
	switch s := s.(type) {
	case *avro.RefSchema:
		return c.convert(s.Schema(), path)
	case *avro.NullSchema:
		return nil, true, true, nil
	case *avro.UnionSchema:
		var nonNull []avro.Schema
		for _, b := range s.Types() {
			if b.Type() == avro.Null {
				nullable = true
				continue
			}
			nonNull = append(nonNull, b)
		}
		switch len(nonNull) {
		case 0:
			return nil, true, true, nil
		case 1:
			t, _, _, err := c.convert(nonNull[0], path)
			return t, nullable, false, err
		}
		st := &deltalog.StructType{Fields: make([]*deltalog.StructField, len(nonNull))}
		for i, b := range nonNull {
			name := memberName(i)
			mt, _, _, err := c.convert(b, joinPath(path, name))
			if err != nil {
				return nil, false, false, err
			}
			st.Fields[i] = &deltalog.StructField{Name: name, Type: mt, Nullable: true}
		}
		return st, nullable, false, nil
	case *avro.RecordSchema:
		if t, ok, err := connectRecordType(s); ok {
			if err != nil {
				return nil, false, false, newError(ReasonUnsupportedType, path, err)
			}
			return t, false, false, nil
		}
		st, err := c.record(s, path, false)
		return st, false, false, err
	case *avro.ArraySchema:
		et, en, eomit, err := c.convert(s.Items(), path+"[]")
		if err != nil {
			return nil, false, false, err
		}
		if eomit {
			return nil, false, false, newError(ReasonUnsupportedType, path, fmt.Errorf("convert schema: array of null"))
		}
		return &deltalog.ArrayType{ElementType: et, ContainsNull: en}, false, false, nil
	case *avro.MapSchema:
		vt, vn, vomit, err := c.convert(s.Values(), path+"{}")
		if err != nil {
			return nil, false, false, err
		}
		if vomit {
			return nil, false, false, newError(ReasonUnsupportedType, path, fmt.Errorf("convert schema: map of null"))
		}
		return &deltalog.MapType{KeyType: deltalog.String, ValueType: vt, ValueContainsNull: vn}, false, false, nil
	}
	k, err := classify(s)
	if err != nil {
		return nil, false, false, newError(ReasonUnsupportedType, path, err)
	}
	return k.deltaType(), false, false, nil
}

func memberName(i int) string { return "member" + strconv.Itoa(i) }

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// kind is the normalised shape of a primitive Avro type with its logical type applied
// (invalid logical annotations already dropped).
type kind struct {
	base      kindBase
	precision int      // decimal
	scale     int      // decimal
	size      int      // fixed: byte length
	symbols   [][]byte // enum
}

type kindBase int

const (
	kBool kindBase = iota + 1
	kInt
	kLong
	kFloat
	kDouble
	kString
	kBytes
	kFixed
	kEnum
	kDate
	kTimeMillis
	kTimeMicros
	kTsMillis
	kTsMicros
	kLocalTsMillis
	kLocalTsMicros
	kUUID
	kDecimalBytes
	kDecimalFixed
	// Kafka Connect logical types without an Avro logical type of their own (connect.go)
	kTimeMillisMicros // int milliseconds since midnight → long microseconds
	kTimeNanos        // long nanoseconds since midnight → long microseconds
	kLocalTsNanos     // long nanoseconds since the epoch, no zone → timestamp_ntz
	kZonedTs          // an ISO-8601 string with an offset → timestamp
	kVarDecimal       // a {scale, value} record → its exact decimal text
)

// classify returns the kind of a primitive, enum or fixed schema; a Kafka Connect logical
// type name on it decides (classifyConnect).
func classify(s avro.Schema) (kind, error) {
	if name := connectNameOf(s); name != "" && isConnectLogical(name) {
		return classifyConnect(deref(s), name)
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return classify(s.Schema())
	case *avro.EnumSchema:
		syms := make([][]byte, len(s.Symbols()))
		for i, v := range s.Symbols() {
			syms[i] = []byte(v)
		}
		return kind{base: kEnum, symbols: syms}, nil
	case *avro.FixedSchema:
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok && validDecimal(d, s.Size()) {
			return kind{base: kDecimalFixed, precision: d.Precision(), scale: d.Scale(), size: s.Size()}, nil
		}
		return kind{base: kFixed, size: s.Size()}, nil
	case *avro.PrimitiveSchema:
		var lt avro.LogicalType
		if l := s.Logical(); l != nil {
			lt = l.Type()
		}
		switch s.Type() {
		case avro.Boolean:
			return kind{base: kBool}, nil
		case avro.Int:
			switch lt {
			case avro.Date:
				return kind{base: kDate}, nil
			case avro.TimeMillis:
				return kind{base: kTimeMillis}, nil
			}
			return kind{base: kInt}, nil
		case avro.Long:
			switch lt {
			case avro.TimeMicros:
				return kind{base: kTimeMicros}, nil
			case avro.TimestampMillis:
				return kind{base: kTsMillis}, nil
			case avro.TimestampMicros:
				return kind{base: kTsMicros}, nil
			case avro.LocalTimestampMillis:
				return kind{base: kLocalTsMillis}, nil
			case avro.LocalTimestampMicros:
				return kind{base: kLocalTsMicros}, nil
			}
			return kind{base: kLong}, nil
		case avro.Float:
			return kind{base: kFloat}, nil
		case avro.Double:
			return kind{base: kDouble}, nil
		case avro.String:
			if lt == avro.UUID {
				return kind{base: kUUID}, nil
			}
			return kind{base: kString}, nil
		case avro.Bytes:
			if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok && validDecimal(d, -1) {
				return kind{base: kDecimalBytes, precision: d.Precision(), scale: d.Scale()}, nil
			}
			return kind{base: kBytes}, nil
		}
	}
	return kind{}, fmt.Errorf("convert schema: unsupported Avro type %s", s.Type())
}

// validDecimal checks a decimal annotation against the Avro spec and Delta's limit: 1 <= p
// <= 38, 0 <= s <= p, and for fixed(n) p <= floor(log10(2^(8n-1)-1)).
func validDecimal(d *avro.DecimalLogicalSchema, fixedSize int) bool {
	p, s := d.Precision(), d.Scale()
	if p < 1 || p > maxDecimalPrecision || s < 0 || s > p {
		return false
	}
	if fixedSize >= 0 && p > maxFixedDigits(fixedSize) {
		return false
	}
	return true
}

// maxFixedDigits is floor(log10(2^(8n-1)-1)): the decimal digits a signed n-byte value
// holds (n=3 → 6, n=5 → 11, n=9 → 21).
func maxFixedDigits(n int) int {
	if n <= 0 {
		return 0
	}
	if n > 17 { // 2^135 > 10^40: every precision Delta admits fits
		n = 17
	}
	v := new(big.Int).Lsh(big.NewInt(1), uint(8*n-1))
	v.Sub(v, big.NewInt(1))
	return len(v.String()) - 1
}

// deltaType is the Delta type of a primitive kind.
func (k kind) deltaType() deltalog.DataType {
	switch k.base {
	case kBool:
		return deltalog.Boolean
	case kInt, kTimeMillis:
		return deltalog.Integer
	case kLong, kTimeMicros, kTimeMillisMicros, kTimeNanos:
		return deltalog.Long
	case kFloat:
		return deltalog.Float
	case kDouble:
		return deltalog.Double
	case kString, kEnum, kUUID, kVarDecimal:
		return deltalog.String
	case kBytes, kFixed:
		return deltalog.Binary
	case kDate:
		return deltalog.Date
	case kTsMillis, kTsMicros, kZonedTs:
		return deltalog.Timestamp
	case kLocalTsMillis, kLocalTsMicros, kLocalTsNanos:
		return deltalog.TimestampNtz
	case kDecimalBytes, kDecimalFixed:
		return deltalog.DecimalType{Precision: k.precision, Scale: k.scale}
	}
	return nil
}
