package parquetenc

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// parallelMinValues is the number of column entries (all leaves: level entries of a
// levelled column, rows of a dense one) below which a file is
// encoded inline: starting a helper costs about a microsecond, a column of a few thousand
// values tens of them.
const parallelMinValues = 16 << 10

func countValues(cols []column.Column) int {
	n := 0
	for i := range cols {
		n += cols[i].Len()
	}
	return n
}

// encodeHelpersBusy counts the helper goroutines encoding column chunks, process-wide;
// at most GOMAXPROCS-1 (the callers themselves are the other encode goroutines).
var encodeHelpersBusy atomic.Int64

// acquireHelpers takes up to want helpers from the budget, without waiting, and returns
// how many it took (possibly 0).
func acquireHelpers(want int) int {
	limit := int64(runtime.GOMAXPROCS(0) - 1)
	for {
		busy := encodeHelpersBusy.Load()
		n := min(int64(want), limit-busy)
		if n <= 0 {
			return 0
		}
		if encodeHelpersBusy.CompareAndSwap(busy, busy+n) {
			return int(n)
		}
	}
}

func releaseHelpers(n int) {
	if n > 0 {
		encodeHelpersBusy.Add(-int64(n))
	}
}

// encodedChunk is one column chunk encoded by a worker: its bytes are
// enc.out[start:end], and md's offsets are positions in enc.out.
type encodedChunk struct {
	enc          *columnEncoder
	start, end   int
	md           format.ColumnChunk
	dict         bool
	uncompressed int64
	err          error
}

// encodeColumnsParallel encodes the column chunks on the calling goroutine and helpers
// more, each with its own pooled columnEncoder taking the next column not yet taken,
// then appends the chunks to e.out in schema order, moving their footer offsets
// (ColumnChunk.file_offset, data_page_offset, dictionary_page_offset) to their place in
// the file. It fills sums and chunks and returns the columns' total uncompressed size.
// On errors it returns the error of the first failing column in schema order, as the
// inline pass does: columns are taken in order and a worker stops taking after a
// failure, so every column before a failed one has been encoded.
//
// Memory: the workers' buffers hold the encoded chunks (the file's size in all) until
// they are copied into e.out, so the file is held twice for the copy, plus each worker's
// page buffers (about 3 × pageTargetBytes and a dictionary of at most dictMaxBytes).
func (e *columnEncoder) encodeColumnsParallel(leaves []leafInfo, cols []column.Column, numRows int, codec compress.Codec, helpers int,
	sums []Summary, chunks []format.ColumnChunk) (int64, error) {
	res := make([]encodedChunk, len(leaves))
	workers := make([]*columnEncoder, helpers+1)
	for w := range workers {
		workers[w] = newColumnEncoder(codec, true)
		workers[w].pageTarget = e.pageTarget
	}
	defer func() {
		for _, w := range workers {
			w.release()
		}
	}()
	var next atomic.Int64
	var failed atomic.Bool
	work := func(w *columnEncoder) {
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= len(leaves) {
				return
			}
			start := len(w.out)
			s, err := w.column(leaves[i].index, &leaves[i], &cols[i], numRows)
			if err != nil {
				res[i].err = err
				failed.Store(true)
				return
			}
			sums[i] = s
			res[i] = encodedChunk{enc: w, start: start, end: len(w.out), md: w.chunkMetadata(&leaves[i], &cols[i], s),
				dict: w.dictOn, uncompressed: w.uncompressed}
		}
	}
	var wg sync.WaitGroup
	for _, w := range workers[1:] {
		wg.Go(func() { work(w) })
	}
	work(workers[0])
	wg.Wait()
	size := 0
	for i := range res {
		if res[i].err != nil {
			return 0, res[i].err
		}
		size += res[i].end - res[i].start
	}
	e.out = slices.Grow(e.out, size)
	var total int64
	for i := range res {
		r := &res[i]
		shift := int64(len(e.out) - r.start)
		e.out = append(e.out, r.enc.out[r.start:r.end]...)
		c := r.md
		c.FileOffset += shift
		c.MetaData.DataPageOffset += shift
		if r.dict {
			c.MetaData.DictionaryPageOffset += shift
		}
		chunks[i] = c
		total += r.uncompressed
	}
	return total, nil
}
