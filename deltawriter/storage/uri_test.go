package storage

import "testing"

// URIs that name one table location have one canonical form; others keep theirs apart.
func TestCanonicalURI(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/lake/t", "file:///lake/t"},
		{"/lake/t/", "file:///lake/t"},
		{"/lake//x/../t/.", "file:///lake/t"},
		{"file:///lake/t", "file:///lake/t"},
		{"file:///lake/t/", "file:///lake/t"},
		{"file://localhost/lake/t", "file:///lake/t"},
		{"file:///lake/a%20b", "file:///lake/a b"},
		{"/lake/a b", "file:///lake/a b"},
		{"s3://lake/pg.public.a", "s3://lake/pg.public.a"},
		{"s3://lake/pg.public.a/", "s3://lake/pg.public.a"},
		{"s3a://lake/pg.public.a", "s3://lake/pg.public.a"},
		{"S3://Lake//bronze/t", "s3://lake/bronze/t"},
		{"s3://lake", "s3://lake"},
		{"s3://lake/", "s3://lake"},
		{"gs://lake/t/", "gs://lake/t"},
		{"az://c/t/", "az://c/t"},
		{"abfss://c@acct.dfs.core.windows.net/t/", "abfss://c@acct.dfs.core.windows.net/t"},
		{"relative/t/", "relative/t"},
	} {
		if got := CanonicalURI(c.in); got != c.want {
			t.Errorf("CanonicalURI(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, pair := range [][2]string{
		{"s3://lake/t", "gs://lake/t"},
		{"s3://lake/t", "s3://lake/T"}, // keys are case-sensitive
		{"s3://a/t", "s3://b/t"},
		{"/lake/t", "/lake/t2"},
		{"abfss://c@a1.dfs.core.windows.net/t", "abfss://c@a2.dfs.core.windows.net/t"},
	} {
		if CanonicalURI(pair[0]) == CanonicalURI(pair[1]) {
			t.Errorf("%q and %q have one canonical form %q", pair[0], pair[1], CanonicalURI(pair[0]))
		}
	}
}
