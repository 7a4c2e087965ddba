package deltawriter

import (
	"fmt"
	"sort"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// This file converts between generic row trees and Parquet leaf-column values with
// repetition and definition levels (Dremel shredding/assembly). It is used for
// checkpoints, which are small, and by tests; the ingest hot path produces column values
// directly.
//
// Tree shapes: a group is map[string]any keyed by column name, a LIST is []any of
// elements, a MAP is []mapEntry (shred) or map[string]any keyed by the key's string form
// (assemble), a null is nil. Leaves are Go scalars: bool, int32, int64, float32,
// float64, string, []byte, or a parquet.Value.

type mapEntry struct {
	Key, Value any
}

// shredRows appends the leaf values of rows to cols (one slice per leaf column of
// schema, in schema.Columns() order).
func shredRows(schema *parquet.Schema, rows []map[string]any) ([][]parquet.Value, error) {
	cols := make([][]parquet.Value, len(schema.Columns()))
	fields := schema.Fields() // sorted anew on every call: once per batch, not per row
	for _, r := range rows {
		col := 0
		for _, f := range fields {
			var err error
			col, err = shredField(cols, f, r[f.Name()], 0, 0, 0, col)
			if err != nil {
				return nil, err
			}
		}
	}
	return cols, nil
}

// shredField shreds value v of field f whose parent has repetition level maxRep and
// definition level def; rep is the repetition level of the first value emitted.
func shredField(cols [][]parquet.Value, f parquet.Field, v any, rep, def, maxRep, col int) (int, error) {
	switch {
	case f.Repeated():
		items, ok := v.([]any)
		if !ok && v != nil {
			return 0, fmt.Errorf("shred %s: repeated field needs []any, got %T", f.Name(), v)
		}
		if len(items) == 0 {
			return shredNulls(cols, f, rep, def, col), nil
		}
		next := col
		for i, it := range items {
			r := rep
			if i > 0 {
				r = maxRep + 1
			}
			var err error
			if next, err = shredValue(cols, f, it, r, def+1, maxRep+1, col); err != nil {
				return 0, err
			}
		}
		return next, nil
	case f.Optional():
		if v == nil {
			return shredNulls(cols, f, rep, def, col), nil
		}
		return shredValue(cols, f, v, rep, def+1, maxRep, col)
	default:
		if v == nil {
			return 0, fmt.Errorf("shred %s: null for a required field", f.Name())
		}
		return shredValue(cols, f, v, rep, def, maxRep, col)
	}
}

func shredValue(cols [][]parquet.Value, f parquet.Field, v any, rep, def, maxRep, col int) (int, error) {
	if f.Leaf() {
		pv, err := leafValue(f, v)
		if err != nil {
			return 0, err
		}
		cols[col] = append(cols[col], pv.Level(rep, def, col))
		return col + 1, nil
	}
	fields := f.Fields()
	if (isListNode(f) || isMapNode(f)) && len(fields) == 1 {
		// LIST / MAP: the single repeated child holds the elements or key/value pairs.
		inner := fields[0]
		var items []any
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				items = append(items, map[string]any{inner.Fields()[0].Name(): e})
			}
		case []mapEntry:
			kf, vf := inner.Fields()[0].Name(), inner.Fields()[1].Name()
			for _, e := range x {
				items = append(items, map[string]any{kf: e.Key, vf: e.Value})
			}
		case map[string]string: // convenience for string maps, in key order
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			kf, vf := inner.Fields()[0].Name(), inner.Fields()[1].Name()
			for _, k := range keys {
				items = append(items, map[string]any{kf: k, vf: x[k]})
			}
		default:
			return 0, fmt.Errorf("shred %s: list/map needs []any or []mapEntry, got %T", f.Name(), v)
		}
		return shredField(cols, inner, items, rep, def, maxRep, col)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return 0, fmt.Errorf("shred %s: group needs map[string]any, got %T", f.Name(), v)
	}
	for _, c := range fields {
		var err error
		if col, err = shredField(cols, c, m[c.Name()], rep, def, maxRep, col); err != nil {
			return 0, err
		}
	}
	return col, nil
}

func shredNulls(cols [][]parquet.Value, n parquet.Node, rep, def, col int) int {
	if n.Leaf() {
		cols[col] = append(cols[col], parquet.NullValue().Level(rep, def, col))
		return col + 1
	}
	for _, c := range n.Fields() {
		col = shredNulls(cols, c, rep, def, col)
	}
	return col
}

func leafValue(f parquet.Field, v any) (parquet.Value, error) {
	var pv parquet.Value
	switch x := v.(type) {
	case parquet.Value:
		return x, nil
	case bool:
		pv = parquet.BooleanValue(x)
	case int32:
		pv = parquet.Int32Value(x)
	case int:
		if f.Type().Kind() == parquet.Int32 {
			pv = parquet.Int32Value(int32(x))
		} else {
			pv = parquet.Int64Value(int64(x))
		}
	case int64:
		if f.Type().Kind() == parquet.Int32 {
			pv = parquet.Int32Value(int32(x))
		} else {
			pv = parquet.Int64Value(x)
		}
	case float32:
		pv = parquet.FloatValue(x)
	case float64:
		if f.Type().Kind() == parquet.Float {
			pv = parquet.FloatValue(float32(x)) // a float read back as float64 (goValue)
		} else {
			pv = parquet.DoubleValue(x)
		}
	case string:
		pv = parquet.ByteArrayValue([]byte(x))
	case []byte:
		if f.Type().Kind() == parquet.FixedLenByteArray {
			pv = parquet.FixedLenByteArrayValue(x)
		} else {
			pv = parquet.ByteArrayValue(x)
		}
	default:
		return pv, fmt.Errorf("shred %s: unsupported leaf value %T", f.Name(), v)
	}
	if pv.Kind() != f.Type().Kind() {
		return pv, fmt.Errorf("shred %s: %v value for a %v column", f.Name(), pv.Kind(), f.Type().Kind())
	}
	return pv, nil
}

// assembleRow turns one row (its values in any order) back into a tree per the file
// schema. It accepts the standard and the common non-standard LIST/MAP group names
// (e.g. delta-rs checkpoints use "entries" for maps).
func assembleRow(schema *parquet.Schema, row parquet.Row) map[string]any {
	return assembleRowFields(schema.Fields(), len(schema.Columns()), row)
}

// assembleRowFields is assembleRow with the schema's top-level fields and leaf count
// computed once by the caller (parquet-go sorts the fields on every Fields call).
func assembleRowFields(fields []parquet.Field, leaves int, row parquet.Row) map[string]any {
	cols := make([][]parquet.Value, leaves)
	for _, v := range row {
		cols[v.Column()] = append(cols[v.Column()], v)
	}
	out := make(map[string]any, len(fields))
	col := 0
	for _, f := range fields {
		n := countLeaves(f)
		out[f.Name()] = assembleField(f, cols[col:col+n], 0, 0)
		col += n
	}
	return out
}

func countLeaves(n parquet.Node) int {
	if n.Leaf() {
		return 1
	}
	c := 0
	for _, f := range n.Fields() {
		c += countLeaves(f)
	}
	return c
}

// assembleField rebuilds field f from the values of its leaves (cols) for one instance
// of its parent; def and rep are the parent's definition and repetition levels.
func assembleField(f parquet.Node, cols [][]parquet.Value, def, rep int) any {
	if len(cols) == 0 || len(cols[0]) == 0 {
		return nil
	}
	switch {
	case f.Repeated():
		if cols[0][0].DefinitionLevel() <= def {
			return []any{}
		}
		var items []any
		for _, part := range splitRepeated(cols, rep+1) {
			items = append(items, assembleValue(f, part, def+1, rep+1))
		}
		return items
	case f.Optional():
		if cols[0][0].DefinitionLevel() <= def {
			return nil
		}
		return assembleValue(f, cols, def+1, rep)
	default:
		return assembleValue(f, cols, def, rep)
	}
}

// splitRepeated cuts each leaf's values into element instances: a new element starts
// at every value whose repetition level is <= rep (except the first).
func splitRepeated(cols [][]parquet.Value, rep int) [][][]parquet.Value {
	var parts [][][]parquet.Value
	for ci, c := range cols {
		k := -1
		for i, v := range c {
			if i == 0 || v.RepetitionLevel() <= rep {
				k++
				if ci == 0 {
					parts = append(parts, make([][]parquet.Value, len(cols)))
				}
			}
			if k < len(parts) {
				parts[k][ci] = append(parts[k][ci], v)
			}
		}
	}
	return parts
}

func assembleValue(f parquet.Node, cols [][]parquet.Value, def, rep int) any {
	if f.Leaf() {
		return goValue(cols[0][0])
	}
	fields := f.Fields()
	if (isListNode(f) || isMapNode(f)) && len(fields) == 1 && fields[0].Repeated() {
		inner := fields[0]
		elems, _ := assembleField(inner, cols, def, rep).([]any)
		if isMapNode(f) && !inner.Leaf() && len(inner.Fields()) == 2 {
			kn, vn := inner.Fields()[0].Name(), inner.Fields()[1].Name()
			m := make(map[string]any, len(elems))
			for _, e := range elems {
				kv := e.(map[string]any)
				m[fmt.Sprint(kv[kn])] = kv[vn]
			}
			return m
		}
		if !inner.Leaf() && len(inner.Fields()) == 1 && inner.Name() != "array" {
			en := inner.Fields()[0].Name()
			for i, e := range elems {
				elems[i] = e.(map[string]any)[en]
			}
		}
		return elems
	}
	out := make(map[string]any, len(fields))
	col := 0
	for _, c := range fields {
		n := countLeaves(c)
		out[c.Name()] = assembleField(c, cols[col:col+n], def, rep)
		col += n
	}
	return out
}

func isListNode(n parquet.Node) bool {
	if lt := n.Type().LogicalType(); lt != nil {
		if _, ok := lt.Value.(*format.ListType); ok {
			return true
		}
	}
	ct := n.Type().ConvertedType()
	return ct != nil && *ct == deprecated.List
}

func isMapNode(n parquet.Node) bool {
	if lt := n.Type().LogicalType(); lt != nil {
		if _, ok := lt.Value.(*format.MapType); ok {
			return true
		}
	}
	ct := n.Type().ConvertedType()
	return ct != nil && (*ct == deprecated.Map || *ct == deprecated.MapKeyValue)
}

func goValue(v parquet.Value) any {
	if v.IsNull() {
		return nil
	}
	switch v.Kind() {
	case parquet.Boolean:
		return v.Boolean()
	case parquet.Int32:
		return int64(v.Int32())
	case parquet.Int64:
		return v.Int64()
	case parquet.Float:
		return float64(v.Float())
	case parquet.Double:
		return v.Double()
	case parquet.ByteArray:
		return string(v.ByteArray())
	default:
		return append([]byte(nil), v.ByteArray()...)
	}
}

// MapEntry is one key/value pair of a MAP value given to RowsToColumns (a map column's
// value is a []MapEntry, in the order to write).
type MapEntry = mapEntry

// RowsToColumns shreds row trees into the leaf column values WriteDataFile takes, for
// tools and tests (the ingest hot path produces column values directly). A row is a
// map[string]any keyed by Parquet column name (physical names under column mapping); a
// struct is a map[string]any, an array a []any, a map a []MapEntry, a null nil; leaves are
// bool, int32, int64, float32, float64, string or []byte (FIXED_LEN_BYTE_ARRAY for wide
// decimals: big-endian two's complement of DecimalBytes(precision) bytes). Dates are int32
// days and timestamps int64 µs since the Unix epoch.
func RowsToColumns(schema *parquet.Schema, rows []map[string]any) ([][]parquet.Value, error) {
	return shredRows(schema, rows)
}
