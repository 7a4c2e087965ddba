package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// secureStack is the broker's secured listeners and test credentials (scripts/stack.sh
// writes them to .stack/env): SSL with client certificates, SASL_SSL with SCRAM, PLAIN
// and OAUTHBEARER, the StandardAuthorizer; PLAINTEXT (s.brokers) is the super user the
// tests use to create topics, users and ACLs.
type secureStack struct {
	stack
	ssl, saslSSL       string // listeners
	ca, cert, key      string // CA bundle; client certificate CN=ingestd (User:ingestd)
	user, passwordFile string // SCRAM/PLAIN user ingestd
	password           string // its password, to grep the output for
}

// secureEnv are the .stack/env keys needSecure reads (the environment wins).
var secureEnv = []string{"KAFKA_SSL_BROKERS", "KAFKA_SASL_SSL_BROKERS", "KAFKA_TLS_CA_FILE", "KAFKA_TLS_CERT_FILE",
	"KAFKA_TLS_KEY_FILE", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD_FILE"}

// needSecure is need plus the secured listeners; it skips locally (fails under CI=true)
// naming what is missing.
func needSecure(t *testing.T) secureStack {
	t.Helper()
	s := secureStack{stack: need(t)}
	env := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(repoRoot, ".stack", "env")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
			if ok {
				env[k] = strings.Trim(v, `"'`)
			}
		}
	}
	get := func(k string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return env[k]
	}
	var missing []string
	for _, k := range secureEnv {
		if get(k) == "" {
			missing = append(missing, k)
		}
	}
	s.ssl, s.saslSSL = get("KAFKA_SSL_BROKERS"), get("KAFKA_SASL_SSL_BROKERS")
	s.ca, s.cert, s.key = get("KAFKA_TLS_CA_FILE"), get("KAFKA_TLS_CERT_FILE"), get("KAFKA_TLS_KEY_FILE")
	s.user, s.passwordFile = get("KAFKA_SASL_USERNAME"), get("KAFKA_SASL_PASSWORD_FILE")
	if len(missing) == 0 && (!reachable(s.ssl) || !reachable(s.saslSSL)) {
		missing = append(missing, "reachable SSL/SASL_SSL listeners ("+s.ssl+", "+s.saslSSL+")")
	}
	if pw, err := os.ReadFile(s.passwordFile); len(missing) == 0 && err != nil {
		missing = append(missing, "the SASL password file ("+err.Error()+")")
	} else {
		s.password = strings.TrimSpace(string(pw))
	}
	if len(missing) > 0 {
		msg := "secured-Kafka test needs " + strings.Join(missing, ", ") + " from .stack/env: restart the stack with this scripts/stack.sh (down, up), which adds the SSL and SASL_SSL listeners"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return s
}

// grant gives principal ops on topics and READ on group, over PLAINTEXT as the super
// user; it also (re)creates SCRAM credentials for user when password is not "".
func grant(t *testing.T, s secureStack, user, password string, topicOps map[string][]kadm.ACLOperation, group string) {
	t.Helper()
	adm := kadm.NewClient(kafkaClient(t, s.stack))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if password != "" {
		// one request per mechanism: Kafka refuses a user twice in one request
		for _, m := range []kadm.ScramMechanism{kadm.ScramSha512, kadm.ScramSha256} {
			res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m, Iterations: 4096, Password: password}})
			if err == nil {
				err = res.Error()
			}
			if err != nil {
				t.Fatalf("create SCRAM user %s (%v): %v", user, m, err)
			}
		}
	}
	b := kadm.NewACLs()
	for topic, ops := range topicOps {
		res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:"+user).AllowHosts().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).Operations(ops...))
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatalf("grant %s %v on topic %s: %v", user, ops, topic, err)
		}
	}
	if group != "" {
		b = b.Allow("User:"+user).AllowHosts().Groups(group).ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead, kadm.OpDescribe)
		res, err := adm.CreateACLs(ctx, b)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatalf("grant %s READ on group %s: %v", user, group, err)
		}
	}
}

// secureYAML is one pipeline whose kafka block is written in block style, with an
// unquoted host:port list (the way Kafka users write it) and the given security lines.
func secureYAML(name string, s secureStack, brokers, security, topic, table, policy, dlq, group string) string {
	return secureYAMLReg(name, fmt.Sprintf("schema_registry: {url: %q}", s.registry), brokers, security, topic, table, policy, dlq, group)
}

// secureYAMLReg is secureYAML with its own schema_registry block.
func secureYAMLReg(name, registry, brokers, security, topic, table, policy, dlq, group string) string {
	return fmt.Sprintf(`name: %s
kafka:
  brokers: [%s]
  topics: [%s]
  group: %s
  start_offset: earliest
  session_timeout: 6s
%s
%s
table: {uri: "file://%s", create: true}
schema: {policy: %s, on_incompatible: halt}
dead_letter: {topic: %s}
batch: {max_records: 2000, max_bytes: 64MiB, max_age: 1s}
`, name, brokers, topic, group, security, registry, table, policy, dlq)
}

// unsecuredJWT is a token Kafka's unsecured OAUTHBEARER validator accepts (alg none).
func unsecuredJWT(sub string, life time.Duration) string {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now().Unix()
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(fmt.Appendf(nil, `{"sub":%q,"iat":%d,"exp":%d}`, sub, now, now+int64(life.Seconds()))) + "."
}

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noSecret fails if any of the secrets occurs in text.
func noSecret(t *testing.T, where, text string, secrets ...string) {
	t.Helper()
	for _, sec := range secrets {
		if sec != "" && strings.Contains(text, sec) {
			t.Errorf("%s contains a secret (%d bytes long)", where, len(sec))
		}
	}
}

// TestSecuredSeed: the seed data (2,000 v1 + 200 v2 orders, 3 partitions) read by one
// `ingestd run` with four pipelines, each over a secured listener as a principal that
// holds only the ACLs it needs: dead_letter over SASL_SSL SCRAM-SHA-512, evolve over mTLS
// (SSL, client certificate CN=ingestd, static member), evolve over SASL_SSL OAUTHBEARER
// (unsecured JWT), evolve over SASL_SSL PLAIN (password_env); the registry behind an
// HTTPS front with basic auth (password_file) or a Bearer token (bearer_token_file);
// tables read back by delta-rs; `dlq inspect`, `replay --dry-run`, `table alter` and a
// real replay of the silver pipeline over SASL_SSL too;
// no password or token in any output.
func TestSecuredSeed(t *testing.T) {
	s := needSecure(t)
	const nV1, nV2 = 2000, 200
	topic := createTopic(t, s.stack, "sec-orders", 3)
	dlq := createTopic(t, s.stack, "sec-orders.dlq", 1)
	orders := produce(t, s.stack, topic, nV1, nV2, 1)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	stamp := time.Now().UnixNano()
	token := unsecuredJWT(s.user, time.Hour)
	tokenFile := writeFile(t, filepath.Join(dir, "token"), token+"\n")
	srPW := "sr-Secret-" + fmt.Sprint(stamp)
	srToken := "sr-token-" + fmt.Sprint(stamp)
	front := startRegistryFront(t, s, "ingestd", srPW, srToken)
	srPWFile := writeFile(t, filepath.Join(dir, "sr.pw"), srPW+"\n")
	srTokenFile := writeFile(t, filepath.Join(dir, "sr.token"), srToken+"\n")
	basicReg := fmt.Sprintf("schema_registry:\n  url: %s\n  username: ingestd\n  password_file: %s\n  tls: {ca_file: %s}", front.url, srPWFile, s.ca)
	bearerReg := fmt.Sprintf("schema_registry: {url: %q, bearer_token_file: %s, tls: {ca_file: %s}}", front.url, srTokenFile, s.ca)
	type pl struct{ name, brokers, security, policy string }
	pls := []pl{
		{"silver-scram", s.saslSSL, fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: SCRAM-SHA-512, username: %s, password_file: %s}", s.ca, s.user, s.passwordFile), "dead_letter"},
		{"bronze-mtls", s.ssl, fmt.Sprintf("  tls: {ca_file: %s, cert_file: %s, key_file: %s}\n  instance_id: mtls-%d\n  client_id: ingestd-mtls", s.ca, s.cert, s.key, stamp), "evolve"},
		{"bronze-oauth", s.saslSSL, fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: OAUTHBEARER, token_file: %s, extensions: {traceId: abc}}", s.ca, tokenFile), "evolve"},
		{"bronze-plain", s.saslSSL, fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: PLAIN, username: %s, password_env: INGESTD_TEST_KAFKA_PASSWORD}", s.ca, s.user), "evolve"},
	}
	t.Setenv("INGESTD_TEST_KAFKA_PASSWORD", s.password) // inherited by the ingestd processes
	tables := map[string]string{}
	for _, p := range pls {
		group := fmt.Sprintf("%s-%d", p.name, stamp)
		tables[p.name] = filepath.Join(dir, p.name)
		reg := basicReg
		if p.name == "bronze-oauth" {
			reg = bearerReg
		}
		writePipeline(t, cfgDir, p.name, secureYAMLReg(p.name, reg, p.brokers, p.security, topic, tables[p.name], p.policy, dlq, group))
		grant(t, s, s.user, "", map[string][]kadm.ACLOperation{topic: {kadm.OpRead, kadm.OpDescribe}, dlq: {kadm.OpWrite, kadm.OpDescribe, kadm.OpRead}}, group)
	}
	// the password file is the stack's; its SCRAM user may predate it (an old data dir)
	grant(t, s, s.user, s.password, nil, "")

	val, err := exec.Command(ingestdBin(t), "validate", "--config", cfgDir).CombinedOutput()
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, val)
	}
	noSecret(t, "validate output", string(val), s.password, token, srPW, srToken)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 3*time.Minute, "every pipeline to handle 2,200 records", func() bool {
		for _, p := range pls {
			if handled(t, tables[p.name]) != nV1+nV2 {
				return false
			}
		}
		return true
	})
	r, code := d.readyz(t)
	if code != 200 || !r.Ready || len(r.Pipelines) != len(pls) {
		t.Errorf("/readyz %d %+v", code, r)
	}
	noSecret(t, "/metrics", d.metrics(t), s.password, token, srPW, srToken)
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	var v1 []order
	for _, o := range orders {
		if o.Version == "v1" {
			v1 = append(v1, o)
		}
	}
	checkOrders(t, "silver-scram", readTable(t, s.stack, tables["silver-scram"]), v1, false)
	checkOrders(t, "bronze-mtls", readTable(t, s.stack, tables["bronze-mtls"]), orders, true)
	checkOrders(t, "bronze-oauth", readTable(t, s.stack, tables["bronze-oauth"]), orders, true)
	checkOrders(t, "bronze-plain", readTable(t, s.stack, tables["bronze-plain"]), orders, true)
	if n := len(readDLQ(t, s.stack, dlq)); n != nV2 {
		t.Errorf("DLQ holds %d records, want %d", n, nV2)
	}

	// dlq inspect and a replay dry run over SASL_SSL with the same file
	silver := filepath.Join(cfgDir, "silver-scram.yaml")
	insp, err := exec.Command(ingestdBin(t), "dlq", "inspect", "--config", silver).CombinedOutput()
	if err != nil || !strings.Contains(string(insp), "schema_mismatch") || !strings.Contains(string(insp), fmt.Sprint(nV2)) {
		t.Errorf("dlq inspect over SASL_SSL: %v\n%s", err, insp)
	}
	dry, err := exec.Command(ingestdBin(t), "replay", "--config", silver, "--dry-run", "--json").CombinedOutput()
	if err != nil || !strings.Contains(string(dry), `"schema_mismatch"`) {
		t.Errorf("replay --dry-run over SASL_SSL: %v\n%s", err, dry)
	}
	// the silver workflow for real: alter the table, replay over SASL_SSL, every order once
	if out, err := exec.Command(ingestdBin(t), "table", "alter", "--config", silver, "--add-column", "channel STRING").CombinedOutput(); err != nil {
		t.Fatalf("table alter: %v\n%s", err, out)
	}
	rep, err := exec.Command(ingestdBin(t), "replay", "--config", silver).CombinedOutput()
	if err != nil {
		t.Fatalf("replay over SASL_SSL: %v\n%s", err, rep)
	}
	checkOrders(t, "silver-scram after replay", readTable(t, s.stack, tables["silver-scram"]), orders, true)
	if front.allowed.Load() == 0 || front.refused.Load() != 0 {
		t.Errorf("registry front (HTTPS + auth): %d requests allowed, %d refused; want some, none", front.allowed.Load(), front.refused.Load())
	}
	logs, _ := os.ReadFile(d.logs.Name())
	noSecret(t, "ingestd run output", string(logs), s.password, token, srPW, srToken)
	noSecret(t, "dlq inspect / replay output", string(insp)+string(dry)+string(rep), s.password, token, srPW, srToken)
	t.Logf("SASL_SSL SCRAM-SHA-512 %s, SSL mTLS %s (static member), SASL_SSL OAUTHBEARER, SASL_SSL PLAIN (password_env); registry over HTTPS with basic auth and a Bearer token (%d requests): 4 tables checked with delta-rs, DLQ %d",
		s.saslSSL, s.ssl, front.allowed.Load(), nV2)
}

// TestSecuredFailFast: in one `ingestd run`, a wrong password fails its pipeline within
// 10 s with SASL_AUTHENTICATION_FAILED and the principal in /readyz; a principal without
// WRITE on the dead-letter topic and one without READ on the group are refused at start-up
// with the ACL named; a good pipeline next to them keeps consuming; no password in the output.
func TestSecuredFailFast(t *testing.T) {
	s := needSecure(t)
	topic := createTopic(t, s.stack, "sec-fail", 1)
	dlq := createTopic(t, s.stack, "sec-fail.dlq", 1)
	orders := produce(t, s.stack, topic, 300, 0, 1)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	stamp := time.Now().UnixNano()
	wrongPW := "not-the-Password-42"
	noDLQUser, noGroupUser := fmt.Sprintf("nodlq%d", stamp), fmt.Sprintf("nogroup%d", stamp)
	userPW := "u-secret-" + fmt.Sprint(stamp)
	pwFile := writeFile(t, filepath.Join(dir, "user.pw"), userPW+"\n")
	wrongFile := writeFile(t, filepath.Join(dir, "wrong.pw"), wrongPW+"\n")
	src := map[string][]kadm.ACLOperation{topic: {kadm.OpRead, kadm.OpDescribe}}
	grant(t, s, noDLQUser, userPW, map[string][]kadm.ACLOperation{topic: {kadm.OpRead, kadm.OpDescribe}, dlq: {kadm.OpDescribe}}, "nodlq-"+fmt.Sprint(stamp))
	grant(t, s, noGroupUser, userPW, map[string][]kadm.ACLOperation{topic: {kadm.OpRead, kadm.OpDescribe}, dlq: {kadm.OpWrite, kadm.OpDescribe}}, "")
	grant(t, s, s.user, s.password, map[string][]kadm.ACLOperation{topic: src[topic], dlq: {kadm.OpWrite, kadm.OpDescribe}}, "good-"+fmt.Sprint(stamp))
	sasl := func(user, file string) string {
		return fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: SCRAM-SHA-256, username: %s, password_file: %s}", s.ca, user, file)
	}
	for _, p := range []struct{ name, user, file, group string }{
		{"wrongpw", s.user, wrongFile, "wrongpw-" + fmt.Sprint(stamp)},
		{"nodlq", noDLQUser, pwFile, "nodlq-" + fmt.Sprint(stamp)},
		{"nogroup", noGroupUser, pwFile, "nogroup-" + fmt.Sprint(stamp)},
		{"good", s.user, s.passwordFile, "good-" + fmt.Sprint(stamp)},
	} {
		writePipeline(t, cfgDir, p.name, secureYAML(p.name, s, s.saslSSL, sasl(p.user, p.file), topic, filepath.Join(dir, p.name), "dead_letter", dlq, p.group))
	}
	// certificates of another CA: as the trust anchor (the broker's is refused) and as the
	// client certificate on the mTLS listener (the broker refuses it)
	otherCA, otherCert, otherKey := foreignPKI(t, dir)
	writePipeline(t, cfgDir, "wrongca", secureYAML("wrongca", s, s.saslSSL, fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: SCRAM-SHA-512, username: %s, password_file: %s}", otherCA, s.user, s.passwordFile),
		topic, filepath.Join(dir, "wrongca"), "dead_letter", dlq, "wrongca-"+fmt.Sprint(stamp)))
	writePipeline(t, cfgDir, "foreigncert", secureYAML("foreigncert", s, s.ssl, fmt.Sprintf("  tls: {ca_file: %s, cert_file: %s, key_file: %s}", s.ca, otherCert, otherKey),
		topic, filepath.Join(dir, "foreigncert"), "dead_letter", dlq, "foreigncert-"+fmt.Sprint(stamp)))
	ingestdBin(t) // built before the clock starts
	start := time.Now()
	d := startDaemon(t, cfgDir)
	want := map[string]string{
		"wrongpw":     "kafka authentication failed for User:" + s.user + " (SCRAM-SHA-256): SASL_AUTHENTICATION_FAILED",
		"nodlq":       fmt.Sprintf(`check topics: dead-letter topic %q: User:%s (SCRAM-SHA-256) is missing WRITE on topic %s (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:%s --operation Write --topic %s)`, dlq, noDLQUser, dlq, noDLQUser, dlq),
		"wrongca":     "kafka TLS: the broker's certificate was refused: ",
		"foreigncert": `kafka TLS: the broker refused the client certificate "CN=intruder": remote error: tls: `,
		"nogroup":     fmt.Sprintf(`check group: User:%s (SCRAM-SHA-256) is missing READ on group nogroup-%d (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:%s --operation Read --group nogroup-%d)`, noGroupUser, stamp, noGroupUser, stamp),
	}
	failedAt := map[string]time.Duration{}
	waitFor(t, d, 60*time.Second, "five pipelines to fail and one to handle 300 records", func() bool {
		r, _ := d.readyz(t)
		for _, p := range r.Pipelines {
			if _, ok := failedAt[p.Pipeline]; !ok && p.State == "failed" {
				failedAt[p.Pipeline] = time.Since(start)
			}
		}
		return len(failedAt) >= 5 && handled(t, filepath.Join(dir, "good")) == int64(len(orders))
	})
	r, code := d.readyz(t)
	if code != 503 || r.Ready {
		t.Errorf("/readyz with failed pipelines: %d ready=%v", code, r.Ready)
	}
	for _, p := range r.Pipelines {
		w, bad := want[p.Pipeline]
		switch {
		case !bad && p.State != "running":
			t.Errorf("%s: state %s (%s), want running", p.Pipeline, p.State, p.Error)
		case bad && (p.State != "failed" || !strings.HasPrefix(p.Error, w)):
			t.Errorf("%s: state %s error\n  %s\nwant prefix\n  %s", p.Pipeline, p.State, p.Error, w)
		case bad && failedAt[p.Pipeline] > 10*time.Second:
			t.Errorf("%s failed %v after start, want < 10s", p.Pipeline, failedAt[p.Pipeline])
		}
	}

	// dlq inspect as a principal that may describe the dead-letter topic but not read it:
	// a clear error naming the ACL, not an endless fetch loop
	if err := kafkaClient(t, s.stack).ProduceSync(context.Background(), &kgo.Record{Topic: dlq, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ictx, icancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer icancel()
	insp, err := exec.CommandContext(ictx, ingestdBin(t), "dlq", "inspect", "--config", filepath.Join(cfgDir, "nodlq.yaml")).CombinedOutput()
	wantInsp := fmt.Sprintf("User:%s (SCRAM-SHA-256) is missing READ on topic %s (fix: kafka-acls.sh", noDLQUser, dlq)
	if err == nil || ictx.Err() != nil || !strings.Contains(string(insp), wantInsp) {
		t.Errorf("dlq inspect without READ on the DLQ: %v (timeout: %v)\n%s\nwant %s", err, ictx.Err(), insp, wantInsp)
	}
	noSecret(t, "dlq inspect output", string(insp), userPW)

	// Run time: the good pipeline loses READ on its group and topic for good (unlike the
	// single refusal of TestSecuredSpuriousCommitAuthError): it fails within seconds
	// naming the ACL, not retried forever as a transient warning.
	adm := kadm.NewClient(kafkaClient(t, s.stack))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:"+s.user).AllowHosts().Groups("good-"+fmt.Sprint(stamp)).ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead, kadm.OpDescribe),
		kadm.NewACLs().Allow("User:" + s.user).AllowHosts().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead),
	} {
		if _, err := adm.DeleteACLs(ctx, b); err != nil {
			t.Fatalf("delete ACLs: %v", err)
		}
	}
	revoked := time.Now()
	// the last running pipeline fails, so the process exits (1) on its own
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the good pipeline still runs 30 s after its ACLs were removed")
	}
	took := time.Since(revoked)
	logs, _ := os.ReadFile(d.logs.Name())
	wantLog := `"msg":"pipeline failed","pipeline":"good","err":"kafka authorization failed: User:` + s.user + ` (SCRAM-SHA-256) is missing READ on `
	if code := d.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(logs), wantLog) {
		t.Errorf("after the ACLs were removed: exit %d after %v; log lacks %s", code, took, wantLog)
	}
	t.Logf("ACLs removed at run time: the pipeline failed and ingestd exited after %v", took)
	noSecret(t, "ingestd run output", string(logs), s.password, wrongPW, userPW)
	t.Logf("failed after %v; /readyz: %+v", failedAt, r.Pipelines)
}

// registryFront is an HTTPS front for the test registry (the stack's registry.crt, signed
// by the test CA) that demands basic auth (user, password) or a Bearer token and proxies
// to the plaintext registry; it counts what it let through and what it refused.
type registryFront struct {
	url              string // https://127.0.0.1:port + the registry's path
	allowed, refused atomic.Int64
}

func startRegistryFront(t *testing.T, s secureStack, user, password, token string) *registryFront {
	t.Helper()
	dir := filepath.Dir(s.ca)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "registry.crt"), filepath.Join(dir, "registry.key"))
	if err != nil {
		t.Fatalf("registry certificate from the stack: %v", err)
	}
	target, err := url.Parse(s.registry)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	f := &registryFront{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, basic := r.BasicAuth()
		if !(basic && u == user && p == password) && r.Header.Get("Authorization") != "Bearer "+token {
			f.refused.Add(1)
			http.Error(w, `{"error_code":401,"message":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		f.allowed.Add(1)
		r.Header.Del("Authorization")
		proxy.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.url = srv.URL + target.Path
	return f
}

// TestSecuredPasswordRotation: a SCRAM password rotation. The password changes on the
// broker, the password_file follows 5 s later; the broker's re-authentication deadline
// (30 s for SCRAM-SHA-512 on the test listener) makes every connection authenticate again,
// reading the file again: consumption goes on without a restart, every record once.
func TestSecuredPasswordRotation(t *testing.T) {
	s := needSecure(t)
	topic := createTopic(t, s.stack, "sec-rot", 2)
	dlq := createTopic(t, s.stack, "sec-rot.dlq", 1)
	stamp := time.Now().UnixNano()
	user, group := fmt.Sprintf("rot%d", stamp), fmt.Sprintf("rot-%d", stamp)
	pw1, pw2 := "first-Secret-"+fmt.Sprint(stamp), "second-Secret-"+fmt.Sprint(stamp)
	grant(t, s, user, pw1, map[string][]kadm.ACLOperation{topic: {kadm.OpRead, kadm.OpDescribe}, dlq: {kadm.OpWrite, kadm.OpDescribe}}, group)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	pwFile := writeFile(t, filepath.Join(dir, "pw"), pw1+"\n")
	table := filepath.Join(dir, "rot")
	writePipeline(t, cfgDir, "rot", secureYAML("rot", s, s.saslSSL,
		fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: SCRAM-SHA-512, username: %s, password_file: %s}", s.ca, user, pwFile),
		topic, table, "evolve", dlq, group))
	first := produce(t, s.stack, topic, 200, 0, 1)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 60*time.Second, "the first 200 records", func() bool { return handled(t, table) == 200 })

	changed := time.Now()
	grant(t, s, user, pw2, nil, "") // the broker now knows only pw2
	// The rotation's timing is the behaviour under test: the file follows the broker 5 s
	// later, and the next records come once every connection made before the change has
	// passed its re-authentication deadline (30 s).
	time.Sleep(5 * time.Second)
	writeFile(t, pwFile, pw2+"\n")
	time.Sleep(time.Until(changed.Add(35 * time.Second)))
	second := produce(t, s.stack, topic, 200, 0, 1001)
	waitFor(t, d, 60*time.Second, "the next 200 records after the rotation", func() bool { return handled(t, table) == 400 })
	r, _ := d.readyz(t)
	if len(r.Pipelines) != 1 || r.Pipelines[0].State != "running" {
		t.Errorf("after the rotation: %+v", r.Pipelines)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	checkOrders(t, "rot", readTable(t, s.stack, table), append(first, second...), false)
	logs, _ := os.ReadFile(d.logs.Name())
	noSecret(t, "ingestd run output", string(logs), pw1, pw2)
	t.Logf("password rotated on the broker, file 5 s later: 400 records once, no restart; log has %d lines", strings.Count(string(logs), "\n"))
}

// foreignPKI writes a CA the broker does not know and a client certificate (CN=intruder)
// signed by it; it returns the CA, certificate and key files.
func foreignPKI(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caDER, der, k := testPKI(t, "foreign-ca", "intruder", x509.ExtKeyUsageClientAuth)
	kder, _ := x509.MarshalPKCS8PrivateKey(k)
	pemFile := func(name, typ string, b []byte) string {
		return writeFile(t, filepath.Join(dir, name), string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b})))
	}
	return pemFile("foreign-ca.crt", "CERTIFICATE", caDER), pemFile("intruder.crt", "CERTIFICATE", der), pemFile("intruder.key", "PRIVATE KEY", kder)
}

// metricValue returns the value of one exact series from /metrics, or -1.
func metricValue(text, series string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

// TestSecuredTokenRefresh: OAUTHBEARER with a token that another process renews. A writer
// rewrites token_file every 45 s with a JWT whose exp is 90 s ahead, for 3 minutes (at 0,
// 45, 90 and 135 s), then stops; the OAUTHBEARER listener grants at most 60 s sessions
// (listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms in scripts/stack.sh) and
// caps them at the token's exp, so every connection re-authenticates and each
// re-authentication reads the file again: at least six reads in the first 3 minutes,
// counted by ingestd_kafka_sasl_credential_reads_total{credential="token"}, while records
// arrive every 30 s. Once the last token has expired, the next re-authentication is
// refused by ingestd itself (it does not wait for the broker to close the connection): the
// pipeline fails within 10 s of the expiry naming the mechanism, the principal and the
// expired token, /readyz reports it, and a second pipeline of the same process
// (SCRAM-SHA-512) keeps consuming and committing. Every record once in both tables; no
// token in the output. Mostly sleeping (about 4 minutes): runs in parallel with the other
// long SASL tests.
func TestSecuredTokenRefresh(t *testing.T) {
	t.Parallel()
	s := needSecure(t)
	topic := createTopic(t, s.stack, "sec-token", 1)
	other := createTopic(t, s.stack, "sec-token-other", 1)
	dlq := createTopic(t, s.stack, "sec-token.dlq", 1)
	stamp := time.Now().UnixNano()
	group, otherGroup := fmt.Sprintf("token-%d", stamp), fmt.Sprintf("token-other-%d", stamp)
	grant(t, s, s.user, "", map[string][]kadm.ACLOperation{topic: {kadm.OpRead, kadm.OpDescribe}, dlq: {kadm.OpWrite, kadm.OpDescribe}}, group)
	grant(t, s, s.user, "", map[string][]kadm.ACLOperation{other: {kadm.OpRead, kadm.OpDescribe}}, otherGroup)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	tokenFile := filepath.Join(dir, "token")
	const every, life, renewFor = 45 * time.Second, 90 * time.Second, 3 * time.Minute
	var (
		tokens  []string
		lastExp time.Time
	)
	renew := func() {
		tok := unsecuredJWT(s.user, life)
		tokens = append(tokens, tok)
		writeFile(t, tokenFile, tok+"\n")
		lastExp = time.Unix(time.Now().Unix()+int64(life.Seconds()), 0) // unsecuredJWT's exp
	}
	table, otherTable := filepath.Join(dir, "token-table"), filepath.Join(dir, "other-table")
	writePipeline(t, cfgDir, "token", secureYAML("token", s, s.saslSSL, fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: OAUTHBEARER, token_file: %s}", s.ca, tokenFile),
		topic, table, "evolve", dlq, group))
	writePipeline(t, cfgDir, "other", secureYAML("other", s, s.saslSSL, fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: SCRAM-SHA-512, username: %s, password_file: %s}", s.ca, s.user, s.passwordFile),
		other, otherTable, "evolve", dlq, otherGroup))
	ingestdBin(t) // built before the clock starts
	renew()
	start := time.Now()
	d := startDaemon(t, cfgDir)
	var want, wantOther []order
	for k := 0; ; k++ { // records every 30 s and a new token every 45 s, for 3 minutes
		at := start.Add(time.Duration(k) * 15 * time.Second)
		if !at.Before(start.Add(renewFor)) {
			break
		}
		time.Sleep(time.Until(at)) // the renewal schedule under test: a step every 15 s
		if k > 0 && k%3 == 0 {
			renew()
		}
		if k%2 == 0 {
			want = append(want, produce(t, s.stack, topic, 50, 0, int64(1+len(want)))...)
			wantOther = append(wantOther, produce(t, s.stack, other, 50, 0, int64(1+len(wantOther)))...)
		}
	}
	time.Sleep(time.Until(start.Add(renewFor))) // the reads are counted over the whole 3 minutes
	reads := metricValue(d.metrics(t), `ingestd_kafka_sasl_credential_reads_total{credential="token"}`)
	if reads < 6 {
		t.Errorf("token_file read %v times in the first 3 minutes, want at least 6 (the first authentication and every re-authentication)", reads)
	}
	waitFor(t, d, 30*time.Second, "the token pipeline's records", func() bool { return handled(t, table) == int64(len(want)) })
	if len(tokens) != 4 {
		t.Fatalf("%d tokens written, want 4 (0, 45, 90, 135 s)", len(tokens))
	}

	// the last token expires at lastExp: the pipeline fails within 10 s of it
	var failedAt time.Time
	var failed string
	waitForEvery(t, d, time.Until(lastExp)+30*time.Second, 100*time.Millisecond, "the token pipeline to fail once the last token expired", func() bool {
		r, _ := d.readyz(t)
		for _, p := range r.Pipelines {
			if p.Pipeline == "token" && p.State == "failed" {
				failedAt, failed = time.Now(), p.Error
				return true
			}
		}
		return false
	})
	// principal and mechanism, then the client's context (which connection: "unable to
	// join group session: " for the group's), then the expired token
	wantWho := fmt.Sprintf("kafka credentials for User:%s (OAUTHBEARER token subject): ", s.user)
	wantErr := fmt.Sprintf("read kafka.sasl token: the token from file %s (sub %q) expired at %s; whatever renews it has stopped (fix: restore the file or variable)",
		tokenFile, s.user, lastExp.UTC().Format(time.RFC3339))
	if !strings.HasPrefix(failed, wantWho) || !strings.HasSuffix(failed, wantErr) {
		t.Errorf("/readyz error of the token pipeline:\n  %s\nwant\n  %s…%s", failed, wantWho, wantErr)
	}
	if late := failedAt.Sub(lastExp); late < 0 || late > 10*time.Second {
		t.Errorf("the token pipeline failed %v after the last token's expiry, want within 10 s", late)
	}
	r, code := d.readyz(t)
	if code != 503 || r.Ready {
		t.Errorf("/readyz with a failed pipeline: %d ready=%v", code, r.Ready)
	}

	// the other pipeline keeps consuming and committing
	wantOther = append(wantOther, produce(t, s.stack, other, 200, 0, int64(1+len(wantOther)))...)
	waitFor(t, d, 30*time.Second, "the other pipeline's records after the token pipeline failed", func() bool { return handled(t, otherTable) == int64(len(wantOther)) })
	r, _ = d.readyz(t)
	for _, p := range r.Pipelines {
		if p.Pipeline == "other" && p.State != "running" {
			t.Errorf("the other pipeline: %s (%s), want running", p.State, p.Error)
		}
	}
	if code := d.stop(t); code != 1 {
		t.Errorf("exit code %d after a pipeline failed, want 1", code)
	}
	logs, _ := os.ReadFile(d.logs.Name())
	wantFailed := `"msg":"pipeline failed","pipeline":"token","err":"kafka credentials for User:` + s.user + ` (OAUTHBEARER token subject): `
	if !strings.Contains(string(logs), wantFailed) {
		t.Errorf("log lacks %s", wantFailed)
	}
	checkOrders(t, "token", readTable(t, s.stack, table), want, false)
	checkOrders(t, "other", readTable(t, s.stack, otherTable), wantOther, false)
	noSecret(t, "ingestd run output", string(logs), tokens...)
	t.Logf("OAUTHBEARER token refresh: token_file read %v times in 3 minutes (4 tokens, 45 s apart, 90 s life); the pipeline failed %v after the last token expired; the other pipeline handled %d records, %d after that",
		reads, failedAt.Sub(lastExp).Round(100*time.Millisecond), len(wantOther), 200)
}
