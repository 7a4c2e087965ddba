package ingest

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/ingest/config"
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
	cfgs, err := config.Load(writeConfig(t, body))
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
		"carol": `check topics: dead-letter topic "orders.dlq": User:carol (SCRAM-SHA-512) is missing WRITE on topic orders.dlq (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:carol --operation Write --topic orders.dlq)`,
		"bob":   `check group: User:bob (SCRAM-SHA-512) is missing READ on group ingestd-orders (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:bob --operation Read --group ingestd-orders)`,
	} {
		cfg := h.config()
		cfg.Kafka.Brokers = c.ListenAddrs()
		cfg.Kafka.SASL = &config.SASL{Mechanism: config.MechScram512, Username: user, PasswordFile: writeSecretFile(t, dir, user, user+"-pw")}
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
