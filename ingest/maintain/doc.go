// Package maintain schedules the background maintenance of the pipelines' tables.
//
// A Registry (NewRegistry) holds the table maintainers of one process: per table URI, one
// owner goroutine runs the jobs of the pipeline's maintenance block (config.Maintenance;
// docs/maintenance.md, "Background maintenance") — OPTIMIZE every
// maintenance.optimize.every, VACUUM every maintenance.vacuum.every — one at a time, on
// its own *deltawriter.Table (so a pipeline commit never waits on it), throttled by
// maintenance.optimize.max_rewrite_rate and started after a random part of the interval;
// each next run is due after the interval ±10%. Several daemons on one table need no
// lock: Delta's optimistic concurrency decides (an OPTIMIZE that loses its files drops
// them). The jobs themselves are deltawriter/maintenance's; each run is logged
// ("maintenance run", or "maintenance run failed" at warn) and counted in Metrics.
//
// A LogCleaner (NewLogCleaner) runs log cleanup after each background checkpoint of a
// pipeline's table, keeping every commit replay may still need to tell a real dead letter
// from an orphan: what is younger than the dead-letter topic's retention.ms +
// segment.ms + 1 hour, which it reads with a kadm DescribeConfigs
// (docs/architecture.md, "Dead letters and replay"; docs/maintenance.md, "Log cleanup").
//
// The package imports ingest/config, ingest/kafkaclient (for the admin client),
// deltawriter, deltawriter/maintenance, deltawriter/storage, franz-go's kadm and
// prometheus; never the pipeline trunk, ingest (docs/architecture.md, "Packages and
// import rules").
//
// # Concurrency
//
// A maintainer's goroutine (maintainer.run) is owned by its Registry and counts its
// users: the first Registry.Start for a table starts it, each Start returns a stop, and
// the last stop cancels its context and waits for it to return (the job in progress is
// cancelled; a cancelled job is neither counted nor logged as failed). Its context is
// the first Start's without the cancellation, so only the last stop ends it. The
// registry's mutex guards the map and the users counts and is never held while a job
// runs or while stop waits. The ingest pipeline calls Start once its Run has passed the
// start-up checks, and stop when Run returns.
//
// A LogCleaner has no goroutine of its own: AfterCheckpoint runs on the table's
// background checkpoint goroutine (deltawriter.WithAfterCheckpoint), which the table's
// Close waits for. Its mutex guards the cached replay hold.
//
// # Memory
//
// Each maintainer holds a deltawriter.Table of its own: its cached snapshot (the table's
// live files and txns) is a second copy beside the pipelines' own, one per table
// however many pipelines of the process write it. A LogCleaner holds the hold it read
// (one duration), trusted for an hour.
package maintain
