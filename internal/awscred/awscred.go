// Package awscred is the AWS SDK's default credential chain for what is not a store: the
// AWS_MSK_IAM SASL mechanism of package ingest. Besides deltawriter/storage it is the one
// package that imports the AWS SDK (a rule of internal/archtest).
package awscred

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Credentials are one set of AWS credentials; Expires is zero for long-term keys.
type Credentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
	Expires                                    time.Time
}

// Source returns fresh credentials on every call.
type Source func(context.Context) (Credentials, error)

// DefaultChain is aws-sdk-go-v2's config.LoadDefaultConfig chain, in its order: the
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the shared
// config and credentials files with AWS_PROFILE (SSO, credential_process and role
// profiles included), web identity / IRSA (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN,
// through STS), ECS or EKS Pod Identity container credentials
// (AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI), then the EC2 instance role
// (IMDS). Loading reads files and the environment only; the network is contacted when
// credentials are first asked for.
//
// Every call of the Source asks the chain again (it invalidates the SDK's cache, whose
// expiry window is off: the caller decides when credentials are too close to expiry; the
// SDK would otherwise report container and IMDS credentials as expiring 5 minutes
// early). Environment keys take their expiry from AWS_CREDENTIAL_EXPIRATION (RFC 3339, as
// `aws configure export-credentials --format env` writes it), which the SDK does not
// read. Errors: "load AWS configuration: …" (e.g. AWS_PROFILE names a profile no file
// has); the Source's "retrieve AWS credentials: …". No error carries a secret.
func DefaultChain(ctx context.Context) (Source, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithCredentialsCacheOptions(func(o *aws.CredentialsCacheOptions) {
		o.ExpiryWindow, o.ExpiryWindowJitterFrac = 0, 0
	}))
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	provider := cfg.Credentials
	if provider == nil {
		return nil, errors.New("load AWS configuration: no AWS credential provider")
	}
	return func(ctx context.Context) (Credentials, error) {
		if c, ok := provider.(interface{ Invalidate() }); ok {
			c.Invalidate()
		}
		c, err := provider.Retrieve(ctx)
		if err != nil {
			return Credentials{}, fmt.Errorf("retrieve AWS credentials: %w", err)
		}
		out := Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}
		if c.CanExpire {
			out.Expires = c.Expires
		}
		if v := os.Getenv("AWS_CREDENTIAL_EXPIRATION"); v != "" && c.Source == config.CredentialsSourceName {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return Credentials{}, fmt.Errorf("retrieve AWS credentials: AWS_CREDENTIAL_EXPIRATION %q is not an RFC 3339 time", v)
			}
			out.Expires = t
		}
		return out, nil
	}, nil
}
