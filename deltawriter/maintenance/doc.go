// Package maintenance keeps Delta tables healthy: OPTIMIZE (bin-packing compaction of
// small files, optimize.go), VACUUM (deletion of files no retained version references,
// vacuum.go) and log cleanup (logcleanup.go). Each job is one function on a
// *deltawriter.Table and commits through Delta's optimistic concurrency only: no lock,
// no coordinator; a job that loses a conflict drops or retries what the winner changed.
// It never imports ingest: pipelines call it from their background runner.
package maintenance
