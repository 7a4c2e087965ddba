package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestKafkaToolWrappers: scripts/kafka-topics.sh, the tool the error messages and the
// README name, runs from the stack's jars: it creates a topic the broker then lists with
// its partitions, and describes it.
func TestKafkaToolWrappers(t *testing.T) {
	s := need(t)
	name := fmt.Sprintf("tools-%d.parked", time.Now().UnixNano())
	bootstrap := strings.Split(s.brokers, ",")[0]
	tool := filepath.Join(repoRoot, "scripts", "kafka-topics.sh")
	if out, err := exec.Command(tool, "--bootstrap-server", bootstrap, "--create", "--topic", name, "--partitions", "3").CombinedOutput(); err != nil {
		t.Fatalf("kafka-topics.sh --create: %v\n%s", err, out)
	}
	td, err := kadm.NewClient(kafkaClient(t, s)).ListTopics(context.Background(), name)
	if err != nil || td.Error() != nil || len(td[name].Partitions) != 3 {
		t.Fatalf("after kafka-topics.sh --create: %v %v %+v; want %s with 3 partitions", err, td.Error(), td[name], name)
	}
	out, err := exec.Command(tool, "--bootstrap-server", bootstrap, "--describe", "--topic", name).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Topic: "+name) || !strings.Contains(string(out), "PartitionCount: 3") {
		t.Fatalf("kafka-topics.sh --describe: %v\n%s", err, out)
	}
}
