package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingestd/ingestd/ingest"
)

func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replay", `Replay a pipeline's dead-letter topic into its table: each record is decoded with its
own schema id and checked against the table's current schema and the pipeline's policy;
what fits is written exactly once, what still fails is dead-lettered again with
ingestd.replay.count + 1 (past --max-replays it goes to <dlq>.parked).`, stderr)
	config := fs.String("config", "", "the pipeline `file` (required)")
	dryRun := fs.Bool("dry-run", false, "decode and check everything, write nothing, print what would happen")
	maxReplays := fs.Int("max-replays", 3, "replays a record may fail before it is parked")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	logFormat := fs.String("log-format", "text", "log format: json or text")
	logLevel := fs.String("log-level", "warn", "log level: debug, info, warn or error")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if *maxReplays < 1 {
		fmt.Fprintln(stderr, "ingestd replay: --max-replays must be at least 1")
		return exitUsage
	}
	cfg, code := onePipeline(*config, stderr)
	if cfg == nil {
		return code
	}
	p, err := ingest.OpenDeps(ctx, cfg, log, ingest.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		fmt.Fprintln(stderr, "ingestd replay:", err)
		return exitFailure
	}
	sum, err := ingest.Replay(ctx, cfg, p, ingest.ReplayOptions{MaxReplays: *maxReplays, DryRun: *dryRun})
	if sum != nil {
		if *asJSON {
			_ = json.NewEncoder(stdout).Encode(sum)
		} else {
			printReplay(stdout, sum)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "ingestd replay:", err)
		return exitFailure
	}
	if len(sum.Halted) > 0 {
		return exitFailure // the halt policy stopped the replay: a person must act
	}
	return exitOK
}

func printReplay(w io.Writer, s *ingest.ReplaySummary) {
	verb := "replayed"
	if s.DryRun {
		verb = "dry run (nothing written)"
	}
	fmt.Fprintf(w, "%s %s: %d records after the replay position (%d already replayed, %d duplicates skipped)\n",
		s.DeadLetterTopic, verb, s.Read, s.AlreadyReplayed, s.Duplicates)
	fmt.Fprintf(w, "  landed in the table:  %d\n", s.Landed)
	reasons := make([]string, 0, len(s.DeadLettered))
	for r := range s.DeadLettered {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "  dead-lettered again:  %d  reason=%s\n", s.DeadLettered[r], r)
	}
	if s.Parked > 0 {
		fmt.Fprintf(w, "  parked:               %d  (in %s.parked)\n", s.Parked, s.DeadLetterTopic)
	}
	for _, h := range s.Halted {
		fmt.Fprintf(w, "  halted at %s[%d]@%d: %s\n", h.Topic, h.Partition, h.Offset, h.Message)
	}
}

// onePipeline loads a config that must hold exactly one pipeline.
func onePipeline(path string, stderr io.Writer) (*ingest.Config, int) {
	if path == "" {
		fmt.Fprintln(stderr, "--config is required")
		return nil, exitUsage
	}
	cfgs, err := ingest.LoadConfigs(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, exitUsage
	}
	if len(cfgs) != 1 {
		fmt.Fprintf(stderr, "--config %s holds %d pipelines; name one pipeline file\n", path, len(cfgs))
		return nil, exitUsage
	}
	return cfgs[0], exitOK
}
