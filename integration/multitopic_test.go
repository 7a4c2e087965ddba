package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSeveralTopicsIntoOneTable: one pipeline reads two topics into one table, each
// partition of each topic tracked by its own txn (appId <app_id>-<topic>-<partition>).
func TestSeveralTopicsIntoOneTable(t *testing.T) {
	s := need(t)
	a := createTopic(t, s, "mt-a", 2)
	b := createTopic(t, s, "mt-b", 3)
	dlq := createTopic(t, s, "mt.dlq", 1)
	oa := produce(t, s, a, 500, 0, 1)
	ob := produce(t, s, b, 700, 0, 10_001)
	dir := t.TempDir()
	table := filepath.Join(dir, "orders")
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	y := pipelineYAML("mt", s, a, table, "evolve", dlq, "{max_records: 200, max_bytes: 1MiB, max_age: 200ms}")
	y = strings.Replace(y, "topics: ["+a+"]", "topics: ["+a+", "+b+"]", 1)
	writePipeline(t, cfgDir, "mt", y)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 2*time.Minute, "both topics handled", func() bool { return handled(t, table) == 1200 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	txns := txnVersions(t, table)
	if len(txns) != 5 {
		t.Errorf("txn app ids %v, want one per partition of both topics (5)", txns)
	}
	for app := range txns {
		if !strings.HasPrefix(app, "mt-"+a+"-") && !strings.HasPrefix(app, "mt-"+b+"-") {
			t.Errorf("unexpected app id %s", app)
		}
	}
	data := readTable(t, s, table)
	rows := rowsByID(t, "mt", data)
	if len(data.Rows) != len(oa)+len(ob) {
		t.Errorf("%d rows, want %d", len(data.Rows), len(oa)+len(ob))
	}
	for _, o := range append(oa, ob...) {
		r, ok := rows[o.OrderID]
		if !ok {
			t.Fatalf("order %d missing", o.OrderID)
		}
		checkRow(t, "mt", r, o, false)
	}
	t.Logf("%d rows from two topics, txns %v", len(rows), txns)
}
