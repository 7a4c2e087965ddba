// Package deltatest holds the fixtures that the tests of deltawriter and
// deltawriter/parquetenc share: Delta schemas, a store that keeps one file in memory, and
// column buffers built the way the decoder and the table writer build them. Only tests
// import it.
package deltatest

import (
	"bytes"
	"context"
	"io/fs"
	"math/big"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// AllTypesSchema is a Delta schema (the JSON of metaData.schemaString) with every type the
// table writer writes: the primitives, both decimal layouts, binary, a struct, an array and
// a map.
const AllTypesSchema = `{"type":"struct","fields":[
{"name":"id","type":"long","nullable":true,"metadata":{}},
{"name":"i","type":"integer","nullable":true,"metadata":{}},
{"name":"s","type":"string","nullable":true,"metadata":{}},
{"name":"d","type":"double","nullable":true,"metadata":{}},
{"name":"b","type":"boolean","nullable":true,"metadata":{}},
{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
{"name":"day","type":"date","nullable":true,"metadata":{}},
{"name":"dec10","type":"decimal(10,2)","nullable":true,"metadata":{}},
{"name":"dec25","type":"decimal(25,3)","nullable":true,"metadata":{}},
{"name":"bin","type":"binary","nullable":true,"metadata":{}},
{"name":"st","type":{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}},{"name":"y","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
{"name":"arr","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}},
{"name":"m","type":{"type":"map","keyType":"string","valueType":"long","valueContainsNull":true},"nullable":true,"metadata":{}}
]}`

// BenchSchema is the ten-column table of the commit and encode benchmarks.
const BenchSchema = `{"type":"struct","fields":[
{"name":"id","type":"long","nullable":true,"metadata":{}},
{"name":"name","type":"string","nullable":true,"metadata":{}},
{"name":"price","type":"double","nullable":true,"metadata":{}},
{"name":"active","type":"boolean","nullable":true,"metadata":{}},
{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
{"name":"note","type":"string","nullable":true,"metadata":{}},
{"name":"qty","type":"integer","nullable":true,"metadata":{}},
{"name":"amount","type":"decimal(12,2)","nullable":true,"metadata":{}},
{"name":"status","type":"string","nullable":true,"metadata":{}},
{"name":"country","type":"string","nullable":true,"metadata":{}}]}`

// FLBA returns the n-byte big-endian two's complement of the decimal string's unscaled
// value (a fixed_len_byte_array decimal); a string that is not an integer fails t.
func FLBA(t testing.TB, unscaled string, n int) []byte {
	t.Helper()
	v, ok := new(big.Int).SetString(unscaled, 10)
	if !ok {
		t.Fatalf("bad number %s", unscaled)
	}
	if v.Sign() < 0 {
		v.Add(v, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	b := v.Bytes()
	return append(make([]byte, n-len(b)), b...)
}

// Levelled wraps levelled column values as column.Columns, as WriteDataFile does.
func Levelled(cols [][]parquet.Value) []column.Column {
	out := make([]column.Column, len(cols))
	for i, c := range cols {
		out[i] = column.Levelled(c)
	}
	return out
}

// ColumnsOf gives every column of cols the form the decoder builds: Reset to its leaf of
// pq (dense for a non-repeated fixed-width leaf), then Append of every value, which keeps
// it dense while the values are set and turns it levelled at the first null.
func ColumnsOf(pq *parquet.Schema, cols [][]parquet.Value) []column.Column {
	leaves := column.Leaves(pq)
	out := make([]column.Column, len(cols))
	for i, vals := range cols {
		out[i].Reset(leaves[i])
		for _, v := range vals {
			out[i].Append(v)
		}
	}
	return out
}

// MemStore is a storage.Store whose Create streams into Buf (reset by each Create); it
// keeps nothing else: Get finds nothing, List lists nothing, Put and PutIfAbsent succeed
// without storing, Stat reports the size of the last file closed.
type MemStore struct {
	Buf  *bytes.Buffer
	size int64
}

// NewMemStore returns a MemStore writing into buf.
func NewMemStore(buf *bytes.Buffer) *MemStore { return &MemStore{Buf: buf} }

func (m *MemStore) Get(context.Context, string) ([]byte, error) { return nil, fs.ErrNotExist }
func (m *MemStore) List(context.Context, string) ([]storage.FileInfo, error) {
	return nil, nil
}
func (m *MemStore) ListPages(context.Context, string, func([]storage.FileInfo) error) error {
	return nil
}
func (m *MemStore) Put(context.Context, string, []byte) error         { return nil }
func (m *MemStore) PutIfAbsent(context.Context, string, []byte) error { return nil }
func (m *MemStore) Create(context.Context, string) (storage.Writer, error) {
	m.Buf.Reset()
	return memWriter{m}, nil
}
func (m *MemStore) Stat(context.Context, string) (storage.FileInfo, error) {
	return storage.FileInfo{Size: m.size, ModTime: time.Unix(1, 0)}, nil
}
func (m *MemStore) URI() string { return "mem://" }

type memWriter struct{ m *MemStore }

func (w memWriter) Write(b []byte) (int, error) { return w.m.Buf.Write(b) }
func (w memWriter) Abort() error                { return nil }
func (w memWriter) Close() error                { w.m.size = int64(w.m.Buf.Len()); return nil }
