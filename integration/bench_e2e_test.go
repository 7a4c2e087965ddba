package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchHarnessSmall runs the pieces of scripts/bench-e2e.sh (docs/performance.md) on a
// small topic against the real stack, so the harness cannot rot between benchmark runs:
// cmd/benche2e's producer writes 3,000 framed records of exactly 200 bytes, the
// consume-only baseline reads them all, and `benche2e run` drives `ingestd run` until
// every row is committed, then counts the table with delta-rs.
func TestBenchHarnessSmall(t *testing.T) {
	s := need(t)
	bin := ingestdBin(t)
	dir := t.TempDir()
	bench := filepath.Join(dir, "benche2e")
	build := exec.Command("go", "build", "-o", bench, "./cmd/benche2e")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/benche2e: %v\n%s", err, out)
	}
	benchCmd := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bench, args...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "KAFKA_BROKERS="+s.brokers, "SCHEMA_REGISTRY_URL="+s.registry)
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("benche2e %s: %v\n%s", args[0], err, stderr)
		}
		return out
	}
	topic := fmt.Sprintf("bench-smoke-%d", time.Now().UnixNano())

	var prod struct {
		Records, Bytes int64
		RecordBytes    int `json:"record_bytes"`
	}
	if err := json.Unmarshal(benchCmd("produce", "-topic", topic, "-partitions", "2", "-n", "3000", "-size", "200"), &prod); err != nil {
		t.Fatal(err)
	}
	if prod.Records != 3000 || prod.Bytes != 600_000 || prod.RecordBytes != 200 {
		t.Fatalf("produce reported %+v, want 3000 records of 200 B, 600000 bytes", prod)
	}

	type row struct {
		Records     int64   `json:"records"`
		Bytes       int64   `json:"bytes"`
		CPUSeconds  float64 `json:"cpu_seconds"`
		PeakRSSMiB  float64 `json:"peak_rss_mib"`
		Files       int     `json:"files"`
		Commits     int     `json:"commits"`
		RowsChecked int64   `json:"rows_checked"`
		UniqueIDs   int64   `json:"unique_ids"`
	}
	var base row
	if err := json.Unmarshal(benchCmd("consume", "-topic", topic, "-record-bytes", "200"), &base); err != nil {
		t.Fatal(err)
	}
	if base.Records != 3000 || base.Bytes != 600_000 || base.RowsChecked != -1 || base.PeakRSSMiB <= 0 {
		t.Fatalf("consume-only baseline: %+v, want 3000 records, 600000 bytes, no table", base)
	}

	cfg := filepath.Join(dir, "pipelines")
	mustMkdir(t, cfg)
	table := filepath.Join(dir, "table")
	listen := freePort(t)
	writePipeline(t, cfg, "bench.yaml", fmt.Sprintf(`name: bench
kafka: {brokers: ["%s"], topics: [%s], group: g-%s, start_offset: earliest}
schema_registry: {url: "%s"}
table: {uri: "file://%s", create: true, partition_by: []}
schema: {policy: evolve, on_incompatible: halt, allow_table_features: []}
dead_letter: {topic: %s.dlq}
batch: {max_records: 1000, max_bytes: 128MiB, max_age: 30s}
`, s.brokers, topic, topic, s.registry, table, topic))
	var w row
	out := benchCmd("run", "-label", "ingestd", "-topic", topic, "-want", "3000", "-record-bytes", "200",
		"-table", table, "-metrics", "http://"+listen+"/metrics", "-python", s.python, "-timeout", "60s",
		"-log", filepath.Join(dir, "ingestd.log"), "-env", "GOMAXPROCS=1",
		"--", bin, "run", "--config", cfg, "--listen", listen)
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatal(err)
	}
	// max_records 1000 of 3000 records already in the topic: three flushes cut by count, each
	// one commit of one file (max_age 30 s never fires within the 60 s limit before them).
	if w.Records != 3000 || w.RowsChecked != 3000 || w.UniqueIDs != 3000 || w.Commits != 3 || w.Files != 3 || w.CPUSeconds <= 0 || w.PeakRSSMiB <= 0 {
		logs, _ := os.ReadFile(filepath.Join(dir, "ingestd.log"))
		t.Fatalf("benche2e run: %s\nwant 3000 rows and ids by delta-rs, 3 commits of 1 file\n%s", out, logs)
	}
	if !strings.Contains(string(out), `"label":"ingestd"`) {
		t.Fatalf("run output lacks its label: %s", out)
	}
}
