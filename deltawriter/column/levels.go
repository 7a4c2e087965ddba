package column

import (
	"fmt"

	"github.com/parquet-go/parquet-go"
)

// The levels form: a leaf's level entries as bytes and only its set values, typed
// (Parquet format, "Nested Encoding"). It is the shape a data page stores, so a column
// with many nulls or repeated entries is built without a 24-byte parquet.Value per
// entry and encoded without a per-value interface: the classic checkpoint's columns
// (deltawriter, PROTOCOL.md "Checkpoints"), where every row is null in all but one
// action's columns, are written this way.
//
// A column in the levels form (ResetLevels, IsLevels) holds:
//   - Defs: one definition level per entry;
//   - Reps: one repetition level per entry for a repeated leaf (empty otherwise);
//   - the values of the entries at Leaf.MaxDef, in entry order, in Dense as words (Bits)
//     for a fixed-width leaf, or in the byte form for a BYTE_ARRAY leaf (Bytes back to
//     back, Dense the end offsets).
//
// It is built with AppendNullsAt, AppendWordAt and AppendBytesAt only, and read by
// package parquetenc and At; every other method that changes a column panics on it
// (the form is write-once, for the encoder).

// ResetLevels empties c for the levels form of leaf l (a BOOLEAN, INT32, INT64, FLOAT,
// DOUBLE or BYTE_ARRAY leaf, repeated or not), keeping its buffers' capacity. It panics
// on another physical type.
func (c *Column) ResetLevels(l Leaf) {
	switch l.Kind {
	case parquet.Boolean, parquet.Int32, parquet.Int64, parquet.Float, parquet.Double, parquet.ByteArray:
	default:
		panic(fmt.Sprintf("column: no levels form for physical type %v", l.Kind))
	}
	c.leaf, c.dense, c.levels = l, false, true
	c.Values = nil
	c.Defs, c.Reps, c.Dense, c.Bytes, c.retired = c.Defs[:0], c.Reps[:0], c.Dense[:0], c.Bytes[:0], 0
}

// IsLevels reports whether c holds the levels form.
func (c *Column) IsLevels() bool { return c.levels }

// AppendNullsAt appends n null entries at repetition level rep and definition level def
// (below Leaf.MaxDef: a null leaf, or a null or empty ancestor). n rows of nulls are
// AppendNullsAt(n, 0, d); one null inside a repeated field is AppendNullsAt(1, r, d).
func (c *Column) AppendNullsAt(n, rep, def int) {
	c.mustLevels("AppendNullsAt")
	if def >= c.leaf.MaxDef {
		panic(fmt.Sprintf("column: AppendNullsAt at definition level %d of leaf %+v: a null is below the maximum", def, c.leaf))
	}
	c.Defs = appendRun(c.Defs, n, byte(def))
	if c.leaf.MaxRep > 0 {
		c.Reps = appendRun(c.Reps, n, byte(rep))
	}
}

// AppendWordAt appends a set entry of a fixed-width leaf at repetition level rep (0: a
// new row) holding the word bits (Bits).
func (c *Column) AppendWordAt(rep int, bits uint64) {
	c.mustLevels("AppendWordAt")
	c.setEntry(rep)
	c.Dense = append(c.Dense, bits)
}

// AppendBytesAt appends a set entry of a BYTE_ARRAY leaf at repetition level rep (0: a
// new row); b is copied into Bytes (a nil or empty b is an empty value, not a null).
func (c *Column) AppendBytesAt(rep int, b []byte) {
	c.mustLevels("AppendBytesAt")
	c.setEntry(rep)
	c.Bytes = append(c.Bytes, b...)
	c.Dense = append(c.Dense, uint64(len(c.Bytes)))
}

// setEntry appends the levels of a set entry.
func (c *Column) setEntry(rep int) {
	c.Defs = append(c.Defs, byte(c.leaf.MaxDef))
	if c.leaf.MaxRep > 0 {
		c.Reps = append(c.Reps, byte(rep))
	}
}

// levelsAt returns entry j of a column in the levels form as At does: the value (or a
// null) with its levels and the leaf's column index. It counts the set entries before
// j, so it takes time linear in j (the encoder reads two entries per column chunk this
// way: the footer's bounds).
func (c *Column) levelsAt(j int) parquet.Value {
	rep := 0
	if c.leaf.MaxRep > 0 {
		rep = int(c.Reps[j])
	}
	def := int(c.Defs[j])
	if def < c.leaf.MaxDef {
		return parquet.NullValue().Level(rep, def, c.leaf.Index)
	}
	k := 0
	for _, d := range c.Defs[:j] {
		if int(d) == c.leaf.MaxDef {
			k++
		}
	}
	var v parquet.Value
	if c.leaf.bytes() {
		var start uint64
		if k > 0 {
			start = c.Dense[k-1]
		}
		v = parquet.ByteArrayValue(c.Bytes[start:c.Dense[k]:c.Dense[k]])
	} else {
		v = FromBits(c.leaf.Kind, c.Dense[k])
	}
	return v.Level(rep, def, c.leaf.Index)
}

// mustLevels panics unless c is in the levels form (op is the method's name).
func (c *Column) mustLevels(op string) {
	if !c.levels {
		panic("column: " + op + " on a column not in the levels form (ResetLevels)")
	}
}

// notLevels panics when c is in the levels form, which op does not take.
func (c *Column) notLevels(op string) {
	if c.levels {
		panic("column: " + op + " on a column in the levels form, which is built by the Append*At methods only")
	}
}

// appendRun appends n copies of x to dst.
func appendRun(dst []byte, n int, x byte) []byte {
	if n == 1 { // a null of one row: the common case when building a checkpoint row
		return append(dst, x)
	}
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	if x != 0 {
		for i := start; i < len(dst); i++ {
			dst[i] = x
		}
	}
	return dst
}
