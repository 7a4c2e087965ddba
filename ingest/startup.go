package ingest

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
)

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
