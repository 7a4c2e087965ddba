// Command benche2e is the end-to-end benchmark harness's helper, driven by
// scripts/bench-e2e.sh (docs/performance.md; the figures are in BENCHMARKS.md). It is not
// part of the daemon.
//
//	benche2e produce -topic T -partitions P -n N -size 200|1024 -compression none|lz4 [-rate R] [-format avro|protobuf|json|json_schema]
//	    registers the record schema (Confluent API; none for json), creates T and writes N
//	    records with unique ids, Confluent-framed Avro, Protobuf or JSON (JSON Schema), or
//	    plain JSON; prints one JSON object.
//	benche2e avsc
//	    prints the record's Avro schema (the columns of a format: json pipeline).
//	benche2e consume -topic T -out results.jsonl
//	    the consume-only baseline (franz-go, no decode) to the topic's end; appends a row.
//	benche2e run -label L -want N -table DIR [-metrics URL] -out results.jsonl -- CMD ARGS...
//	    runs a writer until N rows are committed, /proc usage, SIGTERM, log sums, delta-rs count.
//	benche2e report [-max-bytes-mib 128] [-max-age-s 5] results.jsonl
//	    prints the rows as one markdown table, then each performance goal met or not met.
//
// Units: seconds, records, MB = 10^6 bytes of framed record values, MiB for memory.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benche2e:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: benche2e produce|consume|run|report ... (see the package doc)")
	}
	switch args[0] {
	case "produce":
		return produceCmd(args[1:])
	case "avsc":
		_, err := fmt.Fprintln(stdout, recordSchema)
		return err
	case "consume", "run":
		out, rest := outFlag(args[1:])
		var r result
		var err error
		if args[0] == "consume" {
			r, err = consumeCmd(rest)
		} else {
			r, err = runCmd(rest)
		}
		if err != nil {
			return err
		}
		return appendResult(out, r, stdout)
	case "report":
		fs := flag.NewFlagSet("report", flag.ContinueOnError)
		var lim goalLimits
		fs.Float64Var(&lim.MaxBytesMiB, "max-bytes-mib", 128, "ingestd's batch.max_bytes in MiB, for the RSS goal")
		fs.Float64Var(&lim.MaxAgeS, "max-age-s", 5, "ingestd's batch.max_age in seconds, for the latency goal")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: benche2e report [-max-bytes-mib M] [-max-age-s S] results.jsonl")
		}
		rs, err := readResults(fs.Arg(0))
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, markdown(rs)+"\nPerformance goals:\n"+goals(rs, lim))
		return err
	}
	return fmt.Errorf("unknown command %q: want produce, consume, run or report", args[0])
}

// outFlag takes "-out FILE" off the front of args (it must come first).
func outFlag(args []string) (string, []string) {
	if len(args) >= 2 && (args[0] == "-out" || args[0] == "--out") {
		return args[1], args[2:]
	}
	return "", args
}

func appendResult(path string, r result, stdout io.Writer) error {
	b, _ := json.Marshal(r)
	b = append(b, '\n')
	if _, err := stdout.Write(b); err != nil {
		return err
	}
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open results: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

func readResults(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	defer f.Close()
	var rs []result
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("parse results %s: %w", path, err)
		}
		rs = append(rs, r)
	}
	return rs, sc.Err()
}
