package column

import (
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// AppendBytes and AppendDense on a column that already turned levelled (its first null)
// append the row as a levelled value, so no row is lost and no aliased byte moves.
func TestAppendDenseFormsAfterTurn(t *testing.T) {
	var c Column
	c.Reset(byteLeaf(3))
	c.AppendBytes([]byte("ab"))
	c.Append(parquet.NullValue().Level(0, 0, 3))
	before := c.At(0).ByteArray()
	c.AppendBytes([]byte("cd"))
	c.AppendBytes(nil)
	if want := []string{"0/1/3/ab", "0/0/3/<null>", "0/1/3/cd", "0/1/3/"}; !slices.Equal(entries(&c), want) {
		t.Fatalf("entries = %v, want %v", entries(&c), want)
	}
	if string(before) != "ab" || c.Dense != nil || c.ByteSize() != 4 {
		t.Errorf("row 0 = %q, dense offsets %v, ByteSize %d (want \"ab\", none, 4)", before, c.Dense, c.ByteSize())
	}
	if v := c.At(3); v.IsNull() || v.ByteArray() == nil {
		t.Errorf("an empty value after the turn reads as null")
	}
	c.Truncate(2)
	if want := []string{"0/1/3/ab", "0/0/3/<null>"}; !slices.Equal(entries(&c), want) {
		t.Errorf("after Truncate(2): %v", entries(&c))
	}

	var w Column
	w.Reset(Leaf{Index: 1, Kind: parquet.Int64, MaxDef: 1})
	w.AppendDense(7)
	w.Append(parquet.NullValue().Level(0, 0, 1))
	w.AppendDense(uint64(1 << 40))
	var got []string
	for j := range w.Len() {
		v := w.At(j)
		got = append(got, v.String()+"/"+string(rune('0'+v.DefinitionLevel())))
	}
	if want := []string{"7/1", "<null>/0", "1099511627776/1"}; !slices.Equal(got, want) {
		t.Errorf("words after the turn: %v, want %v", got, want)
	}
}

// The dense appends of the wrong form panic with a message naming the method and leaf
// (a caller bug: the values would be written under the wrong physical type).
func TestAppendDenseFormsWrongLeafPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"AppendBytes on INT64": func() {
			var c Column
			c.Reset(Leaf{Index: 0, Kind: parquet.Int64, MaxDef: 1})
			c.AppendBytes([]byte("x"))
		},
		"AppendDense on BYTE_ARRAY": func() {
			var c Column
			c.Reset(byteLeaf(0))
			c.AppendDense(1)
		},
		"AppendBytes on a levelled wrap": func() {
			c := Levelled(nil)
			c.AppendBytes([]byte("x"))
		},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, "column: Append") {
					t.Errorf("%s: recovered %v, want a panic naming the method", name, r)
				}
			}()
			f()
		}()
	}
}
