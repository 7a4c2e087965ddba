package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/sasl/aws"
)

// mskRefreshMargin is how much life AWS credentials must have left when AWS_MSK_IAM signs
// with them (C40 R3): the broker caps the session at the credentials' remaining life, so
// signing with credentials about to expire buys a session of seconds and a
// re-authentication loop (twmb/franz-go#249, GROUP_AUTHORIZATION_FAILED after ten hours).
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

// sdkAWSCredentials is the AWS SDK's default credential chain as a source (aws-sdk-go-v2
// config.LoadDefaultConfig, in its order: the environment — AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN —, the shared config and credentials files with
// AWS_PROFILE (including SSO, credential_process and role profiles), web identity / IRSA
// from AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN through STS, ECS or EKS Pod Identity
// container credentials from AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI, then the
// EC2 instance role through IMDS). Loading reads files and the environment only; the
// network is contacted when credentials are first asked for.
//
// Every call asks the chain for fresh credentials (it invalidates the SDK's own cache):
// mskCredentials calls it only when what it keeps has less than its margin left, and the
// SDK's cache would hand back the same near-expiry credentials until they expire. The
// expiry is the provider's (zero for long-term keys); environment keys take theirs from
// AWS_CREDENTIAL_EXPIRATION (RFC 3339, as `aws configure export-credentials --format env`
// writes it), which the SDK does not read. Errors name the chain's failure, never a secret.
func sdkAWSCredentials(ctx context.Context) (awsCredentialSource, error) {
	// No expiry window in the SDK's cache: it would report container and IMDS credentials
	// as expiring 5 minutes early, and the margin here would come on top of it.
	cfg, err := config.LoadDefaultConfig(ctx, config.WithCredentialsCacheOptions(func(o *awssdk.CredentialsCacheOptions) {
		o.ExpiryWindow, o.ExpiryWindowJitterFrac = 0, 0
	}))
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	provider := cfg.Credentials
	if provider == nil {
		return nil, errors.New("load AWS configuration: no AWS credential provider")
	}
	return func(ctx context.Context) (aws.Auth, time.Time, error) {
		if c, ok := provider.(interface{ Invalidate() }); ok {
			c.Invalidate()
		}
		c, err := provider.Retrieve(ctx)
		if err != nil {
			return aws.Auth{}, time.Time{}, fmt.Errorf("retrieve AWS credentials: %w", err)
		}
		a := aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: "ingestd"}
		var exp time.Time
		if c.CanExpire {
			exp = c.Expires
		}
		if v := os.Getenv("AWS_CREDENTIAL_EXPIRATION"); v != "" && c.Source == config.CredentialsSourceName {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return aws.Auth{}, time.Time{}, fmt.Errorf("retrieve AWS credentials: AWS_CREDENTIAL_EXPIRATION %q is not an RFC 3339 time", v)
			}
			exp = t
		}
		return a, exp, nil
	}, nil
}
