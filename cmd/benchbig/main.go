// Command benchbig is the big-table benchmark's helper, driven by
// scripts/bench-bigtable.sh (docs/performance.md, "Big tables"; the figures are in
// BENCHMARKS.md). It is not part of the daemon.
//
//	benchbig gen -dir DIR -files N [-partitions P] [-tail T] [-v2]
//	    writes a Delta table of N live files at DIR (local disk): every data file a hard
//	    link of one 1-row Parquet file (id = 7) with matching stats, in P Hive partitions
//	    (date=…; 0: unpartitioned); the adds in commits of at most 10,000, N/50 more files
//	    added and then removed (half of the tombstones past the 7-day retention, half
//	    within it), N/1000 orphan files, a checkpoint, then T commits of 10 files each.
//	    With -v2 the table has the v2Checkpoint feature (protocol 3/7, the feature in
//	    both lists), so its checkpoints are V2 (UUID-named, file actions in sidecars).
//	    Prints one JSON object (the layout and the time it took).
//	benchbig measure -dir DIR -what load|checkpoint|vacuum|refresh|commits|startup
//	    measures one operation on the table at DIR in this process and prints one JSON
//	    object: wall and CPU seconds, heap bytes per live file (load), the heap peak
//	    beside the loaded snapshot (vacuum), p50/p99 (refresh, commits). refresh, commits and startup write commits; checkpoint writes a
//	    checkpoint: run them on a copy of the log.
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
		return fmt.Errorf("usage: benchbig gen|measure ... (see the package doc)")
	}
	switch args[0] {
	case "gen":
		return genCmd(args[1:], stdout)
	case "measure":
		return measureCmd(args[1:], stdout)
	}
	return fmt.Errorf("unknown command %q: gen or measure", args[0])
}
