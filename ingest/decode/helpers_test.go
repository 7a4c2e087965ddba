package decode

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// mustWriter parses a writer schema and fails the test on a parse or Delta error.
func mustWriter(t testing.TB, id int, text string) *WriterSchema {
	t.Helper()
	ws, err := ParseWriterSchema(id, text)
	if err != nil {
		t.Fatalf("parse writer schema: %v", err)
	}
	if ws.DeltaErr != nil {
		t.Fatalf("writer schema to delta: %v", ws.DeltaErr)
	}
	return ws
}

func mustParquet(t testing.TB, table *deltalog.StructType, mode deltalog.ColumnMappingMode) *parquet.Schema {
	t.Helper()
	pq, err := deltawriter.ParquetSchema(table, mode)
	if err != nil {
		t.Fatalf("parquet schema: %v", err)
	}
	return pq
}

func mustCompile(t testing.TB, ws *WriterSchema, table *deltalog.StructType, mode deltalog.ColumnMappingMode) (*Decoder, *parquet.Schema) {
	t.Helper()
	pq := mustParquet(t, table, mode)
	d, err := Compile(ws, table, mode, pq)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return d, pq
}

func mustMarshal(t testing.TB, s avro.Schema, v any) []byte {
	t.Helper()
	b, err := avro.Marshal(s, v)
	if err != nil {
		t.Fatalf("avro marshal: %v", err)
	}
	return b
}

// writeParquet writes decoded columns as one Parquet file through the column writers.
func writeParquet(t testing.TB, pq *parquet.Schema, cols [][]parquet.Value) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[any](&buf, pq)
	for i, c := range cols {
		if _, err := w.ColumnWriters()[i].WriteRowValues(c); err != nil {
			t.Fatalf("write column %d %v: %v", i, pq.Columns()[i], err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close parquet writer: %v", err)
	}
	return buf.Bytes()
}

// readColumns reads a Parquet file back row by row and renders every value as
// "rep/def:value", grouped by dotted leaf column path.
func readColumns(t testing.TB, file []byte) (map[string][]string, int) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatalf("open parquet: %v", err)
	}
	names := f.Schema().Columns()
	r := parquet.NewReader(f)
	out := make(map[string][]string)
	rows := make([]parquet.Row, 1)
	n := 0
	for {
		k, err := r.ReadRows(rows)
		for i := 0; i < k; i++ {
			n++
			for _, v := range rows[i] {
				name := strings.Join(names[v.Column()], ".")
				out[name] = append(out[name], render(v))
			}
		}
		if err != nil {
			break
		}
	}
	return out, n
}

// renderCols renders in-memory column values the same way.
func renderCols(pq *parquet.Schema, cols [][]parquet.Value) map[string][]string {
	out := make(map[string][]string)
	for i, c := range cols {
		name := strings.Join(pq.Columns()[i], ".")
		for _, v := range c {
			out[name] = append(out[name], render(v))
		}
	}
	return out
}

func render(v parquet.Value) string {
	lv := fmt.Sprintf("%d/%d:", v.RepetitionLevel(), v.DefinitionLevel())
	if v.IsNull() {
		return lv + "null"
	}
	switch v.Kind() {
	case parquet.Boolean:
		return lv + fmt.Sprint(v.Boolean())
	case parquet.Int32:
		return lv + fmt.Sprint(v.Int32())
	case parquet.Int64:
		return lv + fmt.Sprint(v.Int64())
	case parquet.Float:
		return lv + fmt.Sprint(v.Float())
	case parquet.Double:
		return lv + fmt.Sprint(v.Double())
	case parquet.ByteArray:
		return lv + fmt.Sprintf("%q", v.ByteArray())
	case parquet.FixedLenByteArray:
		return lv + "0x" + hex.EncodeToString(v.ByteArray())
	}
	return lv + "?" + v.String()
}

// twos renders the width-byte big-endian two's complement of a decimal string's unscaled value.
func twos(t testing.TB, unscaled string, width int) string {
	t.Helper()
	x, ok := new(big.Int).SetString(unscaled, 10)
	if !ok {
		t.Fatalf("bad integer %q", unscaled)
	}
	if x.Sign() < 0 {
		x.Add(x, new(big.Int).Lsh(big.NewInt(1), uint(8*width)))
	}
	b := make([]byte, width)
	x.FillBytes(b)
	return "0x" + hex.EncodeToString(b)
}

func rat(t testing.TB, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("bad rational %q", s)
	}
	return r
}

func colLens(cols [][]parquet.Value) []int {
	out := make([]int, len(cols))
	for i, c := range cols {
		out[i] = len(c)
	}
	return out
}

func mustDate(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse("2006-01-02", s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

// renderAll renders every value of cols by column index (renderCols without the names).
func renderAll(cols [][]parquet.Value) [][]string {
	out := make([][]string, len(cols))
	for i, c := range cols {
		out[i] = []string{}
		for _, v := range c {
			out[i] = append(out[i], render(v))
		}
	}
	return out
}

// decodeCase is d.Decode(payload, cols) that also decodes the same payload through an
// aliasing arena (Arena.AliasPayloads) onto a copy of cols, and with DecodeColumns into
// columns holding cols' values (columnsAgree), and fails t unless all give the same
// values and the same error: every case test runs all three ways.
func decodeCase(t testing.TB, d *Decoder, payload []byte, cols [][]parquet.Value) ([][]parquet.Value, error) {
	t.Helper()
	acols := make([][]parquet.Value, len(cols))
	before := make([][]parquet.Value, len(cols))
	for i, c := range cols {
		acols[i] = append([]parquet.Value(nil), c...)
		before[i] = append([]parquet.Value(nil), c...)
	}
	var a Arena
	a.AliasPayloads()
	acols, aerr := d.DecodeWith(&a, payload, acols)
	cols, err := d.Decode(payload, cols)
	if (err == nil) != (aerr == nil) || ReasonOf(err) != ReasonOf(aerr) || FieldOf(err) != FieldOf(aerr) {
		t.Fatalf("Decode: %v; DecodeWith under AliasPayloads: %v", err, aerr)
	}
	if g, w := renderAll(acols), renderAll(cols); !reflect.DeepEqual(g, w) {
		t.Fatalf("DecodeWith under AliasPayloads values %v, Decode values %v", g, w)
	}
	if cerr := columnsAgree(d, &a, payload, before, cols, err); cerr != nil {
		t.Fatalf("payload %x: %v", payload, cerr)
	}
	return cols, err
}

// transcodingFuzz is a RecordDecoder compiled for a writer schema's own Delta schema and
// the column buffers it writes: the shared half of the non-Avro format fuzz targets.
type transcodingFuzz struct {
	d    RecordDecoder
	cols []column.Column
}

func newTranscodingFuzz(t *testing.T, ws *WriterSchema) *transcodingFuzz {
	t.Helper()
	pq := mustParquet(t, ws.Delta, "none")
	d, err := CompileRecord(ws, ws.Delta, "none", pq)
	if err != nil {
		t.Fatal(err)
	}
	c := &transcodingFuzz{d: d, cols: make([]column.Column, d.Columns())}
	for i, l := range column.Leaves(pq) {
		c.cols[i].Reset(l)
	}
	return c
}

// checkExpansion fails t when ws transcodes body beyond the stated bound
// (maxExpandFixed + maxExpandFactor × the body).
func checkExpansion(t *testing.T, ws *WriterSchema, body []byte) {
	t.Helper()
	if a, err := ws.Transcode(body); err == nil && len(a) > maxExpandFixed+maxExpandFactor*len(body) {
		t.Fatalf("transcoded %d bytes from %d", len(a), len(body))
	}
}

// decode decodes body and fails t unless the error is nil or an *Error, no column grew
// on an error (the rollback) and every column grew on success (exactly one row).
func (c *transcodingFuzz) decode(t *testing.T, a *Arena, body []byte) {
	t.Helper()
	before := make([]int, len(c.cols))
	for i := range c.cols {
		before[i] = c.cols[i].Len()
	}
	err := c.d.DecodeColumns(a, body, c.cols)
	var de *Error
	if err != nil && !errors.As(err, &de) {
		t.Fatalf("error is not an *Error: %v", err)
	}
	for i := range c.cols {
		grew := c.cols[i].Len() - before[i]
		if err != nil && grew != 0 {
			t.Fatalf("column %d grew by %d after %v", i, grew, err)
		}
		if err == nil && grew < 1 {
			t.Fatalf("column %d grew by %d for a row", i, grew)
		}
	}
}
