package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRestartAfterKill9WaitsForAssignment: a pipeline without kafka.instance_id is killed
// with kill -9 and started again at once. The group coordinator keeps the dead member's
// partition until its session (kafka.session_timeout, 10 s here) expires, so the new
// process waits for its first assignment. While it does, /readyz must say so
// (waiting_for_assignment, 503, with the likely reason after 5 s), a WARN must name the
// reason, and the assignment must be logged with the time waited; then the pipeline runs.
// Before, the wait was silent and /readyz said "running".
func TestRestartAfterKill9WaitsForAssignment(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "assignwait", 1)
	dlq := createTopic(t, s, "assignwait.dlq", 1)
	produce(t, s, topic, 10, 0, 1)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(dir, "t")
	yaml := pipelineYAML("assignwait", s, topic, table, "dead_letter", dlq, "{max_records: 100, max_bytes: 1MiB, max_age: 200ms}")
	writePipeline(t, cfgDir, "assignwait", strings.Replace(yaml, "session_timeout: 6s", "session_timeout: 10s", 1))
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "10 records handled", func() bool { return handled(t, table) == 10 })
	d.kill9(t)

	start := time.Now()
	d = startDaemon(t, cfgDir)
	var waitingSeen, reasonSeen bool
	var running time.Duration
	waitForEvery(t, d, time.Minute, 50*time.Millisecond, "the restarted pipeline to run", func() bool {
		r, code := d.readyz(t)
		if len(r.Pipelines) != 1 {
			return false
		}
		p := r.Pipelines[0]
		switch p.State {
		case "waiting_for_assignment":
			if code != 503 || r.Ready {
				t.Errorf("/readyz while waiting: %d ready=%v", code, r.Ready)
			}
			waitingSeen = waitingSeen || strings.HasPrefix(p.Error, "waiting for consumer group ")
			reasonSeen = reasonSeen || strings.Contains(p.Error, "the coordinator is likely waiting for a previous member's session to expire (a process killed without leaving the group, e.g. kill -9, holds its partitions for up to kafka.session_timeout, 10s)")
		case "running":
			running = time.Since(start)
			return true
		}
		return false
	})
	if !waitingSeen || !reasonSeen {
		t.Errorf("/readyz never showed waiting_for_assignment (%v) with the likely reason (%v)", waitingSeen, reasonSeen)
	}
	if !logHasLine(t, d, `"level":"WARN"`, `"msg":"waiting for the first partition assignment"`, `"session_timeout":10000000000`, `previous member's session`) {
		t.Error("no WARN about the wait for the first assignment")
	}
	logs, _ := os.ReadFile(d.logs.Name())
	var waited time.Duration
	for _, line := range strings.Split(string(logs), "\n") {
		var l struct {
			Msg        string
			Waited     time.Duration // nanoseconds in the JSON log
			Partitions int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "first partitions assigned" {
			waited = l.Waited
			if l.Partitions != 1 {
				t.Errorf("first assignment: %d partitions, want 1", l.Partitions)
			}
		}
	}
	if waited < 5*time.Second || waited > running {
		t.Errorf("first assignment logged after %v, want between 5 s (the warning) and %v (running)", waited, running)
	}
	produce(t, s, topic, 1, 0, 11)
	waitFor(t, d, 30*time.Second, "11 records handled", func() bool { return handled(t, table) == 11 })
	t.Logf("restart after kill -9: running %v after the start; logged first assignment after %v", running.Round(time.Millisecond), waited)
}
