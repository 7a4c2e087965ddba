package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestPutIfAbsentRace(t *testing.T) {
	ctx := context.Background()
	st, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const names, writers = 100, 8
	for n := 0; n < names; n++ {
		name := fmt.Sprintf("_delta_log/%020d.json", n)
		var wg sync.WaitGroup
		var mu sync.Mutex
		winners, taken := []int{}, 0
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				err := st.PutIfAbsent(ctx, name, []byte(fmt.Sprintf("writer %d\n", w)))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, w)
				case errors.Is(err, ErrExist) && errors.Is(err, fs.ErrExist):
					taken++
				default:
					t.Errorf("%s writer %d: unexpected error %v", name, w, err)
				}
			}(w)
		}
		wg.Wait()
		if len(winners) != 1 || taken != writers-1 {
			t.Fatalf("%s: winners %v, taken %d; want exactly one winner", name, winners, taken)
		}
		got, err := st.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("writer %d\n", winners[0]); string(got) != want {
			t.Fatalf("%s: content %q, want the winner's %q", name, got, want)
		}
	}
	// No temp files are left behind.
	ents, err := os.ReadDir(filepath.Join(st.Root(), "_delta_log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != names {
		t.Fatalf("_delta_log has %d entries, want %d (temp files left?)", len(ents), names)
	}
}

func TestLocalBasics(t *testing.T) {
	ctx := context.Background()
	st, _ := NewLocal(t.TempDir())
	if _, err := st.Get(ctx, "missing.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get missing: %v, want fs.ErrNotExist", err)
	}
	if l, err := st.List(ctx, "_delta_log"); err != nil || len(l) != 0 {
		t.Fatalf("List missing dir = %v, %v; want empty", l, err)
	}
	for _, n := range []string{"b", "a", "c"} {
		if err := st.Put(ctx, "d/"+n, []byte(n+n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Put(ctx, "d/a", []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	l, err := st.List(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 3 || l[0].Name != "a" || l[1].Name != "b" || l[2].Name != "c" || l[0].Size != 8 {
		t.Fatalf("List = %+v", l)
	}
	w, err := st.Create(ctx, "d/streamed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "d/streamed"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("object visible before Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := st.Stat(ctx, "d/streamed"); err != nil || fi.Size != 5 {
		t.Fatalf("Stat = %+v, %v", fi, err)
	}
	for _, bad := range []string{"/etc/passwd", "../x", "a/../../x", ""} {
		if err := st.Put(ctx, bad, nil); err == nil {
			t.Errorf("Put(%q) succeeded, want an error", bad)
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		uri  string
		root string
		err  bool
	}{
		{uri: dir, root: dir},
		{uri: "file://" + dir, root: dir},
		{uri: "file://localhost" + dir, root: dir},
		{uri: "hdfs://nn/table", err: true},
		{uri: "relative/path", err: true},
		{uri: "file://otherhost/x", err: true},
	} {
		st, err := Open(tc.uri)
		if tc.err {
			if err == nil {
				t.Errorf("Open(%q) succeeded, want an error", tc.uri)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q): %v", tc.uri, err)
			continue
		}
		if got := st.(*Local).Root(); got != tc.root {
			t.Errorf("Open(%q) root = %q, want %q", tc.uri, got, tc.root)
		}
	}
	if _, err := Open("hdfs://nn/t"); err == nil || !strings.Contains(err.Error(), `scheme "hdfs" is not supported`) {
		t.Errorf("Open(hdfs) error = %v, want 'scheme \"hdfs\" is not supported'", err)
	}
	// Object stores open without a request (credentials and reachability are checked by
	// their first request); see cloud_test.go.
	for uri, want := range map[string]string{"s3://bucket/t": "s3://bucket/t", "az://lake/t/": "az://lake/t"} {
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;")
		st, err := Open(uri)
		if err != nil || st.URI() != want {
			t.Errorf("Open(%q) = %v, %v; want a store with URI %s", uri, st, err, want)
		}
	}
}

// Table files are readable by other users (Spark and Trino often run as another user).
func TestFilesAreWorldReadable(t *testing.T) {
	ctx := context.Background()
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if err := l.Put(ctx, "part-0.parquet", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"_delta_log/00000000000000000000.json", "part-0.parquet"} {
		fi, err := os.Stat(filepath.Join(l.root, p))
		if err != nil {
			t.Fatal(err)
		}
		if want := os.FileMode(0o644 &^ umask); fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
}
