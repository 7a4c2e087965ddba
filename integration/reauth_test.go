package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestSecuredReauth is C40 R1 at the case's size: SCRAM-SHA-512 over SASL_SSL, whose
// listener grants 30 s sessions (listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms
// in scripts/stack.sh), while 100,000 records arrive over 5 minutes in 25 chunks of 4,000,
// one every 12 s, on 3 partitions; the daemon runs at --log-level debug. Every chunk is in
// the table within 10 s (no stall); the consumer re-authenticates its connections in place
// at least 9 times on broker 1 (ingestd_kafka_sasl_reauthentications_total), with one group
// session for the whole run (no rebalance, no revoked or lost partition), no
// ILLEGAL_SASL_STATE and no authentication error; every record exactly once in Delta; the
// password in no output line, franz-go's own logs included. Mostly waiting (about 5.5
// minutes): runs in parallel with the other long C40 tests.
func TestSecuredReauth(t *testing.T) {
	t.Parallel()
	s := needSecure(t)
	topic := createTopic(t, s.stack, "sec-reauth", 3)
	dlq := createTopic(t, s.stack, "sec-reauth.dlq", 1)
	group := fmt.Sprintf("reauth-%d", time.Now().UnixNano())
	grant(t, s, s.user, "", map[string][]kadm.ACLOperation{topic: {kadm.OpRead, kadm.OpDescribe}, dlq: {kadm.OpWrite, kadm.OpDescribe}}, group)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(dir, "reauth")
	writePipeline(t, cfgDir, "reauth", secureYAML("reauth", s, s.saslSSL,
		fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: SCRAM-SHA-512, username: %s, password_file: %s}", s.ca, s.user, s.passwordFile),
		topic, table, "evolve", dlq, group))
	logPath := filepath.Join(dir, "ingestd.log")
	d := startDaemonLogged(t, cfgDir, logPath)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("ingestd log tail:\n%s", b)
		}
	})
	start := time.Now()
	const chunks, per, every = 25, 4000, 12 * time.Second
	var want []order
	var slowest time.Duration
	for i := 0; i < chunks; i++ {
		want = append(want, produce(t, s.stack, topic, per, 0, int64(1+per*i))...)
		produced := time.Now()
		waitFor(t, d, 10*time.Second, fmt.Sprintf("chunk %d of %d in the table", i+1, chunks), func() bool { return handled(t, table) == int64(per*(i+1)) })
		slowest = max(slowest, time.Since(produced))
		time.Sleep(time.Until(start.Add(time.Duration(i+1) * every)))
	}
	run := time.Since(start) // 5 minutes: ten session lifetimes
	m := d.metrics(t)
	reauths := metricValue(m, `ingestd_kafka_sasl_reauthentications_total{broker="1",client="consumer",pipeline="reauth"}`)
	reads := metricValue(m, `ingestd_kafka_sasl_credential_reads_total{credential="password"}`)
	r, _ := d.readyz(t)
	if len(r.Pipelines) != 1 || r.Pipelines[0].State != "running" {
		t.Errorf("after %v of 30 s sessions: %+v", run, r.Pipelines)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	logs, _ := os.ReadFile(logPath)
	text := string(logs)
	// the fetch connection alone lives 5 minutes: a re-authentication about every 29 s
	if reauths < 9 {
		t.Errorf("consumer re-authentications on broker 1 in %v of 30 s sessions: %v, want at least 9", run, reauths)
	}
	if reads < reauths {
		t.Errorf("password reads %v < re-authentications %v: a re-authentication did not re-read password_file", reads, reauths)
	}
	before, _, _ := strings.Cut(text, `"msg":"pipeline stopped"`) // what happened before the shutdown
	for what, n := range map[string]int{
		`"msg":"kafka: new group session begun"`: 1, // one session: no rebalance
		`"msg":"kafka: synced"`:                  1,
		`"msg":"partition assigned"`:             3,
		`"msg":"partitions lost`:                 0,
		`"msg":"flush on revoke incomplete`:      0,
		`heartbeat errored`:                      0,
		`ILLEGAL_SASL_STATE`:                     0,
		`SASL_AUTHENTICATION_FAILED`:             0,
		`"level":"ERROR"`:                        0,
	} {
		if got := strings.Count(before, what); got != n {
			t.Errorf("log before the shutdown has %d × %s, want %d", got, what, n)
		}
	}
	checkOrders(t, "reauth", readTable(t, s.stack, table), want, false)
	noSecret(t, "ingestd run --log-level debug output", text, s.password)
	t.Logf("C40 R1: %d records in %d chunks over %v, 30 s SCRAM sessions; the consumer re-authenticated %v times on broker 1 (%v password reads, all clients), one group session; slowest chunk in the table after %v",
		len(want), chunks, run.Round(time.Second), reauths, reads, slowest.Round(100*time.Millisecond))
}
