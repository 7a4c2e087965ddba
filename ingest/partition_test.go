package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/decode"
)

// commitAdds returns, per commit version of the harness's table, its add actions.
func (h *harness) commitAdds() map[int64][]deltalog.Add {
	h.t.Helper()
	ctx := context.Background()
	st, err := storage.Open("file://" + h.tableDir)
	if err != nil {
		h.t.Fatal(err)
	}
	files, err := st.List(ctx, "_delta_log")
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[int64][]deltalog.Add{}
	for _, fi := range files {
		name := filepath.Base(fi.Name)
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, "_") {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(name, ".json"), 10, 64)
		if err != nil {
			continue
		}
		b, err := st.Get(ctx, "_delta_log/"+name)
		if err != nil {
			h.t.Fatal(err)
		}
		out[v] = nil
		for _, line := range bytes.Split(b, []byte("\n")) {
			var a struct {
				Add *deltalog.Add `json:"add"`
			}
			if len(line) > 0 && json.Unmarshal(line, &a) == nil && a.Add != nil {
				out[v] = append(out[v], *a.Add)
			}
		}
	}
	return out
}

// TestPartitionedWritesBoundedFiles: a table partitioned by customer (17 values) with
// batch.max_open_partitions 8: every commit has at most 8 data files, one per customer
// value, under customer=<value>/ with add.partitionValues; the files do not hold the
// partition column and the stats do not name it; every order is in the table once and
// the txns end at the end offsets.
func TestPartitionedWritesBoundedFiles(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	const parts = 3
	h := newHarness(t, parts)
	h.createTable([]string{"customer"}, nil)
	h.produce(1, 600, 0, parts, -1)
	cfg := h.config()
	cfg.Batch.MaxOpenPartitions = 8
	m := h.startWith("part", cfg, nil)
	h.waitHandled(600, 30*time.Second, m)
	m.stop(t)
	h.checkExactlyOnce(600)
	h.checkTxnsAtEnd()

	st, err := storage.Open("file://" + h.tableDir)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for v, adds := range h.commitAdds() {
		if len(adds) > 8 {
			t.Errorf("version %d has %d data files; want at most batch.max_open_partitions = 8", v, len(adds))
		}
		seen := map[string]bool{}
		for _, a := range adds {
			pv := a.PartitionValues["customer"]
			if pv == nil || len(a.PartitionValues) != 1 {
				t.Fatalf("version %d: partitionValues %v; want one customer value", v, a.PartitionValues)
			}
			if seen[*pv] {
				t.Errorf("version %d: two files for customer %s", v, *pv)
			}
			seen[*pv] = true
			if !strings.HasPrefix(a.Path, "customer="+*pv+"/part-00000-") {
				t.Errorf("add.path %q; want it under customer=%s/", a.Path, *pv)
			}
			if strings.Contains(a.Stats, "customer") {
				t.Errorf("stats name the partition column: %s", a.Stats)
			}
			b, err := st.Get(context.Background(), deltalog.CanonicalPath(a.Path))
			if err != nil {
				t.Fatal(err)
			}
			f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := f.Schema().Lookup("customer"); ok {
				t.Errorf("%s holds the partition column", a.Path)
			}
			// Every row of the file belongs to its partition: customer is c-(id % 17).
			leaf, _ := f.Schema().Lookup("order_id")
			r := parquet.NewReader(bytes.NewReader(b))
			var rows []parquet.Row
			for {
				buf := make([]parquet.Row, 64)
				n, err := r.ReadRows(buf)
				rows = append(rows, buf[:n]...)
				if err != nil || n == 0 {
					break
				}
			}
			n := len(rows)
			if int64(n) != f.NumRows() {
				t.Fatalf("%s: read %d of %d rows", a.Path, n, f.NumRows())
			}
			for _, row := range rows {
				id := row[leaf.ColumnIndex].Int64()
				if want := "c-" + itoa(id%17); want != *pv {
					t.Errorf("order %d (customer %s) is in the file of customer %s", id, want, *pv)
				}
			}
			total += n
		}
	}
	if total != 600 {
		t.Errorf("%d rows in the data files; want 600", total)
	}
	if n := testutil.ToFloat64(h.metrics.PartitionCuts.WithLabelValues("orders")); n < 1 {
		t.Errorf("ingestd_partition_limit_cuts_total = %v; want >= 1 (17 values, limit 8)", n)
	}
	if n := testutil.ToFloat64(h.metrics.FilesWritten.WithLabelValues("orders")); n < 17 {
		t.Errorf("ingestd_data_files_written_total = %v; want >= 17", n)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestPartitionerPlace: rows move into their partition's buffers with the narrower file
// schema's column indexes and the table-wide buffers are left empty; an empty string in
// a NOT NULL partition column is a not_null_violation; the limit refuses a new value
// but not an open one.
func TestPartitionerPlace(t *testing.T) {
	schema, pq, dec, row := tableSetup(t, rowfillAvro, func(s *deltalog.StructType) { s.Field("Region").Nullable = false })
	p, err := newPartitioner(schema, []string{"region"}, deltalog.ColumnMappingNone, pq, row, false, false, 2, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	if err := place(10, "APAC"); !errors.Is(err, errPartitionLimit) {
		t.Fatalf("a third value with limit 2: %v; want errPartitionLimit", err)
	}
	if err := place(11, "EU"); err != nil {
		t.Fatalf("an open value at the limit: %v", err)
	}
	for i := range cols {
		if n := cols[i].Len(); n != 0 {
			t.Errorf("table-wide leaf %d keeps %d values; want every row moved out", i, n)
		}
	}
	if _, ok := p.file.Lookup("Region"); ok || len(p.file.Columns()) != len(pq.Columns())-1 {
		t.Fatalf("file schema %v still has the partition column", p.file.Columns())
	}
	files := p.files()
	if len(files) != 2 || *files[0].values["Region"] != "US" || files[0].rows != 2 || files[1].rows != 2 || files[0].dir != "Region=US" {
		t.Fatalf("files %+v; want Region=US (2 rows), Region=EU (2 rows)", files)
	}
	idLeaf, _ := p.file.Lookup("id")
	ids := levelledOf(files[0].cols)[idLeaf.ColumnIndex]
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
	p, err := newPartitioner(schema, []string{"d", "r"}, deltalog.ColumnMappingNone, pq, row, false, false, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	files := p.files()
	if len(files) != len(order) {
		t.Fatalf("%d files, want %d (%v)", len(files), len(order), order)
	}
	idLeaf, _ := p.file.Lookup("id")
	for i, f := range files {
		got := fmt.Sprint(*f.values["d"]) + "|<null>"
		if r := f.values["r"]; r != nil {
			got = *f.values["d"] + "|" + *r
		}
		var ids []int64
		for _, v := range levelledOf(f.cols)[idLeaf.ColumnIndex] {
			ids = append(ids, v.Int64())
		}
		if got != order[i] || fmt.Sprint(ids) != fmt.Sprint(want[order[i]]) || f.rows != len(ids) {
			t.Errorf("file %d: values %s ids %v (%d rows); want %s ids %v", i, got, ids, f.rows, order[i], want[order[i]])
		}
	}
	if fmt.Sprint(order) != "[0.0|a NaN|a 0.0|<null> 0.0|b]" || fmt.Sprint(want["0.0|a"]) != "[0 1 2 3 7 10]" {
		t.Fatalf("groups %v (0.0|a: %v): want 0.0|a (ids 0 1 2 3 7 10), NaN|a, 0.0|<null>, 0.0|b", order, want["0.0|a"])
	}
}

// tableSetup compiles writer schema avsc (id 1) against its own table schema, changed by
// tweak when not nil, as a flush would: the table schema, its Parquet schema, the decoder
// and a row view.
func tableSetup(t *testing.T, avsc string, tweak func(*deltalog.StructType)) (*deltalog.StructType, *parquet.Schema, *decode.Decoder, *rowView) {
	t.Helper()
	ws, err := decode.ParseWriterSchema(1, avsc)
	if err != nil {
		t.Fatal(err)
	}
	schema := ws.Delta.Clone()
	if tweak != nil {
		tweak(schema)
	}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := decode.Compile(ws, schema, deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatal(err)
	}
	row, err := newRowView(schema, deltalog.ColumnMappingNone, pq)
	if err != nil {
		t.Fatal(err)
	}
	return schema, pq, dec, row
}
