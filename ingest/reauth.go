package ingest

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// saslReauths counts KIP-368 re-authentications, process-wide, as
// ingestd_kafka_sasl_reauthentications_total{pipeline, client, broker}: C40 R1 reads it to
// see that every connection re-authenticates in place (no new connection, no rebalance).
var saslReauths = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_kafka_sasl_reauthentications_total",
	Help: "SASL re-authentications of an open Kafka connection (KIP-368), by pipeline, client and broker node id."},
	[]string{"pipeline", "client", "broker"})

// reauthHook tells re-authentications from first authentications by the requests a
// client writes: franz-go sends ApiVersions (key 18) once on every new connection, before
// its SASLHandshake (key 17), and a re-authentication sends SASLHandshake alone. So a
// handshake is a re-authentication when every connection opened so far has had its
// first handshake. Concurrent opens may shift which handshake is counted, never the total.
type reauthHook struct {
	pipeline, client string
	mu               sync.Mutex
	conns, shakes    map[int32]int64 // per broker: ApiVersions and SASLHandshake written
	reauths          map[int32]int64
}

func newReauthHook(pipeline, client string) *reauthHook {
	return &reauthHook{pipeline: pipeline, client: client,
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
		saslReauths.WithLabelValues(h.pipeline, h.client, strconv.Itoa(int(node))).Inc()
	}
	h.shakes[node]++
}
