package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/ingestd/ingestd/internal/awscred"
)

// Secret is a password or token. Every way of printing it (fmt's %s %v %q %x %#v, JSON,
// text, slog) gives "[redacted]"; Reveal is the only way to the value.
type Secret string

const redacted = "[redacted]"

func (Secret) String() string               { return redacted }
func (Secret) GoString() string             { return redacted }
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (Secret) MarshalYAML() (any, error)    { return redacted, nil }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (s Secret) Reveal() string             { return string(s) }
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// TLS is a `tls:` block (kafka or schema_registry). Present, even as `tls: {}`,
// means TLS with the system roots; absent means plaintext.
type TLS struct {
	CAFile             string `yaml:"ca_file"`   // PEM bundle; replaces the system roots
	CertFile           string `yaml:"cert_file"` // client certificate (mTLS), with key_file
	KeyFile            string `yaml:"key_file"`  // unencrypted PEM key (PKCS#8, PKCS#1 or SEC1)
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// SASL is `kafka.sasl`.
type SASL struct {
	Mechanism    string            `yaml:"mechanism"` // PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER | AWS_MSK_IAM
	Username     string            `yaml:"username"`
	PasswordFile string            `yaml:"password_file"` // re-read on every authentication
	PasswordEnv  string            `yaml:"password_env"`
	TokenFile    string            `yaml:"token_file"` // OAUTHBEARER: re-read on every (re-)authentication
	TokenEnv     string            `yaml:"token_env"`
	Extensions   map[string]string `yaml:"extensions"` // OAUTHBEARER extensions (KIP-342)
}

// SASL mechanisms.
const (
	MechPlain       = "PLAIN"
	MechScram256    = "SCRAM-SHA-256"
	MechScram512    = "SCRAM-SHA-512"
	MechOAuthBearer = "OAUTHBEARER"
	MechMSKIAM      = "AWS_MSK_IAM"
)

// ReadSecret returns the secret from a file (trailing newlines dropped) or an environment
// variable, whichever is set; the error names the file or variable, never the value.
// Called at start-up (validation) and again on every authentication, so a rotated file
// is picked up without a restart.
func ReadSecret(file, env string) (Secret, error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read secret file: %w", err)
		}
		s := strings.TrimRight(string(b), "\r\n")
		if s == "" {
			return "", fmt.Errorf("secret file %s is empty", file)
		}
		return Secret(s), nil
	case env != "":
		s, ok := os.LookupEnv(env)
		if !ok || s == "" {
			return "", fmt.Errorf("environment variable %s is not set", env)
		}
		return Secret(s), nil
	}
	return "", fmt.Errorf("no secret source")
}

// ClientConfig returns the crypto/tls config of the tls block, reading the CA bundle now and
// the client key pair on every handshake (certificate rotation without a restart).
// Errors name the file and the fix.
func (t *TLS) ClientConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate (want -----BEGIN CERTIFICATE-----)", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			return nil, fmt.Errorf("load cert_file %s and key_file %s: %w", t.CertFile, t.KeyFile, err)
		}
		certFile, keyFile := t.CertFile, t.KeyFile
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			kp, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("load client certificate %s: %w", certFile, err)
			}
			return &kp, nil
		}
	}
	return tc, nil
}

var extNameRe = regexp.MustCompile(`^[A-Za-z]+$`)

// validateSecurity checks kafka.tls, kafka.sasl, kafka.client_id/instance_id and the
// registry's TLS and credentials; it reads every file and variable once (their values
// are never put in a message) and appends WARNs for settings that work but are unsafe.
func (c *Config) validateSecurity(bad func(path, msg, fix string), warn func(path, msg, fix string)) {
	k := c.Kafka
	// `tls:` with nothing under it (every key commented out) would silently mean plaintext
	for _, b := range []struct {
		path   string
		absent bool
	}{{"$.kafka.tls", k.TLS == nil}, {"$.kafka.sasl", k.SASL == nil}, {"$.schema_registry.tls", c.SchemaRegistry == nil || c.SchemaRegistry.TLS == nil}} {
		path := b.path
		if _, written := c.lines[path]; written && b.absent {
			fix := "write " + key(path) + ": {} for TLS with the system roots, fill it in, or remove the key"
			if path == "$.kafka.sasl" {
				fix = "set kafka.sasl.mechanism and its credentials, or remove the key"
			}
			bad(path, key(path)+" is empty", fix)
		}
	}
	if k.TLS != nil {
		c.validateTLS("$.kafka.tls", k.TLS, bad)
		if k.TLS.InsecureSkipVerify {
			warn("$.kafka.tls.insecure_skip_verify", "kafka.tls.insecure_skip_verify is true: the broker's certificate is not checked, anyone on the path can read and change the traffic", "set ca_file to the cluster's CA instead")
		}
	}
	if s := k.SASL; s != nil {
		c.validateSASL(s, k.TLS != nil, bad, warn)
	}
	if strings.ContainsAny(k.InstanceID, " \t") {
		bad("$.kafka.instance_id", fmt.Sprintf("kafka.instance_id %q contains whitespace", k.InstanceID), "use e.g. the pod name: instance_id: ${HOSTNAME}")
	}
	r := c.SchemaRegistry
	if r == nil {
		return
	}
	if u, err := url.Parse(r.URL); err == nil && u.User != nil {
		bad("$.schema_registry.url", "schema_registry.url carries credentials (user:password@): a URL is printed in errors and logs", "remove them from the URL and set schema_registry.username with password_file or password_env")
	}
	if r.TLS != nil {
		if strings.HasPrefix(r.URL, "http://") {
			bad("$.schema_registry.tls", "schema_registry.tls is set but schema_registry.url is http://", "use an https:// URL, or remove the tls block")
		}
		c.validateTLS("$.schema_registry.tls", r.TLS, bad)
	}
	sources := 0
	for _, set := range []bool{r.Password != "", r.PasswordFile != "", r.PasswordEnv != ""} {
		if set {
			sources++
		}
	}
	switch {
	case sources > 1:
		bad("$.schema_registry", "schema_registry has more than one of password, password_file and password_env", "keep one (password_file or password_env; a literal password ends up in the file)")
	case r.BearerTokenFile != "" && (sources > 0 || r.Username != ""):
		bad("$.schema_registry.bearer_token_file", "schema_registry has both basic auth (username/password) and bearer_token_file", "keep one: the registry gets either a Bearer token or basic auth")
	case sources > 0 && r.Username == "":
		bad("$.schema_registry", "schema_registry has a password but no username", "set schema_registry.username")
	case r.Username != "" && sources == 0:
		bad("$.schema_registry.username", "schema_registry.username is set without a password", "add schema_registry.password_file or password_env")
	}
	if r.PasswordFile != "" || r.PasswordEnv != "" {
		if _, err := ReadSecret(r.PasswordFile, r.PasswordEnv); err != nil {
			bad(pathOf("$.schema_registry", r.PasswordFile, "password_file", "password_env"), "schema_registry password: "+err.Error(), "create the file (or export the variable) with the password")
		}
	}
	if r.BearerTokenFile != "" {
		if _, err := ReadSecret(r.BearerTokenFile, ""); err != nil {
			bad("$.schema_registry.bearer_token_file", "schema_registry bearer token: "+err.Error(), "create the file with the token")
		}
	}
	if r.TLS == nil && strings.HasPrefix(r.URL, "http://") && (sources > 0 || r.BearerTokenFile != "") {
		warn("$.schema_registry.url", "schema_registry credentials are sent over plain http://", "use an https:// URL")
	}
}

func pathOf(base, file, fileKey, envKey string) string {
	if file != "" {
		return base + "." + fileKey
	}
	return base + "." + envKey
}

func (c *Config) validateTLS(path string, t *TLS, bad func(path, msg, fix string)) {
	name := key(path)
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad(path, name+": cert_file and key_file go together", "set both (client certificate, mTLS) or neither")
		return
	}
	if _, err := t.ClientConfig(); err != nil {
		bad(path, name+": "+err.Error(), "point ca_file/cert_file/key_file at readable PEM files (keys unencrypted)")
	}
}

func (c *Config) validateSASL(s *SASL, hasTLS bool, bad func(path, msg, fix string), warn func(path, msg, fix string)) {
	const p = "$.kafka.sasl"
	s.Mechanism = strings.ToUpper(strings.TrimSpace(s.Mechanism))
	pw := s.PasswordFile != "" || s.PasswordEnv != ""
	tok := s.TokenFile != "" || s.TokenEnv != ""
	if s.PasswordFile != "" && s.PasswordEnv != "" {
		bad(p+".password_env", "kafka.sasl has both password_file and password_env", "keep one")
	}
	if s.TokenFile != "" && s.TokenEnv != "" {
		bad(p+".token_env", "kafka.sasl has both token_file and token_env", "keep one")
	}
	switch s.Mechanism {
	case MechPlain, MechScram256, MechScram512:
		if s.Username == "" {
			bad(p, fmt.Sprintf("kafka.sasl.username is missing (%s needs a username)", s.Mechanism), "set kafka.sasl.username")
		}
		if !pw {
			bad(p, fmt.Sprintf("kafka.sasl has no password source (%s needs one)", s.Mechanism), "set kafka.sasl.password_file: /run/secrets/kafka-password or password_env: KAFKA_PASSWORD")
		}
		if tok || len(s.Extensions) > 0 {
			bad(p, fmt.Sprintf("kafka.sasl.token_*/extensions are for OAUTHBEARER, not %s", s.Mechanism), "remove them, or set mechanism: OAUTHBEARER")
		}
	case MechOAuthBearer:
		if !tok {
			bad(p, "kafka.sasl has no token source (OAUTHBEARER needs one)", "set kafka.sasl.token_file: /run/secrets/kafka-token (re-read on every re-authentication) or token_env")
		}
		if pw {
			bad(p, "kafka.sasl.password_* is not used by OAUTHBEARER", "remove it; OAUTHBEARER takes token_file or token_env")
		}
		for name, v := range s.Extensions {
			if !extNameRe.MatchString(name) || name == "auth" {
				bad(p+".extensions", fmt.Sprintf("kafka.sasl.extensions: name %q must be letters only and not \"auth\" (RFC 7628)", name), "rename the extension")
			}
			if v == "" {
				bad(p+".extensions", fmt.Sprintf("kafka.sasl.extensions.%s is empty", name), "give it a value or remove it")
			}
		}
	case MechMSKIAM:
		if !hasTLS {
			bad(p, "kafka.sasl.mechanism AWS_MSK_IAM needs kafka.tls (MSK's IAM listeners are TLS only)", "add kafka: {tls: {}} (the system roots verify MSK)")
		}
		if pw || tok || s.Username != "" {
			bad(p, "kafka.sasl: AWS_MSK_IAM takes its credentials from the AWS default credential chain, not username/password/token", "remove username, password_* and token_*")
		}
		if _, err := awscred.DefaultChain(context.Background()); err != nil {
			bad(p, "kafka.sasl.mechanism AWS_MSK_IAM: "+err.Error(), "fix the AWS configuration (AWS_PROFILE, AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE)")
		}
		return
	case "":
		bad(p, "kafka.sasl.mechanism is missing", "set it to PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM")
		return
	default:
		bad(p+".mechanism", fmt.Sprintf("kafka.sasl.mechanism %q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM", s.Mechanism), "use one of those (Kafka's names)")
		return
	}
	if pw && s.Mechanism != MechOAuthBearer {
		if _, err := ReadSecret(s.PasswordFile, s.PasswordEnv); err != nil {
			bad(pathOf(p, s.PasswordFile, "password_file", "password_env"), "kafka.sasl password: "+err.Error(), "create the file (or export the variable) with the password")
		}
	}
	if tok && s.Mechanism == MechOAuthBearer {
		if _, err := ReadSecret(s.TokenFile, s.TokenEnv); err != nil {
			bad(pathOf(p, s.TokenFile, "token_file", "token_env"), "kafka.sasl token: "+err.Error(), "create the file (or export the variable) with the token")
		}
	}
	if !hasTLS {
		warn(p, fmt.Sprintf("kafka.sasl %s without kafka.tls: credentials and records cross the network unencrypted (SASL_PLAINTEXT)", s.Mechanism), "add kafka.tls (e.g. tls: {} or tls: {ca_file: ...}) unless the listener really is SASL_PLAINTEXT")
	}
}

// redactURL replaces a URL's user:password@ part with [redacted]@.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i, j := strings.Index(raw, "://"), strings.LastIndex(raw, "@"); i >= 0 && j > i {
			return raw[:i+3] + redacted + raw[j:]
		}
		return raw
	}
	u.User = nil
	return strings.Replace(u.String(), "://", "://"+redacted+"@", 1)
}
