package deltawriter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// bigSnapshot is a snapshot of n live files with random-looking paths and statistics, so
// that its checkpoint does not compress to nothing (about 110 bytes a file).
func bigSnapshot(n int) *Snapshot {
	s := minimalSnapshot()
	r := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	s.txns["orders-orders-0"], s.Txns["orders-orders-0"] = deltalog.Txn{AppID: "orders-orders-0", Version: int64(n), LastUpdated: &now}, int64(n)
	adds := make([]deltalog.Add, 0, n)
	for i := range n {
		lo := r.Int64N(1 << 40)
		a := deltalog.Add{Path: fmt.Sprintf("part-%05d-%016x%016x-c000.snappy.parquet", i%100, r.Uint64(), r.Uint64()), PartitionValues: map[string]*string{},
			Size: 1000 + r.Int64N(1<<20), ModificationTime: now - r.Int64N(1<<30), DataChange: true,
			Stats: fmt.Sprintf(`{"numRecords":%d,"minValues":{"id":%d,"ts":"%s"},"maxValues":{"id":%d},"nullCount":{"id":0}}`,
				r.IntN(5000), lo, time.UnixMilli(now-r.Int64N(1<<30)).UTC().Format(time.RFC3339Nano), lo+r.Int64N(1<<20))}
		adds = append(adds, a)
	}
	s.Files = NewFileSet(adds...)
	return s
}

// rangeCounter is a store that counts what checkpoint reads cost: whole-object Gets and
// ranged GETs (requests, bytes, the largest).
type rangeCounter struct {
	storage.Store
	rg                   storage.RangeGetter
	mu                   sync.Mutex
	gets, ranges         int
	getBytes, rangeBytes int64
	largestRange         int64
}

func (c *rangeCounter) Get(ctx context.Context, p string) ([]byte, error) {
	b, err := c.Store.Get(ctx, p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.HasSuffix(p, ".parquet") {
		c.gets++
		c.getBytes += int64(len(b))
	}
	return b, err
}

func (c *rangeCounter) GetRange(ctx context.Context, p string, off, length int64) ([]byte, error) {
	b, err := c.rg.GetRange(ctx, p, off, length)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ranges++
	c.rangeBytes += int64(len(b))
	c.largestRange = max(c.largestRange, length)
	return b, err
}

// wholeOnly hides GetRange: the checkpoint is read whole, as before ranged reads.
type wholeOnly struct{ storage.Store }

// TestCheckpointRangedRead: a checkpoint of 30,000 files (about 2.8 MB) is read with
// ranged requests of one block each, each block fetched once except at most one (the
// last block holds the footer, read first, and the last columns, read last): requests ≤
// ⌈size / 1 MiB⌉ + 1, never a whole-object Get; the snapshot equals the one from reading
// the file whole. (TestObjectReader checks the bound on what a reader holds.)
func TestCheckpointRangedRead(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const files = 30_000
	s := bigSnapshot(files)
	if err := writeCheckpoint(ctx, st, s, time.Now()); err != nil {
		t.Fatal(err)
	}
	name := path.Base(checkpointPath(s.Version))
	fi, err := st.Stat(ctx, checkpointPath(s.Version))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size <= 2*storage.ReadBlockSize {
		t.Fatalf("checkpoint of %d bytes: want one of several blocks", fi.Size)
	}
	whole := &rangeCounter{Store: wholeOnly{st}}
	want, err := readCheckpoint(ctx, wholeOnly{whole}, s.Version, []string{name})
	if err != nil {
		t.Fatal(err)
	}
	ranged := &rangeCounter{Store: st, rg: st}
	got, err := readCheckpoint(ctx, ranged, s.Version, []string{name})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ranged read differs from the whole read: %d files vs %d", got.Files.Len(), want.Files.Len())
	}
	if got.Files.Len() != files || got.Txns["orders-orders-0"] != files {
		t.Fatalf("read %d files, txn %d", got.Files.Len(), got.Txns["orders-orders-0"])
	}
	blocks := int((fi.Size + storage.ReadBlockSize - 1) / storage.ReadBlockSize)
	if ranged.gets != 0 || ranged.ranges < blocks || ranged.ranges > blocks+1 || ranged.rangeBytes > fi.Size+storage.ReadBlockSize || ranged.largestRange > storage.ReadBlockSize {
		t.Errorf("ranged read of %d bytes: %d whole Gets, %d ranged GETs for %d bytes (largest %d); want 0, %d or %d for at most %d (at most %d each)",
			fi.Size, ranged.gets, ranged.ranges, ranged.rangeBytes, ranged.largestRange, blocks, blocks+1, fi.Size+storage.ReadBlockSize, storage.ReadBlockSize)
	}
	if whole.gets != 1 || whole.getBytes != fi.Size {
		t.Errorf("whole read: %d Gets for %d bytes", whole.gets, whole.getBytes)
	}
	t.Logf("checkpoint %d bytes, %d files: %d ranged GETs for %d bytes (whole read: 1 GET of the whole file)", fi.Size, files, ranged.ranges, ranged.rangeBytes)
}

// TestObjectReader: reads across block boundaries, at the end (io.EOF), a store that
// returns fewer bytes than asked, and the cache bound.
func TestObjectReader(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	size := int64(storage.ReadBlockSize*(storage.ReadBlocks+2) + 123)
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := st.Put(ctx, "obj", data); err != nil {
		t.Fatal(err)
	}
	r := storage.NewObjectReader(ctx, st, "obj", size)
	buf := make([]byte, 3*storage.ReadBlockSize)
	off := int64(storage.ReadBlockSize - 10)
	if n, err := r.ReadAt(buf, off); err != nil || n != len(buf) || !reflect.DeepEqual(buf, data[off:off+int64(len(buf))]) {
		t.Fatalf("read across blocks: %d %v", n, err)
	}
	if st := r.Stats(); st.Requests != 4 || st.Bytes != 4*storage.ReadBlockSize {
		t.Errorf("across 4 blocks: %+v", st)
	}
	n, err := r.ReadAt(buf[:200], size-123)
	if n != 123 || err == nil || err.Error() != "EOF" || !reflect.DeepEqual(buf[:123], data[size-123:]) {
		t.Errorf("read at the end: %d %v", n, err)
	}
	for i := range int64(storage.ReadBlocks + 3) { // every block: the cache holds 8
		if _, err := r.ReadAt(buf[:1], i*storage.ReadBlockSize); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Stats(); st.MaxHeld > storage.ReadBlockSize*storage.ReadBlocks {
		t.Errorf("held %d bytes at most, want ≤ %d", st.MaxHeld, storage.ReadBlockSize*storage.ReadBlocks)
	}
	short := storage.NewObjectReader(ctx, st, "obj", size+storage.ReadBlockSize) // the store has less
	if _, err := short.ReadAt(buf[:10], size+5); err == nil || !strings.Contains(err.Error(), "read range of obj: ") {
		t.Errorf("past the object's end: %v", err)
	}
}

// BenchmarkCheckpointRead: loading the checkpoint of 100,000 files (about 11 MB) from
// local disk, whole (one Get, the file in memory, the former path) and with ranged reads
// (1 MiB blocks, at most 8 held). B/op includes the snapshot itself (the same in both).
func BenchmarkCheckpointRead(b *testing.B) {
	ctx := context.Background()
	st, err := storage.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s := bigSnapshot(100_000)
	if err := writeCheckpoint(ctx, st, s, time.Now()); err != nil {
		b.Fatal(err)
	}
	name := path.Base(checkpointPath(s.Version))
	for _, c := range []struct {
		name string
		st   storage.Store
	}{{"whole", wholeOnly{st}}, {"ranged", st}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := readCheckpoint(ctx, c.st, s.Version, []string{name}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/load")
		})
	}
}
