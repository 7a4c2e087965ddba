package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// replaySummary mirrors ingest.ReplaySummary's JSON.
type replaySummary struct {
	Read            int            `json:"read"`
	AlreadyReplayed int            `json:"already_replayed"`
	Duplicates      int            `json:"duplicates"`
	Landed          int            `json:"landed"`
	DeadLettered    map[string]int `json:"dead_lettered"`
	Parked          int            `json:"parked"`
	Carried         int            `json:"carried"`
	Remaining       int            `json:"remaining"`
	Orphans         int            `json:"orphans"`
	Pending         int            `json:"pending"`
	ByReason        map[string]struct {
		Landed       int `json:"landed"`
		DeadLettered int `json:"dead_lettered"`
		Parked       int `json:"parked"`
		Carried      int `json:"carried"`
	} `json:"by_reason"`
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(ingestdBin(t), args...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), &cliError{err: ee, stderr: string(ee.Stderr)}
	}
	return string(out), err
}

type cliError struct {
	err    error
	stderr string
}

func (e *cliError) Error() string { return e.err.Error() + ": " + e.stderr }

func replay(t *testing.T, cfg string, extra ...string) replaySummary {
	t.Helper()
	out, err := runCLI(t, append([]string{"replay", "--config", cfg, "--json"}, extra...)...)
	if err != nil {
		t.Fatalf("ingestd replay %v: %v\n%s", extra, err, out)
	}
	var s replaySummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("replay output %q: %v", out, err)
	}
	return s
}

// TestReplaySilverWorkflow is the replay workflow of docs/dead-letters-and-replay.md:
// silver dead-letters 1,000 orders that carry `channel`; the engineer adds the column with
// `ingestd table alter`, replays (killed halfway once), replays again, and every order is
// in the table exactly once; new records with `channel` then pass directly.
func TestReplaySilverWorkflow(t *testing.T) {
	s := need(t)
	const nV1, nV2 = 10_000, 1_000
	topic := createTopic(t, s, "orders-rp", 3)
	dlq := createTopic(t, s, "orders-rp.dlq", 2)
	createTopicNamed(t, s, dlq+".parked", 1)
	orders := produce(t, s, topic, nV1, nV2, 1)

	dir := t.TempDir()
	table := filepath.Join(dir, "silver", "orders")
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "silver", pipelineYAML("orders-silver", s, topic, table, "dead_letter", dlq, "{max_records: 150, max_bytes: 64MiB, max_age: 300ms}"))
	cfg := filepath.Join(cfgDir, "silver.yaml")

	d := startDaemon(t, cfgDir)
	waitFor(t, d, 3*time.Minute, "silver to handle every record", func() bool { return handled(t, table) == nV1+nV2 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	version := readTable(t, s, table).Version

	// Dry run: nothing fits yet, nothing is written.
	dry := replay(t, cfg, "--dry-run")
	if dry.Read != nV2 || dry.Landed != 0 || dry.DeadLettered["schema_mismatch"] != nV2 {
		t.Fatalf("dry run %+v, want %d read, all schema_mismatch", dry, nV2)
	}
	if v := readTable(t, s, table).Version; v != version {
		t.Fatalf("dry run committed: version %d → %d", version, v)
	}

	// The engineer looks at the dead letters.
	out, err := runCLI(t, "dlq", "inspect", "--config", cfg, "--json", "--samples", "2")
	if err != nil {
		t.Fatalf("dlq inspect: %v", err)
	}
	var rep struct {
		Total    int            `json:"total"`
		ByField  map[string]int `json:"by_field"`
		ByReplay map[string]int `json:"by_replay_count"`
		Samples  []struct {
			Value map[string]any `json:"value"`
		} `json:"samples"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Total != nV2 || rep.ByField["schema_mismatch channel"] != nV2 || rep.ByReplay["0"] != nV2 || len(rep.Samples) != 2 {
		t.Fatalf("dlq inspect: %s", out)
	}
	if id := int64(rep.Samples[0].Value["order_id"].(float64)); id <= nV1 || rep.Samples[0].Value["channel"] == nil && orders[id-1].Channel != nil {
		t.Errorf("sample not decoded as the original v2 order: %v", rep.Samples[0].Value)
	}

	// The engineer adds the column.
	if out, err := runCLI(t, "table", "alter", "--config", cfg, "--add-column", "channel STRING"); err != nil || !strings.Contains(out, "ADD COLUMNS channel string") {
		t.Fatalf("table alter: %v\n%s", err, out)
	}

	// Replay, killed with SIGKILL after its first commit, then run again to the end. The
	// killed run uses small batches (same pipeline, same table) so it is caught midway.
	smallDir := filepath.Join(dir, "small")
	mustMkdir(t, smallDir)
	writePipeline(t, smallDir, "silver", pipelineYAML("orders-silver", s, topic, table, "dead_letter", dlq, "{max_records: 5, max_bytes: 64MiB, max_age: 300ms}"))
	after := readVersion(t, table)
	cmd := exec.Command(ingestdBin(t), "replay", "--config", filepath.Join(smallDir, "silver.yaml"), "--json")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // the wait below failed the test before the kill
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	// Polled every 5 ms: the kill must land soon after the first commit, mid-replay.
	waitForEvery(t, nil, 2*time.Minute, 5*time.Millisecond, "the replay's first commit", func() bool { return readVersion(t, table) != after })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	mid := countRows(t, s, table)
	t.Logf("replay killed with %d of %d rows in the table", mid, nV1+nV2)
	if mid <= nV1 || mid >= nV1+nV2 {
		t.Fatalf("the kill did not land mid-replay (%d rows): the test did not exercise a crash", mid)
	}

	second := replay(t, cfg)
	if second.Parked != 0 || len(second.DeadLettered) != 0 {
		t.Errorf("second replay %+v: nothing should fail", second)
	}
	checkOrders(t, "silver", readTable(t, s, table), orders, true)

	// Replaying again lands nothing.
	third := replay(t, cfg)
	if third.Landed != 0 || third.Read != 0 || third.AlreadyReplayed != nV2 {
		t.Errorf("third replay %+v, want nothing read and %d already replayed", third, nV2)
	}
	if n := countRows(t, s, table); n != nV1+nV2 {
		t.Errorf("after a third replay: %d rows", n)
	}

	// New records with channel now pass directly.
	produce(t, s, topic, 0, 10, 20_001)
	d2 := startDaemon(t, cfgDir)
	waitFor(t, d2, time.Minute, "the new v2 records", func() bool { return handled(t, table) == nV1+nV2+10 })
	if code := d2.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if n := countRows(t, s, table); n != nV1+nV2+10 {
		t.Errorf("table has %d rows, want %d", n, nV1+nV2+10)
	}
	if got := len(readDLQ(t, s, dlq)); got != nV2 {
		t.Errorf("DLQ holds %d records, want the original %d (nothing re-dead-lettered)", got, nV2)
	}
}

// TestReplayStillFailingIsParked: records that still do not fit are dead-lettered again
// with ingestd.replay.count + 1, and past --max-replays parked, keeping their original
// source coordinates.
func TestReplayStillFailingIsParked(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "rp-park", 1)
	dlq := createTopic(t, s, "rp-park.dlq", 1)
	createTopicNamed(t, s, dlq+".parked", 1)
	// An hour-old timestamp: dead letters keep it, and a delivery timeout measured from it
	// once made every re-dead-letter fail at once, forever.
	produce(t, s, topic, 5, 3, 1, "--timestamp-ms", strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10))
	dir := t.TempDir()
	table := filepath.Join(dir, "t")
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "silver", pipelineYAML("rp-park", s, topic, table, "dead_letter", dlq, "{max_records: 100, max_bytes: 1MiB, max_age: 200ms}"))
	cfg := filepath.Join(cfgDir, "silver.yaml")
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "all records handled", func() bool { return handled(t, table) == 8 })
	d.stop(t)

	first := replay(t, cfg, "--max-replays", "1")
	if first.Read != 3 || first.DeadLettered["schema_mismatch"] != 3 || first.Parked != 0 {
		t.Fatalf("first replay %+v", first)
	}
	second := replay(t, cfg, "--max-replays", "1")
	if second.Read != 3 || second.Parked != 3 || second.AlreadyReplayed != 3 {
		t.Fatalf("second replay %+v", second)
	}
	recs := readDLQ(t, s, dlq)
	if len(recs) != 6 {
		t.Fatalf("DLQ holds %d records, want 3 originals + 3 re-dead-lettered", len(recs))
	}
	for i, r := range recs {
		want := "0"
		if i >= 3 {
			want = "1"
		}
		if r.headers["ingestd.replay.count"] != want || r.headers["__connect.errors.topic"] != topic || r.headers["__connect.errors.offset"] != recs[i%3].headers["__connect.errors.offset"] {
			t.Errorf("DLQ record %d: count %s topic %s offset %s", i, r.headers["ingestd.replay.count"], r.headers["__connect.errors.topic"], r.headers["__connect.errors.offset"])
		}
		if string(r.value) != string(recs[i%3].value) {
			t.Errorf("DLQ record %d: value changed", i)
		}
	}
	parked := readDLQ(t, s, dlq+".parked")
	if len(parked) != 3 {
		t.Fatalf("parked holds %d, want 3", len(parked))
	}
	for i, r := range parked {
		if r.headers["ingestd.replay.count"] != "2" || r.headers["__connect.errors.offset"] != recs[i].headers["__connect.errors.offset"] {
			t.Errorf("parked %d: headers %v", i, r.headers)
		}
	}
	if third := replay(t, cfg, "--max-replays", "1"); third.Read != 0 {
		t.Errorf("third replay read %d, want 0", third.Read)
	}
}

// readVersion is the table's latest commit version, from the log directory listing.
func readVersion(t *testing.T, table string) int64 {
	t.Helper()
	var v int64 = -1
	files, _ := filepath.Glob(filepath.Join(table, "_delta_log", "*.json"))
	for _, f := range files {
		if n, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(f), ".json"), 10, 64); err == nil && n > v {
			v = n
		}
	}
	return v
}

func countRows(t *testing.T, s stack, table string) int { return len(readTable(t, s, table).Rows) }
