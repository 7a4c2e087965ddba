package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate prints each pipeline's WARNs (here SASL without TLS) with file:line, and never
// a secret: not the password read from password_file, not one given through ${VAR}.
func TestValidateWarnsWithoutSecrets(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("file-Secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SR_PASSWORD_VALIDATE_TEST", "env #Secret: 2")
	cfg := filepath.Join(dir, "p.yaml")
	body := `name: p
kafka:
  brokers: [k:9092]
  topics: [orders]
  sasl: {mechanism: SCRAM-SHA-512, username: u, password_file: ` + pw + `}
schema_registry: {url: "http://r:8081", username: u, password: "${SR_PASSWORD_VALIDATE_TEST}"}
table: {uri: /tmp/validate-test}
schema: {policy: evolve}
`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"validate", "--config", cfg}, &out, &errb); code != 0 {
		t.Fatalf("validate exit %d: %s%s", code, out.String(), errb.String())
	}
	want := "warning: " + cfg + ":5: kafka.sasl SCRAM-SHA-512 without kafka.tls: credentials and records cross the network unencrypted (SASL_PLAINTEXT)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("validate output lacks %q:\n%s", want, out.String())
	}
	all := out.String() + errb.String()
	if strings.Contains(all, "file-Secret-1") || strings.Contains(all, "env #Secret: 2") {
		t.Errorf("validate printed a secret:\n%s", all)
	}
	// a broken config: the error names the key, not the secret's value
	if err := os.WriteFile(cfg, []byte(strings.Replace(body, `password: "${SR_PASSWORD_VALIDATE_TEST}"`, `password: "${SR_PASSWORD_VALIDATE_TEST}", passwd: x`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"validate", "--config", cfg}, &out, &errb); code == 0 || strings.Contains(errb.String(), "env #Secret") ||
		!strings.Contains(errb.String(), cfg+`:6: unknown field "passwd" in schema_registry`) {
		t.Errorf("validate of a broken config: exit %d\n%s", code, errb.String())
	}
}
