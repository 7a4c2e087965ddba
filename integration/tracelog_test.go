package integration

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestSecuredTraceLogsNoSecret: one `ingestd run --log-level trace` (debug plus franz-go's
// own debug logs: every request, every SASL step) with three pipelines over SASL_SSL —
// PLAIN (password_env; PLAIN sends the password itself), SCRAM-SHA-256 (password_file)
// and OAUTHBEARER (token_file) — each landing 100 orders. Its whole output holds franz-go's
// SASL debug lines and none of the password, the other password, the token, nor their
// base64 forms (how a []byte would show in a JSON log), nor PLAIN's auth message.
func TestSecuredTraceLogsNoSecret(t *testing.T) {
	s := needSecure(t)
	stamp := time.Now().UnixNano()
	scramUser, scramPW := fmt.Sprintf("trace%d", stamp), fmt.Sprintf("trace-Secret-%d", stamp)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	token := unsecuredJWT(s.user, time.Hour)
	tokenFile := writeFile(t, filepath.Join(dir, "token"), token+"\n")
	pwFile := writeFile(t, filepath.Join(dir, "pw"), scramPW+"\n")
	t.Setenv("INGESTD_TEST_KAFKA_PASSWORD", s.password) // inherited by ingestd
	tables := map[string]string{}
	var want = map[string][]order{}
	for _, p := range []struct{ name, user, sasl string }{
		{"plain", s.user, fmt.Sprintf("  sasl: {mechanism: PLAIN, username: %s, password_env: INGESTD_TEST_KAFKA_PASSWORD}", s.user)},
		{"scram", scramUser, fmt.Sprintf("  sasl: {mechanism: SCRAM-SHA-256, username: %s, password_file: %s}", scramUser, pwFile)},
		{"oauth", s.user, fmt.Sprintf("  sasl: {mechanism: OAUTHBEARER, token_file: %s}", tokenFile)},
	} {
		topic := createTopic(t, s.stack, "sec-trace-"+p.name, 1)
		dlq := createTopic(t, s.stack, "sec-trace-"+p.name+".dlq", 1)
		group := fmt.Sprintf("trace-%s-%d", p.name, stamp)
		pw := ""
		if p.name == "scram" {
			pw = scramPW
		}
		grant(t, s, p.user, pw, map[string][]kadm.ACLOperation{topic: {kadm.OpRead, kadm.OpDescribe}, dlq: {kadm.OpWrite, kadm.OpDescribe}}, group)
		tables[p.name] = filepath.Join(dir, p.name)
		writePipeline(t, cfgDir, p.name, secureYAML(p.name, s, s.saslSSL, fmt.Sprintf("  tls: {ca_file: %s}\n%s", s.ca, p.sasl), topic, tables[p.name], "evolve", dlq, group))
		want[p.name] = produce(t, s.stack, topic, 100, 0, 1)
	}
	logPath := filepath.Join(dir, "ingestd.log")
	d := startDaemonAt(t, cfgDir, logPath, "trace")
	waitFor(t, d, 60*time.Second, "100 orders in each table", func() bool {
		return handled(t, tables["plain"]) == 100 && handled(t, tables["scram"]) == 100 && handled(t, tables["oauth"]) == 100
	})
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	for name, table := range tables {
		checkOrders(t, name, readTable(t, s.stack, table), want[name], false)
	}
	b, _ := os.ReadFile(logPath)
	text := string(b)
	for _, line := range []string{`"msg":"kafka: issuing SASLHandshakeRequest"`, `"msg":"kafka: issuing SASLAuthenticate"`, `"msg":"kafka: beginning sasl authentication"`} {
		if !strings.Contains(text, line) {
			t.Errorf("the trace output lacks franz-go's debug line %s", line)
		}
	}
	b64 := func(v string) []string {
		return []string{base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v))}
	}
	secrets := []string{s.password, scramPW, token, strings.Split(token, ".")[1]}
	secrets = append(secrets, b64(s.password)...)
	secrets = append(secrets, b64(scramPW)...)
	secrets = append(secrets, b64("\x00"+s.user+"\x00"+s.password)...) // PLAIN's auth bytes
	secrets = append(secrets, b64("n,,\x01auth=Bearer "+token+"\x01\x01")...)
	noSecret(t, "ingestd run --log-level trace output", text, secrets...)
	t.Logf("--log-level trace, PLAIN + SCRAM-SHA-256 + OAUTHBEARER, 300 orders: %d log lines (%d of franz-go's debug level), no secret in any form",
		strings.Count(text, "\n"), strings.Count(text, `"level":"DEBUG-4"`))
}
