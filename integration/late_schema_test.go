package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestSchemaNotFoundLandsAfterRegistration: records framed with a schema id the registry
// does not know are dead-lettered as schema_not_found; once the schema is registered,
// replay lands them (a new process, so no negative cache from the pipeline).
func TestSchemaNotFoundLandsAfterRegistration(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "late", 1)
	dlq := createTopic(t, s, "late.dlq", 1)
	createTopicNamed(t, s, dlq+".parked", 1)
	produceSpec(t, s, topic, map[string]string{"v1": rec("Order", `{"name":"order_id","type":"long"}`, `{"name":"status","type":"string"}`)},
		[][2]string{{"v1", `{"order_id":100,"status":"OLD"}`}})
	state := filepath.Join(t.TempDir(), "state.json")
	script := filepath.Join(repoRoot, "integration", "testdata", "future_schema.py")
	if out, err := exec.Command(s.python, script, "produce", "--brokers", s.brokers, "--registry", s.registry, "--topic", topic, "--out", state).CombinedOutput(); err != nil {
		t.Fatalf("future_schema.py produce: %v\n%s", err, out)
	}
	dir := t.TempDir()
	table := filepath.Join(dir, "t")
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "silver", pipelineYAML("late", s, topic, table, "dead_letter", dlq, "{max_records: 100, max_bytes: 1MiB, max_age: 200ms}"))
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "all records handled", func() bool { return handled(t, table) == 4 })
	d.stop(t)
	recs := readDLQ(t, s, dlq)
	if len(recs) != 3 {
		t.Fatalf("DLQ holds %d records, want the 3 with the unknown id", len(recs))
	}
	for _, r := range recs {
		if r.headers["ingestd.error.reason"] != "schema_not_found" {
			t.Errorf("reason %q, want schema_not_found", r.headers["ingestd.error.reason"])
		}
	}
	out, err := exec.Command(s.python, script, "register", "--registry", s.registry, "--state", state).Output()
	if err != nil {
		t.Fatalf("future_schema.py register: %v", err)
	}
	var ids struct{ ID, Want int }
	if err := json.Unmarshal(out, &ids); err != nil || ids.ID != ids.Want {
		t.Fatalf("the registry assigned id %d, want %d (someone else registered in between?): %s", ids.ID, ids.Want, out)
	}
	sum := replay(t, filepath.Join(cfgDir, "silver.yaml"))
	if sum.Landed != 3 || len(sum.DeadLettered) != 0 {
		t.Fatalf("replay %+v, want the 3 records landed", sum)
	}
	if n := countRows(t, s, table); n != 4 {
		t.Errorf("table has %d rows, want 4", n)
	}
}
