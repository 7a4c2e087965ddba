package kafkaclient

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/internal/testpki"
)

// A kfake cluster with TLS, SCRAM-SHA-512 and ACLs: the options from SecurityOpts
// connect and produce; a wrong password and a missing CA fail, classified as fatal.
func TestKafkaSecurityOptsAgainstKfake(t *testing.T) {
	pki := testpki.New(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.dlq"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.Server}, ClientCAs: pki.CAPool, ClientAuth: tls.RequireAndVerifyClientCert}),
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
	k := config.Kafka{Brokers: c.ListenAddrs(), Topics: []string{"orders"}, Group: "g",
		TLS:  &config.TLS{CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey},
		SASL: &config.SASL{Mechanism: config.MechScram512, Username: "alice", PasswordFile: pki.SecretFile(t, "alice", "alice #pw: 1")}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce := func(k config.Kafka, topic string) error {
		opts, err := SecurityOpts(k, nil)
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
	listTopics := func(k config.Kafka) error {
		opts, err := SecurityOpts(k, nil)
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
	msg, fatal := fatalMessage(k, "WRITE on topic orders.dlq", err)
	want := "kafka authorization failed: User:alice (SCRAM-SHA-512) is missing WRITE on topic orders.dlq (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:alice --operation Write --topic orders.dlq)"
	if !fatal || msg != want {
		t.Fatalf("classified %v %q\nwant %q", fatal, msg, want)
	}
	// the admin (superuser) may
	admin := k
	admin.SASL = &config.SASL{Mechanism: config.MechScram512, Username: "admin", PasswordFile: pki.SecretFile(t, "admin", "admin-pw")}
	if err := produce(admin, "orders.dlq"); err != nil {
		t.Fatalf("admin produce: %v", err)
	}
	// without the CA: the broker's certificate is refused, fatal
	noCA := admin
	noCA.TLS = &config.TLS{CertFile: pki.ClientCert, KeyFile: pki.ClientKey}
	err = listTopics(noCA)
	if msg, fatal := fatalMessage(noCA, "", err); !fatal || !strings.HasPrefix(msg, "kafka TLS: the broker's certificate was refused: ") {
		t.Fatalf("no CA: %v → %v %q", err, fatal, msg)
	}
	// without a client certificate: refused by the broker, fatal
	noCert := admin
	noCert.TLS = &config.TLS{CAFile: pki.CA}
	err = listTopics(noCert)
	if msg, fatal := fatalMessage(noCert, "", err); !fatal || !strings.HasPrefix(msg, "kafka TLS: the broker refused the handshake without a client certificate: ") {
		t.Fatalf("no client cert: %v → %v %q", err, fatal, msg)
	}
}

func TestFatalKafkaErrorClassification(t *testing.T) {
	k := config.Kafka{Group: "ingestd-orders", Topics: []string{"orders"}, InstanceID: "pod-0"}
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
		msg, fatal := fatalMessage(k, "", tt.err)
		if fatal != tt.fatal || msg != tt.want {
			t.Errorf("%v: got %v %q\nwant %v %q", tt.err, fatal, msg, tt.fatal, tt.want)
		}
	}
}

// OAUTHBEARER and MSK IAM at the SASL layer: the first client message carries the token
// (re-read from the file) and the extensions; MSK IAM signs for the broker's region.
func TestSASLMechanismsFirstMessage(t *testing.T) {
	dir := t.TempDir()
	tok := testpki.WriteSecret(t, dir, "tok", "hdr.payload.")
	metrics := NewMetrics(prometheus.NewRegistry())
	tokenReads := func() float64 { return testutil.ToFloat64(metrics.CredentialReads.WithLabelValues(credentialToken)) }
	m, err := saslMechanism(&config.SASL{Mechanism: config.MechOAuthBearer, TokenFile: tok, Extensions: map[string]string{"logicalCluster": "lkc-1"}}, metrics)
	if err != nil {
		t.Fatal(err)
	}
	before := tokenReads()
	_, first, err := m.Authenticate(context.Background(), "b:9094")
	if err != nil || string(first) != "n,,\x01auth=Bearer hdr.payload.\x01logicalCluster=lkc-1\x01\x01" {
		t.Fatalf("oauth first message %q %v", first, err)
	}
	testpki.WriteSecret(t, dir, "tok", "hdr.rotated.")
	if _, first, _ = m.Authenticate(context.Background(), "b:9094"); !strings.Contains(string(first), "auth=Bearer hdr.rotated.") || tokenReads()-before != 2 {
		t.Fatalf("token not re-read: %q reads %v", first, tokenReads()-before)
	}
	// an expired JWT is refused before it is sent, named by its file and subject
	enc := base64.RawURLEncoding.EncodeToString
	expired := enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(`{"sub":"alice","exp":1700000000}`)) + "."
	testpki.WriteSecret(t, dir, "tok", expired)
	_, _, err = m.Authenticate(context.Background(), "b:9094")
	want := fmt.Sprintf(`read kafka.sasl token: the token from file %s (sub "alice") expired at 2023-11-14T22:13:20Z; whatever renews it has stopped`, tok)
	if err == nil || err.Error() != want {
		t.Fatalf("expired token: %v\nwant %s", err, want)
	}
	if msg, fatal := fatalMessage(config.Kafka{SASL: &config.SASL{Mechanism: config.MechOAuthBearer, TokenFile: tok}}, "", err); !fatal || strings.Contains(msg, expired) ||
		!strings.HasPrefix(msg, "kafka credentials for User:alice (OAUTHBEARER token subject): "+want) {
		t.Fatalf("expired token classified %v %q", fatal, msg)
	}
	// the MSK IAM callback reads the environment on each authentication
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalr")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	iam, err := saslMechanism(&config.SASL{Mechanism: config.MechMSKIAM}, nil)
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
