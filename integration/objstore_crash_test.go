package integration

import (
	"path/filepath"
	"testing"
)

// TestCrashSmokeS3 is TestCrashSmoke with the bronze table on the S3 emulator: `ingestd
// run` is killed with SIGKILL twice mid-stream and restarted; every order ends in the
// table exactly once, read by delta-rs through S3.
func TestCrashSmokeS3(t *testing.T) {
	s := need(t)
	o := needStore(t, "s3")
	// 300 commits of 100 records: on a quiet machine the S3 emulator commits in ~10 ms, and
	// a backlog of a few dozen commits was fully ingested between two progress checks,
	// before the kill could land mid-stream.
	const n = 30_000
	topic := createTopic(t, s, "orders-crash-s3", 3)
	dlq := createTopic(t, s, "orders-crash-s3.dlq", 1)
	orders := produce(t, s, topic, n, 0, 1)
	uri := o.base + "/bronze/orders"
	cfgDir := filepath.Join(t.TempDir(), "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "bronze", pipelineYAMLAtBatch("orders-crash-s3", s, topic, uri, "evolve", dlq,
		"{max_records: 100, max_bytes: 64MiB, max_age: 200ms}"))
	crashTwice(t, cfgDir, n, func() int64 { return handledAt(t, uri) })
	checkOrders(t, "s3 bronze after two crashes", readTableAt(t, s, o, uri), orders, false)
}
