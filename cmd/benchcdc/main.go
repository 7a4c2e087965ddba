// Command benchcdc is the change-data-capture benchmark's helper, driven by
// scripts/bench-cdc.sh (BENCHMARKS.md, "Change data capture"; docs/performance.md). It is
// not part of the daemon and imports nothing of the module: it measures PostgreSQL →
// Debezium (Kafka Connect) → Kafka → ingestd → Delta from outside.
//
//	benchcdc setup -pg URL -db NAME -rows N
//	    creates database NAME and its table src (~200-byte rows, REPLICA IDENTITY DEFAULT)
//	    holding ids 1..N, loaded by one INSERT … SELECT FROM generate_series; prints JSON.
//	benchcdc topics -brokers B -create T1,T2 [-log-append-time=true]
//	    creates the topics (one partition each, the broker's append time as each record's
//	    timestamp) if missing.
//	benchcdc run -pg URL -db NAME -connect URL -connector NAME -config FILE -topic T
//	    -table DIR -connect-pid PID -ingestd-pid PID -rows N -out results.jsonl [-phases …]
//	    registers the connector (the snapshot phase), then runs each streaming phase: a
//	    workload of changes at -rate (warmup, for -warmup; steady, for -duration) or flat
//	    out (flat, for -flat-duration); each phase is
//	    measured until Debezium has written every change to Kafka and ingestd has committed
//	    every record to the table; appends one JSON line per phase.
//	benchcdc checksum -pg URL -db NAME
//	    prints the source table's row count and per-bucket MD5 of its canonical rows (the
//	    form scripts/bench/cdc_report.py computes from the Delta table).
//	benchcdc cleanup -pg URL -db NAME -brokers B -topics T1,T2 [-groups G1,G2] [-registry URL -subjects S1,S2]
//	    drops the replication slots and publications of NAME, the database, the topics, the
//	    consumer groups and the registry subjects (best effort: each failure is printed, the rest still runs).
//
// Units: seconds, changes (a source row inserted, updated or deleted), Kafka records (a
// delete is two: its event and its tombstone), ms for lags.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchcdc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: benchcdc setup|topics|run|checksum|cleanup ... (see the package doc)")
	}
	switch args[0] {
	case "setup":
		return setupCmd(args[1:])
	case "run":
		return runCmd(args[1:])
	case "topics":
		return topicsCmd(args[1:])
	case "checksum":
		return checksumCmd(args[1:])
	case "cleanup":
		return cleanupCmd(args[1:])
	}
	return fmt.Errorf("unknown command %q: want setup, topics, run, checksum or cleanup", args[0])
}
