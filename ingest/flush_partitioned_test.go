package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
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
