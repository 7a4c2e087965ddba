package ingest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// dataFiles lists the Parquet files under the table directory (at any depth).
func (h *harness) dataFiles() []string {
	h.t.Helper()
	var out []string
	err := filepath.WalkDir(h.tableDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".parquet") && !strings.Contains(path, "_delta_log") {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// runUntilStopped runs one pipeline and returns the error it stops with (or fails after 20 s).
func (h *harness) runUntilStopped() error {
	h.t.Helper()
	m := h.start("refused", nil)
	return m.stopped(h.t, 20*time.Second, "the pipeline kept running on a table it cannot write")
}

// A table ingestd cannot append to safely is refused before any byte is written: at
// start-up, and when another writer makes it so under a running pipeline.
func TestRefusesTableItCannotWriteSafely(t *testing.T) {
	t.Run("binary partition column at start-up", func(t *testing.T) {
		h := newHarness(t, 1)
		h.createTable([]string{"raw"}, nil, &deltalog.StructField{Name: "raw", Type: deltalog.Binary, Nullable: true, Metadata: map[string]any{}})
		// Nothing to consume: the refusal comes from start-up, not from a first flush.
		err := h.runUntilStopped()
		if !errors.Is(err, deltalog.ErrPartitionType) || !strings.Contains(err.Error(), `partition column "raw"`) || !strings.Contains(err.Error(), "binary") {
			t.Fatalf("Run = %v, want a refusal naming the binary partition column", err)
		}
		if files := h.dataFiles(); len(files) != 0 {
			t.Fatalf("data files written: %v", files)
		}
		if v := h.snapshot().Version; v != 0 {
			t.Fatalf("table version %d, want 0", v)
		}
	})
	t.Run("CHECK constraint outside the evaluator's subset at start-up", func(t *testing.T) {
		h := newHarness(t, 1)
		h.createTable(nil, map[string]string{"delta.constraints.positive": "regexp_like(CAST(amount AS STRING), '^[0-9]+$')"})
		h.produce(0, 10, 0, 1, -1)
		err := h.runUntilStopped()
		if !errors.Is(err, deltawriter.ErrUnsupportedFeature) || !strings.Contains(err.Error(), `CHECK constraint "positive"`) || !strings.Contains(err.Error(), "function regexp_like") {
			t.Fatalf("Run = %v, want ErrUnsupportedFeature naming the constraint and the function", err)
		}
		if files := h.dataFiles(); len(files) != 0 {
			t.Fatalf("data files written: %v", files)
		}
	})
	t.Run("CHECK constraint outside the evaluator's subset added under a running pipeline", func(t *testing.T) {
		h := newHarness(t, 1)
		h.produce(0, 10, 0, 1, -1)
		m := h.start("running", nil)
		h.waitHandled(10, 20*time.Second, m)
		before := h.dataFiles()
		snap := h.snapshot()
		meta := snap.Metadata
		meta.Configuration = map[string]string{"delta.constraints.positive": "regexp_like(CAST(amount AS STRING), '^[0-9]+$')"}
		for k, v := range snap.Metadata.Configuration {
			meta.Configuration[k] = v
		}
		proto := snap.Protocol
		if proto.MinWriterVersion < 3 {
			proto.MinWriterVersion = 3
		}
		v := snap.Version + 1
		h.commitOther(v, proto, meta)
		h.produce(10, 10, 0, 1, -1)
		err := m.stopped(t, 20*time.Second, "the pipeline kept running after the table became unwritable")
		if !errors.Is(err, deltawriter.ErrUnsupportedFeature) {
			t.Fatalf("Run = %v, want ErrUnsupportedFeature", err)
		}
		if after := h.dataFiles(); len(after) != len(before) {
			t.Fatalf("data files %d after the refusal, %d before", len(after), len(before))
		}
		if got := h.snapshot(); got.Version != v || got.Txns["orders-orders-0"] != 9 {
			t.Fatalf("table version %d txns %v, want version %d and the txn at offset 9", got.Version, got.Txns, v)
		}
	})
}

// A SIGTERM while a pipeline starts (its context ends before its first assignment) stops
// it cleanly: Run returns nil and the state is stopped, not failed.
func TestStopWhileStartingIsNotAFailure(t *testing.T) {
	h := newHarness(t, 1)
	p := NewPipeline(h.config(), h.deps(slog.New(slog.NewTextHandler(testWriter{t, "a"}, nil))))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run after a stop during start-up returned %v, want nil", err)
	}
	if st := p.Status(); st.State != StateStopped {
		t.Fatalf("state %v, want %v", st.State, StateStopped)
	}
}
