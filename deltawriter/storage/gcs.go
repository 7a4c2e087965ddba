package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// GCS is a Store on Google Cloud Storage through cloud.google.com/go/storage (JSON API).
//
//   - PutIfAbsent writes with the DoesNotExist precondition (ifGenerationMatch=0): 412
//     → ErrExist. The library retries the conditional create on 5xx and timeouts (it is
//     idempotent with the precondition), so a create that landed and was retried comes
//     back as ErrExist; the caller reads it back. GCS allows one write per second per
//     object name: 429 on a contended name is ErrTransient.
//   - Create streams a resumable upload in 16 MiB chunks (one chunk buffered); the
//     object appears at finalize, on Close.
//   - ListFrom uses Query.StartOffset (inclusive; filtered to exclusive here).
//   - Credentials: application default credentials; STORAGE_EMULATOR_HOST selects an
//     emulator without authentication.
type GCS struct {
	client   *storage.Client
	bucket   string
	prefix   string
	probe    *probeOnce
	unprobed bool
}

func openGCS(ctx context.Context, u *url.URL, opts Options) (*GCS, error) {
	bucket, prefix, err := bucketPrefix(u)
	if err != nil {
		return nil, err
	}
	if opts.Endpoint != "" {
		return nil, fmt.Errorf("open store gs://%s/%s: table.storage.endpoint is not used for GCS (set STORAGE_EMULATOR_HOST for an emulator)", bucket, prefix)
	}
	cl, err := storage.NewClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("open store gs://%s/%s: %w", bucket, prefix, err)
	}
	return &GCS{client: cl, bucket: bucket, prefix: prefix, probe: &probeOnce{}}, nil
}

// URI implements Store: gs://bucket/prefix.
func (g *GCS) URI() string { return "gs://" + g.bucket + "/" + g.prefix }

func (g *GCS) object(key string) string { return "gs://" + g.bucket + "/" + key }

func (g *GCS) key(op, p string) (string, error) {
	k, err := joinKey(g.prefix, p)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", op, p, err)
	}
	return k, nil
}

func (g *GCS) wrap(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%s %s: %w", op, g.object(key), err)
	}
	status, code := 0, ""
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		status = ge.Code
		if len(ge.Errors) > 0 {
			code = ge.Errors[0].Reason
		}
	}
	class := classifyStatus(status, code)
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		class = ErrNotExist
	case status == 412 || code == "conditionNotMet":
		class = ErrExist
	case errors.Is(err, storage.ErrBucketNotExist):
		class = nil
	case class == nil && status == 0 && isNetworkError(ctx, err):
		class = ErrTransient
	}
	return &StoreError{Op: op, Object: g.object(key), Status: status, Code: code, Class: class, Err: err}
}

func (g *GCS) beforeWrite(ctx context.Context) error {
	if g.unprobed {
		return nil
	}
	return g.probe.check(ctx, func(ctx context.Context) error {
		v := *g
		v.unprobed = true
		return Probe(ctx, &v)
	})
}

// Get implements Store.
func (g *GCS) Get(ctx context.Context, p string) ([]byte, error) {
	return g.GetRange(ctx, p, 0, -1)
}

// GetRange returns length bytes from offset off of the object at p (all the rest when
// length < 0).
func (g *GCS) GetRange(ctx context.Context, p string, off, length int64) ([]byte, error) {
	k, err := g.key("get", p)
	if err != nil {
		return nil, err
	}
	r, err := g.client.Bucket(g.bucket).Object(k).NewRangeReader(ctx, off, length)
	if err != nil {
		return nil, g.wrap(ctx, "get", k, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, g.wrap(ctx, "get", k, err)
	}
	return b, nil
}

// Stat implements Store.
func (g *GCS) Stat(ctx context.Context, p string) (FileInfo, error) {
	k, err := g.key("stat", p)
	if err != nil {
		return FileInfo{}, err
	}
	a, err := g.client.Bucket(g.bucket).Object(k).Attrs(ctx)
	if err != nil {
		return FileInfo{}, g.wrap(ctx, "stat", k, err)
	}
	return FileInfo{Name: k[strings.LastIndexByte(k, '/')+1:], Size: a.Size, ModTime: a.Updated}, nil
}

// List implements Store.
func (g *GCS) List(ctx context.Context, dir string) ([]FileInfo, error) {
	return g.ListFrom(ctx, dir, "")
}

// ListFrom implements ListerFrom with Query.StartOffset.
func (g *GCS) ListFrom(ctx context.Context, dir, after string) ([]FileInfo, error) {
	var out []FileInfo
	if err := g.listPages(ctx, dir, after, gather(&out)); err != nil {
		return nil, err
	}
	return sortFilter(out, after), nil
}

// ListPages implements Store: one page per objects.list request (iterator.Pager of
// MaxListPage, carrying the page token).
func (g *GCS) ListPages(ctx context.Context, dir string, fn func(page []FileInfo) error) error {
	return g.listPages(ctx, dir, "", fn)
}

// listPages lists dir from the name `after` ("" for all; StartOffset is inclusive, the
// callers filter), an objects.list page at a time.
func (g *GCS) listPages(ctx context.Context, dir, after string, fn func(page []FileInfo) error) error {
	pfx, err := dirKey(g.prefix, dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	q := &storage.Query{Prefix: pfx, Delimiter: "/"}
	if after != "" {
		q.StartOffset = pfx + after
	}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return fmt.Errorf("list %s: %w", pfx, err)
	}
	pager := iterator.NewPager(g.client.Bucket(g.bucket).Objects(ctx, q), MaxListPage, "")
	page := make([]FileInfo, 0, MaxListPage)
	var attrs []*storage.ObjectAttrs
	for {
		attrs = attrs[:0]
		token, err := pager.NextPage(&attrs)
		if err != nil {
			return g.wrap(ctx, "list", pfx, err)
		}
		page = page[:0]
		for _, a := range attrs {
			if a.Prefix != "" {
				if name := strings.TrimSuffix(strings.TrimPrefix(a.Prefix, pfx), "/"); name != "" {
					page = append(page, FileInfo{Name: name, IsDir: true})
				}
				continue
			}
			name := strings.TrimPrefix(a.Name, pfx)
			if name == "" || strings.Contains(name, "/") {
				continue
			}
			page = append(page, FileInfo{Name: name, Size: a.Size, ModTime: a.Updated})
		}
		if err := emitPage(page, fn); err != nil {
			return err
		}
		if token == "" {
			return nil
		}
	}
}

// Put implements Store.
func (g *GCS) Put(ctx context.Context, p string, data []byte) error {
	return g.put(ctx, "put", p, data, false)
}

// PutIfAbsent implements Store: a create with the DoesNotExist precondition.
func (g *GCS) PutIfAbsent(ctx context.Context, p string, data []byte) error {
	return g.put(ctx, "put", p, data, true)
}

func (g *GCS) put(ctx context.Context, op, p string, data []byte, ifAbsent bool) error {
	k, err := g.key(op, p)
	if err != nil {
		return err
	}
	if err := g.beforeWrite(ctx); err != nil {
		return err
	}
	o := g.client.Bucket(g.bucket).Object(k)
	if ifAbsent {
		o = o.If(storage.Conditions{DoesNotExist: true})
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := o.NewWriter(wctx)
	// One request with the whole (small) payload; the library keeps it for its retries.
	w.ChunkSize = len(data) + 1
	if _, err := w.Write(data); err != nil {
		cancel()
		_ = w.Close()
		return g.wrap(ctx, op, k, err)
	}
	return g.wrap(ctx, op, k, w.Close())
}

// Delete implements Deleter.
func (g *GCS) Delete(ctx context.Context, p string) error {
	k, err := g.key("delete", p)
	if err != nil {
		return err
	}
	err = g.wrap(ctx, "delete", k, g.client.Bucket(g.bucket).Object(k).Delete(ctx))
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	return err
}

// Create implements Store with a resumable upload.
func (g *GCS) Create(ctx context.Context, p string) (Writer, error) {
	k, err := g.key("create", p)
	if err != nil {
		return nil, err
	}
	if err := g.beforeWrite(ctx); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w := g.client.Bucket(g.bucket).Object(k).NewWriter(wctx)
	return &gcsWriter{g: g, ctx: ctx, key: k, w: w, cancel: cancel}, nil
}

type gcsWriter struct {
	g      *GCS
	ctx    context.Context
	key    string
	w      *storage.Writer
	cancel context.CancelFunc
	closed bool
}

func (w *gcsWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	return n, w.g.wrap(w.ctx, "upload", w.key, err)
}

func (w *gcsWriter) Close() error {
	if w.closed {
		return errors.New("close: writer already closed")
	}
	w.closed = true
	defer w.cancel()
	return w.g.wrap(w.ctx, "upload", w.key, w.w.Close())
}

// Abort cancels the upload; a resumable upload that is never finalized creates no object.
func (w *gcsWriter) Abort() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.cancel()
	_ = w.w.Close()
	return nil
}
