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

func cmdDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dlq inspect", "dlq inspect PIPELINE.yaml [flags]\n       ingestd dlq inspect --config PIPELINE.yaml [flags]",
		"Count a pipeline's dead letters by reason, field, schema id and replay count,\nand show a few decoded with their own writer schema. Reads only.", stderr)
	configFlag := fs.String("config", "", "the pipeline `file` (instead of the argument)")
	samples := fs.Int("samples", 3, "dead letters to show decoded")
	asJSON := fs.Bool("json", false, "print JSON")
	if len(args) == 0 || args[0] != "inspect" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fs.Usage()
			return exitOK
		}
		fs.Usage()
		return exitUsage
	}
	pos, code, done := parseArgs(fs, args[1:], 1)
	if done {
		return code
	}
	file, code := pipelineArg("dlq inspect", pos, *configFlag, stderr)
	if file == "" {
		return code
	}
	cfg, code := onePipeline(file, stderr)
	if cfg == nil {
		return code
	}
	log, _ := newLogger(stderr, "text", "warn")
	deps, err := ingest.OpenDeps(ctx, cfg, log, ingest.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		fmt.Fprintln(stderr, "ingestd dlq inspect:", err)
		return exitFailure
	}
	rep, err := ingest.InspectDLQ(ctx, cfg, deps, *samples)
	if err != nil {
		fmt.Fprintln(stderr, "ingestd dlq inspect:", err)
		return exitFailure
	}
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(rep)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: %d dead letters of pipeline %s", rep.Topic, rep.Total, cfg.Name)
	if rep.Others > 0 {
		fmt.Fprintf(stdout, " (%d of other pipelines)", rep.Others)
	}
	fmt.Fprintln(stdout)
	for _, sec := range []struct {
		title string
		m     map[string]int
	}{{"by reason and field", rep.ByField}, {"by schema id", rep.BySchemaID}, {"by replay count", rep.ByReplays}} {
		fmt.Fprintf(stdout, "  %s:\n", sec.title)
		keys := make([]string, 0, len(sec.m))
		for k := range sec.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(stdout, "    %7d  %s\n", sec.m[k], k)
		}
	}
	for _, s := range rep.Samples {
		b, _ := json.Marshal(s.Value)
		fmt.Fprintf(stdout, "\n  %s[%d]@%d (from %s) reason=%s field=%s schema_id=%s\n    value: %s\n", rep.Topic, s.Partition, s.Offset, s.Source, s.Reason, s.Field, s.SchemaID, b)
		if s.DecodeError != "" {
			fmt.Fprintf(stdout, "    (not decoded: %s)\n", s.DecodeError)
		}
	}
	return exitOK
}
