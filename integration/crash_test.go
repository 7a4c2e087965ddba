package integration

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestCrashSmoke kills `ingestd run` with SIGKILL twice while it is ingesting and restarts
// it; the bronze table must end with every order exactly once (by order_id), read by delta-rs.
func TestCrashSmoke(t *testing.T) {
	s := need(t)
	const n = 30_000
	cfgDir, table, orders := backlogPipeline(t, s, "orders-crash", n)

	// Kill as soon as the table shows progress past the last kill point, so each kill
	// lands mid-stream with records consumed but not yet committed.
	crashTwice(t, cfgDir, n, func() int64 { return handled(t, table) })
	checkEveryOrder(t, s, table, orders, "after two crashes")
}

// backlogPipeline produces n orders to a new 3-partition topic named from base (and its
// .dlq) and writes an evolve pipeline of them into a bronze table of batches of 300
// records (64 MiB, 200 ms): a backlog the daemon ingests in about 100 commits. It returns
// the config directory, the table path and the orders produced.
func backlogPipeline(t *testing.T, s stack, base string, n int) (cfgDir, table string, orders []order) {
	t.Helper()
	topic := createTopic(t, s, base, 3)
	dlq := createTopic(t, s, base+".dlq", 1)
	orders = produce(t, s, topic, n, 0, 1)
	dir := t.TempDir()
	table = filepath.Join(dir, "bronze", "orders")
	cfgDir = filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "bronze", pipelineYAML(base, s, topic, table, "evolve", dlq,
		"{max_records: 300, max_bytes: 64MiB, max_age: 200ms}"))
	return cfgDir, table, orders
}

// checkEveryOrder reads the bronze table with delta-rs and asserts it holds every order
// exactly once (duplicates are reported by rowsByID) with its values; when names the
// moment in the failure messages.
func checkEveryOrder(t *testing.T, s stack, table string, orders []order, when string) {
	t.Helper()
	data := readTable(t, s, table)
	if len(data.Rows) != len(orders) {
		t.Errorf("bronze has %d rows %s, want %d", len(data.Rows), when, len(orders))
	}
	rows := rowsByID(t, "bronze", data)
	for _, o := range orders {
		r, ok := rows[o.OrderID]
		if !ok {
			t.Errorf("order %d is missing", o.OrderID)
			continue
		}
		checkRow(t, "bronze", r, o, false)
	}
}

// crashTwice runs the pipelines of cfgDir and kills the daemon with SIGKILL twice, each
// time as soon as committed (the table's handled records) passes the last kill point and
// n/5, then n/2, failing t if a kill came after the last commit; a third daemon must
// then handle all n records within 3 minutes and exit 0 on SIGTERM.
func crashTwice(t *testing.T, cfgDir string, n int64, committed func() int64) {
	t.Helper()
	var last int64
	for i, at := range []int64{n / 5, n / 2} {
		d := startDaemon(t, cfgDir)
		waitFor(t, d, 2*time.Minute, fmt.Sprintf("progress past %d records before kill %d", at, i+1), func() bool {
			return committed() > max(last, at)
		})
		d.kill9(t)
		last = committed()
		t.Logf("kill -9 #%d with %d of %d records committed", i+1, last, n)
		if last >= n {
			t.Fatalf("kill -9 #%d came after the last commit: the test did not crash mid-stream", i+1)
		}
	}
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 3*time.Minute, "all records handled after two crashes", func() bool { return committed() == n })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}

// TestSigtermMidStream sends SIGTERM to `ingestd run` while it ingests a backlog (a batch
// in flight in the flush worker, the next one buffered behind it: batches of 300): it
// must exit 0 within the drain, having committed a prefix of each partition (txn versions
// never ahead of the rows), and a restarted daemon ends with every order exactly once, read
// by delta-rs with its values.
func TestSigtermMidStream(t *testing.T) {
	s := need(t)
	const n = 30_000
	cfgDir, table, orders := backlogPipeline(t, s, "orders-term", n)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 2*time.Minute, "progress past n/3", func() bool { return handled(t, table) > n/3 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM mid-stream", code)
	}
	at := handled(t, table)
	if at >= n {
		t.Fatalf("SIGTERM came after the last commit (%d of %d handled): the test did not stop mid-stream", at, n)
	}
	if mid := readTable(t, s, table); int64(len(mid.Rows)) != at {
		t.Fatalf("after SIGTERM the table holds %d rows and its txns account for %d records, want equal", len(mid.Rows), at)
	}
	t.Logf("SIGTERM with %d of %d records committed", at, n)
	d = startDaemon(t, cfgDir)
	waitFor(t, d, 3*time.Minute, "all records handled after the restart", func() bool { return handled(t, table) == n })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	checkEveryOrder(t, s, table, orders, "after SIGTERM and a restart")
}
