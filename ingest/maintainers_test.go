package ingest

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/maintain"
)

// TestPipelineMaintainers: pipelines given the process's registry (Deps.Maintainers)
// start their table's maintenance in it, so two pipelines of one table share one
// maintainer (the second logs that it joined; the maintainer, started by the first, stops
// only with the last); a pipeline given none gets a registry of its own and a maintainer
// of its own for the same table. The registry's own rules: maintain's
// TestMaintainersSharedByTable.
func TestPipelineMaintainers(t *testing.T) {
	ctx := context.Background()
	m := NewMetrics(prometheus.NewRegistry())
	reg := maintain.NewRegistry()
	root := t.TempDir()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	uri := "file://" + filepath.Join(root, "orders")
	pipeline := func(name string, reg *maintain.Registry) *Pipeline {
		t.Helper()
		st, err := storage.NewLocal(filepath.Join(root, "orders"))
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := deltawriter.Open(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &config.Config{Name: name, AppID: name, Table: config.Table{URI: uri},
			Maintenance: config.Maintenance{Optimize: &config.Optimize{Every: time.Hour, MinFiles: 2}}}
		return NewPipeline(cfg, Deps{Logger: log, Metrics: m, Table: tbl, Maintainers: reg})
	}
	// lines returns the pipeline names of the log lines with message msg, in order.
	lines := func(msg string) []string {
		t.Helper()
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var rec struct {
				Msg, Pipeline, Table string
			}
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			if rec.Msg != msg {
				continue
			}
			if rec.Table != uri {
				t.Errorf("%q of pipeline %s names table %q, want %q", msg, rec.Pipeline, rec.Table, uri)
			}
			out = append(out, rec.Pipeline)
		}
		return out
	}
	const (
		shared  = "maintenance shared with another pipeline of this table; its maintenance block applies"
		started = "maintenance started"
		stopped = "maintenance stopped"
	)
	a, b, alone := pipeline("a", reg), pipeline("b", reg), pipeline("alone", nil)
	if a.maintainers != reg || b.maintainers != reg {
		t.Fatalf("pipelines given the registry %p hold %p and %p", reg, a.maintainers, b.maintainers)
	}
	if alone.maintainers == nil || alone.maintainers == reg {
		t.Fatalf("a pipeline given no registry holds %p, want one of its own (not nil, not the process's %p)", alone.maintainers, reg)
	}
	if other := pipeline("alone2", nil); other.maintainers == alone.maintainers {
		t.Fatalf("two pipelines given no registry share the registry %p", other.maintainers)
	}
	stopA, stopB, stopAlone := a.startMaintenance(ctx), b.startMaintenance(ctx), alone.startMaintenance(ctx)
	if got := lines(shared); len(got) != 1 || got[0] != "b" {
		t.Fatalf("pipelines that joined a running maintainer: %v, want [b] (a started it, alone has its own)", got)
	}
	stopA()
	if got := lines(stopped); len(got) != 0 {
		t.Fatalf("maintainers stopped after the first of the two pipelines stopped: %v, want none", got)
	}
	stopB() // the last user: waits for the maintainer's goroutine, which a started
	if got := lines(stopped); len(got) != 1 || got[0] != "a" {
		t.Fatalf("maintainers stopped after both pipelines of the registry stopped: %v, want [a]", got)
	}
	stopAlone()
	if got := lines(stopped); len(got) != 2 || got[1] != "alone" {
		t.Fatalf("maintainers stopped after every pipeline stopped: %v, want [a alone]", got)
	}
	if got := lines(started); len(got) != 2 || !(got[0] == "a" && got[1] == "alone" || got[0] == "alone" && got[1] == "a") {
		t.Fatalf("maintainers started: %v, want one of a and one of alone", got)
	}
}
