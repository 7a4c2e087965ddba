package kafkaclient

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ingestd/ingestd/ingest/config"
)

// TestDescribeConfigsFix: log cleanup's warning for a dead-letter topic whose configs the
// principal may not describe names the DESCRIBE_CONFIGS ACL and the kafka-acls.sh command.
func TestDescribeConfigsFix(t *testing.T) {
	k := config.Kafka{SASL: &config.SASL{Mechanism: config.MechScram512, Username: "ingestd"}}
	err := fmt.Errorf("describe topic orders.dlq: %w", kerr.TopicAuthorizationFailed)
	want := "User:ingestd (SCRAM-SHA-512) is missing DESCRIBE_CONFIGS on topic orders.dlq (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:ingestd --operation DescribeConfigs --topic orders.dlq); until then log cleanup of this table stays off, nothing else fails"
	if got := DescribeConfigsFix(k, "orders.dlq", err); got != want {
		t.Errorf("DescribeConfigsFix\n got %q\nwant %q", got, want)
	}
	if got := DescribeConfigsFix(k, "orders.dlq", errors.New("i/o timeout")); got != "" {
		t.Errorf("DescribeConfigsFix of a network error = %q, want none", got)
	}
}
