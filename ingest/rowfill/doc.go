// Package rowfill is the per-row stage of a flush after decoding.
//
// For each record decoded into a flush's column buffers, a Stage (New) computes or
// checks the columns the record's value does not carry, then routes the row to its data
// file:
//
//   - the Kafka columns (table.kafka_columns): _kafka_topic, _kafka_partition,
//     _kafka_offset, _kafka_timestamp (µs), _kafka_headers (a map: the last value of a
//     repeated key wins) and _kafka_key in table.key_format (bytes, string, or Avro
//     decoded into a struct with the key writer schemas of Options.Keys);
//   - the generated columns (delta.generationExpression, evaluated as Spark does by
//     deltawriter/expr): computed when the writer schema lacks them, checked with
//     null-safe equality when the record supplies them;
//   - the CHECK constraints and column invariants, checked once every column is filled;
//   - partition routing (Partitioner): the row moves into the file of its partition value
//     tuple, at most Options.MaxOpenPartitions of them a flush (ErrPartitionLimit).
//
// A record that fails a fill is a *decode.Error the flush routes by its Reason like a
// decode failure; nothing of its row is left in the buffers. GeneratedCreateColumns and
// CheckGeneratedConfig work on schemas, not rows: the generated columns of a table
// ingestd creates, and the check of table.generated_columns against a table (at start-up
// and on every snapshot a flush reads). ValueTable is the schema the value decoder is compiled against so that the Kafka
// columns' placeholders are the Stage's to fill. See docs/tables.md, "Kafka columns",
// "Generated columns", "Constraints" and "Partitioned tables".
//
// The package does no storage, registry or Kafka I/O: the flush resolves the key
// schemas before it builds the Stage, and writes the partition files after the last row.
//
// # Memory
//
// A Stage is built per flush and dropped with it. It holds, besides the fills'
// compiled expressions: per leaf column a row mark and a one-value scratch, a levelled
// spare column for each dense-capable column a fill sets (the decoder's NULL placeholder
// goes there, so that the real column stays dense), the key decoders compiled this flush
// by key schema id, one copy of each topic name's bytes shared by its rows, and scratch
// slices for the headers' entries reused from record to record. Levelled values the
// fills append alias the record's bytes (a bytes or string key, header values): they are
// valid while the flush keeps its batch's records, until its files are written; a dense
// column copies them into its own bytes (column.Column). Header keys are copied: one
// small allocation per distinct header key per record.
//
// Rows of a partitioned table move out of the flush's table-wide buffers into their
// PartitionFile's columns (dense words are copied as words), so those hold the flush's
// rows; they are allocated per flush and partition file and become garbage with the
// Stage. Beyond its files' column growth, the Partitioner allocates nothing per row while
// rows come in runs of one partition value (the last row's values are kept as copies and
// compared bit for bit); a row of another value serialises its partition values, and a
// new value opens a file.
//
// # Concurrency
//
// A Stage, its fills and its Partitioner are used by one goroutine at a time, the flush's
// owner (Begin, Decoded and Fill in record order); they are not safe for concurrent use.
// Options.Keys' maps are read during Fill and never written: the owner must not change
// them while a Stage built on them is in use. Options.Origin and Options.Log are called
// on the goroutine that calls Fill. Once the last row is placed, a
// PartitionFile is only read, so the flush may write the files concurrently, one
// goroutine per file. The package starts no goroutines.
package rowfill
