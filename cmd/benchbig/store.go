package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ingestd/ingestd/deltawriter/storage"
)

// tableURI is the table of the -dir and -uri flags, exactly one of which is set: -dir a
// local directory (made absolute), -uri a table URI as the daemon's table.uri takes it
// (s3://bucket/prefix, gs://…, az://…, abfss://…, file:///path or an absolute path).
func tableURI(dir, uri string) (string, error) {
	switch {
	case dir != "" && uri != "":
		return "", fmt.Errorf("-dir %s and -uri %s: give one of them", dir, uri)
	case dir != "":
		if strings.Contains(dir, "://") {
			return "", fmt.Errorf("-dir %s is a URI: use -uri", dir)
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("-dir %s: %w", dir, err)
		}
		return abs, nil
	case uri != "":
		if !strings.HasPrefix(uri, "/") && !strings.HasPrefix(uri, "file://") && !storage.IsCloudURI(uri) {
			return "", fmt.Errorf("-uri %s: need s3://, gs://, az://, abfss://, file:// or an absolute path", uri)
		}
		return uri, nil
	}
	return "", fmt.Errorf("-dir or -uri is required")
}

// openStore opens the store of a table URI as the daemon does (storage.OpenWith; the
// endpoint, region and credentials from the environment, e.g. AWS_ENDPOINT_URL_S3 for
// an S3-compatible server). With create, the bucket of an object-store URI is created
// if missing (storage.CreateBucket, meant for emulators).
func openStore(ctx context.Context, uri string, create bool) (storage.Store, error) {
	if create && storage.IsCloudURI(uri) {
		if err := storage.CreateBucket(ctx, uri, storage.Options{}); err != nil {
			return nil, err
		}
	}
	return storage.OpenWith(ctx, uri, storage.Options{})
}

// listFiles returns the path of every object under dir ("" for the table root),
// recursively, a listing page at a time; without hidden, not the objects whose names
// start with a dot (gen's local ".stub-…" files, a store's probe or temporary files).
func listFiles(ctx context.Context, st storage.Store, dir string, hidden bool) ([]string, error) {
	var out []string
	err := st.ListPages(ctx, dir, func(page []storage.FileInfo) error {
		var sub []string
		for _, e := range page {
			p := e.Name
			if dir != "" {
				p = dir + "/" + e.Name
			}
			switch {
			case e.IsDir:
				sub = append(sub, p)
			case hidden || !strings.HasPrefix(e.Name, "."):
				out = append(out, p)
			}
		}
		for _, d := range sub {
			ps, err := listFiles(ctx, st, d, hidden)
			if err != nil {
				return err
			}
			out = append(out, ps...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", st.URI(), dir, err)
	}
	return out, nil
}

// copyLogCmd: benchbig copylog -from URI -to URI copies the _delta_log of one table into
// an empty location (the operations that write run on such copies; they read no data
// file).
func copyLogCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("copylog", flag.ContinueOnError)
	from := fs.String("from", "", "table URI (or absolute path) to copy the log of")
	to := fs.String("to", "", "table URI (or absolute path) to copy it to; must hold no log")
	workers := fs.Int("workers", 16, "copies in flight")
	if err := fs.Parse(args); err != nil {
		return err
	}
	src, err := tableURI("", *from)
	if err != nil {
		return fmt.Errorf("copylog: %w", err)
	}
	dst, err := tableURI("", *to)
	if err != nil {
		return fmt.Errorf("copylog: %w", err)
	}
	ctx := context.Background()
	t0 := time.Now()
	in, err := openStore(ctx, src, false)
	if err != nil {
		return fmt.Errorf("copylog: %w", err)
	}
	out, err := openStore(ctx, dst, true)
	if err != nil {
		return fmt.Errorf("copylog: %w", err)
	}
	if ents, err := out.List(ctx, "_delta_log"); err != nil {
		return fmt.Errorf("copylog: %w", err)
	} else if len(ents) > 0 {
		return fmt.Errorf("copylog: %s already has a _delta_log", dst)
	}
	paths, err := listFiles(ctx, in, "_delta_log", false)
	if err != nil {
		return fmt.Errorf("copylog: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(*workers, 1))
	for _, p := range paths {
		g.Go(func() error {
			b, err := in.Get(gctx, p)
			if err != nil {
				return err
			}
			return out.Put(gctx, p, b)
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("copylog %s to %s: %w", src, dst, err)
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"from": src, "to": dst, "objects": len(paths), "seconds": time.Since(t0).Seconds()})
}

// rmCmd: benchbig rm -uri URI deletes every object of a table (what gen and copylog
// made on an object store), in batches where the store has them (storage.DeleteAll).
func rmCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("rm", flag.ContinueOnError)
	uri := fs.String("uri", "", "table URI (an object store; for local disk use rm -r)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !storage.IsCloudURI(*uri) {
		return fmt.Errorf("rm: -uri %q is not an object-store URI", *uri)
	}
	ctx := context.Background()
	t0 := time.Now()
	st, err := openStore(ctx, *uri, false)
	if err != nil {
		return fmt.Errorf("rm: %w", err)
	}
	paths, err := listFiles(ctx, st, "", true)
	if err != nil {
		return fmt.Errorf("rm: %w", err)
	}
	n, err := storage.DeleteAll(ctx, st, paths, 16)
	if err != nil {
		return fmt.Errorf("rm %s: %d of %d objects deleted: %w", *uri, n, len(paths), err)
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"uri": *uri, "deleted": n, "seconds": time.Since(t0).Seconds()})
}
