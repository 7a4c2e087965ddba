package deltawriter

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// ReadRowColumns reads the named columns of the rows asked (unsorted, repeated) from a
// file of several row groups, as another writer writes them; a row past the end and an
// unknown column are refused.
func TestReadRowColumns(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	tbl, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	field := func(name string, typ deltalog.DataType) *deltalog.StructField {
		return &deltalog.StructField{Name: name, Type: typ, Nullable: true, Metadata: map[string]any{}}
	}
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{field("id", deltalog.Long), field("s", deltalog.String),
		field("b", deltalog.Binary), field("tags", &deltalog.ArrayType{ElementType: deltalog.String, ContainsNull: true})}}
	sd, _, err := PrepareSchemaChange(nil, SchemaChange{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: sd.Protocol, Metadata: sd.Metadata, Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := snap.DataFileSchema()
	if err != nil {
		t.Fatal(err)
	}
	// 10 rows in row groups of 4: rows 4..7 in the second, 8 and 9 in the third.
	var rows []map[string]any
	for i := range 10 {
		r := map[string]any{"id": int64(i), "s": strings.Repeat(fmt.Sprint(i), 3), "b": []byte{byte(i), 0xff}, "tags": []any{"t" + fmt.Sprint(i), nil}}
		if i == 5 {
			r["s"], r["tags"] = nil, nil
		}
		rows = append(rows, r)
	}
	cols, err := RowsToColumns(pq, rows)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[any](&buf, pq, parquet.MaxRowsPerRowGroup(4))
	for i := range rows {
		var row parquet.Row
		for _, c := range cols { // leaf by leaf: row i's values of each
			n := -1
			for _, v := range c {
				if v.RepetitionLevel() == 0 {
					n++
				}
				if n == i {
					row = append(row, v)
				}
			}
		}
		if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "other.parquet", buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	add := deltalog.Add{Path: "other.parquet", Size: int64(buf.Len()), ModificationTime: time.Now().UnixMilli(), DataChange: true}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil || len(f.RowGroups()) != 3 {
		t.Fatalf("row groups %d, %v; want 3", len(f.RowGroups()), err)
	}
	got, err := snap.ReadRowColumns(ctx, st, add, []uint64{9, 1, 5, 1, 6}, []string{"s", "tags", "b"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{
		1: "b=01ff s=111 tags=[t1 <nil>]",
		5: "b=05ff s=<nil> tags=<nil>",
		6: "b=06ff s=666 tags=[t6 <nil>]",
		9: "b=09ff s=999 tags=[t9 <nil>]",
	}
	if len(got) != len(want) {
		t.Fatalf("rows %v", got)
	}
	for r, w := range want {
		row := got[r]
		if _, ok := row["id"]; ok {
			t.Fatalf("row %d has id: only the columns asked are read", r)
		}
		if s := fmt.Sprintf("b=%x s=%v tags=%v", row["b"], row["s"], row["tags"]); s != w {
			t.Errorf("row %d: %s, want %s", r, s, w)
		}
	}
	for _, c := range []struct {
		rows []uint64
		cols []string
		want string
	}{
		{[]uint64{3, 10}, []string{"s"}, "row 10 is beyond the file's 10 rows"},
		{[]uint64{3}, []string{"nosuch"}, "the table has no column nosuch"},
	} {
		if _, err := snap.ReadRowColumns(ctx, st, add, c.rows, c.cols); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rows %v columns %v: %v, want %q", c.rows, c.cols, err, c.want)
		}
	}
}
