package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate resolves an S3 table's credentials and names their source, never the secret;
// without credentials it fails with the file:line of table.uri.
func TestValidateObjectStoreCredentials(t *testing.T) {
	for k, v := range map[string]string{"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "S3_ENDPOINT": "http://127.0.0.1:1"} {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"validate", "--config", "../../configs/s3"}, &out, &errb); code != exitUsage ||
		!strings.Contains(errb.String(), "orders-bronze-s3.yaml:16: credentials for table s3://lake/bronze/orders: no AWS credentials") {
		t.Fatalf("validate without credentials: code %d, stderr %q", code, errb.String())
	}
	const secret = "wJalrXUtnFEMI-never-shown"
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	out.Reset()
	errb.Reset()
	if code := run([]string{"validate", "--config", "../../configs/s3"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "table=s3://lake/bronze/orders") || !strings.Contains(out.String(), "credentials=AWS EnvConfigCredentials") {
		t.Fatalf("validate with env credentials: code %d, out %q, stderr %q", code, out.String(), errb.String())
	}
	if strings.Contains(out.String()+errb.String(), secret) || strings.Contains(out.String()+errb.String(), "AKIDEXAMPLE") {
		t.Errorf("validate printed a credential: %q %q", out.String(), errb.String())
	}
}

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

// validate cannot check partition columns and generated expressions against the writer
// schema (it reads none): it says so, naming the partition columns that are neither
// generated nor Kafka columns; a pipeline without such settings gets no note.
func TestValidateNotesSchemaChecksLeft(t *testing.T) {
	dir := t.TempDir()
	body := `name: p
kafka: {brokers: [k:9092], topics: [orders]}
schema_registry: {url: "http://r:8081"}
table:
  uri: /tmp/validate-notes
  create: true
  partition_by: [event_date, region, _kafka_partition]
  generated_columns: {event_date: "CAST(no_such_column AS DATE)"}
  kafka_columns: [partition]
schema: {policy: evolve}
`
	cfg := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"validate", "--config", cfg}, &out, &errb); code != 0 {
		t.Fatalf("validate: code %d, stderr %q", code, errb.String())
	}
	want := "note: table.partition_by [region] and the table.generated_columns expressions name columns of the writer schema: they are checked when ingestd creates the table (from the first record that fits), which fails the pipeline if a column is missing; validate reads no schema\n"
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("validate output\n%s\nwant it to end with\n%s", out.String(), want)
	}
	plain := strings.NewReplacer("  partition_by: [event_date, region, _kafka_partition]\n", "", "  generated_columns: {event_date: \"CAST(no_such_column AS DATE)\"}\n", "").Replace(body)
	if err := os.WriteFile(cfg, []byte(plain), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"validate", "--config", cfg}, &out, &errb); code != 0 || strings.Contains(out.String(), "note:") {
		t.Errorf("validate of a plain pipeline: code %d, output %q", code, out.String())
	}
}

// validate says which format each pipeline reads (avro when the key is absent).
func TestValidatePrintsFormat(t *testing.T) {
	dir := t.TempDir()
	const base = "kafka: {brokers: [\"k:9092\"], topics: [t]}\nschema_registry: {url: \"http://r:8081\"}\ntable: {uri: \"file:///tmp/x\", create: true}\nschema: {policy: evolve}\n"
	for name, body := range map[string]string{"pb.yaml": "name: pb\nformat: protobuf\n" + base, "av.yaml": "name: av\n" + strings.Replace(base, "/tmp/x", "/tmp/y", 1)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"validate", "--config", dir}, &out, &errb); code != 0 {
		t.Fatalf("validate: code %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{"  pb  format=protobuf  topics=[t]", "  av  format=avro  topics=[t]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("validate output %q lacks %q", out.String(), want)
		}
	}
}
