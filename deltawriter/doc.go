// Package deltawriter reads and appends to Delta Lake tables, and deletes rows of their
// files for keyed tables.
//
// It covers the log replayed into a Snapshot, Parquet data files with their statistics,
// commits with put-if-absent and optimistic concurrency, checkpoints, schema changes,
// and row deletes with deletion vectors or file rewrites.
//
// It never imports Kafka or Avro packages; source progress arrives as plain (appId,
// version) txn pairs. The Delta model is deltawriter/deltalog, the stores are
// deltawriter/storage, the Parquet encoder is deltawriter/parquetenc, which this package
// reaches through WriteColumns (docs/architecture.md, "Packages and import rules" and
// "Delta writing").
//
// # Commit protocol
//
// A commit is one file, _delta_log/<version:020d>.json, written with put-if-absent
// (storage.Store.PutIfAbsent): the atomic, mutually exclusive creation PROTOCOL.md
// ("Creation of New Log Entries") asks of the store, so of two writers of one version one
// wins and the other gets storage.ErrExist. Data files are written first
// (WriteColumns), under unique names, and become part of the table only through the
// commit whose add actions name them; a file no commit names is never read. The actions
// are written in the order commitInfo, protocol, metaData, txn, remove, add. After a
// commit the Table's cached snapshot advances by that commit, and every
// delta.checkpointInterval versions (10 by default) a checkpoint and _last_checkpoint
// follow (PROTOCOL.md, "Checkpoints"), written before Commit returns or, with
// WithBackgroundCheckpoints, on the table's checkpoint goroutine. Readers never depend on
// a checkpoint: a full load lists the log and replays what follows the newest readable
// one.
//
// # Deleting rows
//
// Rows of existing data files are deleted in one of two ways (DeleteMode), the actions
// going into the Commit that carries the batch's new files and txns (PROTOCOL.md,
// "Deletion Vectors", "Add File and Remove File"):
//   - DeleteRows (merge-on-read): per file the union of its current deletion vector
//     (ReadDeletionVector: inline, relative or absolute) and the rows, serialised as a
//     RoaringBitmapArray (magic 1681511377 and the portable 64-bit Roaring format); a
//     vector of up to 2 KiB is stored inline (storageType "i", Z85), which readers load
//     without a file read, larger ones of one call in one deletion_vector_<uuid>.bin at
//     the table root, written with put-if-absent (format version 1, per vector its
//     big-endian size, the bitmap and its CRC-32; storageType "u", Z85 UUID, offset);
//     per file a remove of the current add and an add of the same path with the new
//     descriptor and stats marked tightBounds false; a file whose every row is deleted is
//     only removed.
//   - Snapshot.RewriteWithoutRows (copy-on-write): the file read as OPTIMIZE reads it and
//     written again without the rows nor those its vector deleted.
//
// Snapshot.CheckDeletes says whether a table allows either (refusing delta.appendOnly,
// the change data feed, and an explicit delta.enableDeletionVectors=false) and whether
// the deletionVectors feature must be turned on first, which SchemaChange.Enable does
// (the protocol upgraded as UpgradeProtocol does for every feature, and
// delta.enableDeletionVectors=true). Commit refuses an add carrying a deletion vector on
// a table without the feature and the property. The snapshot keys a file by path and
// deletion vector (deltalog.FileKey), so the remove and add of one path reconcile to the
// new vector; checkpoints carry the descriptors.
//
// # Concurrency
//
// Writers do not lock a table; concurrency is optimistic. A commit is prepared against a
// snapshot (Commit.ReadVersion) and put at the next version. Commit first checks the
// commits between ReadVersion and the latest version, then, each time put-if-absent finds
// the version taken, reads the winner and decides as Delta does for a blind append, which
// read no data file:
//   - a txn for one of the commit's appIds: ErrTxnAlreadyCommitted when its version is
//     at or above ours, ErrConcurrentTxn when below;
//   - a metaData or protocol action: ErrMetadataChanged (the schema is checked again on a
//     fresh snapshot);
//   - the removal of a file the commit removes, under any deletion vector (or a new
//     deletion vector for it): *ConcurrentDeleteError, wrapping ErrConcurrentDelete;
//   - anything else (appends; OPTIMIZE's removes and adds with dataChange false): the
//     commit moves on to the next free version after a jittered back-off (at most
//     500 ms), reading the versions taken meanwhile instead of putting at each; after 20
//     versions (WithMaxCommitAttempts) it gives up with ErrCommitAttempts.
//
// A Table is safe for concurrent use: one mutex per Table serialises its commits and
// snapshot refreshes within the process, and the Snapshots it hands out are immutable
// (the next commit advances a copy). Background checkpoints run on at most one goroutine
// per Table, owned by it: started when a checkpoint falls due, ended when none is
// pending, stopped by Close (which waits for it, or cancels it when ctx ends first). No
// other goroutine of the package outlives a call; parquetenc's encode helpers end before
// WriteColumns returns. The checkpoint goroutine encodes on its own (no helpers) and
// yields every 128 rows built and after every page encoded; at each yield it waits while
// a Snapshot or Commit call of its Table is in flight (or until its context ends).
//
// # Exactly-once
//
// A commit records source progress in txn actions (PROTOCOL.md, "Transaction
// Identifiers"): at most one per appId, committed atomically with the adds of the rows
// it covers, so the snapshot's Txns say exactly which source offsets the table holds
// (docs/architecture.md, "Exactly-once"). A winner whose txn covers ours makes Commit
// return ErrTxnAlreadyCommitted: the batch is a duplicate, for the caller to drop, and
// nothing is written twice. A put that fails without saying whether it landed (a timeout, a 5xx) is retried
// with the identical bytes, up to 3 times; when the version then turns out taken, the
// winner's commitInfo.txnId tells whether it is our own earlier attempt (success) or
// another writer's. When that cannot be settled Commit returns ErrCommitOutcomeUnknown:
// the commit may still become visible, so its data files must stay and the txn versions
// must be read again before the batch is retried. Txns older than
// delta.setTransactionRetentionDuration are dropped when a snapshot is built, as Spark
// and Kernel do (Snapshot.TxnRetention): a source idle that long falls back to the
// offsets it keeps itself.
//
// # Memory
//
// A Snapshot holds every live add action (Files), the remove actions not superseded by
// an add (tombstones), the txns and the domain metadata; a Table caches the latest one and advances it in place until
// it has been handed out, then copies it once (maps.Clone of each map) on the next
// commit. Checkpoints are read through ranged reads (storage.RangeGetter) in blocks of
// storage.ReadBlockSize, at most storage.ReadBlocks held, never whole; they are written
// a row group of 65,536 rows at a time from columns in column's levels form built
// straight from the snapshot's typed actions (53 level bytes and about 17 values per
// live file) into buffers each Table reuses; a V2 checkpoint writes its file actions the
// same way into sidecars, and only its few other actions in one JSON file. With background checkpoints at most two
// snapshots wait for the checkpoint goroutine: the one being written and the newest
// pending one. A data file is encoded whole in memory before it is stored (parquetenc,
// "Memory"), and its statistics read the columns handed over without copying them.
package deltawriter
