package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/maintenance"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// TestObjstoreV2Sidecars: on each object store, a v2Checkpoint table with 2 file actions
// per sidecar checkpoints 5 files at version 5 (3 sidecars, streamed with Store.Create)
// and 6 at version 6 (3 more); a fresh Open reads version 6 from its checkpoint, and log
// cleanup 31 days on deletes commits 0..5, checkpoint 5 and exactly its 3 sidecars.
func TestObjstoreV2Sidecars(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			o := needStore(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st := o.open(t, "v2sidecars")
			tbl, err := deltawriter.Open(ctx, st, deltawriter.WithV2SidecarFiles(2))
			if err != nil {
				t.Fatal(err)
			}
			schema := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "id", Type: deltalog.Long, Nullable: true}}}
			create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "v2sidecars", Schema: schema,
				Properties: map[string]string{deltalog.PropCheckpointInterval: "1000"}})
			if err != nil {
				t.Fatal(err)
			}
			proto := deltawriter.UpgradeProtocol(*create.Protocol, deltalog.FeatureV2Checkpoint)
			if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: &proto, Metadata: create.Metadata, Operation: "CREATE TABLE"}); err != nil {
				t.Fatal(err)
			}
			commit := func(v int64) {
				t.Helper()
				add := deltalog.Add{Path: fmt.Sprintf("part-%05d.parquet", v), Size: 100, ModificationTime: 1, DataChange: true, Stats: `{"numRecords":1}`}
				if got, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: v - 1, Adds: []deltalog.Add{add}}); err != nil || got != v {
					t.Fatalf("commit %d: %d, %v", v, got, err)
				}
			}
			sidecars := func() []string {
				t.Helper()
				ents, err := st.List(ctx, "_delta_log/_sidecars")
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, e := range ents {
					if !e.IsDir {
						out = append(out, "_delta_log/_sidecars/"+e.Name)
					}
				}
				return out
			}
			for v := int64(1); v <= 5; v++ {
				commit(v)
			}
			if v, err := tbl.Checkpoint(ctx); err != nil || v != 5 {
				t.Fatalf("checkpoint: %d, %v", v, err)
			}
			first := sidecars()
			if len(first) != 3 {
				t.Fatalf("checkpoint 5 wrote sidecars %v, want 3", first)
			}
			commit(6)
			if v, err := tbl.Checkpoint(ctx); err != nil || v != 6 {
				t.Fatalf("checkpoint: %d, %v", v, err)
			}
			all := sidecars()
			if len(all) != 6 {
				t.Fatalf("sidecars after checkpoint 6: %v, want 6", all)
			}
			snap := openFresh(t, st)
			if snap.Version != 6 || snap.Files.Len() != 6 {
				t.Fatalf("reopened: version %d, %d files; want 6, 6", snap.Version, snap.Files.Len())
			}
			var cp5 string
			ents, err := st.List(ctx, "_delta_log")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if strings.HasPrefix(e.Name, "00000000000000000005.checkpoint.") {
					cp5 = "_delta_log/" + e.Name
				}
			}
			var want []string
			for v := 0; v <= 5; v++ {
				want = append(want, fmt.Sprintf("_delta_log/%020d.json", v))
			}
			want = append(append(want, cp5), first...)
			slices.Sort(want)
			res, err := maintenance.CleanupLog(ctx, tbl, maintenance.LogCleanupOptions{Now: func() time.Time { return time.Now().Add(31 * 24 * time.Hour) }})
			if err != nil || res.Checkpoint != 6 || !slices.Equal(res.Deleted, want) {
				t.Fatalf("cleanup: checkpoint %d, deleted %v (%v); want 6, %v", res.Checkpoint, res.Deleted, err, want)
			}
			if got := sidecars(); !slices.Equal(got, slices.DeleteFunc(all, func(s string) bool { return slices.Contains(first, s) })) {
				t.Fatalf("sidecars after cleanup %v, want checkpoint 6's", got)
			}
			if snap := openFresh(t, st); snap.Version != 6 || snap.Files.Len() != 6 {
				t.Fatalf("reopened after cleanup: version %d, %d files; want 6, 6", snap.Version, snap.Files.Len())
			}
		})
	}
}

// openFresh loads the latest snapshot of the table at st with a new Table.
func openFresh(t *testing.T, st storage.Store) *deltawriter.Snapshot {
	t.Helper()
	ctx := context.Background()
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
