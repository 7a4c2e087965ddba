package storage

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"sync"
)

// RangeGetter is a Store that reads part of an object: an HTTP ranged GET on S3, GCS and
// Azure, a positioned read on local disk. GetRange returns exactly length bytes from
// offset off (off ≥ 0, length > 0, off+length ≤ the object's size), or an error wrapping
// fs.ErrNotExist when the object does not exist.
type RangeGetter interface {
	GetRange(ctx context.Context, p string, off, length int64) ([]byte, error)
}

// Block sizes of an ObjectReader: every store request reads one aligned block of
// ReadBlockSize bytes (the last one shorter), and at most ReadBlocks blocks are kept, so
// reading an object of any size holds at most ReadBlockSize·ReadBlocks bytes (8 MiB)
// while a Parquet reader walks its column chunks side by side: several columns' pages
// are usually served by one block, and a column chunk larger than a block is read one
// block per request.
const (
	ReadBlockSize = 1 << 20
	ReadBlocks    = 8
)

// ObjectReader is an io.ReaderAt over one object of Size bytes that reads it with ranged
// requests through a small block cache (see ReadBlockSize). Safe for concurrent use.
type ObjectReader struct {
	ctx  context.Context
	st   RangeGetter
	path string
	Size int64 // bytes

	mu     sync.Mutex
	blocks map[int64]*list.Element // block index → element of lru (value: *block)
	lru    *list.List              // front: most recently used
	stats  ReadStats
}

// ReadStats counts an ObjectReader's store requests: Requests ranged GETs for Bytes bytes
// in total, MaxHeld bytes held at most at one time.
type ReadStats struct {
	Requests, Bytes, MaxHeld int64
}

type block struct {
	index int64
	data  []byte
}

// NewObjectReader returns an ObjectReader over the object at p, whose size is size
// bytes (from Stat or a listing). Reads use ctx.
func NewObjectReader(ctx context.Context, st RangeGetter, p string, size int64) *ObjectReader {
	return &ObjectReader{ctx: ctx, st: st, path: p, Size: size, blocks: map[int64]*list.Element{}, lru: list.New()}
}

// Stats returns the requests made so far.
func (r *ObjectReader) Stats() ReadStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// ReadAt implements io.ReaderAt: len(p) bytes from off, or fewer and io.EOF at the
// object's end; a store error is returned wrapped ("read range of <path>: …").
func (r *ObjectReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read range of %s: negative offset %d", r.path, off)
	}
	n := 0
	for n < len(p) {
		at := off + int64(n)
		if at >= r.Size {
			return n, io.EOF
		}
		b, err := r.block(at / ReadBlockSize)
		if err != nil {
			return n, err
		}
		n += copy(p[n:], b[at%ReadBlockSize:])
	}
	return n, nil
}

// block returns block i, from the cache or with one ranged request.
func (r *ObjectReader) block(i int64) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.blocks[i]; ok {
		r.lru.MoveToFront(e)
		return e.Value.(*block).data, nil
	}
	start := i * ReadBlockSize
	length := min(int64(ReadBlockSize), r.Size-start)
	data, err := r.st.GetRange(r.ctx, r.path, start, length)
	if err != nil {
		return nil, fmt.Errorf("read range of %s: %w", r.path, err)
	}
	if int64(len(data)) != length {
		return nil, fmt.Errorf("read range of %s: %d bytes at %d, want %d: %w", r.path, len(data), start, length, io.ErrUnexpectedEOF)
	}
	r.stats.Requests++
	r.stats.Bytes += length
	if r.lru.Len() >= ReadBlocks {
		old := r.lru.Back()
		r.lru.Remove(old)
		delete(r.blocks, old.Value.(*block).index)
	}
	r.blocks[i] = r.lru.PushFront(&block{index: i, data: data})
	held := int64(0)
	for e := r.lru.Front(); e != nil; e = e.Next() {
		held += int64(len(e.Value.(*block).data))
	}
	r.stats.MaxHeld = max(r.stats.MaxHeld, held)
	return data, nil
}
