package parquetenc_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	arrowpq "github.com/apache/arrow-go/v18/parquet"
	arrowcompress "github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
)

// BenchmarkParquetEncode (docs/performance.md): a 10-column batch of 100,000 rows
// encoded to one Parquet file in memory, rows/s per core and the file's size in bytes,
// three writers in the same run:
//
//   - "ingestd": deltawriter.WriteDataFile end to end on column values as the Avro
//     decoder hands them over (validation, Delta statistics, Parquet encode, the codecs
//     of codec.go), into an in-memory store;
//   - "ingestd-encode": Encode alone (validation, footer statistics, Parquet
//     encode and codec, column chunks on up to GOMAXPROCS workers): the part that runs
//     in parallel, for the rows/s wall at -cpu 1 and 2;
//   - "ingestd-dense", "ingestd-encode-dense": the same two over the same values with
//     the six fixed-width columns (id, price, active, ts, qty, amount) and the three
//     strings without nulls (name, status, country; the byte form) in the dense form of
//     package column, as the decoder hands them over on the typed column path
//     (deltawriter.WriteColumns); the files are byte for byte the levelled ones
//     ("ingestd-encode/uncompressed" and its dense row: the encoder's own work, without
//     a codec);
//   - "ingestd-encode-words": Encode with only the six fixed-width columns
//     dense and the strings levelled (the typed column path before the byte form): the
//     strings' own share of the dense rows' gain;
//   - "parquet-go-default": parquet-go's GenericWriter[struct] with its default codecs
//     (parquet.Snappy, parquet.Zstd): a column buffer and parquet.Value compares per
//     value (package doc);
//   - "arrow-go": arrow-go's RecordBuilder + pqarrow.FileWriter with its default writer
//     properties (dictionary on, DataPage V1, statistics on), SNAPPY, and ZSTD at level 1
//     (klauspost SpeedFastest, the level ingestd uses).

const benchRows = 100_000

type benchRow struct {
	ID      int64   `parquet:"id"`
	Name    string  `parquet:"name"`
	Price   float64 `parquet:"price"`
	Active  bool    `parquet:"active"`
	TS      int64   `parquet:"ts"`
	Note    *string `parquet:"note,optional"`
	Qty     int32   `parquet:"qty"`
	Amount  int64   `parquet:"amount"`
	Status  string  `parquet:"status"`
	Country string  `parquet:"country"`
}

var statuses = []string{"NEW", "PAID", "SHIPPED", "DELIVERED", "RETURNED"}
var countries = []string{"DE", "FR", "US", "JP", "BR", "IN", "NL"}

func benchData() ([]benchRow, []map[string]any) {
	rows := make([]benchRow, benchRows)
	maps := make([]map[string]any, benchRows)
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := range rows {
		r := benchRow{ID: int64(i), Name: fmt.Sprintf("customer-%06d", i%50_000), Price: float64(i%10_000) / 100,
			Active: i%3 == 0, TS: base + int64(i)*1_000, Qty: int32(i % 50), Amount: int64(i%1_000_000) * 7,
			Status: statuses[i%len(statuses)], Country: countries[(i/7)%len(countries)]}
		m := map[string]any{"id": r.ID, "name": r.Name, "price": r.Price, "active": r.Active, "ts": r.TS,
			"qty": r.Qty, "amount": r.Amount, "status": r.Status, "country": r.Country}
		if i%4 != 0 {
			n := fmt.Sprintf("note %d", i%97)
			r.Note = &n
			m["note"] = n
		}
		rows[i], maps[i] = r, m
	}
	return rows, maps
}

func BenchmarkParquetEncode(b *testing.B) {
	structRows, mapRows := benchData()
	schema, err := deltalog.ParseSchema(deltatest.BenchSchema)
	if err != nil {
		b.Fatal(err)
	}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		b.Fatal(err)
	}
	cols, err := deltawriter.RowsToColumns(pq, mapRows)
	if err != nil {
		b.Fatal(err)
	}
	dense := deltatest.ColumnsOf(pq, cols)
	ndense := 0
	for i := range dense {
		if dense[i].IsDense() {
			ndense++
		}
	}
	if ndense != 9 {
		b.Fatalf("%d dense columns, want 9", ndense)
	}
	words := slices.Clone(dense) // the byte-form columns levelled (ToLevelled keeps Bytes, read only)
	for i := range words {
		if words[i].Leaf().Kind == parquet.ByteArray {
			words[i].ToLevelled()
		}
	}
	ingestd := func(codec string) func(*bytes.Buffer) error {
		st := &deltatest.MemStore{}
		opts := deltawriter.FileOptions{Schema: schema, ColumnMapping: deltalog.ColumnMappingNone,
			Configuration: map[string]string{deltalog.PropCompressionCodec: codec}}
		return func(buf *bytes.Buffer) error {
			st.Buf = buf
			_, err := deltawriter.WriteDataFile(context.Background(), st, pq, cols, benchRows, opts)
			return err
		}
	}
	ingestdDense := func(codec string) func(*bytes.Buffer) error {
		st := &deltatest.MemStore{}
		opts := deltawriter.FileOptions{Schema: schema, ColumnMapping: deltalog.ColumnMappingNone,
			Configuration: map[string]string{deltalog.PropCompressionCodec: codec}}
		return func(buf *bytes.Buffer) error {
			st.Buf = buf
			_, err := deltawriter.WriteColumns(context.Background(), st, pq, dense, benchRows, opts)
			return err
		}
	}
	encodeOnly := func(codec compress.Codec, cols []column.Column) func(*bytes.Buffer) error {
		return func(buf *bytes.Buffer) error {
			enc, _, err := parquetenc.Encode(pq, cols, benchRows, codec)
			if err != nil {
				return err
			}
			buf.Write(enc.Bytes()) // file-bytes; a copy of about 1 % of the encode
			enc.Release()
			return nil
		}
	}
	defaultPath := func(codec compress.Codec) func(*bytes.Buffer) error {
		return func(buf *bytes.Buffer) error {
			pw := parquet.NewGenericWriter[benchRow](buf, parquet.Compression(codec))
			if _, err := pw.Write(structRows); err != nil {
				return err
			}
			return pw.Close()
		}
	}
	arrowPath := func(props ...arrowpq.WriterProperty) func(*bytes.Buffer) error {
		return func(buf *bytes.Buffer) error { return writeArrowBench(buf, structRows, props...) }
	}
	for _, c := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"ingestd/snappy", ingestd("snappy")},
		{"ingestd/zstd", ingestd("zstd")},
		{"ingestd-dense/snappy", ingestdDense("snappy")},
		{"ingestd-dense/zstd", ingestdDense("zstd")},
		{"ingestd-encode/snappy", encodeOnly(parquetenc.Snappy(), deltatest.Levelled(cols))},
		{"ingestd-encode/zstd", encodeOnly(parquetenc.Zstd(), deltatest.Levelled(cols))},
		{"ingestd-encode/uncompressed", encodeOnly(&parquet.Uncompressed, deltatest.Levelled(cols))},
		{"ingestd-encode-dense/snappy", encodeOnly(parquetenc.Snappy(), dense)},
		{"ingestd-encode-dense/zstd", encodeOnly(parquetenc.Zstd(), dense)},
		{"ingestd-encode-dense/uncompressed", encodeOnly(&parquet.Uncompressed, dense)},
		{"ingestd-encode-words/snappy", encodeOnly(parquetenc.Snappy(), words)},
		{"ingestd-encode-words/uncompressed", encodeOnly(&parquet.Uncompressed, words)},
		{"parquet-go-default/snappy", defaultPath(&parquet.Snappy)},
		{"parquet-go-default/zstd", defaultPath(&parquet.Zstd)},
		{"arrow-go/snappy", arrowPath(arrowpq.WithCompression(arrowcompress.Codecs.Snappy))},
		{"arrow-go/zstd", arrowPath(arrowpq.WithCompression(arrowcompress.Codecs.Zstd), arrowpq.WithCompressionLevel(1))},
	} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			cpu0 := cpuTime()
			for b.Loop() {
				buf.Reset()
				if err := c.write(&buf); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(benchRows)*float64(b.N)/cpu.Seconds(), "rows/cpu-s")
			b.ReportMetric(float64(buf.Len()), "file-bytes")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// writeArrowBench builds an arrow record of rows (the same 10 columns and Delta types:
// timestamp[us, UTC], decimal(12,2)) and writes it as one Parquet file to w.
func writeArrowBench(w io.Writer, rows []benchRow, props ...arrowpq.WriterProperty) error {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "active", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "status", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "country", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer rb.Release()
	rb.Reserve(len(rows))
	id := rb.Field(0).(*array.Int64Builder)
	name := rb.Field(1).(*array.StringBuilder)
	price := rb.Field(2).(*array.Float64Builder)
	active := rb.Field(3).(*array.BooleanBuilder)
	ts := rb.Field(4).(*array.TimestampBuilder)
	note := rb.Field(5).(*array.StringBuilder)
	qty := rb.Field(6).(*array.Int32Builder)
	amount := rb.Field(7).(*array.Decimal128Builder)
	status := rb.Field(8).(*array.StringBuilder)
	country := rb.Field(9).(*array.StringBuilder)
	for i := range rows {
		r := &rows[i]
		id.Append(r.ID)
		name.Append(r.Name)
		price.Append(r.Price)
		active.Append(r.Active)
		ts.Append(arrow.Timestamp(r.TS))
		if r.Note != nil {
			note.Append(*r.Note)
		} else {
			note.AppendNull()
		}
		qty.Append(r.Qty)
		amount.Append(decimal128.FromI64(r.Amount))
		status.Append(r.Status)
		country.Append(r.Country)
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	fw, err := pqarrow.NewFileWriter(sc, w, arrowpq.NewWriterProperties(props...), pqarrow.DefaultWriterProps())
	if err != nil {
		return err
	}
	if err := fw.Write(rec); err != nil {
		return err
	}
	return fw.Close()
}

// cpuTime is the process's user+system CPU time (getrusage RUSAGE_SELF). Under
// GOMAXPROCS=1 rows per CPU-second is rows/s/core without the shared machine's steal.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
