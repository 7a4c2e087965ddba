package parquetenc_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// The schemas, rows and stores the tests share. The schemas are Delta schemas made into
// Parquet schemas by deltawriter.ParquetSchema, as the table writer hands them over, and
// deltawriter.WriteColumns and WriteDataFile give the files and statistics the table
// gets from this package's output.

// readRows reads back every row of the Parquet file data as parquet-go reads it: the
// values of each row, with their levels and column indexes, in column order.
func readRows(t *testing.T, data []byte) []parquet.Row {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out []parquet.Row
	buf := make([]parquet.Row, 64)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				out = append(out, r.Clone())
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkRows reads data back, fails unless its rows are exactly want, and returns the
// opened file (for its footer).
func checkRows(t *testing.T, data []byte, want []parquet.Row) *parquet.File {
	t.Helper()
	got := readRows(t, data)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("row %d\n got %v\nwant %v", i, got[i], want[i])
		}
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}
