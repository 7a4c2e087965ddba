package tableops

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// TestDescribeMaintenance: file and small-file counts, and the last OPTIMIZE and VACUUM
// read from the history (the newest of each; a VACUUM END wins over its START).
func TestDescribeMaintenance(t *testing.T) {
	ctx := context.Background()
	st, _ := storage.NewLocal(t.TempDir())
	schema := `"{\"type\":\"struct\",\"fields\":[{\"name\":\"a\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}"`
	commits := []string{
		`{"commitInfo":{"timestamp":1000,"operation":"CREATE TABLE"}}
{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"t1","format":{"provider":"parquet","options":{}},"schemaString":` + schema + `,"partitionColumns":[],"configuration":{},"createdTime":1}}
{"add":{"path":"small1.parquet","partitionValues":{},"size":1000,"modificationTime":1,"dataChange":true}}
{"add":{"path":"small2.parquet","partitionValues":{},"size":33554431,"modificationTime":1,"dataChange":true}}`,
		`{"commitInfo":{"timestamp":2000,"operation":"OPTIMIZE","operationParameters":{"predicate":"[]","auto":"false"},"operationMetrics":{"numRemovedFiles":"4","numAddedFiles":"1"}}}
{"add":{"path":"big.parquet","partitionValues":{},"size":33554432,"modificationTime":1,"dataChange":false}}`,
		`{"commitInfo":{"timestamp":3000,"operation":"VACUUM START","operationParameters":{"retentionCheckEnabled":"true","defaultRetentionMillis":"604800000"},"operationMetrics":{"numFilesToDelete":"4","sizeOfDataToDelete":"4096"}}}`,
		`{"commitInfo":{"timestamp":4000,"operation":"VACUUM END","operationParameters":{"status":"COMPLETED"},"operationMetrics":{"numDeletedFiles":"4","numVacuumedDirectories":"1"}}}`,
		`{"commitInfo":{"timestamp":5000,"operation":"WRITE"}}`,
	}
	for v, c := range commits {
		if err := st.PutIfAbsent(ctx, fmt.Sprintf("_delta_log/%020d.json", v), []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	d := Describe("t", snap)
	if err := AddMaintenance(ctx, st, &d); err != nil {
		t.Fatal(err)
	}
	if d.NumFiles != 3 || d.SmallFiles != 2 || d.LastOptimize == nil || d.LastOptimize.Version != 1 || d.LastVacuum == nil || d.LastVacuum.Version != 3 {
		t.Fatalf("describe: %d files, %d small, optimize %+v, vacuum %+v", d.NumFiles, d.SmallFiles, d.LastOptimize, d.LastVacuum)
	}
	var out bytes.Buffer
	WriteDetail(&out, d)
	for _, want := range []string{
		"files:             3 (67109863 bytes)\nsmall files:       2 (under 32 MiB)\n",
		"last OPTIMIZE:     version 1 at 1970-01-01T00:00:02Z (OPTIMIZE, numRemovedFiles=4, numAddedFiles=1)\n",
		"last VACUUM:       version 3 at 1970-01-01T00:00:04Z (VACUUM END COMPLETED, numDeletedFiles=4)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe output lacks %q:\n%s", want, out.String())
		}
	}
}
