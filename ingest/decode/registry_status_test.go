package decode

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// statusRegistry is an httptest registry answering every schema lookup with one status
// and a Confluent-style JSON error body, counting the requests.
func statusRegistry(t *testing.T, status, code int, msg string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error_code": code, "message": msg})
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestRegistryAnswersByStatus: each registry status is classified per schema id: 404 is
// schema_not_found, 401/403 are ErrRegistryAuth naming the registry and the user (never
// the password), other 4xx are schema_unreadable with the registry's message, and 429 and
// 5xx stay transient.
func TestRegistryAnswersByStatus(t *testing.T) {
	const user, secret = "ingestd-reader", "s3cr3t-pa55"
	for _, c := range []struct {
		status, code int
		msg          string
		user         string
		// exactly one of these
		reason    string
		auth      bool
		transient bool
		wantErr   string
		cached    bool // a second lookup makes no request
	}{
		{status: 400, code: 40001, msg: "Invalid Avro schema: Illegal character in: Bestellmenge\u00e4", user: user, reason: ReasonSchemaUnreadable, cached: true,
			wantErr: `decode: schema_unreadable: look up schema 7: schema registry answered 400 Bad Request: Invalid Avro schema: Illegal character in: Bestellmenge` + "\u00e4" + ` (error code 40001)`},
		{status: 422, code: 42201, msg: "Invalid schema", user: user, reason: ReasonSchemaUnreadable, cached: true,
			wantErr: `decode: schema_unreadable: look up schema 7: schema registry answered 422 Unprocessable Entity: Invalid schema (error code 42201)`},
		{status: 404, code: 40403, msg: "Schema 7 not found", user: user, reason: ReasonSchemaNotFound, cached: true,
			wantErr: `decode: schema_not_found: look up schema 7: Schema 7 not found`},
		{status: 401, code: 40101, msg: "Unauthorized", user: user, auth: true,
			wantErr: `look up schema 7: schema registry REGISTRY answered 401 Unauthorized to user "ingestd-reader": Unauthorized (error code 40101); check schema_registry.username and schema_registry.password`},
		{status: 401, code: 40101, msg: "Unauthorized", user: "", auth: true,
			wantErr: `look up schema 7: schema registry REGISTRY answered 401 Unauthorized without credentials: Unauthorized (error code 40101); set schema_registry.username and schema_registry.password`},
		{status: 403, code: 40301, msg: "User is denied operation Read on Subject", user: user, auth: true,
			wantErr: `look up schema 7: schema registry REGISTRY answered 403 Forbidden to user "ingestd-reader": User is denied operation Read on Subject (error code 40301); grant that user read access to the registry's schemas, or set other credentials in schema_registry.username and schema_registry.password`},
		{status: 429, code: 42901, msg: "Too many requests", user: user, transient: true,
			wantErr: `look up schema 7: transient failure: Too many requests`},
		{status: 500, code: 50001, msg: "Error in the backend data store", user: user, transient: true,
			wantErr: `look up schema 7: transient failure: Error in the backend data store`},
	} {
		t.Run(http.StatusText(c.status)+"/"+c.user, func(t *testing.T) {
			srv, n := statusRegistry(t, c.status, c.code, c.msg)
			opts := []sr.ClientOpt{sr.URLs(srv.URL)}
			if c.user != "" {
				opts = append(opts, sr.BasicAuth(c.user, secret))
			}
			cl, err := sr.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			r := NewRegistry(cl, WithAuthInfo(srv.URL, c.user))
			_, err = r.Schema(context.Background(), 7)
			if err == nil {
				t.Fatal("lookup succeeded")
			}
			want := strings.ReplaceAll(c.wantErr, "REGISTRY", srv.URL)
			if err.Error() != want {
				t.Errorf("error\n got %q\nwant %q", err.Error(), want)
			}
			if got := ReasonOf(err); got != c.reason {
				t.Errorf("reason %q, want %q", got, c.reason)
			}
			if got := errors.Is(err, ErrRegistryAuth); got != c.auth {
				t.Errorf("errors.Is(ErrRegistryAuth) = %v, want %v", got, c.auth)
			}
			if got := errors.Is(err, ErrTransient); got != c.transient {
				t.Errorf("errors.Is(ErrTransient) = %v, want %v", got, c.transient)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the password: %v", err)
			}
			_, err2 := r.Schema(context.Background(), 7)
			if err2 == nil || err2.Error() != err.Error() {
				t.Errorf("second lookup: %v", err2)
			}
			wantReq := int32(2)
			if c.cached {
				wantReq = 1
			}
			if got := n.Load(); got != wantReq {
				t.Errorf("%d requests for two lookups, want %d", got, wantReq)
			}
		})
	}
}

// TestRegistryAuthErrorRedactsURLPassword: credentials written into the registry URL
// itself are not shown either.
func TestRegistryAuthErrorRedactsURLPassword(t *testing.T) {
	srv, _ := statusRegistry(t, 401, 40101, "Unauthorized")
	u := strings.Replace(srv.URL, "http://", "http://bob:hunter2@", 1)
	cl, err := sr.NewClient(sr.URLs(u))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewRegistry(cl, WithAuthInfo(u, "")).Schema(context.Background(), 3)
	if !errors.Is(err, ErrRegistryAuth) || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "http://bob:xxxxx@") {
		t.Fatalf("auth error with credentials in the URL: %v", err)
	}
}

// TestRegistryTransientErrorRedactsURLPassword: the registry client quotes the request URL
// in transport errors; a password in the configured URL is shown as xxxxx, and the error
// stays transient.
func TestRegistryTransientErrorRedactsURLPassword(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := strings.Replace(srv.URL, "http://", "http://bob:hunter2@", 1)
	srv.Close() // connection refused
	cl, err := sr.NewClient(sr.URLs(u))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewRegistry(cl, WithAuthInfo(u, "")).Schema(context.Background(), 3)
	want := `look up schema 3: transient failure: unable to GET "` + strings.Replace(u, "hunter2", "xxxxx", 1) + `/schemas/ids/3": `
	if !errors.Is(err, ErrTransient) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("refused with credentials in the URL:\n got %v\nwant %s…", err, want)
	}
}
