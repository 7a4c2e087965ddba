package parquetenc_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"math/big"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/storage"
)

// The schemas, rows and stores the tests share. The schemas are Delta schemas made into
// Parquet schemas by deltawriter.ParquetSchema, as the table writer hands them over, and
// deltawriter.WriteColumns and WriteDataFile give the files and statistics the table
// gets from this package's output.

// allTypesSchema covers every Delta type the table writer writes.
const allTypesSchema = `{"type":"struct","fields":[
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

// flba returns the n-byte big-endian two's complement of the decimal string's unscaled value.
func flba(t *testing.T, unscaled string, n int) []byte {
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

// readRows reads back every row of the Parquet file data as parquet-go reads it: the
// values of each row, with their levels and column indexes, in column order.
func readRows(t *testing.T, data []byte) []parquet.Row {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out []parquet.Row
	buf := make([]parquet.Row, 64)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				out = append(out, r.Clone())
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// memStore is a storage.Store whose Create streams into buf (reused between writes); it
// keeps nothing else.
type memStore struct {
	buf  *bytes.Buffer
	size int64
}

func (m *memStore) Get(context.Context, string) ([]byte, error) { return nil, fs.ErrNotExist }
func (m *memStore) List(context.Context, string) ([]storage.FileInfo, error) {
	return nil, nil
}
func (m *memStore) Put(context.Context, string, []byte) error         { return nil }
func (m *memStore) PutIfAbsent(context.Context, string, []byte) error { return nil }
func (m *memStore) Create(context.Context, string) (storage.Writer, error) {
	m.buf.Reset()
	return memWriter{m}, nil
}
func (m *memStore) Stat(context.Context, string) (storage.FileInfo, error) {
	return storage.FileInfo{Size: m.size, ModTime: time.Unix(1, 0)}, nil
}
func (m *memStore) URI() string { return "mem://" }

type memWriter struct{ m *memStore }

func (w memWriter) Write(b []byte) (int, error) { return w.m.buf.Write(b) }
func (w memWriter) Abort() error                { return nil }
func (w memWriter) Close() error                { w.m.size = int64(w.m.buf.Len()); return nil }
