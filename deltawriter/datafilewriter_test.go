package deltawriter

import (
	"bytes"
	"context"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// A file streamed one row per row group, in any row order, levelled or in the decoder's
// dense forms, has the stats WriteDataFile gives the same rows in one row group: the
// bounds of every type merged over row groups (signed decimals, unsigned bytes), the
// null counts of leaves, structs, arrays and maps summed.
func TestDataFileWriterMergesStats(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	schema, err := deltalog.ParseSchema(deltatest.AllTypesSchema)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	opts := FileOptions{Schema: schema, ColumnMapping: deltalog.ColumnMappingNone}
	rows := allTypesRows(t)
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}} {
		for _, dense := range []bool{false, true} {
			w, err := NewDataFileWriter(ctx, st, pq, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range order {
				vals, err := shredRows(pq, rows[i:i+1])
				if err != nil {
					t.Fatal(err)
				}
				var cols []column.Column
				if dense {
					cols = deltatest.ColumnsOf(pq, vals)
				} else {
					cols = deltatest.Levelled(vals)
				}
				if err := w.WriteRowGroup(cols, 1); err != nil {
					t.Fatal(err)
				}
			}
			add, err := w.Close()
			if err != nil {
				t.Fatal(err)
			}
			if add.Stats != wantAllTypesStats {
				t.Errorf("order %v dense %v: stats\n got %s\nwant %s", order, dense, add.Stats, wantAllTypesStats)
			}
			data, err := st.Get(ctx, add.Path)
			if err != nil || int64(len(data)) != add.Size {
				t.Fatalf("file: %d bytes, add.size %d, %v", len(data), add.Size, err)
			}
			f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if f.NumRows() != 3 || len(f.RowGroups()) != 3 {
				t.Fatalf("%d rows in %d row groups", f.NumRows(), len(f.RowGroups()))
			}
		}
	}
}

// A writer with no row discards its object.
func TestDataFileWriterNoRows(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	st, _ := storage.NewLocal(root)
	schema, _ := deltalog.ParseSchema(deltatest.AllTypesSchema)
	pq, _ := ParquetSchema(schema, deltalog.ColumnMappingNone)
	w, err := NewDataFileWriter(ctx, st, pq, FileOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err == nil {
		t.Fatal("Close of an empty file succeeded")
	}
	if fis, _ := st.List(ctx, ""); len(fis) != 0 {
		t.Fatalf("left %v", fis)
	}
}
