package kafkaclient

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// reauthHook tells re-authentications from first authentications by the requests a
// client writes, and counts them in Metrics.Reauths: franz-go sends ApiVersions (key 18)
// once on every new connection, before its SASLHandshake (key 17), and a
// re-authentication sends SASLHandshake alone. So a handshake is a re-authentication
// when every connection opened so far has had its first handshake. Concurrent opens may
// shift which handshake is counted, never the total.
type reauthHook struct {
	pipeline, client string
	m                *Metrics
	mu               sync.Mutex
	conns, shakes    map[int32]int64 // per broker: ApiVersions and SASLHandshake written
	reauths          map[int32]int64
}

// newReauthHook counts the re-authentications of pipeline's client role in m (nil: kept
// in the hook only).
func newReauthHook(pipeline, client string, m *Metrics) *reauthHook {
	return &reauthHook{pipeline: pipeline, client: client, m: m,
		conns: map[int32]int64{}, shakes: map[int32]int64{}, reauths: map[int32]int64{}}
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h *reauthHook) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil || (key != 18 && key != 17) {
		return
	}
	node := meta.NodeID
	h.mu.Lock()
	defer h.mu.Unlock()
	if key == 18 {
		h.conns[node]++
		return
	}
	if h.shakes[node]-h.reauths[node] >= h.conns[node] {
		h.reauths[node]++
		h.m.reauth(h.pipeline, h.client, node)
	}
	h.shakes[node]++
}
