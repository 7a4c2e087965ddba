package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// countingStore counts the requests a snapshot load makes: whole-object Gets of Parquet
// files and ranged GETs (forwarded to the real store's GetRange: a Range request on the
// wire). With ranged false it hides GetRange, so checkpoints are read whole (the former
// path).
type countingStore struct {
	storage.Store
	mu                   sync.Mutex
	gets, ranges         int
	getBytes, rangeBytes int64
}

func (c *countingStore) Get(ctx context.Context, p string) ([]byte, error) {
	b, err := c.Store.Get(ctx, p)
	if strings.HasSuffix(p, ".parquet") {
		c.mu.Lock()
		c.gets++
		c.getBytes += int64(len(b))
		c.mu.Unlock()
	}
	return b, err
}

type rangedStore struct{ *countingStore }

func (r rangedStore) GetRange(ctx context.Context, p string, off, length int64) ([]byte, error) {
	b, err := r.Store.(storage.RangeGetter).GetRange(ctx, p, off, length)
	r.mu.Lock()
	r.ranges++
	r.rangeBytes += int64(len(b))
	r.mu.Unlock()
	return b, err
}

// bigCheckpointLog builds, on local disk, a table whose version 1 adds n files with
// random-looking paths and statistics and is checkpointed (delta.checkpointInterval 1),
// and returns its _delta_log files (name → bytes).
func bigCheckpointLog(t *testing.T, n int) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "order_id", Type: deltalog.Long, Nullable: true}}}
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "orders", Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	create.Metadata.Configuration = map[string]string{deltalog.PropCheckpointInterval: "1"}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: create.Protocol, Metadata: create.Metadata, Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	now := time.Now().UnixMilli()
	adds := make([]deltalog.Add, n)
	for i := range adds {
		lo := r.Int64N(1 << 40)
		adds[i] = deltalog.Add{Path: fmt.Sprintf("part-%05d-%016x%016x-c000.snappy.parquet", i%100, r.Uint64(), r.Uint64()),
			Size: 1000 + r.Int64N(1<<20), ModificationTime: now - r.Int64N(1<<30), DataChange: true,
			Stats: fmt.Sprintf(`{"numRecords":%d,"minValues":{"order_id":%d},"maxValues":{"order_id":%d},"nullCount":{"order_id":0}}`, r.IntN(5000), lo, lo+r.Int64N(1<<20))}
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: 0, Adds: adds, Txns: []deltalog.Txn{{AppID: "orders-orders-0", Version: int64(n)}}}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	entries, err := st.List(ctx, "_delta_log")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir {
			continue
		}
		if out["_delta_log/"+e.Name], err = st.Get(ctx, "_delta_log/"+e.Name); err != nil {
			t.Fatal(err)
		}
	}
	if len(out["_delta_log/00000000000000000001.checkpoint.parquet"]) == 0 {
		t.Fatalf("no checkpoint at version 1: %d log files", len(out))
	}
	return out
}

// TestObjstoreCheckpointRangedRead (checkpoints read with range reads): on
// each emulator (S3, GCS, Azure) a table whose checkpoint holds 25,000 files (about 2
// MB, two blocks) is loaded twice: with ranged reads (the stores' GetRange, 1 MiB blocks) it makes
// ⌈size / 1 MiB⌉ or one more ranged GETs and no whole-object Get of the checkpoint;
// read whole it makes one Get of the file; both snapshots are exactly equal (version,
// protocol, metadata, 25,000 files, txns).
func TestObjstoreCheckpointRangedRead(t *testing.T) {
	const files = 25_000
	log := bigCheckpointLog(t, files)
	cp := int64(len(log["_delta_log/00000000000000000001.checkpoint.parquet"]))
	blocks := int((cp + storage.ReadBlockSize - 1) / storage.ReadBlockSize)
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			o := needStore(t, kind)
			ctx := context.Background()
			st := o.open(t, "orders")
			for name, b := range log {
				if err := st.Put(ctx, name, b); err != nil {
					t.Fatal(err)
				}
			}
			load := func(s storage.Store) *deltawriter.Snapshot {
				tbl, err := deltawriter.Open(ctx, s)
				if err != nil {
					t.Fatal(err)
				}
				snap, err := tbl.Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return snap
			}
			whole := &countingStore{Store: st}
			want := load(whole)
			ranged := &countingStore{Store: st}
			start := time.Now()
			got := load(rangedStore{ranged})
			took := time.Since(start)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: the ranged snapshot differs from the whole-file one (%d vs %d files, version %d vs %d)", kind, got.Files.Len(), want.Files.Len(), got.Version, want.Version)
			}
			if got.Version != 1 || got.Files.Len() != files || got.Txns["orders-orders-0"] != files {
				t.Errorf("%s: snapshot version %d, %d files, txn %d; want 1, %d, %d", kind, got.Version, got.Files.Len(), got.Txns["orders-orders-0"], files, files)
			}
			if ranged.gets != 0 || ranged.ranges < blocks || ranged.ranges > blocks+1 || ranged.rangeBytes > cp+storage.ReadBlockSize {
				t.Errorf("%s: ranged load of a %d-byte checkpoint: %d whole Gets, %d ranged GETs for %d bytes; want 0 and %d or %d for at most %d",
					kind, cp, ranged.gets, ranged.ranges, ranged.rangeBytes, blocks, blocks+1, cp+storage.ReadBlockSize)
			}
			if whole.gets != 1 || whole.getBytes != cp || whole.ranges != 0 {
				t.Errorf("%s: whole load: %d Gets for %d bytes, %d ranged", kind, whole.gets, whole.getBytes, whole.ranges)
			}
			t.Logf("%s: checkpoint of %d bytes, %d files: %d ranged GETs (%d bytes) in %v; whole: 1 GET", kind, cp, files, ranged.ranges, ranged.rangeBytes, took.Round(time.Millisecond))
		})
	}
}
