package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ingestd/ingestd/ingest"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/kafkacols"
	"github.com/ingestd/ingestd/ingest/maintain"
)

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", "validate --config DIR|FILE", "Load and check pipeline files, and that object-store credentials resolve, without connecting to Kafka, the registry or the stores.", stderr)
	configFlag := fs.String("config", "", "pipeline `file` or directory of *.yaml files (required)")
	acls := fs.Bool("acls", false, "print the kafka-acls.sh lines of every Kafka ACL each command needs (run, replay, dlq inspect, log cleanup) and the registry requests")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *configFlag == "" {
		fmt.Fprintln(stderr, "ingestd validate: --config is required")
		return exitUsage
	}
	cfgs, err := config.Load(*configFlag)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if *acls {
		printACLs(stdout, cfgs)
		return exitOK
	}
	// Object-store credentials must resolve (nothing is sent to the store; no secret printed).
	creds, err := config.CheckStorageCredentials(context.Background(), cfgs)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	for _, c := range cfgs {
		extra := ""
		if s := creds[c.Name]; s != "" {
			extra = "  credentials=" + s
		}
		topics := fmt.Sprint(c.Kafka.Topics)
		if c.Routed() {
			topics = "/" + c.Kafka.TopicPattern + "/ (one table each)"
		}
		fmt.Fprintf(stdout, "ok  %s  %s  format=%s  topics=%s  table=%s  policy=%s%s\n", c.File, c.Name, c.Format, topics, c.Table.URI, c.Schema.Policy, extra)
		for _, w := range c.Warnings {
			fmt.Fprintln(stdout, "warning: "+w.Error())
		}
		if n := schemaChecksLeft(c); n != "" {
			fmt.Fprintln(stdout, "note: "+n)
		}
	}
	return exitOK
}

// schemaChecksLeft says which settings of c validate cannot check because they name
// columns of the writer schema, which it does not read (no registry, no Kafka): the
// partition columns that are neither generated nor Kafka columns, and the generated
// columns' expressions. "" when there are none.
func schemaChecksLeft(c *config.Config) string {
	if !c.Table.Create {
		return ""
	}
	var cols []string
	kafka := kafkacols.Columns(c.Table.KafkaColumns)
	for _, p := range c.Table.PartitionBy {
		_, generated := c.Table.GeneratedColumns[p]
		if !generated && !slices.Contains(kafka, p) {
			cols = append(cols, p)
		}
	}
	var what []string
	if len(cols) > 0 {
		what = append(what, fmt.Sprintf("table.partition_by %v", cols))
	}
	if len(c.Table.GeneratedColumns) > 0 {
		what = append(what, "the table.generated_columns expressions")
	}
	if len(what) == 0 {
		return ""
	}
	return strings.Join(what, " and ") + " name columns of the writer schema: they are checked when ingestd creates the table (from the first record that fits), which fails the pipeline if a column is missing; validate reads no schema"
}

// openPipeline is ingest.Open; a variable so a test can stand in for a slow open.
var openPipeline = ingest.Open

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "run --config DIR|FILE [flags]", "Run every pipeline of a directory (or one file) until SIGTERM/SIGINT.", stderr)
	configFlag := fs.String("config", "", "pipeline `file` or directory of *.yaml files (required)")
	listen := fs.String("listen", "127.0.0.1:9102", "`address` for /metrics, /healthz and /readyz (empty to disable)")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: trace (debug and the Kafka client's own debug logs), debug, info, warn or error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (pprof) of the whole run to `file`, closed at exit")
	memProfile := fs.String("memprofile", "", "write a heap profile (pprof; alloc_space/alloc_objects since start) to `file` at exit")
	traceFile := fs.String("trace", "", "write an execution trace (runtime/trace; `go tool trace`) of the whole run to `file`, closed at exit")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *configFlag == "" {
		fmt.Fprintln(stderr, "ingestd run: --config is required")
		return exitUsage
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	stopProfiles, err := startProfiles(*cpuProfile, *memProfile, *traceFile)
	if err != nil {
		fmt.Fprintln(stderr, "ingestd run:", err)
		return exitUsage
	}
	defer func() {
		if err := stopProfiles(); err != nil {
			log.Error("profile not written", "err", err)
		}
	}()
	cfgs, err := config.Load(*configFlag)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	var memory *ingest.MemoryLimit // raised by keyed pipelines' key indexes
	if limit, gogc, set := setMemoryLimit(cfgs); set {
		log.Info("soft memory limit set from the pipelines' batch.max_bytes, raised by key indexes (GOMEMLIMIT overrides)", "memory_limit_bytes", limit, "gogc", gogc)
		memory = ingest.NewMemoryLimit(limit)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := ingest.NewMetrics(reg)
	// The table maintainers of this process: pipelines writing one table share its
	// background maintenance (the first to start starts it, the last to stop stops it).
	maintainers := maintain.NewRegistry()
	var runners []runner
	var openFailed []ingest.Status // pipelines whose table could not be opened: reported, not run
	shared := ingest.Shared{Maintainers: maintainers, Memory: memory}
	// Which pipeline writes each topic into each table: a second pipeline that would
	// write a topic into a table another one already writes it into fails instead
	// (two kafka.topic_pattern files that both route one topic to one table).
	claims := ingest.NewTableClaims()
	failedToOpen := func(c *config.Config, err error) {
		log.Error("pipeline failed to open; the others run", "pipeline", c.Name, "file", c.File, "err", err)
		openFailed = append(openFailed, ingest.Status{Pipeline: c.Name, State: ingest.StateFailed, Error: err.Error(), Since: time.Now()})
	}
	for _, c := range cfgs {
		for _, w := range c.Warnings {
			log.Warn("config: "+w.Msg, "pipeline", c.Name, "file", w.File, "line", w.Line, "fix", w.Fix)
		}
		if c.Routed() {
			list, closeList, err := ingest.KafkaTopicLister(c, log, m, nil)
			if err != nil {
				failedToOpen(c, err)
				continue
			}
			defer closeList()
			open := func(ctx context.Context, tc *config.Config) (*ingest.Pipeline, error) {
				return openPipeline(ctx, tc, log, m, shared)
			}
			runners = append(runners, ingest.NewRouter(c, log, m, open, list, claims))
			continue
		}
		release, err := claims.Claim(c)
		if err != nil {
			failedToOpen(c, err)
			continue
		}
		p, err := openPipeline(ctx, c, log, m, shared)
		if err != nil {
			release()
			if ctx.Err() != nil {
				// SIGTERM or SIGINT arrived while the pipeline was opening (its table, its
				// clients): a shutdown, not a failure; nothing was consumed or written.
				log.Info("stopped while the pipeline was opening", "pipeline", c.Name, "err", err)
				continue
			}
			failedToOpen(c, err)
			continue
		}
		runners = append(runners, single{p})
	}
	statuses := func() []ingest.Status {
		out := append([]ingest.Status(nil), openFailed...)
		for _, r := range runners {
			out = append(out, r.Statuses()...)
		}
		return out
	}
	if *listen != "" {
		srv, addr, err := serveHTTP(*listen, reg, statuses)
		if err != nil {
			fmt.Fprintf(stderr, "ingestd run: listen on %s: %v\n", *listen, err)
			return exitFailure
		}
		log.Info("serving /metrics, /healthz, /readyz", "addr", addr)
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	ran := runPipelines(ctx, log, runners)
	return finish(log, len(cfgs), len(openFailed), ran)
}

// finish logs the one last line of ingestd run, for all pipelines of the run (those that
// failed to open included), and returns the exit code: exitFailure when any failed, so a
// supervisor sees it (the healthy pipelines ran until the signal).
func finish(log *slog.Logger, pipelines, openFailed, runFailed int) int {
	if failed := openFailed + runFailed; failed > 0 {
		log.Error("pipelines stopped; some failed", "pipelines", pipelines, "failed", failed, "failed_to_open", openFailed)
		return exitFailure
	}
	log.Info("all pipelines stopped", "pipelines", pipelines, "failed", 0)
	return exitOK
}

// runner is what ingest run runs: one pipeline (single), or a pipeline with
// kafka.topic_pattern and its table per topic (ingest.Router).
type runner interface {
	Name() string
	// Run runs until ctx ends; an error: the pipeline (or some table of it) failed.
	Run(ctx context.Context) error
	// Close is called once Run has returned (background checkpoints).
	Close(ctx context.Context) error
	// Statuses are /readyz's entries: one per table.
	Statuses() []ingest.Status
}

// single is the runner of a pipeline of one table.
type single struct{ *ingest.Pipeline }

func (s single) Statuses() []ingest.Status { return []ingest.Status{s.Status()} }

// runPipelines runs every runner in its own goroutine until ctx ends and returns the
// number that failed. One failed or halted pipeline never stops the others.
func runPipelines(ctx context.Context, log *slog.Logger, rs []runner) (failed int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, r := range rs {
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
			if err := r.Close(ctx); err != nil {
				log.Warn("background checkpoint not finished; the next one covers it", "pipeline", r.Name(), "err", err)
			}
		})
	}
	wg.Wait()
	return failed
}

// serveHTTP starts the operations endpoints; it returns the server (owned by the caller,
// who shuts it down) and the address it listens on.
func serveHTTP(addr string, reg *prometheus.Registry, statuses func() []ingest.Status) (*http.Server, string, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready := true
		all := statuses()
		for _, s := range all {
			if s.State != ingest.StateRunning {
				ready = false
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ready": ready, "pipelines": all})
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("http server stopped", "err", err)
		}
	}()
	return srv, ln.Addr().String(), nil
}
