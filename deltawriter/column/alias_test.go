package column

import (
	"testing"

	"github.com/parquet-go/parquet-go"
)

// AppendFrom of a levelled source whose values alias its own Bytes (a byte-form column
// turned levelled at a null) leaves nothing of the destination aliasing the source: the
// source Reset and refilled does not change the destination's values.
func TestAppendFromLevelledSourceOwnBytes(t *testing.T) {
	l := Leaf{Index: 0, Kind: parquet.ByteArray, MaxDef: 1}
	for _, destDense := range []bool{true, false} {
		var src, dst Column
		src.Reset(l)
		src.AppendBytes([]byte("abc"))
		src.Append(parquet.NullValue().Level(0, 0, 0)) // turns levelled; "abc" aliases src.Bytes
		src.Append(parquet.ByteArrayValue([]byte("def")).Level(0, 1, 0))
		dst.Reset(l)
		if !destDense {
			dst.Append(parquet.NullValue().Level(0, 0, 0))
		}
		dst.AppendFrom(&src, 0, 0)
		src.Reset(l)
		src.AppendBytes([]byte("xyz"))
		off := 0
		if !destDense {
			off = 1
		}
		if got := string(dst.At(off).ByteArray()); got != "abc" {
			t.Errorf("destination dense %v: row %d reads %q after the source was reused, want \"abc\"", destDense, off, got)
		}
	}
}
