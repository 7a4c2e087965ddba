package kafkaclient

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Kafka clients' SASL counters, shared by every pipeline of a process
// (the ingest Metrics hold them). A nil *Metrics counts nothing.
type Metrics struct {
	// CredentialReads counts SASL passwords and OAUTHBEARER tokens read from their file
	// or variable, by credential ("password", "token"): one per authentication and
	// re-authentication, every client together. It shows that re-authentication happens
	// and re-reads the file.
	CredentialReads *prometheus.CounterVec
	// Reauths counts KIP-368 re-authentications of open connections, by pipeline, client
	// role and broker node id: every connection re-authenticates in place (no new
	// connection, no rebalance).
	Reauths *prometheus.CounterVec
}

// The credential label's values of CredentialReads.
const (
	credentialPassword = "password"
	credentialToken    = "token"
)

// NewMetrics creates the SASL counters and registers them with reg:
// ingestd_kafka_sasl_credential_reads_total{credential} (both values exported from the
// start, at 0) and ingestd_kafka_sasl_reauthentications_total{pipeline, client, broker}.
// It panics, like prometheus.MustRegister, if reg already holds them.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		CredentialReads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_kafka_sasl_credential_reads_total",
			Help: "SASL passwords and OAUTHBEARER tokens read from their file or variable: one per Kafka authentication and re-authentication (KIP-368), all pipelines."},
			[]string{"credential"}),
		Reauths: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_kafka_sasl_reauthentications_total",
			Help: "SASL re-authentications of an open Kafka connection (KIP-368), by pipeline, client and broker node id."},
			[]string{"pipeline", "client", "broker"}),
	}
	m.CredentialReads.WithLabelValues(credentialPassword)
	m.CredentialReads.WithLabelValues(credentialToken)
	reg.MustRegister(m.CredentialReads, m.Reauths)
	return m
}

// credentialRead counts one read of a SASL credential ("password" or "token").
func (m *Metrics) credentialRead(credential string) {
	if m == nil {
		return
	}
	m.CredentialReads.WithLabelValues(credential).Inc()
}

// reauth counts one re-authentication of a connection of pipeline's client role to
// broker node.
func (m *Metrics) reauth(pipeline, client string, node int32) {
	if m == nil {
		return
	}
	m.Reauths.WithLabelValues(pipeline, client, strconv.Itoa(int(node))).Inc()
}
