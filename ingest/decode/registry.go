package decode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// WriterSchema is a parsed writer schema and its Delta conversion. For a format other
// than Avro, Avro is the schema derived from the format's own (docs/formats.md): records
// are transcoded into its binary encoding before they are decoded (CompileRecord).
type WriterSchema struct {
	// ID is the registry schema id (0 for a static schema file).
	ID int
	// Format is the schema's format: "" or FormatAvro, FormatProtobuf, FormatJSONSchema,
	// FormatJSON, FormatConnectJSON (FormatName).
	Format string
	// Avro is the parsed schema, references resolved, parsed into a cache private to
	// this id; for another format, the Avro schema derived from it.
	Avro avro.Schema
	// Delta is ToDelta(Avro); nil when DeltaErr is set.
	Delta *deltalog.StructType
	// DeltaErr is ToDelta's error (an *Error, reason ReasonUnsupportedType) when the schema
	// cannot be represented in Delta: every record of this id is then incompatible.
	DeltaErr error

	key int // Key: 0 for ID
	// optional: a Kafka Connect schema's top level is optional (ConnectNull).
	optional bool
	body     bodyTranscoder // nil for Avro
	proto    *protoFile     // a Protobuf file's messages (Message); nil otherwise
}

// ParseWriterSchema parses an Avro schema text into a fresh schema cache (never hamba's
// global one), after the texts of the named types it references (leaves first), and
// converts it with ToDelta (a conversion failure is recorded in DeltaErr, not returned).
// A parse failure is an *Error with reason ReasonSchemaParseError.
func ParseWriterSchema(id int, text string, refs ...string) (*WriterSchema, error) {
	cache := &avro.SchemaCache{}
	for i, r := range refs {
		if _, err := parseAvro(r, cache); err != nil {
			return nil, newError(ReasonSchemaParseError, "", fmt.Errorf("parse schema %d reference %d: %w", id, i, err))
		}
	}
	return parseInto(id, text, cache)
}

func parseInto(id int, text string, cache *avro.SchemaCache) (*WriterSchema, error) {
	if line, col, err := jsonSyntax(text); err != nil {
		return nil, newError(ReasonSchemaParseError, "", fmt.Errorf("parse schema %d: not valid JSON at line %d, column %d: %w", id, line, col, err))
	}
	s, err := parseAvro(text, cache)
	if err != nil {
		return nil, newError(ReasonSchemaParseError, "", fmt.Errorf("parse schema %d: %w", id, err))
	}
	ws := &WriterSchema{ID: id, Avro: s}
	ws.Delta, ws.DeltaErr = ToDelta(s)
	return ws, nil
}

// parseAvro parses one schema text into cache. It is the only place this package parses
// Avro, and it turns hamba/avro's name validation off before the first parse: field names
// are opaque to ingestd (docs/schema-policies.md, "Column names"), and registries that do
// not validate names hand out schemas with fields such as "order id", which a table holds
// under column mapping. hamba/avro (v2.31) rejects every name outside
// [A-Za-z_][A-Za-z0-9_]* unless its process-wide avro.SkipNameValidation is set, and has no
// per-parse or per-Config option for it; names must then only be non-empty. Every parse
// goes through skipNameValidation.Do, so the switch is written once and before any parse of
// this package reads it.
func parseAvro(text string, cache *avro.SchemaCache) (avro.Schema, error) {
	skipNameValidation.Do(func() { avro.SkipNameValidation = true })
	return avro.ParseWithCache(text, "", cache)
}

// skipNameValidation guards the one write of avro.SkipNameValidation (parseAvro).
var skipNameValidation sync.Once

// jsonSyntax reports whether text is one valid JSON value and, when it is not, the 1-based
// line and column (in bytes) of the offending byte. hamba/avro's own errors on bad JSON
// quote the whole schema without a position.
func jsonSyntax(text string) (line, col int, err error) {
	dec := json.NewDecoder(strings.NewReader(text))
	var v json.RawMessage
	err = dec.Decode(&v)
	if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = fmt.Errorf("unexpected data after the schema at offset %d", dec.InputOffset())
		}
	}
	if err == nil {
		return 0, 0, nil
	}
	off := len(text)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = int(se.Offset) - 1
	} else if !errors.Is(err, io.ErrUnexpectedEOF) && err.Error() != "EOF" {
		off = int(dec.InputOffset())
	}
	off = max(0, min(off, len(text)))
	line = 1 + strings.Count(text[:off], "\n")
	col = off - strings.LastIndexByte(text[:off], '\n')
	return line, col, err
}

// StaticSchema loads the writer schema for raw (unframed) Avro from .avsc files: the
// files before the last define named types the last one references. Its ID is 0.
// Errors: file read errors as is; an *Error with ReasonSchemaParseError for bad Avro.
func StaticSchema(avscPath string, referencedPaths ...string) (*WriterSchema, error) {
	paths := append(append([]string(nil), referencedPaths...), avscPath)
	texts := make([]string, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read schema file: %w", err)
		}
		if line, col, err := jsonSyntax(string(b)); err != nil {
			return nil, newError(ReasonSchemaParseError, "", fmt.Errorf("%s:%d:%d: schema is not valid JSON: %w", p, line, col, err))
		}
		texts[i] = string(b)
	}
	ws, err := ParseWriterSchema(0, texts[len(texts)-1], texts[:len(texts)-1]...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", avscPath, err)
	}
	return ws, nil
}

// DefaultNegativeTTL is how long a "schema not found" answer is remembered.
const DefaultNegativeTTL = 30 * time.Second

// maxReferenceDepth bounds schema-reference chains (a cycle guard).
const maxReferenceDepth = 32

// Registry resolves schema ids to writer schemas through a Confluent-compatible schema
// registry. Parsed schemas are cached per id for the life of the process (a schema id
// never changes meaning), concurrent misses for one id make one request (singleflight),
// "not found" answers (HTTP 404 or registry error 40403) and other 4xx answers
// (schema_unreadable) are remembered for a TTL, 401/403 are ErrRegistryAuth (never
// cached), and every other failure is transient and never cached. It is safe for
// concurrent use.
type Registry struct {
	client *sr.Client
	negTTL time.Duration
	now    func() time.Time

	authURL, authUser string // named in auth errors (WithAuthInfo)

	pos sync.Map // int → *WriterSchema

	mu       sync.Mutex
	neg      map[int]negEntry
	inflight map[int]*call

	hits, misses, negHits, fetches, transient atomic.Int64
	joined                                    atomic.Int64 // lookups that waited for another's fetch
}

type negEntry struct {
	err   error
	until time.Time // zero: forever (a schema that cannot be parsed)
}

type call struct {
	done chan struct{}
	ws   *WriterSchema
	err  error
}

// RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// WithNegativeTTL sets how long "schema not found" is cached (default DefaultNegativeTTL;
// 0 disables the negative cache).
func WithNegativeTTL(d time.Duration) RegistryOption {
	return func(r *Registry) { r.negTTL = d }
}

// WithAuthInfo names the registry URL and the username of the credentials in use (empty:
// none) in ErrRegistryAuth errors. The password is never given to the Registry, and a
// password written into the URL is shown as xxxxx. Without it, errors name the request URL.
func WithAuthInfo(registryURL, username string) RegistryOption {
	return func(r *Registry) { r.authURL, r.authUser = registryURL, username }
}

// NewRegistry returns a Registry using client, which does no caching of its own.
func NewRegistry(client *sr.Client, opts ...RegistryOption) *Registry {
	r := &Registry{
		client:   client,
		negTTL:   DefaultNegativeTTL,
		now:      time.Now,
		neg:      make(map[int]negEntry),
		inflight: make(map[int]*call),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// RegistryStats are cumulative counters of a Registry.
type RegistryStats struct {
	Hits         int64 // served from the positive cache
	Misses       int64 // lookups that were not in either cache
	NegativeHits int64 // served from the negative cache
	Fetches      int64 // schema lookups sent to the registry (one per singleflight)
	Transient    int64 // fetches that failed transiently
}

// Stats returns the counters so far.
func (r *Registry) Stats() RegistryStats {
	return RegistryStats{Hits: r.hits.Load(), Misses: r.misses.Load(), NegativeHits: r.negHits.Load(), Fetches: r.fetches.Load(), Transient: r.transient.Load()}
}

// Schema returns the writer schema for id. Errors: an *Error with ReasonSchemaNotFound
// (the registry does not know id, or a schema it references; ids ≤ 0 never exist),
// ReasonSchemaUnreadable (the registry answered another 4xx, e.g. 400 when it cannot
// parse its own stored schema; the message is the registry's) or ReasonSchemaParseError
// (the text is not a usable Avro, Protobuf or JSON schema, or of another schema type),
// all permanent for that id; a
// *RegistryAuthError (errors.Is ErrRegistryAuth: 401/403, fatal for the caller);
// otherwise an error wrapping ErrTransient (registry 5xx, 408, 429, timeouts, refused
// connections, unparseable replies, ctx cancellation) which the caller retries.
// A schema that parses but cannot be represented in Delta is returned with DeltaErr set.
func (r *Registry) Schema(ctx context.Context, id int) (*WriterSchema, error) {
	if v, ok := r.pos.Load(id); ok {
		r.hits.Add(1)
		return v.(*WriterSchema), nil
	}
	if id <= 0 {
		return nil, newError(ReasonSchemaNotFound, "", fmt.Errorf("look up schema %d: schema ids start at 1", id))
	}
	r.mu.Lock()
	if v, ok := r.pos.Load(id); ok { // filled while we took the lock
		r.mu.Unlock()
		r.hits.Add(1)
		return v.(*WriterSchema), nil
	}
	if e, ok := r.neg[id]; ok {
		if e.until.IsZero() || r.now().Before(e.until) {
			r.mu.Unlock()
			r.negHits.Add(1)
			return nil, e.err
		}
		delete(r.neg, id)
	}
	c, ok := r.inflight[id]
	if !ok {
		r.misses.Add(1)
		c = &call{done: make(chan struct{})}
		r.inflight[id] = c
		r.mu.Unlock()
		r.fetch(ctx, id, c)
	} else {
		r.joined.Add(1)
		r.mu.Unlock()
	}
	select {
	case <-c.done:
		return c.ws, c.err
	case <-ctx.Done():
		return nil, fmt.Errorf("look up schema %d: %w: %w", id, ErrTransient, ctx.Err())
	}
}

// LatestID returns the schema id of the latest version of subject (GET
// /subjects/{subject}/versions/latest), uncached: it is asked rarely (the key schema of a
// table being created, TopicNameStrategy's <topic>-key). Errors are Schema's: an *Error
// with ReasonSchemaNotFound for an unknown subject, a *RegistryAuthError, or an error
// wrapping ErrTransient.
func (r *Registry) LatestID(ctx context.Context, subject string) (int, error) {
	s, err := r.client.SchemaByVersion(ctx, subject, -1)
	if err != nil {
		return 0, r.classify("look up the latest schema of subject "+subject, err)
	}
	return s.ID, nil
}

// fetch runs one registry lookup for id and publishes its result.
func (r *Registry) fetch(ctx context.Context, id int, c *call) {
	r.fetches.Add(1)
	ws, err := r.load(ctx, id)
	r.mu.Lock()
	switch {
	case err == nil:
		r.pos.Store(id, ws)
	case errors.Is(err, ErrTransient):
		r.transient.Add(1)
	case errors.Is(err, ErrRegistryAuth): // not cached: the pipeline fails on it
	case ReasonOf(err) == ReasonSchemaNotFound || ReasonOf(err) == ReasonSchemaUnreadable:
		// TTL: the registry may learn the id, or be fixed to serve it
		if r.negTTL > 0 {
			r.neg[id] = negEntry{err: err, until: r.now().Add(r.negTTL)}
		}
	default: // schema_parse_error: the text behind an id never changes
		r.neg[id] = negEntry{err: err}
	}
	delete(r.inflight, id)
	c.ws, c.err = ws, err
	close(c.done)
	r.mu.Unlock()
}

func (r *Registry) load(ctx context.Context, id int) (*WriterSchema, error) {
	s, err := r.client.SchemaByID(ctx, id)
	if err != nil {
		return nil, r.classify(fmt.Sprintf("look up schema %d", id), err)
	}
	switch s.Type {
	case sr.TypeAvro:
	case sr.TypeProtobuf:
		return r.loadProtobuf(ctx, id, s)
	case sr.TypeJSON:
		return r.loadJSONSchema(ctx, id, s)
	default:
		return nil, newError(ReasonSchemaParseError, "", fmt.Errorf("look up schema %d: schema type %s, want AVRO, PROTOBUF or JSON", id, s.Type))
	}
	cache := &avro.SchemaCache{}
	seen := make(map[string]bool)
	if err := r.resolveRefs(ctx, id, s.References, cache, seen, 0); err != nil {
		return nil, err
	}
	return parseInto(id, s.Schema, cache)
}

// resolveRefs parses every referenced schema into cache, depth first, leaves first.
func (r *Registry) resolveRefs(ctx context.Context, id int, refs []sr.SchemaReference, cache *avro.SchemaCache, seen map[string]bool, depth int) error {
	if depth > maxReferenceDepth {
		return newError(ReasonSchemaParseError, "", fmt.Errorf("look up schema %d: references nested deeper than %d", id, maxReferenceDepth))
	}
	for _, ref := range refs {
		key := ref.Subject + "\x00" + strconv.Itoa(ref.Version)
		if seen[key] {
			continue
		}
		seen[key] = true
		rs, err := r.client.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return r.classify(fmt.Sprintf("look up schema %d reference %s (subject %q version %d)", id, ref.Name, ref.Subject, ref.Version), err)
		}
		if rs.Type != sr.TypeAvro {
			return newError(ReasonSchemaParseError, "", fmt.Errorf("look up schema %d reference %s: schema type %s, want AVRO", id, ref.Name, rs.Type))
		}
		if err := r.resolveRefs(ctx, id, rs.References, cache, seen, depth+1); err != nil {
			return err
		}
		if _, err := parseAvro(rs.Schema.Schema, cache); err != nil {
			return newError(ReasonSchemaParseError, "", fmt.Errorf("parse schema %d reference %s: %w", id, ref.Name, err))
		}
	}
	return nil
}

// classify maps a registry client error, per schema id: HTTP 404 or a 404xx registry code
// (40401 subject, 40402 version, 40403 schema not found) is schema_not_found; 401 and 403
// are a *RegistryAuthError; 408 and 429 are transient; any other 4xx is schema_unreadable
// with the registry's message; anything else (5xx, 3xx, transport errors) is transient.
func (r *Registry) classify(op string, err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch s := re.StatusCode; {
		case s == http.StatusNotFound || re.ErrorCode == 40401 || re.ErrorCode == 40402 || re.ErrorCode == 40403:
			return newError(ReasonSchemaNotFound, "", fmt.Errorf("%s: %w", op, err))
		case s == http.StatusUnauthorized || s == http.StatusForbidden:
			u := r.authURL
			if u == "" {
				u = re.URL
			}
			return fmt.Errorf("%s: %w", op, &RegistryAuthError{URL: redactURL(u), Username: r.authUser, StatusCode: s, Message: registryMessage(re)})
		case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests:
		case s >= 400 && s < 500:
			return newError(ReasonSchemaUnreadable, "", fmt.Errorf("%s: schema registry answered %d %s: %s", op, s, http.StatusText(s), registryMessage(re)))
		}
	}
	return fmt.Errorf("%s: %w: %w", op, ErrTransient, r.redact(err))
}

// redact hides a password written into the registry URL (set with WithAuthInfo) in err's
// text: the registry client quotes the request URL, credentials included, in transport
// errors ("unable to GET \"http://user:pass@host/...\": ..."). The chain is kept.
func (r *Registry) redact(err error) error {
	u, perr := url.Parse(r.authURL)
	if perr != nil || u.User == nil {
		return err
	}
	if _, has := u.User.Password(); !has {
		return err
	}
	raw := u.User.String() + "@"
	msg := err.Error()
	if !strings.Contains(msg, raw) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(msg, raw, url.User(u.User.Username()).String()+":xxxxx@"), err: err}
}

// redactedError is err with another text.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// RegistryAuthError is a 401 or 403 answer of the registry. It names the registry and
// the username in use, never the password; errors.Is(err, ErrRegistryAuth) holds.
type RegistryAuthError struct {
	URL        string // the registry, any password in it redacted
	Username   string // empty: no credentials configured
	StatusCode int    // 401 or 403
	Message    string // the registry's message (and error code)
}

func (e *RegistryAuthError) Error() string {
	who, fix := fmt.Sprintf("to user %q", e.Username), "check schema_registry.username and schema_registry.password"
	if e.Username == "" {
		who, fix = "without credentials", "set schema_registry.username and schema_registry.password"
	}
	if e.StatusCode == http.StatusForbidden && e.Username != "" {
		fix = "grant that user read access to the registry's schemas, or set other credentials in schema_registry.username and schema_registry.password"
	}
	return fmt.Sprintf("schema registry %s answered %d %s %s: %s; %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode), who, e.Message, fix)
}

// Is makes errors.Is(err, ErrRegistryAuth) hold.
func (e *RegistryAuthError) Is(target error) bool { return target == ErrRegistryAuth }

// maxRegistryMessage bounds the registry text carried into errors and dead-letter
// headers (an HTML error page from a proxy can be long).
const maxRegistryMessage = 512

// registryMessage is the registry's error message (or raw body), at most
// maxRegistryMessage bytes cut at a UTF-8 boundary, with its error code when it sent one.
func registryMessage(re *sr.ResponseError) string {
	m := strings.TrimSpace(re.Message)
	if m == "" {
		m = strings.TrimSpace(string(re.Raw))
	}
	if m == "" {
		m = "no message"
	}
	if len(m) > maxRegistryMessage {
		cut := maxRegistryMessage
		for cut > 0 && !utf8.RuneStart(m[cut]) {
			cut--
		}
		m = m[:cut] + "…"
	}
	if re.ErrorCode != 0 {
		m += fmt.Sprintf(" (error code %d)", re.ErrorCode)
	}
	return m
}

// redactURL shows a URL with any password in it replaced by xxxxx.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable registry URL)"
	}
	return u.Redacted()
}
