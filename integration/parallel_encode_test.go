package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestParallelEncodeDeltaRS: a data file whose column chunks were encoded on four workers
// (GOMAXPROCS=4; 30,000 rows × 8 leaves is past the inline threshold) reads back through
// delta-rs (DataFusion's Parquet reader, which seeks to every chunk by the footer's
// offsets) with every value of every row as written: a chunk assembled out of order or
// with a wrong offset would put one column's values in another or fail the read.
func TestParallelEncodeDeltaRS(t *testing.T) {
	s := need(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 30_000
	path := filepath.Join(t.TempDir(), "parallel")
	createTable(t, path, `{"type":"struct","fields":[
{"name":"id","type":"long","nullable":false,"metadata":{}},
{"name":"name","type":"string","nullable":true,"metadata":{}},
{"name":"note","type":"string","nullable":true,"metadata":{}},
{"name":"kind","type":"string","nullable":true,"metadata":{}},
{"name":"cnt","type":"integer","nullable":true,"metadata":{}},
{"name":"score","type":"double","nullable":true,"metadata":{}},
{"name":"active","type":"boolean","nullable":true,"metadata":{}},
{"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}}]}`, nil)
	note := strings.Repeat("first purchase after the spring campaign; ", 5)
	kinds := []string{"CLICK", "VIEW", "BUY"}
	row := func(i int) map[string]any {
		r := map[string]any{"id": int64(i), "name": fmt.Sprintf("customer-%012d (Ann Example)", i),
			"kind": kinds[i%3], "cnt": int32(100 + i%7000), "score": float64(i%10_000) / 100, "active": i%2 == 0,
			"tags": []any{"web", "promo-spring-2024", kinds[(i/3)%3]}}
		if i%5 != 0 {
			r["note"] = note
		}
		return r
	}
	rows := make([]map[string]any, n)
	for i := range rows {
		rows[i] = row(i)
	}

	ctx := context.Background()
	tbl := openTable(t, path)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := deltawriter.ParquetSchema(snap.Schema, snap.ColumnMapping)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := deltawriter.RowsToColumns(pq, rows)
	if err != nil {
		t.Fatal(err)
	}
	add, err := deltawriter.WriteDataFile(ctx, tbl.Store(), pq, cols, n, snap.FileOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Operation: "WRITE",
		OperationParameters: map[string]string{"mode": "Append"}, Adds: []deltalog.Add{add}}); err != nil {
		t.Fatal(err)
	}

	got := readTable(t, s, path)
	if len(got.Rows) != n || got.Files != 1 {
		t.Fatalf("delta-rs read %d rows in %d files, want %d in 1", len(got.Rows), got.Files, n)
	}
	seen := make([]bool, n)
	for _, r := range got.Rows {
		id, ok := r["id"].(float64)
		if !ok || id < 0 || int(id) >= n || seen[int(id)] {
			t.Fatalf("row %v: bad or repeated id", r)
		}
		i := int(id)
		seen[i] = true
		want := row(i)
		tags, _ := r["tags"].([]any)
		wantTags := want["tags"].([]any)
		if r["name"] != want["name"] || r["kind"] != want["kind"] || r["cnt"] != float64(want["cnt"].(int32)) ||
			r["score"] != want["score"] || r["active"] != want["active"] || r["note"] != want["note"] ||
			len(tags) != 3 || tags[0] != wantTags[0] || tags[1] != wantTags[1] || tags[2] != wantTags[2] {
			t.Fatalf("row %d read by delta-rs\n got %v\nwant %v", i, r, want)
		}
	}
}
