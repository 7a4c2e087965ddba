package main

import (
	"os"
	"path/filepath"
	"testing"
)

// -dir and -uri name one table: a local directory made absolute, or a URI kept as the
// daemon's table.uri takes it; both, neither, a URI in -dir or a relative -uri are refused.
func TestTableURI(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, uri, want string }{
		{"/tmp/big/t-10000-p0", "", "/tmp/big/t-10000-p0"},
		{"/tmp/big/t/", "", "/tmp/big/t"},
		{"big/t", "", filepath.Join(wd, "big/t")},
		{"", "s3://bench-big-x/t-100000-p0", "s3://bench-big-x/t-100000-p0"},
		{"", "gs://lake/t", "gs://lake/t"},
		{"", "az://lake/t", "az://lake/t"},
		{"", "file:///tmp/big/t", "file:///tmp/big/t"},
		{"", "/tmp/big/t", "/tmp/big/t"},
	} {
		got, err := tableURI(c.dir, c.uri)
		if err != nil || got != c.want {
			t.Errorf("tableURI(%q, %q) = %q, %v; want %q", c.dir, c.uri, got, err, c.want)
		}
	}
	for _, c := range []struct{ dir, uri string }{
		{"", ""},
		{"/tmp/big/t", "s3://b/t"},
		{"s3://b/t", ""},
		{"", "big/t"},
		{"", "http://127.0.0.1:7070/b/t"},
	} {
		if got, err := tableURI(c.dir, c.uri); err == nil {
			t.Errorf("tableURI(%q, %q) = %q, want an error", c.dir, c.uri, got)
		}
	}
}
