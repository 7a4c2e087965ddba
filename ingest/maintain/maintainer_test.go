package maintain

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
)

// TestBackgroundVacuumRetainDefault: maintenance.vacuum without retain vacuums with the
// table's own delta.deletedFileRetentionDuration (here 30 days), as `ingestd table vacuum`
// without --retain does; an explicit retain shorter than the table's fails every run
// (background vacuums never force) and is counted as an error.
func TestBackgroundVacuumRetainDefault(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "_delta_log"), 0o755); err != nil {
		t.Fatal(err)
	}
	log0 := `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"t1","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{"delta.deletedFileRetentionDuration":"interval 30 days"},"createdTime":1}}
`
	if err := os.WriteFile(filepath.Join(root, "_delta_log", "00000000000000000000.json"), []byte(log0), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	run := func(retain time.Duration) *maintainer {
		mt := &maintainer{uri: "u", table: tbl, log: slog.New(slog.DiscardHandler), m: m,
			cfg: config.Maintenance{Vacuum: &config.Vacuum{Every: time.Hour, Retain: retain}}}
		mt.runJob(ctx, JobVacuum)
		return mt
	}
	run(0)
	if got := testutil.ToFloat64(m.Runs.WithLabelValues("u", JobVacuum, resultNoop)); got != 1 {
		t.Errorf("vacuum with retain unset: %v noop runs, want 1 (the table's 30 days apply)", got)
	}
	if got := testutil.ToFloat64(m.Runs.WithLabelValues("u", JobVacuum, resultError)); got != 0 {
		t.Errorf("vacuum with retain unset: %v failed runs, want 0", got)
	}
	run(168 * time.Hour)
	if got := testutil.ToFloat64(m.Runs.WithLabelValues("u", JobVacuum, resultError)); got != 1 {
		t.Errorf("vacuum with retain 168h under a 30-day table: %v failed runs, want 1", got)
	}
}

// TestMaintainersSharedByTable: two pipelines of one table, given one registry, share one
// maintainer: the first to stop leaves it running, the last stops it (its goroutine has
// returned) and removes it from the registry. A pipeline of another table in the same
// registry gets a maintainer of its own, and so does a pipeline of the same table in
// another registry (the ingest package's Deps.Maintainers nil gives a pipeline one of
// its own: TestPipelineMaintainers).
func TestMaintainersSharedByTable(t *testing.T) {
	ctx := context.Background()
	m := NewMetrics(prometheus.NewRegistry())
	reg := NewRegistry()
	root := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	// pipeline is what a pipeline of table does when its Run starts: it starts (or joins)
	// the table's maintainer in its registry.
	type pipeline struct {
		cfg *config.Config
		dir string // the table's directory
		reg *Registry
	}
	newPipeline := func(name, table string, reg *Registry) pipeline {
		dir := filepath.Join(root, table)
		cfg := &config.Config{Name: name, AppID: name, Table: config.Table{URI: "file://" + dir},
			Maintenance: config.Maintenance{Optimize: &config.Optimize{Every: time.Hour, MinFiles: 2}}}
		return pipeline{cfg: cfg, dir: dir, reg: reg}
	}
	start := func(p pipeline) (stop func()) {
		t.Helper()
		st, err := storage.NewLocal(p.dir)
		if err != nil {
			t.Fatal(err)
		}
		return p.reg.Start(ctx, p.cfg, st, log, m)
	}
	owners := func(reg *Registry) map[string]*maintainer {
		reg.mu.Lock()
		defer reg.mu.Unlock()
		out := map[string]*maintainer{}
		for uri, mt := range reg.m {
			out[uri] = mt
		}
		return out
	}
	stopped := func(mt *maintainer) bool {
		select {
		case <-mt.done:
			return true
		default:
			return false
		}
	}
	a, b := newPipeline("a", "orders", reg), newPipeline("b", "orders", reg)
	c := newPipeline("c", "payments", reg)
	alone := newPipeline("alone", "orders", NewRegistry())
	stopA, stopB, stopC, stopAlone := start(a), start(b), start(c), start(alone)
	all := owners(reg)
	orders, payments := all[a.cfg.Table.URI], all[c.cfg.Table.URI]
	if len(all) != 2 || orders == nil || payments == nil || orders == payments {
		t.Fatalf("registry after three pipelines of two tables started: %v, want one maintainer per table", all)
	}
	reg.mu.Lock()
	users := orders.users
	reg.mu.Unlock()
	if users != 2 {
		t.Fatalf("the orders maintainer has %d users, want 2 (pipelines a and b)", users)
	}
	own := owners(alone.reg)[alone.cfg.Table.URI]
	if own == nil || own == orders {
		t.Fatalf("a pipeline of another registry shares the maintainer %p of the registry's %p", own, orders)
	}
	stopA()
	stopA() // a second stop of the same pipeline leaves nothing more
	if stopped(orders) {
		t.Fatal("the orders maintainer stopped when the first of its two pipelines stopped")
	}
	if got := owners(reg)[a.cfg.Table.URI]; got != orders {
		t.Fatalf("after the first stop the registry holds %p for orders, want the running %p", got, orders)
	}
	stopB() // waits for the maintainer's goroutine
	if !stopped(orders) {
		t.Fatal("the orders maintainer still runs after its last pipeline stopped")
	}
	if got := owners(reg); len(got) != 1 || got[c.cfg.Table.URI] != payments {
		t.Fatalf("registry after both orders pipelines stopped: %v, want only the payments maintainer", got)
	}
	if stopped(payments) || stopped(own) {
		t.Fatal("a maintainer of another table or registry stopped with the orders pipelines")
	}
	// A pipeline of the table started again gets a new maintainer.
	stopA = start(newPipeline("a2", "orders", reg))
	if again := owners(reg)[a.cfg.Table.URI]; again == nil || again == orders {
		t.Fatalf("orders restarted: maintainer %p, want a new one (the old %p stopped)", again, orders)
	}
	stopA()
	stopC()
	stopAlone()
	if !stopped(payments) || !stopped(own) || len(owners(reg)) != 0 {
		t.Fatalf("after every pipeline stopped: payments stopped %v, own stopped %v, registry %v", stopped(payments), stopped(own), owners(reg))
	}
}
