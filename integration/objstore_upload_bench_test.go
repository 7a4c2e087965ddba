package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/storage"
)

// BenchmarkUploadObjectStores measures streamed data-file uploads (Store.Create, written
// in 1 MiB chunks as the Parquet writer streams, then Close) on each emulator on loopback,
// for a 4 MiB file (one request) and a 64 MiB one (multipart / resumable / blocks above
// 16 MiB), beside two baselines in the same run: the same bytes PUT over loopback HTTP to
// an in-process server that discards them (what loopback HTTP allows this process), and
// the local store (temp file, fsync, link). MB/s is Go's (b.SetBytes); each upload is
// checked by Stat for its size.
//
//	scripts/stack.sh start-stores && go test -run '^$' -bench UploadObjectStores -benchtime 5x ./integration/
func BenchmarkUploadObjectStores(b *testing.B) {
	chunk := make([]byte, 1<<20)
	if _, err := rand.Read(chunk); err != nil { // incompressible, like Parquet pages
		b.Fatal(err)
	}
	for _, size := range []int{4 << 20, 64 << 20} {
		name := fmt.Sprintf("%dMiB", size>>20)
		b.Run("baseline-http-discard/"+name, func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n, _ := io.Copy(io.Discard, r.Body)
				if n != int64(size) {
					http.Error(w, "short body", http.StatusBadRequest)
				}
			}))
			defer srv.Close()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req, err := http.NewRequest(http.MethodPut, srv.URL+"/part", &chunkReader{chunk: chunk, left: size})
				if err != nil {
					b.Fatal(err)
				}
				req.ContentLength = int64(size)
				resp, err := srv.Client().Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("baseline PUT: %s", resp.Status)
				}
			}
		})
		b.Run("baseline-local/"+name, func(b *testing.B) {
			st, err := storage.NewLocal(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			benchUpload(b, st, chunk, size)
		})
		for _, kind := range storeKinds {
			b.Run(kind+"/"+name, func(b *testing.B) {
				o := needStore(b, kind)
				benchUpload(b, mustOpen(b, o.base+"/upload"), chunk, size)
			})
		}
	}
}

func benchUpload(b *testing.B, st storage.Store, chunk []byte, size int) {
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := fmt.Sprintf("part-%05d.parquet", i)
		w, err := st.Create(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		for left := size; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				_ = w.Abort()
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		fi, err := st.Stat(ctx, p)
		if err != nil || fi.Size != int64(size) {
			b.Fatalf("uploaded %s: size %d, %v; want %d", p, fi.Size, err, size)
		}
		b.StartTimer()
	}
}

// chunkReader yields left bytes by repeating chunk.
type chunkReader struct {
	chunk []byte
	left  int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunk[:min(r.left, len(r.chunk))])
	r.left -= n
	return n, nil
}
