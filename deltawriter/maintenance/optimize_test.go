package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// kernelTable copies a delta-kernel-rs test table (the repository's
// testdata/delta-kernel-rs/data) to a temporary directory.
func kernelTable(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "delta-kernel-rs", "data", name)
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("test table %s: %v", src, err)
	}
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func openTable(t *testing.T, root string) *deltawriter.Table {
	t.Helper()
	st, err := storage.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// liveRows reads every live row of the table (deletion vectors applied), as sorted JSON.
func liveRows(t *testing.T, tbl *deltawriter.Table) []string {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range snap.Files.All() {
		pv, _ := json.Marshal(a.PartitionValues)
		if _, err := snap.ReadDataFile(ctx, tbl.Store(), a, func(r map[string]any) error {
			b, err := json.Marshal(r)
			out = append(out, string(pv)+string(b))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(out)
	return out
}

// A Spark DELETE with deletion vectors (storageType u, offset 1) of values 0 and 9 out of
// 0..9: the reader skips exactly those rows.
func TestReadDeletionVectorSpark(t *testing.T) {
	tbl := openTable(t, kernelTable(t, "table-with-dv-small"))
	snap, _ := tbl.Snapshot(context.Background())
	for _, a := range snap.Files.All() {
		dv, err := deltawriter.ReadDeletionVector(context.Background(), tbl.Store(), a.DeletionVector)
		if err != nil {
			t.Fatal(err)
		}
		if dv.Cardinality() != 2 || !dv.Contains(0) || !dv.Contains(9) || dv.Contains(1) {
			t.Fatalf("deleted rows: cardinality %d, 0:%v 9:%v 1:%v", dv.Cardinality(), dv.Contains(0), dv.Contains(9), dv.Contains(1))
		}
	}
	got := liveRows(t, tbl)
	want := []string{}
	for v := 1; v <= 8; v++ {
		want = append(want, fmt.Sprintf(`{}{"value":%d}`, v))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("live rows\n got %v\nwant %v", got, want)
	}
}

// The 'u' path: prefix + Z85 UUID, and a descriptor with a bad checksum is refused.
func TestDeletionVectorPathAndChecksum(t *testing.T) {
	root := kernelTable(t, "table-with-dv-small")
	tbl := openTable(t, root)
	snap, _ := tbl.Snapshot(context.Background())
	var dv *deltalog.DeletionVector
	for _, a := range snap.Files.All() {
		dv = a.DeletionVector
	}
	f := filepath.Join(root, "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xFF
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = deltawriter.ReadDeletionVector(context.Background(), tbl.Store(), dv)
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch at offset 1") {
		t.Fatalf("corrupted deletion vector: %v", err)
	}
}

// OPTIMIZE of a file with a deletion vector: the new file has the 8 live rows and no
// vector; the remove carries the vector; the log reads the same rows.
func TestOptimizeDeletionVector(t *testing.T) {
	root := kernelTable(t, "with-short-dv")
	tbl := openTable(t, root)
	before := liveRows(t, tbl)
	snap, _ := tbl.Snapshot(context.Background())
	if snap.Files.Len() != 2 {
		t.Fatalf("%d files", snap.Files.Len())
	}
	res, err := Optimize(context.Background(), tbl, OptimizeOptions{MinFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != snap.Version+1 || res.FilesRemoved != 2 || res.FilesAdded != 1 || res.DeletionVectorsRemoved != 1 {
		t.Fatalf("result %+v", res)
	}
	after := liveRows(t, openTable(t, root))
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Fatalf("rows changed\nbefore %v\nafter  %v", before, after)
	}
	actions := commitActions(t, root, res.Version)
	var removes, adds int
	for _, a := range actions {
		switch {
		case a.Remove != nil:
			removes++
			orig, _ := snap.Files.Get(deltalog.FileKey(a.Remove.Path, a.Remove.DeletionVector))
			if orig.Path == "" || a.Remove.DataChange || a.Remove.ExtendedFileMetadata == nil || !*a.Remove.ExtendedFileMetadata ||
				a.Remove.Size == nil || *a.Remove.Size != orig.Size || jsonOf(a.Remove.DeletionVector) != jsonOf(orig.DeletionVector) {
				t.Errorf("remove %+v for add %+v", *a.Remove, orig)
			}
		case a.Add != nil:
			adds++
			n, ok := a.Add.NumRecords()
			if a.Add.DataChange || a.Add.DeletionVector != nil || !ok || n != int64(len(before)) {
				t.Errorf("add %+v: numRecords %d, want %d live rows", *a.Add, n, len(before))
			}
		case a.Txn != nil, a.Metadata != nil, a.Protocol != nil:
			t.Errorf("unexpected action %+v", a)
		case a.CommitInfo != nil:
			ci := a.CommitInfo
			m, _ := ci["operationMetrics"].(map[string]any)
			if ci["operation"] != "OPTIMIZE" || ci["isBlindAppend"] != false || m["numRemovedFiles"] != "2" || m["numAddedFiles"] != "1" || m["numDeletionVectorsRemoved"] != "1" {
				t.Errorf("commitInfo %v", ci)
			}
		}
	}
	if removes != 2 || adds != 1 {
		t.Fatalf("%d removes, %d adds", removes, adds)
	}
	// A second run finds one file: nothing to do.
	res, err = Optimize(context.Background(), tbl, OptimizeOptions{MinFiles: 2})
	if err != nil || res.Version != -1 || len(res.Partitions) != 0 {
		t.Fatalf("second run: %+v, %v", res, err)
	}
}

// delta-kernel-rs' type-widening table records byte → decimal(4,1), which Delta type
// widening does not allow: OPTIMIZE refuses it before writing a byte.
func TestOptimizeRefusesUnwritableTable(t *testing.T) {
	root := kernelTable(t, "type-widening")
	tbl := openTable(t, root)
	_, err := Optimize(context.Background(), tbl, OptimizeOptions{MinFiles: 2})
	if !errors.Is(err, deltawriter.ErrUnsupportedFeature) || !strings.Contains(err.Error(), `column "byte_decimal"`) {
		t.Fatalf("got %v, want ErrUnsupportedFeature naming byte_decimal", err)
	}
	n := 0
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if strings.HasSuffix(p, ".parquet") {
			n++
		}
		return nil
	})
	if n != 2 {
		t.Fatalf("%d parquet files after the refusal, want the 2 of the table", n)
	}
}

// A table with column mapping (name), a date partition with a NULL partition, and type
// widening (integer → long, float → double, date → timestamp_ntz, decimal(5,2) →
// decimal(12,4), short → decimal(12,2)): files written before and after the widening
// are rewritten in the wide types with the same values, per partition, never mixing
// partitions; small partitions (fewer than MinFiles files) and --where exclusions are
// left alone.
func TestOptimizeWideningColumnMappingPartitions(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "t")
	tbl := openTable(t, root)
	narrow, err := deltalog.ParseSchema(`{"type":"struct","fields":[
		{"name":"a","type":"integer","nullable":true,"metadata":{}},
		{"name":"f","type":"float","nullable":true,"metadata":{}},
		{"name":"d","type":"date","nullable":true,"metadata":{}},
		{"name":"m","type":"decimal(5,2)","nullable":true,"metadata":{}},
		{"name":"s","type":"short","nullable":true,"metadata":{}},
		{"name":"st","type":{"type":"struct","fields":[{"name":"x","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
		{"name":"dt","type":"date","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	delta, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Schema: narrow, Enable: []string{deltalog.FeatureTypeWidening},
		PartitionColumns: []string{"dt"}, ColumnMapping: "name"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: delta.Protocol, Metadata: delta.Metadata, Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
	day := func(s string) *string { return &s }
	parts := []*string{day("2026-11-01"), day("2026-11-02"), nil}
	row := 0
	write := func(pv *string, n int) {
		snap, _ := tbl.Snapshot(ctx)
		pq, err := snap.DataFileSchema()
		if err != nil {
			t.Fatal(err)
		}
		phys := func(name string) string {
			return deltawriter.PartitionField(snap.Schema, name).PhysicalName(snap.ColumnMapping)
		}
		stPhys := deltawriter.PartitionField(snap.Schema, "st").Type.(*deltalog.StructType).Fields[0].PhysicalName(snap.ColumnMapping)
		wide := snap.Schema.Fields[0].Type == deltalog.Long
		var rows []map[string]any
		for i := 0; i < n; i++ {
			row++
			r := map[string]any{phys("st"): map[string]any{stPhys: int64(row)}}
			if row%7 != 0 { // every 7th row has nulls
				if wide {
					r[phys("a")], r[phys("f")], r[phys("d")] = int64(1)<<40+int64(row), float64(row)+0.1, int64(row)*86_400_000_000+1
					r[phys("m")], r[phys("s")] = int64(row)*10001, int64(row)*100
				} else {
					r[phys("a")], r[phys("f")], r[phys("d")] = int32(row), float32(row)+0.5, int32(row)
					r[phys("m")], r[phys("s")] = int64(row)*101, int32(row)
				}
			}
			rows = append(rows, r)
		}
		cols, err := deltawriter.RowsToColumns(pq, rows)
		if err != nil {
			t.Fatal(err)
		}
		opts := snap.FileOptions()
		dtPhys := phys("dt")
		opts.PartitionValues = map[string]*string{dtPhys: pv}
		v := deltawriter.HiveDefaultPartition
		if pv != nil {
			v = *pv
		}
		opts.Dir = deltawriter.PartitionDir([]string{"dt"}, []string{v})
		add, err := deltawriter.WriteDataFile(ctx, tbl.Store(), pq, cols, n, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Adds: []deltalog.Add{add}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pv := range parts {
		for i := 0; i < 3; i++ {
			write(pv, 5)
		}
	}
	// Widen every column.
	snap, _ := tbl.Snapshot(ctx)
	wideSchema, err := deltalog.ParseSchema(strings.NewReplacer(`"a","type":"integer"`, `"a","type":"long"`, `"f","type":"float"`, `"f","type":"double"`,
		`"d","type":"date"`, `"d","type":"timestamp_ntz"`, `"decimal(5,2)"`, `"decimal(12,4)"`, `"s","type":"short"`, `"s","type":"decimal(12,2)"`,
		`"x","type":"integer"`, `"x","type":"long"`).Replace(snap.Metadata.SchemaString))
	if err != nil {
		t.Fatal(err)
	}
	delta, _, err = deltawriter.PrepareSchemaChange(snap, deltawriter.SchemaChange{Schema: wideSchema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Protocol: delta.Protocol, Metadata: delta.Metadata, Operation: "CHANGE COLUMN"}); err != nil {
		t.Fatal(err)
	}
	for _, pv := range parts[:2] {
		write(pv, 4)
	}
	write(parts[2], 4)
	write(day("2026-11-03"), 4) // one file: never compacted
	before := liveRows(t, tbl)

	// --where on a non-partition column is refused, naming it.
	if _, err := Optimize(ctx, tbl, OptimizeOptions{MinFiles: 3, Where: "a > 1 AND dt IS NULL"}); err == nil || !strings.Contains(err.Error(), "uses a, which are not partition columns") {
		t.Fatalf("--where on a data column: %v", err)
	}
	// dry run: the plan, nothing written.
	dry, err := Optimize(ctx, tbl, OptimizeOptions{MinFiles: 3, Where: "dt >= '2026-11-02' OR dt IS NULL", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := planString(dry); got != "dt=2026-11-02:4->1 dt=NULL:4->1" || dry.Version != -1 {
		t.Fatalf("dry run plan %q version %d", got, dry.Version)
	}
	if latest, _ := tbl.Snapshot(ctx); latest.Version != dry.ReadVersion {
		t.Fatalf("dry run committed: version %d", latest.Version)
	}
	res, err := Optimize(ctx, tbl, OptimizeOptions{MinFiles: 3, Where: "dt = '2026-11-01' OR dt IS NULL"})
	if err != nil {
		t.Fatal(err)
	}
	if got := planString(res); got != "dt=2026-11-01:4->1 dt=NULL:4->1" {
		t.Fatalf("plan %q", got)
	}
	after := liveRows(t, openTable(t, root))
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Fatalf("rows changed\nbefore %v\nafter  %v", before, after)
	}
	// every new file is in one partition's directory, with that partition's values
	for _, a := range commitActions(t, root, res.Version) {
		if a.Add == nil {
			continue
		}
		pv := a.Add.PartitionValues
		var v *string
		for _, x := range pv {
			v = x
		}
		dir := deltawriter.HiveDefaultPartition
		if v != nil {
			dir = *v
		}
		if len(pv) != 1 || !strings.HasPrefix(a.Add.Path, "dt="+dir+"/") {
			t.Errorf("add %s with partition values %s", a.Add.Path, jsonOf(pv))
		}
	}
	// Row 1 was written narrow (a=1, f=1.5, d=1970-01-02, m=1.01, s=1, st.x=1) and reads
	// back widened from the new file of dt=2026-11-01.
	snap, _ = tbl.Snapshot(ctx)
	logical := map[string]string{}
	for _, f := range snap.Schema.Fields {
		logical[f.PhysicalName(snap.ColumnMapping)] = f.Name
	}
	var row1 string
	for _, a := range snap.Files.All() {
		if a.DataChange {
			continue // only the files OPTIMIZE wrote
		}
		_, err := snap.ReadDataFile(ctx, tbl.Store(), a, func(r map[string]any) error {
			named := map[string]any{}
			for k, v := range r {
				named[logical[k]] = v
			}
			for _, v := range named["st"].(map[string]any) {
				if v == int64(1) {
					delete(named, "st")
					row1 = jsonOf(named)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := `{"a":1,"d":86400000000,"f":1.5,"m":10100,"s":100}`; row1 != want {
		t.Fatalf("row 1 rewritten as %s, want %s (long, double, timestamp_ntz µs, decimal(12,4) and decimal(12,2) unscaled)", row1, want)
	}
	res, err = Optimize(ctx, tbl, OptimizeOptions{MinFiles: 3})
	if err != nil || planString(res) != "dt=2026-11-02:4->1" {
		t.Fatalf("second run: %q %v", planString(res), err)
	}
	if after := liveRows(t, openTable(t, root)); strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Fatalf("rows changed after the second run")
	}
}

func planString(r OptimizeResult) string {
	var parts []string
	for _, p := range r.Partitions {
		parts = append(parts, fmt.Sprintf("%s:%d->%d", p.Partition, p.FilesRemoved, p.FilesAdded))
	}
	return strings.Join(parts, " ")
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func commitActions(t *testing.T, root string, v int64) []deltalog.Action {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "_delta_log", fmt.Sprintf("%020d.json", v)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	actions, err := deltalog.ParseCommit(f)
	if err != nil {
		t.Fatal(err)
	}
	return actions
}

// Two OPTIMIZE runs on one partition: the slow one that planned it finds its files
// removed by the fast one, drops that partition and commits the other, once; appends in
// between never conflict.
func TestOptimizeConcurrentDropsLostPartition(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "t")
	tbl := openTable(t, root)
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"dt","type":"string","nullable":true,"metadata":{}}]}`)
	delta, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Schema: schema, PartitionColumns: []string{"dt"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: delta.Protocol, Metadata: delta.Metadata}); err != nil {
		t.Fatal(err)
	}
	id := int64(0)
	appendFile := func(dt string) {
		snap, _ := tbl.Snapshot(ctx)
		pq, _ := snap.DataFileSchema()
		var rows []map[string]any
		for i := 0; i < 10; i++ {
			rows = append(rows, map[string]any{"id": id})
			id++
		}
		cols, _ := deltawriter.RowsToColumns(pq, rows)
		opts := snap.FileOptions()
		opts.PartitionValues, opts.Dir = map[string]*string{"dt": &dt}, "dt="+dt
		add, err := deltawriter.WriteDataFile(ctx, tbl.Store(), pq, cols, len(rows), opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Adds: []deltalog.Add{add}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		appendFile("a")
		appendFile("b")
	}
	before := liveRows(t, tbl)
	var size int64
	snap, _ := tbl.Snapshot(ctx)
	for _, a := range snap.Files.All() {
		size += a.Size
	}
	slow := make(chan OptimizeResult)
	go func() {
		// its own Table, as another process would have; ~1.5 s for every file
		r, err := Optimize(ctx, openTable(t, root), OptimizeOptions{MinFiles: 2, MaxRewriteRate: size * 2 / 3})
		if err != nil {
			t.Error(err)
		}
		slow <- r
	}()
	time.Sleep(200 * time.Millisecond)
	fast, err := Optimize(ctx, openTable(t, root), OptimizeOptions{MinFiles: 2, Where: "dt = 'b'"})
	if err != nil {
		t.Fatal(err)
	}
	appendFile("a") // an append between the two OPTIMIZE commits
	r := <-slow
	if planString(fast) != "dt=b:4->1" || planString(r) != "dt=a:4->1" || jsonOf(r.Dropped) != `["dt=b"]` || r.Version <= fast.Version || r.ReadVersion >= fast.Version {
		t.Fatalf("fast %q v%d; slow %q dropped %v v%d (read %d)", planString(fast), fast.Version, planString(r), r.Dropped, r.Version, r.ReadVersion)
	}
	got := map[string]bool{}
	for _, r := range liveRows(t, openTable(t, root)) {
		got[r] = true
	}
	for _, r := range before {
		if !got[r] {
			t.Fatalf("row %s lost", r)
		}
	}
	if len(got) != len(before)+10 {
		t.Fatalf("%d distinct rows, want the %d before and the 10 appended", len(got), len(before))
	}
	if snap, _ := openTable(t, root).Snapshot(ctx); snap.Files.Len() != 3 {
		t.Fatalf("%d files, want dt=a's and dt=b's compacted files and the late append", snap.Files.Len())
	}
}
