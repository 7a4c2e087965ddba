package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ingestd/ingestd/deltawriter/storage"
)

// TestListPagesPrefixAcrossPages puts 900 objects "a-NNNN", then 400 under the prefix
// "m/", then 900 "z-NNNN" on each emulator, so that in key order the objects of "m/"
// straddle the first page boundary (keys 901 to 1,300 of 2,200), and checks that
// ListPages of the root gives the 1,801 entries once each, "m" once as a directory, in
// name order across pages.
func TestListPagesPrefixAcrossPages(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			o := needStore(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			st := o.open(t, "listpagesstraddle")
			var keys, wantRoot []string
			for i := range 900 {
				keys = append(keys, fmt.Sprintf("a-%04d", i))
			}
			for i := range 400 {
				keys = append(keys, fmt.Sprintf("m/%04d", i))
			}
			for i := range 900 {
				keys = append(keys, fmt.Sprintf("z-%04d", i))
			}
			for _, k := range keys {
				if k[0] != 'm' {
					wantRoot = append(wantRoot, k)
				}
			}
			wantRoot = append(wantRoot, "m")
			slices.Sort(wantRoot)
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(32)
			for _, k := range keys {
				g.Go(func() error { return st.Put(gctx, k, []byte("x")) })
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			var listed []string
			dirs := 0
			err := st.ListPages(ctx, "", func(page []storage.FileInfo) error {
				for _, e := range page {
					listed = append(listed, e.Name)
					if e.IsDir {
						dirs++
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(listed, wantRoot) || dirs != 1 {
				t.Errorf("ListPages gave %d entries (%d directories), want %d (1 directory) once each in name order", len(listed), dirs, len(wantRoot))
			}
		})
	}
}
