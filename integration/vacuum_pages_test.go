package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/maintenance"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// TestVacuumPagesObjectStores puts a table of one live file beside 2,500 unreferenced
// files and two subdirectories on each emulator (S3, GCS, Azure), and checks that
// ListPages gives the root in pages of at most 1,000 entries (3 or more pages), every
// entry once and in name order across pages; that a VACUUM dry run (retention 0, the
// clock an hour ahead) lists exactly the 2,502 unreferenced files; and that the VACUUM
// itself deletes them (S3: DeleteObjects of 1,000 keys) and leaves the live file and the
// log, VACUUM START/END committed except on S3.
func TestVacuumPagesObjectStores(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			o := needStore(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			st := o.open(t, "vacuumpages")
			const orphans = 2500
			var want []string
			for i := range orphans {
				want = append(want, fmt.Sprintf("part-%05d-orphan.parquet", i))
			}
			want = append(want, "d=1/x.parquet", "d=2/x.parquet")
			slices.Sort(want) // as VACUUM sorts its result
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(32)
			for _, p := range append(slices.Clone(want), "live.parquet") {
				g.Go(func() error { return st.Put(gctx, p, []byte("0123456789")) })
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := st.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(`{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"vacuum-pages","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"a\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{},"createdTime":1}}
{"add":{"path":"live.parquet","partitionValues":{},"size":10,"modificationTime":1,"dataChange":true}}
`)); err != nil {
				t.Fatal(err)
			}

			var listed []string
			var pages []int
			err := st.ListPages(ctx, "", func(page []storage.FileInfo) error {
				pages = append(pages, len(page))
				for _, e := range page {
					if e.IsDir != (e.Name == "d=1" || e.Name == "d=2" || e.Name == "_delta_log") {
						t.Errorf("%s: IsDir %v", e.Name, e.IsDir)
					}
					if !e.IsDir && (e.Size != 10 || e.ModTime.IsZero()) {
						t.Errorf("%s: size %d, time %v", e.Name, e.Size, e.ModTime)
					}
					listed = append(listed, e.Name)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wantRoot := []string{"_delta_log", "d=1", "d=2", "live.parquet"}
			for _, p := range want {
				if !strings.Contains(p, "/") {
					wantRoot = append(wantRoot, p)
				}
			}
			slices.Sort(wantRoot)
			if !slices.Equal(listed, wantRoot) {
				t.Errorf("ListPages gave %d entries (first %v), want %d in name order", len(listed), listed[:min(5, len(listed))], len(wantRoot))
			}
			if len(pages) < 3 || slices.Max(pages) > storage.MaxListPage {
				t.Errorf("pages of %v: want 3 or more of at most %d", pages, storage.MaxListPage)
			}

			tbl, err := deltawriter.Open(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			later := func() time.Time { return time.Now().Add(time.Hour) }
			dry, err := maintenance.Vacuum(ctx, tbl, maintenance.VacuumOptions{Retain: 0, DryRun: true, Now: later})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range dry.Files {
				got = append(got, f.Path)
			}
			if !slices.Equal(got, want) || dry.Bytes != 10*int64(len(want)) || dry.Dirs != 3 {
				t.Fatalf("dry run: %d files (%d bytes, %d dirs), want %d (%d bytes, 3 dirs)", len(got), dry.Bytes, dry.Dirs, len(want), 10*len(want))
			}
			res, err := maintenance.Vacuum(ctx, tbl, maintenance.VacuumOptions{Retain: 0, Force: true, Now: later})
			if err != nil {
				t.Fatal(err)
			}
			if res.Deleted != len(want) || len(res.Files) != len(want) {
				t.Errorf("vacuum deleted %d of %d files, want %d", res.Deleted, len(res.Files), len(want))
			}
			if logged := res.StartVersion == 1 && res.EndVersion == 2; logged == (kind == "s3") {
				t.Errorf("VACUUM START/END at %d/%d on %s", res.StartVersion, res.EndVersion, kind)
			}
			if left := tableFiles(t, st); strings.Join(left, " ") != "live.parquet" {
				t.Errorf("after vacuum: %d files left (%v), want live.parquet", len(left), left[:min(5, len(left))])
			}
		})
	}
}
