package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/ingest"
	"github.com/ingestd/ingestd/ingest/config"
)

// TestRunSignalWhileOpening: a SIGTERM (the context's cancellation) that arrives while a
// pipeline is still opening is a clean shutdown, exit 0, as after it opened; an open that
// fails on its own is still exit 1. (TestChaosPartitioned once saw exit 1 from a daemon
// stopped while it opened its table.)
func TestRunSignalWhileOpening(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "p.yaml")
	body := "name: p\nkafka:\n  brokers: [k:9092]\n  topics: [orders]\nschema_registry: {url: \"http://r:8081\"}\ntable: {uri: " + filepath.Join(dir, "t") + "}\nschema: {policy: evolve}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	old := openPipeline
	t.Cleanup(func() { openPipeline = old })
	for _, tc := range []struct {
		name   string
		cancel bool
		want   int
	}{{"signal while opening", true, exitOK}, {"open fails", false, exitFailure}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			openPipeline = func(ctx context.Context, c *config.Config, log *slog.Logger, m *ingest.Metrics, _ ingest.Shared) (*ingest.Pipeline, error) {
				if tc.cancel {
					cancel() // the signal arrives mid-open
					<-ctx.Done()
					return nil, fmt.Errorf("open table %s: %w", c.Table.URI, ctx.Err())
				}
				return nil, fmt.Errorf("open table %s: permission denied", c.Table.URI)
			}
			var out, errb bytes.Buffer
			code := cmdRun(ctx, []string{"--config", cfg, "--listen", ""}, &out, &errb)
			if code != tc.want {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.want, out.String(), errb.String())
			}
			if tc.cancel && !strings.Contains(out.String()+errb.String(), "stopped while the pipeline was opening") {
				t.Errorf("no shutdown line in the log:\n%s%s", out.String(), errb.String())
			}
		})
	}
}

// TestRunFinalLineAfterOpenFailure: a pipeline that fails to open (a missing bucket, a
// permission) is counted in the run's one last line, which says that pipelines failed; the
// log never says "all pipelines stopped ... failed=0" before it.
func TestRunFinalLineAfterOpenFailure(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "p.yaml")
	body := "name: p\nkafka:\n  brokers: [k:9092]\n  topics: [orders]\nschema_registry: {url: \"http://r:8081\"}\ntable: {uri: " + filepath.Join(dir, "t") + "}\nschema: {policy: evolve}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	old := openPipeline
	t.Cleanup(func() { openPipeline = old })
	openPipeline = func(ctx context.Context, c *config.Config, log *slog.Logger, m *ingest.Metrics, _ ingest.Shared) (*ingest.Pipeline, error) {
		return nil, fmt.Errorf("open table %s: permission denied", c.Table.URI)
	}
	var out, errb bytes.Buffer
	if code := cmdRun(context.Background(), []string{"--config", cfg, "--listen", "", "--log-format", "text"}, &out, &errb); code != exitFailure {
		t.Fatalf("exit %d, want %d", code, exitFailure)
	}
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, `level=ERROR msg="pipelines stopped; some failed" pipelines=1 failed=1 failed_to_open=1`) {
		t.Errorf("last line %q", last)
	}
	if strings.Contains(errb.String(), "all pipelines stopped") {
		t.Errorf("the log says all pipelines stopped:\n%s", errb.String())
	}
}
