package column

import (
	"testing"

	"github.com/parquet-go/parquet-go"
)

// An empty BYTE_ARRAY value is a set value with a non-nil empty slice in every form and
// every path, as the levelled form the decoder appends holds it (ingest/decode: an
// empty value is never nil, so it is not mistaken for a missing one): in the byte form
// before any byte was appended (Bytes still nil after Reset), read with ValueBytes and
// At, turned levelled, and copied into a levelled column by AppendFrom.
func TestEmptyBytesNeverNil(t *testing.T) {
	leaf := Leaf{Index: 0, Kind: parquet.ByteArray, MaxDef: 1}
	var c Column
	c.Reset(leaf)
	c.AppendBytes(nil)
	c.AppendBytes([]byte{})
	if !c.IsDense() || c.Len() != 2 {
		t.Fatalf("dense %v, %d rows", c.IsDense(), c.Len())
	}
	for j := range 2 {
		if b := c.ValueBytes(j); b == nil || len(b) != 0 {
			t.Errorf("ValueBytes(%d) = %v (nil %v), want a non-nil empty slice", j, b, b == nil)
		}
		if v := c.At(j); v.IsNull() || v.ByteArray() == nil || len(v.ByteArray()) != 0 || v.DefinitionLevel() != 1 {
			t.Errorf("At(%d) = %v (nil %v), want a set, non-nil empty value at def 1", j, v, v.ByteArray() == nil)
		}
	}
	var dst Column
	dst.Reset(leaf)
	dst.Append(parquet.NullValue().Level(0, 0, 0)) // levelled
	dst.AppendFrom(&c, 0, 0)
	for j := 1; j < 3; j++ {
		if v := dst.At(j); v.IsNull() || v.ByteArray() == nil || len(v.ByteArray()) != 0 {
			t.Errorf("AppendFrom into a levelled column: entry %d = %v (nil %v), want a non-nil empty value", j, v, v.ByteArray() == nil)
		}
	}
	c.ToLevelled()
	for j := range 2 {
		if v := c.At(j); v.IsNull() || v.ByteArray() == nil || len(v.ByteArray()) != 0 {
			t.Errorf("ToLevelled: entry %d = %v (nil %v), want a non-nil empty value", j, v, v.ByteArray() == nil)
		}
	}
}
