package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/storage"
)

var storeKinds = []string{"s3", "gcs", "azure"}

// TestStoreContract runs the Store contract against each emulator: put-if-absent refuses
// an existing object (and leaves it), reads, stats, listing (sorted, directories, from a
// start-after name), streamed uploads (multipart-sized on S3), aborted uploads leave
// nothing, deletes.
func TestStoreContract(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			o := needStore(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st := o.open(t, "contract")

			if _, err := st.Get(ctx, "_delta_log/00000000000000000000.json"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("get of a missing object: got %v, want fs.ErrNotExist", err)
			}
			if _, err := st.Stat(ctx, "_delta_log/00000000000000000000.json"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("stat of a missing object: got %v, want fs.ErrNotExist", err)
			}
			if ents, err := st.List(ctx, "_delta_log"); err != nil || len(ents) != 0 {
				t.Fatalf("list of a missing directory: %v, %v; want empty, nil", ents, err)
			}
			for v := 0; v < 5; v++ {
				if err := st.PutIfAbsent(ctx, fmt.Sprintf("_delta_log/%020d.json", v), []byte(fmt.Sprintf("commit %d\n", v))); err != nil {
					t.Fatalf("put-if-absent version %d: %v", v, err)
				}
			}
			err := st.PutIfAbsent(ctx, "_delta_log/00000000000000000003.json", []byte("other\n"))
			if !errors.Is(err, storage.ErrExist) || !errors.Is(err, fs.ErrExist) {
				t.Fatalf("second put-if-absent: got %v, want ErrExist", err)
			}
			if b, err := st.Get(ctx, "_delta_log/00000000000000000003.json"); err != nil || string(b) != "commit 3\n" {
				t.Fatalf("version 3 after the refused put: %q, %v; want %q", b, err, "commit 3\n")
			}
			if err := st.Put(ctx, "_delta_log/_last_checkpoint", []byte(`{"version":2}`)); err != nil {
				t.Fatal(err)
			}
			if err := st.Put(ctx, "_delta_log/_last_checkpoint", []byte(`{"version":4}`)); err != nil {
				t.Fatalf("put replacing an object: %v", err)
			}
			if b, _ := st.Get(ctx, "_delta_log/_last_checkpoint"); string(b) != `{"version":4}` {
				t.Fatalf("_last_checkpoint = %q, want the replacement", b)
			}
			if err := st.Put(ctx, "_delta_log/_sidecars/x.parquet", []byte("s")); err != nil {
				t.Fatal(err)
			}
			ents, err := st.List(ctx, "_delta_log")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				n := e.Name
				if e.IsDir {
					n += "/"
				}
				names = append(names, n)
			}
			want := "00000000000000000000.json 00000000000000000001.json 00000000000000000002.json 00000000000000000003.json 00000000000000000004.json _last_checkpoint _sidecars/"
			if got := strings.Join(names, " "); got != want {
				t.Fatalf("list _delta_log:\n got %s\nwant %s", got, want)
			}
			if ents[1].Size != int64(len("commit 1\n")) {
				t.Errorf("listed size of version 1 = %d, want %d", ents[1].Size, len("commit 1\n"))
			}
			from, err := storage.ListFrom(ctx, st, "_delta_log", "00000000000000000002")
			if err != nil {
				t.Fatal(err)
			}
			names = names[:0]
			for _, e := range from {
				names = append(names, e.Name)
			}
			want = "00000000000000000002.json 00000000000000000003.json 00000000000000000004.json _last_checkpoint _sidecars"
			if got := strings.Join(names, " "); got != want {
				t.Fatalf("list _delta_log after 00000000000000000002:\n got %s\nwant %s", got, want)
			}
			fi, err := st.Stat(ctx, "_delta_log/00000000000000000004.json")
			if err != nil || fi.Size != int64(len("commit 4\n")) || fi.ModTime.IsZero() {
				t.Fatalf("stat version 4: %+v, %v", fi, err)
			}

			// A streamed data file larger than S3's multipart threshold (16 MiB).
			big := bytes.Repeat([]byte("0123456789abcdef"), (18<<20)/16+3)
			w, err := st.Create(ctx, "part-00000-big.parquet")
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < len(big); off += 1 << 20 {
				if _, err := w.Write(big[off:min(off+1<<20, len(big))]); err != nil {
					t.Fatalf("write big object at %d: %v", off, err)
				}
			}
			if _, err := st.Stat(ctx, "part-00000-big.parquet"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a streamed object is visible before Close: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("close big object: %v", err)
			}
			got, err := st.Get(ctx, "part-00000-big.parquet")
			if err != nil || !bytes.Equal(got, big) {
				t.Fatalf("read big object back: %d bytes (want %d), equal %v, %v", len(got), len(big), bytes.Equal(got, big), err)
			}
			w, err = st.Create(ctx, "part-00001-aborted.parquet")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(big[:3<<20]); err != nil {
				t.Fatal(err)
			}
			if err := w.Abort(); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Stat(ctx, "part-00001-aborted.parquet"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("an aborted upload left an object: %v", err)
			}
			// The probe ran before the first write and cleaned up after itself.
			ents, _ = st.List(ctx, "_delta_log")
			for _, e := range ents {
				if strings.HasPrefix("_delta_log/"+e.Name, storage.ProbePrefix) {
					t.Errorf("probe object left behind: %s", e.Name)
				}
			}
			if kind == "azure" {
				// The same blobs through an ADLS Gen2 URI, mapped onto the Blob API (the
				// account's endpoint comes from the connection string: Azurite).
				abfss := strings.Replace(o.base, "az://lake/", "abfss://lake@devstoreaccount1.dfs.core.windows.net/", 1) + "/contract"
				st2, err := storage.OpenWith(ctx, abfss, storage.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if b, err := st2.Get(ctx, "_delta_log/00000000000000000003.json"); err != nil || string(b) != "commit 3\n" {
					t.Fatalf("%s: version 3 = %q, %v", abfss, b, err)
				}
				if err := st2.PutIfAbsent(ctx, "_delta_log/00000000000000000004.json", []byte("x")); !errors.Is(err, storage.ErrExist) {
					t.Fatalf("%s: put-if-absent of an existing version: %v, want ErrExist", abfss, err)
				}
			}
			if d, ok := st.(storage.Deleter); !ok {
				t.Errorf("%T has no Delete", st)
			} else {
				if err := d.Delete(ctx, "part-00000-big.parquet"); err != nil {
					t.Fatal(err)
				}
				if err := d.Delete(ctx, "part-00000-big.parquet"); err != nil {
					t.Fatalf("deleting a missing object: %v, want nil", err)
				}
			}
		})
	}
}

// TestStorePutIfAbsentRace: 8 writers race for each of 25 names; exactly one wins each,
// every loser gets ErrExist, and the object holds the winner's bytes.
func TestStorePutIfAbsentRace(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			o := needStore(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			st := o.open(t, "race")
			const names, writers = 25, 8
			for n := 0; n < names; n++ {
				name := fmt.Sprintf("_delta_log/%020d.json", n)
				var wg sync.WaitGroup
				var mu sync.Mutex
				var winners []int
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
						case errors.Is(err, storage.ErrExist):
						default:
							t.Errorf("%s writer %d: %v", name, w, err)
						}
					}(w)
				}
				wg.Wait()
				if len(winners) != 1 {
					t.Fatalf("%s: %d winners %v, want exactly 1", name, len(winners), winners)
				}
				b, err := st.Get(ctx, name)
				if err != nil || string(b) != fmt.Sprintf("writer %d\n", winners[0]) {
					t.Fatalf("%s holds %q, %v; want the winner's bytes (writer %d)", name, b, err, winners[0])
				}
			}
		})
	}
}
