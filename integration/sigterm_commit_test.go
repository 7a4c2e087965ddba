package integration

import (
	"path/filepath"
	"testing"
	"time"
)

// TestSigtermNoLateOffsetCommitWarning: records buffered at SIGTERM (batch.max_age 1 h
// keeps them there) are flushed by the drain, whose advisory group offset commit used to
// be answered after the client had left the group: the Kafka client then logged "received
// an OffsetCommitResponse after our group session has ended" at WARN on every clean stop.
// Three stops, each with the drain's commit, must exit 0 with every record in the table
// and no such line.
func TestSigtermNoLateOffsetCommitWarning(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "termcommit", 1)
	dlq := createTopic(t, s, "termcommit.dlq", 1)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(dir, "t")
	writePipeline(t, cfgDir, "termcommit", pipelineYAML("termcommit", s, topic, table, "dead_letter", dlq, "{max_records: 100000, max_bytes: 64MiB, max_age: 1h}"))
	for round := int64(1); round <= 3; round++ {
		d := startDaemon(t, cfgDir)
		waitFor(t, d, 30*time.Second, "the pipeline to run", func() bool {
			r, _ := d.readyz(t)
			return len(r.Pipelines) == 1 && r.Pipelines[0].State == "running"
		})
		produce(t, s, topic, 20, 0, 1+(round-1)*20)
		waitFor(t, d, 30*time.Second, "20 records read", func() bool {
			return metricValue(d.metrics(t), `ingestd_records_consumed_total{pipeline="termcommit"}`) == 20
		})
		if code := d.stop(t); code != 0 {
			t.Fatalf("round %d: exit %d after SIGTERM", round, code)
		}
		if n := handled(t, table); n != 20*round {
			t.Fatalf("round %d: %d records handled, want %d", round, n, 20*round)
		}
		if logHasLine(t, d, "OffsetCommitResponse after our group session has ended") {
			t.Errorf("round %d: the clean stop logged an offset commit answered after the group session ended", round)
		}
	}
}
