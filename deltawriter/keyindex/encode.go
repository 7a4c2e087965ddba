package keyindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// ErrNullKey is returned (wrapped) by AppendValue for a NULL value: a key column value
// must be set.
var ErrNullKey = errors.New("key value is null")

// ErrKeyColumn is wrapped by CheckKeyColumns and CheckSequenceColumn when a column cannot
// serve as a key or sequence column.
var ErrKeyColumn = errors.New("unsupported key column")

// class is how a key column's values are encoded: types that share a class encode the same
// value to the same bytes, so a Delta type widening within a class (byte → short →
// integer → long) leaves every key's encoding unchanged.
type class int

const (
	classInvalid class = iota
	classInt           // byte, short, integer, long: 8 bytes
	classBool          // 1 byte
	classDate          // int32 days: 4 bytes
	classMicros        // timestamp, timestamp_ntz (µs since the epoch): 8 bytes
	classDecimal       // unscaled at the table's scale: 16 bytes
	classBytes         // string, binary: uvarint length + bytes
)

// keyClass returns the encoding class of a key column of type t, or classInvalid.
func keyClass(t deltalog.DataType) class {
	switch t := t.(type) {
	case deltalog.DecimalType:
		return classDecimal
	case deltalog.PrimitiveType:
		switch t {
		case deltalog.Byte, deltalog.Short, deltalog.Integer, deltalog.Long:
			return classInt
		case deltalog.Boolean:
			return classBool
		case deltalog.Date:
			return classDate
		case deltalog.Timestamp, deltalog.TimestampNtz:
			return classMicros
		case deltalog.String, deltalog.Binary:
			return classBytes
		}
	}
	return classInvalid
}

// CheckKeyColumns checks that names are usable key columns of schema: at least one, each
// the name of a top-level column (matched as Delta matches column names,
// deltalog.NameKey), none twice, each of type string, binary, boolean, byte, short,
// integer, long, date, timestamp, timestamp_ntz or decimal. Float and double (no
// equality a key can rely on: NaN, -0.0), struct, array, map and the other types are
// refused. Errors wrap ErrKeyColumn and name the column and its type.
func CheckKeyColumns(schema *deltalog.StructType, names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("check key columns: %w: no key column", ErrKeyColumn)
	}
	seen := map[string]string{}
	for _, n := range names {
		f := schema.FieldByKey(n)
		if f == nil {
			return fmt.Errorf("check key columns: %w: %q is not a column of the table", ErrKeyColumn, n)
		}
		k := deltalog.NameKey(f.Name)
		if prev, dup := seen[k]; dup {
			return fmt.Errorf("check key columns: %w: %q and %q name the same column %s", ErrKeyColumn, prev, n, f.Name)
		}
		seen[k] = n
		if keyClass(f.Type) == classInvalid {
			return fmt.Errorf("check key columns: %w: column %s has type %s; a key column must be string, binary, boolean, byte, short, integer, long, date, timestamp, timestamp_ntz or decimal",
				ErrKeyColumn, f.Name, f.Type)
		}
	}
	return nil
}

// CheckSequenceColumn checks that name is a usable sequence column of schema (Spec.Sequence):
// a top-level column of type byte, short, integer, long, date, timestamp or
// timestamp_ntz. Errors wrap ErrKeyColumn and name the column and its type.
func CheckSequenceColumn(schema *deltalog.StructType, name string) error {
	f := schema.FieldByKey(name)
	if f == nil {
		return fmt.Errorf("check sequence column: %w: %q is not a column of the table", ErrKeyColumn, name)
	}
	switch keyClass(f.Type) {
	case classInt, classDate, classMicros:
		return nil
	}
	return fmt.Errorf("check sequence column: %w: column %s has type %s; a sequence column must be byte, short, integer, long, date, timestamp or timestamp_ntz",
		ErrKeyColumn, f.Name, f.Type)
}

// AppendValue appends the canonical encoding of v, a value of a key column of Delta type
// t, to dst and returns the extended slice (docs: the package doc's "Key encoding"). v is
// the Parquet physical value as ingestd's decoder puts it in column buffers and as data
// files hold it (deltawriter.ParquetSchema's layout; Spark's too): INT32 or INT64 for the
// integer types, BOOLEAN, INT32 days for date, INT64 µs (or INT96) for timestamps,
// BYTE_ARRAY for string and binary, and for decimal(p,s) the unscaled value at scale s as
// INT32, INT64, FIXED_LEN_BYTE_ARRAY or BYTE_ARRAY (big-endian two's complement).
//
// Encodings, each of fixed width but strings and binaries, so a tuple of them is
// self-delimiting: integer types as the int64 value (8 bytes, big-endian, sign bit
// flipped) whatever their width, so a column widened from integer to long keeps every
// key; boolean 1 byte; date 4 bytes (int32 days, sign bit flipped); timestamp and
// timestamp_ntz 8 bytes (int64 µs); decimal 16 bytes (the 128-bit unscaled value at
// the column's scale, sign bit flipped); string and binary as a uvarint length and the
// bytes.
//
// Errors: ErrNullKey (wrapped) for a NULL; a value of a kind the type cannot hold; a
// type CheckKeyColumns refuses; a decimal wider than 128 bits.
func AppendValue(dst []byte, t deltalog.DataType, v parquet.Value) ([]byte, error) {
	c, err := newConv(t, nil, false)
	if err != nil {
		return dst, err
	}
	return c.append(dst, v)
}

// conv converts the values of one file column (or of the decoder's buffers) to the
// canonical encoding of a key column of the table's type, or to a sequence.
type conv struct {
	cls class
	// mulMicros/divMicros convert an INT64 timestamp to µs (millisecond and nanosecond
	// files); dateMicros converts DATE days to µs (date widened to timestamp_ntz).
	mulMicros, divMicros int64
	dateMicros           bool
	// rescale multiplies a decimal's unscaled value by 10^rescale (a file written at a
	// smaller scale, or an integer column widened to decimal).
	rescale int
	typ     deltalog.DataType
}

// newConv returns the conversion of values of Delta type t read from the file leaf n
// (nil: ingestd's own layout at the table's type). seq asks for a sequence conversion.
func newConv(t deltalog.DataType, n parquet.Node, seq bool) (conv, error) {
	c := conv{cls: keyClass(t), mulMicros: 1, divMicros: 1, typ: t}
	if c.cls == classInvalid || seq && c.cls != classInt && c.cls != classDate && c.cls != classMicros {
		return c, fmt.Errorf("%w: type %s", ErrKeyColumn, t)
	}
	var lt *format.LogicalType
	if n != nil {
		lt = n.Type().LogicalType()
	}
	switch c.cls {
	case classMicros:
		if lt == nil {
			break
		}
		switch x := lt.Value.(type) {
		case *format.DateType:
			c.dateMicros = true
		case *format.TimestampType:
			switch x.Unit.Value.(type) {
			case *format.MilliSeconds:
				c.mulMicros = 1000
			case *format.NanoSeconds:
				c.divMicros = 1000
			}
		}
	case classDecimal:
		want := t.(deltalog.DecimalType).Scale
		from := want
		if n != nil {
			from = 0 // an integer column widened to decimal
			if lt != nil {
				if d, ok := lt.Value.(*format.DecimalType); ok {
					from = int(d.Scale)
				}
			}
		}
		if from > want {
			return c, fmt.Errorf("a file column of decimal scale %d for a key column of %s", from, t)
		}
		c.rescale = want - from
	}
	return c, nil
}

// append appends the encoding of v.
func (c *conv) append(dst []byte, v parquet.Value) ([]byte, error) {
	if v.IsNull() {
		return dst, ErrNullKey
	}
	switch c.cls {
	case classInt:
		x, err := intOf(v)
		if err != nil {
			return dst, fmt.Errorf("encode %s key: %w", c.typ, err)
		}
		return binary.BigEndian.AppendUint64(dst, uint64(x)^1<<63), nil
	case classBool:
		if v.Kind() != parquet.Boolean {
			return dst, fmt.Errorf("encode boolean key: a %s value", v.Kind())
		}
		if v.Boolean() {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case classDate:
		if v.Kind() != parquet.Int32 {
			return dst, fmt.Errorf("encode date key: a %s value", v.Kind())
		}
		return binary.BigEndian.AppendUint32(dst, uint32(v.Int32())^1<<31), nil
	case classMicros:
		x, err := c.micros(v)
		if err != nil {
			return dst, err
		}
		return binary.BigEndian.AppendUint64(dst, uint64(x)^1<<63), nil
	case classDecimal:
		return c.appendDecimal(dst, v)
	case classBytes:
		if k := v.Kind(); k != parquet.ByteArray && k != parquet.FixedLenByteArray {
			return dst, fmt.Errorf("encode %s key: a %s value", c.typ, k)
		}
		b := v.ByteArray()
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		return append(dst, b...), nil
	}
	return dst, fmt.Errorf("encode key: %w: type %s", ErrKeyColumn, c.typ)
}

// sequence converts a sequence column's value to int64: integers as they are, dates in
// days, timestamps in µs. ok is false for a NULL.
func (c *conv) sequence(v parquet.Value) (seq int64, ok bool, err error) {
	if v.IsNull() {
		return 0, false, nil
	}
	switch c.cls {
	case classInt:
		x, err := intOf(v)
		return x, err == nil, err
	case classDate:
		if v.Kind() != parquet.Int32 {
			return 0, false, fmt.Errorf("read date sequence: a %s value", v.Kind())
		}
		return int64(v.Int32()), true, nil
	case classMicros:
		x, err := c.micros(v)
		return x, err == nil, err
	}
	return 0, false, fmt.Errorf("read sequence: %w: type %s", ErrKeyColumn, c.typ)
}

func intOf(v parquet.Value) (int64, error) {
	switch v.Kind() {
	case parquet.Int32:
		return int64(v.Int32()), nil
	case parquet.Int64:
		return v.Int64(), nil
	}
	return 0, fmt.Errorf("a %s value", v.Kind())
}

// micros returns a timestamp value in µs since the epoch.
func (c *conv) micros(v parquet.Value) (int64, error) {
	switch v.Kind() {
	case parquet.Int64:
		return v.Int64() * c.mulMicros / c.divMicros, nil
	case parquet.Int32:
		if c.dateMicros {
			return int64(v.Int32()) * 86_400_000_000, nil
		}
	case parquet.Int96:
		// Nanoseconds of the day (8 bytes) then the Julian day (4 bytes), little-endian.
		b := v.Int96()
		nanos := int64(b[1])<<32 | int64(b[0])
		return (int64(b[2])-2440588)*86_400_000_000 + nanos/1000, nil
	}
	return 0, fmt.Errorf("encode %s key: a %s value", c.typ, v.Kind())
}

var pow10 = func() []*big.Int {
	p := make([]*big.Int, 39)
	for i := range p {
		p[i] = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(i)), nil)
	}
	return p
}()

// appendDecimal appends a decimal's unscaled value at the column's scale as 16 bytes.
func (c *conv) appendDecimal(dst []byte, v parquet.Value) ([]byte, error) {
	var b []byte
	var x int64
	switch v.Kind() {
	case parquet.Int32:
		x = int64(v.Int32())
	case parquet.Int64:
		x = v.Int64()
	case parquet.FixedLenByteArray, parquet.ByteArray:
		b = v.ByteArray()
	default:
		return dst, fmt.Errorf("encode %s key: a %s value", c.typ, v.Kind())
	}
	if c.rescale == 0 && b == nil {
		hi := uint64(x >> 63) // sign extension
		dst = binary.BigEndian.AppendUint64(dst, hi^1<<63)
		return binary.BigEndian.AppendUint64(dst, uint64(x)), nil
	}
	if c.rescale == 0 && len(b) <= 16 {
		var w [16]byte
		if len(b) > 0 && b[0]&0x80 != 0 {
			for i := range w {
				w[i] = 0xFF
			}
		}
		copy(w[16-len(b):], b)
		w[0] ^= 0x80
		return append(dst, w[:]...), nil
	}
	u := big.NewInt(x)
	if b != nil {
		u.SetBytes(b)
		if len(b) > 0 && b[0]&0x80 != 0 {
			u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
	}
	if c.rescale > 0 {
		u.Mul(u, pow10[c.rescale])
	}
	if u.BitLen() > 127 {
		return dst, fmt.Errorf("encode %s key: unscaled value %s does not fit 128 bits", c.typ, u)
	}
	if u.Sign() < 0 {
		u.Add(u, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	var w [16]byte
	u.FillBytes(w[:])
	w[0] ^= 0x80
	return append(dst, w[:]...), nil
}
