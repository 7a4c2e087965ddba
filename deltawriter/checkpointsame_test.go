package deltawriter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// bigRichSnapshot is richSnapshot with n more adds, enough to span several checkpoint
// row groups (cpChunkRows rows each), and as many tombstones: every few files carry
// partition values (one null), tags, a deletion vector (inline or in a file, with and
// without offset and maxRowIndex), baseRowId and defaultRowCommitVersion, or no stats;
// removes alternate partition values, size, extendedFileMetadata, a deletion vector and
// row tracking fields.
func bigRichSnapshot(now time.Time, n int) *Snapshot {
	s := richSnapshot(now)
	adds := make([]deltalog.Add, 0, n+3)
	for _, a := range s.Files.All() {
		adds = append(adds, a)
	}
	recent := now.Add(-time.Hour).UnixMilli()
	for i := range n {
		p, q := fmt.Sprintf("x%d", i%7), fmt.Sprint(i%3)
		a := deltalog.Add{Path: fmt.Sprintf("p=%s/q=%s/part-%06d.parquet", p, q, i), PartitionValues: map[string]*string{"p": &p, "q": &q},
			Size: int64(1000 + i), ModificationTime: int64(1_700_000_000_000 + i), DataChange: i%2 == 0,
			Stats: fmt.Sprintf(`{"numRecords":%d,"minValues":{"id":%d},"maxValues":{"id":%d},"nullCount":{"id":0}}`, i%100+1, i, i+100)}
		if i%11 == 0 {
			a.PartitionValues["q"] = nil
		}
		if i%13 == 0 {
			a.Stats = ""
		}
		if i%5 == 0 {
			a.Tags = map[string]string{"INSERTION_TIME": fmt.Sprint(1_700_000_000_000_000 + i), "z": ""}
		}
		if i%17 == 0 {
			a.DeletionVector = &deltalog.DeletionVector{StorageType: "i", PathOrInlineDv: fmt.Sprintf("wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lk%03d", i%1000), SizeInBytes: 40, Cardinality: int64(i%9 + 1)}
		} else if i%19 == 0 {
			a.DeletionVector = &deltalog.DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^", Offset: ptr(int32(i % 4000)), SizeInBytes: 36, Cardinality: 2, MaxRowIndex: ptr(int64(i % 50))}
		}
		if i%3 == 0 {
			a.BaseRowID, a.DefaultRowCommitVersion = ptr(int64(i)*100), ptr(int64(i%40))
		}
		adds = append(adds, a)
		if i%9 == 0 {
			r := deltalog.Remove{Path: fmt.Sprintf("old-%06d.parquet", i), DeletionTimestamp: &recent, DataChange: i%2 == 1}
			switch i % 4 {
			case 0:
				r.PartitionValues, r.Size, r.ExtendedFileMetadata = map[string]*string{"p": &p, "q": nil}, ptr(int64(i)), ptr(true)
			case 1:
				r.DeletionVector = &deltalog.DeletionVector{StorageType: "p", PathOrInlineDv: fmt.Sprintf("s3://b/dv-%d.bin", i), Offset: ptr(int32(1)), SizeInBytes: 3, Cardinality: 2}
			case 2:
				r.BaseRowID, r.DefaultRowCommitVersion, r.DeletionTimestamp = ptr(int64(i)), ptr(int64(3)), nil
			}
			s.tombstones.put(deltalog.FileKey(r.Path, r.DeletionVector), r)
		}
	}
	s.Files = NewFileSet(adds...)
	for i := range 300 {
		x := deltalog.Txn{AppID: fmt.Sprintf("app-%03d", i), Version: int64(i) * 7}
		if i%2 == 0 {
			x.LastUpdated = ptr(int64(1_700_000_000_000 + i))
		}
		s.txns[x.AppID], s.Txns[x.AppID] = x, x.Version
	}
	return s
}

// leafEntry is one entry of a leaf column as read back: its levels, kind and value.
type leafEntry struct {
	rep, def int
	kind     parquet.Kind
	null     bool
	bytes    string // BYTE_ARRAY
	word     int64  // BOOLEAN (0, 1), INT32, INT64
}

func (e leafEntry) String() string {
	return fmt.Sprintf("r%d d%d %v null=%v %q %d", e.rep, e.def, e.kind, e.null, e.bytes, e.word)
}

// leafValues reads every leaf column of the Parquet file data, row group after row group,
// one leafEntry per entry, in schema column order.
func leafValues(t *testing.T, data []byte) [][]leafEntry {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]leafEntry, len(f.Schema().Columns()))
	buf := make([]parquet.Value, 1024)
	for _, rg := range f.RowGroups() {
		for i, cc := range rg.ColumnChunks() {
			pages := cc.Pages()
			for {
				p, err := pages.ReadPage()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				vr := p.Values()
				for {
					n, err := vr.ReadValues(buf)
					for _, v := range buf[:n] {
						e := leafEntry{rep: v.RepetitionLevel(), def: v.DefinitionLevel(), kind: v.Kind(), null: v.IsNull()}
						switch {
						case e.null:
						case e.kind == parquet.ByteArray:
							e.bytes = string(v.ByteArray())
						case e.kind == parquet.Boolean:
							if v.Boolean() {
								e.word = 1
							}
						case e.kind == parquet.Int32:
							e.word = int64(v.Int32())
						default:
							e.word = v.Int64()
						}
						out[i] = append(out[i], e)
					}
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				parquet.Release(p)
			}
			if err := pages.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// checkpointRowTrees reads a checkpoint file as row trees (as the row path of the
// reader assembles them).
func checkpointRowTrees(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var rows []map[string]any
	if err := readParquetRows(data, func(r map[string]any) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestCheckpointSameAsValuePath: the checkpoint written through the levels form and
// parquetenc holds exactly what the former writer (one parquet.Value per entry through
// parquet-go's column writers, checkpointvalues_test.go) wrote for the same snapshot:
// the same leaf entries (levels and values), the same rows (every action, field by
// field), the same snapshot when read back, and _last_checkpoint's same row and add
// counts; for a minimal table, one with every action and optional field, and one of
// 3,000 more adds, 334 tombstones and 300 more txns in row groups of 500 rows (chunks
// that start and end inside the runs of txns, adds and removes). The new file is a
// classic checkpoint of Spark's schema in row groups of cpChunkRows rows.
func TestCheckpointSameAsValuePath(t *testing.T) {
	defer func(n int) { cpChunkRows = n }(cpChunkRows)
	cpChunkRows = 500
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for name, s := range map[string]*Snapshot{"minimal": minimalSnapshot(), "rich": richSnapshot(now), "big": bigRichSnapshot(now, 3_000)} {
		t.Run(name, func(t *testing.T) {
			old, err := buildCheckpointColumns(s, now, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var oldFile bytes.Buffer
			if err := encodeCheckpoint(&oldFile, old, nil); err != nil {
				t.Fatal(err)
			}
			st := newStore(t)
			if err := writeCheckpoint(ctx, st, s, now); err != nil {
				t.Fatal(err)
			}
			data, err := st.Get(ctx, checkpointPath(s.Version))
			if err != nil {
				t.Fatal(err)
			}
			f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if f.NumRows() != int64(old.rows) || len(f.RowGroups()) != (old.rows+cpChunkRows-1)/cpChunkRows {
				t.Errorf("%d rows in %d row groups, want %d rows in row groups of %d", f.NumRows(), len(f.RowGroups()), old.rows, cpChunkRows)
			}
			if !parquet.SameNodes(f.Schema(), checkpointSchema) {
				t.Errorf("schema\n%v\nwant\n%v", f.Schema(), checkpointSchema)
			}
			// leaf entries
			got, want := leafValues(t, data), leafValues(t, oldFile.Bytes())
			for i, path := range checkpointSchema.Columns() {
				if len(got[i]) != len(want[i]) {
					t.Errorf("column %v: %d entries, want %d", path, len(got[i]), len(want[i]))
					continue
				}
				for j := range got[i] {
					if got[i][j] != want[i][j] {
						t.Errorf("column %v entry %d: %v, want %v", path, j, got[i][j], want[i][j])
						break
					}
				}
			}
			// rows: every action, field by field
			gotRows, wantRows := checkpointRowTrees(t, data), checkpointRowTrees(t, oldFile.Bytes())
			if len(gotRows) != len(wantRows) || len(gotRows) != old.rows {
				t.Fatalf("%d rows, the former writer %d (%d built)", len(gotRows), len(wantRows), old.rows)
			}
			for j := range gotRows {
				if !reflect.DeepEqual(gotRows[j], wantRows[j]) {
					t.Fatalf("row %d:\n got %v\nwant %v", j, gotRows[j], wantRows[j])
				}
			}
			// the snapshot read back
			if err := st.Put(ctx, "_delta_log/00000000000000000001.checkpoint.parquet", oldFile.Bytes()); err != nil {
				t.Fatal(err)
			}
			gs, err := readCheckpoint(ctx, st, s.Version, []string{fmt.Sprintf("%020d.checkpoint.parquet", s.Version)})
			if err != nil {
				t.Fatal(err)
			}
			ws, err := readCheckpoint(ctx, st, s.Version, []string{"00000000000000000001.checkpoint.parquet"})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gs.Protocol, ws.Protocol) || !reflect.DeepEqual(gs.Metadata, ws.Metadata) ||
				!reflect.DeepEqual(gs.txns, ws.txns) || !reflect.DeepEqual(gs.domains, ws.domains) || !reflect.DeepEqual(gs.Tombstones(), ws.Tombstones()) {
				t.Errorf("protocol, metadata, txns, domains or tombstones read back differ:\n got %+v %+v %v %v %v\nwant %+v %+v %v %v %v",
					gs.Protocol, gs.Metadata, gs.txns, gs.domains, gs.Tombstones(), ws.Protocol, ws.Metadata, ws.txns, ws.domains, ws.Tombstones())
			}
			if g, w := maps.Collect(gs.Files.All()), maps.Collect(ws.Files.All()); !reflect.DeepEqual(g, w) || len(g) != s.Files.Len() {
				t.Errorf("%d files read back, the former writer's %d, the snapshot's %d (or they differ)", len(g), len(w), s.Files.Len())
			}
			lc, err := st.Get(ctx, lastCheckpointPath)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := json.Marshal(lastCheckpoint{Version: s.Version, Size: int64(old.rows), SizeInBytes: int64(len(data)), NumOfAddFiles: int64(old.numAdds)})
			if string(lc) != string(w) {
				t.Errorf("_last_checkpoint %s, want %s", lc, w)
			}
		})
	}
}
