package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ingestd/ingestd/internal/backoff"
)

// Error classes of the cloud stores. Every error a cloud store returns for a failed
// request is a *StoreError, which wraps at most one of these (test with errors.Is):
//
//   - ErrExist: a put-if-absent found the object (S3/GCS 412, Azure 409 BlobAlreadyExists
//     or 412 ConditionNotMet).
//   - ErrNotExist: the object is missing (404).
//   - ErrPermission: the credentials were refused or lack a permission (401, 403): fatal,
//     a person must act; retrying cannot help.
//   - ErrTransient: throttling, server errors and network trouble (S3 SlowDown, 409
//     ConditionalRequestConflict, 408, 429, 5xx, timeouts, resets): retry later with
//     backoff; never dead-letter for it. The outcome of a write that failed this way is
//     unknown (it may have landed).
//
// Errors with none of them (400 and the like) are permanent for that request.
var (
	ErrPermission = fs.ErrPermission
	ErrTransient  = errors.New("transient store error")
	// ErrUnsafeStore is returned by Probe (and by the first write of a store that fails
	// its probe) when a store does not honour put-if-absent: concurrent commits could
	// silently overwrite each other, so ingestd refuses to write to it.
	ErrUnsafeStore = errors.New("store does not honour put-if-absent")
	// ErrNotEmpty is returned by Local.Delete for a directory that holds an entry: one
	// written since it was listed, or an in-flight ".tmp-" file that listings hide.
	ErrNotEmpty = errors.New("directory not empty")
)

// StoreError describes one failed store request: the operation, the object (as a URI
// without credentials), the service's status and code, the class (ErrExist,
// ErrNotExist, ErrPermission, ErrTransient or nil) and the SDK error. It never holds a
// credential: only the SDK's error (status, code, request id, message) is kept.
type StoreError struct {
	Op     string // "put", "get", "list", "stat", "delete", "upload"
	Object string // e.g. s3://bucket/prefix/_delta_log/00000000000000000007.json
	Status int    // HTTP status, 0 when there was no response
	Code   string // the service's error code (PreconditionFailed, SlowDown, …), or ""
	Class  error
	Err    error
}

func (e *StoreError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: ", e.Op, e.Object)
	switch {
	case errors.Is(e.Class, ErrExist):
		b.WriteString("already exists: ")
	case errors.Is(e.Class, ErrPermission):
		b.WriteString("permission denied (check the credentials and that they grant this operation on this bucket/prefix): ")
	case errors.Is(e.Class, ErrTransient):
		b.WriteString("transient error, retry later: ")
	case e.Code == "NoSuchBucket" || e.Code == "ContainerNotFound":
		b.WriteString(missingContainer(e.Object) + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// missingContainer names the bucket or container of object (a store URI) that does not
// exist, with the command that creates it: the store never creates one itself (its name,
// region and policies are the operator's choice).
func missingContainer(object string) string {
	u, err := url.Parse(object)
	if err != nil || u.Host == "" {
		return "the bucket or container does not exist (fix: create it, or correct table.uri)"
	}
	switch u.Scheme {
	case "s3", "s3a":
		return fmt.Sprintf("bucket %q does not exist (fix: create it, e.g. aws s3 mb s3://%s, or correct table.uri)", u.Host, u.Host)
	case "az", "azure", "abfs", "abfss":
		c := u.Host
		if u.User != nil { // abfss://container@account.dfs.core.windows.net/…
			c = u.User.Username()
		}
		return fmt.Sprintf("container %q does not exist (fix: create it, e.g. az storage container create --name %s, or correct table.uri)", c, c)
	}
	return fmt.Sprintf("bucket %q does not exist (fix: create it, or correct table.uri)", u.Host)
}

// Unwrap returns the class and the SDK error, so errors.Is(err, ErrExist) and
// errors.As(err, &sdkError) both work.
func (e *StoreError) Unwrap() []error {
	if e.Class == nil {
		return []error{e.Err}
	}
	return []error{e.Class, e.Err}
}

// IsTransient reports whether err is worth retrying later (see ErrTransient).
func IsTransient(err error) bool { return errors.Is(err, ErrTransient) }

// classifyStatus maps an HTTP status to a class; code is the service's error code,
// which refines it (S3's 409 ConditionalRequestConflict is transient, any other 409 is
// not; "SlowDown" is transient whatever its status).
func classifyStatus(status int, code string) error {
	switch code {
	case "SlowDown", "ConditionalRequestConflict", "RequestTimeout", "RequestTimeTooSkewed",
		"InternalError", "ServiceUnavailable", "ServerBusy", "OperationTimedOut", "Throttling", "ThrottlingException":
		return ErrTransient
	case "NoSuchKey", "NotFound", "BlobNotFound":
		return ErrNotExist
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
		"AuthorizationFailure", "AuthenticationFailed", "AuthorizationPermissionMismatch":
		return ErrPermission
	case "NoSuchBucket", "ContainerNotFound":
		return nil // permanent: the bucket or container name is wrong, a person must act
	}
	switch {
	case status == 401 || status == 403:
		return ErrPermission
	case status == 404:
		return ErrNotExist
	case status == 408 || status == 429 || status >= 500:
		return ErrTransient
	}
	return nil
}

// isNetworkError reports a failure without a usable response: timeouts, resets, refused
// connections, unexpected EOFs. It is false for a cancelled caller context.
func isNetworkError(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	s := err.Error()
	for _, m := range []string{"connection reset", "connection refused", "broken pipe", "EOF", "timeout", "use of closed network connection"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// retryPolicy is the wait before a store request is sent again after a conflict that
// asks for a retry (S3's 409 ConditionalRequestConflict): 50 ms doubling to 2 s, ±25%.
var retryPolicy = backoff.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.25}

// conflictRetries is how many times a put-if-absent answered with S3's 409
// ConditionalRequestConflict (or another transient error) is re-sent before its
// transient error is returned.
const conflictRetries = 6

// ---- optional capabilities ----

// Deleter is implemented by stores that can remove an object (the probe's cleanup).
// Deleting a missing object is not an error.
type Deleter interface {
	Delete(ctx context.Context, p string) error
}

// NameLister is implemented by stores for which listing names is much cheaper than
// listing names with sizes and times (a local directory: no lstat per entry), so that a
// caller that needs the size and time of a few entries only (VACUUM: the unreferenced
// ones) asks Stat for those.
type NameLister interface {
	// ListNamePages is ListPages with Name and IsDir set only (Size and ModTime zero) and
	// each page in directory order, not sorted.
	ListNamePages(ctx context.Context, dir string, fn func(page []FileInfo) error) error
}

// TempLister is implemented by stores whose objects in the making are hidden temporary
// files next to their final names, which listings skip (Local: ".tmp-…"). A writer killed
// mid-write leaves its temporary file behind for good; VACUUM and log cleanup find them
// through this and delete those older than their retention and one day.
type TempLister interface {
	// ListNamePagesTemps is NameLister's ListNamePages that also calls temp with the
	// name of each temporary file in dir (not in its subdirectories).
	ListNamePagesTemps(ctx context.Context, dir string, fn func(page []FileInfo) error, temp func(name string)) error
}

// ListerFrom is implemented by stores that can list a directory starting after a name
// (S3 StartAfter, GCS StartOffset, Azure StartFrom), so that reading a long _delta_log
// from a checkpoint does not list its whole history.
type ListerFrom interface {
	// ListFrom returns the entries of dir whose names sort after `after` (exclusive),
	// sorted by name; like List, an empty list when dir does not exist.
	ListFrom(ctx context.Context, dir, after string) ([]FileInfo, error)
}

// ListFrom lists the entries of dir whose names are greater than after, sorted, with the
// store's native start-after listing when it has one, else with List and a filter.
func ListFrom(ctx context.Context, st Store, dir, after string) ([]FileInfo, error) {
	if l, ok := st.(ListerFrom); ok {
		return l.ListFrom(ctx, dir, after)
	}
	ents, err := st.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearchFunc(ents, after, func(e FileInfo, s string) int { return strings.Compare(e.Name, s) })
	for i < len(ents) && ents[i].Name <= after {
		i++
	}
	return ents[i:], nil
}

// gather is a ListPages callback appending every page to *out.
func gather(out *[]FileInfo) func(page []FileInfo) error {
	return func(page []FileInfo) error {
		*out = append(*out, page...)
		return nil
	}
}

// emitPage sorts a store's page by name (it holds its objects and its common prefixes
// in two lists, each sorted) and hands it to fn in pages of at most MaxListPage entries:
// some servers (fake-gcs-server) send up to MaxListPage objects and the prefixes besides.
func emitPage(page []FileInfo, fn func(page []FileInfo) error) error {
	slices.SortFunc(page, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) })
	for len(page) > 0 {
		n := min(len(page), MaxListPage)
		if err := fn(page[:n]); err != nil {
			return err
		}
		page = page[n:]
	}
	return nil
}

// sortFilter sorts entries by name and filters those not after `after` (stores whose
// listing is not lexicographic, or that ignore the start key, like Azurite).
func sortFilter(ents []FileInfo, after string) []FileInfo {
	slices.SortFunc(ents, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) })
	out := ents[:0]
	for _, e := range ents {
		if after == "" || e.Name > after {
			out = append(out, e)
		}
	}
	return slices.CompactFunc(out, func(a, b FileInfo) bool { return a.Name == b.Name })
}
