package decode

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// TestRegistryProbe tells a wrong registry base URL from a working one: the answers are
// those of Apicurio Registry 3 (its root answers 404 with a RESTEasy JSON body, its
// ccompat root an HTML page), a Confluent registry without /schemas/types, a proxy's HTML
// page, a JSON object, 401, and a registry that cannot be reached.
func TestRegistryProbe(t *testing.T) {
	apicurio := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apis/ccompat/v7/schemas/types":
			_, _ = w.Write([]byte(`["JSON","PROTOBUF","AVRO"]`))
		case "/apis/ccompat/v7/", "/apis/ccompat/v7":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<!DOCTYPE html>\n<html><head></head></html>"))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"detail":"NotFoundException: RESTEASY003210: Could not find resource for full path","title":"RESTEASY003210","status":404}`))
		}
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc
		path    string // appended to the server URL
		want    string // "" for no error; else the error's text after the URL
		is      error
	}{
		{"apicurio ccompat", apicurio, "/apis/ccompat/v7", "", nil},
		{"apicurio root", apicurio, "", ` is not a Confluent-compatible schema registry API: GET /schemas/types answered 404 Not Found ("{\"detail\":\"NotFoundException: RESTEASY003210: Could not find resource for full path\",\"title\":\"RESTEASY003210\",\"status\":404}"); GET /subjects answered 404 Not Found ("{\"detail\":\"NotFoundException: RESTEASY003210: Could not find resource for full path\",\"title\":\"RESTEASY003210\",\"status\":404}") (fix: set schema_registry.url to SRV/apis/ccompat/v7, where this server answers as a Confluent-compatible registry)`, ErrRegistryURL},
		{"old confluent without schema types", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/subjects" {
				_, _ = w.Write([]byte(`["orders-value"]`))
				return
			}
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error_code":404,"message":"HTTP 404 Not Found"}`))
		}, "", "", nil},
		{"html page", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("<html><body>Welcome to nginx!</body></html>"))
		}, "/registry", ` is not a Confluent-compatible schema registry API: GET /schemas/types answered 200 with an HTML page (a web UI or a proxy, not the registry's API) (fix: set schema_registry.url to the base of the Confluent-compatible API: the root for Confluent Schema Registry, Karapace and Redpanda (http://host:8081), /apis/ccompat/v7 for Apicurio Registry (http://host:8080/apis/ccompat/v7))`, ErrRegistryURL},
		{"json object", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"status":"UP"}`))
		}, "", ` is not a Confluent-compatible schema registry API: GET /schemas/types answered 200 with "{\"status\":\"UP\"}", not a JSON list (fix: set schema_registry.url to the base of the Confluent-compatible API: the root for Confluent Schema Registry, Karapace and Redpanda (http://host:8081), /apis/ccompat/v7 for Apicurio Registry (http://host:8080/apis/ccompat/v7))`, ErrRegistryURL},
		{"unauthorized", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error_code":401,"message":"Unauthorized"}`))
		}, "", "", ErrRegistryAuth},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}, "", "", ErrTransient},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			u := srv.URL + c.path
			cl, err := sr.NewClient(sr.URLs(u))
			if err != nil {
				t.Fatal(err)
			}
			err = NewRegistry(cl, WithAuthInfo(u, "")).Probe(context.Background())
			switch {
			case c.is == nil && err != nil:
				t.Fatalf("Probe: %v, want nil", err)
			case c.is != nil && !errors.Is(err, c.is):
				t.Fatalf("Probe: %v, want errors.Is %v", err, c.is)
			case c.want != "":
				want := "schema registry " + u + strings.ReplaceAll(c.want, "SRV", srv.URL)
				if err.Error() != want {
					t.Fatalf("Probe:\n  %v\nwant\n  %s", err, want)
				}
			}
		})
	}
}
