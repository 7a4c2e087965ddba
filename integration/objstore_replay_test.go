package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReplayOnGCS: silver on a GCS table dead-letters the 200 v2 orders; `dlq inspect`,
// `table alter --config` (table.storage from the file, credentials from the environment)
// and `replay` then land them exactly once: 1,000 rows, channel as produced; a second
// replay lands nothing.
func TestReplayOnGCS(t *testing.T) {
	s := need(t)
	o := needStore(t, "gcs")
	const nV1, nV2 = 800, 200
	topic := createTopic(t, s, "orders-gcs", 2)
	dlq := createTopic(t, s, "orders-gcs.dlq", 1)
	createTopicNamed(t, s, dlq+".parked", 1)
	orders := produce(t, s, topic, nV1, nV2, 1)
	uri := o.base + "/silver/orders"
	cfgDir := filepath.Join(t.TempDir(), "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "silver", pipelineYAMLAt("orders-silver", s, topic, uri, "dead_letter", dlq))
	cfg := filepath.Join(cfgDir, "silver.yaml")
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 2*time.Minute, "silver on GCS to handle every record", func() bool { return handledAt(t, uri) == nV1+nV2 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if n := len(readTableAt(t, s, o, uri).Rows); n != nV1 {
		t.Fatalf("silver has %d rows before the replay, want %d", n, nV1)
	}
	out, err := runCLI(t, "dlq", "inspect", "--config", cfg, "--json")
	if err != nil {
		t.Fatalf("dlq inspect: %v", err)
	}
	var rep struct {
		Total   int            `json:"total"`
		ByField map[string]int `json:"by_field"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Total != nV2 || rep.ByField["schema_mismatch channel"] != nV2 {
		t.Fatalf("dlq inspect: %s (%v)", out, err)
	}
	if out, err := runCLI(t, "table", "alter", "--config", cfg, "--add-column", "channel STRING"); err != nil || !strings.Contains(out, "ADD COLUMNS channel string") {
		t.Fatalf("table alter: %v\n%s", err, out)
	}
	if r := replay(t, cfg); r.Landed != nV2 || r.Read != nV2 {
		t.Fatalf("replay: %+v, want %d read and landed", r, nV2)
	}
	if r := replay(t, cfg); r.Landed != 0 {
		t.Fatalf("second replay landed %d, want 0: %+v", r.Landed, r)
	}
	checkOrders(t, "gcs silver after replay", readTableAt(t, s, o, uri), orders, true)
}
