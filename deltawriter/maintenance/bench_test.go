package maintenance

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// BenchmarkOptimize compacts 100 files of 2,000 rows (id long, v string of ~40 bytes, n
// double) in one partition into one file; MB/s is source bytes read per second
// (docs/performance.md).
//
//	go test -run '^$' -bench BenchmarkOptimize -benchtime 5x ./deltawriter/maintenance/
func BenchmarkOptimize(b *testing.B) {
	ctx := context.Background()
	schema, err := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},
		{"name":"v","type":"string","nullable":true,"metadata":{}},{"name":"n","type":"double","nullable":true,"metadata":{}}]}`)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, err := openBenchStore(filepath.Join(b.TempDir(), "t"))
		if err != nil {
			b.Fatal(err)
		}
		tbl, err := deltawriter.Open(ctx, st)
		if err != nil {
			b.Fatal(err)
		}
		delta, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: delta.Protocol, Metadata: delta.Metadata}); err != nil {
			b.Fatal(err)
		}
		snap, _ := tbl.Snapshot(ctx)
		pq, _ := snap.DataFileSchema()
		var adds []deltalog.Add
		var total int64
		for f := 0; f < 100; f++ {
			rows := make([]map[string]any, 2000)
			for r := range rows {
				id := int64(f*2000 + r)
				rows[r] = map[string]any{"id": id, "v": fmt.Sprintf("customer-%08d-%024d", id%5000, id), "n": float64(id) * 0.5}
			}
			cols, err := deltawriter.RowsToColumns(pq, rows)
			if err != nil {
				b.Fatal(err)
			}
			add, err := deltawriter.WriteDataFile(ctx, st, pq, cols, len(rows), snap.FileOptions())
			if err != nil {
				b.Fatal(err)
			}
			adds = append(adds, add)
			total += add.Size
		}
		if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Adds: adds}); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(total)
		b.StartTimer()
		res, err := Optimize(ctx, tbl, OptimizeOptions{MinFiles: 2})
		if err != nil || res.FilesRemoved != 100 || res.FilesAdded != 1 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

func openBenchStore(root string) (storage.Store, error) { return storage.Open(root) }
