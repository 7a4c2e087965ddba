// Package parquetenc encodes column buffers as one Parquet file and summarises each
// column for the table's statistics.
//
// Encode takes the leaf columns of package column, levelled, dense or in the levels
// form, and writes them straight into DataPage V1 pages, one row group per file, in one
// pass per column that also validates the values and finds the null count and the
// bounds (Summary) used both for the Parquet footer and, by the table writer, for
// Delta's add.stats. There is no per-value interface call, no intermediate column
// buffer and no second pass over the values: parquet-go's ColumnWriter copies every
// value into a column buffer, recomputes page bounds and compares through parquet.Value
// per value, which is most of its cost (BenchmarkParquetEncode; docs/performance.md).
// Summarize is the same pass without pages. The package imports nothing of ingestd but
// package column (docs/architecture.md, "Packages and import rules").
//
// A column in the dense form (one word per row of a non-repeated fixed-width leaf, or
// the byte form of a non-repeated BYTE_ARRAY leaf: values back to back with end offsets;
// every row set) takes the dense pass of dense.go and densebytes.go: validated once per
// column, its definition levels written as runs, its values straight from the words or
// bytes. Its pages are cut after the rows the levelled pass cuts them at, so that the
// file and the Summary are byte for byte those of the same values levelled
// (TestWriteColumnsDenseSameBytes, FuzzDenseSameBytes).
//
// A column in the levels form (its entries' repetition and definition levels as bytes,
// only its set values, as words or in the byte form; any leaf but INT96 and
// FIXED_LEN_BYTE_ARRAY) takes the levels pass of levelsform.go: each page's levels are
// copied to the level encoder as they are, the values written PLAIN straight from the
// words or bytes, and a run of null rows is counted and cut into pages at once. It is
// never dictionary-encoded; otherwise its file and Summary are byte for byte the levelled
// pass's PLAIN ones (TestLevelsSameBytesAsLevelled). The Delta checkpoint is written so.
// Writer.SetYield makes a Writer encode on the calling goroutine and yield after each
// page (a background writer sharing a core). Writer.WriteRowGroupCopied writes some
// column chunks of a row group as data pages copied from other files (OPTIMIZE): those
// keep their sources' page cuts, page versions, encodings and codec.
//
// # Layout
//
// Parquet format: "File format", "Data pages", "Encodings" (PLAIN, RLE/bit-packing
// hybrid, RLE_DICTIONARY), "Statistics".
//   - "PAR1", then per leaf column (schema.Columns() order) its dictionary page, if any,
//     and its data pages, then the thrift-compact FileMetaData (version 2, created_by
//     "ingestd version (build )"), its length (uint32 LE) and "PAR1";
//   - pages are cut at row boundaries once the page's values reach 1 MiB (as arrow-go
//     and parquet-mr); the body is [repetition levels][definition levels][values], each
//     level stream RLE/bit-packed with a uint32 LE length prefix, values PLAIN, or for a
//     dictionary-encoded column one bit-width byte and the RLE/bit-packed indexes; the
//     body is compressed as a whole by the codec;
//   - dictionary encoding (one PLAIN dictionary page before RLE_DICTIONARY data pages)
//     for a BYTE_ARRAY, INT32 or INT64 column whose first 1,024 non-null values hold at
//     most a quarter distinct values; the column is re-encoded PLAIN from its start when
//     the dictionary passes 65,536 entries or 1 MiB. Entries are in first-occurrence
//     order, so the bytes do not depend on the per-process hash keys of the dictionary
//     tables;
//   - column chunk statistics: null_count always; min_value/max_value (PLAIN bytes,
//     TYPE_DEFINED_ORDER) for INT32, INT64, FLOAT and DOUBLE (not when a NaN or ±Inf is
//     present; a zero min is written as -0.0 and a zero max as +0.0), BYTE_ARRAY
//     (unsigned byte order, up to MaxFooterBound bytes) and decimal FIXED_LEN_BYTE_ARRAY
//     (signed order); BOOLEAN columns get the null count only; page headers carry the
//     page's null count. No page index and no bloom filter are written.
//
// # Memory
//
// The file is built in memory: File.Bytes is one buffer holding all of it, kept until
// Release. The input columns are read, never copied or changed, and a Summary's Lo and
// Hi point into them. Each goroutine encoding columns holds about three pages of buffers
// (the values, the assembled body, the compressed body; a page is cut at 1 MiB of
// values), the level bytes of one page, a dictionary page of at most 1 MiB and, while a
// dictionary-encoded column is written, that column's data pages (they follow the
// dictionary page, complete only at the column's end). When helpers encode columns,
// their chunks are copied into the file at the end, which is then held twice for the
// copy. Peak memory of one Encode is thus about twice the file plus three pages and a
// dictionary per encoding goroutine, beside the caller's columns. Encoders and their
// buffers are pooled between files (sync.Pool); a file buffer past 64 MiB is dropped
// instead of pooled. Summarize writes no pages, though a dense fixed-width column's
// values pass through one buffer of their PLAIN size (8 bytes a row at most).
//
// # Concurrency
//
// Encode and Summarize are safe for concurrent use; the columns handed over must not
// change until they return (and, for the Summary, while its entries are read). Encode
// runs the column chunks of one file on the calling goroutine and up to GOMAXPROCS-1
// helper goroutines it starts and waits for before returning; the helpers are taken
// without waiting from one process-wide budget of GOMAXPROCS-1 (an atomic counter read
// against runtime.GOMAXPROCS at each call), so that the files of all pipelines together
// never run more than GOMAXPROCS encode goroutines. A File is not safe for concurrent
// use: one goroutine calls Bytes and Release.
package parquetenc
