package column

import (
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func TestKeepRowsDenseWords(t *testing.T) {
	var c Column
	c.Reset(Leaf{Kind: parquet.Int64, MaxDef: 1, Index: 2})
	for _, v := range []int64{10, 11, 12, 13, 14} {
		c.AppendDense(uint64(v))
	}
	c.KeepRows([]bool{false, true, false, true, true})
	var got []int64
	for j := range c.Len() {
		got = append(got, c.At(j).Int64())
	}
	if want := []int64{11, 13, 14}; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
}

func TestKeepRowsDenseBytes(t *testing.T) {
	var c Column
	c.Reset(Leaf{Kind: parquet.ByteArray, MaxDef: 1})
	for _, v := range []string{"alpha", "", "be", "gamma", "d"} {
		c.AppendBytes([]byte(v))
	}
	c.KeepRows([]bool{false, true, true, false, true})
	var got []string
	for j := range c.Len() {
		got = append(got, string(c.ValueBytes(j)))
	}
	if want := []string{"", "be", "d"}; !slices.Equal(got, want) {
		t.Fatalf("kept %q, want %q", got, want)
	}
	if string(c.Bytes) != "bed" || !slices.Equal(c.Dense, []uint64{0, 2, 3}) {
		t.Fatalf("Bytes %q Dense %v, want \"bed\" [0 2 3]", c.Bytes, c.Dense)
	}
}

func TestKeepRowsLevelledRepeated(t *testing.T) {
	// A list column: row 0 = [1, 2], row 1 = null, row 2 = [3], row 3 = [4, 5, 6].
	vals := []parquet.Value{
		parquet.Int32Value(1).Level(0, 3, 0), parquet.Int32Value(2).Level(1, 3, 0),
		parquet.NullValue().Level(0, 0, 0),
		parquet.Int32Value(3).Level(0, 3, 0),
		parquet.Int32Value(4).Level(0, 3, 0), parquet.Int32Value(5).Level(1, 3, 0), parquet.Int32Value(6).Level(1, 3, 0),
	}
	c := Levelled(slices.Clone(vals))
	c.KeepRows([]bool{true, false, false, true})
	want := []parquet.Value{vals[0], vals[1], vals[4], vals[5], vals[6]}
	if len(c.Values) != len(want) {
		t.Fatalf("kept %d values, want %d", len(c.Values), len(want))
	}
	for i := range want {
		if !parquet.Equal(c.Values[i], want[i]) || c.Values[i].RepetitionLevel() != want[i].RepetitionLevel() {
			t.Errorf("value %d = %v (rep %d), want %v (rep %d)", i, c.Values[i], c.Values[i].RepetitionLevel(), want[i], want[i].RepetitionLevel())
		}
	}
}

func TestKeepRowsWrongLengthPanics(t *testing.T) {
	var c Column
	c.Reset(Leaf{Kind: parquet.Int64, MaxDef: 1})
	c.AppendDense(1)
	defer func() {
		if recover() == nil {
			t.Fatal("KeepRows with two entries for one row did not panic")
		}
	}()
	c.KeepRows([]bool{true, false})
}
