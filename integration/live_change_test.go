package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// produceSpec runs produce_case.py with schemas and events (label, value JSON).
func produceSpec(t *testing.T, s stack, topic string, schemas map[string]string, events [][2]string) {
	t.Helper()
	dir := t.TempDir()
	spec := map[string]any{"schemas": map[string]json.RawMessage{}, "events": [][]any{}}
	for k, v := range schemas {
		spec["schemas"].(map[string]json.RawMessage)[k] = json.RawMessage(v)
	}
	for _, e := range events {
		spec["events"] = append(spec["events"].([][]any), []any{e[0], json.RawMessage(e[1])})
	}
	b, _ := json.Marshal(spec)
	specFile := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "produce_case.py"),
		"--brokers", s.brokers, "--registry", s.registry, "--topic", topic, "--spec", specFile, "--out", filepath.Join(dir, "out.json"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("produce_case.py: %v\n%s", err, out)
	}
}

// TestCaseC29TableChangedUnderRunningPipeline: a writer that cached the table's schema at
// start-up and never refreshed it after another writer changed the table
// (delta-io/kafka-delta-ingest#40). While `ingestd run` is running, another writer adds a
// column (region) to the table; then records with a new field (coupon) arrive. The table
// becomes table ∪ {coupon}: the other writer's column is kept in place, nothing is dropped
// or reordered; a restart writes nothing twice.
func TestCaseC29TableChangedUnderRunningPipeline(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "case-c29", 1)
	dlq := createTopic(t, s, "case-c29.dlq", 1)
	dir := t.TempDir()
	table := filepath.Join(dir, "orders")
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "bronze", pipelineYAML("case-c29", s, topic, table, "evolve", dlq, "{max_records: 100, max_bytes: 1MiB, max_age: 200ms}"))
	v1 := rec("Order", `{"name":"order_id","type":"long"}`, `{"name":"status","type":"string"}`)
	v2 := rec("Order", `{"name":"order_id","type":"long"}`, `{"name":"status","type":"string"}`, `{"name":"coupon","type":["null","string"],"default":null}`)
	produceSpec(t, s, topic, map[string]string{"v1": v1}, [][2]string{{"v1", `{"order_id":1,"status":"NEW"}`}, {"v1", `{"order_id":2,"status":"PAID"}`}})

	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "the v1 records", func() bool { return handled(t, table) == 2 })

	// Another writer (an operator's job) adds `region` at the end of the table.
	ctx := context.Background()
	tbl := openTable(t, table)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	schema := snap.Schema.Clone()
	schema.Fields = append(schema.Fields, &deltalog.StructField{Name: "region", Type: deltalog.String, Nullable: true, Metadata: map[string]any{}})
	meta := snap.Metadata
	b, _ := json.Marshal(schema)
	meta.SchemaString = string(b)
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Metadata: &meta, Operation: "ADD COLUMNS"}); err != nil {
		t.Fatal(err)
	}

	produceSpec(t, s, topic, map[string]string{"v1": v1, "v2": v2}, [][2]string{
		{"v2", `{"order_id":3,"status":"NEW","coupon":"SPRING10"}`}, {"v1", `{"order_id":4,"status":"NEW"}`}})
	waitFor(t, d, time.Minute, "the v2 records", func() bool { return handled(t, table) == 4 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	data := readTable(t, s, table)
	if got, want := strings.Join(schemaNames(data), ","), "order_id,status,region,coupon"; got != want {
		t.Errorf("columns %s, want %s (region kept in place, coupon appended)", got, want)
	}
	var rows []string
	for _, r := range data.Rows {
		b, _ := json.Marshal(r)
		rows = append(rows, string(b))
	}
	slices.Sort(rows)
	want := []string{
		`{"coupon":"SPRING10","order_id":3,"region":null,"status":"NEW"}`,
		`{"coupon":null,"order_id":1,"region":null,"status":"NEW"}`,
		`{"coupon":null,"order_id":2,"region":null,"status":"PAID"}`,
		`{"coupon":null,"order_id":4,"region":null,"status":"NEW"}`,
	}
	slices.Sort(want)
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows\n got %s\nwant %s", strings.Join(rows, "\n     "), strings.Join(want, "\n     "))
	}

	// A restart replays nothing: same version, same txn, same rows. The restarted daemon is
	// stopped once it has resumed its partition from the table's txn, past the four
	// records (anything it read again would be flushed by the stop, and counted below).
	version := data.Version
	d2 := startDaemon(t, cfgDir)
	waitFor(t, d2, time.Minute, "the restarted daemon to resume partition 0 at offset 4 from its txn", func() bool {
		return logHasLine(t, d2, `"msg":"partition assigned"`, `"partition":0`, `"offset":4`, `"from":"delta txn"`)
	})
	if code := d2.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if again := readTable(t, s, table); again.Version != version || len(again.Rows) != 4 {
		t.Errorf("after restart: version %d rows %d, want %d and 4", again.Version, len(again.Rows), version)
	}
}

func schemaNames(d tableData) []string {
	var out []string
	for _, f := range d.Schema {
		out = append(out, f[0].(string))
	}
	return out
}
