package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTableResetOffsets: `ingestd table reset-offsets` moves the txn versions of the
// topic's partitions that the table holds (or of --partition), prints each move, and
// refuses what it cannot do with the reason; with a topic_pattern file, --topic also picks
// the table.
func TestTableResetOffsets(t *testing.T) {
	root := t.TempDir()
	dir := newTestTable(t, filepath.Join(root, "orders"))
	progress := `{"txn":{"appId":"orders-silver-orders-0","version":19,"lastUpdated":1764547200001}}
{"txn":{"appId":"orders-silver-orders-1","version":41,"lastUpdated":1764547200001}}
{"txn":{"appId":"orders-silver-orders-10-0","version":7,"lastUpdated":1764547200001}}
{"commitInfo":{"timestamp":1764547200001,"operation":"STREAMING UPDATE","operationParameters":{}}}
`
	if err := os.WriteFile(filepath.Join(dir, "_delta_log", "00000000000000000001.json"), []byte(progress), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := pipelineFile(t, root, "orders.yaml", "file://"+dir)

	code, stdout, stderr := ingestd(t, "table", "reset-offsets", "--config", cfg, "--topic", "orders", "--to-earliest", "--force")
	want := "orders[0]: from offset 20 to offset 0\norders[1]: from offset 42 to offset 0\nversion 2: RESET OFFSETS; restart the pipeline to read from there\n"
	if code != exitOK || stdout != want || stderr != "" {
		t.Errorf("--to-earliest: exit %d, stdout %q, stderr %q; want 0 and\n%s", code, stdout, stderr, want)
	}
	code, stdout, stderr = ingestd(t, "table", "reset-offsets", "--config", cfg, "--topic", "orders", "--to-offset", "5", "--partition", "1", "--partition", "3", "--force")
	want = "orders[1]: from offset 0 to offset 5\norders[3]: from no txn to offset 5\nversion 3: RESET OFFSETS; restart the pipeline to read from there\n"
	if code != exitOK || stdout != want || stderr != "" {
		t.Errorf("--to-offset 5 --partition 1 --partition 3: exit %d, stdout %q, stderr %q; want 0 and\n%s", code, stdout, stderr, want)
	}
	code, stdout, _ = ingestd(t, "table", "describe", dir, "--json")
	for _, txn := range []string{`"orders-silver-orders-0":-1`, `"orders-silver-orders-1":4`, `"orders-silver-orders-3":4`, `"orders-silver-orders-10-0":7`} {
		if code != exitOK || !strings.Contains(stdout, txn) {
			t.Errorf("describe after the resets lacks %s: exit %d\n%s", txn, code, stdout)
		}
	}

	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--table", dir, "--topic", "orders", "--to-earliest"}, exitUsage, "ingestd table reset-offsets: --config PIPELINE.yaml is required: the offsets are that pipeline's (its app_id)\n"},
		{[]string{"--config", cfg, "--to-earliest"}, exitUsage, "ingestd table reset-offsets: --topic TOPIC is required\n"},
		{[]string{"--config", cfg, "--topic", "orders"}, exitUsage, "ingestd table reset-offsets: give one of --to-earliest and --to-offset N\n"},
		{[]string{"--config", cfg, "--topic", "orders", "--to-earliest", "--to-offset", "3"}, exitUsage, "ingestd table reset-offsets: give one of --to-earliest and --to-offset N\n"},
		{[]string{"--config", cfg, "--topic", "payments", "--to-earliest"}, exitUsage, "--topic payments: pipeline orders-silver (" + cfg + ") reads kafka.topics orders, not payments\n"},
	} {
		code, stdout, stderr := ingestd(t, append([]string{"table", "reset-offsets"}, c.args...)...)
		if code != c.code || stdout != "" || stderr != c.err {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and %q", c.args, code, stdout, stderr, c.code, c.err)
		}
	}
	code, _, stderr = ingestd(t, "table", "reset-offsets", "--config", cfg, "--topic", "orders", "--to-offset", "-2")
	if code != exitUsage || !strings.Contains(stderr, `invalid value "-2" for flag --to-offset: "-2" is not an offset`) {
		t.Errorf("--to-offset -2: exit %d, stderr %q", code, stderr)
	}

	// A topic_pattern file: --topic picks the table (here the same one) for every command.
	routed := filepath.Join(root, "routed.yaml")
	body := `name: cdc
kafka: {brokers: ["127.0.0.1:1"], topic_pattern: 'pg\.(?P<t>[a-z]+)', group: g}
schema_registry: {url: "http://127.0.0.1:1"}
table: {uri: "file://` + root + `/{t}"}
schema: {policy: dead_letter}
dead_letter: {topic: pg.dlq}
`
	if err := os.WriteFile(routed, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = ingestd(t, "table", "schema", "--config", routed, "--topic", "pg.orders")
	if code != exitOK || !strings.HasPrefix(stdout, "root\n |-- order_id") || stderr != "" {
		t.Errorf("schema of a routed file's table: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = ingestd(t, "table", "reset-offsets", "--config", routed, "--topic", "pg.orders", "--to-earliest", "--partition", "0", "--force")
	if want := "pg.orders[0]: from no txn to offset 0\nversion 4: RESET OFFSETS; restart the pipeline to read from there\n"; code != exitOK || stdout != want || stderr != "" {
		t.Errorf("reset-offsets of a routed file's table: exit %d, stdout %q, stderr %q; want\n%s", code, stdout, stderr, want)
	}
	code, _, stderr = ingestd(t, "table", "schema", dir, "--topic", "orders")
	if want := "ingestd table schema: --topic names the table of a kafka.topic_pattern pipeline file: give --config too, or remove --topic\n"; code != exitUsage || stderr != want {
		t.Errorf("--topic without --config: exit %d, stderr %q, want %q", code, stderr, want)
	}
}
