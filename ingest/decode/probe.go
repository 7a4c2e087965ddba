package decode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// ErrRegistryURL is matched (errors.Is) by a *RegistryURLError.
var ErrRegistryURL = errors.New("not a schema registry API")

// RegistryURLError says that schema_registry.url does not lead to a Confluent-compatible
// schema registry API: GET <url>/schemas/types and GET <url>/subjects both answered 404,
// or one answered something other than a JSON list (an HTML page, a JSON object). With
// such a URL every schema lookup would answer 404 too, which looks exactly like an unknown
// schema id: every record would be dead-lettered as schema_not_found.
type RegistryURLError struct {
	URL    string // schema_registry.url, any password in it redacted
	Answer string // what the registry answered, e.g. `GET /schemas/types: 404 Not Found ("…")`
	// Suggest is a URL under URL that answers as a registry (Apicurio's /apis/ccompat/v7),
	// "" when none was found.
	Suggest string
}

func (e *RegistryURLError) Error() string {
	fix := "set schema_registry.url to the base of the Confluent-compatible API: the root for Confluent Schema Registry, Karapace and Redpanda (http://host:8081), /apis/ccompat/v7 for Apicurio Registry (http://host:8080/apis/ccompat/v7)"
	if e.Suggest != "" {
		fix = fmt.Sprintf("set schema_registry.url to %s, where this server answers as a Confluent-compatible registry", e.Suggest)
	}
	return fmt.Sprintf("schema registry %s is not a Confluent-compatible schema registry API: %s (fix: %s)", e.URL, e.Answer, fix)
}

// Is makes errors.Is(err, ErrRegistryURL) hold.
func (e *RegistryURLError) Is(target error) bool { return target == ErrRegistryURL }

// probePaths are asked in order: the schema types (cheap; Confluent 5.5+, Apicurio,
// Karapace, Redpanda), then the subjects (every registry version) when the first is 404.
var probePaths = []string{"/schemas/types", "/subjects"}

// ccompatSuffix is where Apicurio Registry serves its Confluent-compatible API.
const ccompatSuffix = "/apis/ccompat/v7"

// Probe checks, before any record is decoded, that the registry URL is a
// Confluent-compatible schema registry API, so that a wrong base URL is not mistaken for
// unknown schema ids. Errors: a *RegistryURLError (errors.Is ErrRegistryURL) when both
// probe paths answer 404 or a path answers 2xx with something other than a JSON list; a
// *RegistryAuthError (errors.Is ErrRegistryAuth) for 401/403; an error wrapping
// ErrTransient when the registry cannot be reached or answers 5xx (the caller may go on:
// lookups retry such failures).
func (r *Registry) Probe(ctx context.Context) error {
	answer, ok, err := r.probeAt(ctx, "")
	if err != nil || ok {
		return err
	}
	e := &RegistryURLError{URL: redactURL(r.authURL), Answer: answer}
	if e.URL == "(unparseable registry URL)" || r.authURL == "" {
		e.URL = "(the configured URL)"
	}
	// Apicurio's root answers 404 on the Confluent paths; its ccompat API is one level down.
	if r.authURL != "" && !strings.Contains(r.authURL, "/apis/ccompat") {
		if _, ok, err := r.probeAt(ctx, ccompatSuffix); err == nil && ok {
			e.Suggest = redactURL(strings.TrimRight(r.authURL, "/") + ccompatSuffix)
		}
	}
	return e
}

// probeAt asks the probePaths under prefix (a path below the URL) and reports whether one answered as a registry (ok), or
// else what they answered; err is set for auth and transient failures only.
func (r *Registry) probeAt(ctx context.Context, prefix string) (answer string, ok bool, err error) {
	var answers []string
	for _, path := range probePaths {
		var body []byte
		err := r.client.Do(ctx, http.MethodGet, prefix+path, nil, &body)
		var re *sr.ResponseError
		switch {
		case errors.As(err, &re) && re.StatusCode == http.StatusNotFound:
			answers = append(answers, fmt.Sprintf("GET %s answered 404 Not Found (%q)", path, registryMessage(re)))
			continue
		case errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden):
			return "", false, r.classify("probe the schema registry", err)
		case err != nil:
			return "", false, fmt.Errorf("probe the schema registry: %w: %w", ErrTransient, r.redact(err))
		}
		var list []json.RawMessage
		if json.Unmarshal(body, &list) == nil {
			return "", true, nil
		}
		return fmt.Sprintf("GET %s answered 200 with %s", path, describeBody(body)), false, nil
	}
	return strings.Join(answers, "; "), false, nil
}

// describeBody names what a non-registry answer is: an HTML page, or its first bytes.
func describeBody(b []byte) string {
	t := bytes.TrimSpace(b)
	low := strings.ToLower(string(t[:min(len(t), 64)]))
	switch {
	case strings.HasPrefix(low, "<!doctype html") || strings.HasPrefix(low, "<html"):
		return "an HTML page (a web UI or a proxy, not the registry's API)"
	case len(t) == 0:
		return "an empty body"
	}
	if len(t) > 80 {
		t = append(t[:80:80], "…"...)
	}
	return fmt.Sprintf("%q, not a JSON list", t)
}
