package keyindex

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// testTable is a local Delta table written with ingestd's writer.
type testTable struct {
	t   testing.TB
	st  *storage.Local
	tbl *deltawriter.Table
}

// newTable creates a table with the schema (JSON), partition columns and properties; dv
// enables the deletionVectors feature, colmap column mapping mode name.
func newTable(t testing.TB, schema string, partCols []string, dv, colmap bool) *testTable {
	t.Helper()
	ctx := context.Background()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	p := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	conf := map[string]string{}
	if dv || colmap {
		p = deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{}, WriterFeatures: []string{}}
	}
	if dv {
		p.ReaderFeatures = append(p.ReaderFeatures, deltalog.FeatureDeletionVectors)
		p.WriterFeatures = append(p.WriterFeatures, deltalog.FeatureDeletionVectors)
		conf["delta.enableDeletionVectors"] = "true"
	}
	if colmap {
		p.ReaderFeatures = append(p.ReaderFeatures, deltalog.FeatureColumnMapping)
		p.WriterFeatures = append(p.WriterFeatures, deltalog.FeatureColumnMapping)
		conf["delta.columnMapping.mode"] = "name"
		conf["delta.columnMapping.maxColumnId"] = "10"
	}
	m := deltalog.Metadata{ID: "4b5e8f7a-0000-4000-8000-000000000001", Format: deltalog.Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString: schema, PartitionColumns: partCols, Configuration: conf}
	if partCols == nil {
		m.PartitionColumns = []string{}
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: &p, Metadata: &m, Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
	return &testTable{t: t, st: st, tbl: tbl}
}

func (tt *testTable) snap() *deltawriter.Snapshot {
	tt.t.Helper()
	s, err := tt.tbl.Snapshot(context.Background())
	if err != nil {
		tt.t.Fatal(err)
	}
	return s
}

// write writes rows (keyed by physical column names) as one data file, in partition pv
// (nil: unpartitioned), and returns its add action (not committed).
func (tt *testTable) write(rows []map[string]any, pv map[string]*string) deltalog.Add {
	tt.t.Helper()
	s := tt.snap()
	pq, err := s.DataFileSchema()
	if err != nil {
		tt.t.Fatal(err)
	}
	cols, err := deltawriter.RowsToColumns(pq, rows)
	if err != nil {
		tt.t.Fatal(err)
	}
	opts := s.FileOptions()
	if pv != nil {
		opts.PartitionValues = pv
		var names, vals []string
		for _, c := range s.Metadata.PartitionColumns {
			names, vals = append(names, c), append(vals, *pv[c])
		}
		opts.Dir = deltawriter.PartitionDir(names, vals)
	}
	add, err := deltawriter.WriteDataFile(context.Background(), tt.st, pq, cols, len(rows), opts)
	if err != nil {
		tt.t.Fatal(err)
	}
	return add
}

// commit commits adds and removes and returns the version.
func (tt *testTable) commit(adds []deltalog.Add, removes []deltalog.Remove) int64 {
	tt.t.Helper()
	v, err := tt.tbl.Commit(context.Background(), deltawriter.Commit{ReadVersion: tt.snap().Version, Adds: adds, Removes: removes})
	if err != nil {
		tt.t.Fatal(err)
	}
	return v
}

// remove is the remove action of add.
func remove(add deltalog.Add) deltalog.Remove {
	ts := int64(1)
	return deltalog.Remove{Path: add.Path, DeletionTimestamp: &ts, DataChange: true, PartitionValues: add.PartitionValues,
		Size: &add.Size, DeletionVector: add.DeletionVector}
}

// withDV returns add with an inline deletion vector deleting rows (PROTOCOL.md,
// "Deletion Vector Format": magic, then the portable 64-bit Roaring serialisation, Z85).
func withDV(t testing.TB, add deltalog.Add, rows ...uint64) deltalog.Add {
	t.Helper()
	bm := roaring64.BitmapOf(rows...)
	var buf bytes.Buffer
	_ = binary.Write(&buf, binary.LittleEndian, uint32(1681511377))
	if _, err := bm.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	size := buf.Len()
	for buf.Len()%4 != 0 {
		buf.WriteByte(0)
	}
	add.DeletionVector = &deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: z85(buf.Bytes()), SizeInBytes: int32(size), Cardinality: int64(len(rows))}
	return add
}

func z85(b []byte) string {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
	var out []byte
	for i := 0; i < len(b); i += 4 {
		v := binary.BigEndian.Uint32(b[i:])
		var g [5]byte
		for j := 4; j >= 0; j-- {
			g[j] = alphabet[v%85]
			v /= 85
		}
		out = append(out, g[:]...)
	}
	return string(out)
}

// key encodes a key of values of the given types.
func key(t testing.TB, types []deltalog.DataType, vals ...parquet.Value) []byte {
	t.Helper()
	var b []byte
	for i, v := range vals {
		var err error
		if b, err = AppendValue(b, types[i], v); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// kernelTable copies a delta-kernel-rs test table to a temporary directory and opens it.
func kernelTable(t testing.TB, name string) (*storage.Local, *deltawriter.Snapshot) {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "delta-kernel-rs", "data", name)
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	st, err := storage.NewLocal(dst)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st, s
}
