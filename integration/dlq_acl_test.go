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

// revoke deletes the literal allow ACL user has for op on topic (over PLAINTEXT, as the
// super user) and fails unless exactly one ACL went; it returns once the broker no longer
// lists the ACL.
func revoke(t *testing.T, s secureStack, user, topic string, op kadm.ACLOperation) {
	t.Helper()
	adm := kadm.NewClient(kafkaClient(t, s.stack))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acl := kadm.NewACLs().Allow("User:" + user).AllowHosts().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).Operations(op)
	res, err := adm.DeleteACLs(ctx, acl)
	n := 0
	for _, r := range res {
		if r.Err != nil {
			err = r.Err
		}
		n += len(r.Deleted)
	}
	if err != nil || n != 1 {
		t.Fatalf("revoke %v on topic %s from %s: %d deleted, %v", op, topic, user, n, err)
	}
	// The controller has committed the deletion; the broker's authorizer applies it when it
	// replays the metadata log. DescribeACLs is answered by that authorizer, the one that
	// checks produce requests.
	waitFor(t, nil, 20*time.Second, fmt.Sprintf("the broker's authorizer to drop %v on %s for %s", op, topic, user), func() bool {
		desc, err := adm.DescribeACLs(ctx, acl)
		if err != nil {
			return false
		}
		for _, r := range desc {
			if r.Err != nil || len(r.Described) > 0 {
				return false
			}
		}
		return true
	})
}

// TestSecuredDLQWriteRevoked: a dead_letter pipeline over SASL_SSL SCRAM-SHA-512 lands 200
// v1 orders; then its principal loses WRITE on the dead-letter topic while it runs, and 50
// v2 orders (a field the table lacks) must be dead-lettered. The pipeline fails within
// 15 s with the ACL named (not retried as a transient produce error), /readyz names it,
// the table's txn stays at the last v1 record (nothing past the first record to
// dead-letter is committed), nothing reaches the dead-letter topic, and a second pipeline
// of the same process keeps consuming.
func TestSecuredDLQWriteRevoked(t *testing.T) {
	s := needSecure(t)
	topic := createTopic(t, s.stack, "sec-dlqacl", 1)
	dlq := createTopic(t, s.stack, "sec-dlqacl.dlq", 1)
	other := createTopic(t, s.stack, "sec-dlqacl-other", 1)
	otherDLQ := createTopic(t, s.stack, "sec-dlqacl-other.dlq", 1)
	stamp := time.Now().UnixNano()
	user, group, otherGroup := fmt.Sprintf("dlqacl%d", stamp), fmt.Sprintf("dlqacl-%d", stamp), fmt.Sprintf("dlqacl-other-%d", stamp)
	pw := fmt.Sprintf("dlq-Secret-%d", stamp)
	grant(t, s, user, pw, map[string][]kadm.ACLOperation{topic: {kadm.OpRead, kadm.OpDescribe}, dlq: {kadm.OpWrite, kadm.OpDescribe}}, group)
	grant(t, s, user, "", map[string][]kadm.ACLOperation{other: {kadm.OpRead, kadm.OpDescribe}, otherDLQ: {kadm.OpWrite, kadm.OpDescribe}}, otherGroup)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	pwFile := writeFile(t, filepath.Join(dir, "pw"), pw+"\n")
	sasl := fmt.Sprintf("  tls: {ca_file: %s}\n  sasl: {mechanism: SCRAM-SHA-512, username: %s, password_file: %s}", s.ca, user, pwFile)
	table, otherTable := filepath.Join(dir, "silver"), filepath.Join(dir, "other")
	writePipeline(t, cfgDir, "silver", secureYAML("silver", s, s.saslSSL, sasl, topic, table, "dead_letter", dlq, group))
	writePipeline(t, cfgDir, "other", secureYAML("other", s, s.saslSSL, sasl, other, otherTable, "evolve", otherDLQ, otherGroup))
	first := produce(t, s.stack, topic, 200, 0, 1)
	otherFirst := produce(t, s.stack, other, 100, 0, 1)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 60*time.Second, "the first 200 v1 orders", func() bool { return handled(t, table) == 200 && handled(t, otherTable) == 100 })

	revoke(t, s, user, dlq, kadm.OpWrite)
	produce(t, s.stack, topic, 0, 50, 201)
	produced := time.Now()
	want := fmt.Sprintf("kafka authorization failed: User:%s (SCRAM-SHA-512) is missing WRITE on topic %s (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:%s --operation Write --topic %s)", user, dlq, user, dlq)
	var r readyz
	waitFor(t, d, 30*time.Second, "the silver pipeline to fail", func() bool {
		r, _ = d.readyz(t)
		for _, p := range r.Pipelines {
			if p.Pipeline == "silver" && p.State == "failed" {
				return true
			}
		}
		return false
	})
	took := time.Since(produced)
	if took > 15*time.Second {
		t.Errorf("the pipeline failed %v after the records to dead-letter, want < 15 s", took)
	}
	for _, p := range r.Pipelines {
		switch p.Pipeline {
		case "silver":
			if !strings.Contains(p.Error, want) {
				t.Errorf("/readyz error of silver:\n%s\nwant it to contain\n%s", p.Error, want)
			}
		case "other":
			if p.State != "running" {
				t.Errorf("/readyz: the other pipeline is %s (%s), want running", p.State, p.Error)
			}
		}
	}
	otherSecond := produce(t, s.stack, other, 100, 0, 101)
	waitFor(t, d, 30*time.Second, "the other pipeline to go on consuming", func() bool { return handled(t, otherTable) == 200 })
	if n := handled(t, table); n != 200 {
		t.Errorf("silver txns account for %d records after the failure, want 200 (nothing past offset 199)", n)
	}
	if n := len(readAll(t, s.brokers, dlq)); n != 0 {
		t.Errorf("%d records on %s, want 0", n, dlq)
	}
	if code := d.stop(t); code != 1 {
		t.Errorf("exit code %d, want 1 (a pipeline failed)", code)
	}
	logs, _ := os.ReadFile(d.logs.Name())
	if !strings.Contains(string(logs), `"msg":"pipeline failed","pipeline":"silver"`) || !strings.Contains(string(logs), want) {
		t.Errorf("log lacks the failure naming the ACL")
	}
	checkOrders(t, "silver", readTable(t, s.stack, table), first, false)
	checkOrders(t, "other", readTable(t, s.stack, otherTable), append(otherFirst, otherSecond...), false)
	noSecret(t, "ingestd run output", string(logs), pw)
	t.Logf("WRITE on %s revoked at run time: the pipeline failed %v after the records to dead-letter, naming the ACL; txn stayed at offset 199; the other pipeline went on", dlq, took.Round(100*time.Millisecond))
}
