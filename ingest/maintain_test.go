package ingest

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
	if got := testutil.ToFloat64(m.MaintenanceRuns.WithLabelValues("u", JobVacuum, resultNoop)); got != 1 {
		t.Errorf("vacuum with retain unset: %v noop runs, want 1 (the table's 30 days apply)", got)
	}
	if got := testutil.ToFloat64(m.MaintenanceRuns.WithLabelValues("u", JobVacuum, resultError)); got != 0 {
		t.Errorf("vacuum with retain unset: %v failed runs, want 0", got)
	}
	run(168 * time.Hour)
	if got := testutil.ToFloat64(m.MaintenanceRuns.WithLabelValues("u", JobVacuum, resultError)); got != 1 {
		t.Errorf("vacuum with retain 168h under a 30-day table: %v failed runs, want 1", got)
	}
}
