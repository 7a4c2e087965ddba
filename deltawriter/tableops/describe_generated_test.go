package tableops

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// describe marks each generated column ingestd cannot compute — a week-based pattern
// letter in date_format, from_utc_timestamp — with the reason a pipeline refuses the
// table at start-up (the error deltawriter.GeneratedColumns gives for that column), and
// leaves a supported one unmarked.
func TestDescribeMarksUnsupportedGenerated(t *testing.T) {
	const schema = `{"type":"struct","fields":[{"name":"created_at","type":"timestamp","nullable":true,"metadata":{}},` +
		`{"name":"y","type":"integer","nullable":true,"metadata":{"delta.generationExpression":"YEAR(created_at)"}},` +
		`{"name":"wk","type":"string","nullable":true,"metadata":{"delta.generationExpression":"date_format(created_at, 'YYYY-ww')"}},` +
		`{"name":"local","type":"timestamp","nullable":true,"metadata":{"delta.generationExpression":"from_utc_timestamp(created_at, 'Europe/Berlin')"}}]}`
	// Written as Spark would: ingestd's own commit refuses such a schema.
	dir := t.TempDir()
	meta, _ := json.Marshal(map[string]any{"metaData": map[string]any{"id": "5f1c0ab4-0000-4000-8000-000000000001", "format": map[string]any{"provider": "parquet", "options": map[string]any{}},
		"schemaString": schema, "partitionColumns": []string{}, "configuration": map[string]string{}, "createdTime": 1700000000000}})
	log := `{"protocol":{"minReaderVersion":1,"minWriterVersion":4}}` + "\n" + string(meta) + "\n"
	if err := os.MkdirAll(filepath.Join(dir, "_delta_log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := Describe("/t", snap)
	if len(d.UnsupportedGenerated) != 2 {
		t.Fatalf("unsupported generated columns %v, want wk and local", d.UnsupportedGenerated)
	}
	var out bytes.Buffer
	WriteDetail(&out, d)
	for _, col := range []string{"wk", "local"} {
		// the start-up refusal of a table whose only generated column is col
		only := snap.Schema.Clone()
		for _, f := range only.Fields {
			if f.Name != col {
				delete(f.Metadata, deltalog.MetaGenerationExpression)
			}
		}
		_, startup := deltawriter.GeneratedColumns(only, snap.Metadata.Configuration)
		if startup == nil || d.UnsupportedGenerated[col] != startup.Error() {
			t.Errorf("%s: describe says %q, start-up says %v", col, d.UnsupportedGenerated[col], startup)
		}
		line := "  " + col + " GENERATED ALWAYS AS (" + d.GeneratedColumns[col] + ")\n    UNSUPPORTED by ingestd (a pipeline refuses this table): " + d.UnsupportedGenerated[col] + "\n"
		if !strings.Contains(out.String(), line) {
			t.Errorf("describe output lacks %q:\n%s", line, out.String())
		}
	}
	if !strings.Contains(out.String(), "  y GENERATED ALWAYS AS (YEAR(created_at))\nproperties:") {
		t.Errorf("y is marked or misplaced:\n%s", out.String())
	}
}
