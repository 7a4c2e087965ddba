package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestManyWritersS3 is many writers on one S3 table: two `ingestd run`
// processes with different app ids (each reading its own topic) append to one table on
// the S3 emulator while `ingestd table alter` changes a property three times; the racing
// commits (and the metadata changes, which make the pipelines rebuild their batches) must
// leave every version file intact and contiguous and every order exactly once.
func TestManyWritersS3(t *testing.T) {
	s := need(t)
	o := needStore(t, "s3")
	const n = 6_000
	uri := o.base + "/bronze/orders"
	var want []order
	var daemons []*daemon
	for i, name := range []string{"a", "b"} {
		topic := createTopic(t, s, "orders-mw-"+name, 2)
		dlq := createTopic(t, s, "orders-mw-"+name+".dlq", 1)
		want = append(want, produce(t, s, topic, n, 0, int64(1+i*n))...)
		dir := filepath.Join(t.TempDir(), "configs-"+name)
		mustMkdir(t, dir)
		writePipeline(t, dir, "bronze", pipelineYAMLAtBatch("orders-mw-"+name, s, topic, uri, "evolve", dlq,
			"{max_records: 150, max_bytes: 64MiB, max_age: 100ms}"))
		daemons = append(daemons, startDaemon(t, dir))
	}
	// Three alters while both write (each one Delta commit: a metaData action).
	for i, interval := range []string{"5", "7", "10"} {
		waitFor(t, daemons[0], 2*time.Minute, fmt.Sprintf("progress before alter %d", i+1), func() bool {
			return handledAt(t, uri) > int64((i+1)*2*n/5)
		})
		out, err := runCLI(t, "table", "alter", "--table", uri, "--set-property", "delta.checkpointInterval="+interval)
		if err != nil || !strings.Contains(out, "SET TBLPROPERTIES") {
			t.Fatalf("alter %d: %v\n%s", i+1, err, out)
		}
	}
	waitFor(t, daemons[0], 3*time.Minute, "both pipelines to land every record", func() bool { return handledAt(t, uri) == 2*n })
	for _, d := range daemons {
		if code := d.stop(t); code != 0 {
			t.Fatalf("exit code %d after SIGTERM", code)
		}
	}
	log := logVersions(t, uri)
	for v := int64(0); v < int64(len(log)); v++ {
		if _, ok := log[v]; !ok {
			t.Fatalf("version %d missing among %d versions", v, len(log))
		}
	}
	alters := 0
	for _, acts := range log {
		for _, a := range acts {
			if a.Metadata != nil && a.Metadata.Configuration["delta.checkpointInterval"] != "" {
				alters++
			}
		}
	}
	if alters != 3 {
		t.Errorf("%d commits set delta.checkpointInterval, want the 3 alters", alters)
	}
	// Checkpoints (every 5, 7, then 10 versions) were written to S3 as on local disk.
	if b, err := mustOpen(t, uri).Get(context.Background(), "_delta_log/_last_checkpoint"); err != nil || !strings.Contains(string(b), `"version"`) {
		t.Errorf("_last_checkpoint on S3: %q, %v", b, err)
	}
	d := readTableAt(t, s, o, uri)
	checkOrders(t, "s3 bronze written by two daemons", d, want, false)
	t.Logf("%d versions, %d rows, %d files", len(log), len(d.Rows), d.Files)
}
