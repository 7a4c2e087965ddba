package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/storage"
)

// objectStore is one emulator of scripts/stack.sh, as .stack/env describes it.
type objectStore struct {
	kind string // s3, gcs, azure
	// base is a fresh table-root URI prefix in the emulator's bucket, unique per test:
	// s3://lake/<test>-<rand>, gs://lake/…, az://lake/….
	base string
	// env is what a process needs to reach the emulator (also set in this test's env).
	env []string
	// storageOptions are delta-rs' storage_options for the same store.
	storageOptions map[string]string
	// endpoint is the emulator's URL (host:port for GCS).
	endpoint string
}

// stackEnv reads .stack/env (written by scripts/stack.sh up / start-stores) into a map.
func stackEnv() map[string]string {
	m := map[string]string{}
	b, err := os.ReadFile(filepath.Join(repoRoot, ".stack", "env"))
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "export ")
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = strings.Trim(v, `"'`)
		}
	}
	return m
}

// needStore returns the emulator of kind ("s3", "gcs", "azure") started by
// scripts/stack.sh, with its variables set in the test's environment (so that a daemon
// started by the test inherits them) and its bucket created. Without it the test skips
// locally, naming what is missing, and fails under CI=true.
func needStore(t testing.TB, kind string) objectStore {
	t.Helper()
	env := stackEnv()
	get := func(k string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return env[k]
	}
	var (
		st       objectStore
		hostport string
		vars     []string
	)
	st.kind = kind
	switch kind {
	case "s3":
		vars = []string{"AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"}
		st.endpoint = get("AWS_ENDPOINT_URL_S3")
		if u, err := url.Parse(st.endpoint); err == nil {
			hostport = u.Host
		}
		st.storageOptions = map[string]string{
			"aws_endpoint_url": st.endpoint, "aws_access_key_id": get("AWS_ACCESS_KEY_ID"),
			"aws_secret_access_key": get("AWS_SECRET_ACCESS_KEY"), "aws_region": get("AWS_REGION"),
			"aws_allow_http": "true",
		}
	case "gcs":
		vars = []string{"STORAGE_EMULATOR_HOST"}
		hostport = get("STORAGE_EMULATOR_HOST")
		st.endpoint = hostport
		// object_store reads a test endpoint from a service-account key without OAuth.
		st.storageOptions = map[string]string{"google_service_account_key": `{"gcs_base_url": "http://` + hostport +
			`", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}`}
	case "azure":
		vars = []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURITE_BLOB_ENDPOINT", "AZURITE_ACCOUNT_KEY"}
		st.endpoint = get("AZURITE_BLOB_ENDPOINT")
		if u, err := url.Parse(st.endpoint); err == nil {
			hostport = u.Host
		}
		// The emulator's URL reaches object_store as AZURITE_BLOB_STORAGE_URL in the
		// reader's environment (readTableAt).
		st.storageOptions = map[string]string{"azure_storage_use_emulator": "true",
			"azure_storage_account_name": "devstoreaccount1", "azure_storage_account_key": get("AZURITE_ACCOUNT_KEY")}
	default:
		t.Fatalf("needStore: unknown kind %q", kind)
	}
	var missing []string
	for _, v := range vars {
		if get(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) == 0 && !reachableTCP(hostport) {
		missing = append(missing, "a server listening on "+hostport)
	}
	if len(missing) > 0 {
		msg := "integration test needs the " + kind + " emulator (" + strings.Join(missing, ", ") + "): run scripts/stack.sh up (or scripts/stack.sh start-stores)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, v := range vars {
		if val := get(v); val != "" {
			t.Setenv(v, val)
			st.env = append(st.env, v+"="+val)
		}
	}
	scheme := map[string]string{"s3": "s3", "gcs": "gs", "azure": "az"}[kind]
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	st.base = scheme + "://lake/" + name + "-" + hex.EncodeToString(rnd[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := storage.CreateBucket(ctx, st.base, storage.Options{}); err != nil {
		t.Fatalf("create bucket lake on the %s emulator: %v", kind, err)
	}
	return st
}

func reachableTCP(hostport string) bool {
	if hostport == "" {
		return false
	}
	c, err := net.DialTimeout("tcp", hostport, 2*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// open opens the store at base/rel with the environment's settings.
func (o objectStore) open(t *testing.T, rel string) storage.Store {
	t.Helper()
	st, err := storage.OpenWith(context.Background(), o.base+"/"+rel, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
