// Package keyindex is the key index of keyed (upsert) tables: for every key of a Delta
// table, the data file and row position of its live row and the row's sequence, so that
// a batch of changes finds the rows it replaces or deletes without scanning the table.
//
// # Building and keeping it current
//
// Build reads only the key columns (and the sequence column) of every live data file:
// the Parquet footer and those columns' chunks, with ranged reads
// (storage.ObjectReader); a key column that is a partition column comes from
// add.partitionValues. Rows a file's deletion vector deletes are skipped (PROTOCOL.md,
// "Deletion Vectors"). After one of our own commits Apply records its new files' keys
// (given by the writer, not read back) and the rows its deletion vectors delete; after
// another writer's commits Refresh compares the snapshot's live files with the index's:
// removed files (OPTIMIZE, copy-on-write) leave, new files are read, a file whose
// deletion vector changed is read again. Nothing is persisted outside the table: the index
// is rebuilt at start-up.
//
// A key held by several live rows (another writer's duplicates) keeps them all, so an
// upsert deletes every one (Hit.Rows, Stats.Duplicates). A delete can be remembered for a
// horizon (PutDeleted, Expire), so that a late change with an older sequence does not
// bring the key back.
//
// # Key encoding
//
// A key is the concatenation of AppendValue's encoding of each key column's value, in
// Spec.Key order. Integer types encode as int64 whatever their width (a column widened
// from integer to long keeps every key), decimals as the 128-bit unscaled value at the
// table's current scale (a file written before a decimal widening is rescaled exactly),
// dates as int32 days, timestamps as int64 µs (INT96 and millisecond or nanosecond files
// converted), strings and binaries length-prefixed. Columns are matched as Delta matches
// names (deltalog.NameKey) and read by their physical names (or field ids) under column
// mapping. A NULL key value is ErrNullKey; such rows in the table are counted
// (Stats.NullKeys), not indexed.
//
// # Memory: 32 bytes per slot, 35.6 to 45.7 bytes per key
//
// The index does not keep keys. It keeps a 128-bit fingerprint of each: two 64-bit
// hash/maphash hashes of the encoded key under two independent random seeds. A slot is 32
// bytes (fingerprint 16, file id 4, row 4, sequence 8) in an open-addressing table
// (Robin Hood linear probing, 256 shards that grow and shrink on their own), whose shards
// are held between 0.7 and 0.9 keys per slot: 35.6 to 45.7 bytes per key (40 right after
// Build, which sizes the table from the files' numRecords), plus a 64 KiB floor, a path
// per data file, a bitmap of deleted rows per file with a deletion vector (Roaring: at
// most 2 bytes per deleted row), and for a key with several live rows 48 bytes per extra
// row. Measured (BENCHMARKS.md, "Key index"): the table holds 40.0 bytes per key after
// Build at 1 M and at 10 M keys; the heap grows by 44.6 and 41.3 bytes per key
// (runtime.MemStats, after a GC: the table plus per-file state and reader buffers).
//
// Two distinct keys share a fingerprint with probability 2^-128 per pair; among n keys
// some pair does with probability at most n²/2^129: 1.5·10^-25 for 10 M keys, 1.5·10^-21
// for 1 G. The seeds are drawn per Index, so no input can be crafted to collide. A
// collision would make an upsert of one key delete the other key's row.
//
// # Alternative measured: min/max pruning
//
// Pruning files by the key column's min/max statistics and scanning the candidates' key
// columns finds rows without memory, but only helps when keys are clustered by file
// (e.g. increasing ids written in order); with keys spread over files every file is a
// candidate and each batch scans the whole key column: 6.3 K keys per CPU-second for
// batches of 10 000 uniform keys in a 10 M-key table, against 1.97 M with the index
// (BENCHMARKS.md, "Key index").
//
// # Concurrency
//
// An Index is safe for concurrent use: Lookup takes a read lock, the other methods a
// write lock. Build, Refresh and Apply read files on goroutines they own and wait for
// before returning (WithConcurrency of them at once).
package keyindex
