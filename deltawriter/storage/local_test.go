package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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

// TestLocalListPages lists a directory of 2,500 files, 3 subdirectories and an in-flight
// temporary file in 3 pages of at most 1,000 entries, each page sorted (ListPages),
// every entry exactly once, sizes and directories right; ListNamePages gives the same
// names without sizes; a missing directory gives no page; fn's error stops the listing.
func TestLocalListPages(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	st, _ := NewLocal(root)
	want := map[string]int64{}
	for i := range 2500 {
		n := fmt.Sprintf("part-%05d.parquet", i)
		if err := os.WriteFile(filepath.Join(root, n), make([]byte, i%7), 0o644); err != nil {
			t.Fatal(err)
		}
		want[n] = int64(i % 7)
	}
	for _, d := range []string{"d=1", "d=2", "_delta_log"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		want[d] = -1
	}
	if err := os.WriteFile(filepath.Join(root, ".tmp-inflight"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, names := range []bool{false, true} {
		list := st.ListPages
		if names {
			list = st.ListNamePages
		}
		seen := map[string]int{}
		var sizes []int
		err := list(ctx, "", func(page []FileInfo) error {
			sizes = append(sizes, len(page))
			if !names && !slices.IsSortedFunc(page, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) }) {
				t.Errorf("page of %d not sorted", len(page))
			}
			for _, e := range page {
				seen[e.Name]++
				w, ok := want[e.Name]
				switch {
				case !ok:
					t.Errorf("unexpected entry %q", e.Name)
				case e.IsDir != (w < 0):
					t.Errorf("%s: IsDir %v", e.Name, e.IsDir)
				case !names && !e.IsDir && e.Size != w:
					t.Errorf("%s: size %d, want %d", e.Name, e.Size, w)
				case names && (e.Size != 0 || !e.ModTime.IsZero()):
					t.Errorf("%s: ListNamePages gave size %d, time %v", e.Name, e.Size, e.ModTime)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// 2,504 directory entries read 1,000 at a time; the temporary file's page is one short.
		if len(sizes) != 3 || sizes[0]+sizes[1]+sizes[2] != 2503 || slices.Max(sizes) > MaxListPage || slices.Min(sizes) < 503 {
			t.Errorf("names=%v: pages of %v, want 3 pages of at most 1000, 2503 in all", names, sizes)
		}
		if len(seen) != len(want) {
			t.Errorf("names=%v: %d distinct entries, want %d", names, len(seen), len(want))
		}
		for n, c := range seen {
			if c != 1 {
				t.Errorf("names=%v: %s listed %d times", names, n, c)
			}
		}
	}

	all, err := st.List(ctx, "")
	if err != nil || len(all) != 2503 || all[0].Name != "_delta_log" || all[2502].Name != "part-02499.parquet" {
		t.Fatalf("List: %d entries, %v", len(all), err)
	}
	calls := 0
	if err := st.ListPages(ctx, "missing", func([]FileInfo) error { calls++; return nil }); err != nil || calls != 0 {
		t.Fatalf("missing dir: %d pages, %v", calls, err)
	}
	stop := errors.New("stop")
	if err := st.ListPages(ctx, "", func([]FileInfo) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("fn error: %d pages, %v; want 1, stop", calls, err)
	}
}
