package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestV2SidecarCheckpointReaders: ingestd writes a partitioned table with the
// v2Checkpoint feature (10 appends of 2 files, one file then removed: 19 live files and
// a tombstone), checkpoints it at version 11 with 4 file actions per sidecar (a
// top-level UUID-named JSON checkpoint and 5 Parquet sidecars in _delta_log/_sidecars),
// then commits 2 more appends. ingestd re-opens the table from the full log and from
// the checkpoint alone (the commits before 11 deleted, as log cleanup leaves them) with
// the same files; delta-rs and Spark read exactly the appended rows minus the removed
// file's, from both.
func TestV2SidecarCheckpointReaders(t *testing.T) {
	t.Parallel() // waits on Spark; own temp dirs
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while the table is written
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "v2sidecars")
	tbl, err := deltawriter.Open(ctx, mustStore(t, root), deltawriter.WithV2SidecarFiles(4))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"p","type":"string","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "v2sidecars", Schema: schema, PartitionColumns: []string{"p"},
		Properties: map[string]string{deltalog.PropCheckpointInterval: "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	proto := deltawriter.UpgradeProtocol(*create.Protocol, deltalog.FeatureV2Checkpoint)
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: &proto, Metadata: create.Metadata, Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
	rowsOf := func(i int) []string {
		return []string{fmt.Sprintf(`{"id":%d,"p":"a"}`, 10*i), fmt.Sprintf(`{"id":%d,"p":"a"}`, 10*i+1), fmt.Sprintf(`{"id":%d,"p":"b/c"}`, 10*i+2)}
	}
	live := map[string][]string{} // data file path → its rows
	appendOne := func(i int) {
		t.Helper()
		before, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := goldenAppend(t, tbl, rowsOf(i), deltalog.Txn{AppID: "ingestd-v2sidecars", Version: int64(i)}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		after, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k, a := range after.Files.All() {
			if _, ok := before.Files.Get(k); ok {
				continue
			}
			for _, r := range rowsOf(i) {
				if strings.Contains(r, `"p":"a"`) == (*a.PartitionValues["p"] == "a") {
					live[a.Path] = append(live[a.Path], fullRow(t, schema, r))
				}
			}
		}
	}
	for i := 1; i <= 10; i++ {
		appendOne(i)
	}
	// Remove the first append's file of partition a: a tombstone in the checkpoint.
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gone deltalog.Add
	for _, a := range snap.Files.All() {
		if *a.PartitionValues["p"] == "a" && strings.Contains(strings.Join(live[a.Path], ""), `"id":10,`) {
			gone = a
		}
	}
	if gone.Path == "" {
		t.Fatal("no file of append 1 in partition a")
	}
	ts := snap.Metadata.CreatedTime
	if v, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Operation: "DELETE", Removes: []deltalog.Remove{{Path: gone.Path, DeletionTimestamp: ts, DataChange: true,
		PartitionValues: gone.PartitionValues, Size: &gone.Size}}}); err != nil || v != 11 {
		t.Fatalf("remove: version %d, %v; want 11", v, err)
	}
	delete(live, gone.Path)
	if v, err := tbl.Checkpoint(ctx); err != nil || v != 11 {
		t.Fatalf("checkpoint: %d, %v; want 11", v, err)
	}
	appendOne(11)
	appendOne(12)
	const last = 13

	// The checkpoint: a top-level JSON file naming 5 sidecars (19 live files and 1
	// tombstone, 4 per sidecar), all present.
	top, _ := filepath.Glob(filepath.Join(root, "_delta_log", "00000000000000000011.checkpoint.*.json"))
	if len(top) != 1 {
		t.Fatalf("top-level checkpoints at 11: %v, want 1", top)
	}
	data, err := os.ReadFile(top[0])
	if err != nil {
		t.Fatal(err)
	}
	var sidecars []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var a struct {
			Sidecar *deltalog.Sidecar `json:"sidecar"`
			Add     json.RawMessage   `json:"add"`
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		if a.Add != nil {
			t.Fatalf("the top-level checkpoint holds an add inline: %s", line)
		}
		if a.Sidecar != nil {
			sidecars = append(sidecars, a.Sidecar.Path)
		}
	}
	ents, err := os.ReadDir(filepath.Join(root, "_delta_log", "_sidecars"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, e := range ents {
		onDisk = append(onDisk, e.Name())
	}
	sort.Strings(sidecars)
	if len(sidecars) != 5 || !reflect.DeepEqual(sidecars, onDisk) {
		t.Fatalf("sidecar actions %v, _sidecars holds %v; want the same 5", sidecars, onDisk)
	}

	var want []string
	for _, rows := range live {
		want = append(want, rows...)
	}
	sort.Strings(want)
	if len(want) != 12*3-2 {
		t.Fatalf("%d expected rows, want 34", len(want))
	}

	full, err := openSnapshot(root)
	if err != nil {
		t.Fatal(err)
	}
	cpOnly := checkpointOnlyCopy(t, root, 11, true, filepath.Join(dir, "cponly"))
	fromCP, err := openSnapshot(cpOnly)
	if err != nil {
		t.Fatalf("ingestd reads its own V2 checkpoint: %v", err)
	}
	if full.Version != last || full.Files.Len() != 23 || fromCP.Version != last || !reflect.DeepEqual(maps.Collect(fromCP.Files.All()), maps.Collect(full.Files.All())) ||
		!reflect.DeepEqual(fromCP.Txns, map[string]int64{"ingestd-v2sidecars": 12}) || len(fromCP.Tombstones()) != 1 {
		t.Fatalf("full log: version %d, %d files; from checkpoint 11: version %d, %d files, txns %v, %d tombstones; want %d, 23 files, the same, txn 12, 1 tombstone",
			full.Version, full.Files.Len(), fromCP.Version, fromCP.Files.Len(), fromCP.Txns, len(fromCP.Tombstones()), last)
	}

	for _, p := range []string{root, cpOnly} {
		got := readDeltaRS(t, python, p, "ingestd-v2sidecars")
		if got.Unsupported != "" || got.Version != last {
			t.Errorf("delta-rs %s: version %d, unsupported %q; want %d", filepath.Base(p), got.Version, got.Unsupported, last)
		}
		sameRowSet(t, "delta-rs "+filepath.Base(p), canonJSONRows(t, got.Rows), want, nil)
		if v := fmt.Sprint(got.Txns["ingestd-v2sidecars"]); v != "12" {
			t.Errorf("delta-rs %s: txn version %s, want 12", filepath.Base(p), v)
		}
		var sp sparkRead
		spark.call(t, map[string]any{"op": "read", "path": p}, &sp)
		sameRowSet(t, "Spark "+filepath.Base(p), canonJSONRows(t, sp.Rows), want, nil)
	}
}
