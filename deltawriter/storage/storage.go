// Package storage is the byte store under one Delta table root: small whole-object reads
// and writes, listing, and the atomic put-if-absent that Delta commits rely on
// (PROTOCOL.md, "Creation of New Log Entries": writers must never overwrite a log entry).
//
// Paths are slash-separated and relative to the table root ("_delta_log/00…0.json",
// "part-00000-….parquet"); they must not be absolute nor contain ".." elements.
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

// FileInfo describes one object returned by List. Size is in bytes.
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

// Open returns the Store for a table URI: "file:///abs/path" or a plain absolute path.
// Other schemes (s3, gs, abfss, …) return an error saying they are not supported yet.
func Open(uri string) (Store, error) {
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
	case "":
		return nil, fmt.Errorf("open store %q: need an absolute path or a file:// URI", uri)
	default:
		return nil, fmt.Errorf("open store %q: scheme %q is not supported yet", uri, u.Scheme)
	}
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
