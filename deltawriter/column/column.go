// Package column holds the values of one Parquet leaf column on their way from the Avro
// decoder to the data file: either as parquet.Values carrying their Dremel levels (any
// leaf) or, for a non-repeated leaf whose values in the batch are all set, in the dense
// form: one 8-byte word per row for a fixed-width leaf, the row's bytes back to back with
// one end offset per row for a BYTE_ARRAY leaf. The dense form is what the decoder
// appends and the encoder reads for most columns: no 24-byte parquet.Value with a pointer
// per value, no levels to store or check (docs/architecture.md, "Memory").
//
// The package imports nothing of the module; deltawriter, ingest/decode and ingest
// share it.
package column

import (
	"fmt"
	"math"

	"github.com/parquet-go/parquet-go"
)

// Leaf describes the Parquet leaf column a Column holds values of (Parquet format,
// "Nested Encoding": repetition and definition levels).
type Leaf struct {
	Index  int          // leaf column index in the file's schema (parquet.Value.Column)
	Kind   parquet.Kind // physical type
	MaxDef int          // maximum definition level
	MaxRep int          // maximum repetition level
}

// LeafOf describes leaf column path of schema; ok is false when schema has no such leaf.
func LeafOf(schema *parquet.Schema, path ...string) (Leaf, bool) {
	lc, ok := schema.Lookup(path...)
	if !ok || !lc.Node.Leaf() {
		return Leaf{}, false
	}
	return Leaf{Index: lc.ColumnIndex, Kind: lc.Node.Type().Kind(), MaxDef: lc.MaxDefinitionLevel, MaxRep: lc.MaxRepetitionLevel}, true
}

// Leaves describes every leaf column of schema, in leaf column index order.
func Leaves(schema *parquet.Schema) []Leaf {
	paths := schema.Columns()
	out := make([]Leaf, len(paths))
	for i, p := range paths {
		out[i], _ = LeafOf(schema, p...)
	}
	return out
}

// Denseable reports whether the leaf's values may be held in the dense form: a
// non-repeated leaf of physical type BOOLEAN, INT32, INT64, FLOAT, DOUBLE or BYTE_ARRAY.
func (l Leaf) Denseable() bool {
	if l.MaxRep != 0 {
		return false
	}
	switch l.Kind {
	case parquet.Boolean, parquet.Int32, parquet.Int64, parquet.Float, parquet.Double, parquet.ByteArray:
		return true
	}
	return false
}

// bytes reports whether the leaf's dense form is the byte form (Column.Bytes): a
// BYTE_ARRAY leaf.
func (l Leaf) bytes() bool { return l.Kind == parquet.ByteArray }

// Column is the values of one leaf column of a data file, in one of two forms.
//
//   - Levelled: Values holds one parquet.Value per level entry, each carrying its
//     repetition and definition levels and its column index (parquet.Value.Level). Any
//     leaf; a null or an empty list is an entry too.
//   - Levels (IsLevels, levels.go): the entries' levels as bytes and the set values in
//     Dense or the byte form; any leaf but INT96 and FIXED_LEN_BYTE_ARRAY. Built by
//     ResetLevels and the Append*At methods only.
//   - Dense (IsDense): one entry per row, every row's value set (definition level
//     Leaf.MaxDef, repetition level 0). Only for a Denseable leaf. For a fixed-width
//     leaf, Dense holds one word per row, encoded by Bits, and Bytes is empty. For a
//     BYTE_ARRAY leaf (the byte form), Bytes holds the rows' values back to back and
//     Dense[j] is the end offset in Bytes of row j's value (its start is Dense[j-1], or 0
//     for row 0), so len(Bytes) is Dense[len(Dense)-1]; ValueBytes(j) is the value.
//
// A dense column turns levelled (ToLevelled) the first time it is given a value the
// dense form cannot hold (a null); it never turns back until Reset. A levelled BYTE_ARRAY
// column that was dense keeps its Bytes: its values alias them (see ToLevelled and
// AppendFrom). The zero Column is an empty levelled column of an unknown leaf; Levelled
// wraps existing values.
type Column struct {
	Values []parquet.Value // levelled form; empty while dense
	Dense  []uint64        // dense form: words, or end offsets into Bytes; empty while levelled
	Bytes  []byte          // BYTE_ARRAY values of the dense form, or that levelled values alias
	Defs   []byte          // levels form (levels.go): the definition level of each entry
	Reps   []byte          // levels form, repeated leaf: the repetition level of each entry
	leaf   Leaf
	dense  bool
	levels bool
	// retired is the bytes of earlier Bytes buffers that levelled values still alias
	// (AppendFrom into a levelled BYTE_ARRAY column starts a new buffer when the current
	// one is full instead of moving the bytes its values point to).
	retired int
}

// Levelled returns a levelled Column holding vals (not copied).
func Levelled(vals []parquet.Value) Column { return Column{Values: vals} }

// Reset empties c for values of leaf l: dense when l is Denseable, levelled otherwise.
// A column holds the buffer of its current form only, so that the memory it holds is what
// its entries cost (8 bytes a dense word, 24 a levelled value, the value bytes of the byte
// form, up to the buffers' spare capacity): a column starting dense drops its levelled
// buffer, and ToLevelled drops the dense words; Bytes is kept only for a BYTE_ARRAY leaf.
// Otherwise the buffers keep their capacity (levelled values are not cleared).
func (c *Column) Reset(l Leaf) {
	c.leaf, c.dense, c.levels = l, l.Denseable(), false
	c.Defs, c.Reps = nil, nil
	if c.dense {
		c.Values = nil
	}
	if !c.dense || !l.bytes() {
		c.Bytes = nil
	}
	c.Values, c.Dense, c.Bytes, c.retired = c.Values[:0], c.Dense[:0], c.Bytes[:0], 0
}

// Leaf returns the leaf set by Reset (the zero Leaf for a Levelled wrap).
func (c *Column) Leaf() Leaf { return c.leaf }

// IsDense reports whether c holds the dense form.
func (c *Column) IsDense() bool { return c.dense }

// Len is the number of entries: rows when dense, level entries when levelled or in the
// levels form.
func (c *Column) Len() int {
	if c.dense {
		return len(c.Dense)
	}
	if c.levels {
		return len(c.Defs)
	}
	return len(c.Values)
}

// At returns entry j as a parquet.Value with its levels and column index (a dense entry
// gets repetition level 0, definition level Leaf.MaxDef and column index Leaf.Index; a
// byte-form value aliases Bytes, as ValueBytes; an entry of the levels form is found by
// counting the set entries before it). It panics when j is out of range.
func (c *Column) At(j int) parquet.Value {
	if c.dense {
		return c.denseValue(j).Level(0, c.leaf.MaxDef, c.leaf.Index)
	}
	if c.levels {
		return c.levelsAt(j)
	}
	return c.Values[j]
}

// denseValue is dense entry j as a parquet.Value without levels.
func (c *Column) denseValue(j int) parquet.Value {
	if c.leaf.bytes() {
		return parquet.ByteArrayValue(c.ValueBytes(j))
	}
	return FromBits(c.leaf.Kind, c.Dense[j])
}

// ValueBytes returns row j's value of a dense BYTE_ARRAY column: Bytes[Dense[j-1]:Dense[j]]
// (from 0 for row 0), capped at its length so that appending to it copies; never nil
// (an empty value is a non-nil empty slice). The slice
// aliases Bytes: it is valid until the column is Reset or truncated below j+1 rows. It
// panics when j is out of range or c is not dense.
func (c *Column) ValueBytes(j int) []byte {
	end := c.Dense[j]
	var start uint64
	if j > 0 {
		start = c.Dense[j-1]
	}
	if c.Bytes == nil { // only empty values yet: still a non-nil empty slice
		return emptyBytes
	}
	return c.Bytes[start:end:end]
}

// emptyBytes is the empty value before any byte was held: non-nil, so that an empty
// value is never mistaken for a missing one (as ingest/decode appends it).
var emptyBytes = []byte{}

// AppendDense appends one row's set value of a fixed-width leaf as its word (bits encode
// a value of the leaf's kind, Bits). On a column that already turned levelled the row is
// appended as a levelled value (FromBits at repetition level 0, definition level
// Leaf.MaxDef). It panics when the leaf is not a fixed-width Denseable leaf (a
// BYTE_ARRAY leaf takes AppendBytes; a Levelled wrap has no leaf).
func (c *Column) AppendDense(bits uint64) {
	if !c.dense || c.leaf.bytes() {
		c.appendDenseSlow(bits)
		return
	}
	c.Dense = append(c.Dense, bits)
}

// appendDenseSlow is AppendDense on a levelled column or a leaf of the wrong kind.
func (c *Column) appendDenseSlow(bits uint64) {
	c.notLevels("AppendDense")
	if !c.leaf.Denseable() || c.leaf.bytes() {
		panic(fmt.Sprintf("column: AppendDense on leaf %+v: a word is only for a non-repeated fixed-width leaf", c.leaf))
	}
	c.Values = append(c.Values, FromBits(c.leaf.Kind, bits).Level(0, c.leaf.MaxDef, c.leaf.Index))
}

// AppendBytes appends one row's set value b of a BYTE_ARRAY leaf: in the byte form
// (copied into Bytes) while the column is dense; on a column that already turned
// levelled, as a levelled value (repetition level 0, definition level Leaf.MaxDef)
// aliasing a copy of b kept in Bytes (as AppendFrom keeps them). A nil or empty b is an
// empty value, not a null. It panics when the leaf is not a non-repeated BYTE_ARRAY leaf
// (a Levelled wrap has no leaf).
func (c *Column) AppendBytes(b []byte) {
	if !c.dense || !c.leaf.bytes() {
		c.appendBytesSlow(b)
		return
	}
	c.Bytes = append(c.Bytes, b...)
	c.Dense = append(c.Dense, uint64(len(c.Bytes)))
}

// appendBytesSlow is AppendBytes on a levelled column or a leaf of the wrong kind.
func (c *Column) appendBytesSlow(b []byte) {
	c.notLevels("AppendBytes")
	if !c.leaf.bytes() || !c.leaf.Denseable() {
		panic(fmt.Sprintf("column: AppendBytes on leaf %+v: bytes are only for a non-repeated BYTE_ARRAY leaf", c.leaf))
	}
	c.Values = append(c.Values, parquet.ByteArrayValue(c.keepBytes(b)).Level(0, c.leaf.MaxDef, c.leaf.Index))
}

// ByteSize is the bytes of BYTE_ARRAY values the column holds in Bytes buffers (the
// current one's length and earlier ones levelled values still alias): what the byte form
// costs beyond its 8-byte offsets. It is 0 for every other leaf.
func (c *Column) ByteSize() int { return len(c.Bytes) + c.retired }

// Append appends v, which carries its levels and column index as in the levelled form.
// A dense column takes v as a word when v is a set value of the leaf's kind at
// repetition level 0 and definition level Leaf.MaxDef; any other value turns it
// levelled first.
func (c *Column) Append(v parquet.Value) {
	c.notLevels("Append")
	if c.dense {
		if !v.IsNull() && v.Kind() == c.leaf.Kind && v.RepetitionLevel() == 0 && int(v.DefinitionLevel()) == c.leaf.MaxDef {
			if c.leaf.bytes() {
				c.AppendBytes(v.ByteArray())
			} else {
				c.Dense = append(c.Dense, Bits(v))
			}
			return
		}
		c.ToLevelled()
	}
	c.Values = append(c.Values, v)
}

// ToLevelled turns a dense column into the levelled form (one parquet.Value per row, as
// At returns them); a levelled column is left as it is. The levelled buffer gets the
// dense buffer's capacity in values (the rows the column was sized for, e.g. a batch's
// reservation), at least one more than the rows it holds, and the dense buffer is
// dropped (see Reset). The values of a BYTE_ARRAY column alias its Bytes, which it keeps
// (ByteSize still counts them) and never overwrites until Reset.
func (c *Column) ToLevelled() {
	c.notLevels("ToLevelled")
	if !c.dense {
		return
	}
	n := len(c.Dense)
	vals := c.Values[:0]
	if cap(vals) <= n {
		vals = make([]parquet.Value, 0, max(cap(c.Dense), n+1, 8))
	}
	vals = vals[:n]
	for j := range c.Dense {
		vals[j] = c.denseValue(j).Level(0, c.leaf.MaxDef, c.leaf.Index)
	}
	c.Values, c.Dense, c.dense = vals, nil, false
}

// Truncate cuts c back to its first n entries (n ≤ Len); cut levelled values are
// cleared so that they keep no bytes alive, and the byte form's Bytes is cut to the
// first n values. A column that turned levelled after it held n entries stays levelled
// (the bytes its cut values aliased stay in Bytes, counted by ByteSize, until Reset).
func (c *Column) Truncate(n int) {
	c.notLevels("Truncate")
	if c.dense {
		c.Dense = c.Dense[:n]
		if c.leaf.bytes() {
			var end uint64
			if n > 0 {
				end = c.Dense[n-1]
			}
			c.Bytes = c.Bytes[:end]
		}
		return
	}
	clear(c.Values[n:])
	c.Values = c.Values[:n]
}

// AppendFrom appends src's entries from index from on to c, giving each value c's leaf
// column index (index, for a levelled c: the caller's leaf index in c's file). Both
// columns are of the same leaf of two files (the same kind and levels); dense words are
// copied as words, byte-form values as bytes with their offsets moved. Nothing of c
// aliases src afterwards (src may be truncated and reused): byte-form values that c
// takes as levelled values are copied into c's Bytes, which they alias.
func (c *Column) AppendFrom(src *Column, from, index int) {
	c.notLevels("AppendFrom")
	src.notLevels("AppendFrom")
	if src.dense && c.dense {
		if !src.leaf.bytes() {
			c.Dense = append(c.Dense, src.Dense[from:]...)
			return
		}
		var start uint64
		if from > 0 {
			start = src.Dense[from-1]
		}
		base := uint64(len(c.Bytes))
		for _, end := range src.Dense[from:] {
			c.Dense = append(c.Dense, base+(end-start))
		}
		if n := len(src.Dense); n > from {
			c.Bytes = append(c.Bytes, src.Bytes[start:src.Dense[n-1]]...)
		}
		return
	}
	if src.dense {
		c.ToLevelled()
		for j := from; j < len(src.Dense); j++ {
			v := src.denseValue(j)
			if src.leaf.bytes() {
				v = parquet.ByteArrayValue(c.keepBytes(v.ByteArray()))
			}
			c.Values = append(c.Values, v.Level(0, src.leaf.MaxDef, index))
		}
		return
	}
	// a levelled src that was in the byte form holds Bytes its values may alias: copy them
	own := src.leaf.bytes() && src.ByteSize() > 0
	for _, v := range src.Values[from:] {
		r, d := int(v.RepetitionLevel()), int(v.DefinitionLevel())
		if own && !c.dense && !v.IsNull() && v.Kind() == parquet.ByteArray {
			v = parquet.ByteArrayValue(c.keepBytes(v.ByteArray())) // a dense c copies in Append
		}
		c.Append(v.Level(r, d, index))
	}
}

// keepBytes copies b into c's Bytes for a levelled value to alias: when the buffer is
// full a new one is started (the old one stays with the values that alias it, counted in
// ByteSize), so bytes already handed out never move or change.
func (c *Column) keepBytes(b []byte) []byte {
	if len(b) == 0 {
		return emptyBytes
	}
	if len(c.Bytes)+len(b) > cap(c.Bytes) {
		c.retired += len(c.Bytes)
		c.Bytes = make([]byte, 0, max(2*cap(c.Bytes), len(b), 4096))
	}
	n := len(c.Bytes)
	c.Bytes = append(c.Bytes, b...)
	return c.Bytes[n : n+len(b) : n+len(b)]
}

// Bits encodes a set value of a fixed-width physical type as a dense word: BOOLEAN 0 or
// 1; INT32 its 32 bits zero-extended; INT64 its 64 bits; FLOAT its IEEE 754 bits
// zero-extended; DOUBLE its IEEE 754 bits. Any other kind gives 0.
func Bits(v parquet.Value) uint64 {
	switch v.Kind() {
	case parquet.Boolean:
		if v.Boolean() {
			return 1
		}
		return 0
	case parquet.Int32:
		return uint64(uint32(v.Int32()))
	case parquet.Int64:
		return uint64(v.Int64())
	case parquet.Float:
		return uint64(math.Float32bits(v.Float()))
	case parquet.Double:
		return math.Float64bits(v.Double())
	}
	return 0
}

// FromBits decodes a dense word of physical type kind (Bits) into a parquet.Value without
// levels. It panics on a kind the dense form does not hold.
func FromBits(kind parquet.Kind, b uint64) parquet.Value {
	switch kind {
	case parquet.Boolean:
		return parquet.BooleanValue(b != 0)
	case parquet.Int32:
		return parquet.Int32Value(int32(uint32(b)))
	case parquet.Int64:
		return parquet.Int64Value(int64(b))
	case parquet.Float:
		return parquet.FloatValue(math.Float32frombits(uint32(b)))
	case parquet.Double:
		return parquet.DoubleValue(math.Float64frombits(b))
	}
	panic(fmt.Sprintf("column: no dense form for physical type %v", kind))
}

// Set replaces entry j of a column of a non-repeated leaf (one entry a row) with v, which
// carries its levels and column index as Append takes them. A dense column takes a set
// value of a fixed-width leaf of its kind as a word in place; a null, or a BYTE_ARRAY
// leaf's value, turns it levelled first. It panics when j is out of range.
func (c *Column) Set(j int, v parquet.Value) {
	c.notLevels("Set")
	if c.dense {
		if !v.IsNull() && !c.leaf.bytes() && v.Kind() == c.leaf.Kind && v.RepetitionLevel() == 0 && int(v.DefinitionLevel()) == c.leaf.MaxDef {
			c.Dense[j] = Bits(v)
			return
		}
		c.ToLevelled()
	}
	c.Values[j] = v
}

// AppendCopy is Append for a value whose bytes belong to someone else (a page buffer
// about to be reused): a BYTE_ARRAY or FIXED_LEN_BYTE_ARRAY value the column holds
// levelled is copied into c's Bytes first (as AppendFrom keeps them), and the byte form
// copies as it always does. Nothing of c aliases v afterwards.
func (c *Column) AppendCopy(v parquet.Value) {
	c.notLevels("AppendCopy")
	k := v.Kind()
	if v.IsNull() || (k != parquet.ByteArray && k != parquet.FixedLenByteArray) {
		c.Append(v)
		return
	}
	r, d, i := int(v.RepetitionLevel()), int(v.DefinitionLevel()), v.Column()
	if c.dense {
		if k == c.leaf.Kind && r == 0 && d == c.leaf.MaxDef && c.leaf.bytes() {
			c.AppendBytes(v.ByteArray())
			return
		}
		c.ToLevelled() // before keepBytes: the dense values are read from Bytes
	}
	b := c.keepBytes(v.ByteArray())
	if k == parquet.ByteArray {
		v = parquet.ByteArrayValue(b)
	} else {
		v = parquet.FixedLenByteArrayValue(b)
	}
	c.Values = append(c.Values, v.Level(r, d, i))
}
