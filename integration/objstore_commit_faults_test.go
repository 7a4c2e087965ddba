package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// faultProxy is an HTTP proxy in front of an emulator that records every request and
// lets a test answer, delay or break chosen ones. The Host header is passed unchanged,
// so SigV4 signatures made for the proxy's address still verify.
type faultProxy struct {
	srv      *httptest.Server
	upstream *url.URL
	mu       sync.Mutex
	hook     func(w http.ResponseWriter, r *http.Request, body []byte) bool // true: answered
	log      []string                                                       // "METHOD path?query"
}

func newFaultProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{upstream: u}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		p.log = append(p.log, r.Method+" "+r.URL.RequestURI())
		hook := p.hook
		p.mu.Unlock()
		if hook != nil && hook(w, r, body) {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *faultProxy) setHook(h func(w http.ResponseWriter, r *http.Request, body []byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = h
}

// count returns how many recorded requests satisfy match.
func (p *faultProxy) count(match func(string) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.log {
		if match(l) {
			n++
		}
	}
	return n
}

func (p *faultProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = nil
}

// forwardThenDrop sends the request to the emulator (so it takes effect) and then closes
// the client's connection without an answer: a commit that landed, whose response was
// lost.
func (p *faultProxy) forwardThenDrop(w http.ResponseWriter, r *http.Request, body []byte) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.upstream.Scheme, p.upstream.Host
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	if resp, err := http.DefaultTransport.RoundTrip(out); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	c, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		c.Close()
	}
}

func s3ErrorReply(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by the test proxy</Message><RequestId>proxy</RequestId></Error>`, code)
}

// c38Table creates s3://lake/<test>/orders at version 6 (create + 6 commits by
// "orders-setup") directly on the emulator and returns its URI.
func c38Table(t testing.TB, o objectStore) string {
	t.Helper()
	ctx := context.Background()
	uri := o.base + "/orders"
	st, err := storage.OpenWith(ctx, uri, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "order_id", Type: deltalog.Long, Nullable: true}}}
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "orders", Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: create.Protocol, Metadata: create.Metadata, Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 6; v++ {
		c := deltawriter.Commit{ReadVersion: v - 1, Adds: []deltalog.Add{c38Add(fmt.Sprintf("setup-%d", v))},
			Txns: []deltalog.Txn{{AppID: "orders-setup", Version: v}}}
		if got, err := tbl.Commit(ctx, c); err != nil || got != v {
			t.Fatalf("setup commit %d: %d, %v", v, got, err)
		}
	}
	return uri
}

func c38Add(name string) deltalog.Add {
	return deltalog.Add{Path: "part-" + name + ".parquet", Size: 10, ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: `{"numRecords":1}`}
}

// ourCommit is orders-ingest's batch for partitions 0..3 at offsets 100..103.
func ourCommit(readVersion int64, tag string) deltawriter.Commit {
	c := deltawriter.Commit{ReadVersion: readVersion, Adds: []deltalog.Add{c38Add("ingest-" + tag)}}
	for p := 0; p < 4; p++ {
		c.Txns = append(c.Txns, deltalog.Txn{AppID: fmt.Sprintf("orders-ingest-orders-%d", p), Version: int64(100 + p)})
	}
	return c
}

// openVia opens the table through the proxy (its endpoint replaces the emulator's).
func openVia(t *testing.T, uri string, p *faultProxy) *deltawriter.Table {
	t.Helper()
	st, err := storage.OpenWith(context.Background(), uri, storage.Options{Endpoint: p.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// logVersions returns the commit versions in the table's _delta_log and each one's
// actions, read directly from the emulator.
func logVersions(t *testing.T, uri string) map[int64][]deltalog.Action {
	t.Helper()
	ctx := context.Background()
	st, _ := storage.OpenWith(ctx, uri, storage.Options{})
	ents, err := st.List(ctx, "_delta_log")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]deltalog.Action{}
	for _, e := range ents {
		var v int64
		if n, _ := fmt.Sscanf(e.Name, "%020d.json", &v); n != 1 || !strings.HasSuffix(e.Name, ".json") || len(e.Name) != 25 {
			continue
		}
		b, err := st.Get(ctx, "_delta_log/"+e.Name)
		if err != nil {
			t.Fatal(err)
		}
		acts, err := deltalog.ParseCommit(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("version %d is not a valid commit: %v", v, err)
		}
		out[v] = acts
	}
	return out
}

func txnsOf(acts []deltalog.Action) map[string]int64 {
	m := map[string]int64{}
	for _, a := range acts {
		if a.Txn != nil {
			m[a.Txn.AppID] = a.Txn.Version
		}
	}
	return m
}

func addsOf(acts []deltalog.Action) []string {
	var out []string
	for _, a := range acts {
		if a.Add != nil {
			out = append(out, a.Add.Path)
		}
	}
	return out
}

const commit7 = "_delta_log/00000000000000000007.json"

func isPut7(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, commit7)
}

// TestC38S3Commits: Delta commits on S3 with If-None-Match: *, on the S3 emulator behind a
// fault-injecting proxy. An S3 client turned 409 ConditionalRequestConflict ("retry the
// upload") into "already exists" (apache/arrow-rs-object-store#852); a commit that landed
// but whose response was lost was reported as failed and retried at the next version,
// duplicating its rows, until Delta learnt to recognise its own txnId in the winning
// commit (delta-io/delta#7345). The table has versions 0..6; the pipeline orders-ingest
// commits partitions 0..3 at offsets 100..103 as version 7:
//   - F1: the proxy forwards the PUT of version 7 and drops the connection before the 200;
//     the SDK's retry gets 412. ingestd reads version 7 back, finds its own txnId: success,
//     one commit, no version 8.
//   - F2: another app (orders-audit) commits version 7 first: a real conflict. ingestd
//     reloads from version 7 (listing from there, not the whole log) and commits at 8.
//   - F3: two 409s, then the PUT goes through: retried at the same version with backoff,
//     never "exists" and never a conflict; it lands as version 7.
//   - F4: four writers through a store that delays every commit PUT by 200 ms: every
//     commit lands once, each loser finding the next free version by listing.
//   - F5: 503 SlowDown on a data file is transient; 403 AccessDenied on the log is a
//     permission error naming the bucket and key.
func TestC38S3Commits(t *testing.T) {
	o := needStore(t, "s3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("F1 lost response, SDK retry gets 412, read-back says ours", func(t *testing.T) {
		o := o
		o.base += "/f1"
		uri := c38Table(t, o)
		p := newFaultProxy(t, o.endpoint)
		dropped := 0
		p.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			if isPut7(r) && dropped == 0 {
				dropped++
				p.forwardThenDrop(w, r, body)
				return true
			}
			return false
		})
		tbl := openVia(t, uri, p)
		v, err := tbl.Commit(ctx, ourCommit(6, "f1"))
		if err != nil || v != 7 {
			t.Fatalf("commit after a lost response: version %d, %v; want 7, nil", v, err)
		}
		if n := p.count(func(l string) bool { return strings.HasPrefix(l, "PUT ") && strings.Contains(l, commit7) }); n != 2 {
			t.Errorf("%d PUTs of version 7, want 2 (the dropped one and the SDK's retry, answered 412)", n)
		}
		log := logVersions(t, uri)
		if len(log) != 8 {
			t.Fatalf("log has versions %v, want 0..7 and no repeat at 8", len(log))
		}
		want := map[string]int64{"orders-ingest-orders-0": 100, "orders-ingest-orders-1": 101, "orders-ingest-orders-2": 102, "orders-ingest-orders-3": 103}
		if got := txnsOf(log[7]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("version 7 txns %v, want %v", got, want)
		}
		if got := addsOf(log[7]); fmt.Sprint(got) != "[part-ingest-f1.parquet]" {
			t.Errorf("version 7 adds %v", got)
		}
	})

	t.Run("F2 real conflict at 7, retried at 8 without listing the whole log", func(t *testing.T) {
		o := o
		o.base += "/f2"
		uri := c38Table(t, o)
		p := newFaultProxy(t, o.endpoint)
		tbl := openVia(t, uri, p)
		if s, err := tbl.Snapshot(ctx); err != nil || s.Version != 6 {
			t.Fatalf("snapshot: %v, %v", s, err)
		}
		audit, err := deltawriter.Open(ctx, mustOpen(t, uri))
		if err != nil {
			t.Fatal(err)
		}
		won := false
		p.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			if isPut7(r) && !won {
				won = true // orders-audit commits 7 just before our PUT arrives
				c := deltawriter.Commit{ReadVersion: 6, Adds: []deltalog.Add{c38Add("audit")}, Txns: []deltalog.Txn{{AppID: "orders-audit-orders-0", Version: 55}}}
				if v, err := audit.Commit(ctx, c); err != nil || v != 7 {
					t.Errorf("audit commit: %d, %v", v, err)
				}
			}
			return false
		})
		p.reset()
		v, err := tbl.Commit(ctx, ourCommit(6, "f2"))
		if err != nil || v != 8 {
			t.Fatalf("commit after losing 7: version %d, %v; want 8", v, err)
		}
		log := logVersions(t, uri)
		if got := txnsOf(log[7]); got["orders-audit-orders-0"] != 55 || len(got) != 1 {
			t.Errorf("version 7 (the winner) txns %v", got)
		}
		if got := txnsOf(log[8]); got["orders-ingest-orders-3"] != 103 || len(got) != 4 {
			t.Errorf("version 8 (ours) txns %v", got)
		}
		if len(log) != 9 {
			t.Errorf("log has %d versions, want 9 (0..8)", len(log))
		}
		if n := p.count(func(l string) bool { return strings.Contains(l, "list-type=2") && !strings.Contains(l, "start-after") }); n != 0 {
			t.Errorf("%d listings of the whole _delta_log during the commit, want 0", n)
		}
		// A fresh reader lists from the checkpoint hint or the start, but never misses 8.
		s, err := openVia(t, uri, p).Snapshot(ctx)
		if err != nil || s.Version != 8 || s.Txns["orders-ingest-orders-0"] != 100 || s.Txns["orders-audit-orders-0"] != 55 {
			t.Errorf("fresh snapshot: %+v, %v", s, err)
		}
	})

	t.Run("F3 409 ConditionalRequestConflict twice, then version 7 lands", func(t *testing.T) {
		o := o
		o.base += "/f3"
		uri := c38Table(t, o)
		p := newFaultProxy(t, o.endpoint)
		conflicts := 0
		p.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			if isPut7(r) && conflicts < 2 {
				conflicts++
				s3ErrorReply(w, 409, "ConditionalRequestConflict")
				return true
			}
			return false
		})
		tbl := openVia(t, uri, p)
		start := time.Now()
		v, err := tbl.Commit(ctx, ourCommit(6, "f3"))
		if err != nil || v != 7 {
			t.Fatalf("commit after two 409s: version %d, %v; want 7", v, err)
		}
		if conflicts != 2 {
			t.Errorf("%d conflicts answered, want 2", conflicts)
		}
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Errorf("two 409s retried in %v: no backoff", d)
		}
		if log := logVersions(t, uri); len(log) != 8 || txnsOf(log[7])["orders-ingest-orders-1"] != 101 {
			t.Errorf("log after F3: %d versions, version 7 txns %v", len(log), txnsOf(log[7]))
		}
	})

	t.Run("F4 four writers through a slow store: every commit lands once", func(t *testing.T) {
		o := o
		o.base += "/f4"
		uri := c38Table(t, o)
		p := newFaultProxy(t, o.endpoint)
		p.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/_delta_log/") {
				time.Sleep(200 * time.Millisecond) // the slow store under test
			}
			return false
		})
		const writers, perWriter = 4, 5
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				tbl := openVia(t, uri, p)
				for i := 0; i < perWriter; i++ {
					for attempt := 0; ; attempt++ {
						s, err := tbl.Snapshot(ctx)
						if err != nil {
							errs <- err
							return
						}
						c := deltawriter.Commit{ReadVersion: s.Version, Adds: []deltalog.Add{c38Add(fmt.Sprintf("w%d-%d", w, i))},
							Txns: []deltalog.Txn{{AppID: fmt.Sprintf("writer-%d-orders-0", w), Version: int64(i)}}}
						_, err = tbl.Commit(ctx, c)
						if errors.Is(err, deltawriter.ErrCommitAttempts) && attempt < 5 {
							continue // the pipeline retries such a batch later; so does the test
						}
						if err != nil {
							errs <- fmt.Errorf("writer %d commit %d: %w", w, i, err)
							return
						}
						break
					}
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		log := logVersions(t, uri)
		if len(log) != 7+writers*perWriter {
			t.Fatalf("log has %d versions, want %d", len(log), 7+writers*perWriter)
		}
		seen := map[string]int{}
		for v := int64(7); v < int64(len(log)); v++ {
			acts, ok := log[v]
			if !ok {
				t.Fatalf("version %d missing", v)
			}
			for _, a := range addsOf(acts) {
				seen[a]++
			}
		}
		for w := 0; w < writers; w++ {
			for i := 0; i < perWriter; i++ {
				if n := seen[fmt.Sprintf("part-w%d-%d.parquet", w, i)]; n != 1 {
					t.Errorf("writer %d batch %d is in %d commits, want 1", w, i, n)
				}
			}
		}
		puts := p.count(func(l string) bool { return strings.HasPrefix(l, "PUT ") && strings.Contains(l, "/_delta_log/0") })
		t.Logf("F4: %d commits by %d writers took %d commit PUTs (%d lost races)", writers*perWriter, writers, puts, puts-writers*perWriter)
		// A loser backs off and steps over taken versions by reading them: no tight loop of
		// conditional puts (each of the 20 batches races at most the 3 other writers).
		if puts > writers*writers*perWriter {
			t.Errorf("%d commit PUTs for %d commits: losers retry in a tight loop", puts, writers*perWriter)
		}
	})

	t.Run("F5 503 SlowDown is transient, 403 AccessDenied is a permission error naming the object", func(t *testing.T) {
		o := o
		o.base += "/f5"
		uri := c38Table(t, o)
		p := newFaultProxy(t, o.endpoint)
		p.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			switch {
			case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/part-"):
				s3ErrorReply(w, 503, "SlowDown")
				return true
			case isPut7(r):
				s3ErrorReply(w, 403, "AccessDenied")
				return true
			}
			return false
		})
		tbl := openVia(t, uri, p)
		w, err := tbl.Store().Create(ctx, "part-00000-slow.parquet")
		if err == nil {
			_, _ = w.Write([]byte("PAR1 data"))
			err = w.Close()
		}
		if !storage.IsTransient(err) || errors.Is(err, storage.ErrPermission) {
			t.Errorf("data-file upload answered 503 SlowDown: %v; want a transient error", err)
		}
		_, err = tbl.Commit(ctx, ourCommit(6, "f5"))
		if !errors.Is(err, storage.ErrPermission) || storage.IsTransient(err) {
			t.Fatalf("commit answered 403: %v; want a permission error", err)
		}
		for _, want := range []string{"s3://lake/", "/f5/orders/" + commit7, "put", "AccessDenied"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("403 error %q does not name %q", err, want)
			}
		}
		if secret := stackEnv()["AWS_SECRET_ACCESS_KEY"]; secret != "" && strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows the secret key")
		}
		if log := logVersions(t, uri); len(log) != 7 {
			t.Errorf("log has %d versions after the refused commit, want 7", len(log))
		}
	})
}

func mustOpen(t testing.TB, uri string) storage.Store {
	t.Helper()
	st, err := storage.OpenWith(context.Background(), uri, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// overwritingS3 starts a private versitygw with --nometa, which keeps no object
// metadata and so lets every If-None-Match: * put overwrite (a real S3 server that does
// not honour the precondition), and returns its endpoint. Its bucket "lake" exists.
func overwritingS3(t *testing.T, o objectStore) string {
	t.Helper()
	bins, _ := filepath.Glob(filepath.Join(repoRoot, ".stack", "stores", "versitygw-*", "versitygw"))
	if len(bins) == 0 {
		msg := "integration test needs versitygw in .stack/stores (built by scripts/stack.sh start-stores)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	addr := freePort(t)
	cmd := exec.Command(bins[0], "--port", addr, "posix", "--nometa", t.TempDir())
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+stackEnvOr("AWS_ACCESS_KEY_ID"), "ROOT_SECRET_KEY="+stackEnvOr("AWS_SECRET_ACCESS_KEY"))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	endpoint := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for !reachableTCP(addr) {
		if time.Now().After(deadline) {
			t.Fatalf("versitygw --nometa did not listen on %s:\n%s", addr, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := storage.CreateBucket(context.Background(), "s3://lake/x", storage.Options{Endpoint: endpoint}); err != nil {
		t.Fatalf("create bucket on versitygw --nometa: %v", err)
	}
	return endpoint
}

// stackEnvOr returns the environment's value of k, else .stack/env's.
func stackEnvOr(k string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return stackEnv()[k]
}

// TestUnsafeStoreRefusedAtStartup: a pipeline whose S3 store silently overwrites
// (versitygw --nometa ignores If-None-Match) fails at start-up with a message naming the
// store and the fix, /readyz reports it, the daemon's other pipeline keeps running, and
// nothing is left under the refused table (the probe object is deleted).
func TestUnsafeStoreRefusedAtStartup(t *testing.T) {
	s := need(t)
	o := needStore(t, "s3")
	unsafeEndpoint := overwritingS3(t, o)
	topic := createTopic(t, s, "orders", 1)
	dlq := createTopic(t, s, "orders.dlq", 1)
	produce(t, s, topic, 50, 0, 1)
	unsafeURI := o.base + "/unsafe/orders"
	safeURI := o.base + "/safe/orders"
	cfgDir := filepath.Join(t.TempDir(), "configs")
	mustMkdir(t, cfgDir)
	unsafe := strings.Replace(pipelineYAMLAt("orders-unsafe", s, topic, unsafeURI, "evolve", dlq),
		fmt.Sprintf("table: {uri: %q, create: true}", unsafeURI),
		fmt.Sprintf("table: {uri: %q, create: true, storage: {endpoint: %q}}", unsafeURI, unsafeEndpoint), 1)
	writePipeline(t, cfgDir, "unsafe", unsafe)
	writePipeline(t, cfgDir, "safe", pipelineYAMLAt("orders-safe", s, topic, safeURI, "evolve", dlq))
	d := startDaemon(t, cfgDir)
	var failure string
	waitFor(t, d, 2*time.Minute, "the unsafe pipeline to be refused and the safe one to land 50 records", func() bool {
		r, _ := d.readyz(t)
		for _, pl := range r.Pipelines {
			if pl.Pipeline == "orders-unsafe" && pl.State == "failed" {
				failure = pl.Error
			}
		}
		return failure != "" && handledAt(t, safeURI) == 50
	})
	for _, want := range []string{"s3://lake/", "/unsafe/orders", "does not honour put-if-absent", "If-None-Match", "Fix:"} {
		if !strings.Contains(failure, want) {
			t.Errorf("refusal %q does not mention %q", failure, want)
		}
	}
	if code := d.stop(t); code == 0 {
		t.Errorf("exit code 0 with a failed pipeline")
	}
	if logs, _ := os.ReadFile(d.logs.Name()); strings.Contains(string(logs), stackEnvOr("AWS_SECRET_ACCESS_KEY")) {
		t.Errorf("the daemon's log shows the S3 secret key")
	}
	ctx := context.Background()
	st, err := storage.OpenWith(ctx, unsafeURI, storage.Options{Endpoint: unsafeEndpoint})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"", "_delta_log"} {
		if ents, err := st.List(ctx, dir); err != nil || len(ents) != 0 {
			t.Errorf("refused table %s/%s holds %v (%v), want nothing", unsafeURI, dir, ents, err)
		}
	}
}
