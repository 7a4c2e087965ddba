package deltawriter

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// This file reads existing data files back as rows of the table's current schema, for
// table maintenance (OPTIMIZE rewrites small files into larger ones).

// DataFileSchema returns the Parquet schema of the files this snapshot's table gets
// (ParquetSchema of the current schema under its column mapping), without the partition
// columns unless the table has the materializePartitionColumns writer feature, as the
// pipeline writes them. RowsToColumns and WriteDataFile take it.
func (s *Snapshot) DataFileSchema() (*parquet.Schema, error) {
	schema := s.Schema
	if !slices.Contains(s.Protocol.WriterFeatures, deltalog.FeatureMaterializePartitionColumns) && len(s.Metadata.PartitionColumns) > 0 {
		drop := map[string]bool{}
		for _, c := range s.Metadata.PartitionColumns {
			drop[deltalog.NameKey(c)] = true
		}
		narrow := &deltalog.StructType{}
		for _, f := range s.Schema.Fields {
			if !drop[deltalog.NameKey(f.Name)] {
				narrow.Fields = append(narrow.Fields, f)
			}
		}
		schema = narrow
	}
	pq, err := ParquetSchema(schema, s.ColumnMapping)
	if err != nil {
		return nil, fmt.Errorf("build data file schema: %w", err)
	}
	return pq, nil
}

// ReadDataFile calls fn with every live row of the data file of add, in file order,
// streaming one row group at a time (the file itself is read whole: maintenance reads
// small files). Rows its deletion vector marks deleted (ReadDeletionVector) are skipped.
// A row is a tree as RowsToColumns takes it, keyed by physical column names, conformed
// to the snapshot's current schema: columns the file lacks are nil, columns the table no
// longer has are dropped, and values of type-widened columns are widened (byte/short/int
// → long, double or decimal, float → double, date → timestamp_ntz, decimal precision
// and scale up; PROTOCOL.md "Type Widening"), INT96 and millisecond/nanosecond timestamps
// become µs. Inside arrays and maps values pass as read (integer widening still holds
// there; date → timestamp_ntz and decimal rescaling do not). It returns the number of rows
// read (live and deleted).
//
// Errors: the file or its deletion vector cannot be read, a value of a type that cannot
// be conformed (e.g. a decimal whose scale is larger than the table's), or fn's error.
func (s *Snapshot) ReadDataFile(ctx context.Context, st storage.Store, add deltalog.Add, fn func(row map[string]any) error) (int64, error) {
	del, err := ReadDeletionVector(ctx, st, add.DeletionVector)
	if err != nil {
		return 0, fmt.Errorf("read data file %s: %w", add.Path, err)
	}
	return s.readDataFile(ctx, st, add, del, fn)
}

// readDataFile is ReadDataFile skipping the rows del contains instead of those of add's
// deletion vector.
func (s *Snapshot) readDataFile(ctx context.Context, st storage.Store, add deltalog.Add, del *DeletedRows, fn func(row map[string]any) error) (int64, error) {
	rel := deltalog.CanonicalPath(add.Path)
	data, err := st.Get(ctx, rel)
	if err != nil {
		return 0, fmt.Errorf("read data file %s: %w", add.Path, err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return 0, fmt.Errorf("read data file %s: %w", add.Path, err)
	}
	fileSchema := f.Schema()
	byName := map[string]parquet.Field{}
	for _, fld := range fileSchema.Fields() {
		byName[fld.Name()] = fld
	}
	var idx uint64
	fields, leaves := fileSchema.Fields(), len(fileSchema.Columns())
	buf := make([]parquet.Row, 256)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, rerr := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				i := idx
				idx++
				if del.Contains(i) {
					continue
				}
				tree := assembleRowFields(fields, leaves, r)
				out, cerr := s.conformRow(tree, byName)
				if cerr == nil {
					cerr = fn(out)
				}
				if cerr != nil {
					_ = rows.Close()
					return int64(idx), fmt.Errorf("read data file %s row %d: %w", add.Path, i, cerr)
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				_ = rows.Close()
				return int64(idx), fmt.Errorf("read data file %s: %w", add.Path, rerr)
			}
		}
		if err := rows.Close(); err != nil {
			return int64(idx), fmt.Errorf("read data file %s: %w", add.Path, err)
		}
	}
	return int64(idx), nil
}

// conformRow maps one assembled row of a file onto the current schema's top-level fields.
func (s *Snapshot) conformRow(tree map[string]any, fileFields map[string]parquet.Field) (map[string]any, error) {
	out := make(map[string]any, len(s.Schema.Fields))
	for _, f := range s.Schema.Fields {
		name := physicalName(f, s.ColumnMapping)
		v, ok := tree[name]
		if !ok {
			continue
		}
		cv, err := conformValue(v, f.Type, fileFields[name])
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		out[name] = cv
	}
	return out, nil
}

// physicalName is the Parquet column name of a field under column mapping mode.
func physicalName(f *deltalog.StructField, mode deltalog.ColumnMappingMode) string {
	if mode != deltalog.ColumnMappingNone {
		if p, ok := f.Metadata[deltalog.MetaColumnMappingPhysicalName].(string); ok && p != "" {
			return p
		}
	}
	return f.Name
}

// conformValue converts v (assembleRow's shape) read from file node n (nil when unknown)
// to a value of Delta type t.
func conformValue(v any, t deltalog.DataType, n parquet.Node) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch t := t.(type) {
	case *deltalog.StructType:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("a %T for a struct", v)
		}
		sub := map[string]parquet.Field{}
		if n != nil && !n.Leaf() {
			for _, f := range n.Fields() {
				sub[f.Name()] = f
			}
		}
		out := make(map[string]any, len(t.Fields))
		for _, f := range t.Fields {
			name := f.Name
			if p, ok := f.Metadata[deltalog.MetaColumnMappingPhysicalName].(string); ok && p != "" {
				if _, has := m[p]; has {
					name = p
				}
			}
			fv, ok := m[name]
			if !ok {
				continue
			}
			cv, err := conformValue(fv, f.Type, sub[name])
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name, err)
			}
			out[name] = cv
		}
		return out, nil
	case *deltalog.ArrayType, *deltalog.MapType:
		return v, nil // element conversions inside lists and maps: values pass as read
	case deltalog.DecimalType:
		return conformDecimal(v, t, n)
	case deltalog.PrimitiveType:
		var fileKind parquet.Kind = -1
		isDate := false
		if n != nil && n.Leaf() {
			fileKind = n.Type().Kind()
			if lt := n.Type().LogicalType(); lt != nil {
				_, isDate = lt.Value.(*format.DateType)
			}
		}
		switch t {
		case deltalog.Double:
			switch x := v.(type) {
			case int64:
				return float64(x), nil
			}
		case deltalog.Float:
			if x, ok := v.(float64); ok {
				return float32(x), nil
			}
		case deltalog.Timestamp, deltalog.TimestampNtz:
			if b, ok := v.([]byte); ok && fileKind == parquet.Int96 && len(b) == 12 {
				nanos := int64(binary.LittleEndian.Uint64(b[:8]))
				julian := int64(binary.LittleEndian.Uint32(b[8:]))
				return (julian-2440588)*86_400_000_000 + nanos/1000, nil
			}
			if x, ok := v.(int64); ok && isDate && t == deltalog.TimestampNtz {
				return x * 86_400_000_000, nil
			}
			if x, ok := v.(int64); ok && n != nil && n.Leaf() {
				if lt := n.Type().LogicalType(); lt != nil {
					if ts, ok := lt.Value.(*format.TimestampType); ok {
						switch ts.Unit.Value.(type) {
						case *format.MilliSeconds:
							return x * 1000, nil
						case *format.NanoSeconds:
							return x / 1000, nil
						}
					}
				}
			}
		}
		return v, nil
	}
	return v, nil
}

// conformDecimal converts a decimal value read from file node n to decimal type t: a
// decimal of a smaller scale or precision (Delta type widening) or an integer (byte,
// short, int, long → decimal) is rescaled; the result is int64 for precision <= 18, else
// DecimalBytes(precision) big-endian two's-complement bytes (ParquetSchema's layout).
func conformDecimal(v any, t deltalog.DecimalType, n parquet.Node) (any, error) {
	fromScale, isDecimal := 0, false
	if n != nil && n.Leaf() {
		if lt := n.Type().LogicalType(); lt != nil {
			if d, ok := lt.Value.(*format.DecimalType); ok {
				fromScale, isDecimal = int(d.Scale), true
			}
		}
		if !isDecimal && n.Type().Kind() != parquet.Int32 && n.Type().Kind() != parquet.Int64 {
			return nil, fmt.Errorf("a %v value for decimal(%d,%d)", n.Type(), t.Precision, t.Scale)
		}
	}
	u := new(big.Int)
	switch x := v.(type) {
	case int64:
		u.SetInt64(x)
	case []byte:
		u = twosComplement(x)
	case string:
		u = twosComplement([]byte(x))
	default:
		return nil, fmt.Errorf("a %T value for decimal(%d,%d)", v, t.Precision, t.Scale)
	}
	if fromScale > t.Scale {
		return nil, fmt.Errorf("decimal scale %d narrowed to %d", fromScale, t.Scale)
	}
	if fromScale < t.Scale {
		u.Mul(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Scale-fromScale)), nil))
	}
	if t.Precision <= 18 {
		if !u.IsInt64() {
			return nil, fmt.Errorf("decimal value %s does not fit decimal(%d,%d)", u, t.Precision, t.Scale)
		}
		return u.Int64(), nil
	}
	w := DecimalBytes(t.Precision)
	out := make([]byte, w)
	b := u.Bytes() // magnitude
	if len(b) > w {
		return nil, fmt.Errorf("decimal value %s does not fit decimal(%d,%d)", u, t.Precision, t.Scale)
	}
	if u.Sign() >= 0 {
		copy(out[w-len(b):], b)
		return out, nil
	}
	// Negative: two's complement of the magnitude over w bytes.
	m := new(big.Int).Lsh(big.NewInt(1), uint(8*w))
	m.Add(m, u)
	mb := m.Bytes()
	for i := range out[:w-len(mb)] {
		out[i] = 0xFF
	}
	copy(out[w-len(mb):], mb)
	return out, nil
}

// twosComplement reads big-endian two's-complement bytes.
func twosComplement(b []byte) *big.Int {
	u := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return u
}
