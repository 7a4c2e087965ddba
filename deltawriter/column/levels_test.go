package column

import (
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// A column in the levels form holds its entries' levels as bytes and only the set
// values: Len counts entries, At gives each entry with its levels and the leaf's column
// index (values found past the nulls before them), and the methods of the other forms
// refuse it.
func TestLevelsForm(t *testing.T) {
	var c Column
	c.ResetLevels(Leaf{Index: 4, Kind: parquet.ByteArray, MaxDef: 3, MaxRep: 1})
	c.AppendNullsAt(2, 0, 0) // two null rows
	c.AppendBytesAt(0, []byte("a"))
	c.AppendNullsAt(1, 1, 2) // a null element
	c.AppendBytesAt(1, nil)  // an empty value
	c.AppendBytesAt(0, []byte("bc"))
	if !c.IsLevels() || c.IsDense() || c.Len() != 6 || string(c.Defs) != "\x00\x00\x03\x02\x03\x03" || string(c.Reps) != "\x00\x00\x00\x01\x01\x00" ||
		string(c.Bytes) != "abc" || len(c.Dense) != 3 || c.Dense[0] != 1 || c.Dense[1] != 1 || c.Dense[2] != 3 {
		t.Fatalf("levels form: len %d defs %v reps %v bytes %q ends %v", c.Len(), c.Defs, c.Reps, c.Bytes, c.Dense)
	}
	want := []string{"r0 d0 null", "r0 d0 null", "r0 d3 a", "r1 d2 null", "r1 d3 ", "r0 d3 bc"}
	for j, w := range want {
		v := c.At(j)
		got := levelString(v)
		if got != w || v.Column() != 4 {
			t.Errorf("At(%d) = %s (column %d), want %s (column 4)", j, got, v.Column(), w)
		}
	}
	var n Column
	n.ResetLevels(Leaf{Index: 1, Kind: parquet.Int32, MaxDef: 1})
	n.AppendWordAt(0, uint64(uint32(0xffffffff)))
	n.AppendNullsAt(1, 0, 0)
	n.AppendWordAt(0, 7)
	if n.Len() != 3 || len(n.Reps) != 0 || n.At(0).Int32() != -1 || !n.At(1).IsNull() || n.At(2).Int32() != 7 {
		t.Errorf("INT32 levels form: %v %v %v", n.At(0), n.At(1), n.At(2))
	}
	// Reset leaves the levels form
	n.Reset(Leaf{Index: 1, Kind: parquet.Int32, MaxDef: 1})
	if n.IsLevels() || !n.IsDense() || n.Len() != 0 || len(n.Defs) != 0 {
		t.Errorf("after Reset: levels %v dense %v len %d", n.IsLevels(), n.IsDense(), n.Len())
	}
	for name, f := range map[string]func(c *Column){
		"Append":        func(c *Column) { c.Append(parquet.ByteArrayValue([]byte("x")).Level(0, 3, 4)) },
		"AppendBytes":   func(c *Column) { c.AppendBytes([]byte("x")) },
		"ToLevelled":    func(c *Column) { c.ToLevelled() },
		"Truncate":      func(c *Column) { c.Truncate(1) },
		"KeepRows":      func(c *Column) { c.KeepRows([]bool{true, true, true, true}) },
		"AppendFrom":    func(c *Column) { var d Column; d.AppendFrom(c, 0, 4) },
		"AppendNullsAt": func(c *Column) { c.AppendNullsAt(1, 0, 3) }, // not below the maximum
		"AppendWordAt":  func(*Column) { var d Column; d.AppendWordAt(0, 1) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "column: ") {
					t.Errorf("%s: panic %v, want a column: message", name, r)
				}
			}()
			f(&c)
		}()
	}
}

func levelString(v parquet.Value) string {
	s := "r" + string(rune('0'+v.RepetitionLevel())) + " d" + string(rune('0'+v.DefinitionLevel())) + " "
	if v.IsNull() {
		return s + "null"
	}
	return s + string(v.ByteArray())
}
