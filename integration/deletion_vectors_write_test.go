package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Deleting rows of existing files, as upsert pipelines do: deletion vectors written by
// ingestd (deltawriter.DeleteRows), merged with Spark's, and files rewritten without rows
// (copy-on-write, Snapshot.RewriteWithoutRows). Spark and delta-rs (its kernel path,
// QueryBuilder) read exactly the remaining rows.

const dvSchema = `{"type":"struct","fields":[
{"name":"id","type":"long","nullable":true,"metadata":{}},
{"name":"v","type":"string","nullable":true,"metadata":{}},
{"name":"p","type":"string","nullable":true,"metadata":{}}]}`

// dvAppend writes one data file of ids (v = "v<id>") into partition p of tbl and commits
// it; row i of the file holds ids[i].
func dvAppend(t *testing.T, tbl *deltawriter.Table, p string, ids []int64) deltalog.Add {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := snap.DataFileSchema()
	if err != nil {
		t.Fatal(err)
	}
	add := dvWriteFile(t, tbl, snap, pq, p, ids)
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Adds: []deltalog.Add{add}, EngineInfo: "ingestd/test"}); err != nil {
		t.Fatal(err)
	}
	return add
}

// dvWriteFile writes one data file of ids (v = "v<id>") into partition p of tbl, with
// snap's file options and pq its data files' schema, and returns its add (not
// committed); row i of the file holds ids[i].
func dvWriteFile(t *testing.T, tbl *deltawriter.Table, snap *deltawriter.Snapshot, pq *parquet.Schema, p string, ids []int64) deltalog.Add {
	t.Helper()
	rows := make([]map[string]any, len(ids))
	for i, id := range ids {
		rows[i] = map[string]any{"id": id, "v": "v" + strconv.FormatInt(id, 10)}
	}
	cols, err := deltawriter.RowsToColumns(pq, rows)
	if err != nil {
		t.Fatal(err)
	}
	fo := snap.FileOptions()
	fo.Dir, fo.PartitionValues = "p="+p, map[string]*string{"p": &p}
	add, err := deltawriter.WriteDataFile(context.Background(), tbl.Store(), pq, cols, len(rows), fo)
	if err != nil {
		t.Fatal(err)
	}
	return add
}

// rowIDs is from, from+1, …, to-1.
func rowIDs(from, to int64) []int64 {
	var out []int64
	for id := from; id < to; id++ {
		out = append(out, id)
	}
	return out
}

func dropIDs(ids []int64, drop ...int64) []int64 {
	return slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return slices.Contains(drop, id) })
}

// checkIDs reads the table with Spark and with delta-rs and compares each reader's rows
// (id, v, p) with want, exactly.
func checkIDs(t *testing.T, spark *sparkSession, python, root string, want map[string][]int64, step string) {
	t.Helper()
	var wantRows []string
	for p, ids := range want {
		for _, id := range ids {
			wantRows = append(wantRows, fmt.Sprintf("%d/v%d/%s", id, id, p))
		}
	}
	slices.Sort(wantRows)
	render := func(rows []map[string]any) []string {
		out := make([]string, 0, len(rows))
		for _, r := range rows {
			out = append(out, fmt.Sprintf("%v/%v/%v", r["id"], r["v"], r["p"]))
		}
		slices.Sort(out)
		return out
	}
	var sr sparkRead
	spark.call(t, map[string]any{"op": "read", "path": root}, &sr)
	if got := render(sr.Rows); !slices.Equal(got, wantRows) {
		t.Errorf("%s: Spark reads %d rows %v\nwant %d rows %v", step, len(got), got, len(wantRows), wantRows)
	}
	dr := readDeltaRS(t, python, root)
	if dr.Unsupported != "" {
		t.Fatalf("%s: delta-rs cannot read the table: %s", step, dr.Unsupported)
	}
	if got := render(dr.Rows); !slices.Equal(got, wantRows) {
		t.Errorf("%s: delta-rs reads %d rows %v\nwant %d rows %v", step, len(got), got, len(wantRows), wantRows)
	}
}

// commitDeletes commits DeleteRows' actions (and, when set, the protocol and metaData
// turning deletion vectors on) as one DELETE commit.
func commitDeletes(t *testing.T, tbl *deltawriter.Table, dels []deltawriter.RowDeletes, enable bool) ([]deltalog.Remove, []deltalog.Add) {
	t.Helper()
	ctx := context.Background()
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	need, err := snap.CheckDeletes(deltawriter.DeleteWithDeletionVectors)
	if err != nil || need != enable {
		t.Fatalf("CheckDeletes = %v, %v; want %v", need, err, enable)
	}
	var sd deltawriter.SchemaDelta
	if need {
		if sd, _, err = deltawriter.PrepareSchemaChange(snap, deltawriter.SchemaChange{Enable: []string{deltalog.FeatureDeletionVectors}}); err != nil {
			t.Fatal(err)
		}
	}
	removes, adds, err := deltawriter.DeleteRows(ctx, tbl.Store(), dels, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Protocol: sd.Protocol, Metadata: sd.Metadata,
		Removes: removes, Adds: adds, Operation: "DELETE", EngineInfo: "ingestd/test"}); err != nil {
		t.Fatal(err)
	}
	return removes, adds
}

// physicalRows returns the id of each row of a data file, in file order (deleted rows
// included): the row positions deletion vectors refer to.
func physicalRows(t *testing.T, root string, add deltalog.Add) []int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(deltalog.CanonicalPath(add.Path))))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID int64 `parquet:"id"`
	}
	rows, err := parquet.Read[row](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func positionsOf(t *testing.T, rows []int64, ids ...int64) []uint64 {
	t.Helper()
	var out []uint64
	for _, id := range ids {
		i := slices.Index(rows, id)
		if i < 0 {
			t.Fatalf("id %d not in the file", id)
		}
		out = append(out, uint64(i))
	}
	return out
}

// TestDeletionVectorsWrittenByIngestd: a partitioned table written by ingestd's writer
// (protocol 1,2) gets deletion vectors in the commit that turns the feature on, then
// merged ones; a file whose every row is deleted is removed; Spark's own DELETE on top of
// ingestd's deletion vector; each step read back exactly by Spark and delta-rs.
func TestDeletionVectorsWrittenByIngestd(t *testing.T) {
	t.Parallel() // waits on Spark; own temp dir
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "dv")
	tbl := createDVTable(t, root, false)
	a1 := dvAppend(t, tbl, "a", rowIDs(0, 10))
	a2 := dvAppend(t, tbl, "a", rowIDs(10, 20))
	b1 := dvAppend(t, tbl, "b", rowIDs(20, 25))
	want := map[string][]int64{"a": rowIDs(0, 20), "b": rowIDs(20, 25)}
	checkIDs(t, spark, python, root, want, "appended")

	// 1. The first deletes, with the feature turned on in the same commit: rows 0, 3, 9
	// of a1; every row of b1 (removed, no deletion vector).
	_, adds := commitDeletes(t, tbl, []deltawriter.RowDeletes{
		{Add: a1, Rows: []uint64{0, 3, 9}},
		{Add: b1, Rows: []uint64{0, 1, 2, 3, 4}},
	}, true)
	if len(adds) != 1 || adds[0].DeletionVector.Cardinality != 3 {
		t.Fatalf("adds %s", jsonString(adds))
	}
	snap, _ := tbl.Snapshot(ctx)
	if got := jsonString(snap.Protocol); got != `{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["appendOnly","invariants","deletionVectors"]}` {
		t.Fatalf("protocol %s", got)
	}
	want = map[string][]int64{"a": dropIDs(rowIDs(0, 20), 0, 3, 9)}
	checkIDs(t, spark, python, root, want, "first deletes")

	// 2. More deletes: merged with the (inline) deletion vector of a1 (row 1), a fresh one
	// on a2 (rows 5, 6); both small enough to be inline.
	_, adds = commitDeletes(t, tbl, []deltawriter.RowDeletes{
		{Add: adds[0], Rows: []uint64{1, 3}},
		{Add: a2, Rows: []uint64{5, 6}},
	}, false)
	if len(adds) != 2 || adds[0].DeletionVector.Cardinality != 4 || adds[1].DeletionVector.Cardinality != 2 ||
		adds[0].DeletionVector.StorageType != "i" || adds[1].DeletionVector.StorageType != "i" {
		t.Fatalf("adds %s", jsonString(adds))
	}
	want = map[string][]int64{"a": dropIDs(rowIDs(0, 20), 0, 1, 3, 9, 15, 16)}
	checkIDs(t, spark, python, root, want, "merged deletes")

	// 3. Spark deletes on top of ingestd's deletion vectors (it reads and merges ours).
	spark.call(t, map[string]any{"op": "sql", "query": "DELETE FROM delta.`" + root + "` WHERE id IN (2, 17)"}, nil)
	want = map[string][]int64{"a": dropIDs(rowIDs(0, 20), 0, 1, 2, 3, 9, 15, 16, 17)}
	checkIDs(t, spark, python, root, want, "Spark's DELETE after ingestd's")
	snap, _ = openTableAt(t, root).Snapshot(ctx)
	var cards []int64
	for _, a := range snap.Files.All() {
		if a.DeletionVector != nil {
			cards = append(cards, a.DeletionVector.Cardinality)
		}
	}
	slices.Sort(cards)
	if !slices.Equal(cards, []int64{3, 5}) {
		t.Fatalf("deletion vector cardinalities after Spark's DELETE: %v, want [3 5]", cards)
	}
}

// TestDeletionVectorsAfterSparkDelete: Spark writes the first deletion vector (DELETE on a
// table with delta.enableDeletionVectors=true, in a deletion vector file); ingestd adds
// more deletes to the same file, merged with Spark's into a small vector it stores
// inline; both readers read the rest.
func TestDeletionVectorsAfterSparkDelete(t *testing.T) {
	t.Parallel()
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "sparkdv")
	spark.call(t, map[string]any{"op": "sql", "query": "CREATE TABLE delta.`" + root + "` (id BIGINT, v STRING, p STRING) USING delta PARTITIONED BY (p) " +
		"TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"}, nil)
	spark.call(t, map[string]any{"op": "sql", "query": "INSERT INTO delta.`" + root + "` SELECT /*+ REPARTITION(1) */ id, concat('v', id), 'a' FROM range(20)"}, nil)
	spark.call(t, map[string]any{"op": "sql", "query": "DELETE FROM delta.`" + root + "` WHERE id IN (2, 7)"}, nil)
	tbl := openTableAt(t, root)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Files.Len() != 1 {
		t.Fatalf("%d files", snap.Files.Len())
	}
	var file deltalog.Add
	for _, a := range snap.Files.All() {
		file = a
	}
	if file.DeletionVector == nil || file.DeletionVector.Cardinality != 2 || file.DeletionVector.StorageType != "u" {
		t.Fatalf("Spark's file %s", jsonString(file))
	}
	rows := physicalRows(t, root, file)
	_, adds := commitDeletes(t, tbl, []deltawriter.RowDeletes{{Add: file, Rows: positionsOf(t, rows, 10, 15, 7)}}, false)
	if len(adds) != 1 || adds[0].DeletionVector.Cardinality != 4 || adds[0].DeletionVector.StorageType != "i" {
		t.Fatalf("adds %s", jsonString(adds))
	}
	checkIDs(t, spark, python, root, map[string][]int64{"a": dropIDs(rowIDs(0, 20), 2, 7, 10, 15)}, "ingestd's deletes after Spark's")
}

// TestDeletesByRewrite: copy-on-write on a table with a deletion vector: the file is
// rewritten without the rows asked and without those its deletion vector deleted; a file
// whose every row goes is removed; both readers read the rest.
func TestDeletesByRewrite(t *testing.T) {
	t.Parallel()
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "cow")
	tbl := createDVTable(t, root, true)
	a1 := dvAppend(t, tbl, "a", rowIDs(0, 10))
	b1 := dvAppend(t, tbl, "b", rowIDs(10, 13))
	_, adds := commitDeletes(t, tbl, []deltawriter.RowDeletes{{Add: a1, Rows: []uint64{4}}}, false)

	snap, _ := tbl.Snapshot(ctx)
	rm1, na1, err := snap.RewriteWithoutRows(ctx, tbl.Store(), adds[0], []uint64{0, 5}, time.Now())
	if err != nil || na1 == nil {
		t.Fatalf("rewrite: %v, %v", na1, err)
	}
	rm2, na2, err := snap.RewriteWithoutRows(ctx, tbl.Store(), b1, []uint64{0, 1, 2}, time.Now())
	if err != nil || na2 != nil {
		t.Fatalf("rewrite of every row: %v, %v", na2, err)
	}
	if n, _ := na1.NumRecords(); n != 7 || na1.DeletionVector != nil || *na1.PartitionValues["p"] != "a" {
		t.Fatalf("new file %s", jsonString(na1))
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Removes: []deltalog.Remove{rm1, rm2}, Adds: []deltalog.Add{*na1},
		Operation: "DELETE", EngineInfo: "ingestd/test"}); err != nil {
		t.Fatal(err)
	}
	checkIDs(t, spark, python, root, map[string][]int64{"a": dropIDs(rowIDs(0, 10), 0, 4, 5)}, "rewritten")
}

// createDVTable creates the table (id, v, p) partitioned by p at root with ingestd's
// writer: protocol (1,2), or with deletion vectors on when dv is set.
func createDVTable(t *testing.T, root string, dv bool) *deltawriter.Table {
	t.Helper()
	schema, err := deltalog.ParseSchema(dvSchema)
	if err != nil {
		t.Fatal(err)
	}
	c := deltawriter.SchemaChange{Name: "dv", Schema: schema, PartitionColumns: []string{"p"}}
	if dv {
		c.Enable = []string{deltalog.FeatureDeletionVectors}
	}
	sd, _, err := deltawriter.PrepareSchemaChange(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	tbl := openTableAt(t, root)
	if _, err := tbl.Commit(context.Background(), deltawriter.Commit{ReadVersion: -1, Protocol: sd.Protocol, Metadata: sd.Metadata, Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
	return tbl
}

// openTableAt opens (or prepares to create) the table at root on local disk.
func openTableAt(t *testing.T, root string) *deltawriter.Table {
	t.Helper()
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return openTable(t, root)
}
