package column

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func TestBitsRoundTrip(t *testing.T) {
	nan := math.Float64frombits(0x7ff8_0000_dead_beef)
	cases := []struct {
		v    parquet.Value
		want uint64
	}{
		{parquet.BooleanValue(true), 1},
		{parquet.BooleanValue(false), 0},
		{parquet.Int32Value(-1), 0xffff_ffff},
		{parquet.Int32Value(math.MinInt32), 0x8000_0000},
		{parquet.Int64Value(-2), 0xffff_ffff_ffff_fffe},
		{parquet.Int64Value(math.MaxInt64), 0x7fff_ffff_ffff_ffff},
		{parquet.FloatValue(float32(math.Copysign(0, -1))), 0x8000_0000},
		{parquet.FloatValue(1.5), 0x3fc0_0000},
		{parquet.DoubleValue(nan), 0x7ff8_0000_dead_beef},
		{parquet.DoubleValue(math.Inf(-1)), 0xfff0_0000_0000_0000},
	}
	for _, c := range cases {
		if got := Bits(c.v); got != c.want {
			t.Errorf("Bits(%v %v) = %#x, want %#x", c.v.Kind(), c.v, got, c.want)
		}
		back := FromBits(c.v.Kind(), c.want)
		if back.Kind() != c.v.Kind() || Bits(back) != c.want {
			t.Errorf("FromBits(%v, %#x) = %v %v, want the value back", c.v.Kind(), c.want, back.Kind(), back)
		}
	}
}

func TestDenseable(t *testing.T) {
	for _, c := range []struct {
		l    Leaf
		want bool
	}{
		{Leaf{Kind: parquet.Int64, MaxDef: 1}, true},
		{Leaf{Kind: parquet.Boolean}, true},
		{Leaf{Kind: parquet.Double, MaxDef: 3}, true},
		{Leaf{Kind: parquet.Int32, MaxDef: 2, MaxRep: 1}, false},
		{Leaf{Kind: parquet.ByteArray, MaxDef: 1}, true},
		{Leaf{Kind: parquet.ByteArray, MaxDef: 1, MaxRep: 1}, false},
		{Leaf{Kind: parquet.FixedLenByteArray, MaxDef: 1}, false},
		{Leaf{Kind: parquet.Int96, MaxDef: 1}, false},
	} {
		if got := c.l.Denseable(); got != c.want {
			t.Errorf("%+v.Denseable() = %v, want %v", c.l, got, c.want)
		}
	}
}

func TestLeavesOfSchema(t *testing.T) {
	schema := parquet.NewSchema("r", parquet.Group{
		"a": parquet.Optional(parquet.Leaf(parquet.Int64Type)),
		"b": parquet.Repeated(parquet.String()),
		"c": parquet.Required(parquet.Leaf(parquet.DoubleType)),
	})
	got := Leaves(schema)
	want := []Leaf{
		{Index: 0, Kind: parquet.Int64, MaxDef: 1},
		{Index: 1, Kind: parquet.ByteArray, MaxDef: 1, MaxRep: 1},
		{Index: 2, Kind: parquet.Double},
	}
	if len(got) != len(want) {
		t.Fatalf("Leaves = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("leaf %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// levels returns v's (rep, def, column) and its bits.
func levels(v parquet.Value) [4]uint64 {
	return [4]uint64{uint64(v.RepetitionLevel()), uint64(v.DefinitionLevel()), uint64(v.Column()), Bits(v)}
}

func TestDenseTurnsLevelledOnNull(t *testing.T) {
	var c Column
	c.Reset(Leaf{Index: 3, Kind: parquet.Int64, MaxDef: 1})
	if !c.IsDense() {
		t.Fatal("an INT64 leaf starts dense")
	}
	c.AppendDense(uint64(7))
	c.Append(parquet.Int64Value(-9).Level(0, 1, 3))
	if !c.IsDense() || len(c.Dense) != 2 || c.Dense[1] != uint64(0xffff_ffff_ffff_fff7) {
		t.Fatalf("after two set values: dense=%v words=%#x", c.IsDense(), c.Dense)
	}
	c.Append(parquet.NullValue().Level(0, 0, 3))
	if c.IsDense() || c.Len() != 3 || len(c.Dense) != 0 {
		t.Fatalf("after a null: dense=%v len=%d words=%d, want levelled with 3 entries", c.IsDense(), c.Len(), len(c.Dense))
	}
	want := [][4]uint64{{0, 1, 3, 7}, {0, 1, 3, 0xffff_ffff_ffff_fff7}, {0, 0, 3, 0}}
	for j, w := range want {
		if got := levels(c.At(j)); got != w {
			t.Errorf("entry %d = %v, want %v", j, got, w)
		}
	}
	if !c.At(2).IsNull() {
		t.Error("entry 2 is not null")
	}
	c.Append(parquet.Int64Value(5).Level(0, 1, 3)) // stays levelled
	if c.IsDense() || c.Len() != 4 || c.Values[3].Int64() != 5 {
		t.Errorf("a set value after the null: dense=%v len=%d", c.IsDense(), c.Len())
	}
	c.Reset(c.Leaf())
	if !c.IsDense() || c.Len() != 0 {
		t.Errorf("Reset: dense=%v len=%d, want dense and empty", c.IsDense(), c.Len())
	}
}

func TestAppendOfOtherLevelsTurnsLevelled(t *testing.T) {
	var c Column
	c.Reset(Leaf{Index: 0, Kind: parquet.Int32, MaxDef: 2})
	c.Append(parquet.Int32Value(1).Level(0, 2, 0))
	c.Append(parquet.Int32Value(2).Level(0, 1, 0)) // not the max definition level: levelled
	if c.IsDense() || c.Len() != 2 || c.At(1).DefinitionLevel() != 1 || c.At(0).DefinitionLevel() != 2 {
		t.Errorf("dense=%v len=%d", c.IsDense(), c.Len())
	}
	c.Reset(Leaf{Index: 0, Kind: parquet.Int32, MaxDef: 1})
	c.Append(parquet.Int64Value(1).Level(0, 1, 0)) // another kind: levelled, kept as given
	if c.IsDense() || c.At(0).Kind() != parquet.Int64 {
		t.Errorf("a value of another kind: dense=%v kind=%v", c.IsDense(), c.At(0).Kind())
	}
}

func TestTruncate(t *testing.T) {
	var c Column
	c.Reset(Leaf{Index: 1, Kind: parquet.Double, MaxDef: 1})
	for i := range 4 {
		c.AppendDense(math.Float64bits(float64(i)))
	}
	c.Truncate(2)
	if !c.IsDense() || c.Len() != 2 || c.At(1).Double() != 1 {
		t.Fatalf("dense Truncate(2): len=%d", c.Len())
	}
	lv := Levelled([]parquet.Value{parquet.ByteArrayValue([]byte("ab")), parquet.ByteArrayValue([]byte("cd"))})
	lv.Truncate(1)
	if lv.Len() != 1 || string(lv.At(0).ByteArray()) != "ab" {
		t.Fatalf("levelled Truncate(1): %v", lv.Values)
	}
	if tail := lv.Values[:2][1]; !tail.IsNull() || tail.ByteArray() != nil {
		t.Errorf("the cut value is %v, want the zero Value (cleared)", tail)
	}
}

func TestAppendFrom(t *testing.T) {
	leaf := Leaf{Index: 4, Kind: parquet.Int64, MaxDef: 1}
	var src, dst Column
	src.Reset(leaf)
	dst.Reset(Leaf{Index: 2, Kind: parquet.Int64, MaxDef: 1})
	for _, x := range []int64{10, 11, 12} {
		src.AppendDense(uint64(x))
	}
	dst.AppendFrom(&src, 1, 2)
	if !dst.IsDense() || dst.Len() != 2 || dst.Dense[0] != 11 || dst.Dense[1] != 12 {
		t.Fatalf("dense to dense: dense=%v words=%v", dst.IsDense(), dst.Dense)
	}
	// a levelled source with a null turns the destination levelled, with its own index
	lv := Levelled([]parquet.Value{parquet.Int64Value(13).Level(0, 1, 4), parquet.NullValue().Level(0, 0, 4)})
	dst.AppendFrom(&lv, 0, 2)
	want := [][4]uint64{{0, 1, 2, 11}, {0, 1, 2, 12}, {0, 1, 2, 13}, {0, 0, 2, 0}}
	if dst.IsDense() || dst.Len() != len(want) {
		t.Fatalf("levelled into dense: dense=%v len=%d", dst.IsDense(), dst.Len())
	}
	for j, w := range want {
		if got := levels(dst.At(j)); got != w {
			t.Errorf("entry %d = %v, want %v", j, got, w)
		}
	}
	// a dense source into a levelled destination
	dst.AppendFrom(&src, 2, 2)
	if got := levels(dst.At(4)); got != [4]uint64{0, 1, 2, 12} {
		t.Errorf("dense into levelled: entry 4 = %v", got)
	}
}

// TestOneBufferPerForm: a column holds the buffer of its current form only, sized for the
// rows its dense buffer was sized for (the batch budget charges 8 bytes a dense word, 24 a
// levelled value: a second buffer would be memory no one charges).
func TestOneBufferPerForm(t *testing.T) {
	leaf := Leaf{Index: 0, Kind: parquet.Boolean, MaxDef: 1}
	var c Column
	c.Reset(leaf)
	c.Dense = make([]uint64, 0, 8000) // a batch's reservation
	for range 7999 {
		c.AppendDense(1)
	}
	c.Append(parquet.NullValue().Level(0, 0, 0)) // the first null, at the last row
	if c.IsDense() || c.Dense != nil || cap(c.Values) != 8000 || c.Len() != 8000 {
		t.Fatalf("after the turn: dense=%v cap(Dense)=%d cap(Values)=%d len=%d, want levelled, no dense buffer, 8000 values",
			c.IsDense(), cap(c.Dense), cap(c.Values), c.Len())
	}
	c.Reset(leaf)
	if !c.IsDense() || c.Values != nil || c.Len() != 0 {
		t.Fatalf("Reset to dense: cap(Values)=%d len=%d, want the levelled buffer dropped", cap(c.Values), c.Len())
	}
	// A turn at row 0 still has room for the value being appended.
	c.ToLevelled()
	if cap(c.Values) < 1 {
		t.Fatalf("ToLevelled of an empty column: cap(Values)=%d, want room for one value", cap(c.Values))
	}
	// A levelled leaf keeps its buffer across Reset.
	lv := Leaf{Index: 1, Kind: parquet.ByteArray, MaxDef: 1, MaxRep: 1}
	c.Reset(lv)
	c.Values = append(c.Values, parquet.ByteArrayValue([]byte("x")).Level(0, 1, 1))
	before := cap(c.Values)
	c.Reset(lv)
	if c.IsDense() || cap(c.Values) != before {
		t.Errorf("Reset of a levelled leaf: cap(Values) %d → %d, want kept", before, cap(c.Values))
	}
}

func byteLeaf(index int) Leaf { return Leaf{Index: index, Kind: parquet.ByteArray, MaxDef: 1} }

// entries lists c's entries as (definition level, column index, bytes or "<null>").
func entries(c *Column) []string {
	out := make([]string, c.Len())
	for j := range out {
		v := c.At(j)
		b := "<null>"
		if !v.IsNull() {
			b = string(v.ByteArray())
		}
		out[j] = fmt.Sprintf("%d/%d/%d/%s", v.RepetitionLevel(), v.DefinitionLevel(), v.Column(), b)
	}
	return out
}

func TestByteForm(t *testing.T) {
	var c Column
	c.Reset(byteLeaf(2))
	if !c.IsDense() {
		t.Fatal("a BYTE_ARRAY leaf starts dense")
	}
	c.AppendBytes([]byte("ab"))
	c.AppendBytes(nil) // an empty value, not a null
	c.Append(parquet.ByteArrayValue([]byte("cde")).Level(0, 1, 2))
	if !c.IsDense() || string(c.Bytes) != "abcde" || !slices.Equal(c.Dense, []uint64{2, 2, 5}) || c.ByteSize() != 5 {
		t.Fatalf("after three values: dense=%v bytes=%q ends=%v size=%d", c.IsDense(), c.Bytes, c.Dense, c.ByteSize())
	}
	if got := string(c.ValueBytes(2)); got != "cde" || cap(c.ValueBytes(0)) != 2 || len(c.ValueBytes(1)) != 0 {
		t.Errorf("ValueBytes: %q, cap(row 0)=%d, len(row 1)=%d", got, cap(c.ValueBytes(0)), len(c.ValueBytes(1)))
	}
	want := []string{"0/1/2/ab", "0/1/2/", "0/1/2/cde"}
	if got := entries(&c); !slices.Equal(got, want) {
		t.Errorf("entries = %v, want %v", got, want)
	}
	if v := c.At(1); v.IsNull() || v.ByteArray() == nil && v.Kind() != parquet.ByteArray {
		t.Errorf("an empty value reads as %v (kind %v)", v, v.Kind())
	}
	c.Truncate(1)
	if string(c.Bytes) != "ab" || c.Len() != 1 {
		t.Fatalf("Truncate(1): bytes=%q len=%d", c.Bytes, c.Len())
	}
	// replace a row with its own value (rowfill reads At and appends it back)
	v := c.At(0)
	c.Truncate(0)
	c.Append(v)
	if got := entries(&c); !slices.Equal(got, []string{"0/1/2/ab"}) {
		t.Errorf("a row replaced by its own value: %v", got)
	}
	c.AppendBytes([]byte("xyz"))
	c.Append(parquet.NullValue().Level(0, 0, 2)) // the first null turns it levelled
	if c.IsDense() || c.Dense != nil || string(c.Bytes) != "abxyz" || c.ByteSize() != 5 {
		t.Fatalf("after a null: dense=%v ends=%v bytes=%q", c.IsDense(), c.Dense, c.Bytes)
	}
	c.Append(parquet.ByteArrayValue([]byte("q")).Level(0, 1, 2))
	if got, want := entries(&c), []string{"0/1/2/ab", "0/1/2/xyz", "0/0/2/<null>", "0/1/2/q"}; !slices.Equal(got, want) {
		t.Errorf("levelled entries = %v, want %v", got, want)
	}
	c.Reset(byteLeaf(2))
	if !c.IsDense() || len(c.Bytes) != 0 || c.ByteSize() != 0 || c.Values != nil {
		t.Errorf("Reset: dense=%v bytes=%q values=%v", c.IsDense(), c.Bytes, c.Values)
	}
	c.Reset(Leaf{Index: 2, Kind: parquet.Int64, MaxDef: 1})
	if c.Bytes != nil {
		t.Errorf("Reset to an INT64 leaf keeps %d bytes of buffer", cap(c.Bytes))
	}
}

func TestAppendFromByteForm(t *testing.T) {
	var src, dst Column
	src.Reset(byteLeaf(5))
	dst.Reset(byteLeaf(1))
	for _, s := range []string{"one", "", "three", "four"} {
		src.AppendBytes([]byte(s))
	}
	dst.AppendBytes([]byte("zero"))
	dst.AppendFrom(&src, 1, 1)
	if want := []string{"0/1/1/zero", "0/1/1/", "0/1/1/three", "0/1/1/four"}; !dst.IsDense() || !slices.Equal(entries(&dst), want) {
		t.Fatalf("dense to dense: dense=%v %v, want %v", dst.IsDense(), entries(&dst), want)
	}
	if string(dst.Bytes) != "zerothreefour" || !slices.Equal(dst.Dense, []uint64{4, 4, 9, 13}) {
		t.Errorf("dense to dense: bytes=%q ends=%v", dst.Bytes, dst.Dense)
	}
	dst.AppendFrom(&src, 4, 1) // nothing from the end
	if dst.Len() != 4 {
		t.Errorf("AppendFrom at src's end appended %d entries", dst.Len()-4)
	}
	// into a levelled destination: copied, so src may be reused at once
	lv := Levelled([]parquet.Value{parquet.NullValue().Level(0, 0, 1)})
	lv.AppendFrom(&src, 2, 1)
	src.Truncate(0)
	src.AppendBytes([]byte("XXXXXXXXXXXXXXXX"))
	if want := []string{"0/0/1/<null>", "0/1/1/three", "0/1/1/four"}; !slices.Equal(entries(&lv), want) {
		t.Errorf("dense into levelled after src was reused: %v, want %v", entries(&lv), want)
	}
	if lv.ByteSize() != 9 {
		t.Errorf("levelled ByteSize = %d, want 9", lv.ByteSize())
	}
	// the destination's kept bytes never move: fill past one buffer
	big := make([]byte, 3000)
	for i := range 6 {
		big[0] = byte('a' + i)
		src.Truncate(0)
		src.AppendBytes(big)
		lv.AppendFrom(&src, 0, 1)
	}
	for i := range 6 {
		if b := lv.At(3 + i).ByteArray(); len(b) != 3000 || b[0] != byte('a'+i) {
			t.Fatalf("value %d after growth: len %d first %q", i, len(b), b[:1])
		}
	}
	if want := 9 + 6*3000; lv.ByteSize() != want {
		t.Errorf("ByteSize after growth = %d, want %d", lv.ByteSize(), want)
	}
	// a levelled source with a null into a dense destination: the set values copied
	var d2 Column
	d2.Reset(byteLeaf(1))
	d2.AppendFrom(&lv, 1, 1)
	if !d2.IsDense() || d2.Len() != 8 || string(d2.At(1).ByteArray()) != "four" || d2.ByteSize() != 9+6*3000 {
		t.Fatalf("set values into dense: dense=%v len=%d size=%d, want dense, 8 rows, %d bytes", d2.IsDense(), d2.Len(), d2.ByteSize(), 9+6*3000)
	}
	var d3 Column
	d3.Reset(byteLeaf(1))
	d3.AppendFrom(&lv, 0, 1)
	if d3.IsDense() || d3.Len() != lv.Len() || !d3.At(0).IsNull() || string(d3.At(1).ByteArray()) != "three" {
		t.Errorf("levelled with a null into dense: dense=%v len=%d", d3.IsDense(), d3.Len())
	}
}

// TestByteFormTurnKeepsAliasedBytes: values a byte-form column turned levelled holds alias
// its Bytes, which later levelled appends and truncation do not overwrite.
func TestByteFormTurnKeepsAliasedBytes(t *testing.T) {
	var c Column
	c.Reset(byteLeaf(0))
	c.Bytes = make([]byte, 0, 64)
	c.AppendBytes([]byte("keep"))
	c.ToLevelled()
	c.Append(parquet.NullValue().Level(0, 0, 0))
	c.Truncate(1)
	other := Levelled(nil)
	other.Reset(byteLeaf(0))
	other.AppendBytes([]byte("new"))
	c.AppendFrom(&other, 0, 0)
	if got, want := entries(&c), []string{"0/1/0/keep", "0/1/0/new"}; !slices.Equal(got, want) {
		t.Errorf("entries = %v, want %v", got, want)
	}
}
