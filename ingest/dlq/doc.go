// Package dlq holds ingestd's dead letters: their record format, the identities and
// acknowledgements replay relies on, and reading and writing a dead-letter topic.
//
// It covers:
//
//   - the record format: Kafka Connect's __connect.errors.* headers, so that existing
//     dead-letter tooling reads them, then ingestd's own ingestd.* headers
//     (docs/dead-letters-and-replay.md, "Headers"), with the one list of reason codes
//     (Reasons; "Reason codes" there);
//   - the identities replay needs: the original record (Original, OriginalKey), the dedupe
//     key (DedupeKey) and exact copies (Superseded);
//   - acknowledgements: the Delta commit meant to acknowledge a dead letter, named in its
//     headers (Ack), and whether that commit landed (AckIndex; docs/architecture.md, "Dead
//     letters and replay");
//   - reading a dead-letter topic to its end (ReadToEnd), the report of `ingestd dlq
//     inspect` (Inspect), and one bounded producer (Producer).
//
// It imports franz-go, deltawriter and the reason codes of ingest/decode, nothing of
// package ingest, so it is tested with kfake and a temporary table alone.
//
// # Exactly-once
//
// A dead letter is produced, and acknowledged by the broker, before the Delta commit that
// moves its source partition's txn past it; its headers name that commit
// (HeaderCommitID, HeaderTxnAppID, HeaderTxnVersion). A flush that produced dead letters
// and then failed to commit leaves them behind as orphans: AckIndex tells them from the
// real ones by reading the log, so replay lands each record once (docs/architecture.md,
// "Exactly-once").
//
// # Concurrency
//
// The package starts no goroutines. A Producer may be used concurrently (its kgo.Client
// is safe for concurrent use); an AckIndex may not: one per replay. ReadToEnd consumes
// through the client it is given, which must consume nothing else while it reads.
package dlq
