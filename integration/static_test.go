package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStaticMembershipRestart measures restart-to-first-commit after kill -9, with and
// without kafka.instance_id, at the default session_timeout (45 s): a static member gets
// its partitions back at once; a dynamic one waits for the dead member's session to
// expire. Then a second process with the same instance_id fences the first, which fails
// with a message naming the id (a zombie detector), while the new one goes on.
func TestStaticMembershipRestart(t *testing.T) {
	s := need(t)
	const n1, n2 = 300, 100
	restart := func(name, instanceID string) (time.Duration, string, string) {
		topic := createTopic(t, s, "static-"+name, 3)
		dlq := createTopic(t, s, "static-"+name+".dlq", 1)
		produce(t, s, topic, n1, 0, 1)
		dir := t.TempDir()
		cfgDir := filepath.Join(dir, "configs")
		mustMkdir(t, cfgDir)
		table := filepath.Join(dir, name)
		inst := ""
		if instanceID != "" {
			inst = "\n  instance_id: " + instanceID
		}
		writePipeline(t, cfgDir, name, fmt.Sprintf(`name: %s
kafka:
  brokers: [%s]
  topics: [%s]
  group: %s-%d
  session_timeout: 45s%s
schema_registry: {url: %q}
table: {uri: "file://%s", create: true}
schema: {policy: evolve}
dead_letter: {topic: %s}
batch: {max_records: 2000, max_bytes: 64MiB, max_age: 500ms}
`, name, s.brokers, topic, name, time.Now().UnixNano(), inst, s.registry, table, dlq))
		d := startDaemon(t, cfgDir)
		waitFor(t, d, 60*time.Second, name+": the first records", func() bool { return handled(t, table) == n1 })
		d.kill9(t)
		produce(t, s, topic, n2, 0, n1+1)
		start := time.Now()
		d2 := startDaemon(t, cfgDir)
		waitFor(t, d2, 2*time.Minute, name+": the records produced after kill -9", func() bool { return handled(t, table) == n1+n2 })
		took := time.Since(start)
		if instanceID == "" {
			if code := d2.stop(t); code != 0 {
				t.Errorf("%s: exit code %d", name, code)
			}
			return took, "", ""
		}
		// the same instance_id again: the running process is fenced
		d3 := startDaemon(t, cfgDir)
		select {
		case <-d2.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: the older process still runs 60 s after another joined with its instance_id", name)
		}
		logs, _ := os.ReadFile(d2.logs.Name())
		produce(t, s, topic, n2, 0, n1+n2+1)
		waitFor(t, d3, time.Minute, name+": the new process to consume", func() bool { return handled(t, table) == n1+2*n2 })
		if code := d3.stop(t); code != 0 {
			t.Errorf("%s: exit code %d", name, code)
		}
		return took, string(logs), fmt.Sprintf("%d", d2.cmd.ProcessState.ExitCode())
	}
	id := fmt.Sprintf("pod-%d", time.Now().UnixNano())
	static, fencedLog, fencedExit := restart("static", id)
	dynamic, _, _ := restart("dynamic", "")
	t.Logf("restart-to-first-commit after kill -9 (session_timeout 45s): static member %v, dynamic member %v", static.Round(100*time.Millisecond), dynamic.Round(100*time.Millisecond))
	if static > 15*time.Second {
		t.Errorf("a static member took %v to commit after a restart, want < 15 s (no rebalance)", static)
	}
	if dynamic < 30*time.Second {
		t.Errorf("a dynamic member took only %v: the test does not show the dead member's session (45 s)", dynamic)
	}
	want := `kafka: another consumer joined group static-`
	if fencedExit != "1" || !strings.Contains(fencedLog, want) || !strings.Contains(fencedLog, fmt.Sprintf(`with kafka.instance_id \"%s\", fencing this one`, id)) {
		t.Errorf("the fenced process: exit %s, log lacks the fence message:\n%s", fencedExit, fencedLog)
	}
}
