// Package storage is the byte store under one Delta table root: small whole-object reads
// and writes, listing, and the atomic put-if-absent that Delta commits rely on
// (PROTOCOL.md, "Creation of New Log Entries": writers must never overwrite a log entry).
//
// Paths are slash-separated and relative to the table root ("_delta_log/00…0.json",
// "part-00000-….parquet"); they must not be absolute nor contain ".." elements.
//
// Stores: Local (POSIX filesystem, link(2) for put-if-absent), S3 (aws-sdk-go-v2,
// If-None-Match: *), GCS (cloud.google.com/go/storage, ifGenerationMatch=0) and Azure
// (azblob, If-None-Match: *; az:// and abfss:// URIs), opened by OpenWith. This is the only
// package of ingestd that imports cloud SDKs; cloud errors are *StoreError values classed
// ErrExist, ErrNotExist, ErrPermission or ErrTransient (see errors.go). Cloud stores probe
// put-if-absent before their first write (Probe).
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// ErrExist is wrapped by PutIfAbsent when the object already exists. It is fs.ErrExist,
// so errors.Is(err, fs.ErrExist) holds as well.
var ErrExist = fs.ErrExist

// ErrNotExist is wrapped by Get when the object does not exist (it is fs.ErrNotExist).
var ErrNotExist = fs.ErrNotExist

// MaxListPage is the most entries one ListPages page holds: S3 ListObjectsV2's and GCS's
// page limit, asked of Azure too (whose default is 5,000), and the chunk a local directory
// is read in.
const MaxListPage = 1000

// FileInfo describes one object returned by List or ListPages. Size is in bytes.
type FileInfo struct {
	Name    string // base name inside the listed directory
	Size    int64
	ModTime time.Time
	IsDir   bool
}

// Store is a table root. Implementations are safe for concurrent use.
type Store interface {
	// Get returns the whole object at p, or an error wrapping fs.ErrNotExist.
	Get(ctx context.Context, p string) ([]byte, error)
	// List returns the entries of directory dir sorted by name, or an empty list (and no
	// error) when dir does not exist.
	List(ctx context.Context, dir string) ([]FileInfo, error)
	// ListPages calls fn with the entries of directory dir one page at a time, as the
	// store returns them (a ListObjectsV2, objects.list or List Blobs request per page,
	// with its continuation token; a local directory read MaxListPage entries at a time), so
	// that a directory of millions of entries is never held whole. Each page holds 1 to
	// MaxListPage entries, sorted by name; every entry comes once. Across pages the order
	// is the store's: by name on S3 general-purpose buckets, GCS and Azure, directory
	// order on a local filesystem. fn must not keep the page (its backing array may be
	// reused); an error from fn stops the listing and is returned as is. A missing dir
	// gives no page and no error.
	ListPages(ctx context.Context, dir string, fn func(page []FileInfo) error) error
	// Put writes data to p atomically (readers see the old object or the new one),
	// replacing an existing object.
	Put(ctx context.Context, p string, data []byte) error
	// PutIfAbsent writes data to p atomically only if nothing exists at p; otherwise it
	// returns an error wrapping ErrExist and leaves the existing object untouched.
	PutIfAbsent(ctx context.Context, p string, data []byte) error
	// Create returns a writer that streams a new object to p; the object becomes visible
	// atomically on a successful Close. Abort (via the returned Writer) discards it.
	Create(ctx context.Context, p string) (Writer, error)
	// Stat returns the size and modification time of the object at p, or an error
	// wrapping fs.ErrNotExist.
	Stat(ctx context.Context, p string) (FileInfo, error)
	// URI is the table root as a URI (file:///abs/path for local tables).
	URI() string
}

// Writer streams one object. Close publishes it; Abort discards it. After either, the
// Writer must not be used.
type Writer interface {
	io.WriteCloser
	Abort() error
}

// Options are the per-table storage settings (table.storage in a pipeline file). Every
// field is optional: credentials and anything unset come from each cloud's standard
// environment and credential chain (see OpenWith).
type Options struct {
	// Endpoint overrides the service endpoint: an S3-compatible store
	// ("http://127.0.0.1:7070", MinIO, R2, Ceph; path-style addressing is then used) or an
	// Azure Blob endpoint ("http://127.0.0.1:10000/devstoreaccount1" for Azurite). For GCS
	// use STORAGE_EMULATOR_HOST instead (an error here).
	Endpoint string
	// Region is the S3 region (default: AWS_REGION / the shared config; else us-east-1).
	Region string
}

// Open returns the Store for a table URI with the settings from the environment only
// (Options{}); see OpenWith.
func Open(uri string) (Store, error) { return OpenWith(context.Background(), uri, Options{}) }

// OpenWith returns the Store for a table URI:
//   - "file:///abs/path" or "/abs/path": Local;
//   - "s3://bucket/prefix": S3 (aws-sdk-go-v2; credentials from the default chain: env,
//     shared profile, SSO, web identity, ECS/IMDS; AWS_ENDPOINT_URL_S3/AWS_ENDPOINT_URL
//     when opts.Endpoint is empty);
//   - "gs://bucket/prefix": GCS (application default credentials; STORAGE_EMULATOR_HOST);
//   - "az://container/prefix" and
//     "abfss://container@account.dfs.core.windows.net/prefix" (ADLS Gen2, mapped onto the
//     Blob API of the same account): Azure Blob (AZURE_STORAGE_CONNECTION_STRING, or
//     AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN, or
//     DefaultAzureCredential).
//
// Opening sends no request. A cloud store checks, once, before its first write, that it
// honours put-if-absent (see Probe); readers never write.
func OpenWith(ctx context.Context, uri string, opts Options) (Store, error) {
	if strings.HasPrefix(uri, "/") {
		return NewLocal(uri)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", uri, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("open store %q: file URI with host %q is not supported", uri, u.Host)
		}
		return NewLocal(u.Path)
	case "s3", "s3a":
		return openS3(ctx, u, opts)
	case "gs":
		return openGCS(ctx, u, opts)
	case "az", "abfss", "abfs":
		return openAzure(ctx, u, opts)
	case "":
		return nil, fmt.Errorf("open store %q: need an absolute path, a file:// URI or s3://, gs://, az://, abfss://", uri)
	default:
		return nil, fmt.Errorf("open store %q: scheme %q is not supported (use file://, s3://, gs://, az:// or abfss://)", uri, u.Scheme)
	}
}

// IsCloudURI reports whether uri names an object store (s3, gs, az, abfss).
func IsCloudURI(uri string) bool {
	for _, p := range []string{"s3://", "s3a://", "gs://", "az://", "abfss://", "abfs://"} {
		if strings.HasPrefix(uri, p) {
			return true
		}
	}
	return false
}

// bucketPrefix splits a URI's host and path into bucket and a key prefix without
// leading or trailing slashes.
func bucketPrefix(u *url.URL) (bucket, prefix string, err error) {
	if u.Host == "" {
		return "", "", fmt.Errorf("open store %s: no bucket in the URI (write %s://bucket/path)", u.Redacted(), u.Scheme)
	}
	if u.User != nil && u.Scheme != "abfss" && u.Scheme != "abfs" {
		return "", "", fmt.Errorf("open store %s://%s%s: credentials in the URI are not supported (use the environment)", u.Scheme, u.Host, u.Path)
	}
	p := strings.Trim(path.Clean("/"+u.Path), "/")
	return u.Host, p, nil
}

// joinKey joins a key prefix and a store-relative path.
func joinKey(prefix, p string) (string, error) {
	if _, err := cleanRel(p); err != nil {
		return "", err
	}
	c := path.Clean(p)
	if prefix == "" {
		return c, nil
	}
	return prefix + "/" + c, nil
}

// dirKey is the listing prefix of directory dir ("" or "." is the root), ending in "/".
func dirKey(prefix, dir string) (string, error) {
	if dir == "" || dir == "." {
		if prefix == "" {
			return "", nil
		}
		return prefix + "/", nil
	}
	k, err := joinKey(prefix, dir)
	if err != nil {
		return "", err
	}
	return k + "/", nil
}

// cleanRel validates a store-relative path and returns it in OS form.
func cleanRel(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return "", fmt.Errorf("invalid store path %q", p)
	}
	c := path.Clean(p)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("invalid store path %q", p)
	}
	return filepath.FromSlash(c), nil
}

// IsNotExist reports whether err says an object is missing.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
