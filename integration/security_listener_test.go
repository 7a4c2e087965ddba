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

// TestSecuredWrongListenerFailsFast points each pipeline of one `ingestd run` at a
// listener that does not speak its TLS or SASL settings: kafka.tls against the PLAINTEXT
// listener, SCRAM without kafka.tls against SASL_SSL, no security against SSL, and TLS
// without SASL against SASL_SSL. Each must fail within 10 s of the start (before the
// start-up check learnt to tell these apart it retried them for 60 to 90 s as transient
// broker errors), each with the error naming the setting to change.
func TestSecuredWrongListenerFailsFast(t *testing.T) {
	s := needSecure(t)
	topic := createTopic(t, s.stack, "sec-listener", 1)
	dlq := createTopic(t, s.stack, "sec-listener.dlq", 1)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	stamp := fmt.Sprint(time.Now().UnixNano())
	tls := fmt.Sprintf("  tls: {ca_file: %s}", s.ca)
	sasl := fmt.Sprintf("  sasl: {mechanism: SCRAM-SHA-512, username: %s, password_file: %s}", s.user, s.passwordFile)
	cases := []struct{ name, brokers, security, want string }{
		{"tlsonplain", s.brokers, tls, "kafka TLS: kafka.tls is set but the broker at " + s.brokers + " closed the connection at the TLS handshake, as a plaintext listener does: "},
		{"saslnotls", s.saslSSL, sasl, "kafka TLS: kafka.tls is not set but the broker at " + s.saslSSL + " speaks TLS: "},
		{"plainonssl", s.ssl, "", "kafka TLS: kafka.tls is not set but the broker at " + s.ssl + " speaks TLS: "},
		{"tlsnosasl", s.saslSSL, tls, "kafka: kafka.sasl is not set but the broker at " + s.saslSSL + " closed the connection after the first request, as a SASL listener does: "},
	}
	for _, c := range cases {
		writePipeline(t, cfgDir, c.name, secureYAML(c.name, s, c.brokers, c.security, topic, filepath.Join(dir, c.name), "dead_letter", dlq, c.name+"-"+stamp))
	}
	ingestdBin(t) // built before the clock starts
	start := time.Now()
	d := startDaemon(t, cfgDir)
	// every pipeline fails, so the process exits (1) on its own
	select {
	case <-d.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("ingestd still runs 2 min after its start")
	}
	took := time.Since(start)
	if code := d.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if took > 10*time.Second {
		t.Errorf("the pipelines failed %v after start, want < 10s", took)
	}
	logs, err := os.ReadFile(d.logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]string{}
	for _, line := range strings.Split(string(logs), "\n") {
		var l struct{ Msg, Pipeline, Err string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "pipeline failed" {
			failed[l.Pipeline] = l.Err
		}
	}
	for _, c := range cases {
		if got := failed[c.name]; !strings.HasPrefix(got, c.want) || !strings.Contains(got, "(fix: ") {
			t.Errorf("%s: error\n  %s\nwant prefix\n  %s\nand a fix", c.name, got, c.want)
		}
	}
	t.Logf("all %d pipelines failed and ingestd exited %v after its start", len(cases), took.Round(time.Millisecond))
}
