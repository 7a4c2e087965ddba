package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingestd/ingestd/ingest"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
)

func cmdDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dlq inspect", "dlq inspect PIPELINE.yaml [flags]\n       ingestd dlq inspect --config PIPELINE.yaml [flags]",
		`Count a pipeline's dead letters by reason, field, schema id and replay count,
and show the first few of each reason (by partition and offset) with their key and
their value decoded with their own writer schema. Reads only. The topic is streamed:
peak RSS stays within --max-bytes plus 256 MiB whatever the topic's size.`, stderr)
	configFlag := fs.String("config", "", "the pipeline `file` (instead of the argument)")
	topicFlag := fs.String("topic", "", "with a pipeline of kafka.topic_pattern: the source `topic` whose table's dead letters to show")
	samples := fs.Int("samples", 3, "dead letters to show decoded, per reason")
	var reasons stringList
	fs.Var(&reasons, "reason", "show samples only of this `reason` (repeatable or comma list: "+strings.Join(dlq.Reasons, ", ")+"); the counts cover every reason")
	maxBytes := maxBytesFlag(fs)
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
	only, err := reasonList(reasons)
	if err != nil {
		fmt.Fprintln(stderr, "ingestd dlq inspect:", err)
		return exitUsage
	}
	cfg, code := onePipeline(file, *topicFlag, stderr)
	if cfg == nil {
		return code
	}
	log, _ := newLogger(stderr, "text", "warn")
	maxBytes.apply(cfg)
	setMemoryLimit([]*config.Config{cfg})
	setDLQReaderGC()
	deps, err := ingest.OpenDeps(ctx, cfg, log, ingest.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		fmt.Fprintln(stderr, "ingestd dlq inspect:", err)
		return exitFailure
	}
	rep, err := ingest.InspectDLQ(ctx, cfg, deps, *samples, only)
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
		fmt.Fprintf(stdout, "\n  %s[%d]@%d (from %s) reason=%s field=%s schema_id=%s\n    key: %s\n    value: %s\n", rep.Topic, s.Partition, s.Offset, s.Source, s.Reason, s.Field, s.SchemaID, s.Key, b)
		if s.DecodeError != "" {
			fmt.Fprintf(stdout, "    (not decoded: %s)\n", s.DecodeError)
		}
	}
	return exitOK
}

// reasonList splits repeated or comma-separated --reason values, without repeats, and
// checks each against dlq.Reasons. Errors name the value and the reasons.
func reasonList(vals []string) ([]string, error) {
	var out []string
	for _, v := range vals {
		for _, x := range strings.Split(v, ",") {
			if x = strings.TrimSpace(x); x == "" || slices.Contains(out, x) {
				continue
			}
			if !slices.Contains(dlq.Reasons, x) {
				return nil, fmt.Errorf("--reason %q is not a dead-letter reason; use one of %s", x, strings.Join(dlq.Reasons, ", "))
			}
			out = append(out, x)
		}
	}
	return out, nil
}

// byteSizeFlag is a --max-bytes flag: a size as batch.max_bytes is written (64MiB).
type byteSizeFlag struct{ v config.ByteSize }

func (f *byteSizeFlag) String() string {
	if f == nil || f.v == 0 {
		return ""
	}
	return fmt.Sprint(int64(f.v))
}
func (f *byteSizeFlag) Set(s string) error { return f.v.UnmarshalText([]byte(s)) }

// apply overrides cfg's batch.max_bytes when the flag was given.
func (f *byteSizeFlag) apply(cfg *config.Config) {
	if f.v > 0 {
		cfg.Batch.MaxBytes = f.v
	}
}

// maxBytesFlag defines --max-bytes on fs, for the commands that read a dead-letter topic.
func maxBytesFlag(fs *flag.FlagSet) *byteSizeFlag {
	f := &byteSizeFlag{}
	fs.Var(f, "max-bytes", "memory `size` for the records held (e.g. 32MiB; default: the pipeline's batch.max_bytes); the reader fetches an eighth of it at a time")
	return f
}

// setDLQReaderGC sets the collector's GOGC to 100 for the commands that stream a
// dead-letter topic (replay, dlq inspect) unless the GOGC environment variable is set:
// they run once and hold one batch and their identity sets, so they trade run's
// CPU-saving 200 for a tighter heap (TestDLQReadersStreamWithinMaxBytes measures it).
func setDLQReaderGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(100)
	}
}
