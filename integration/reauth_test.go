package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestSecuredReauth: SASL re-authentication with short session lifetimes. On AWS MSK a
// franz-go consumer met ILLEGAL_SASL_STATE and lost its partitions at every
// re-authentication, because the broker granted sessions shorter than the client's
// allowance (twmb/franz-go#249, fixed in #250). SCRAM-SHA-512 over SASL_SSL, whose
// listener grants 30 s sessions
// (listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms in scripts/stack.sh),
// while 100,000 records arrive over 5 minutes in 25 chunks of 4,000, one every 12 s, on 3
// partitions; the daemon runs at --log-level debug. Every chunk is in the table within
// 10 s (no stall); the consumer re-authenticates its connections in place at least 9 times
// on broker 1 (ingestd_kafka_sasl_reauthentications_total), with one group session for the
// whole run (no rebalance, no revoked or lost partition), no ILLEGAL_SASL_STATE and no
// authentication error; every record exactly once in Delta; the password in no output
// line, franz-go's own logs included. Mostly waiting (about 5.5 minutes): runs in parallel
// with the other long SASL tests.
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
		// Paced on purpose: chunk i+1 is due (i+1)·12 s after the start, so that the run
		// spans ten 30 s session lifetimes.
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
	t.Logf("SCRAM re-authentication: %d records in %d chunks over %v, 30 s SCRAM sessions; the consumer re-authenticated %v times on broker 1 (%v password reads, all clients), one group session; slowest chunk in the table after %v",
		len(want), chunks, run.Round(time.Second), reauths, reads, slowest.Round(100*time.Millisecond))
}

// TestSecuredSpuriousCommitAuthError: a single authorization failure right after a
// re-authentication, as reported around re-authentications that come close to the
// session's deadline (see TestSecuredReauth), is retried, not fatal. ingestd reaches the
// SASL_SSL listener (SCRAM-SHA-512, 30 s sessions) through kafkaProxy, which sends the
// first OffsetCommit after a re-authentication to a group the principal may not read, so
// the broker itself answers GROUP_AUTHORIZATION_FAILED and commits nothing. ingestd
// retries the commit (up to 3 times, the first 1 s later), the retry is accepted, the
// group's offset reaches the topic's end before any further record arrives, the pipeline
// keeps running past the grace a persistent failure gets, and every record is in Delta
// exactly once. (A failure that persists, the group ACL really removed, is fatal within
// seconds: TestSecuredFailFast.)
func TestSecuredSpuriousCommitAuthError(t *testing.T) {
	t.Parallel()
	s := needSecure(t)
	topic := createTopic(t, s.stack, "sec-r5", 1)
	dlq := createTopic(t, s.stack, "sec-r5.dlq", 1)
	group := fmt.Sprintf("r5-%d", time.Now().UnixNano())
	grant(t, s, s.user, "", map[string][]kadm.ACLOperation{topic: {kadm.OpRead, kadm.OpDescribe}, dlq: {kadm.OpWrite, kadm.OpDescribe}}, group)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	proxy := startKafkaProxy(t, dir, s.saslSSL, s.ca)
	table := filepath.Join(dir, "r5")
	writePipeline(t, cfgDir, "r5", secureYAML("r5", s, proxy.addr,
		fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: SCRAM-SHA-512, username: %s, password_file: %s}", proxy.ca, s.user, s.passwordFile),
		topic, table, "evolve", dlq, group))
	proxy.armed.Store(true)
	d := startDaemon(t, cfgDir)
	var want []order
	start := time.Now()
	// a chunk every 5 s until the proxy has spoiled a commit (after the first
	// re-authentication, about 30 s in), then quiet: only the retry commits
	for i := 0; proxy.spoiled.Load() == 0; i++ {
		if time.Since(start) > 90*time.Second {
			t.Fatalf("no OffsetCommit after a re-authentication in 90 s (%d re-authentications, %d commits through the proxy)", proxy.reauths.Load(), proxy.commits.Load())
		}
		want = append(want, produce(t, s.stack, topic, 100, 0, int64(1+len(want)))...)
		waitFor(t, d, 10*time.Second, "the chunk in the table", func() bool { return handled(t, table) == int64(len(want)) })
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && proxy.spoiled.Load() == 0; {
			time.Sleep(50 * time.Millisecond)
		}
	}
	spoiledAt := time.Unix(0, proxy.spoilAt.Load())
	var committed int64
	adm := kadm.NewClient(kafkaClient(t, s.stack))
	waitFor(t, d, 10*time.Second, "the group's offset at the topic's end after the retry", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		if o, ok := offs.Lookup(topic, 0); ok {
			committed = o.At
		}
		return committed == int64(len(want))
	})
	retried := time.Since(spoiledAt)
	// The behaviour under test is that nothing happens: a refusal that persisted would fail
	// the pipeline within fatalGrace (3 s) of it, so the pipeline must still run after 4 s.
	time.Sleep(4 * time.Second)
	if r, _ := d.readyz(t); len(r.Pipelines) != 1 || r.Pipelines[0].State != "running" {
		t.Fatalf("after one spurious GROUP_AUTHORIZATION_FAILED on OffsetCommit: %+v", r.Pipelines)
	}
	want = append(want, produce(t, s.stack, topic, 100, 0, int64(1+len(want)))...)
	waitFor(t, d, 15*time.Second, "the records after the refused commit", func() bool { return handled(t, table) == int64(len(want)) })
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	logs, _ := os.ReadFile(d.logs.Name())
	for _, line := range []string{
		`"msg":"kafka offset commit refused with GROUP_AUTHORIZATION_FAILED; retrying"`,
		`"msg":"kafka offset commit accepted on retry after GROUP_AUTHORIZATION_FAILED","pipeline":"r5","retry":1`,
	} {
		if n := strings.Count(string(logs), line); n != 1 {
			t.Errorf("log has %d × %s, want 1", n, line)
		}
	}
	checkOrders(t, "r5", readTable(t, s.stack, table), want, false)
	noSecret(t, "ingestd run output", string(logs), s.password)
	t.Logf("spurious GROUP_AUTHORIZATION_FAILED: the first OffsetCommit after a re-authentication (%d re-authentications through the proxy) refused by the broker %v after start; the group offset reached %d %v later (the retry); %d records once",
		proxy.reauths.Load(), spoiledAt.Sub(start).Round(100*time.Millisecond), committed, retried.Round(100*time.Millisecond), len(want))
}
