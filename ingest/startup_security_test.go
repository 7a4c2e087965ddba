package ingest

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/internal/configtest"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
	"github.com/ingestd/ingestd/internal/testpki"
)

// The whole security block parses, and values from files are read after parsing.
func TestConfigSecurityBlockLoads(t *testing.T) {
	pki := testpki.New(t)
	pw := pki.SecretFile(t, "kafka-pw", "s3cr #t: x")
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
`, pki.CA, pki.ClientCert, pki.ClientKey, pw, pki.CA)
	cfgs, err := config.Load(configtest.Write(t, body))
	if err != nil {
		t.Fatal(err)
	}
	k := cfgs[0].Kafka
	if k.ClientID != "ingestd-secure" || k.InstanceID != "pod-0" || k.TLS.ServerName != "broker.example.com" || k.SASL.Mechanism != config.MechScram512 || k.SASL.Username != "alice" {
		t.Fatalf("kafka %+v tls %+v sasl %+v", k, k.TLS, k.SASL)
	}
	if len(cfgs[0].Warnings) != 0 {
		t.Fatalf("warnings: %v", cfgs[0].Warnings)
	}
	got, err := config.ReadSecret(k.SASL.PasswordFile, "")
	if err != nil || got.Reveal() != "s3cr #t: x" {
		t.Fatalf("password file read %v", err)
	}
	if _, err := kafkaclient.SecurityOpts(k, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := registryClientOpts(cfgs[0].SchemaRegistry); err != nil {
		t.Fatal(err)
	}
}

// The registry client speaks TLS with the configured CA and sends basic auth or a
// Bearer token read from the file on every request (a rotated file is used next time).
func TestRegistryClientOptsTLSAndAuth(t *testing.T) {
	pki := testpki.New(t)
	var got []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[]`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.Server}}
	srv.StartTLS()
	defer srv.Close()
	tok := pki.SecretFile(t, "tok", "tok-1")
	pw := pki.SecretFile(t, "srpw", "p #1: x")
	ctx := context.Background()
	for _, r := range []*config.Registry{
		{URL: srv.URL, TLS: &config.TLS{CAFile: pki.CA}, BearerTokenFile: tok},
		{URL: srv.URL, TLS: &config.TLS{CAFile: pki.CA}, Username: "u", PasswordFile: pw},
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
			pki.SecretFile(t, "tok", "tok-2")
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
	opts, _ := registryClientOpts(&config.Registry{URL: srv.URL, TLS: &config.TLS{}})
	cl, _ := sr.NewClient(opts...)
	if _, err := cl.Subjects(ctx); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("no CA: %v", err)
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
		"carol": `check topics: dead-letter topic "orders.dlq": User:carol (SCRAM-SHA-512) is missing WRITE on topic orders.dlq (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:carol --operation Write --topic orders.dlq); or the topic does not exist (the broker does not tell a principal without DESCRIBE on it; check with kafka-topics.sh --describe --topic orders.dlq)`,
		"bob":   `check group: User:bob (SCRAM-SHA-512) is missing READ on group ingestd-orders (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:bob --operation Read --group ingestd-orders)`,
	} {
		cfg := h.config()
		cfg.Kafka.Brokers = c.ListenAddrs()
		cfg.Kafka.SASL = &config.SASL{Mechanism: config.MechScram512, Username: user, PasswordFile: testpki.WriteSecret(t, dir, user, user+"-pw")}
		sec, err := kafkaclient.SecurityOpts(cfg.Kafka, nil)
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
