package column_test

import (
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// AppendCopy keeps no alias of the values it is given: a page buffer overwritten after
// each append leaves the byte form, the levelled form after a null, and FIXED_LEN_BYTE_ARRAY
// values as they were appended.
func TestAppendCopyOwnsBytes(t *testing.T) {
	page := []byte("abc")
	var c column.Column
	c.Reset(column.Leaf{Index: 2, Kind: parquet.ByteArray, MaxDef: 1})
	c.AppendCopy(parquet.ByteArrayValue(page).Level(0, 1, 2))
	copy(page, "XYZ")
	c.AppendCopy(parquet.NullValue().Level(0, 0, 2))
	c.AppendCopy(parquet.ByteArrayValue(page).Level(0, 1, 2))
	copy(page, "QQQ")
	if c.IsDense() || c.Len() != 3 {
		t.Fatalf("dense %v, %d entries", c.IsDense(), c.Len())
	}
	want := []string{"abc", "", "XYZ"}
	for j, w := range want {
		v := c.At(j)
		if string(v.ByteArray()) != w || v.Column() != 2 || v.IsNull() != (j == 1) {
			t.Errorf("entry %d: %q null %v column %d, want %q", j, v.ByteArray(), v.IsNull(), v.Column(), w)
		}
	}

	var f column.Column
	f.Reset(column.Leaf{Index: 0, Kind: parquet.FixedLenByteArray, MaxDef: 1})
	b := []byte{1, 2, 3, 4}
	f.AppendCopy(parquet.FixedLenByteArrayValue(b).Level(0, 1, 0))
	b[0] = 9
	if got := f.At(0).ByteArray(); got[0] != 1 || len(got) != 4 || f.At(0).Kind() != parquet.FixedLenByteArray {
		t.Fatalf("FIXED_LEN_BYTE_ARRAY value %v (%v)", got, f.At(0).Kind())
	}

	var d column.Column
	d.Reset(column.Leaf{Index: 1, Kind: parquet.ByteArray, MaxDef: 1})
	p := []byte("hello")
	d.AppendCopy(parquet.ByteArrayValue(p).Level(0, 1, 1))
	copy(p, "jello")
	if !d.IsDense() || string(d.ValueBytes(0)) != "hello" {
		t.Fatalf("dense %v, value %q", d.IsDense(), d.ValueBytes(0))
	}
}
