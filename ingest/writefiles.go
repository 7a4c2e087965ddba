package ingest

import (
	"context"
	"runtime"

	"golang.org/x/sync/errgroup"
)

// forEachConcurrent calls fn(ctx, i) for every i in [0, n) on at most GOMAXPROCS
// goroutines (inline, in order, for GOMAXPROCS=1 or n=1) and returns when every call
// has returned. The first error wins: it cancels the ctx of the calls still running
// (an upload in flight is aborted by its store), the calls not yet started are skipped,
// and it is the error returned.
func forEachConcurrent(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	limit := min(runtime.GOMAXPROCS(0), n)
	if limit <= 1 {
		for i := range n {
			if err := fn(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil // an earlier call failed (its error is the one returned) or ctx ended
			}
			return fn(gctx, i)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}
