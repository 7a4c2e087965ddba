package deltalog

// WideningKind says whether Delta type widening lets a column change from one type to
// another, and how (PROTOCOL.md, "Type Widening"; https://docs.delta.io/delta-type-widening).
type WideningKind int

// Widening kinds.
const (
	// WideningNone: not a type widening (including the same type): the column cannot
	// change to it without rewriting the table.
	WideningNone WideningKind = iota
	// WideningAutomatic: schema evolution may apply it (mergeSchema, ingestd's evolve):
	// byte→short→integer→long, float→double, date→timestamp_ntz, and
	// decimal(p,s)→decimal(p+k1,s+k2) with k1 ≥ k2 ≥ 0.
	WideningAutomatic
	// WideningManual: allowed, but only by an explicit ALTER TABLE … CHANGE COLUMN, never
	// by schema evolution: byte/short/integer→double, byte/short/integer→decimal(10+k1,k2)
	// and long→decimal(20+k1,k2) with k1 ≥ k2 ≥ 0.
	WideningManual
)

func (k WideningKind) String() string {
	return [...]string{"none", "automatic", "manual"}[k]
}

// integerRank orders the integer types by width; 0 for any other type.
func integerRank(t DataType) int {
	switch t {
	case Byte:
		return 1
	case Short:
		return 2
	case Integer:
		return 3
	case Long:
		return 4
	}
	return 0
}

// integerDigits is the number of integer digits a decimal needs to take every value of
// an integer type under type widening: 10 for byte, short and integer (not the 3 or 5
// their values need: Delta 3's preview allowed byte→decimal(4,1), and Delta 4 refuses to
// read tables that recorded it), 20 for long; 0 for any other type.
func integerDigits(t DataType) int {
	switch integerRank(t) {
	case 1, 2, 3:
		return 10
	case 4:
		return 20
	}
	return 0
}

// Widening returns how Delta type widening may change a column of type from to type to
// (PROTOCOL.md, "Type Widening", supported type changes). It is the one table of type
// widenings: the schema guard evolves a table only through WideningAutomatic changes,
// ALTER accepts both kinds, and a recorded delta.typeChanges entry of kind WideningNone
// makes a table unwritable. Struct, array and map types are never widened as a whole
// (their leaves are).
func Widening(from, to DataType) WideningKind {
	switch t := to.(type) {
	case PrimitiveType:
		fr, tr := integerRank(from), integerRank(t)
		switch {
		case fr > 0 && tr > fr:
			return WideningAutomatic
		case from == Float && t == Double:
			return WideningAutomatic
		case from == Date && t == TimestampNtz:
			return WideningAutomatic
		case fr > 0 && fr <= 3 && t == Double:
			return WideningManual
		}
	case DecimalType:
		switch f := from.(type) {
		case DecimalType:
			if t.Scale >= f.Scale && t.Precision-t.Scale >= f.Precision-f.Scale && (t.Precision > f.Precision || t.Scale > f.Scale) {
				return WideningAutomatic
			}
		default:
			if d := integerDigits(from); d > 0 && t.Precision-t.Scale >= d {
				return WideningManual
			}
		}
	}
	return WideningNone
}

// PartitionWidening reports whether a partition column may change from type from to type
// to: only the integer widenings byte→short→integer→long, whose partition values are
// serialised alike (a decimal integer string, PROTOCOL.md "Partition Value
// Serialization"), so every existing add.partitionValues and directory name stays valid
// for the wider type. Other widenings (to double or decimal, date→timestamp_ntz, decimal
// precision) would change how the values are written, and Delta readers parse the old
// strings under the new type. The schema guard's evolve and `table alter --widen` both
// apply this one rule.
func PartitionWidening(from, to DataType) bool {
	fr, tr := integerRank(from), integerRank(to)
	return fr > 0 && tr > fr
}

// CommonDecimal returns the narrowest decimal type that holds every value of both a and
// b exactly: decimal(max(p−s) + max(s), max(s)), the least type each of them equals or
// widens to automatically (PROTOCOL.md, "Type Widening": decimal(p,s) → decimal(p+k1,
// s+k2) with k1 ≥ k2 ≥ 0). ok is false when it would need a precision above 38. For a
// decimal whose scale grows while its integer digits shrink (decimal(10,2) and
// decimal(10,4)), neither type widens to the other, but both widen to this one
// (decimal(12,4)).
func CommonDecimal(a, b DecimalType) (c DecimalType, ok bool) {
	digits := max(a.Precision-a.Scale, b.Precision-b.Scale)
	scale := max(a.Scale, b.Scale)
	if digits+scale > 38 {
		return DecimalType{}, false
	}
	return DecimalType{Precision: digits + scale, Scale: scale}, true
}
