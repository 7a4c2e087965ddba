package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/ingest/internal/configtest"
	"github.com/ingestd/ingestd/internal/testpki"
)

// Each rule names file:line, the key and the fix, exactly.
func TestConfigSecurityValidation(t *testing.T) {
	pki := testpki.New(t)
	pw := pki.SecretFile(t, "pw", "pw")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	base := "name: s\nkafka:\n  brokers: [b:9094]\n  topics: [orders]\n%s\nschema_registry: {url: %q}\ntable: {uri: /tmp/t}\nschema: {policy: evolve}\n"
	cfg := func(kafka, url string) string { return fmt.Sprintf(base, kafka, url) }
	tests := []struct{ name, body, want string }{
		{"cert without key", cfg("  tls: {cert_file: "+pki.ClientCert+"}", "http://r"),
			"p.yaml:5: kafka.tls: cert_file and key_file go together (fix: set both (client certificate, mTLS) or neither)"},
		{"ca file without PEM", cfg("  tls: {ca_file: "+pw+"}", "http://r"),
			"p.yaml:5: kafka.tls: ca_file " + pw + " holds no PEM certificate (want -----BEGIN CERTIFICATE-----) (fix: point ca_file/cert_file/key_file at readable PEM files (keys unencrypted))"},
		{"two password sources", cfg("  tls: {}\n  sasl: {mechanism: PLAIN, username: u, password_file: "+pw+", password_env: X}", "http://r"),
			"p.yaml:6: kafka.sasl has both password_file and password_env (fix: keep one)"},
		{"SCRAM without username", cfg("  tls: {}\n  sasl: {mechanism: SCRAM-SHA-256, password_file: "+pw+"}", "http://r"),
			"p.yaml:6: kafka.sasl.username is missing (SCRAM-SHA-256 needs a username) (fix: set kafka.sasl.username)"},
		{"missing password file", cfg("  tls: {}\n  sasl: {mechanism: SCRAM-SHA-512, username: u, password_file: /nonexistent/pw}", "http://r"),
			"p.yaml:6: kafka.sasl password: read secret file: open /nonexistent/pw: no such file or directory (fix: create the file (or export the variable) with the password)"},
		{"OAUTHBEARER without token", cfg("  tls: {}\n  sasl: {mechanism: OAUTHBEARER}", "http://r"),
			"p.yaml:6: kafka.sasl has no token source (OAUTHBEARER needs one) (fix: set kafka.sasl.token_file: /run/secrets/kafka-token (re-read on every re-authentication) or token_env)"},
		{"bad extension name", cfg("  tls: {}\n  sasl: {mechanism: OAUTHBEARER, token_file: "+pw+", extensions: {auth: x}}", "http://r"),
			`p.yaml:6: kafka.sasl.extensions: name "auth" must be letters only and not "auth" (RFC 7628) (fix: rename the extension)`},
		{"MSK IAM without TLS", cfg("  sasl: {mechanism: AWS_MSK_IAM}", "http://r"),
			"p.yaml:5: kafka.sasl.mechanism AWS_MSK_IAM needs kafka.tls (MSK's IAM listeners are TLS only) (fix: add kafka: {tls: {}} (the system roots verify MSK))"},
		{"unknown mechanism", cfg("  sasl: {mechanism: GSSAPI}", "http://r"),
			`p.yaml:5: kafka.sasl.mechanism "GSSAPI" is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM (fix: use one of those (Kafka's names))`},
		{"credentials in the registry URL", cfg("", "https://bob:hunter2@reg:8081"),
			"p.yaml:6: schema_registry.url carries credentials (user:password@): a URL is printed in errors and logs (fix: remove them from the URL and set schema_registry.username with password_file or password_env)"},
		{"registry tls over http", cfg("", "http://reg:8081") + "", ""},
	}
	tests[len(tests)-1].body = strings.Replace(cfg("", "http://reg:8081"), `schema_registry: {url: "http://reg:8081"}`, `schema_registry: {url: "http://reg:8081", tls: {}}`, 1)
	tests[len(tests)-1].want = "p.yaml:6: schema_registry.tls is set but schema_registry.url is http:// (fix: use an https:// URL, or remove the tls block)"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errorsOf(t, tt.body)
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if strings.Contains(got, "hunter2") {
				t.Errorf("secret in error: %s", got)
			}
		})
	}
	// AWS_MSK_IAM with an AWS configuration that does not load (AWS_PROFILE names a
	// profile no file has): refused at start-up, file:line, the profile and the fix
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(pki.Dir, "aws-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(pki.Dir, "aws-credentials"))
	t.Setenv("AWS_PROFILE", "nosuch")
	got := errorsOf(t, cfg("  tls: {}\n  sasl: {mechanism: AWS_MSK_IAM}", "http://r"))
	if !strings.HasPrefix(got, "p.yaml:6: kafka.sasl.mechanism AWS_MSK_IAM: load AWS configuration: ") || !strings.Contains(got, "nosuch") ||
		!strings.HasSuffix(got, "(fix: fix the AWS configuration (AWS_PROFILE, AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE))") {
		t.Errorf("missing AWS profile: %s", got)
	}
	t.Setenv("AWS_PROFILE", "")
	// SASL without TLS loads, with a WARN naming the line
	cfgs, err := Load(configtest.Write(t, cfg("  sasl: {mechanism: PLAIN, username: u, password_file: "+pw+"}", "http://r")))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs[0].Warnings) != 1 || !strings.HasSuffix(cfgs[0].Warnings[0].Error(), "p.yaml:5: kafka.sasl PLAIN without kafka.tls: credentials and records cross the network unencrypted (SASL_PLAINTEXT) (fix: add kafka.tls (e.g. tls: {} or tls: {ca_file: ...}) unless the listener really is SASL_PLAINTEXT)") {
		t.Fatalf("warnings %v", cfgs[0].Warnings)
	}
}

func TestSecretRedacted(t *testing.T) {
	s := Secret("hunter2")
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "pw", s, "cfg", Registry{URL: "http://r", Password: s})
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "pw", s)
	js, _ := json.Marshal(Registry{Password: s})
	buf.Write(js)
	for _, verb := range []string{"%s", "%v", "%+v", "%#v", "%q", "%x", "%d"} {
		fmt.Fprintf(&buf, verb+"|", s)
		fmt.Fprintf(&buf, verb+"|", Registry{Password: s})
		fmt.Fprintf(&buf, verb+"|", &Registry{Password: s})
	}
	if strings.Contains(buf.String(), "hunter2") || strings.Contains(buf.String(), fmt.Sprintf("%x", "hunter2")) {
		t.Fatalf("secret printed: %s", buf.String())
	}
	if !strings.Contains(string(js), `"Password":"[redacted]"`) || s.Reveal() != "hunter2" || fmt.Sprint(s) != "[redacted]" {
		t.Fatalf("json %s", js)
	}
}
