package parquetenc

import (
	"bytes"
	"testing"
)

// appendConstLevels writes the bytes parquet-go's RLE encoder (the levelled pass's
// appendLevels) writes for n equal levels, at every bit width.
func TestAppendConstLevels(t *testing.T) {
	e := &columnEncoder{}
	for _, level := range []int{1, 2, 3, 7, 100, 255} {
		for n := 1; n <= 2100; n++ {
			want, err := e.appendLevels(nil, bytes.Repeat([]byte{byte(level)}, n), level)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendConstLevels(nil, n, level); !bytes.Equal(got, want) {
				t.Fatalf("%d levels of %d: %x, rle encoder %x", n, level, got, want)
			}
		}
	}
	if got := appendConstLevels([]byte("ab"), 9, 1); !bytes.Equal(got, []byte{'a', 'b', 4, 0, 0, 0, 16, 1, 2, 1}) {
		t.Fatalf("after a prefix: %x", got)
	}
}
