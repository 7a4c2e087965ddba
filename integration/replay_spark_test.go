package integration

import (
	"path/filepath"
	"testing"
	"time"
)

// TestReplayAfterSparkAlter: the silver workflow with Spark doing the ALTER TABLE … ADD
// COLUMNS on the live table while `ingestd run` keeps running: new records with the field
// pass directly at the pipeline's next commit, and replay lands the earlier dead letters.
func TestReplayAfterSparkAlter(t *testing.T) {
	t.Parallel() // waits on Spark or the broker; own topics and temp dirs (see TestMain)
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while the pipeline runs
	const nV1, nV2 = 100, 20
	topic := createTopic(t, s, "orders-sparkalter", 1)
	dlq := createTopic(t, s, "orders-sparkalter.dlq", 1)
	createTopicNamed(t, s, dlq+".parked", 1)
	orders := produce(t, s, topic, nV1, nV2, 1)

	dir := t.TempDir()
	table := filepath.Join(dir, "silver")
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "silver", pipelineYAML("orders-sa", s, topic, table, "dead_letter", dlq, "{max_records: 50, max_bytes: 1MiB, max_age: 200ms}"))
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "silver to handle the first records", func() bool { return handled(t, table) == nV1+nV2 })

	spark.call(t, map[string]any{"op": "sql", "query": "ALTER TABLE delta.`" + table + "` ADD COLUMNS (channel STRING)"}, nil)
	more := produce(t, s, topic, 0, 10, 1001)
	waitFor(t, d, time.Minute, "the new v2 records", func() bool { return handled(t, table) == nV1+nV2+10 })
	if n := len(readDLQ(t, s, dlq)); n != nV2 {
		t.Errorf("DLQ holds %d records after the ALTER, want only the %d from before it", n, nV2)
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	sum := replay(t, filepath.Join(cfgDir, "silver.yaml"))
	if sum.Landed != nV2 || sum.Read != nV2 {
		t.Errorf("replay %+v, want %d landed", sum, nV2)
	}
	checkOrders(t, "silver", readTable(t, s, table), append(orders, more...), true)
	var got sparkRead
	spark.call(t, map[string]any{"op": "read", "path": table}, &got)
	if len(got.Rows) != nV1+nV2+10 {
		t.Errorf("Spark reads %d rows, want %d", len(got.Rows), nV1+nV2+10)
	}
}
