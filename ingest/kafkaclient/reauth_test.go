package kafkaclient

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReauthHook: two connections to broker 1 opened concurrently (ApiVersions, ApiVersions,
// then their handshakes), one to broker 2, then three handshakes on open connections of
// broker 1 and one of broker 2: four re-authentications, none for the first handshakes.
func TestReauthHook(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	h := newReauthHook("p-reauth-test", "consumer", m)
	b1, b2 := kgo.BrokerMetadata{NodeID: 1}, kgo.BrokerMetadata{NodeID: 2}
	w := func(b kgo.BrokerMetadata, key int16) { h.OnBrokerWrite(b, key, 10, 0, 0, nil) }
	w(b1, 18)
	w(b1, 18)
	w(b1, 17)
	w(b2, 18)
	w(b1, 3) // metadata: ignored
	w(b1, 17)
	w(b2, 17)
	if got := testutil.ToFloat64(m.Reauths.WithLabelValues("p-reauth-test", "consumer", "1")); got != 0 {
		t.Fatalf("broker 1 after its first handshakes: %v re-authentications, want 0", got)
	}
	w(b1, 17)
	w(b1, 17)
	w(b2, 17)
	w(b1, 17)
	h.OnBrokerWrite(b1, 17, 0, 0, 0, errors.New("broken pipe")) // a failed write is no handshake
	if got := testutil.ToFloat64(m.Reauths.WithLabelValues("p-reauth-test", "consumer", "1")); got != 3 {
		t.Errorf("broker 1: %v re-authentications, want 3", got)
	}
	if got := testutil.ToFloat64(m.Reauths.WithLabelValues("p-reauth-test", "consumer", "2")); got != 1 {
		t.Errorf("broker 2: %v re-authentications, want 1", got)
	}
	// a new connection after the re-authentications: its handshake is a first one
	w(b1, 18)
	w(b1, 17)
	if got := testutil.ToFloat64(m.Reauths.WithLabelValues("p-reauth-test", "consumer", "1")); got != 3 {
		t.Errorf("broker 1 after a new connection: %v re-authentications, want 3", got)
	}
	// without Metrics the hook still tells them apart and counts nothing
	newReauthHook("p", "consumer", nil).OnBrokerWrite(b1, 17, 0, 0, 0, nil)
}
