// Command benchbig is the big-table benchmark's helper, driven by
// scripts/bench-bigtable.sh (docs/performance.md, "Big tables"; the figures are in
// BENCHMARKS.md). It is not part of the daemon.
//
// Every command takes the table as -dir DIR (local disk) or -uri URI (s3://bucket/prefix,
// gs://…, az://…, file:///path), opened as the daemon opens a table.uri
// (storage.OpenWith: the endpoint, region and credentials from the environment, e.g.
// AWS_ENDPOINT_URL_S3).
//
//	benchbig gen -dir DIR|-uri URI -files N [-partitions P] [-tail T] [-data=false] [-workers W] [-v2]
//	    writes a Delta table of N live files (the location must hold nothing; an object
//	    store's bucket is created if missing): every data file one 1-row Parquet file
//	    (id = 7) with matching stats — on local disk a hard link of a stub, on an object
//	    store an upload, W in flight — in P Hive partitions (date=…; 0: unpartitioned);
//	    the adds in commits of at most 10,000, N/50 more files added and then removed
//	    (half of the tombstones past the 7-day retention, half within it), N/1000 orphan
//	    files, a checkpoint, then T commits of 10 files each. -data=false writes the log
//	    only (no data file nor orphan), all that load, checkpoint, refresh, commits and
//	    startup read. Local files are dated 30 days back; an object store dates each
//	    upload itself. With -v2 the table has the v2Checkpoint feature (protocol 3/7,
//	    the feature in both lists), so its checkpoints are V2 (UUID-named, file actions
//	    in sidecars). Prints one JSON object (the layout, the time and CPU it took).
//	benchbig measure -dir DIR|-uri URI -what load|checkpoint|vacuum|vacuumreal|refresh|commits|startup
//	    measures one operation on the table in this process and prints one JSON
//	    object: wall and CPU seconds, heap bytes per live file (load), the heap peak
//	    beside the loaded snapshot (vacuum), p50/p99 (refresh, commits). vacuum is a dry
//	    run, with the table's retention or -retain. vacuumreal runs real VACUUMs (-retain,
//	    forced), -rounds times one whose deletes are batched (storage.DeleteAll: S3
//	    DeleteObjects) and one sending the same paths one by one (Delete), putting the
//	    deleted objects back before each but the first; one JSON object per VACUUM with
//	    the objects deleted per second of deletes. refresh, commits and startup write
//	    commits; checkpoint writes a checkpoint: run them on a copy of the log.
//	benchbig copylog -from URI -to URI
//	    copies a table's _delta_log to an empty location (for the operations that write).
//	benchbig rm -uri URI
//	    deletes every object under an object-store table URI (what gen and copylog made).
//
// Units: seconds, bytes; one core is the goal's unit (run it under taskset -c 0 with
// GOMAXPROCS=1).
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchbig:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: benchbig gen|measure|copylog|rm ... (see the package doc)")
	}
	switch args[0] {
	case "gen":
		return genCmd(args[1:], stdout)
	case "measure":
		return measureCmd(args[1:], stdout)
	case "copylog":
		return copyLogCmd(args[1:], stdout)
	case "rm":
		return rmCmd(args[1:], stdout)
	}
	return fmt.Errorf("unknown command %q: gen, measure, copylog or rm", args[0])
}
