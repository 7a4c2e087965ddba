// Package ingest runs ingestd's pipelines, each moving a Kafka consumer group's records
// into one Delta table.
//
// A Pipeline (Open, NewPipeline, Run) consumes its topics, decodes each Avro record by
// its writer schema, asks the schema guard what to do with it, writes what fits to the
// Delta table with the source offsets in txn actions of the same commit, and sends what
// does not fit to the dead-letter topic (docs/architecture.md, "Data flow"). Run goes
// through three phases: start (refuse a table it cannot write, build the Kafka clients,
// check the topics and the group's ACLs), the poll loop (poll, batch, flush, until its
// context ends) and the drain (flush and commit what is buffered, in a bounded time of
// its own). Replay lands the dead letters that fit the table now and InspectDLQ counts
// them (docs/dead-letters-and-replay.md). The Kafka clients and their security are built
// by ingest/kafkaclient, the per-row fills by ingest/rowfill, the tables' background
// maintenance by ingest/maintain, the Delta commits by deltawriter.
//
// # Concurrency
//
// The goroutines of a running pipeline, each with its owner and the way it stops:
//
//   - The poll loop runs on Run's goroutine (session.loop): it polls, adds records to the
//     batcher and hands every due batch to the flush worker; it returns when Run's context
//     ends (Run then drains what is buffered), when the client is closed, or when a flush
//     or an advisory commit fails for good; Run closes the clients last.
//   - The flush worker (flushWorker.run) is started by the poll loop, one per session, and
//     flushes one batch at a time while the loop goes on polling; the loop stops it (the
//     flush in flight settles first) before the drain, the abandon or the clients' close.
//     Its flushes run on a context that outlives a SIGTERM by a grace (flushContext), so
//     that a dead-letter produce in flight is not cut off and produced again by the drain.
//   - A flush's upload helpers (forEachConcurrent: one data file each, at most GOMAXPROCS
//     at a time) are started by the flush and all return before it does; the first
//     failure cancels the others.
//   - The rebalance callbacks (adjustOffsets, onRevoked, onLost) run on franz-go's
//     goroutines, or in the consumer's Close; the poll loop blocks rebalances from a poll
//     to its AllowRebalance (kgo.BlockRebalanceOnPoll).
//   - The offset committer (offsetCommits) sends the advisory group offset commits
//     asynchronously; franz-go runs their callbacks, and a refused commit is retried on a
//     timer (offsetCommits.schedule) until an accepted commit covers it, the session ends,
//     or the last retry fails the poll loop.
//   - The maintainer of a table (ingest/maintain) runs its OPTIMIZE and VACUUM jobs. It
//     belongs to the process's maintain.Registry (Deps.Maintainers): the first pipeline of
//     the table to start starts it, the last to stop (when its Run returns) cancels it and
//     waits for it.
//   - The table's background checkpoints, each followed by log cleanup
//     (maintain.LogCleaner), run on deltawriter's goroutine; Pipeline.Close waits for the
//     one in progress.
//
// A pipeline's state has two sides. The flush side (the flusher and the consumer mode:
// commit id, dead-letter set, progress made without a table, decoders and column
// buffers) is owned by whoever holds the flush token, a value kept in a one-slot channel
// (acquireFlush, releaseFlush): the poll loop acquires it to take a batch and sends it
// to the worker with the batch; the worker releases it once the batch is settled
// (committed, held back for a retry, halted, or failed for good); the rebalance
// callbacks and the drain acquire and release it on their own goroutine, so they wait
// for the flush in flight. So at most one batch is in flight besides the one being
// filled, and the next batch is taken only after the previous one's failed records went
// back into the batcher ahead of their partitions' later records. The batch side (the
// batcher, the halted partitions, the poll's wake-up) is guarded by batchMu, held
// briefly. Lock order: the flush token, then batchMu, then the consumer lag's mutex; the
// status, the offset committer's and the registry's mutexes are leaves. The poll loop
// never holds batchMu while it waits for the token.
//
// # Memory
//
// batch.max_bytes bounds the memory of the batches, not only their raw bytes
// (docs/architecture.md, "Memory"). Each record is charged its key and value, the
// decoded bytes a flush makes of them (decodedPerByte, measured by every flush that
// wrote rows) and the memory of its kgo.Record and flush item (budgetSize). The
// batcher's bound is half of max_bytes (batchBytes), because the batch in flight and the
// one being filled share it. It counts every record it holds: fresh ones and those held
// back after a transient failure, which keep the charge they were added with until a
// flush measures a ratio more than rechargeDrift away from the one they were charged by
// (then every record held is charged by it: batcher.Recharge). A batch
// takes records only up to that bound, so the batch in flight and the records in the
// batcher each stay within half of max_bytes plus the record that reached it. After a
// failure the failed batch and the one filled behind it both wait in the batcher (within
// max_bytes plus two records); while their partitions are on hold they count half
// toward the batcher's bound (they wait beside both the batch in flight and the one
// being filled: batcher.Limits), so the other partitions' batches are smaller by half of
// them, and the retry takes the held records half of max_bytes at a time: in flight and
// buffered together stay within max_bytes plus three records
// (TestRetriedBatchWithinMaxBytes). Beyond it are only the records of the paused
// partitions that the poll in progress had fetched before the pause (at most
// maxPollRecords). `ingestd run` sets a soft memory limit from the pipelines'
// max_bytes and a fixed headroom.
//
// # Exactly-once
//
// Each source partition's progress is a Delta txn action (appId
// <app_id>-<topic>-<partition>, version: the last offset handled) committed with the
// data files it covers, in one commit (PROTOCOL.md, "Transaction Identifiers";
// docs/architecture.md, "Exactly-once"). A newly assigned partition resumes after its
// txn version (adjustOffsets), so a record is in the table once whatever crashed before.
// A commit that loses the race to a writer that moved one of its txns (a zombie, or the
// partition's new owner) or changed the schema is rebuilt on the new snapshot, which
// drops what the table already has. The Kafka group offsets are advisory, committed
// after each Delta commit for lag tools; only while the table does not exist are they
// the record of progress (dead-letter-only flushes), and the commit that creates the
// table moves the txns from there. Dead letters are produced and acknowledged before
// the commit that handles their records, and name it (ingestd.commit.id, the txn appId
// and version), so that replay tells a real dead letter from an orphan of a flush that
// never committed (docs/dead-letters-and-replay.md, "Replay"). Revoked partitions are
// flushed once before they move; lost ones are dropped, and their new owner reads them
// again from the txn version.
package ingest
