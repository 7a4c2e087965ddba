package integration

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestCrashSmokeS3 is TestCrashSmoke with the bronze table on the S3 emulator: `ingestd
// run` is killed with SIGKILL twice mid-stream and restarted; every order ends in the
// table exactly once, read by delta-rs through S3.
func TestCrashSmokeS3(t *testing.T) {
	s := need(t)
	o := needStore(t, "s3")
	const n = 10_000
	topic := createTopic(t, s, "orders-crash-s3", 3)
	dlq := createTopic(t, s, "orders-crash-s3.dlq", 1)
	orders := produce(t, s, topic, n, 0, 1)
	uri := o.base + "/bronze/orders"
	cfgDir := filepath.Join(t.TempDir(), "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "bronze", pipelineYAMLAtBatch("orders-crash-s3", s, topic, uri, "evolve", dlq,
		"{max_records: 200, max_bytes: 64MiB, max_age: 200ms}"))
	var last int64
	for i, at := range []int64{n / 5, n / 2} {
		d := startDaemon(t, cfgDir)
		waitFor(t, d, 2*time.Minute, fmt.Sprintf("progress past %d records before kill %d", at, i+1), func() bool {
			return handledAt(t, uri) > max(last, at)
		})
		d.kill9(t)
		last = handledAt(t, uri)
		t.Logf("kill -9 #%d with %d of %d records committed", i+1, last, n)
		if last >= n {
			t.Fatalf("kill -9 #%d came after the last commit: the test did not crash mid-stream", i+1)
		}
	}
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 3*time.Minute, "all records handled after two crashes", func() bool { return handledAt(t, uri) == n })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	checkOrders(t, "s3 bronze after two crashes", readTableAt(t, s, o, uri), orders, false)
}
