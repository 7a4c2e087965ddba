package integration

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// produceHex produces raw values (hex) to partition 0 of topic with produce_raw.py.
func produceHex(t *testing.T, s stack, topic string, values ...string) {
	t.Helper()
	if len(values) == 0 {
		return
	}
	var spec []map[string]any
	for i, v := range values {
		spec = append(spec, map[string]any{"value_hex": v, "key": fmt.Sprintf("k%d", i)})
	}
	b, _ := json.Marshal(spec)
	f := filepath.Join(t.TempDir(), "raw.json")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "produce_raw.py"), "--brokers", s.brokers, "--topic", topic, "--spec", f)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("produce_raw.py: %v\n%s", err, out)
	}
}

// TestProgressBeforeTheTableExists on the real broker: a dead_letter
// pipeline whose table does not exist and whose records all fail (an unknown schema id,
// then poison pills) keeps its progress in the Kafka group offset: restarted twice, its
// DLQ holds each record once (before: the DLQ grew by the whole backlog at every
// restart). Once a record fits, the table is created with the txn past those dead
// letters, and a replay after the schema is registered lands the three exactly once.
func TestProgressBeforeTheTableExists(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "notable", 1)
	dlq := createTopic(t, s, "notable.dlq", 1)
	createTopicNamed(t, s, dlq+".parked", 1)
	state := filepath.Join(t.TempDir(), "state.json")
	script := filepath.Join(repoRoot, "integration", "testdata", "future_schema.py")
	if out, err := exec.Command(s.python, script, "produce", "--brokers", s.brokers, "--registry", s.registry, "--topic", topic, "--out", state).CombinedOutput(); err != nil {
		t.Fatalf("future_schema.py produce: %v\n%s", err, out)
	}
	dir := t.TempDir()
	table := filepath.Join(dir, "t")
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "silver", pipelineYAML("notable", s, topic, table, "dead_letter", dlq, "{max_records: 100, max_bytes: 1MiB, max_age: 200ms}"))
	run := func(want int, pills ...string) {
		t.Helper()
		produceHex(t, s, topic, pills...)
		d := startDaemon(t, cfgDir)
		waitFor(t, d, time.Minute, fmt.Sprintf("%d dead letters", want), func() bool { return len(readDLQ(t, s, dlq)) >= want })
		if code := d.stop(t); code != 0 {
			t.Fatalf("exit code %d", code)
		}
		if n := len(readDLQ(t, s, dlq)); n != want {
			t.Fatalf("DLQ holds %d records after a restart, want %d (each record once)", n, want)
		}
	}
	run(3)
	run(4, "7b226964223a317d") // restart: a JSON value, bad_magic
	run(5, "7b226964223a327d") // and again
	if _, err := os.Stat(filepath.Join(table, "_delta_log")); !os.IsNotExist(err) {
		t.Fatalf("a table exists before any record fits: %v", err)
	}

	// Register the late schema, then produce an order framed with its id: it creates the table.
	out, err := exec.Command(s.python, script, "register", "--registry", s.registry, "--state", state).Output()
	if err != nil {
		t.Fatalf("future_schema.py register: %v", err)
	}
	var ids struct{ ID, Want int }
	if err := json.Unmarshal(out, &ids); err != nil || ids.ID != ids.Want {
		t.Fatalf("the registry assigned id %d, want %d (someone else registered in between?): %s", ids.ID, ids.Want, out)
	}
	frame := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(frame[1:], uint32(ids.ID))
	// order_id 5 (zigzag varint 0x0a), status "NEW" (length 3 as 0x06)
	produceHex(t, s, topic, hex.EncodeToString(frame)+"0a064e4557")
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "the creating commit", func() bool { return handled(t, table) == 6 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if n := len(readDLQ(t, s, dlq)); n != 5 {
		t.Fatalf("DLQ holds %d records, want 5", n)
	}
	sum := replay(t, filepath.Join(cfgDir, "silver.yaml"))
	if sum.Landed != 3 || sum.DeadLettered["bad_magic"] != 2 || sum.Orphans != 0 || sum.Pending != 0 || sum.Duplicates != 0 {
		t.Fatalf("replay %+v, want the 3 late-schema records landed and the 2 pills dead-lettered again", sum)
	}
	if n := countRows(t, s, table); n != 4 {
		t.Errorf("table has %d rows, want 4", n)
	}
	again := replay(t, filepath.Join(cfgDir, "silver.yaml"))
	if again.Landed != 0 || countRows(t, s, table) != 4 {
		t.Errorf("a second replay landed %d (table %d rows), want nothing new", again.Landed, countRows(t, s, table))
	}
}
