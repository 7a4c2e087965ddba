package ingest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"
)

// testPKI is a throw-away CA with a server certificate for 127.0.0.1/localhost and a
// client certificate, written as PEM files into a temp dir.
type testPKI struct {
	dir                                              string
	ca, serverCert, serverKey, clientCert, clientKey string
	caPool                                           *x509.CertPool
	server                                           tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ingestd-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := &testPKI{dir: dir, caPool: x509.NewCertPool()}
	p.caPool.AddCert(caCert)
	write := func(name, typ string, der []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	p.ca = write("ca.crt", "CERTIFICATE", caDER)
	leaf := func(name string, serial int64, eku x509.ExtKeyUsage, ips []net.IP, dns []string) (string, string, tls.Certificate) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{eku}, IPAddresses: ips, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalPKCS8PrivateKey(k)
		c := write(name+".crt", "CERTIFICATE", der)
		kf := write(name+".key", "PRIVATE KEY", kder)
		kp, err := tls.LoadX509KeyPair(c, kf)
		if err != nil {
			t.Fatal(err)
		}
		return c, kf, kp
	}
	p.serverCert, p.serverKey, p.server = leaf("broker", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	p.clientCert, p.clientKey, _ = leaf("ingestd", 3, x509.ExtKeyUsageClientAuth, nil, nil)
	return p
}

func writeSecretFile(t *testing.T, dir, name, value string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// The whole security block parses, and values from files are read after parsing.
func TestConfigSecurityBlockLoads(t *testing.T) {
	pki := newTestPKI(t)
	pw := writeSecretFile(t, pki.dir, "kafka-pw", "s3cr #t: x")
	t.Setenv("SR_PW_SEC_TEST", "reg #pw")
	body := fmt.Sprintf(`name: secure
kafka:
  brokers: [broker-1.example.com:9094]
  topics: [orders]
  client_id: ingestd-secure
  instance_id: pod-0
  tls: {ca_file: %s, cert_file: %s, key_file: %s, server_name: broker.example.com}
  sasl: {mechanism: scram-sha-512, username: alice, password_file: %s}
schema_registry:
  url: https://reg:8443
  username: sr-user
  password_env: SR_PW_SEC_TEST
  tls: {ca_file: %s}
table: {uri: /tmp/t}
schema: {policy: evolve}
`, pki.ca, pki.clientCert, pki.clientKey, pw, pki.ca)
	cfgs, err := LoadConfigs(writeConfig(t, body))
	if err != nil {
		t.Fatal(err)
	}
	k := cfgs[0].Kafka
	if k.ClientID != "ingestd-secure" || k.InstanceID != "pod-0" || k.TLS.ServerName != "broker.example.com" || k.SASL.Mechanism != MechScram512 || k.SASL.Username != "alice" {
		t.Fatalf("kafka %+v tls %+v sasl %+v", k, k.TLS, k.SASL)
	}
	if len(cfgs[0].Warnings) != 0 {
		t.Fatalf("warnings: %v", cfgs[0].Warnings)
	}
	got, err := readSecret(k.SASL.PasswordFile, "")
	if err != nil || got.Reveal() != "s3cr #t: x" {
		t.Fatalf("password file read %v", err)
	}
	if _, err := kafkaSecurityOpts(k); err != nil {
		t.Fatal(err)
	}
	if _, err := registryClientOpts(cfgs[0].SchemaRegistry); err != nil {
		t.Fatal(err)
	}
}

// Each rule names file:line, the key and the fix, exactly.
func TestConfigSecurityValidation(t *testing.T) {
	pki := newTestPKI(t)
	pw := writeSecretFile(t, pki.dir, "pw", "pw")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	base := "name: s\nkafka:\n  brokers: [b:9094]\n  topics: [orders]\n%s\nschema_registry: {url: %q}\ntable: {uri: /tmp/t}\nschema: {policy: evolve}\n"
	cfg := func(kafka, url string) string { return fmt.Sprintf(base, kafka, url) }
	tests := []struct{ name, body, want string }{
		{"cert without key", cfg("  tls: {cert_file: "+pki.clientCert+"}", "http://r"),
			"p.yaml:5: kafka.tls: cert_file and key_file go together (fix: set both (client certificate, mTLS) or neither)"},
		{"ca file without PEM", cfg("  tls: {ca_file: "+pw+"}", "http://r"),
			"p.yaml:5: kafka.tls: ca_file " + pw + " holds no PEM certificate (want -----BEGIN CERTIFICATE-----) (fix: point ca_file/cert_file/key_file at readable PEM files (keys unencrypted))"},
		{"two password sources", cfg("  tls: {}\n  sasl: {mechanism: PLAIN, username: u, password_file: "+pw+", password_env: X}", "http://r"),
			"p.yaml:6: kafka.sasl has both password_file and password_env (fix: keep one)"},
		{"SCRAM without username", cfg("  tls: {}\n  sasl: {mechanism: SCRAM-SHA-256, password_file: "+pw+"}", "http://r"),
			"p.yaml:6: kafka.sasl.username is missing (SCRAM-SHA-256 needs a username) (fix: set kafka.sasl.username)"},
		{"missing password file", cfg("  tls: {}\n  sasl: {mechanism: SCRAM-SHA-512, username: u, password_file: /nonexistent/pw}", "http://r"),
			"p.yaml:6: kafka.sasl password: read secret file: open /nonexistent/pw: no such file or directory (fix: create the file (or export the variable) with the password)"},
		{"OAUTHBEARER without token", cfg("  tls: {}\n  sasl: {mechanism: OAUTHBEARER}", "http://r"),
			"p.yaml:6: kafka.sasl has no token source (OAUTHBEARER needs one) (fix: set kafka.sasl.token_file: /run/secrets/kafka-token (re-read on every re-authentication) or token_env)"},
		{"bad extension name", cfg("  tls: {}\n  sasl: {mechanism: OAUTHBEARER, token_file: "+pw+", extensions: {auth: x}}", "http://r"),
			`p.yaml:6: kafka.sasl.extensions: name "auth" must be letters only and not "auth" (RFC 7628) (fix: rename the extension)`},
		{"MSK IAM without TLS", cfg("  sasl: {mechanism: AWS_MSK_IAM}", "http://r"),
			"p.yaml:5: kafka.sasl.mechanism AWS_MSK_IAM needs kafka.tls (MSK's IAM listeners are TLS only) (fix: add kafka: {tls: {}} (the system roots verify MSK))"},
		{"unknown mechanism", cfg("  sasl: {mechanism: GSSAPI}", "http://r"),
			`p.yaml:5: kafka.sasl.mechanism "GSSAPI" is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM (fix: use one of those (Kafka's names))`},
		{"credentials in the registry URL", cfg("", "https://bob:hunter2@reg:8081"),
			"p.yaml:6: schema_registry.url carries credentials (user:password@): a URL is printed in errors and logs (fix: remove them from the URL and set schema_registry.username with password_file or password_env)"},
		{"registry tls over http", cfg("", "http://reg:8081") + "", ""},
	}
	tests[len(tests)-1].body = strings.Replace(cfg("", "http://reg:8081"), `schema_registry: {url: "http://reg:8081"}`, `schema_registry: {url: "http://reg:8081", tls: {}}`, 1)
	tests[len(tests)-1].want = "p.yaml:6: schema_registry.tls is set but schema_registry.url is http:// (fix: use an https:// URL, or remove the tls block)"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errorsOf(t, tt.body)
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if strings.Contains(got, "hunter2") {
				t.Errorf("secret in error: %s", got)
			}
		})
	}
	// AWS_MSK_IAM with an AWS configuration that does not load (AWS_PROFILE names a
	// profile no file has): refused at start-up, file:line, the profile and the fix
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(pki.dir, "aws-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(pki.dir, "aws-credentials"))
	t.Setenv("AWS_PROFILE", "nosuch")
	got := errorsOf(t, cfg("  tls: {}\n  sasl: {mechanism: AWS_MSK_IAM}", "http://r"))
	if !strings.HasPrefix(got, "p.yaml:6: kafka.sasl.mechanism AWS_MSK_IAM: load AWS configuration: ") || !strings.Contains(got, "nosuch") ||
		!strings.HasSuffix(got, "(fix: fix the AWS configuration (AWS_PROFILE, AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE))") {
		t.Errorf("missing AWS profile: %s", got)
	}
	t.Setenv("AWS_PROFILE", "")
	// SASL without TLS loads, with a WARN naming the line
	cfgs, err := LoadConfigs(writeConfig(t, cfg("  sasl: {mechanism: PLAIN, username: u, password_file: "+pw+"}", "http://r")))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs[0].Warnings) != 1 || !strings.HasSuffix(cfgs[0].Warnings[0].Error(), "p.yaml:5: kafka.sasl PLAIN without kafka.tls: credentials and records cross the network unencrypted (SASL_PLAINTEXT) (fix: add kafka.tls (e.g. tls: {} or tls: {ca_file: ...}) unless the listener really is SASL_PLAINTEXT)") {
		t.Fatalf("warnings %v", cfgs[0].Warnings)
	}
}

func TestSecretRedacted(t *testing.T) {
	s := Secret("hunter2")
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "pw", s, "cfg", RegistryConfig{URL: "http://r", Password: s})
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "pw", s)
	js, _ := json.Marshal(RegistryConfig{Password: s})
	buf.Write(js)
	for _, verb := range []string{"%s", "%v", "%+v", "%#v", "%q", "%x", "%d"} {
		fmt.Fprintf(&buf, verb+"|", s)
		fmt.Fprintf(&buf, verb+"|", RegistryConfig{Password: s})
		fmt.Fprintf(&buf, verb+"|", &RegistryConfig{Password: s})
	}
	if strings.Contains(buf.String(), "hunter2") || strings.Contains(buf.String(), fmt.Sprintf("%x", "hunter2")) {
		t.Fatalf("secret printed: %s", buf.String())
	}
	if !strings.Contains(string(js), `"Password":"[redacted]"`) || s.Reveal() != "hunter2" || fmt.Sprint(s) != "[redacted]" {
		t.Fatalf("json %s", js)
	}
}

// A kfake cluster with TLS, SCRAM-SHA-512 and ACLs: the options from kafkaSecurityOpts
// connect and produce; a wrong password and a missing CA fail, classified as fatal.
func TestKafkaSecurityOptsAgainstKfake(t *testing.T) {
	pki := newTestPKI(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.dlq"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.server}, ClientCAs: pki.caPool, ClientAuth: tls.RequireAndVerifyClientCert}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin-pw"),
		kfake.User("SCRAM-SHA-512", "alice", "alice #pw: 1",
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "orders", Operation: kmsg.ACLOperationRead, Allow: true, Pattern: kmsg.ACLResourcePatternTypeLiteral},
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "orders", Operation: kmsg.ACLOperationDescribe, Allow: true, Pattern: kmsg.ACLResourcePatternTypeLiteral},
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "orders.dlq", Operation: kmsg.ACLOperationDescribe, Allow: true, Pattern: kmsg.ACLResourcePatternTypeLiteral}),
		kfake.EnableACLs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := KafkaConfig{Brokers: c.ListenAddrs(), Topics: []string{"orders"}, Group: "g",
		TLS:  &TLSConfig{CAFile: pki.ca, CertFile: pki.clientCert, KeyFile: pki.clientKey},
		SASL: &SASLConfig{Mechanism: MechScram512, Username: "alice", PasswordFile: writeSecretFile(t, pki.dir, "alice", "alice #pw: 1")}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce := func(k KafkaConfig, topic string) error {
		opts, err := kafkaSecurityOpts(k)
		if err != nil {
			return err
		}
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(k.Brokers...), kgo.DisableIdempotentWrite(), kgo.RequestRetries(0))...)
		if err != nil {
			return err
		}
		defer cl.Close()
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	listTopics := func(k KafkaConfig) error {
		opts, err := kafkaSecurityOpts(k)
		if err != nil {
			return err
		}
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(k.Brokers...))...)
		if err != nil {
			return err
		}
		defer cl.Close()
		_, err = kadm.NewClient(cl).ListTopics(ctx, "orders")
		return err
	}
	// alice may not write orders.dlq: TOPIC_AUTHORIZATION_FAILED, fatal, ACL named
	err = produce(k, "orders.dlq")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to orders.dlq without WRITE: %v", err)
	}
	msg, fatal := fatalKafkaError(k, "WRITE on topic orders.dlq", err)
	want := "kafka authorization failed: User:alice (SCRAM-SHA-512) is missing WRITE on topic orders.dlq (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:alice --operation Write --topic orders.dlq)"
	if !fatal || msg != want {
		t.Fatalf("classified %v %q\nwant %q", fatal, msg, want)
	}
	// the admin (superuser) may
	admin := k
	admin.SASL = &SASLConfig{Mechanism: MechScram512, Username: "admin", PasswordFile: writeSecretFile(t, pki.dir, "admin", "admin-pw")}
	if err := produce(admin, "orders.dlq"); err != nil {
		t.Fatalf("admin produce: %v", err)
	}
	// without the CA: the broker's certificate is refused, fatal
	noCA := admin
	noCA.TLS = &TLSConfig{CertFile: pki.clientCert, KeyFile: pki.clientKey}
	err = listTopics(noCA)
	if msg, fatal := fatalKafkaError(noCA, "", err); !fatal || !strings.HasPrefix(msg, "kafka TLS: the broker's certificate was refused: ") {
		t.Fatalf("no CA: %v → %v %q", err, fatal, msg)
	}
	// without a client certificate: refused by the broker, fatal
	noCert := admin
	noCert.TLS = &TLSConfig{CAFile: pki.ca}
	err = listTopics(noCert)
	if msg, fatal := fatalKafkaError(noCert, "", err); !fatal || !strings.HasPrefix(msg, "kafka TLS: the broker refused the handshake without a client certificate: ") {
		t.Fatalf("no client cert: %v → %v %q", err, fatal, msg)
	}
}

func TestFatalKafkaErrorClassification(t *testing.T) {
	k := KafkaConfig{Group: "ingestd-orders", Topics: []string{"orders"}, InstanceID: "pod-0"}
	for _, tt := range []struct {
		err   error
		fatal bool
		want  string
	}{
		{&kgo.ErrGroupSession{Err: kerr.GroupAuthorizationFailed}, true,
			"kafka authorization failed: User:ANONYMOUS (no SASL, no client certificate) is missing READ on group ingestd-orders (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal <principal> --operation Read --group ingestd-orders)"},
		{fmt.Errorf("fetch: %w", kerr.TopicAuthorizationFailed), true,
			"kafka authorization failed: User:ANONYMOUS (no SASL, no client certificate) is missing READ on topic orders (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal <principal> --operation Read --topic orders)"},
		{kerr.FencedInstanceID, true,
			`kafka: another consumer joined group ingestd-orders with kafka.instance_id "pod-0", fencing this one (fix: give every process its own instance_id, e.g. ${HOSTNAME})`},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false, ""},
		{kerr.NotCoordinator, false, ""},
		{kerr.IllegalSaslState, false, ""},
		{context.DeadlineExceeded, false, ""},
	} {
		msg, fatal := fatalKafkaError(k, "", tt.err)
		if fatal != tt.fatal || msg != tt.want {
			t.Errorf("%v: got %v %q\nwant %v %q", tt.err, fatal, msg, tt.fatal, tt.want)
		}
	}
}

// The registry client speaks TLS with the configured CA and sends basic auth or a
// Bearer token read from the file on every request (a rotated file is used next time).
func TestRegistryClientOptsTLSAndAuth(t *testing.T) {
	pki := newTestPKI(t)
	var got []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[]`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.server}}
	srv.StartTLS()
	defer srv.Close()
	tok := writeSecretFile(t, pki.dir, "tok", "tok-1")
	pw := writeSecretFile(t, pki.dir, "srpw", "p #1: x")
	ctx := context.Background()
	for _, r := range []*RegistryConfig{
		{URL: srv.URL, TLS: &TLSConfig{CAFile: pki.ca}, BearerTokenFile: tok},
		{URL: srv.URL, TLS: &TLSConfig{CAFile: pki.ca}, Username: "u", PasswordFile: pw},
	} {
		opts, err := registryClientOpts(r)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := sr.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Subjects(ctx); err != nil {
			t.Fatal(err)
		}
		if r.BearerTokenFile != "" {
			writeSecretFile(t, pki.dir, "tok", "tok-2")
			if _, err := cl.Subjects(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{"Bearer tok-1", "Bearer tok-2", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p #1: x"))}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("Authorization headers %q, want %q", got, want)
	}
	// without the CA the system roots refuse the test CA
	opts, _ := registryClientOpts(&RegistryConfig{URL: srv.URL, TLS: &TLSConfig{}})
	cl, _ := sr.NewClient(opts...)
	if _, err := cl.Subjects(ctx); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("no CA: %v", err)
	}
}

// OAUTHBEARER and MSK IAM at the SASL layer: the first client message carries the token
// (re-read from the file) and the extensions; MSK IAM signs for the broker's region.
func TestSASLMechanismsFirstMessage(t *testing.T) {
	dir := t.TempDir()
	tok := writeSecretFile(t, dir, "tok", "hdr.payload.")
	m, err := saslMechanism(&SASLConfig{Mechanism: MechOAuthBearer, TokenFile: tok, Extensions: map[string]string{"logicalCluster": "lkc-1"}})
	if err != nil {
		t.Fatal(err)
	}
	before := tokenReads.Load()
	_, first, err := m.Authenticate(context.Background(), "b:9094")
	if err != nil || string(first) != "n,,\x01auth=Bearer hdr.payload.\x01logicalCluster=lkc-1\x01\x01" {
		t.Fatalf("oauth first message %q %v", first, err)
	}
	writeSecretFile(t, dir, "tok", "hdr.rotated.")
	if _, first, _ = m.Authenticate(context.Background(), "b:9094"); !strings.Contains(string(first), "auth=Bearer hdr.rotated.") || tokenReads.Load()-before != 2 {
		t.Fatalf("token not re-read: %q reads %d", first, tokenReads.Load()-before)
	}
	// an expired JWT is refused before it is sent, named by its file and subject
	enc := base64.RawURLEncoding.EncodeToString
	expired := enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(`{"sub":"alice","exp":1700000000}`)) + "."
	writeSecretFile(t, dir, "tok", expired)
	_, _, err = m.Authenticate(context.Background(), "b:9094")
	want := fmt.Sprintf(`read kafka.sasl token: the token from file %s (sub "alice") expired at 2023-11-14T22:13:20Z; whatever renews it has stopped`, tok)
	if err == nil || err.Error() != want {
		t.Fatalf("expired token: %v\nwant %s", err, want)
	}
	if msg, fatal := fatalKafkaError(KafkaConfig{SASL: &SASLConfig{Mechanism: MechOAuthBearer, TokenFile: tok}}, "", err); !fatal || strings.Contains(msg, expired) ||
		!strings.HasPrefix(msg, "kafka credentials for User:alice (OAUTHBEARER token subject): "+want) {
		t.Fatalf("expired token classified %v %q", fatal, msg)
	}
	// the MSK IAM callback reads the environment on each authentication
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalr")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	iam, err := saslMechanism(&SASLConfig{Mechanism: MechMSKIAM})
	if err != nil {
		t.Fatal(err)
	}
	_, first, err = iam.Authenticate(context.Background(), "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
	if err != nil || !strings.Contains(string(first), `"x-amz-credential":"AKIDEXAMPLE/`) || !strings.Contains(string(first), "/eu-west-1/kafka-cluster/aws4_request") {
		t.Fatalf("msk iam first message %s %v", first, err)
	}
	if _, _, err = iam.Authenticate(context.Background(), "kafka.internal.example.com:9098"); err == nil {
		t.Fatal("custom DNS without AWS_REGION signed")
	}
}

// The start-up check on a kfake cluster with SCRAM and ACLs: a principal without WRITE
// on the dead-letter topic, and one without READ on the group, are refused before
// consuming, with the ACL named; the status says failed with the same message.
func TestStartupAccessCheck(t *testing.T) {
	h := newHarness(t, 1)
	topicACL := func(name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: name, Operation: op, Allow: true, Pattern: kmsg.ACLResourcePatternTypeLiteral}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.dlq"), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "admin", "admin-pw"),
		kfake.User("SCRAM-SHA-512", "alice", "alice-pw", topicACL("orders", kmsg.ACLOperationRead), topicACL("orders", kmsg.ACLOperationDescribe),
			topicACL("orders.dlq", kmsg.ACLOperationDescribe),
			kfake.ACL{Resource: kmsg.ACLResourceTypeGroup, Name: "ingestd-orders", Operation: kmsg.ACLOperationRead, Allow: true, Pattern: kmsg.ACLResourcePatternTypeLiteral}),
		kfake.User("SCRAM-SHA-512", "bob", "bob-pw", topicACL("orders", kmsg.ACLOperationRead), topicACL("orders", kmsg.ACLOperationDescribe),
			topicACL("orders.dlq", kmsg.ACLOperationDescribe), topicACL("orders.dlq", kmsg.ACLOperationWrite),
			kfake.ACL{Resource: kmsg.ACLResourceTypeGroup, Name: "ingestd-orders", Operation: kmsg.ACLOperationDescribe, Allow: true, Pattern: kmsg.ACLResourcePatternTypeLiteral}),
		kfake.User("SCRAM-SHA-512", "carol", "carol-pw", topicACL("orders", kmsg.ACLOperationRead), topicACL("orders", kmsg.ACLOperationDescribe),
			kfake.ACL{Resource: kmsg.ACLResourceTypeGroup, Name: "ingestd-orders", Operation: kmsg.ACLOperationRead, Allow: true, Pattern: kmsg.ACLResourcePatternTypeLiteral}),
		kfake.EnableACLs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	for user, want := range map[string]string{
		"alice": `check topics: dead-letter topic "orders.dlq": User:alice (SCRAM-SHA-512) is missing WRITE on topic orders.dlq (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:alice --operation Write --topic orders.dlq)`,
		"carol": `check topics: dead-letter topic "orders.dlq": User:carol (SCRAM-SHA-512) is missing WRITE on topic orders.dlq (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:carol --operation Write --topic orders.dlq)`,
		"bob":   `check group: User:bob (SCRAM-SHA-512) is missing READ on group ingestd-orders (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:bob --operation Read --group ingestd-orders)`,
	} {
		cfg := h.config()
		cfg.Kafka.Brokers = c.ListenAddrs()
		cfg.Kafka.SASL = &SASLConfig{Mechanism: MechScram512, Username: user, PasswordFile: writeSecretFile(t, dir, user, user+"-pw")}
		sec, err := kafkaSecurityOpts(cfg.Kafka)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		m := h.startWith(user, cfg, func(d *Deps) { d.KafkaSecurity = sec })
		select {
		case err := <-m.done:
			m.done <- err
			if err == nil || err.Error() != want {
				t.Fatalf("%s: Run returned %v\nwant %s", user, err, want)
			}
			if s := m.p.Status(); s.State != StateFailed || s.Error != want {
				t.Fatalf("%s: status %+v", user, s)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("%s: refused after %v", user, d)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: pipeline still running", user)
		}
	}
}

func TestFatalWatch(t *testing.T) {
	var w fatalWatch
	t0 := time.Now()
	for i := range 10 { // a burst of polls, as kgo reports one failure
		if w.observe(t0.Add(time.Duration(i)*10*time.Millisecond), fatalGrace) {
			t.Fatalf("fatal within a burst (poll %d)", i)
		}
	}
	if !w.observe(t0.Add(fatalGrace), fatalGrace) {
		t.Fatal("a failure still seen fatalGrace later is fatal")
	}
	w = fatalWatch{}
	if w.observe(t0, fatalGrace) || w.observe(t0.Add(2*fatalForget), fatalGrace) || w.observe(t0.Add(2*fatalForget+time.Second), fatalGrace) {
		t.Fatal("a failure a quiet minute ago still counted")
	}
	w = fatalWatch{}
	if w.observe(t0, authGrace) || w.observe(t0.Add(fatalGrace), authGrace) || !w.observe(t0.Add(authGrace), authGrace) {
		t.Fatal("an authentication failure is fatal after authGrace, not before")
	}
}

// C40 R5, run 1: one spurious GROUP_AUTHORIZATION_FAILED (as seen around a
// re-authentication) on a heartbeat does not fail the pipeline: it rejoins and goes on,
// every record once. A persistent one is fatal (TestSecuredFailFast, real broker).
func TestSpuriousGroupAuthErrorIsNotFatal(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	h := newHarness(t, 2)
	h.produce(1, 1000, 0, 2, -1)
	m := h.start("a", nil)
	h.waitHandled(1000, 30*time.Second, m)
	var injected atomic.Int32
	h.cluster.ControlKey(kmsg.Heartbeat.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		resp := kr.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		injected.Add(1)
		return resp, nil, true
	})
	waitFor(t, 30*time.Second, func() error { return atLeast("injected heartbeat failures", int64(injected.Load()), 1) })
	h.produce(1001, 1000, 0, 2, -1)
	h.waitHandled(2000, 30*time.Second, m)
	time.Sleep(fatalGrace + time.Second) // past the grace a persistent failure would get
	if s := m.p.Status(); s.State != StateRunning {
		t.Fatalf("after one spurious group authorization failure: %+v", s)
	}
	m.stop(t)
	h.checkExactlyOnce(2000)
}

// gafCommit answers an OffsetCommit with GROUP_AUTHORIZATION_FAILED for every partition.
func gafCommit(kr kmsg.Request) kmsg.Response {
	req := kr.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.Version = req.Version
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// committedOffsets are the group's committed offsets per partition of topic.
func committedOffsets(t *testing.T, h *harness, group string) map[int32]int64 {
	t.Helper()
	resps, err := kadm.NewClient(h.producer).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, ps := range resps {
		for p, r := range ps {
			out[p] = r.At
		}
	}
	return out
}

// C40 R5, run 1, on the request the reports name: one OffsetCommit answered with
// GROUP_AUTHORIZATION_FAILED for every partition while records flow. Its offsets are
// committed again (the Decision: up to 3 retries, the first 1 s later), so the group's
// offsets end at the topic's end even for a partition no later commit covered (without
// the retry one partition stayed 500 behind); the pipeline stays running past the grace
// a persistent failure gets and lands every record once.
func TestSpuriousOffsetCommitAuthErrorIsNotFatal(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	h := newHarness(t, 2)
	h.produce(1, 1000, 0, 2, -1)
	m := h.start("a", nil)
	h.waitHandled(1000, 30*time.Second, m)
	time.Sleep(500 * time.Millisecond) // the last commit of the first records is out
	var injected, after atomic.Int32
	h.cluster.ControlKey(kmsg.OffsetCommit.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		if injected.Load() == 0 {
			injected.Add(1)
			return gafCommit(kr), nil, true
		}
		after.Add(1)
		return nil, nil, false
	})
	h.produce(1001, 1000, 0, 2, -1)
	h.waitHandled(2000, 30*time.Second, m)
	waitFor(t, 30*time.Second, func() error { return atLeast("injected offset commit failures", int64(injected.Load()), 1) })
	waitFor(t, 10*time.Second, func() error { return atLeast("offset commits after the refused one", int64(after.Load()), 1) })
	time.Sleep(2 * time.Second) // the retry, 1 s after the refusal
	time.Sleep(fatalGrace + time.Second)
	if s := m.p.Status(); s.State != StateRunning {
		t.Fatalf("after one spurious GROUP_AUTHORIZATION_FAILED on OffsetCommit: %+v", s)
	}
	if got := injected.Load(); got != 1 {
		t.Errorf("%d offset commits answered with the failure, want 1", got)
	}
	if got := committedOffsets(t, h, h.config().Kafka.Group); got[0]+got[1] != 2000 {
		t.Errorf("group offsets after the retry: %v, want the topic's end (2000 records over 2 partitions)", got)
	}
	m.stop(t)
	h.checkExactlyOnce(2000)
}

// C40 R5, a persisting refusal: every OffsetCommit answered with
// GROUP_AUTHORIZATION_FAILED (heartbeats and fetches still fine, so only the commit
// path sees it). After the 3 retries (1, 2 and 4 s apart) the pipeline fails, 7 to 10 s
// after the first refusal (a burst of refused commits from several flushes is one
// refusal, not a persisting one), naming the principal and READ on the group; the records
// it wrote before are in the table once.
func TestPersistentOffsetCommitAuthErrorIsFatal(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	h := newHarness(t, 2)
	m := h.start("a", nil)
	var refused atomic.Int32
	var first atomic.Int64
	h.cluster.ControlKey(kmsg.OffsetCommit.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		if refused.Add(1) == 1 {
			first.Store(time.Now().UnixNano())
		}
		return gafCommit(kr), nil, true
	})
	h.produce(1, 1000, 0, 2, -1)
	h.waitHandled(1000, 30*time.Second, m)
	var err error
	select {
	case err = <-m.done:
		m.done <- err
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20 s after offset commits began to be refused (%d refused)", refused.Load())
	}
	took := time.Since(time.Unix(0, first.Load()))
	want := "commit group offsets: kafka authorization failed: User:ANONYMOUS (no SASL, no client certificate) is missing READ on group ingestd-orders (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal <principal> --operation Read --group ingestd-orders)"
	if s := m.p.Status(); s.State != StateFailed || s.Error != want {
		t.Errorf("after persisting refusals: %s %q\nwant failed %q (run returned %v)", s.State, s.Error, want, err)
	}
	if took < 6*time.Second || took > 10*time.Second {
		t.Errorf("failed %v after the first refusal, want after the retries (about 7 s), within 10 s", took)
	}
	if n := refused.Load(); n < 1+commitAuthRetries {
		t.Errorf("%d offset commits refused, want at least %d (the commit and its retries)", n, 1+commitAuthRetries)
	}
	h.checkExactlyOnce(1000)
}
