package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceFramed produces one record per schema id to partition 0 of topic: the Confluent
// frame (magic 0, the id) and a one-byte body, key k<i>.
func produceFramed(t *testing.T, s stack, topic string, ids ...uint32) {
	t.Helper()
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i, id := range ids {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(fmt.Sprintf("k%d", i)),
			Value: []byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id), 2}})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryWrongBaseURL: a pipeline whose schema_registry.url is Apicurio Registry's
// root (without /apis/ccompat/v7, where its Confluent-compatible API is) fails at start-up
// within 10 s naming the URL and the one to use, and dead-letters nothing; before the
// start-up probe it ran "ready" and dead-lettered every record as schema_not_found.
func TestRegistryWrongBaseURL(t *testing.T) {
	s := need(t)
	if !strings.HasSuffix(s.registry, "/apis/ccompat/v7") {
		t.Skipf("the stack's registry %s is not Apicurio's ccompat API", s.registry)
	}
	root := strings.TrimSuffix(s.registry, "/apis/ccompat/v7")
	topic := createTopic(t, s, "regurl", 1)
	dlq := createTopic(t, s, "regurl.dlq", 1)
	produce(t, s, topic, 5, 0, 1)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	yaml := pipelineYAML("regurl", s, topic, filepath.Join(dir, "t"), "dead_letter", dlq, "")
	writePipeline(t, cfgDir, "regurl", strings.Replace(yaml, fmt.Sprintf("url: %q", s.registry), fmt.Sprintf("url: %q", root), 1))
	ingestdBin(t)
	start := time.Now()
	d := startDaemon(t, cfgDir)
	select {
	case <-d.done:
	case <-time.After(time.Minute):
		t.Fatal("ingestd still runs 1 min after its start with a wrong registry URL")
	}
	took := time.Since(start)
	logs, _ := os.ReadFile(d.logs.Name())
	var got string
	for _, line := range strings.Split(string(logs), "\n") {
		var l struct{ Msg, Err string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "pipeline failed" {
			got = l.Err
		}
	}
	want := fmt.Sprintf("check schema registry: schema registry %s is not a Confluent-compatible schema registry API: GET /schemas/types answered 404 Not Found (", root)
	wantFix := fmt.Sprintf("(fix: set schema_registry.url to %s, where this server answers as a Confluent-compatible registry)", s.registry)
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, wantFix) {
		t.Errorf("pipeline error\n  %s\nwant prefix\n  %s\nand suffix\n  %s", got, want, wantFix)
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 1 || took > 10*time.Second {
		t.Errorf("exit %d after %v, want 1 within 10s", code, took)
	}
	if n := len(readDLQ(t, s, dlq)); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
}

// TestRegistryAllNotFoundDegraded: records whose schema ids the registry does not know
// (999991, 999992: a producer of another registry) are dead-lettered as schema_not_found;
// after two flushes in a row that dead-letter everything so, /readyz reports the pipeline
// degraded (503) with the ids and the registry, ingestd_schema_not_found_flushes counts
// them and one WARN says so; the dead letters are logged at WARN with their reason and
// count. One record that is written makes it running again (0).
func TestRegistryAllNotFoundDegraded(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "regnf", 1)
	dlq := createTopic(t, s, "regnf.dlq", 1)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(dir, "t")
	writePipeline(t, cfgDir, "regnf", pipelineYAML("regnf", s, topic, table, "dead_letter", dlq, "{max_records: 2, max_bytes: 1MiB, max_age: 200ms}"))
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 30*time.Second, "the pipeline to be running", func() bool {
		r, _ := d.readyz(t)
		return len(r.Pipelines) == 1 && r.Pipelines[0].State == "running"
	})
	produceFramed(t, s, topic, 999991, 999992, 999991, 999992, 999991, 999992)
	waitFor(t, d, 30*time.Second, "six dead letters", func() bool { return len(readDLQ(t, s, dlq)) == 6 })
	waitFor(t, d, 10*time.Second, "the pipeline to be degraded", func() bool {
		r, _ := d.readyz(t)
		return len(r.Pipelines) == 1 && r.Pipelines[0].State == "degraded"
	})
	r, code := d.readyz(t)
	wantErr := fmt.Sprintf("dead-lettered every record as schema_not_found (schema ids [999991 999992] unknown to the schema registry %s): check schema_registry.url", s.registry)
	if code != 503 || r.Ready || !strings.Contains(r.Pipelines[0].Error, wantErr) {
		t.Errorf("/readyz %d ready=%v %+v, want 503 with\n  %s", code, r.Ready, r.Pipelines, wantErr)
	}
	if m := d.metrics(t); metricValue(m, `ingestd_schema_not_found_flushes{pipeline="regnf"}`) < 2 {
		t.Errorf("metric, want at least 2:\n%s", grepLines(m, "schema_not_found_flushes"))
	}
	if !logHasLine(t, d, `"level":"WARN"`, `"msg":"every record of the last flushes was dead-lettered as schema_not_found"`, `"schema_ids":[999991,999992]`) {
		t.Error("no WARN about the schema_not_found flushes")
	}
	// the dead letters themselves: a WARN with the reason and the count, not one INFO per flush
	if !logHasLine(t, d, `"level":"WARN"`, `"msg":"records dead-lettered"`, `"reason":"schema_not_found"`, `"count":`, `"topic":"`+topic+`"`) ||
		logHasLine(t, d, `"level":"INFO"`, `dead-lettered records`) {
		t.Error("dead letters not logged as a WARN with reason and count")
	}
	produce(t, s, topic, 1, 0, 1)
	waitFor(t, d, 30*time.Second, "the pipeline to be running again", func() bool {
		r, _ := d.readyz(t)
		return len(r.Pipelines) == 1 && r.Pipelines[0].State == "running"
	})
	if m := d.metrics(t); !containsLine(m, `ingestd_schema_not_found_flushes{pipeline="regnf"} 0`) {
		t.Errorf("metric after a written record:\n%s", grepLines(m, "schema_not_found_flushes"))
	}
	if n := handled(t, table); n != 7 {
		t.Errorf("handled %d records, want 7", n)
	}
}
