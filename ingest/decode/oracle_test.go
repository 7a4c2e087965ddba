package decode

// Test oracle: random Avro schemas, valid Avro bytes for them (with every block layout the
// spec allows, sign-extended decimals, edge values), hamba/avro's generic decoding turned
// into a canonical value, and our column values reassembled (Dremel) into the same
// canonical form. Used by FuzzDifferential and the datagen folder test.

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// ---- schema generation ----

type schemaGen struct {
	r     *rand.Rand
	names int
}

func (g *schemaGen) name(prefix string) string {
	g.names++
	return fmt.Sprintf("%s%d", prefix, g.names)
}

var genPrimitives = []string{"boolean", "int", "long", "float", "double", "string", "bytes"}

// schema returns a random top-level schema (a record, sometimes [null, record]) as JSON.
func (g *schemaGen) schema() string {
	var top any = g.record(0)
	if g.r.IntN(8) == 0 {
		top = []any{"null", top}
	}
	b, err := json.Marshal(top)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (g *schemaGen) record(depth int) map[string]any {
	n := 1 + g.r.IntN(5)
	fields := make([]any, n)
	for i := range fields {
		var t any
		switch {
		case i == 0:
			t = g.leaf() // a data field, so nested records are never empty
		case g.r.IntN(20) == 0:
			t = "null" // a null-typed field: carries no data
		default:
			t = g.typ(depth + 1)
		}
		fields[i] = map[string]any{"name": fmt.Sprintf("f%d", i), "type": t}
	}
	return map[string]any{"type": "record", "name": g.name("R"), "fields": fields}
}

func (g *schemaGen) leaf() any {
	switch k := g.r.IntN(22); {
	case k < 7:
		return genPrimitives[k]
	case k == 7:
		return map[string]any{"type": "int", "logicalType": "date"}
	case k == 8:
		return map[string]any{"type": "int", "logicalType": "time-millis"}
	case k == 9:
		return map[string]any{"type": "long", "logicalType": "time-micros"}
	case k == 10:
		return map[string]any{"type": "long", "logicalType": "timestamp-millis"}
	case k == 11:
		return map[string]any{"type": "long", "logicalType": "timestamp-micros"}
	case k == 12:
		return map[string]any{"type": "long", "logicalType": "local-timestamp-millis"}
	case k == 13:
		return map[string]any{"type": "long", "logicalType": "local-timestamp-micros"}
	case k == 14:
		return map[string]any{"type": "string", "logicalType": "uuid"}
	case k == 15, k == 16:
		p := 1 + g.r.IntN(38)
		return map[string]any{"type": "bytes", "logicalType": "decimal", "precision": p, "scale": g.r.IntN(p + 1)}
	case k == 17:
		size := 1 + g.r.IntN(17)
		p := 1 + g.r.IntN(min(38, maxFixedDigits(size)))
		return map[string]any{"type": "fixed", "name": g.name("D"), "size": size, "logicalType": "decimal", "precision": p, "scale": g.r.IntN(p + 1)}
	case k == 18:
		return map[string]any{"type": "fixed", "name": g.name("F"), "size": g.r.IntN(6)}
	default:
		syms := make([]string, 1+g.r.IntN(4))
		for i := range syms {
			syms[i] = fmt.Sprintf("S%d", i)
		}
		return map[string]any{"type": "enum", "name": g.name("E"), "symbols": syms}
	}
}

func (g *schemaGen) typ(depth int) any {
	if depth >= 4 {
		return g.leaf()
	}
	switch g.r.IntN(12) {
	case 0:
		return g.record(depth)
	case 1:
		return map[string]any{"type": "array", "items": g.typ(depth + 1)}
	case 2:
		return map[string]any{"type": "map", "values": g.typ(depth + 1)}
	case 3, 4:
		t := g.typ(depth + 1)
		if _, isUnion := t.([]any); isUnion {
			return t
		}
		if g.r.IntN(2) == 0 {
			return []any{"null", t}
		}
		return []any{t, "null"}
	case 5:
		return g.multiUnion(depth)
	}
	return g.leaf()
}

// multiUnion returns a union of ≥ 2 non-null branches with distinct types, so that
// hamba's generic result identifies its branch.
func (g *schemaGen) multiUnion(depth int) any {
	var out []any
	if g.r.IntN(2) == 0 {
		out = append(out, "null")
	}
	perm := g.r.Perm(len(genPrimitives))
	for _, i := range perm[:2+g.r.IntN(2)] {
		out = append(out, genPrimitives[i])
	}
	switch g.r.IntN(4) {
	case 0:
		out = append(out, g.record(depth+1))
	case 1:
		out = append(out, map[string]any{"type": "array", "items": g.leaf()})
	}
	g.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// ---- valid value bytes ----

type valueGen struct {
	r   *rand.Rand
	out []byte
}

func (g *valueGen) varint(v int64) {
	g.out = binary.AppendVarint(g.out, v)
}

func (g *valueGen) int64Edge(bits int) int64 {
	return g.within(-1<<(bits-1), 1<<(bits-1)-1)
}

// within returns a value in lo..hi (lo ≤ 0 ≤ hi): an edge (lo, hi, 0, -1), a small
// value, or one drawn from the whole range.
func (g *valueGen) within(lo, hi int64) int64 {
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return -1
	case 2:
		return hi
	case 3:
		return lo
	case 4:
		return g.r.Int64N(200) - 100
	}
	span := uint64(hi - lo) // wraps for the whole int64 range: math.MaxUint64
	if span == math.MaxUint64 {
		return int64(g.r.Uint64())
	}
	return lo + int64(g.r.Uint64N(span+1))
}

func (g *valueGen) raw(n int) {
	for i := 0; i < n; i++ {
		g.out = append(g.out, byte(g.r.IntN(256)))
	}
}

// text appends an Avro string of n characters, each of 1 to 4 UTF-8 bytes (ASCII, é,
// €, U+10FFFF and a random one), with its length.
func (g *valueGen) text(n int) {
	var b []byte
	for range n {
		switch g.r.IntN(5) {
		case 0:
			b = utf8.AppendRune(b, 'é')
		case 1:
			b = utf8.AppendRune(b, '€')
		case 2:
			b = utf8.AppendRune(b, utf8.MaxRune)
		case 3:
			b = utf8.AppendRune(b, rune(g.r.IntN(0xD800)))
		default:
			b = append(b, byte(0x20+g.r.IntN(0x5f)))
		}
	}
	g.varint(int64(len(b)))
	g.out = append(g.out, b...)
}

func (g *valueGen) value(s avro.Schema, depth int) {
	switch s := deref(s).(type) {
	case *avro.NullSchema:
	case *avro.RecordSchema:
		for _, f := range s.Fields() {
			g.value(f.Type(), depth+1)
		}
	case *avro.UnionSchema:
		i := g.r.IntN(len(s.Types()))
		g.varint(int64(i))
		g.value(s.Types()[i], depth+1)
	case *avro.ArraySchema:
		g.blocks(2-min(depth/3, 2), func() { g.value(s.Items(), depth+1) }, false)
	case *avro.MapSchema:
		g.blocks(2-min(depth/3, 2), func() { g.value(s.Values(), depth+1) }, true)
	case *avro.EnumSchema:
		g.varint(int64(g.r.IntN(len(s.Symbols()))))
	case *avro.FixedSchema:
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			u := g.unscaled(d.Precision())
			g.out = append(g.out, twosComplement(u, s.Size())...)
			return
		}
		g.raw(s.Size())
	case *avro.PrimitiveSchema:
		var lt avro.LogicalType
		if l := s.Logical(); l != nil {
			lt = l.Type()
		}
		switch s.Type() {
		case avro.Boolean:
			g.out = append(g.out, byte(g.r.IntN(2)))
		case avro.Int:
			if lt == avro.Date { // valid: within Delta's date range
				g.varint(g.within(int64(deltalog.DateMinDays), int64(deltalog.DateMaxDays)))
				return
			}
			g.varint(g.int64Edge(32))
		case avro.Long:
			v := g.int64Edge(64)
			switch lt {
			case avro.TimestampMicros, avro.LocalTimestampMicros: // valid: within Delta's timestamp range
				v = g.within(deltalog.TimestampMinMicros, deltalog.TimestampMaxMicros)
			case avro.TimestampMillis, avro.LocalTimestampMillis:
				v = g.within(deltalog.TimestampMinMicros/1000, deltalog.TimestampMaxMicros/1000)
			case avro.TimeMicros:
				v /= 1000 // stays within int64 nanoseconds
			}
			g.varint(v)
		case avro.Float:
			g.raw(4)
		case avro.Double:
			g.raw(8)
		case avro.String, avro.Bytes:
			if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
				u := g.unscaled(d.Precision())
				b := twosComplement(u, 0)
				if g.r.IntN(4) == 0 { // redundant sign extension is still the same number
					fill := byte(0)
					if u.Sign() < 0 {
						fill = 0xff
					}
					b = append([]byte{fill, fill}, b...)
				}
				if u.Sign() == 0 && g.r.IntN(2) == 0 {
					b = nil
				}
				g.varint(int64(len(b)))
				g.out = append(g.out, b...)
				return
			}
			n := g.r.IntN(9)
			if s.Type() == avro.String {
				g.text(n) // an Avro string is UTF-8 (badUTF8)
				return
			}
			g.varint(int64(n))
			g.raw(n)
		}
	}
}

// unscaled returns a random integer with |v| < 10^p.
func (g *valueGen) unscaled(p int) *big.Int {
	digits := 1 + g.r.IntN(p)
	if g.r.IntN(4) == 0 {
		digits = p
	}
	lim := bigPow10(digits)
	raw := make([]byte, 18)
	for i := range raw {
		raw[i] = byte(g.r.IntN(256))
	}
	v := new(big.Int).Mod(new(big.Int).SetBytes(raw), lim)
	if g.r.IntN(2) == 0 {
		v.Neg(v)
	}
	return v
}

// blocks writes n items as 1–3 blocks, some with a negative count and a byte size.
func (g *valueGen) blocks(maxItems int, item func(), keyed bool) {
	n := g.r.IntN(maxItems + 2)
	key := 0
	for n > 0 {
		k := 1 + g.r.IntN(n)
		n -= k
		var body []byte
		saved := g.out
		g.out = nil
		for i := 0; i < k; i++ {
			if keyed {
				kb := fmt.Sprintf("k%d", key)
				key++
				g.varint(int64(len(kb)))
				g.out = append(g.out, kb...)
			}
			item()
		}
		body, g.out = g.out, saved
		if g.r.IntN(3) == 0 {
			g.varint(int64(-k))
			g.varint(int64(len(body)))
		} else {
			g.varint(int64(k))
		}
		g.out = append(g.out, body...)
	}
	g.varint(0)
}

func twosComplement(v *big.Int, width int) []byte {
	n := (v.BitLen() + 8) / 8 // room for the sign bit
	if width < n {
		width = n
	}
	x := new(big.Int).Set(v)
	if x.Sign() < 0 {
		x.Add(x, new(big.Int).Lsh(big.NewInt(1), uint(8*width)))
	}
	out := make([]byte, width)
	x.FillBytes(out)
	return out
}

// ---- canonical values ----
//
// null → nil; boolean → bool; integer, long, date (days), timestamp (µs), time → int64;
// float, double → "f32:<bits>", "f64:<bits>" (exact, NaN-safe); string → string;
// binary → "0x<hex>"; decimal(p,s) → its exact decimal string with s digits; struct →
// map[string]any by column name; array → []any; map → map[string]any.

func floatBits32(f float32) string { return fmt.Sprintf("f32:%08x", math.Float32bits(f)) }
func floatBits64(f float64) string { return fmt.Sprintf("f64:%016x", math.Float64bits(f)) }

// canonHamba converts hamba's generic decoding of writer type w into the canonical form of
// the Delta type ToDelta gives w.
func canonHamba(w avro.Schema, v any) (any, error) {
	switch s := deref(w).(type) {
	case *avro.NullSchema:
		return nil, nil
	case *avro.RecordSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("record %s: %T", s.FullName(), v)
		}
		out := make(map[string]any)
		for _, f := range s.Fields() {
			if carriesNoData(f.Type()) {
				continue
			}
			c, err := canonHamba(f.Type(), m[f.Name()])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name(), err)
			}
			out[f.Name()] = c
		}
		return out, nil
	case *avro.UnionSchema:
		if v == nil {
			return nil, nil
		}
		var nonNull []avro.Schema
		for _, b := range s.Types() {
			if b.Type() != avro.Null {
				nonNull = append(nonNull, b)
			}
		}
		k, inner, err := unionBranch(nonNull, v)
		if err != nil {
			return nil, err
		}
		c, err := canonHamba(nonNull[k], inner)
		if err != nil || len(nonNull) == 1 {
			return c, err
		}
		out := make(map[string]any, len(nonNull))
		for i := range nonNull {
			out[memberName(i)] = nil
		}
		out[memberName(k)] = c
		return out, nil
	case *avro.ArraySchema:
		a, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("array: %T", v)
		}
		out := make([]any, len(a))
		for i, x := range a {
			c, err := canonHamba(s.Items(), x)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case *avro.MapSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("map: %T", v)
		}
		out := make(map[string]any, len(m))
		for k, x := range m {
			c, err := canonHamba(s.Values(), x)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	}
	k, err := classify(deref(w))
	if err != nil {
		return nil, err
	}
	switch k.base {
	case kBool:
		return v.(bool), nil
	case kInt:
		return int64(v.(int)), nil
	case kLong:
		return v.(int64), nil
	case kFloat:
		return floatBits32(v.(float32)), nil
	case kDouble:
		return floatBits64(v.(float64)), nil
	case kString, kUUID, kEnum:
		return v.(string), nil
	case kBytes:
		return "0x" + hex.EncodeToString(v.([]byte)), nil
	case kFixed:
		rv := reflect.ValueOf(v)
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return "0x" + hex.EncodeToString(b), nil
	case kDate:
		return v.(time.Time).Unix() / 86400, nil
	case kTimeMillis:
		return int64(v.(time.Duration) / time.Millisecond), nil
	case kTimeMicros:
		return int64(v.(time.Duration)) / 1000, nil
	case kTsMillis, kTsMicros:
		return v.(time.Time).UnixMicro(), nil
	case kLocalTsMillis, kLocalTsMicros:
		t := v.(time.Time) // hamba shifts local timestamps by the zone offset: undo it
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC).UnixMicro(), nil
	case kDecimalBytes, kDecimalFixed:
		return v.(*big.Rat).FloatString(k.scale), nil
	}
	return nil, fmt.Errorf("no canonical form for %s", w.Type())
}

// unionBranch finds which non-null branch hamba decoded: named (or, when any branch is
// named, every) branch comes wrapped as {typeName: value}; otherwise by Go type.
func unionBranch(branches []avro.Schema, v any) (int, any, error) {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for i, b := range branches {
			if x, ok := m[hambaTypeName(b)]; ok {
				return i, x, nil
			}
		}
	}
	if len(branches) == 1 {
		return 0, v, nil
	}
	for i, b := range branches {
		var ok bool
		switch deref(b).Type() {
		case avro.Boolean:
			_, ok = v.(bool)
		case avro.Int:
			_, ok = v.(int)
		case avro.Long:
			_, ok = v.(int64)
		case avro.Float:
			_, ok = v.(float32)
		case avro.Double:
			_, ok = v.(float64)
		case avro.String:
			_, ok = v.(string)
		case avro.Bytes:
			_, ok = v.([]byte)
		case avro.Array:
			_, ok = v.([]any)
		case avro.Map:
			_, ok = v.(map[string]any)
		}
		if ok {
			return i, v, nil
		}
	}
	return 0, nil, fmt.Errorf("union value %T matches no branch", v)
}

func hambaTypeName(s avro.Schema) string {
	s = deref(s)
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	name := string(s.Type())
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		name += "." + string(ls.Logical().Type())
	}
	return name
}

// rowReader reassembles one table row from Dremel column values (the decoder's layout:
// every struct field, list element and map value optional; map keys required).
type rowReader struct {
	pq   *parquet.Schema
	cols [][]parquet.Value
	pos  []int
}

func newRowReader(pq *parquet.Schema, cols [][]parquet.Value) *rowReader {
	return &rowReader{pq: pq, cols: cols, pos: make([]int, len(cols))}
}

func (rr *rowReader) leaves(t deltalog.DataType, path []string) []int {
	switch t := t.(type) {
	case *deltalog.StructType:
		var out []int
		for _, f := range t.Fields {
			out = append(out, rr.leaves(f.Type, extend(path, f.Name))...)
		}
		return out
	case *deltalog.ArrayType:
		return rr.leaves(t.ElementType, extend(path, "list", "element"))
	case *deltalog.MapType:
		return append(rr.leaves(t.KeyType, extend(path, "key_value", "key")), rr.leaves(t.ValueType, extend(path, "key_value", "value"))...)
	}
	lc, ok := rr.pq.Lookup(path...)
	if !ok {
		panic(fmt.Sprintf("no column %q", path))
	}
	return []int{lc.ColumnIndex}
}

func (rr *rowReader) peek(col int) (parquet.Value, error) {
	if rr.pos[col] >= len(rr.cols[col]) {
		return parquet.Value{}, fmt.Errorf("column %d exhausted", col)
	}
	return rr.cols[col][rr.pos[col]], nil
}

func (rr *rowReader) skipAll(leaves []int) {
	for _, c := range leaves {
		rr.pos[c]++
	}
}

// row reads one top-level row of table.
func (rr *rowReader) row(table *deltalog.StructType) (map[string]any, error) {
	out := make(map[string]any, len(table.Fields))
	for _, f := range table.Fields {
		v, err := rr.read(f.Type, []string{f.Name}, 1, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		out[f.Name] = v
	}
	return out, nil
}

// read reads the value of a node present at definition level def, inside rep repeated
// ancestors.
func (rr *rowReader) read(t deltalog.DataType, path []string, def, rep int) (any, error) {
	leaves := rr.leaves(t, path)
	first, err := rr.peek(leaves[0])
	if err != nil {
		return nil, err
	}
	if first.DefinitionLevel() < def {
		rr.skipAll(leaves)
		return nil, nil
	}
	switch t := t.(type) {
	case *deltalog.StructType:
		out := make(map[string]any, len(t.Fields))
		for _, f := range t.Fields {
			v, err := rr.read(f.Type, extend(path, f.Name), def+1, rep)
			if err != nil {
				return nil, err
			}
			out[f.Name] = v
		}
		return out, nil
	case *deltalog.ArrayType, *deltalog.MapType:
		if first.DefinitionLevel() == def { // present and empty
			rr.skipAll(leaves)
			if _, ok := t.(*deltalog.MapType); ok {
				return map[string]any{}, nil
			}
			return []any{}, nil
		}
		var list []any
		m := map[string]any{}
		for {
			switch t := t.(type) {
			case *deltalog.ArrayType:
				v, err := rr.read(t.ElementType, extend(path, "list", "element"), def+2, rep+1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			case *deltalog.MapType:
				kcol := rr.leaves(t.KeyType, extend(path, "key_value", "key"))[0]
				kv, err := rr.peek(kcol)
				if err != nil {
					return nil, err
				}
				rr.pos[kcol]++
				v, err := rr.read(t.ValueType, extend(path, "key_value", "value"), def+2, rep+1)
				if err != nil {
					return nil, err
				}
				m[string(kv.ByteArray())] = v
			}
			next, err := rr.peek(leaves[0])
			if err != nil || next.RepetitionLevel() != rep+1 {
				break
			}
		}
		if _, ok := t.(*deltalog.MapType); ok {
			return m, nil
		}
		return list, nil
	}
	rr.pos[leaves[0]]++
	return canonLeaf(t, first)
}

func canonLeaf(t deltalog.DataType, v parquet.Value) (any, error) {
	if dt, ok := t.(deltalog.DecimalType); ok {
		var u *big.Int
		switch v.Kind() {
		case parquet.Int32:
			u = big.NewInt(int64(v.Int32()))
		case parquet.Int64:
			u = big.NewInt(v.Int64())
		default:
			b := v.ByteArray()
			u = new(big.Int).SetBytes(b)
			if len(b) > 0 && b[0]&0x80 != 0 {
				u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
			}
		}
		return new(big.Rat).SetFrac(u, bigPow10(dt.Scale)).FloatString(dt.Scale), nil
	}
	switch t {
	case deltalog.Boolean:
		return v.Boolean(), nil
	case deltalog.Integer, deltalog.Date:
		return int64(v.Int32()), nil
	case deltalog.Long, deltalog.Timestamp, deltalog.TimestampNtz:
		return v.Int64(), nil
	case deltalog.Float:
		return floatBits32(v.Float()), nil
	case deltalog.Double:
		return floatBits64(v.Double()), nil
	case deltalog.String:
		return string(v.ByteArray()), nil
	case deltalog.Binary:
		return "0x" + hex.EncodeToString(v.ByteArray()), nil
	}
	return nil, fmt.Errorf("no canonical form for %s", t)
}

// canonTimeMicros makes our time-micros column comparable with hamba's time.Duration,
// which overflows (wraps) beyond ±2^63 ns.
func canonTimeMicros(w avro.Schema, v any) any {
	if m, ok := v.(map[string]any); ok {
		if rs, ok := deref(w).(*avro.RecordSchema); ok {
			for _, f := range rs.Fields() {
				if x, ok := m[f.Name()]; ok {
					m[f.Name()] = canonTimeMicros(f.Type(), x)
				}
			}
			return m
		}
	}
	switch s := deref(w).(type) {
	case *avro.UnionSchema:
		var nonNull []avro.Schema
		for _, b := range s.Types() {
			if b.Type() != avro.Null {
				nonNull = append(nonNull, b)
			}
		}
		if len(nonNull) == 1 {
			return canonTimeMicros(nonNull[0], v)
		}
		if m, ok := v.(map[string]any); ok {
			for i, b := range nonNull {
				m[memberName(i)] = canonTimeMicros(b, m[memberName(i)])
			}
		}
		return v
	case *avro.ArraySchema:
		if a, ok := v.([]any); ok {
			for i := range a {
				a[i] = canonTimeMicros(s.Items(), a[i])
			}
		}
		return v
	case *avro.MapSchema:
		if m, ok := v.(map[string]any); ok {
			for k := range m {
				m[k] = canonTimeMicros(s.Values(), m[k])
			}
		}
		return v
	case *avro.PrimitiveSchema:
		if l := s.Logical(); l != nil && l.Type() == avro.TimeMicros {
			if x, ok := v.(int64); ok {
				return x * 1000 / 1000
			}
		}
	}
	return v
}

// differential decodes payload with d (compiled for ws against ws.Delta) and with hamba,
// and returns an error describing any disagreement. ourErr is our decoder's error; a
// failure of ours on bytes hamba accepts is reported only when strict (valid input).
func differential(ws *WriterSchema, d *Decoder, pq *parquet.Schema, payload []byte, strict bool) (ourErr error, diff error) {
	cols, ourErr := d.Decode(payload, nil)
	if diff := decodeWithAgrees(d, pq, payload, cols, ourErr); diff != nil {
		return ourErr, diff
	}
	if ourErr != nil && !strict && !errors.Is(ourErr, ErrNullRecord) {
		// Only bytes we accept are handed to hamba: on arbitrary bytes hamba allocates
		// whatever a block count claims.
		return ourErr, nil
	}
	var hv any
	hErr := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("hamba panicked: %v", r)
			}
		}()
		return avro.Unmarshal(ws.Avro, payload, &hv)
	}()
	if errors.Is(ourErr, ErrNullRecord) {
		if hErr != nil || hv != nil {
			return ourErr, fmt.Errorf("we read a null record, hamba %v %v", hv, hErr)
		}
		return ourErr, nil
	}
	if ourErr != nil {
		if strict {
			return ourErr, fmt.Errorf("our decoder refused valid input: %v (hamba: %v)", ourErr, hErr)
		}
		return ourErr, nil
	}
	if hErr != nil {
		return nil, fmt.Errorf("we accepted what hamba refuses: %v", hErr)
	}
	want, err := canonHamba(ws.Avro, hv)
	if err != nil {
		return nil, fmt.Errorf("canonicalise hamba's %#v: %v", hv, err)
	}
	got, err := newRowReader(pq, cols).row(ws.Delta)
	if err != nil {
		return nil, fmt.Errorf("reassemble: %v", err)
	}
	for i, c := range cols {
		if rest := len(c) - newRowReaderPos(pq, cols, ws.Delta)[i]; rest != 0 {
			return nil, fmt.Errorf("column %d has %d values beyond the row", i, rest)
		}
	}
	rec, _, _ := topRecord(ws.Avro)
	got = canonTimeMicros(rec, got).(map[string]any)
	if !reflect.DeepEqual(got, want) {
		return nil, fmt.Errorf("values differ\n ours  %v\n hamba %v", got, want)
	}
	return nil, nil
}

// newRowReaderPos returns how many values of each column one row consumed.
func newRowReaderPos(pq *parquet.Schema, cols [][]parquet.Value, table *deltalog.StructType) []int {
	rr := newRowReader(pq, cols)
	_, _ = rr.row(table)
	return rr.pos
}

// diffArena and diffAlias are reused (and reset) by every differential case, so
// DecodeWith runs on chunks holding the bytes of earlier cases; diffAlias decodes without
// copying the payload (Arena.AliasPayloads).
var (
	diffArenaMu sync.Mutex
	diffArena   Arena
	diffAlias   = func() *Arena { var a Arena; a.AliasPayloads(); return &a }()
)

// decodeWithAgrees checks that DecodeWith on a reused arena, copying and aliasing, gives
// Decode's result, and so does DecodeColumns into columns Reset from column.Leaves(pq)
// (columnsAgree).
func decodeWithAgrees(d *Decoder, pq *parquet.Schema, payload []byte, want [][]parquet.Value, wantErr error) error {
	diffArenaMu.Lock()
	defer diffArenaMu.Unlock()
	for _, a := range []*Arena{&diffArena, diffAlias} {
		a.Reset()
		got, err := d.DecodeWith(a, payload, nil)
		if (err == nil) != (wantErr == nil) || ReasonOf(err) != ReasonOf(wantErr) {
			return fmt.Errorf("Decode: %v; DecodeWith (alias %v): %v", wantErr, a.AliasesPayloads(), err)
		}
		if g, w := renderCols(pq, got), renderCols(pq, want); !reflect.DeepEqual(g, w) {
			return fmt.Errorf("DecodeWith (alias %v) values %v, Decode values %v", a.AliasesPayloads(), g, w)
		}
		a.Reset()
		if err := columnsAgree(d, a, payload, nil, want, wantErr); err != nil {
			return fmt.Errorf("alias %v: %w", a.AliasesPayloads(), err)
		}
	}
	return nil
}
