package kafkaclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/aws"

	"github.com/ingestd/ingestd/internal/awscred"
)

// mskRefreshMargin is how much life AWS credentials must have left when AWS_MSK_IAM signs
// with them: the broker caps the session at the credentials' remaining life, so signing
// with credentials about to expire buys a session of seconds and a re-authentication loop
// (twmb/franz-go#249, GROUP_AUTHORIZATION_FAILED after ten hours).
const mskRefreshMargin = 5 * time.Minute

// awsCredentialSource returns AWS credentials and when they expire (zero: not known, for
// long-term keys).
type awsCredentialSource func(context.Context) (aws.Auth, time.Time, error)

// mskCredentials is the AWS_MSK_IAM mechanism's credential callback: it keeps the last
// credentials of its source and asks the source again, before signing, whenever they
// have less than margin left (or their expiry is not known: long-term keys are asked for
// on every authentication, which costs nothing, the chain answers them from memory). Credentials that
// have less than margin left even when fresh are still used while they are valid (they
// are the best there is) but not kept, so the next re-authentication asks again; expired
// ones are refused, naming their expiry, never signed.
type mskCredentials struct {
	source awsCredentialSource
	margin time.Duration
	now    func() time.Time

	mu      sync.Mutex
	cur     aws.Auth
	expires time.Time // zero: nothing kept
}

func newMSKCredentials(source awsCredentialSource, margin time.Duration) *mskCredentials {
	return &mskCredentials{source: source, margin: margin, now: time.Now}
}

// get returns the credentials to sign with now.
func (m *mskCredentials) get(ctx context.Context) (aws.Auth, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if !m.expires.IsZero() && m.expires.Sub(now) >= m.margin {
		return m.cur, nil
	}
	a, exp, err := m.source(ctx)
	if err != nil {
		return aws.Auth{}, err
	}
	m.cur, m.expires = aws.Auth{}, time.Time{}
	switch {
	case exp.IsZero():
	case !exp.After(now):
		return aws.Auth{}, fmt.Errorf("the AWS credentials of access key %s expired at %s; whatever renews them has stopped", a.AccessKey, exp.UTC().Format(time.RFC3339))
	case exp.Sub(now) >= m.margin:
		m.cur, m.expires = a, exp
	}
	return a, nil
}

// sdkAWSCredentials is the AWS SDK's default credential chain (awscred.DefaultChain:
// environment, shared profile, web identity / IRSA, ECS container credentials, EC2 IMDS)
// as a source: every call asks the chain again, so mskCredentials' margin alone decides
// when to refresh.
func sdkAWSCredentials(ctx context.Context) (awsCredentialSource, error) {
	src, err := awscred.DefaultChain(ctx)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (aws.Auth, time.Time, error) {
		c, err := src(ctx)
		if err != nil {
			return aws.Auth{}, time.Time{}, err
		}
		return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: "ingestd"}, c.Expires, nil
	}, nil
}
