package maintain

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
