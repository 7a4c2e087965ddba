package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// createTable writes version 0 of the harness's table as another writer would: the
// orders columns, partitioned by partitionBy, with the given table properties.
func (h *harness) createTable(partitionBy []string, conf map[string]string, extra ...*deltalog.StructField) {
	h.t.Helper()
	schema := &deltalog.StructType{Fields: append([]*deltalog.StructField{
		{Name: "order_id", Type: deltalog.Long, Nullable: true, Metadata: map[string]any{}},
		{Name: "customer", Type: deltalog.String, Nullable: true, Metadata: map[string]any{}},
		{Name: "amount", Type: deltalog.DecimalType{Precision: 10, Scale: 2}, Nullable: true, Metadata: map[string]any{}},
	}, extra...)}
	if slices.ContainsFunc(extra, func(f *deltalog.StructField) bool { return f.Type == deltalog.Binary }) {
		// PrepareSchemaChange refuses a binary partition column: write it as another writer would.
		proto, meta := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, deltalog.Metadata{ID: "t", Format: deltalog.Format{Provider: "parquet", Options: map[string]string{}},
			PartitionColumns: partitionBy, Configuration: map[string]string{}}
		b, err := json.Marshal(schema)
		if err != nil {
			h.t.Fatal(err)
		}
		meta.SchemaString = string(b)
		h.commitOther(0, proto, meta)
		return
	}
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "orders", Schema: schema, PartitionColumns: partitionBy})
	if err != nil {
		h.t.Fatal(err)
	}
	proto, meta := *create.Protocol, *create.Metadata
	maps.Copy(meta.Configuration, conf)
	if len(conf) > 0 {
		proto.MinWriterVersion = 3 // CHECK constraints
	}
	h.commitOther(0, proto, meta)
}

// commitOther writes commit version of the harness's table by hand, as another writer
// (Spark) would: deltawriter itself refuses to commit metadata it cannot write.
func (h *harness) commitOther(version int64, proto deltalog.Protocol, meta deltalog.Metadata) {
	h.t.Helper()
	var buf bytes.Buffer
	for _, a := range []any{map[string]any{"protocol": proto}, map[string]any{"metaData": meta},
		map[string]any{"commitInfo": map[string]any{"timestamp": time.Now().UnixMilli(), "operation": "ADD CONSTRAINT"}}} {
		b, err := json.Marshal(a)
		if err != nil {
			h.t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	log := filepath.Join(h.tableDir, "_delta_log")
	if err := os.MkdirAll(log, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(log, fmt.Sprintf("%020d.json", version)), buf.Bytes(), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

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
		if !errors.Is(err, deltawriter.ErrPartitionType) || !strings.Contains(err.Error(), `partition column "raw"`) || !strings.Contains(err.Error(), "binary") {
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
