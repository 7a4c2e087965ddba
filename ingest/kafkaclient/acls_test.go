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

// A pipeline with kafka.topic_pattern needs READ on the topics it will discover: a
// prefixed ACL on the pattern's literal prefix, or every topic when it has none; and,
// with key_format avro, the key subject of each.
func TestACLsTopicPattern(t *testing.T) {
	cfg := &config.Config{Kafka: config.Kafka{TopicPattern: `pg\.public\.(?P<t>.+)`, Group: "ingestd-cdc",
		SASL: &config.SASL{Mechanism: config.MechScram512, Username: "ingestd"}}}
	cfg.Table.KeyFormat = "avro"
	var lines []string
	for _, a := range ACLs(cfg) {
		lines = append(lines, a.Line(cfg.Kafka)+"   # "+a.Note)
	}
	want := []string{
		"kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:ingestd --operation Read --topic pg.public. --resource-pattern-type prefixed   # the topics matching kafka.topic_pattern, all named pg.public.…",
		"kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:ingestd --operation Read --group ingestd-cdc   # ",
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("ACLs\n got %q\nwant %q", lines, want)
	}
	cfg.Kafka.TopicPattern = `(pg|my)\..+`
	if a := ACLs(cfg)[0]; a.Line(cfg.Kafka) != "kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:ingestd --operation Read --topic '*'" || a.Prefixed {
		t.Errorf("ACL of a pattern without literal prefix = %+v, want READ on every topic", a)
	}
	perms := RegistryPermissions(cfg)
	if got, want := perms[len(perms)-1], "GET /subjects/<topic>-key/versions/latest for each topic matching kafka.topic_pattern (table.key_format: avro)"; got != want {
		t.Errorf("last registry permission %q, want %q", got, want)
	}
}
