package kafkaclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ingestd/ingestd/ingest/config"
)

// defaultClientID is kafka.client_id when the config leaves it empty.
const defaultClientID = "ingestd"

// SecurityOpts returns the kgo options every Kafka client of a pipeline needs for k's
// security settings: kgo.ClientID (default "ingestd"), kgo.DialTLSConfig when kafka.tls
// is present, and kgo.SASL with a callback that re-reads the password or token source on
// every connection and every KIP-368 re-authentication (so a rotated file is used without
// a restart), each read counted in m (nil: not counted). The consumer adds groupOpts.
// Errors: an unreadable or invalid CA bundle or key pair, an unknown mechanism
// (validation reports both earlier, with file:line). The options never hold a secret's
// value, only where to read it.
func SecurityOpts(k config.Kafka, m *Metrics) ([]kgo.Opt, error) {
	id := k.ClientID
	if id == "" {
		id = defaultClientID
	}
	opts := []kgo.Opt{kgo.ClientID(id)}
	if k.TLS != nil {
		tc, err := k.TLS.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("configure kafka.tls: %w", err)
		}
		opts = append(opts, kgo.DialTLSConfig(tc)) // kgo sets ServerName per broker when empty
	}
	if k.SASL == nil {
		return opts, nil
	}
	mech, err := saslMechanism(k.SASL, m)
	if err != nil {
		return nil, err
	}
	return append(opts, kgo.SASL(mech)), nil
}

// saslMechanism is the franz-go mechanism for s, with a credential callback that runs on
// every connection and every re-authentication and re-reads the password or token file
// (or variable) each time, counting the read in m; MSK IAM takes its credentials from the AWS SDK's default chain
// (environment, shared profile, web identity / IRSA, ECS container credentials, EC2 IMDS)
// and never signs with credentials that have less than mskRefreshMargin left without
// asking for fresh ones first (mskcreds.go). Errors: an unknown mechanism, an AWS
// configuration that does not load (e.g. AWS_PROFILE names a missing profile).
func saslMechanism(s *config.SASL, m *Metrics) (sasl.Mechanism, error) {
	password := func() (string, error) {
		m.credentialRead(credentialPassword)
		p, err := config.ReadSecret(s.PasswordFile, s.PasswordEnv)
		if err != nil {
			return "", fmt.Errorf("read kafka.sasl password: %w", err)
		}
		return p.Reveal(), nil
	}
	switch strings.ToUpper(s.Mechanism) {
	case config.MechPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			p, err := password()
			return plain.Auth{User: s.Username, Pass: p}, err
		}), nil
	case config.MechScram256, config.MechScram512:
		fn := func(context.Context) (scram.Auth, error) {
			p, err := password()
			return scram.Auth{User: s.Username, Pass: p}, err
		}
		if strings.ToUpper(s.Mechanism) == config.MechScram256 {
			return scram.Sha256(fn), nil
		}
		return scram.Sha512(fn), nil
	case config.MechOAuthBearer:
		ext := s.Extensions
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			m.credentialRead(credentialToken)
			t, err := config.ReadSecret(s.TokenFile, s.TokenEnv)
			if err != nil {
				return oauth.Auth{}, fmt.Errorf("read kafka.sasl token: %w", err)
			}
			// An expired JWT is refused here, naming it, rather than sent for the broker to
			// refuse with a bare SASL_AUTHENTICATION_FAILED: the pipeline fails within seconds
			// of the re-authentication, naming the token's file and subject.
			if sub, exp := jwtClaims(t.Reveal()); exp > 0 && time.Unix(exp, 0).Before(time.Now()) {
				return oauth.Auth{}, fmt.Errorf("read kafka.sasl token: the token from %s (sub %q) expired at %s; whatever renews it has stopped",
					secretSource(s.TokenFile, s.TokenEnv), sub, time.Unix(exp, 0).UTC().Format(time.RFC3339))
			}
			return oauth.Auth{Token: t.Reveal(), Extensions: ext}, nil
		}), nil
	case config.MechMSKIAM:
		src, err := sdkAWSCredentials(context.Background())
		if err != nil {
			return nil, fmt.Errorf("configure kafka.sasl AWS_MSK_IAM: %w", err)
		}
		creds := newMSKCredentials(src, mskRefreshMargin)
		return aws.ManagedStreamingIAM(func(ctx context.Context) (aws.Auth, error) {
			a, err := creds.get(ctx)
			if err != nil {
				return aws.Auth{}, fmt.Errorf("read kafka.sasl AWS credentials: %w", err)
			}
			return a, nil
		}), nil
	}
	return nil, fmt.Errorf("configure kafka.sasl: unknown mechanism %q", s.Mechanism)
}

// groupOpts are the consumer-only options: kgo.InstanceID for static membership when
// kafka.instance_id is set.
func groupOpts(k config.Kafka) []kgo.Opt {
	if k.InstanceID == "" {
		return nil
	}
	return []kgo.Opt{kgo.InstanceID(k.InstanceID)}
}

// principal describes who the broker sees, for error messages: the SASL user, the
// OAUTHBEARER token's subject, the client certificate's subject, or ANONYMOUS. It never
// includes a secret.
func principal(k config.Kafka) string {
	if s := k.SASL; s != nil {
		switch strings.ToUpper(s.Mechanism) {
		case config.MechPlain, config.MechScram256, config.MechScram512:
			return fmt.Sprintf("User:%s (%s)", s.Username, strings.ToUpper(s.Mechanism))
		case config.MechOAuthBearer:
			if t, err := config.ReadSecret(s.TokenFile, s.TokenEnv); err == nil {
				if sub := jwtSubject(t.Reveal()); sub != "" {
					return fmt.Sprintf("User:%s (OAUTHBEARER token subject)", sub)
				}
			}
			return "the OAUTHBEARER token's principal"
		case config.MechMSKIAM:
			if k := os.Getenv("AWS_ACCESS_KEY_ID"); k != "" {
				return fmt.Sprintf("the IAM identity of access key %s (AWS_MSK_IAM)", k)
			}
			return "the IAM identity of the AWS default credential chain (AWS_MSK_IAM)"
		}
	}
	if t := k.TLS; t != nil && t.CertFile != "" {
		return "the client certificate " + certSubject(t) + " (the broker's principal is its DN unless ssl.principal.mapping.rules maps it)"
	}
	return "User:ANONYMOUS (no SASL, no client certificate)"
}

// certSubject is the subject DN of tls.cert_file, quoted, or the file name.
func certSubject(t *config.TLS) string {
	if kp, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err == nil && len(kp.Certificate) > 0 {
		if c, err := x509.ParseCertificate(kp.Certificate[0]); err == nil {
			return strconv.Quote(c.Subject.String())
		}
	}
	return t.CertFile
}

// jwtSubject returns the "sub" claim of a JWS compact token, or "".
func jwtSubject(tok string) string { sub, _ := jwtClaims(tok); return sub }

// jwtClaims returns the "sub" and "exp" (Unix seconds, 0 if absent) claims of a JWS
// compact token; "" and 0 for a token that is not a JWT. No signature check: only for
// messages and the expiry check.
func jwtClaims(tok string) (sub string, exp int64) {
	parts := strings.Split(tok, ".")
	if len(parts) < 2 {
		return "", 0
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return "", 0
	}
	var c struct {
		Sub string  `json:"sub"`
		Exp float64 `json:"exp"`
	}
	if json.Unmarshal(b, &c) != nil {
		return "", 0
	}
	return c.Sub, int64(c.Exp)
}

// secretSource names where a secret comes from, for messages: "file X" or "$VAR".
func secretSource(file, env string) string {
	if file != "" {
		return "file " + file
	}
	return "$" + env
}

// aclHint is the kafka-acls.sh command that grants op on a resource ("topic" or
// "group") to the principal of k, when the principal is a named user.
func aclHint(k config.Kafka, op, resource, name string) string {
	user := "<principal>"
	if s := k.SASL; s != nil && s.Username != "" {
		user = "User:" + s.Username
	}
	return fmt.Sprintf("kafka-acls.sh --bootstrap-server <broker> --add --allow-principal %s --operation %s --%s %s", user, op, resource, name)
}

// fatalMessage reports whether err is a permanent security failure that retrying
// cannot fix, and then returns the message for the pipeline's error and /readyz: it
// names the principal (principal), the resource and what is missing. need is the
// permission the failed call needed on a topic, e.g. "READ on topic orders" (used for
// TOPIC_AUTHORIZATION_FAILED; may be ""). Fatal: SASL_AUTHENTICATION_FAILED,
// UNSUPPORTED_SASL_MECHANISM, TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED,
// FENCED_INSTANCE_ID, certificate verification errors on either side, a TLS client on a
// plaintext listener, and a failure to read a secret file. Everything else (network
// errors, broker restarts, ILLEGAL_SASL_STATE around a re-authentication) is transient:
// ("", false).
func fatalMessage(k config.Kafka, need string, err error) (string, bool) {
	if err == nil {
		return "", false
	}
	who := principal(k)
	mech := "no SASL"
	if k.SASL != nil {
		mech = "SASL " + strings.ToUpper(k.SASL.Mechanism)
	}
	var (
		unknownCA *x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		hdr       tls.RecordHeaderError
	)
	msg := err.Error()
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Sprintf("kafka authentication failed for %s: %v (fix: check kafka.sasl.username and the password/token file or variable; the broker must know this user for %s)", who, err, mech), true
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Sprintf("kafka: the broker does not offer %s on this listener: %v (fix: use a mechanism the listener enables, see sasl.enabled.mechanisms)", mech, err), true
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return "kafka authorization failed: " + MissingACL(k, "READ", "group", k.Group), true
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		if need == "" {
			need = fmt.Sprintf("READ on topic %s", strings.Join(k.Topics, ", "))
		}
		op, res, name := splitNeed(need)
		return fmt.Sprintf("kafka authorization failed: %s is missing %s (fix: %s)", who, need, aclHint(k, op, res, name)), true
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Sprintf("kafka authorization failed: %s is missing IDEMPOTENT_WRITE on the cluster (or WRITE on a topic, Kafka 2.8+)%s (fix: grant WRITE on the topic it produces to)", who, needSuffix(need)), true
	case errors.Is(err, kerr.FencedInstanceID):
		return fmt.Sprintf("kafka: another consumer joined group %s with kafka.instance_id %q, fencing this one (fix: give every process its own instance_id, e.g. ${HOSTNAME})", k.Group, k.InstanceID), true
	case errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid), errors.As(err, &verify):
		return fmt.Sprintf("kafka TLS: the broker's certificate was refused: %v (fix: set kafka.tls.ca_file to the CA that signed the broker's certificate; the certificate must name the advertised host, or set kafka.tls.server_name)", err), true
	case strings.Contains(msg, "remote error: tls: ") && (k.TLS == nil || k.TLS.CertFile == ""):
		return fmt.Sprintf("kafka TLS: the broker refused the handshake without a client certificate: %v (fix: set kafka.tls.cert_file and key_file, the listener requires mTLS)", err), true
	case strings.Contains(msg, "remote error: tls: "):
		return fmt.Sprintf("kafka TLS: the broker refused the client certificate %s: %v (fix: use a certificate signed by a CA the broker trusts, not expired, with the clientAuth usage)", certSubject(k.TLS), err), true
	case errors.As(err, &hdr), strings.Contains(msg, "first record does not look like a TLS handshake"):
		return fmt.Sprintf("kafka TLS: kafka.tls is set but the broker answered in plaintext: %v (fix: point kafka.brokers at the TLS listener, or remove kafka.tls)", err), true
	case strings.Contains(msg, "read kafka.sasl AWS credentials"):
		return fmt.Sprintf("kafka credentials for %s: %v (fix: check the AWS credential chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the IRSA or ECS role, the instance profile)", who, err), true
	case strings.Contains(msg, "read kafka.sasl password") || strings.Contains(msg, "read kafka.sasl token") || strings.Contains(msg, "load client certificate"):
		return fmt.Sprintf("kafka credentials for %s: %v (fix: restore the file or variable)", who, err), true
	}
	return "", false
}

// splitNeed splits "WRITE on topic orders.dlq" into ("Write", "topic", "orders.dlq").
func splitNeed(need string) (op, resource, name string) {
	f := strings.Fields(need)
	if len(f) < 4 {
		return "Read", "topic", "<topic>"
	}
	return strings.ToUpper(f[0][:1]) + strings.ToLower(f[0][1:]), f[2], strings.Join(f[3:], " ")
}

func needSuffix(need string) string {
	if need == "" {
		return ""
	}
	return "; the request needed " + need
}

// SecurityError is a permanent authentication, authorization or TLS failure: a pipeline
// fails with it (named in /readyz) instead of retrying it as transient. Msg names the
// principal, the resource and the fix (docs/security.md, "ACLs and registry
// permissions"); Err is the client's error.
type SecurityError struct {
	Msg string
	Err error
}

func (e *SecurityError) Error() string { return e.Msg }
func (e *SecurityError) Unwrap() error { return e.Err }

// AsSecurityError returns err as a *SecurityError when it is a permanent security
// failure that retrying cannot fix (err itself when it holds one already), else nil.
// need is the permission the failed call needed, e.g. "READ on topic orders" or "WRITE
// on topic orders.dlq" (named for TOPIC_AUTHORIZATION_FAILED; "" for a source topic
// READ). Fatal: SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
// TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED, FENCED_INSTANCE_ID, certificate
// verification errors on either side, a TLS client on a plaintext listener, and a secret
// or credential that cannot be read. Network errors, broker restarts and
// ILLEGAL_SASL_STATE around a re-authentication are transient: nil.
func AsSecurityError(k config.Kafka, need string, err error) error {
	var se *SecurityError
	if errors.As(err, &se) {
		return se
	}
	if msg, fatal := fatalMessage(k, need, err); fatal {
		return &SecurityError{Msg: msg, Err: err}
	}
	return nil
}

// MissingACL is the message for a permission the broker denies: the principal of k (the
// SASL user, the token's subject, the certificate's subject or ANONYMOUS), "<OP> on
// <resource> <name>" and the kafka-acls.sh command that grants it. op is a Kafka ACL
// operation ("READ", "WRITE"), resource "topic" or "group". It never includes a secret.
func MissingACL(k config.Kafka, op, resource, name string) string {
	return fmt.Sprintf("%s is missing %s on %s %s (fix: %s)", principal(k), strings.ToUpper(op), resource, name,
		aclHint(k, aclOperation(op), resource, name))
}

// ListenerMismatch returns a *SecurityError when err says that the client and the
// listener it dialled disagree on TLS or SASL, else nil. The texts are the Kafka client's
// guesses, each kept in the message with the setting to change:
//   - kafka.tls set, plaintext listener: the broker closes the connection at the TLS
//     ClientHello (kgo.ErrFirstReadEOF, "immediately after a dial");
//   - kafka.tls absent, TLS listener: the broker closes the connection at the first
//     request (kgo.ErrFirstReadEOF, "during api versions negotiation") or answers it with
//     a TLS alert, which the client reads as a response size ("tls alert record");
//   - kafka.sasl absent, SASL listener: the broker closes the connection after the first
//     request (kgo.ErrFirstReadEOF, "after a request was issued").
//
// Unlike AsSecurityError's failures these can also be a broker that drops connections
// while it restarts, so the start-up check looks again a few times before it believes
// them (ingest, listTopics); at run time they stay transient.
func ListenerMismatch(k config.Kafka, err error) error {
	if err == nil {
		return nil
	}
	var eof *kgo.ErrFirstReadEOF
	first := errors.As(err, &eof)
	msg := err.Error()
	brokers := strings.Join(k.Brokers, ",")
	switch {
	case k.TLS != nil && first && strings.Contains(eof.Error(), "immediately after a dial"):
		return &SecurityError{Err: err, Msg: fmt.Sprintf("kafka TLS: kafka.tls is set but the broker at %s closed the connection at the TLS handshake, as a plaintext listener does: %v (fix: point kafka.brokers at the TLS listener (SSL or SASL_SSL), or remove kafka.tls)", brokers, err)}
	case k.TLS == nil && (first && strings.Contains(eof.Error(), "during api versions negotiation") || strings.Contains(msg, "tls alert record")):
		return &SecurityError{Err: err, Msg: fmt.Sprintf("kafka TLS: kafka.tls is not set but the broker at %s speaks TLS: %v (fix: add kafka.tls (e.g. tls: {ca_file: /etc/ingestd/kafka-ca.pem}) for an SSL or SASL_SSL listener, or point kafka.brokers at the PLAINTEXT listener)", brokers, err)}
	case k.SASL == nil && first && strings.Contains(eof.Error(), "after a request was issued"):
		return &SecurityError{Err: err, Msg: fmt.Sprintf("kafka: kafka.sasl is not set but the broker at %s closed the connection after the first request, as a SASL listener does: %v (fix: set kafka.sasl, or point kafka.brokers at a listener without SASL)", brokers, err)}
	}
	return nil
}
