package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestTopicCreatedAgain: a topic deleted and created again under its name starts its
// offsets at 0, while the table's txns still name the old topic's. On the real broker:
// 300 orders into a 3-partition topic, `ingestd run` writes them; while it runs the topic
// is deleted and created again with 30 new orders: each partition halts topic_deleted
// (/readyz 503, a few fetch error lines, not thousands) and nothing is written; a new
// `ingestd run` halts each partition txn_beyond_log_end and writes nothing; `ingestd table
// reset-offsets --to-earliest` then moves the txns, and the next run writes exactly the 30
// new orders: delta-rs reads 330 distinct orders. reset-offsets refuses while the pipeline
// runs (its group has a member) and a partition the topic does not have.
func TestTopicCreatedAgain(t *testing.T) {
	t.Parallel() // own topic, table and daemon
	s := need(t)
	topic := createTopic(t, s, "recreated", 3)
	dlq := createTopic(t, s, "recreated.dlq", 1)
	produce(t, s, topic, 300, 0, 1)
	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(root, "orders")
	writePipeline(t, cfgDir, "orders", pipelineYAML("orders-recreated", s, topic, table, "evolve", dlq, ""))
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 90*time.Second, "300 orders written", func() bool { return handled(t, table) == 300 })

	adm := kadm.NewClient(kafkaClient(t, s))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if resp, err := adm.DeleteTopic(ctx, topic); err != nil || resp.Err != nil {
		t.Fatalf("delete topic %s: %v %v", topic, err, resp.Err)
	}
	for { // the broker deletes asynchronously: create again once it can
		resp, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
		if err == nil && resp.Err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create topic %s again: %v %v", topic, err, resp.Err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	produce(t, s, topic, 30, 0, 1001)

	// halted waits until the daemon reports the topic's 3 partitions halted with reason.
	halted := func(d *daemon, reason string, whileRunning func()) {
		t.Helper()
		var parts []int32
		waitFor(t, d, 60*time.Second, "3 partitions halted "+reason, func() bool {
			r, _ := d.readyz(t)
			parts = parts[:0]
			for _, p := range r.Pipelines {
				for _, h := range p.Halted {
					if h.Reason == reason && h.Topic == topic {
						parts = append(parts, h.Partition)
					}
				}
			}
			return len(parts) == 3
		})
		if _, code := d.readyz(t); code != 503 {
			t.Errorf("/readyz with partitions halted %s answers %d, want 503", reason, code)
		}
		if n := handled(t, table); n != 300 {
			t.Errorf("the table handled %d records while halted %s, want still 300", n, reason)
		}
		if whileRunning != nil {
			whileRunning()
		}
		if code := d.stop(t); code != 0 {
			t.Fatalf("ingestd exited %d", code)
		}
		slices.Sort(parts)
		if fmt.Sprint(parts) != "[0 1 2]" {
			t.Errorf("partitions halted %s: %v, want [0 1 2]", reason, parts)
		}
		if lines := logLines(t, d, `"level":"WARN","msg":"fetch error`); lines > 10 {
			t.Errorf("%d fetch error lines, want at most one per partition and failure", lines)
		}
	}
	// The running daemon: the broker stops knowing the topic id it reads.
	halted(d, "topic_deleted", nil)
	// A restart: the new topic's partitions end before the table's txns.
	d = startDaemon(t, cfgDir)
	halted(d, "txn_beyond_log_end", func() {
		// A reset while the pipeline runs would be committed over: refused.
		out, err := exec.Command(ingestdBin(t), "table", "reset-offsets", "--config", filepath.Join(cfgDir, "orders.yaml"),
			"--topic", topic, "--to-earliest").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "has 1 members") || !strings.Contains(string(out), "stop it first") {
			t.Errorf("reset-offsets while the pipeline runs: %v\n%s", err, out)
		}
	})

	out, err := exec.Command(ingestdBin(t), "table", "reset-offsets", "--config", filepath.Join(cfgDir, "orders.yaml"),
		"--topic", topic, "--to-earliest", "--partition", "7").CombinedOutput()
	if want := "has 3 partitions (0 to 2), not 7"; err == nil || !strings.Contains(string(out), want) {
		t.Errorf("reset-offsets --partition 7: %v\n%s\nwant %q", err, out, want)
	}
	out, err = exec.Command(ingestdBin(t), "table", "reset-offsets", "--config", filepath.Join(cfgDir, "orders.yaml"),
		"--topic", topic, "--to-earliest").CombinedOutput()
	if err != nil {
		t.Fatalf("ingestd table reset-offsets: %v\n%s", err, out)
	}
	t.Logf("reset-offsets:\n%s", out)

	d = startDaemon(t, cfgDir)
	waitFor(t, d, 60*time.Second, "the 30 new orders written", func() bool { return handled(t, table) == 30 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}
	ids := map[int64]int{}
	for _, r := range readTable(t, s, table).Rows {
		ids[int64(r["order_id"].(float64))]++
	}
	if len(ids) != 330 {
		t.Errorf("delta-rs reads %d distinct orders, want 330", len(ids))
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("order %d appears %d times", id, n)
		}
	}
	for id := int64(1001); id < 1031; id++ {
		if ids[id] != 1 {
			t.Errorf("new order %d appears %d times, want 1", id, ids[id])
		}
	}
}

// logLines counts the lines of d's log that contain sub.
func logLines(t *testing.T, d *daemon, sub string) int {
	t.Helper()
	b, err := os.ReadFile(d.logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), sub)
}
