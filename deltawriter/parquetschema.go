package deltawriter

import (
	"fmt"
	"math"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// ParquetSchema returns the Parquet schema of the data files ingestd writes for a table
// whose logical schema is s, under column mapping mode (PROTOCOL.md, "Column Mapping" and
// "Delta Data Type to Parquet Type Mappings"; docs/schema-policies.md, "Avro to Delta
// types").
//
// Conventions every producer of column values relies on:
//   - every field, list element and map value is OPTIONAL (as Spark writes: data files are
//     written with the schema made nullable; NOT NULL is enforced before writing); map keys
//     are REQUIRED;
//   - column names are physical names (the logical name when mode is "none");
//   - Parquet field ids are set from delta.columnMapping.id when mode is not "none";
//   - lists are 3-level (<name> LIST { repeated group list { optional element } }), maps are
//     <name> MAP { repeated group key_value { required key; optional value } };
//   - long → INT64, integer → INT32, short → INT32 INT(16), byte → INT32 INT(8),
//     date → INT32 DATE, timestamp → INT64 TIMESTAMP(MICROS, UTC), timestamp_ntz →
//     INT64 TIMESTAMP(MICROS, not UTC), decimal p<=9 → INT32, p<=18 → INT64, else
//     FIXED_LEN_BYTE_ARRAY of the minimum width (Spark's layout), string → BYTE_ARRAY UTF8,
//     binary → BYTE_ARRAY.
//
// Leaf column indexes follow parquet-go's order (fields sorted by physical name); resolve
// them with (*parquet.Schema).Lookup, never by position in s.
// It returns an error for a type it cannot represent.
func ParquetSchema(s *deltalog.StructType, mode deltalog.ColumnMappingMode) (*parquet.Schema, error) {
	g, err := parquetGroup(s, mode)
	if err != nil {
		return nil, err
	}
	return parquet.NewSchema("spark_schema", g), nil
}

func parquetGroup(s *deltalog.StructType, mode deltalog.ColumnMappingMode) (parquet.Group, error) {
	g := make(parquet.Group, len(s.Fields))
	for _, f := range s.Fields {
		n, err := parquetNode(f.Type, mode)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		n = parquet.Optional(n)
		if mode != deltalog.ColumnMappingNone {
			if id, ok := f.FieldID(); ok && id > 0 {
				n = parquet.FieldID(n, id)
			}
		}
		name := f.PhysicalName(mode)
		if _, dup := g[name]; dup {
			return nil, fmt.Errorf("duplicate physical column name %q", name)
		}
		g[name] = n
	}
	return g, nil
}

func parquetNode(t deltalog.DataType, mode deltalog.ColumnMappingMode) (parquet.Node, error) {
	switch t := t.(type) {
	case deltalog.PrimitiveType:
		switch t {
		case deltalog.String:
			return parquet.String(), nil
		case deltalog.Long:
			return parquet.Leaf(parquet.Int64Type), nil
		case deltalog.Integer:
			return parquet.Leaf(parquet.Int32Type), nil
		case deltalog.Short:
			return parquet.Int(16), nil
		case deltalog.Byte:
			return parquet.Int(8), nil
		case deltalog.Float:
			return parquet.Leaf(parquet.FloatType), nil
		case deltalog.Double:
			return parquet.Leaf(parquet.DoubleType), nil
		case deltalog.Boolean:
			return parquet.Leaf(parquet.BooleanType), nil
		case deltalog.Binary:
			return parquet.Leaf(parquet.ByteArrayType), nil
		case deltalog.Date:
			return parquet.Date(), nil
		case deltalog.Timestamp:
			return parquet.TimestampAdjusted(parquet.Microsecond, true), nil
		case deltalog.TimestampNtz:
			return parquet.TimestampAdjusted(parquet.Microsecond, false), nil
		}
		return nil, fmt.Errorf("unsupported primitive type %q", string(t))
	case deltalog.DecimalType:
		switch {
		case t.Precision <= 9:
			return parquet.Decimal(t.Scale, t.Precision, parquet.Int32Type), nil
		case t.Precision <= 18:
			return parquet.Decimal(t.Scale, t.Precision, parquet.Int64Type), nil
		default:
			return parquet.Decimal(t.Scale, t.Precision, parquet.FixedLenByteArrayType(DecimalBytes(t.Precision))), nil
		}
	case *deltalog.StructType:
		return parquetGroup(t, mode)
	case *deltalog.ArrayType:
		e, err := parquetNode(t.ElementType, mode)
		if err != nil {
			return nil, fmt.Errorf("array element: %w", err)
		}
		return parquet.List(parquet.Optional(e)), nil
	case *deltalog.MapType:
		k, err := parquetNode(t.KeyType, mode)
		if err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		v, err := parquetNode(t.ValueType, mode)
		if err != nil {
			return nil, fmt.Errorf("map value: %w", err)
		}
		return parquet.Map(parquet.Required(k), parquet.Optional(v)), nil
	}
	return nil, fmt.Errorf("unsupported type %T", t)
}

// DecimalBytes returns the width in bytes of the FIXED_LEN_BYTE_ARRAY that holds any
// unscaled two's-complement value of the given precision (Spark's minBytesForPrecision):
// the smallest n with 2^(8n-1) >= 10^precision. Precision 38 gives 16.
func DecimalBytes(precision int) int {
	limit := math.Pow10(precision)
	n := 1
	for math.Ldexp(1, 8*n-1) < limit {
		n++
	}
	return n
}
