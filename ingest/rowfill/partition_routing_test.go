package rowfill

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
)

// TestPartitionerPlace: rows move into their partition's buffers with the narrower file
// schema's column indexes and the table-wide buffers are left empty; an empty string in
// a NOT NULL partition column is a not_null_violation; the limit refuses a new value
// but not an open one.
func TestPartitionerPlace(t *testing.T) {
	schema, pq, dec, row := tableSetup(t, rowfillAvro, func(s *deltalog.StructType) { s.Field("Region").Nullable = false })
	p, err := newPartitioner(schema, []string{"region"}, deltalog.ColumnMappingNone, pq, row, false, false, 2, discard())
	if err != nil {
		t.Fatal(err)
	}
	cols := newCols(pq)
	place := func(id int64, region string) error {
		row.begin(cols)
		if err := dec.DecodeColumns(nil, rowfillRecord(t, id, &region, []string{"t"}), cols); err != nil {
			t.Fatal(err)
		}
		return p.place(row)
	}
	for i, r := range []string{"US", "EU", "US"} {
		if err := place(int64(i), r); err != nil {
			t.Fatal(err)
		}
	}
	var de *decode.Error
	if err := place(9, ""); !errors.As(err, &de) || de.Reason != decode.ReasonNotNullViolation || de.Field != "Region" {
		t.Fatalf("empty string in NOT NULL Region: %v; want not_null_violation at Region", err)
	}
	if err := place(10, "APAC"); !errors.Is(err, ErrPartitionLimit) {
		t.Fatalf("a third value with limit 2: %v; want ErrPartitionLimit", err)
	}
	if err := place(11, "EU"); err != nil {
		t.Fatalf("an open value at the limit: %v", err)
	}
	for i := range cols {
		if n := cols[i].Len(); n != 0 {
			t.Errorf("table-wide leaf %d keeps %d values; want every row moved out", i, n)
		}
	}
	if _, ok := p.FileSchema().Lookup("Region"); ok || len(p.FileSchema().Columns()) != len(pq.Columns())-1 {
		t.Fatalf("file schema %v still has the partition column", p.FileSchema().Columns())
	}
	files := p.Files()
	if len(files) != 2 || *files[0].Values["Region"] != "US" || files[0].Rows != 2 || files[1].Rows != 2 || files[0].Dir != "Region=US" {
		t.Fatalf("files %+v; want Region=US (2 rows), Region=EU (2 rows)", files)
	}
	idLeaf, _ := p.FileSchema().Lookup("id")
	ids := levelledOf(files[0].Cols)[idLeaf.ColumnIndex]
	if len(ids) != 2 || ids[0].Int64() != 0 || ids[1].Int64() != 2 || ids[1].Column() != idLeaf.ColumnIndex {
		t.Fatalf("US ids %v; want [0 2] with column index %d", ids, idLeaf.ColumnIndex)
	}
}

// A row whose partition values are the last row's, bit for bit, goes to the last row's
// file without its values being serialised again; a row that differs only in bits (-0.0
// after 0.0), a NaN (never equal to itself) and a null take the full path and go where
// their serialisation says (-0.0 serialises as 0.0: the same file). The files match a
// grouping by the serialised values of every row.
func TestPartitionerPlaceRuns(t *testing.T) {
	const avsc = `{"type":"record","name":"r","fields":[{"name":"id","type":"long"},{"name":"d","type":"double"},{"name":"r","type":["null","string"]}]}`
	schema, pq, dec, row := tableSetup(t, avsc, nil)
	p, err := newPartitioner(schema, []string{"d", "r"}, deltalog.ColumnMappingNone, pq, row, false, false, 0, discard())
	if err != nil {
		t.Fatal(err)
	}
	a, b := "a", "b"
	type in struct {
		d float64
		r *string
	}
	negZero, nan := math.Copysign(0, -1), math.NaN()
	rows := []in{{0, &a}, {0, &a}, {negZero, &a}, {0, &a}, {nan, &a}, {nan, &a}, {0, nil}, {0, &a}, {0, &b}, {0, &b}, {negZero, &a}}
	var arena decode.Arena
	cols := newCols(pq)
	want := map[string][]int64{} // serialised partition values → ids, in order
	var order []string
	for i, x := range rows {
		v := map[string]any{"id": int64(i), "d": x.d, "r": nil}
		if x.r != nil {
			v["r"] = map[string]any{"string": *x.r}
		}
		body, err := avro.Marshal(avro.MustParse(avsc), v)
		if err != nil {
			t.Fatal(err)
		}
		row.begin(cols)
		if err := dec.DecodeColumns(&arena, body, cols); err != nil {
			t.Fatal(err)
		}
		if err := p.place(row); err != nil {
			t.Fatal(err)
		}
		dv, _ := deltawriter.PartitionValue(schema.Field("d").Type, parquet.DoubleValue(x.d))
		key := *dv + "|<null>"
		if x.r != nil {
			key = *dv + "|" + *x.r
		}
		if _, ok := want[key]; !ok {
			order = append(order, key)
		}
		want[key] = append(want[key], int64(i))
	}
	files := p.Files()
	if len(files) != len(order) {
		t.Fatalf("%d files, want %d (%v)", len(files), len(order), order)
	}
	idLeaf, _ := p.FileSchema().Lookup("id")
	for i, f := range files {
		got := fmt.Sprint(*f.Values["d"]) + "|<null>"
		if r := f.Values["r"]; r != nil {
			got = *f.Values["d"] + "|" + *r
		}
		var ids []int64
		for _, v := range levelledOf(f.Cols)[idLeaf.ColumnIndex] {
			ids = append(ids, v.Int64())
		}
		if got != order[i] || fmt.Sprint(ids) != fmt.Sprint(want[order[i]]) || f.Rows != len(ids) {
			t.Errorf("file %d: values %s ids %v (%d rows); want %s ids %v", i, got, ids, f.Rows, order[i], want[order[i]])
		}
	}
	if fmt.Sprint(order) != "[0.0|a NaN|a 0.0|<null> 0.0|b]" || fmt.Sprint(want["0.0|a"]) != "[0 1 2 3 7 10]" {
		t.Fatalf("groups %v (0.0|a: %v): want 0.0|a (ids 0 1 2 3 7 10), NaN|a, 0.0|<null>, 0.0|b", order, want["0.0|a"])
	}
}

// A partitioner placing rows of hand-built byte-form columns (no decoder): the last
// row's partition value is kept as a copy, so the next row, whose bytes go where the
// moved row's were in the table-wide column, is compared with the right value and goes
// to its own file.
func TestPartitionerPlaceDenseStrings(t *testing.T) {
	const avsc = `{"type":"record","name":"r","fields":[{"name":"id","type":"long"},{"name":"r","type":"string"}]}`
	schema, pq, _, row := tableSetup(t, avsc, nil)
	p, err := newPartitioner(schema, []string{"r"}, deltalog.ColumnMappingNone, pq, row, false, false, 0, discard())
	if err != nil {
		t.Fatal(err)
	}
	cols := newCols(pq)
	idLeaf, _ := column.LeafOf(pq, "id")
	rLeaf, _ := column.LeafOf(pq, "r")
	want := map[string][]int64{}
	for i, r := range []string{"a", "b", "b", "a", "c", "cc", "c", "a"} {
		row.begin(cols)
		if !cols[rLeaf.Index].IsDense() || !cols[idLeaf.Index].IsDense() {
			t.Fatal("table-wide columns not dense")
		}
		cols[idLeaf.Index].AppendDense(uint64(i))
		cols[rLeaf.Index].AppendBytes([]byte(r))
		if err := p.place(row); err != nil {
			t.Fatal(err)
		}
		want[r] = append(want[r], int64(i))
	}
	fileID, _ := column.LeafOf(p.FileSchema(), "id")
	got := map[string][]int64{}
	var order []string
	for _, f := range p.Files() {
		v := *f.Values["r"]
		order = append(order, v)
		for _, x := range levelledOf(f.Cols)[fileID.Index] {
			got[v] = append(got[v], x.Int64())
		}
		if !f.Cols[fileID.Index].IsDense() {
			t.Errorf("file %s: id not dense", v)
		}
	}
	sort.Strings(order)
	if fmt.Sprint(order) != "[a b c cc]" || !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("files %v with ids %v; want a, b, c, cc with ids %v", order, got, want)
	}
}
