package expr

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Value is one typed SQL value. Type is a Delta primitive type; Null marks SQL NULL.
// The payload by type, as Delta encodes it physically (PROTOCOL.md, "Primitive Types";
// deltawriter/parquetschema.go): integer/long/short/byte/boolean (0 or 1) in Int; date in
// Int as days since 1970-01-01; timestamp in Int as µs since the epoch (UTC);
// timestamp_ntz in Int as µs since 1970-01-01T00:00 of the wall clock; string in Str
// (UTF-8); binary in Str (raw bytes); float and double in F (a float's value exactly);
// decimal(p,s) in Dec, the unscaled integer (the value is Dec × 10^-s).
type Value struct {
	Type deltalog.DataType
	Null bool
	Int  int64
	Str  string
	F    float64
	Dec  *big.Int
}

// Float returns a float or double Value of type t.
func Float(t deltalog.DataType, f float64) Value { return Value{Type: t, F: f} }

// Decimal returns the decimal(p,s) Value unscaled × 10^-s of type t.
func Decimal(t deltalog.DecimalType, unscaled *big.Int) Value { return Value{Type: t, Dec: unscaled} }

// Null returns the NULL of type t.
func Null(t deltalog.DataType) Value { return Value{Type: t, Null: true} }

// Int returns an integer Value of type t (integer, long, short, byte, date, timestamp,
// timestamp_ntz or boolean).
func Int(t deltalog.DataType, v int64) Value { return Value{Type: t, Int: v} }

// Str returns a string Value.
func Str(s string) Value { return Value{Type: deltalog.String, Str: s} }

// NullSafeEqual is Spark's a <=> b on two values of one type: true when both are NULL or
// both are non-NULL and equal, false otherwise (never NULL).
func NullSafeEqual(a, b Value) bool {
	if a.Null || b.Null {
		return a.Null && b.Null
	}
	return compareValues(a, b) == 0
}

// String renders v as Spark's CAST(v AS STRING) does in a UTC session (dates
// yyyy-MM-dd, timestamps yyyy-MM-dd HH:mm:ss[.ffffff] with the offset for timestamp,
// "NULL" for NULL), for messages and dead-letter headers.
func (v Value) String() string {
	if v.Null {
		return "NULL"
	}
	switch v.Type {
	case deltalog.Date:
		return time.Unix(v.Int*86400, 0).UTC().Format("2006-01-02")
	case deltalog.Timestamp:
		return time.UnixMicro(v.Int).UTC().Format("2006-01-02 15:04:05.999999Z07:00")
	case deltalog.TimestampNtz:
		return time.UnixMicro(v.Int).UTC().Format("2006-01-02 15:04:05.999999")
	case deltalog.String:
		return v.Str
	case deltalog.Binary:
		return fmt.Sprintf("X'%X'", v.Str)
	case deltalog.Boolean:
		return strconv.FormatBool(v.Int != 0)
	case deltalog.Float:
		return JavaFloatString(v.F, 32)
	case deltalog.Double:
		return JavaFloatString(v.F, 64)
	}
	if d, ok := v.Type.(deltalog.DecimalType); ok {
		return formatDecimal(v.Dec, d.Scale)
	}
	return strconv.FormatInt(v.Int, 10)
}

// FromParquet converts one parquet.Value of a column of Delta type t, as ingestd encodes
// it (deltawriter.ParquetSchema), into a Value. A parquet NULL is NULL. It returns an
// error for a type the evaluator does not handle (decimals, floats, nested types).
func FromParquet(t deltalog.DataType, v parquet.Value) (Value, error) {
	if v.IsNull() {
		return Null(t), nil
	}
	switch t {
	case deltalog.Long, deltalog.Timestamp, deltalog.TimestampNtz:
		return Int(t, v.Int64()), nil
	case deltalog.Integer, deltalog.Short, deltalog.Byte, deltalog.Date:
		return Int(t, int64(v.Int32())), nil
	case deltalog.Boolean:
		if v.Boolean() {
			return Int(t, 1), nil
		}
		return Int(t, 0), nil
	case deltalog.String, deltalog.Binary:
		return Value{Type: t, Str: string(v.ByteArray())}, nil
	case deltalog.Float:
		return Float(t, float64(v.Float())), nil
	case deltalog.Double:
		return Float(t, v.Double()), nil
	}
	if d, ok := t.(deltalog.DecimalType); ok {
		switch v.Kind() {
		case parquet.Int32:
			return Decimal(d, big.NewInt(int64(v.Int32()))), nil
		case parquet.Int64:
			return Decimal(d, big.NewInt(v.Int64())), nil
		case parquet.FixedLenByteArray, parquet.ByteArray:
			return Decimal(d, fromTwosComplement(v.ByteArray())), nil
		}
	}
	return Value{}, fmt.Errorf("convert a parquet value of type %v: not supported by the expression evaluator", t)
}

// ToParquet converts v into the parquet.Value of its Delta type's physical encoding
// (deltawriter.ParquetSchema); repetition/definition levels and the column index are left
// for the caller to set.
func ToParquet(v Value) (parquet.Value, error) {
	if v.Null {
		return parquet.NullValue(), nil
	}
	switch v.Type {
	case deltalog.Long, deltalog.Timestamp, deltalog.TimestampNtz:
		return parquet.Int64Value(v.Int), nil
	case deltalog.Integer, deltalog.Short, deltalog.Byte, deltalog.Date:
		return parquet.Int32Value(int32(v.Int)), nil
	case deltalog.Boolean:
		return parquet.BooleanValue(v.Int != 0), nil
	case deltalog.String, deltalog.Binary:
		return parquet.ByteArrayValue([]byte(v.Str)), nil
	case deltalog.Float:
		return parquet.FloatValue(float32(v.F)), nil
	case deltalog.Double:
		return parquet.DoubleValue(v.F), nil
	}
	if d, ok := v.Type.(deltalog.DecimalType); ok { // Spark's layout (deltawriter.ParquetSchema)
		switch {
		case d.Precision <= 9:
			return parquet.Int32Value(int32(v.Dec.Int64())), nil
		case d.Precision <= 18:
			return parquet.Int64Value(v.Dec.Int64()), nil
		}
		return parquet.FixedLenByteArrayValue(toTwosComplement(v.Dec, decimalBytes(d.Precision))), nil
	}
	return parquet.Value{}, fmt.Errorf("convert a value of type %v to parquet: not supported by the expression evaluator", v.Type)
}

// fromTwosComplement reads a big-endian two's-complement integer.
func fromTwosComplement(b []byte) *big.Int {
	u := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return u
}

// toTwosComplement writes u as a big-endian two's-complement integer of n bytes.
func toTwosComplement(u *big.Int, n int) []byte {
	x := new(big.Int).Set(u)
	if x.Sign() < 0 {
		x.Add(x, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	out := make([]byte, n)
	x.FillBytes(out)
	return out
}

// decimalBytes is Spark's minBytesForPrecision (deltawriter.DecimalBytes).
func decimalBytes(precision int) int {
	limit := math.Pow10(precision)
	n := 1
	for math.Ldexp(1, 8*n-1) < limit {
		n++
	}
	return n
}

// formatDecimal renders unscaled × 10^-scale in plain notation with scale fraction
// digits (Spark's CAST(decimal AS STRING)).
func formatDecimal(u *big.Int, scale int) string {
	s := new(big.Int).Abs(u).String()
	if scale > 0 {
		for len(s) <= scale {
			s = "0" + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if u.Sign() < 0 {
		s = "-" + s
	}
	return s
}
