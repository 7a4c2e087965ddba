package storage

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// MaxDeleteBatch is the most objects one batched delete request removes (S3
// DeleteObjects accepts up to 1,000 keys).
const MaxDeleteBatch = 1000

// BatchDeleter is implemented by stores that remove many objects with one request
// (S3: DeleteObjects). Missing objects are not an error.
type BatchDeleter interface {
	// DeleteBatch removes paths (at most MaxDeleteBatch) and returns the number removed
	// (or found missing) before the first error.
	DeleteBatch(ctx context.Context, paths []string) (int, error)
}

// DeleteAll removes paths from st, running at most concurrency requests at a time
// (minimum 1): batches of MaxDeleteBatch through BatchDeleter where the store has it,
// else one Delete (Deleter) per path. Missing objects are not an error. It returns how
// many were removed and the first error; after an error no new request is started.
// It returns an error when st can delete nothing.
func DeleteAll(ctx context.Context, st Store, paths []string, concurrency int) (int, error) {
	var done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	if bd, ok := st.(BatchDeleter); ok {
		for i := 0; i < len(paths); i += MaxDeleteBatch {
			batch := paths[i:min(i+MaxDeleteBatch, len(paths))]
			if gctx.Err() != nil {
				break
			}
			g.Go(func() error {
				n, err := bd.DeleteBatch(gctx, batch)
				done.Add(int64(n))
				return err
			})
		}
		err := g.Wait()
		return int(done.Load()), err
	}
	d, ok := st.(Deleter)
	if !ok {
		return 0, fmt.Errorf("delete %d objects: the store %s cannot delete objects", len(paths), st.URI())
	}
	for _, p := range paths {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := d.Delete(gctx, p); err != nil {
				return err
			}
			done.Add(1)
			return nil
		})
	}
	err := g.Wait()
	return int(done.Load()), err
}
