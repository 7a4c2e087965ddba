package kafkaclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"

	"github.com/ingestd/ingestd/ingest/config"
)

// TestMSKCredentialsNearExpiry, at the SASL layer (mskRefreshMargin): the AWS_MSK_IAM mechanism
// signs with credentials from a source that hands out one-hour credentials; it reuses
// them while they have at least 5 minutes left and asks the source again before signing
// once they have 30 s left, so it never signs with credentials about to expire (the
// broker would cap the session at 30 s). Credentials that have 30 s left even when fresh
// are signed (still valid) but not kept; expired ones are refused, naming their expiry.
func TestMSKCredentialsNearExpiry(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := t0
	type issued struct {
		key string
		exp time.Time
	}
	var plan []issued
	calls := 0
	src := func(context.Context) (aws.Auth, time.Time, error) {
		c := plan[calls]
		calls++
		return aws.Auth{AccessKey: c.key, SecretKey: "secret-" + c.key, SessionToken: "token-" + c.key}, c.exp, nil
	}
	creds := newMSKCredentials(src, mskRefreshMargin)
	creds.now = func() time.Time { return now }
	mech := aws.ManagedStreamingIAM(creds.get)
	host := "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"
	signed := func() (string, error) {
		_, first, err := mech.Authenticate(context.Background(), host)
		if err != nil {
			return "", err
		}
		var m map[string]string
		if err := json.Unmarshal(first, &m); err != nil {
			t.Fatal(err)
		}
		key, _, _ := strings.Cut(m["x-amz-credential"], "/")
		if m["x-amz-security-token"] != "token-"+key {
			t.Errorf("signed as %s with session token %q", key, m["x-amz-security-token"])
		}
		return key, nil
	}
	plan = []issued{{"AKIDFIRST", t0.Add(time.Hour)}, {"AKIDSECOND", t0.Add(time.Hour + 59*time.Minute + 30*time.Second)}}
	for _, step := range []struct {
		at        time.Duration
		wantKey   string
		wantCalls int
	}{
		{0, "AKIDFIRST", 1},
		{10 * time.Minute, "AKIDFIRST", 1},                 // 50 min left: kept
		{55 * time.Minute, "AKIDFIRST", 1},                 // exactly 5 min left: kept
		{59*time.Minute + 30*time.Second, "AKIDSECOND", 2}, // 30 s left: refreshed before signing
		{time.Hour + 30*time.Minute, "AKIDSECOND", 2},      // the new ones have 29.5 min left
	} {
		now = t0.Add(step.at)
		key, err := signed()
		if err != nil || key != step.wantKey || calls != step.wantCalls {
			t.Errorf("at +%v: signed as %q (%v) after %d source calls, want %s after %d", step.at, key, err, calls, step.wantKey, step.wantCalls)
		}
	}

	// a source whose fresh credentials expire in 30 s: signed while valid, asked again each time
	now, calls = t0, 0
	creds = newMSKCredentials(src, mskRefreshMargin)
	creds.now = func() time.Time { return now }
	mech = aws.ManagedStreamingIAM(creds.get)
	plan = []issued{{"AKIDSHORT1", t0.Add(30 * time.Second)}, {"AKIDSHORT2", t0.Add(40 * time.Second)}, {"AKIDGONE", t0.Add(5 * time.Second)}}
	for i, want := range []string{"AKIDSHORT1", "AKIDSHORT2"} {
		now = t0.Add(time.Duration(i) * 10 * time.Second)
		if key, err := signed(); err != nil || key != want || calls != i+1 {
			t.Errorf("short-lived credentials, authentication %d: %q %v after %d calls", i+1, key, err, calls)
		}
	}
	now = t0.Add(20 * time.Second)
	_, err := signed()
	want := "the AWS credentials of access key AKIDGONE expired at 2026-12-01T10:00:05Z; whatever renews them has stopped"
	if err == nil || err.Error() != want || strings.Contains(err.Error(), "secret-") {
		t.Errorf("expired credentials: %v, want %q", err, want)
	}
}

// isolateAWS points the AWS SDK's default chain at nothing but what a test sets: no
// home directory files, no IMDS, no container or web identity credentials.
func isolateAWS(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"HOME": dir, "AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "",
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_CREDENTIAL_EXPIRATION": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_AUTHORIZATION_TOKEN": "",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "", "AWS_ROLE_SESSION_NAME": "", "AWS_ENDPOINT_URL_STS": "",
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "",
	} {
		t.Setenv(k, v)
	}
}

// sign runs one AWS_MSK_IAM authentication with mech and returns the access key it
// signed with and the whole first message (for secret checks).
func sign(t *testing.T, mech interface {
	Authenticate(context.Context, string) (sasl.Session, []byte, error)
}) (string, string, error) {
	t.Helper()
	_, first, err := mech.Authenticate(context.Background(), "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
	if err != nil {
		return "", "", err
	}
	var m map[string]string
	if err := json.Unmarshal(first, &m); err != nil {
		t.Fatal(err)
	}
	key, _, _ := strings.Cut(m["x-amz-credential"], "/")
	return key, string(first), nil
}

// TestMSKCredentialsFromContainerEndpoint is mskRefreshMargin through the AWS SDK's real ECS
// container-credentials provider: AWS_CONTAINER_CREDENTIALS_FULL_URI points at a local
// endpoint that hands out temporary credentials (one hour, then two) and counts the
// requests. The mechanism asks once, signs with the same credentials while they have at
// least 5 minutes left (no request), asks again before signing once they have 30 s left,
// sends AWS_CONTAINER_AUTHORIZATION_TOKEN each time; when the endpoint fails, the error
// names the chain's failure and no secret of earlier credentials.
func TestMSKCredentialsFromContainerEndpoint(t *testing.T) {
	isolateAWS(t)
	var (
		mu    sync.Mutex
		calls int
		fail  bool
		auth  []string
	)
	lives := []time.Duration{time.Hour, 2 * time.Hour}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		auth = append(auth, r.Header.Get("Authorization"))
		if fail {
			http.Error(w, `{"code":"InternalError","message":"the agent is gone"}`, http.StatusInternalServerError)
			return
		}
		n := calls
		calls++
		fmt.Fprintf(w, `{"AccessKeyId":"ASIAECS%d","SecretAccessKey":"ecs-secret-%d","Token":"ecs-token-%d","Expiration":%q}`,
			n, n, n, time.Now().Add(lives[n%len(lives)]).UTC().Format(time.RFC3339))
	}))
	defer srv.Close()
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/v2/credentials/task")
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-auth-token")

	src, err := sdkAWSCredentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	creds := newMSKCredentials(src, mskRefreshMargin)
	t0 := time.Now()
	offset := time.Duration(0)
	creds.now = func() time.Time { return t0.Add(offset) }
	mech := aws.ManagedStreamingIAM(creds.get)
	count := func() int { mu.Lock(); defer mu.Unlock(); return calls }
	for _, step := range []struct {
		at        time.Duration
		wantKey   string
		wantCalls int
	}{
		{0, "ASIAECS0", 1},
		{10 * time.Minute, "ASIAECS0", 1},                // 50 min left: no request
		{54 * time.Minute, "ASIAECS0", 1},                // 6 min left: no request
		{59*time.Minute + 30*time.Second, "ASIAECS1", 2}, // 30 s left: asked before signing
		{time.Hour + 30*time.Minute, "ASIAECS1", 2},      // the new ones have 89.5 min left
	} {
		offset = step.at
		key, first, err := sign(t, mech)
		if err != nil || key != step.wantKey || count() != step.wantCalls {
			t.Errorf("at +%v: signed as %q (%v) after %d requests, want %s after %d", step.at, key, err, count(), step.wantKey, step.wantCalls)
		}
		if strings.Contains(first, "ecs-secret-") {
			t.Errorf("the first message carries the secret key: %s", first)
		}
	}
	mu.Lock()
	for i, a := range auth {
		if a != "container-auth-token" {
			t.Errorf("request %d: Authorization %q", i+1, a)
		}
	}
	fail = true
	mu.Unlock()

	offset = 2*time.Hour + 56*time.Minute // 4 min left of ASIAECS1's two hours: asked, and the endpoint fails
	_, _, err = sign(t, mech)
	if err == nil || !strings.Contains(err.Error(), "retrieve AWS credentials: ") || !strings.Contains(err.Error(), "the agent is gone") {
		t.Fatalf("failing endpoint: %v", err)
	}
	for _, s := range []string{"ecs-secret-", "ecs-token-", "container-auth-token"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error carries %q: %v", s, err)
		}
	}
}

// TestMSKCredentialsFromProfile: the shared credentials file with AWS_PROFILE (long-term
// keys, no expiry: asked for on every authentication, answered from memory), a missing
// profile refused when the mechanism is built (so at start-up, naming it), and
// environment keys with AWS_CREDENTIAL_EXPIRATION as their expiry.
func TestMSKCredentialsFromProfile(t *testing.T) {
	isolateAWS(t)
	const secret = "wJalrXUtnFEMI-profile-secret"
	file := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if err := os.WriteFile(file, []byte("[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = other\n\n[ingest]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_PROFILE", "ingest")
	mech, err := saslMechanism(&config.SASL{Mechanism: config.MechMSKIAM}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		key, first, err := sign(t, mech)
		if err != nil || key != "AKIDPROFILE" || strings.Contains(first, secret) {
			t.Fatalf("profile authentication %d: %q %v", i+1, key, err)
		}
	}
	src, err := sdkAWSCredentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a, exp, err := src(context.Background()); err != nil || a.AccessKey != "AKIDPROFILE" || !exp.IsZero() {
		t.Errorf("profile source: %s %v %v, want AKIDPROFILE without expiry", a.AccessKey, exp, err)
	}

	t.Setenv("AWS_PROFILE", "nosuch")
	_, err = saslMechanism(&config.SASL{Mechanism: config.MechMSKIAM}, nil)
	if err == nil || !strings.Contains(err.Error(), "configure kafka.sasl AWS_MSK_IAM: load AWS configuration: ") || !strings.Contains(err.Error(), "nosuch") || strings.Contains(err.Error(), secret) {
		t.Errorf("missing profile: %v", err)
	}

	// environment keys come first in the chain; AWS_CREDENTIAL_EXPIRATION is their expiry
	t.Setenv("AWS_PROFILE", "ingest")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalr")
	t.Setenv("AWS_SESSION_TOKEN", "tok")
	t.Setenv("AWS_CREDENTIAL_EXPIRATION", "2026-12-01T11:00:00Z")
	if src, err = sdkAWSCredentials(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, exp, err := src(context.Background())
	if err != nil || a.AccessKey != "AKIDEXAMPLE" || a.SessionToken != "tok" || !exp.Equal(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("env: %s %v %v", a.AccessKey, exp, err)
	}
	t.Setenv("AWS_CREDENTIAL_EXPIRATION", "tomorrow")
	if _, _, err := src(context.Background()); err == nil || err.Error() != `retrieve AWS credentials: AWS_CREDENTIAL_EXPIRATION "tomorrow" is not an RFC 3339 time` {
		t.Errorf("bad expiry: %v", err)
	}
	// expired environment credentials are refused before signing, and the pipeline fails
	t.Setenv("AWS_CREDENTIAL_EXPIRATION", time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
	if mech, err = saslMechanism(&config.SASL{Mechanism: config.MechMSKIAM}, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err = sign(t, mech)
	k := config.Kafka{SASL: &config.SASL{Mechanism: config.MechMSKIAM}}
	if msg, fatal := fatalMessage(k, "", err); !fatal || !strings.HasPrefix(msg, "kafka credentials for the IAM identity of access key AKIDEXAMPLE (AWS_MSK_IAM): read kafka.sasl AWS credentials: the AWS credentials of access key AKIDEXAMPLE expired at ") || strings.Contains(msg, "wJalr") {
		t.Errorf("expired env credentials: %v %q", fatal, msg)
	}
}

// TestMSKCredentialsFromWebIdentity is IRSA through the SDK's real web identity
// provider: AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, STS at a local endpoint
// (AWS_ENDPOINT_URL_STS) answering AssumeRoleWithWebIdentity; the token file is re-read on
// each refresh (Kubernetes rotates it) and the role's credentials are used until 5 minutes
// before they expire.
func TestMSKCredentialsFromWebIdentity(t *testing.T) {
	isolateAWS(t)
	tokFile := filepath.Join(t.TempDir(), "token")
	var (
		mu     sync.Mutex
		tokens []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		tokens = append(tokens, r.Form.Get("WebIdentityToken"))
		n := len(tokens)
		mu.Unlock()
		if r.Form.Get("RoleArn") != "arn:aws:iam::123456789012:role/ingestd" {
			http.Error(w, "wrong role "+r.Form.Get("RoleArn"), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>ASIAIRSA%d</AccessKeyId><SecretAccessKey>irsa-secret-%d</SecretAccessKey><SessionToken>irsa-token-%d</SessionToken><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/ingestd/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser>
</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>r%d</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`,
			n, n, n, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), n)
	}))
	defer srv.Close()
	if err := os.WriteFile(tokFile, []byte("jwt-one"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tokFile)
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/ingestd")
	t.Setenv("AWS_ROLE_SESSION_NAME", "ingestd-test")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL_STS", srv.URL)

	src, err := sdkAWSCredentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	creds := newMSKCredentials(src, mskRefreshMargin)
	t0 := time.Now()
	offset := time.Duration(0)
	creds.now = func() time.Time { return t0.Add(offset) }
	mech := aws.ManagedStreamingIAM(creds.get)
	if key, _, err := sign(t, mech); err != nil || key != "ASIAIRSA1" {
		t.Fatalf("first: %q %v", key, err)
	}
	offset = 30 * time.Minute
	if key, _, err := sign(t, mech); err != nil || key != "ASIAIRSA1" {
		t.Fatalf("at +30m: %q %v", key, err)
	}
	if err := os.WriteFile(tokFile, []byte("jwt-two"), 0o600); err != nil {
		t.Fatal(err)
	}
	offset = 56 * time.Minute
	if key, _, err := sign(t, mech); err != nil || key != "ASIAIRSA2" {
		t.Fatalf("at +56m: %q %v", key, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(tokens, ",") != "jwt-one,jwt-two" {
		t.Errorf("STS saw tokens %q, want jwt-one then jwt-two", tokens)
	}
}
