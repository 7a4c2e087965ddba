package maintain

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ingestd/ingestd/ingest/config"
)

func TestHoldFromConfigs(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name string
		cfgs []kadm.Config
		want time.Duration
		err  bool
	}{
		{"7 days + 7 days segments", []kadm.Config{{Key: "cleanup.policy", Value: s("delete")}, {Key: "retention.ms", Value: s("604800000")}, {Key: "segment.ms", Value: s("604800000")}}, 14*24*time.Hour + time.Hour, false},
		{"1 h + 10 min", []kadm.Config{{Key: "retention.ms", Value: s("3600000")}, {Key: "segment.ms", Value: s("600000")}}, 2*time.Hour + 10*time.Minute, false},
		{"infinite retention", []kadm.Config{{Key: "retention.ms", Value: s("-1")}, {Key: "segment.ms", Value: s("600000")}}, -1, false},
		{"compacted", []kadm.Config{{Key: "cleanup.policy", Value: s("compact,delete")}, {Key: "retention.ms", Value: s("1000")}, {Key: "segment.ms", Value: s("1000")}}, -1, false},
		{"missing segment.ms", []kadm.Config{{Key: "retention.ms", Value: s("1000")}}, 0, true},
	} {
		got, err := holdFromConfigs(tc.cfgs)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%s: %s, %v; want %s (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// TestRetentionFix: log cleanup's warning for a dead-letter topic whose configs the
// principal may not describe names the DESCRIBE_CONFIGS ACL and the kafka-acls.sh command.
func TestRetentionFix(t *testing.T) {
	k := config.Kafka{SASL: &config.SASL{Mechanism: config.MechScram512, Username: "ingestd"}}
	err := fmt.Errorf("describe topic orders.dlq: %w", kerr.TopicAuthorizationFailed)
	want := "User:ingestd (SCRAM-SHA-512) is missing DESCRIBE_CONFIGS on topic orders.dlq (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:ingestd --operation DescribeConfigs --topic orders.dlq); until then log cleanup of this table stays off, nothing else fails"
	if got := retentionFix(k, "orders.dlq", err); got != want {
		t.Errorf("retentionFix\n got %q\nwant %q", got, want)
	}
	if got := retentionFix(k, "orders.dlq", errors.New("i/o timeout")); got != "" {
		t.Errorf("retentionFix of a network error = %q, want none", got)
	}
}
