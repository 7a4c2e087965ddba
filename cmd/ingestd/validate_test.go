package main

import (
	"bytes"
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
