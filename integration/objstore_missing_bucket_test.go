package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMissingBucketNamed: a pipeline whose table is in a bucket (S3) or container (Azure)
// that does not exist fails to open with the bucket's name and the command that creates
// it, not only the store's NoSuchBucket / ContainerNotFound, and the run's last log line
// says that it failed (it used to say "all pipelines stopped pipelines=0 failed=0" first).
func TestMissingBucketNamed(t *testing.T) {
	s := need(t)
	needStore(t, "s3")
	needStore(t, "azure")
	topic := createTopic(t, s, "nobucket", 1)
	stamp := fmt.Sprint(time.Now().UnixNano())
	want := map[string]string{
		"nobucket-s3":    fmt.Sprintf(`bucket "nb%s" does not exist (fix: create it, e.g. aws s3 mb s3://nb%s, or correct table.uri): `, stamp, stamp),
		"nobucket-azure": fmt.Sprintf(`container "nb%s" does not exist (fix: create it, e.g. az storage container create --name nb%s, or correct table.uri): `, stamp, stamp),
	}
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "s3", pipelineYAMLAt("nobucket-s3", s, topic, "s3://nb"+stamp+"/orders", "dead_letter", topic+".dlq"))
	writePipeline(t, cfgDir, "azure", pipelineYAMLAt("nobucket-azure", s, topic, "az://nb"+stamp+"/orders", "dead_letter", topic+".dlq"))
	d := startDaemon(t, cfgDir)
	select {
	case <-d.done:
	case <-time.After(time.Minute):
		t.Fatal("ingestd still runs 1 min after its start with missing buckets")
	}
	logs, _ := os.ReadFile(d.logs.Name())
	lines := strings.Split(strings.TrimSpace(string(logs)), "\n")
	got := map[string]string{}
	for _, line := range lines {
		var l struct{ Msg, Pipeline, Err string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "pipeline failed to open; the others run" {
			got[l.Pipeline] = l.Err
		}
	}
	for p, w := range want {
		if !strings.Contains(got[p], w) {
			t.Errorf("%s: error\n  %s\nwant it to contain\n  %s", p, got[p], w)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, `"msg":"pipelines stopped; some failed","pipelines":2,"failed":2,"failed_to_open":2`) ||
		strings.Contains(string(logs), "all pipelines stopped") {
		t.Errorf("last line %s", last)
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}
