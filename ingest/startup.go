package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	ingestdlq "github.com/ingestd/ingestd/ingest/dlq"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
)

const (
	metadataAttempts = 10 // start-up topic check: about 1.5 min of retryBackoff
	// missingTopicAttempts is how many times the start-up check looks for a topic the
	// broker says does not exist before it fails (about 4 s of retryBackoff): a broker
	// that has just restarted may answer Metadata before it has loaded its topics, and a
	// topic created just before the daemon started may not have reached every broker yet.
	missingTopicAttempts = 5
	// listenerAttempts is how many listings in a row must fail with a TLS or SASL
	// mismatch between the client and the listener (kafkaclient.ListenerMismatch) before
	// the start-up check fails (about 1 s of retryBackoff): one such failure may also be a
	// broker dropping connections as it restarts, three in a row are the configuration.
	listenerAttempts = 3
)

// start refuses a table the pipeline cannot write, builds the consumer and the
// dead-letter producer (kafkaClients) and checks the source and dead-letter topics; the
// pipeline is running once it returns. On error nothing stays open.
func (p *Pipeline) start(ctx context.Context) (*session, error) {
	if p.cfg.Table.Keyed() && len(p.cfg.Table.Key) == 0 {
		if err := p.defaultKey(ctx); err != nil {
			return nil, err
		}
	}
	if err := p.checkTable(ctx); err != nil {
		return nil, err
	}
	if err := probeRegistry(ctx, p.deps.Schemas, p.log); err != nil {
		return nil, err
	}
	clients := p.deps.kafkaClients(p.cfg, p.log)
	p.assignStart = time.Now() // before the consumer's goroutines, which read it (onAssigned)
	cl, err := clients.Consumer(rebalanceTimeout, kafkaclient.ConsumerCallbacks{Adjust: p.adjustOffsets, Revoked: p.onRevoked, Lost: p.onLost, Assigned: p.onAssigned})
	if err != nil {
		return nil, err
	}
	s := &session{p: p, cl: cl}
	if p.cfg.DeadLetter.Topic != "" {
		if s.dlq, err = clients.DeadLetterProducer(); err != nil {
			s.close()
			return nil, err
		}
	}
	tok := p.acquireFlush()
	p.batchMu.Lock()
	p.cl, p.cm.cl = s.cl, s.cl
	if s.dlq != nil {
		p.fl.dlq = ingestdlq.NewProducer(s.dlq)
	}
	p.batchMu.Unlock()
	p.releaseFlush(tok)
	p.clSetOnce.Do(func() { close(p.clSet) })
	if err := p.checkTopics(ctx, cl); err != nil {
		s.close()
		return nil, err
	}
	if err := p.checkGroupAccess(ctx, cl); err != nil {
		s.close()
		return nil, err
	}
	p.log.Info("pipeline started", "topics", p.cfg.Kafka.Topics, "group", p.cfg.Kafka.Group,
		"table", p.cfg.Table.URI, "policy", p.cfg.Schema.Policy)
	p.awaitAssignment(s)
	return s, nil
}

// assignmentWaitWarn is how long a started pipeline waits for its first assignment
// before it says why it may be waiting: a join normally completes within a few seconds
// (the group's initial rebalance delay, 3 s by default).
const assignmentWaitWarn = 5 * time.Second

// awaitAssignment reports the pipeline as waiting_for_assignment in /readyz until the
// group's first assignment (onAssigned), and after assignmentWaitWarn without one logs a
// WARN with the likely reason. The timer belongs to s: s.close stops it.
func (p *Pipeline) awaitAssignment(s *session) {
	k := p.cfg.Kafka
	started := p.assignStart
	p.status.waiting(fmt.Sprintf("waiting for consumer group %s to assign partitions", k.Group))
	s.waitWarn = time.AfterFunc(assignmentWaitWarn, func() {
		select {
		case <-p.firstAssigned:
			return
		default:
		}
		why := fmt.Sprintf("no partitions assigned by consumer group %s %v after start: the coordinator is likely waiting for a previous member's session to expire "+
			"(a process killed without leaving the group, e.g. kill -9, holds its partitions for up to kafka.session_timeout, %v); "+
			"static membership (kafka.instance_id, unique per process) lets a restarted process take its partitions back at once",
			k.Group, assignmentWaitWarn, k.SessionTimeout)
		if k.InstanceID != "" {
			why = fmt.Sprintf("no partitions assigned by consumer group %s %v after start (kafka.instance_id %q): the coordinator is likely finishing a rebalance "+
				"or waiting for another member's session to expire (up to its session timeout; this pipeline's is %v)", k.Group, assignmentWaitWarn, k.InstanceID, k.SessionTimeout)
		}
		p.log.Warn("waiting for the first partition assignment", "group", k.Group, "waited", time.Since(started).Round(time.Millisecond),
			"session_timeout", k.SessionTimeout, "reason", why)
		p.status.waiting(why)
	})
}

// onAssigned is the consumer's kgo.OnPartitionsAssigned: the first call (after the first
// join, even with nothing assigned) ends waiting_for_assignment.
func (p *Pipeline) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	p.firstAssignedOnce.Do(func() {
		close(p.firstAssigned)
		n := 0
		for _, ps := range assigned {
			n += len(ps)
		}
		p.log.Info("first partitions assigned", "group", p.cfg.Kafka.Group, "partitions", n,
			"waited", time.Since(p.assignStart).Round(time.Millisecond))
		p.status.assigned() // after its line, as every state /readyz shows
	})
}

// registryProber is a schema source that can check its registry's URL (decode.Registry).
type registryProber interface {
	Probe(ctx context.Context) error
}

// registryProbeTimeout bounds the start-up probe of the schema registry.
const registryProbeTimeout = 10 * time.Second

// probeRegistry checks, when schemas come from a registry, that its URL is a
// Confluent-compatible registry API (decode.Registry.Probe): a wrong base URL answers 404
// to every lookup, which would dead-letter every record as schema_not_found. Errors: a
// *decode.RegistryURLError ("check schema registry: …"). A registry that cannot be
// reached, or refuses the probe (401/403), is only logged: lookups retry the first (the
// pipeline holds the records back; nothing is dead-lettered for it) and fail on the second.
func probeRegistry(ctx context.Context, s SchemaSource, log *slog.Logger) error {
	pr, ok := s.(registryProber)
	if !ok {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, registryProbeTimeout)
	defer cancel()
	err := pr.Probe(pctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, decode.ErrRegistryURL):
		return fmt.Errorf("check schema registry: %w", err)
	case errors.Is(err, decode.ErrRegistryAuth):
		// The probe's paths may need more than reading schemas by id (an authorizer may
		// refuse listing subjects): the first lookup decides, and fails the pipeline if
		// it is refused too.
		log.Warn("schema registry refused the start-up probe; the first schema lookup decides", "err", err)
		return nil
	}
	if ctx.Err() != nil {
		return nil // stopped (SIGTERM) during the probe: the registry was not at fault
	}
	log.Warn("schema registry not reachable at start-up; lookups retry it", "err", err)
	return nil
}

// checkTable opens the table's snapshot (refusing tables ingestd cannot safely write,
// before any byte is written) and fails if it does not exist and table.create is false.
func (p *Pipeline) checkTable(ctx context.Context) error {
	return checkTableExists(ctx, p.cfg, p.deps.Table)
}

// checkTopics fails with a clear message when a source topic or the dead-letter topic is
// missing, or when the broker says this client may not read a source or write the
// dead-letter topic (authorized operations, KIP-430; brokers without an authorizer
// report nothing and pass).
func (p *Pipeline) checkTopics(ctx context.Context, cl *kgo.Client) error {
	topics := append([]string(nil), p.cfg.Kafka.Topics...)
	if p.cfg.DeadLetter.Topic != "" {
		topics = append(topics, p.cfg.DeadLetter.Topic)
	}
	details, missing, err := p.listTopics(ctx, kadm.NewClient(cl), topics)
	if err != nil {
		return err
	}
	if len(missing) > 0 && ctx.Err() != nil { // stopped while looking again: not a verdict on the topics
		return fmt.Errorf("check topics: %w", context.Cause(ctx))
	}
	var problems []string
	for _, t := range topics {
		what, need := "source", kmsg.ACLOperationRead
		if t == p.cfg.DeadLetter.Topic {
			what, need = "dead-letter", kmsg.ACLOperationWrite
		}
		d, ok := details[t]
		switch {
		case topicMissing(d, ok):
			problems = append(problems, fmt.Sprintf("%s topic %q does not exist on %v (create it, e.g. kafka-topics.sh --create --topic %s)", what, t, p.cfg.Kafka.Brokers, t))
		case errors.Is(d.Err, kerr.TopicAuthorizationFailed):
			// With an authorizer, a topic the principal may not describe answers
			// TOPIC_AUTHORIZATION_FAILED whether it exists or not.
			problems = append(problems, fmt.Sprintf("%s topic %q: %s; or the topic does not exist (the broker does not tell a principal without DESCRIBE on it; check with kafka-topics.sh --describe --topic %s)",
				what, t, kafkaclient.MissingACL(p.cfg.Kafka, need.String(), "topic", t), t))
		case d.Err != nil:
			problems = append(problems, fmt.Sprintf("%s topic %q: %v", what, t, d.Err))
		case len(d.AuthorizedOperations) > 0 && !slices.Contains(d.AuthorizedOperations, need) && !slices.Contains(d.AuthorizedOperations, kmsg.ACLOperationAll):
			problems = append(problems, fmt.Sprintf("%s topic %q: %s", what, t, kafkaclient.MissingACL(p.cfg.Kafka, need.String(), "topic", t)))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("check topics: %s", strings.Join(problems, "; "))
	}
	return nil
}

// listTopics lists topics with their authorized operations (listTopicsEach), retrying a
// failed listing for about 1.5 min of backoff (metadataAttempts: a broker restarting
// while we start is not a failure) and looking again for topics reported missing,
// missingTopicAttempts times in all, before they are (missing; the lookups stop early
// when ctx ends). Errors: a *kafkaclient.SecurityError at once (retrying cannot help),
// or after listenerAttempts failures in a row that say the listener does not speak the
// configured TLS or SASL (kafkaclient.ListenerMismatch), or "list topics on <brokers>: …"
// after the last attempt.
func (p *Pipeline) listTopics(ctx context.Context, adm *kadm.Client, topics []string) (details kadm.TopicDetails, missing []string, err error) {
	for attempt, missingSeen, mismatchSeen := 0, 0, 0; ; attempt++ {
		if details, err = listTopicsEach(ctx, adm, topics); err == nil {
			missing = missingTopics(topics, details)
			if len(missing) == 0 {
				return details, nil, nil
			}
			if missingSeen++; missingSeen >= missingTopicAttempts {
				return details, missing, nil
			}
			p.log.Warn("topics not found on the broker; looking again (a broker that has just started may not list them yet)",
				"topics", missing, "attempt", missingSeen)
			if retryBackoff.Sleep(ctx, missingSeen-1) != nil {
				return details, missing, nil
			}
			continue
		}
		if se := kafkaclient.AsSecurityError(p.cfg.Kafka, "", err); se != nil {
			return nil, nil, se // authentication, authorization, certificates: it names the principal and the fix
		}
		if me := kafkaclient.ListenerMismatch(p.cfg.Kafka, err); me != nil {
			if mismatchSeen++; mismatchSeen >= listenerAttempts {
				return nil, nil, me
			}
		} else {
			mismatchSeen = 0
		}
		if ctx.Err() != nil { // stopped (SIGTERM) during the listing: nothing to retry or report
			return nil, nil, fmt.Errorf("list topics on %v: %w", p.cfg.Kafka.Brokers, ctx.Err())
		}
		p.observe(verdict{action: actRetry, stage: "metadata", err: err}, 1, "list topics failed", "attempt", attempt+1)
		if attempt+1 >= metadataAttempts || retryBackoff.Sleep(ctx, attempt) != nil {
			return nil, nil, fmt.Errorf("list topics on %v: %w", p.cfg.Kafka.Brokers, err)
		}
	}
}

// missingTopics returns the topics that details (a ListTopics answer) says do not exist:
// absent from it, or with UNKNOWN_TOPIC_OR_PARTITION.
func missingTopics(topics []string, details kadm.TopicDetails) []string {
	var out []string
	for _, t := range topics {
		if d, ok := details[t]; topicMissing(d, ok) {
			out = append(out, t)
		}
	}
	return out
}

// topicMissing reports whether a topic's ListTopics detail (ok: the answer has one) says
// it does not exist.
func topicMissing(d kadm.TopicDetail, ok bool) bool {
	return !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition)
}

// checkGroupAccess is the start-up check that the principal may join the consumer
// group: DescribeGroups (DESCRIBE on the group) with KIP-430 authorized operations must
// include READ. Brokers without an authorizer report no operations and pass. Errors: a
// *kafkaclient.SecurityError naming the missing ACL; other errors are not reported here (the
// join reports them).
func (p *Pipeline) checkGroupAccess(ctx context.Context, cl *kgo.Client) error {
	k := p.cfg.Kafka
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	groups, err := kadm.NewClient(cl).DescribeGroups(dctx, k.Group)
	if errors.Is(err, kerr.GroupAuthorizationFailed) { // kadm fails the whole request
		return &kafkaclient.SecurityError{Msg: "check group: " + kafkaclient.MissingACL(k, "READ", "group", k.Group), Err: err}
	}
	if se := kafkaclient.AsSecurityError(k, "", err); se != nil {
		return se
	}
	if err != nil {
		return nil
	}
	g, ok := groups[k.Group]
	switch {
	case !ok:
		return nil
	case errors.Is(g.Err, kerr.GroupAuthorizationFailed):
		return &kafkaclient.SecurityError{Msg: "check group: " + kafkaclient.MissingACL(k, "READ", "group", k.Group), Err: g.Err}
	case len(g.AuthorizedOperations) > 0 && !slices.Contains(g.AuthorizedOperations, kadm.OpRead) && !slices.Contains(g.AuthorizedOperations, kadm.OpAll):
		return &kafkaclient.SecurityError{Msg: "check group: " + kafkaclient.MissingACL(k, "READ", "group", k.Group), Err: kerr.GroupAuthorizationFailed}
	}
	return nil
}

// listTopicsEach is kadm's ListTopics with authorized operations, one topic per request:
// kadm fails a whole request when one topic is denied, and the start-up check must say
// which one. A denied topic gets Err TOPIC_AUTHORIZATION_FAILED in its detail.
func listTopicsEach(ctx context.Context, adm *kadm.Client, topics []string) (kadm.TopicDetails, error) {
	out := kadm.TopicDetails{}
	for _, t := range topics {
		d, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx), t)
		if errors.Is(err, kerr.TopicAuthorizationFailed) {
			out[t] = kadm.TopicDetail{Topic: t, Err: kerr.TopicAuthorizationFailed}
			continue
		}
		if err != nil {
			return nil, err
		}
		for k, v := range d {
			out[k] = v
		}
	}
	return out, nil
}

// checkRead fails with a *kafkaclient.SecurityError when the broker reports (KIP-430 authorized
// operations) that k's principal may not READ topic; brokers without an authorizer, and
// errors of the check itself, pass (the read reports them).
func checkRead(ctx context.Context, cl *kgo.Client, k config.Kafka, topic string) error {
	d, err := listTopicsEach(ctx, kadm.NewClient(cl), []string{topic})
	if se := kafkaclient.AsSecurityError(k, "READ on topic "+topic, err); se != nil {
		return se
	}
	td, ok := d[topic]
	switch {
	case err != nil || !ok:
		return nil
	case errors.Is(td.Err, kerr.TopicAuthorizationFailed),
		len(td.AuthorizedOperations) > 0 && !slices.Contains(td.AuthorizedOperations, kadm.OpRead) && !slices.Contains(td.AuthorizedOperations, kadm.OpAll):
		return &kafkaclient.SecurityError{Msg: "read " + topic + ": " + kafkaclient.MissingACL(k, "READ", "topic", topic), Err: kerr.TopicAuthorizationFailed}
	}
	return nil
}

// defaultKey sets table.key of an upsert pipeline that leaves it out (config allows that
// only with table.key_format avro) to the fields of the Kafka key's Avro record: the
// latest schema of subject <topic>-key of the first source topic (Confluent's
// TopicNameStrategy). Errors name the fix: no such subject, a key that is not a record;
// a registry that fails transiently is a *transientError.
func (p *Pipeline) defaultKey(ctx context.Context) error {
	topic := p.cfg.Kafka.Topics[0]
	subject := topic + "-key"
	fix := fmt.Sprintf("set table.key in %s to the key columns", p.cfg.File)
	src, ok := p.deps.Schemas.(latestIDSource)
	if !ok {
		return fmt.Errorf("table.key is not set and the key schema cannot be looked up without a schema registry: %s", fix)
	}
	id, err := src.LatestID(ctx, subject)
	var de *decode.Error
	switch {
	case errors.As(err, &de):
		return fmt.Errorf("table.key is not set and the registry has no key schema for topic %s (subject %s: %v): %s, or register the key schema", topic, subject, de, fix)
	case errors.Is(err, decode.ErrRegistryAuth):
		return err
	case err != nil:
		return &transientError{stage: "resolve key schema", what: "resolve the latest schema of " + subject, err: err}
	}
	ws, err := p.deps.Schemas.Schema(ctx, id)
	switch {
	case errors.As(err, &de):
		return fmt.Errorf("table.key is not set and key schema id %d of subject %s cannot be read (%v): %s", id, subject, de, fix)
	case err != nil:
		return &transientError{stage: "resolve key schema", what: "resolve key schema id " + strconv.Itoa(id), err: err}
	case ws.Delta == nil || len(ws.Delta.Fields) == 0:
		return fmt.Errorf("table.key is not set and the Kafka key of topic %s (subject %s, schema id %d) is not an Avro record whose fields could name the key columns: %s", topic, subject, id, fix)
	}
	var key []string
	for _, f := range ws.Delta.Fields {
		key = append(key, f.Name)
	}
	p.cfg.Table.Key = key
	if p.fl.keyed != nil {
		p.fl.keyed.spec.Key = key
	}
	p.log.Info("table.key defaults to the fields of the Kafka key's Avro record", "key", key, "subject", subject, "schema_id", id)
	return nil
}
