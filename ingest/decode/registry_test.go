package decode

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// countingRegistry is an srfake registry that counts requests per path and can answer
// with a scripted failure instead.
type countingRegistry struct {
	*srfake.Registry
	mu    sync.Mutex
	count map[string]int
	fail  atomic.Value // func(http.ResponseWriter, *http.Request) bool
}

func newCountingRegistry(t *testing.T) (*countingRegistry, *sr.Client) {
	t.Helper()
	c := &countingRegistry{Registry: srfake.New(), count: make(map[string]int)}
	t.Cleanup(c.Close)
	c.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		c.mu.Lock()
		c.count[r.URL.Path]++
		c.mu.Unlock()
		if f, ok := c.fail.Load().(func(http.ResponseWriter, *http.Request) bool); ok && f != nil {
			return f(w, r)
		}
		return false
	})
	cl, err := sr.NewClient(sr.URLs(c.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

func (c *countingRegistry) requests(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[path]
}

const customerV1 = `{"type":"record","name":"Customer","namespace":"com.x","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`

func TestRegistryPositiveCacheAndSingleflight(t *testing.T) {
	reg, cl := newCountingRegistry(t)
	reg.SeedSchema("customers-value", 1, 201, sr.Schema{Schema: customerV1})
	release := make(chan struct{})
	reg.fail.Store(func(w http.ResponseWriter, r *http.Request) bool {
		<-release // hold the first request so that every caller piles onto it
		return false
	})
	r := NewRegistry(cl)
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make([]*WriterSchema, 16)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, err := r.Schema(ctx, 201)
			if err != nil {
				t.Error(err)
			}
			results[i] = ws
		}()
	}
	// Every caller but the one whose request is held joins that request.
	for deadline := time.Now().Add(10 * time.Second); r.joined.Load() < int64(len(results)-1); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d lookups joined the request in flight", r.joined.Load(), len(results)-1)
		}
	}
	close(release)
	wg.Wait()
	for i := 0; i < 5; i++ {
		if _, err := r.Schema(ctx, 201); err != nil {
			t.Fatal(err)
		}
	}
	if n := reg.requests("/schemas/ids/201"); n != 1 {
		t.Fatalf("registry saw %d requests for id 201, want 1", n)
	}
	for _, ws := range results {
		if ws != results[0] || ws.ID != 201 || ws.Delta == nil || ws.Delta.String() != "struct<id:long,name:string>" {
			t.Fatalf("result %+v", ws)
		}
	}
	if st := r.Stats(); st.Fetches != 1 || st.Misses != 1 || st.Hits != 5 {
		t.Fatalf("stats %+v, want 1 fetch, 1 miss and 5 hits (the 15 others shared the fetch)", st)
	}
}

func TestRegistryNotFoundIsCachedWithTTL(t *testing.T) {
	reg, cl := newCountingRegistry(t)
	r := NewRegistry(cl, WithNegativeTTL(30*time.Second))
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_, err := r.Schema(ctx, 999)
		if ReasonOf(err) != ReasonSchemaNotFound || errors.Is(err, ErrTransient) {
			t.Fatalf("lookup %d: %v, want schema_not_found", i, err)
		}
	}
	if n := reg.requests("/schemas/ids/999"); n != 1 {
		t.Fatalf("%d requests within the TTL, want 1", n)
	}
	now = now.Add(31 * time.Second)
	reg.SeedSchema("late-value", 1, 999, sr.Schema{Schema: customerV1})
	if _, err := r.Schema(ctx, 999); err != nil {
		t.Fatalf("after TTL: %v", err)
	}
	if n := reg.requests("/schemas/ids/999"); n != 2 {
		t.Fatalf("%d requests after the TTL, want 2", n)
	}
	// Ids that cannot exist (a frame with id 0) are refused without a request.
	if _, err := r.Schema(ctx, 0); ReasonOf(err) != ReasonSchemaNotFound {
		t.Fatalf("id 0: %v", err)
	}
	if n := reg.requests("/schemas/ids/0"); n != 0 {
		t.Fatalf("id 0 made %d requests", n)
	}
}

func TestRegistryTransientFailuresAreNotCached(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(w http.ResponseWriter, r *http.Request) bool
	}{
		{"503", func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]any{"error_code": 50301, "message": "unavailable"})
			return true
		}},
		{"500 empty", func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(http.StatusInternalServerError)
			return true
		}},
		{"200 html from a proxy", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><body>maintenance</body></html>"))
			return true
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg, cl := newCountingRegistry(t)
			reg.SeedSchema("customers-value", 1, 102, sr.Schema{Schema: customerV1})
			reg.fail.Store(c.fail)
			r := NewRegistry(cl)
			ctx := context.Background()
			for i := 0; i < 3; i++ {
				_, err := r.Schema(ctx, 102)
				if !errors.Is(err, ErrTransient) || ReasonOf(err) != "" {
					t.Fatalf("outage lookup %d: %v, want transient", i, err)
				}
			}
			if n := reg.requests("/schemas/ids/102"); n != 3 {
				t.Fatalf("%d requests during the outage, want 3 (no caching)", n)
			}
			reg.fail.Store(func(http.ResponseWriter, *http.Request) bool { return false })
			if ws, err := r.Schema(ctx, 102); err != nil || ws.ID != 102 {
				t.Fatalf("after recovery: %v", err)
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		cl, _ := sr.NewClient(sr.URLs(url))
		_, err := NewRegistry(cl).Schema(context.Background(), 1)
		if !errors.Is(err, ErrTransient) {
			t.Fatalf("refused: %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}))
		defer srv.Close()
		cl, _ := sr.NewClient(sr.URLs(srv.URL))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := NewRegistry(cl).Schema(ctx, 1)
		if !errors.Is(err, ErrTransient) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timeout: %v", err)
		}
	})
}

func TestRegistryReferencesAndPrivateCaches(t *testing.T) {
	reg, cl := newCountingRegistry(t)
	reg.SeedSchema("money-value", 1, 10, sr.Schema{Schema: `{"type":"fixed","name":"Money","namespace":"com.x","size":8,"logicalType":"decimal","precision":18,"scale":2}`})
	reg.SeedSchema("address-value", 1, 11, sr.Schema{Schema: `{"type":"record","name":"Address","namespace":"com.x","fields":[{"name":"city","type":"string"},{"name":"fee","type":"com.x.Money"}]}`,
		References: []sr.SchemaReference{{Name: "com.x.Money", Subject: "money-value", Version: 1}}})
	reg.SeedSchema("orders-value", 1, 12, sr.Schema{Schema: `{"type":"record","name":"Order","namespace":"com.x","fields":[{"name":"id","type":"long"},{"name":"ship","type":"com.x.Address"},{"name":"total","type":"com.x.Money"}]}`,
		References: []sr.SchemaReference{{Name: "com.x.Address", Subject: "address-value", Version: 1}, {Name: "com.x.Money", Subject: "money-value", Version: 1}}})
	// A different schema with the same full name as a referenced type must not leak in.
	reg.SeedSchema("other-value", 1, 13, sr.Schema{Schema: `{"type":"record","name":"Address","namespace":"com.x","fields":[{"name":"zip","type":"int"}]}`})
	r := NewRegistry(cl)
	ctx := context.Background()
	if _, err := r.Schema(ctx, 13); err != nil {
		t.Fatal(err)
	}
	ws, err := r.Schema(ctx, 12)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ws.Delta.String(), "struct<id:long,ship:struct<city:string,fee:decimal(18,2)>,total:decimal(18,2)>"; got != want {
		t.Fatalf("order schema %s, want %s", got, want)
	}
	if n := reg.requests("/subjects/money-value/versions/1"); n != 1 {
		t.Fatalf("money fetched %d times, want 1", n)
	}
	other, _ := r.Schema(ctx, 13)
	if other.Delta.String() != "struct<zip:integer>" {
		t.Fatalf("id 13 changed by a later parse: %s", other.Delta)
	}

	// A reference naming a type its schema does not define cannot be parsed: permanent.
	reg.SeedSchema("broken-value", 1, 14, sr.Schema{Schema: `{"type":"record","name":"B","fields":[{"name":"a","type":"com.y.Gone"}]}`,
		References: []sr.SchemaReference{{Name: "com.y.Gone", Subject: "money-value", Version: 1}}})
	if _, err := r.Schema(ctx, 14); ReasonOf(err) != ReasonSchemaParseError {
		t.Fatalf("unresolvable named type: %v", err)
	}
	// A reference the registry no longer has (40402) makes the id not found.
	reg.SeedSchema("orders2-value", 1, 15, sr.Schema{Schema: `{"type":"record","name":"O2","namespace":"com.x","fields":[{"name":"ship","type":"com.x.Address"}]}`,
		References: []sr.SchemaReference{{Name: "com.x.Address", Subject: "address-value", Version: 1}}})
	reg.fail.Store(func(w http.ResponseWriter, req *http.Request) bool {
		if req.URL.Path != "/subjects/address-value/versions/1" {
			return false
		}
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"error_code": 40402, "message": "Version not found"})
		return true
	})
	if _, err := r.Schema(ctx, 15); ReasonOf(err) != ReasonSchemaNotFound {
		t.Fatalf("missing reference: %v", err)
	}
}

func TestRegistryProtobufSchemaTypeFromAnswer(t *testing.T) {
	reg, cl := newCountingRegistry(t)
	reg.SeedSchema("p-value", 1, 30, sr.Schema{Schema: `syntax = "proto3"; message M { int64 a = 1; }`, Type: sr.TypeProtobuf})
	reg.SeedSchema("bad-value", 1, 31, sr.Schema{Schema: `syntax = "proto3"; message M { int64 a = 1 }`, Type: sr.TypeProtobuf})
	r := NewRegistry(cl)
	ws, err := r.Schema(context.Background(), 30)
	if err != nil || ws.FormatName() != FormatProtobuf || ws.Delta.String() != "struct<a:long>" {
		t.Fatalf("protobuf schema: %v %+v", err, ws)
	}
	for i := 0; i < 2; i++ {
		if _, err := r.Schema(context.Background(), 31); ReasonOf(err) != ReasonSchemaParseError {
			t.Fatalf("protobuf schema that does not compile: %v", err)
		}
	}
	if n := reg.requests("/schemas/ids/31"); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestStaticSchema(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "money.avsc")
	main := filepath.Join(dir, "order.avsc")
	if err := os.WriteFile(ref, []byte(`{"type":"fixed","name":"Money","namespace":"com.x","size":8,"logicalType":"decimal","precision":18,"scale":2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(`{"type":"record","name":"Order","namespace":"com.x","fields":[{"name":"order id","type":"long"},{"name":"total","type":"Money"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := StaticSchema(main, ref)
	if err != nil {
		t.Fatal(err)
	}
	if ws.ID != 0 || ws.Delta.String() != "struct<order id:long,total:decimal(18,2)>" {
		t.Fatalf("static schema %d %s", ws.ID, ws.Delta)
	}
	if _, err := StaticSchema(filepath.Join(dir, "missing.avsc")); err == nil || ReasonOf(err) != "" {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.avsc")
	_ = os.WriteFile(bad, []byte(`{"type":"record","name":"R","fields":[{"name":"a","type":"nope"}]}`), 0o600)
	if _, err := StaticSchema(bad); ReasonOf(err) != ReasonSchemaParseError || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("bad schema: %v", err)
	}
}

// TestNamesOutsideTheAvroGrammar: field names that hamba/avro refuses by default ("order
// id", " amount", "a;b", "y--1", and a referenced type's field "unit price") parse through
// every path that builds a writer schema, with the name validation switch reset before each
// path: ParseWriterSchema, StaticSchema (a referenced .avsc beside the main one) and a
// registry lookup that resolves a reference. Each path must turn the switch off itself.
func TestNamesOutsideTheAvroGrammar(t *testing.T) {
	const ref = `{"type":"record","name":"Price","namespace":"com.x","fields":[{"name":"unit price","type":"double"}]}`
	const text = `{"type":"record","name":"Order","namespace":"com.x","fields":[{"name":"order id","type":"string"},
		{"name":" amount","type":"double"},{"name":"a;b","type":"int"},{"name":"y--1","type":"long"},{"name":"price","type":"com.x.Price"}]}`
	const want = "struct<order id:string, amount:double,a;b:integer,y--1:long,price:struct<unit price:double>>"
	reset := func() {
		avro.SkipNameValidation = false
		skipNameValidation = sync.Once{}
	}
	t.Cleanup(reset) // the next parse of this package turns it off again
	reset()
	if _, err := avro.ParseWithCache(text, "", &avro.SchemaCache{}); err == nil {
		t.Fatal(`hamba/avro accepts "order id" with its name validation on: this test proves nothing`)
	}

	paths := map[string]func() (*WriterSchema, error){
		"ParseWriterSchema": func() (*WriterSchema, error) { return ParseWriterSchema(7, text, ref) },
		"StaticSchema": func() (*WriterSchema, error) {
			dir := t.TempDir()
			main, price := filepath.Join(dir, "order.avsc"), filepath.Join(dir, "price.avsc")
			if err := os.WriteFile(main, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(price, []byte(ref), 0o644); err != nil {
				t.Fatal(err)
			}
			return StaticSchema(main, price)
		},
		"Registry.Schema": func() (*WriterSchema, error) {
			fake, cl := newCountingRegistry(t)
			fake.SeedSchema("price-value", 1, 6, sr.Schema{Schema: ref})
			fake.SeedSchema("orders-value", 1, 7, sr.Schema{Schema: text,
				References: []sr.SchemaReference{{Name: "com.x.Price", Subject: "price-value", Version: 1}}})
			return NewRegistry(cl).Schema(context.Background(), 7)
		},
	}
	for name, parse := range paths {
		reset()
		ws, err := parse()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ws.DeltaErr != nil || ws.Delta.String() != want {
			t.Errorf("%s: Delta schema %v (%v), want %s", name, ws.Delta, ws.DeltaErr, want)
		}
	}
}
