package deltawriter

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// The commit path (docs/performance.md): 10,000 commits (one add and one txn each, as a
// pipeline flush makes) to a local table with a checkpoint every 10 commits, p50/p99/max
// of Table.Commit. Run with -benchtime 1x: one iteration is the whole 10,000-commit run.
func BenchmarkCommitPath(b *testing.B) {
	b.Run("sync-checkpoints", func(b *testing.B) { benchCommitPath(b) })
	b.Run("background-checkpoints", func(b *testing.B) { benchCommitPath(b, WithBackgroundCheckpoints()) })
}

func benchCommitPath(b *testing.B, opts ...Option) {
	const commits = 10_000
	for b.Loop() {
		ctx := context.Background()
		st, err := storage.NewLocal(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		tbl, err := Open(ctx, st, opts...)
		if err != nil {
			b.Fatal(err)
		}
		schema, _ := deltalog.ParseSchema(deltatest.BenchSchema)
		p, m := newTableMetadata("bench", schema, nil, nil)
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: &p, Metadata: &m}); err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, commits)
		stats := `{"numRecords":1000,"minValues":{"id":1},"maxValues":{"id":1000},"nullCount":{"id":0}}`
		for v := int64(0); v < commits; v++ {
			a := deltalog.Add{Path: fmt.Sprintf("part-00000-%08d-c000.snappy.parquet", v), Size: 123456, ModificationTime: 1, DataChange: true, Stats: stats}
			t0 := time.Now()
			if _, err := tbl.Commit(ctx, Commit{ReadVersion: v, Adds: []deltalog.Add{a}, Txns: []deltalog.Txn{{AppID: "bench-orders-0", Version: v * 1000}}}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		tbl.WaitCheckpoints()
		if got := readLastCheckpoint(ctx, st); got != commits {
			b.Fatalf("_last_checkpoint names version %d, want %d", got, commits)
		}
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(0, "ns/op")
	}
}

// BenchmarkCheckpointEncode: the Parquet checkpoint of a table with 10,000 live files
// (one txn), built and encoded in memory. "row-maps" is the former path (generic row
// trees shredded by shredRows, parquet-go's default snappy); "columns" is the current
// one (buildCheckpointColumns, s2 snappy). ms per checkpoint, 1 core.
func BenchmarkCheckpointEncode(b *testing.B) {
	const files = 10_000
	now := time.Now()
	s := minimalSnapshot()
	s.txns["bench-orders-0"], s.Txns["bench-orders-0"] = deltalog.Txn{AppID: "bench-orders-0", Version: 1, LastUpdated: ptr(now.UnixMilli())}, 1
	stats := `{"numRecords":1000,"minValues":{"id":1},"maxValues":{"id":1000},"nullCount":{"id":0}}`
	adds := make([]deltalog.Add, 0, files)
	for i := range files {
		adds = append(adds, deltalog.Add{Path: fmt.Sprintf("part-00000-%08d-c000.snappy.parquet", i), PartitionValues: map[string]*string{},
			Size: 123456, ModificationTime: 1, DataChange: true, Stats: stats})
	}
	s.Files = NewFileSet(adds...)
	report := func(b *testing.B, size int) {
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/checkpoint")
		b.ReportMetric(float64(size), "file-bytes")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("row-maps", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			rows, _, err := checkpointRows(s, now)
			if err != nil {
				b.Fatal(err)
			}
			cols, err := shredRows(checkpointSchema, rows)
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			w := parquet.NewGenericWriter[any](&buf, checkpointSchema, parquet.DataPageVersion(1),
				parquet.Compression(&parquet.Snappy), parquet.CreatedBy("ingestd", "", ""))
			for i, c := range cols {
				if _, err := w.ColumnWriters()[i].WriteRowValues(c); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		report(b, buf.Len())
	})
	b.Run("columns", func(b *testing.B) {
		var buf bytes.Buffer
		var cols *checkpointColumns
		for b.Loop() {
			var err error
			if cols, err = buildCheckpointColumns(s, now, cols, nil); err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			if err := encodeCheckpoint(&buf, cols, nil); err != nil {
				b.Fatal(err)
			}
			cols.release()
		}
		report(b, buf.Len())
	})
	// The writer's path: the levels form encoded by parquetenc, row group by row group.
	b.Run("levels", func(b *testing.B) {
		var buf bytes.Buffer
		var w checkpointWriter
		for b.Loop() {
			src, err := newCPSource(s, now)
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			if err := w.writeRowGroups(context.Background(), &buf, src); err != nil {
				b.Fatal(err)
			}
			src.close()
		}
		report(b, buf.Len())
	})
}

// BenchmarkCommitBesideCheckpoint: commits (a Snapshot and a Commit of one add and a txn,
// 2 ms apart, as a pipeline's flush makes) on a table of 100,000 live files, "alone" and
// "beside-checkpoint" while a background checkpoint of that table is being written
// (about 0.1 CPU-s each, submitted again as soon as one is done), p50/p99/max of the
// commits in ms. Run with -cpu 1 -benchtime 1x: on one core the checkpoint and the
// commits share the processor unless the checkpoint pauses for the commits (foreground).
func BenchmarkCommitBesideCheckpoint(b *testing.B) {
	const files, commits = 100_000, 300
	ctx := context.Background()
	st, err := storage.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tbl, err := Open(ctx, st, WithBackgroundCheckpoints())
	if err != nil {
		b.Fatal(err)
	}
	defer tbl.Close(ctx)
	schema, _ := deltalog.ParseSchema(deltatest.BenchSchema)
	p, m := newTableMetadata("bench", schema, nil, map[string]string{deltalog.PropCheckpointInterval: "1000000"})
	if _, err := tbl.Commit(ctx, Commit{ReadVersion: -1, Protocol: &p, Metadata: &m}); err != nil {
		b.Fatal(err)
	}
	stats := `{"numRecords":1000,"minValues":{"id":1},"maxValues":{"id":1000},"nullCount":{"id":0}}`
	add := func(i int) deltalog.Add {
		return deltalog.Add{Path: fmt.Sprintf("part-00000-%08d-c000.snappy.parquet", i), Size: 123456, ModificationTime: 1, DataChange: true, Stats: stats}
	}
	for c := range 10 {
		adds := make([]deltalog.Add, 0, files/10)
		for i := range files / 10 {
			adds = append(adds, add(c*files/10+i))
		}
		if _, err := tbl.Commit(ctx, Commit{ReadVersion: int64(c), Adds: adds}); err != nil {
			b.Fatal(err)
		}
	}
	next := files
	run := func(b *testing.B, checkpoint bool) {
		lat := make([]time.Duration, 0, commits)
		checkpoints := 0
		for b.Loop() {
			lat = lat[:0]
			for range commits {
				if checkpoint && tbl.cp.idle() {
					s, err := tbl.Snapshot(ctx)
					if err != nil {
						b.Fatal(err)
					}
					tbl.cp.submit(ctx, tbl, s)
					checkpoints++
				}
				time.Sleep(2 * time.Millisecond)
				t0 := time.Now()
				s, err := tbl.Snapshot(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tbl.Commit(ctx, Commit{ReadVersion: s.Version, Adds: []deltalog.Add{add(next)},
					Txns: []deltalog.Txn{{AppID: "bench-orders-0", Version: int64(next)}}}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				next++
			}
			tbl.WaitCheckpoints()
		}
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(checkpoints)/float64(b.N), "checkpoints")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("alone", func(b *testing.B) { run(b, false) })
	b.Run("beside-checkpoint", func(b *testing.B) { run(b, true) })
}

// idle reports whether no checkpoint is pending or being written.
func (c *checkpointer) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done == nil
}
