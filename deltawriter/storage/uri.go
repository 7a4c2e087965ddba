package storage

import (
	"net/url"
	"path"
	"path/filepath"
	"strings"
)

// CanonicalURI returns the form of a table URI under which two URIs that name the same
// table location compare equal, without any I/O: an absolute path, file:///path and
// file://localhost/path become file:///path with the path cleaned (no trailing slash, no
// "." or ".." segments, percent-escapes decoded); s3a:// becomes s3://; an object-store
// URI keeps its scheme, bucket (container, container@account) and key prefix without
// leading or trailing slashes, its host lower-cased. It does not resolve symbolic links,
// nor tell az://container/p from the abfss:// URI of the same container (the account is
// only known from the environment). A URI it cannot parse is returned without its
// trailing slashes.
func CanonicalURI(uri string) string {
	if strings.HasPrefix(uri, "/") {
		return "file://" + filepath.ToSlash(filepath.Clean(uri))
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" {
		return strings.TrimRight(uri, "/")
	}
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "file":
		return "file://" + path.Clean("/"+u.Path)
	case "s3", "s3a", "gs", "az", "abfss", "abfs":
		if scheme == "s3a" {
			scheme = "s3"
		}
		host := strings.ToLower(u.Host)
		if u.User != nil {
			host = u.User.Username() + "@" + host
		}
		prefix := strings.Trim(path.Clean("/"+u.Path), "/")
		if prefix == "" {
			return scheme + "://" + host
		}
		return scheme + "://" + host + "/" + prefix
	default:
		return strings.TrimRight(uri, "/")
	}
}
