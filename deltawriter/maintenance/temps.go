package maintenance

import (
	"context"
	"fmt"
	"path"
	"time"

	"github.com/ingestd/ingestd/deltawriter/storage"
)

// staleTempAge is the least age of a temporary file (storage.TempLister) that VACUUM and
// log cleanup delete, whatever their retention: a write in flight moves its file's
// modification time with each write and takes minutes at most, so a temporary file
// untouched for a day is one a killed writer left.
const staleTempAge = 24 * time.Hour

// staleTemps returns, of the temporary files at paths (relative to the root), those
// modified before cutoff and before staleTempAge before now, with Name the path and their
// sizes. A file gone since it was listed (its write finished or was aborted) is left out.
// Errors: a Stat that fails otherwise.
func staleTemps(ctx context.Context, st storage.Store, paths []string, cutoff, now time.Time) ([]storage.FileInfo, error) {
	if day := now.Add(-staleTempAge); day.Before(cutoff) {
		cutoff = day
	}
	var out []storage.FileInfo
	for _, p := range paths {
		fi, err := st.Stat(ctx, p)
		if storage.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", p, err)
		}
		if !fi.IsDir && fi.ModTime.Before(cutoff) {
			out = append(out, storage.FileInfo{Name: p, Size: fi.Size, ModTime: fi.ModTime})
		}
	}
	return out, nil
}

// listTemps returns the paths of the temporary files in dir (relative to the root), or
// none when st keeps no temporary files (not a storage.TempLister).
func listTemps(ctx context.Context, st storage.Store, dir string) ([]string, error) {
	tl, ok := st.(storage.TempLister)
	if !ok {
		return nil, nil
	}
	var out []string
	err := tl.ListNamePagesTemps(ctx, dir, func([]storage.FileInfo) error { return nil }, func(name string) {
		out = append(out, path.Join(dir, name))
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return out, nil
}
