package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingestd/ingestd/ingest"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
)

func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replay", "replay PIPELINE.yaml [flags]\n       ingestd replay --config PIPELINE.yaml [flags]", `Replay a pipeline's dead-letter topic into its table: each record is decoded with its
own schema id and checked against the table's current schema and the pipeline's policy;
what fits is written exactly once, what still fails is dead-lettered again with
ingestd.replay.count + 1 (past --max-replays it goes to <dlq>.parked, which must exist
only when a record is actually parked).

--reason and --from select records; every record read that is not selected is carried
forward: re-produced unchanged (same headers, replay count and record timestamp) to the
same DLQ partition, so a later replay sees it again. --until stops the replay in each
partition before the first record at or past it (exclusive): that record and the ones
after it are left in place, nothing is carried forward for --until. OFFSET is a DLQ
offset, applied per partition (carried records get new offsets at the end of the topic);
TIME is RFC 3339 and compares with the source record's timestamp, which dead letters
keep in ingestd.error.source_timestamp (and carried records with it).

The dead-letter topic is streamed, read twice (an index of identities, then the
replay): records are held one batch at a time (--max-bytes, default batch.max_bytes), plus
up to about 200 bytes per dead letter for its identity.`, stderr)
	configFlag := fs.String("config", "", "the pipeline `file` (instead of the argument)")
	topicFlag := fs.String("topic", "", "with a pipeline of kafka.topic_pattern: the source `topic` whose table gets its dead letters back")
	dryRun := fs.Bool("dry-run", false, "decode and check everything, write nothing, print what would happen")
	maxReplays := fs.Int("max-replays", 3, "replays a record may fail before it is parked")
	var reasons stringList
	fs.Var(&reasons, "reason", "replay only dead letters with this `reason` (repeatable or comma list: "+strings.Join(dlq.Reasons, ", ")+")")
	from := fs.String("from", "", "replay only dead letters at DLQ offset >= `OFFSET|TIME` (per partition) or whose source record's timestamp is >= TIME (RFC 3339)")
	until := fs.String("until", "", "stop each DLQ partition before the first record at offset >= `OFFSET|TIME` or whose source timestamp is >= TIME (exclusive)")
	maxBytes := maxBytesFlag(fs)
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	logFormat := fs.String("log-format", "text", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info (progress lines), warn or error")
	pos, code, done := parseArgs(fs, args, 1)
	if done {
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
	opts := ingest.ReplayOptions{MaxReplays: *maxReplays, DryRun: *dryRun}
	for _, r := range reasons {
		for _, x := range strings.Split(r, ",") {
			if x = strings.TrimSpace(x); x != "" && !slices.Contains(opts.Reasons, x) {
				opts.Reasons = append(opts.Reasons, x)
			}
		}
	}
	for _, b := range []struct {
		flag, value string
		out         **ingest.ReplayBound
	}{{"--from", *from, &opts.From}, {"--until", *until, &opts.Until}} {
		if b.value == "" {
			continue
		}
		v, err := ingest.ParseReplayBound(b.value)
		if err != nil {
			fmt.Fprintf(stderr, "ingestd replay: %s: %v\n", b.flag, err)
			return exitUsage
		}
		*b.out = &v
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintln(stderr, "ingestd replay:", strings.ReplaceAll(err.Error(), "\n", "\ningestd replay: "))
		return exitUsage
	}
	file, code := pipelineArg("replay", pos, *configFlag, stderr)
	if file == "" {
		return code
	}
	cfg, code := onePipeline(file, *topicFlag, stderr)
	if cfg == nil {
		return code
	}
	maxBytes.apply(cfg)
	var memory *ingest.MemoryLimit
	if limit, gogc, set := setMemoryLimit([]*config.Config{cfg}); set {
		log.Debug("soft memory limit set from batch.max_bytes, raised by a key index (GOMEMLIMIT overrides)", "memory_limit_bytes", limit, "gogc", gogc)
		memory = ingest.NewMemoryLimit(limit)
	}
	setDLQReaderGC()
	p, err := ingest.OpenDeps(ctx, cfg, log, ingest.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		fmt.Fprintln(stderr, "ingestd replay:", err)
		return exitFailure
	}
	p.Memory = memory
	sum, err := ingest.Replay(ctx, cfg, p, opts)
	if cerr := ingest.CloseDeps(ctx, p); cerr != nil {
		log.Warn("background checkpoint not finished; the next one covers it", "err", cerr)
	}
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
	for _, r := range slices.Sorted(maps.Keys(s.DeadLettered)) {
		fmt.Fprintf(w, "  dead-lettered again:  %d  reason=%s\n", s.DeadLettered[r], r)
	}
	if s.Parked > 0 {
		fmt.Fprintf(w, "  parked:               %d  (in %s.parked)\n", s.Parked, s.DeadLetterTopic)
	}
	if s.ParkedTopicMissing {
		fmt.Fprintf(w, "  note: %s.parked does not exist; create it before replaying (kafka-topics.sh --create --topic %s.parked)\n", s.DeadLetterTopic, s.DeadLetterTopic)
	}
	if s.Carried > 0 {
		fmt.Fprintf(w, "  carried forward:      %d  (not selected; re-produced unchanged to %s)\n", s.Carried, s.DeadLetterTopic)
	}
	if s.Orphans > 0 {
		fmt.Fprintf(w, "  orphans skipped:      %d  (their flush never committed; a later flush handled the records)\n", s.Orphans)
	}
	switch {
	case s.Pending > 0:
		fmt.Fprintf(w, "  left for later:       %d  (at or past --until, or from a pending dead letter: %d whose commit is not in the table yet)\n", s.Remaining, s.Pending)
	case s.Remaining > 0:
		fmt.Fprintf(w, "  left for later:       %d  (at or past --until)\n", s.Remaining)
	}
	if len(s.ByReason) > 0 {
		fmt.Fprintf(w, "  by dead-letter reason:  %-20s %8s %8s %8s %8s\n", "reason", "land", "re-dlq", "park", "carry")
		for _, r := range slices.Sorted(maps.Keys(s.ByReason)) {
			o := s.ByReason[r]
			fmt.Fprintf(w, "                          %-20s %8d %8d %8d %8d\n", r, o.Landed, o.DeadLettered, o.Parked, o.Carried)
		}
	}
	for _, h := range s.Halted {
		fmt.Fprintf(w, "  halted at %s[%d]@%d: %s\n", h.Topic, h.Partition, h.Offset, h.Message)
	}
}

// onePipeline loads a config that must hold exactly one pipeline. For a pipeline with
// kafka.topic_pattern, topic names the table (config.Config.ForTopic): its dead letters
// carry that table's pipeline name, so a replay or an inspection sees only them.
func onePipeline(path, topic string, stderr io.Writer) (*config.Config, int) {
	return pipelineFor(path, topic, false, stderr)
}

// pipelineFor is onePipeline where, when source is set, a --topic given with a pipeline
// file without kafka.topic_pattern names one of its kafka.topics (ingestd table
// reset-offsets) instead of being refused.
func pipelineFor(path, topic string, source bool, stderr io.Writer) (*config.Config, int) {
	if path == "" {
		fmt.Fprintln(stderr, "--config is required")
		return nil, exitUsage
	}
	cfgs, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, exitUsage
	}
	if len(cfgs) != 1 {
		fmt.Fprintf(stderr, "--config %s holds %d pipelines; name one pipeline file\n", path, len(cfgs))
		return nil, exitUsage
	}
	c := cfgs[0]
	for _, w := range c.Warnings {
		fmt.Fprintln(stderr, "warning: "+w.Error())
	}
	switch {
	case c.Routed() && topic == "":
		fmt.Fprintf(stderr, "pipeline %s (%s) writes one table per topic matching kafka.topic_pattern %q: add --topic TOPIC to name one (ingestd table: give the table's URI instead)\n", c.Name, c.File, c.Kafka.TopicPattern)
		return nil, exitUsage
	case c.Routed():
		tc, err := c.ForTopic(topic)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return nil, exitUsage
		}
		return tc, exitOK
	case topic != "" && !source:
		fmt.Fprintf(stderr, "--topic %s: pipeline %s (%s) has no kafka.topic_pattern; remove --topic\n", topic, c.Name, c.File)
		return nil, exitUsage
	case topic != "" && !slices.Contains(c.Kafka.Topics, topic):
		fmt.Fprintf(stderr, "--topic %s: pipeline %s (%s) reads kafka.topics %s, not %s\n", topic, c.Name, c.File, strings.Join(c.Kafka.Topics, ", "), topic)
		return nil, exitUsage
	}
	return c, exitOK
}
