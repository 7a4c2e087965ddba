package ingest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/aws"
)

// TestMSKCredentialsNearExpiry is C40 R3 at the SASL layer: the AWS_MSK_IAM mechanism
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

// envAWSCredentials reads AWS_CREDENTIAL_EXPIRATION as the expiry and refuses a bad one.
func TestEnvAWSCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalr")
	t.Setenv("AWS_SESSION_TOKEN", "tok")
	t.Setenv("AWS_CREDENTIAL_EXPIRATION", "2026-12-01T11:00:00Z")
	a, exp, err := envAWSCredentials(context.Background())
	if err != nil || a.AccessKey != "AKIDEXAMPLE" || a.SessionToken != "tok" || !exp.Equal(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("got %s %v %v", a.AccessKey, exp, err)
	}
	t.Setenv("AWS_CREDENTIAL_EXPIRATION", "tomorrow")
	if _, _, err := envAWSCredentials(context.Background()); err == nil || err.Error() != `AWS_CREDENTIAL_EXPIRATION "tomorrow" is not an RFC 3339 time` {
		t.Errorf("bad expiry: %v", err)
	}
	t.Setenv("AWS_CREDENTIAL_EXPIRATION", "")
	if _, exp, err := envAWSCredentials(context.Background()); err != nil || !exp.IsZero() {
		t.Errorf("no expiry: %v %v", exp, err)
	}
}
