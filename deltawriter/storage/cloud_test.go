package storage

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"google.golang.org/api/googleapi"
)

// fakeS3 is a minimal path-style S3 server: PUT (with If-None-Match: * honoured unless
// ignoreIfNoneMatch), GET, HEAD, DELETE. fault, when set, may answer a request instead
// (return true).
type fakeS3 struct {
	mu                sync.Mutex
	objects           map[string][]byte
	ignoreIfNoneMatch bool
	fault             func(w http.ResponseWriter, r *http.Request) bool
	puts              int
	batchDeletes      []int    // keys per DeleteObjects request
	lists             []string // max-keys and continuation-token of each ListObjectsV2 request
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s message</Message><RequestId>r1</RequestId></Error>`, code, code)
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.fault != nil && f.fault(w, r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := strings.TrimPrefix(r.URL.Path, "/")
	if q := r.URL.Query(); r.Method == http.MethodGet && q.Get("list-type") == "2" {
		f.list(w, key, q)
		return
	}
	switch r.Method {
	case http.MethodPut:
		f.puts++
		b, _ := io.ReadAll(r.Body)
		if _, ok := f.objects[key]; ok && r.Header.Get("If-None-Match") == "*" && !f.ignoreIfNoneMatch {
			s3Error(w, 412, "PreconditionFailed")
			return
		}
		f.objects[key] = b
		w.Header().Set("ETag", `"e"`)
	case http.MethodGet, http.MethodHead:
		b, ok := f.objects[key]
		if !ok {
			if r.Method == http.MethodHead {
				w.WriteHeader(404)
				return
			}
			s3Error(w, 404, "NoSuchKey")
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.Header().Set("Last-Modified", "Tue, 01 Dec 2026 08:00:00 GMT")
		if r.Method == http.MethodGet {
			w.Write(b)
		}
	case http.MethodDelete:
		delete(f.objects, key)
		w.WriteHeader(204)
	case http.MethodPost:
		if _, ok := r.URL.Query()["delete"]; !ok {
			s3Error(w, 501, "NotImplemented")
			return
		}
		var req struct {
			Objects []struct{ Key string } `xml:"Object"`
		}
		if err := xml.NewDecoder(r.Body).Decode(&req); err != nil {
			s3Error(w, 400, "MalformedXML")
			return
		}
		bucket, _, _ := strings.Cut(key, "/")
		for _, o := range req.Objects {
			delete(f.objects, bucket+"/"+o.Key)
		}
		f.batchDeletes = append(f.batchDeletes, len(req.Objects))
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><DeleteResult></DeleteResult>`)
	default:
		s3Error(w, 501, "NotImplemented")
	}
}

// list answers ListObjectsV2 on bucket: the keys under prefix in name order, rolled up
// at the delimiter, at most max-keys (objects and prefixes together) after the
// continuation token (the last name of the previous page).
func (f *fakeS3) list(w http.ResponseWriter, bucket string, q url.Values) {
	prefix, delim, token := q.Get("prefix"), q.Get("delimiter"), q.Get("continuation-token")
	maxKeys := 1000
	if m := q.Get("max-keys"); m != "" {
		fmt.Sscan(m, &maxKeys)
	}
	f.lists = append(f.lists, q.Get("max-keys")+" "+token)
	var names []string // keys and common prefixes, deduplicated
	for k := range f.objects {
		name, ok := strings.CutPrefix(k, bucket+"/")
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		if i := strings.Index(name[len(prefix):], delim); delim != "" && i >= 0 {
			name = name[:len(prefix)+i+len(delim)]
		}
		names = append(names, name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	i, _ := slices.BinarySearch(names, token)
	for i < len(names) && token != "" && names[i] <= token {
		i++
	}
	page := names[i:min(i+maxKeys, len(names))]
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys>`, bucket, prefix, len(page), maxKeys)
	for _, n := range page {
		if strings.HasSuffix(n, delim) && delim != "" {
			fmt.Fprintf(&b, `<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>`, n)
			continue
		}
		fmt.Fprintf(&b, `<Contents><Key>%s</Key><Size>%d</Size><LastModified>2026-12-01T08:00:00.000Z</LastModified></Contents>`, n, len(f.objects[bucket+"/"+n]))
	}
	if i+len(page) < len(names) {
		fmt.Fprintf(&b, `<IsTruncated>true</IsTruncated><NextContinuationToken>%s</NextContinuationToken>`, page[len(page)-1])
	} else {
		b.WriteString(`<IsTruncated>false</IsTruncated>`)
	}
	b.WriteString(`</ListBucketResult>`)
	w.Header().Set("Content-Type", "application/xml")
	fmt.Fprint(w, b.String())
}

const testSecret = "s3cr3t-never-printed-0123456789"

func newFakeS3(t *testing.T) (*fakeS3, *S3) {
	t.Helper()
	f := &fakeS3{objects: map[string][]byte{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecret)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_MAX_ATTEMPTS", "2")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	st, err := OpenWith(context.Background(), "s3://lake/tbl", Options{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return f, st.(*S3)
}

func TestS3ErrorMapping(t *testing.T) {
	ctx := context.Background()
	f, st := newFakeS3(t)
	if st.URI() != "s3://lake/tbl" {
		t.Errorf("URI = %q", st.URI())
	}
	if _, err := st.Get(ctx, "_delta_log/00000000000000000000.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("get missing: %v, want ErrNotExist", err)
	}
	if _, err := st.Stat(ctx, "_delta_log/00000000000000000000.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat missing: %v, want ErrNotExist", err)
	}
	if err := st.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("a")); err != nil {
		t.Fatal(err)
	}
	err := st.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("b"))
	var se *StoreError
	if !errors.Is(err, ErrExist) || !errors.As(err, &se) || se.Status != 412 || se.Code != "PreconditionFailed" || IsTransient(err) {
		t.Fatalf("412: got %v (%+v), want ErrExist with status 412", err, se)
	}
	if !strings.Contains(err.Error(), "s3://lake/tbl/_delta_log/00000000000000000000.json") {
		t.Errorf("412 message does not name the object: %v", err)
	}
	if string(f.objects["lake/tbl/_delta_log/00000000000000000000.json"]) != "a" {
		t.Fatal("refused put replaced the object")
	}

	// 409 ConditionalRequestConflict twice, then the put goes through: one success.
	conflicts := 0
	f.fault = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "01.json") && conflicts < 2 {
			conflicts++
			s3Error(w, 409, "ConditionalRequestConflict")
			return true
		}
		return false
	}
	if err := st.PutIfAbsent(ctx, "_delta_log/00000000000000000001.json", []byte("c")); err != nil {
		t.Fatalf("put after two 409s: %v, want success", err)
	}
	if conflicts != 2 || string(f.objects["lake/tbl/_delta_log/00000000000000000001.json"]) != "c" {
		t.Fatalf("conflicts %d, object %q", conflicts, f.objects["lake/tbl/_delta_log/00000000000000000001.json"])
	}
	// 409 forever: transient, never "exists".
	f.fault = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut {
			s3Error(w, 409, "ConditionalRequestConflict")
			return true
		}
		return false
	}
	err = st.PutIfAbsent(ctx, "_delta_log/00000000000000000002.json", []byte("d"))
	if !IsTransient(err) || errors.Is(err, ErrExist) {
		t.Fatalf("persistent 409: %v, want ErrTransient and not ErrExist", err)
	}

	cases := []struct {
		status int
		code   string
		class  error
	}{
		{503, "SlowDown", ErrTransient},
		{500, "InternalError", ErrTransient},
		{429, "TooManyRequests", ErrTransient},
		{403, "AccessDenied", ErrPermission},
		{403, "SignatureDoesNotMatch", ErrPermission},
		{400, "InvalidArgument", nil},
	}
	for _, c := range cases {
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			s3Error(w, c.status, c.code)
			return true
		}
		err := st.Put(ctx, "part-0.parquet", []byte("x"))
		if err == nil || !errors.As(err, &se) || se.Status != c.status || se.Code != c.code {
			t.Fatalf("%d %s: got %v", c.status, c.code, err)
		}
		for _, cl := range []error{ErrTransient, ErrPermission, ErrExist, ErrNotExist} {
			if errors.Is(err, cl) != (cl == c.class) {
				t.Errorf("%d %s: errors.Is(%v) = %v", c.status, c.code, cl, errors.Is(err, cl))
			}
		}
		if strings.Contains(err.Error(), testSecret) {
			t.Errorf("%d %s: the error shows the secret key: %v", c.status, c.code, err)
		}
	}
	// A connection closed without a response: transient.
	f.fault = func(w http.ResponseWriter, r *http.Request) bool {
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close()
		return true
	}
	if _, err := st.Get(ctx, "x"); !IsTransient(err) {
		t.Fatalf("reset connection: %v, want ErrTransient", err)
	}
}

// TestS3ProbeRefusesOverwritingStore: a server that ignores If-None-Match is refused
// before the first write, with the table, the endpoint that failed to honour the
// conditional write (and its setting) and the fix named, and nothing but the (deleted)
// probe is written.
func TestS3ProbeRefusesOverwritingStore(t *testing.T) {
	ctx := context.Background()
	f, st := newFakeS3(t)
	f.ignoreIfNoneMatch = true
	err := st.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("a"))
	if !errors.Is(err, ErrUnsafeStore) {
		t.Fatalf("first write to an overwriting store: %v, want ErrUnsafeStore", err)
	}
	for _, want := range []string{"s3://lake/tbl", "the S3 endpoint " + st.Endpoint() + " (table.storage.endpoint", "If-None-Match", "Fix: point table.storage.endpoint at"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not mention %q", err, want)
		}
	}
	if _, err := st.Create(ctx, "part-0.parquet"); !errors.Is(err, ErrUnsafeStore) {
		t.Fatalf("later writes: %v, want ErrUnsafeStore again", err)
	}
	if len(f.objects) != 0 {
		t.Fatalf("objects left: %v, want none", f.objects)
	}
	if f.puts != 2 {
		t.Errorf("%d PUTs, want 2 (the probe's, once)", f.puts)
	}

	// A store that honours the precondition passes, once: later writes do not probe.
	f2, st2 := newFakeS3(t)
	for i := 0; i < 3; i++ {
		if err := st2.Put(ctx, fmt.Sprintf("f%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if f2.puts != 5 || len(f2.objects) != 3 {
		t.Fatalf("%d PUTs and %d objects, want 5 (2 probe + 3) and 3", f2.puts, len(f2.objects))
	}
}

func TestGCSErrorMapping(t *testing.T) {
	g := &GCS{bucket: "lake", prefix: "tbl"}
	ctx := context.Background()
	cases := []struct {
		err   error
		class error
	}{
		{&googleapi.Error{Code: 412, Message: "conditionNotMet", Errors: []googleapi.ErrorItem{{Reason: "conditionNotMet"}}}, ErrExist},
		{fmt.Errorf("close: %w", &googleapi.Error{Code: 412}), ErrExist},
		{storage.ErrObjectNotExist, ErrNotExist},
		{&googleapi.Error{Code: 429, Errors: []googleapi.ErrorItem{{Reason: "rateLimitExceeded"}}}, ErrTransient},
		{&googleapi.Error{Code: 503}, ErrTransient},
		{&googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "forbidden"}}}, ErrPermission},
		{&googleapi.Error{Code: 401}, ErrPermission},
		{&googleapi.Error{Code: 400}, nil},
		{&url.Error{Op: "Post", URL: "http://x", Err: errors.New("connection reset by peer")}, ErrTransient},
	}
	for _, c := range cases {
		err := g.wrap(ctx, "put", "tbl/_delta_log/00000000000000000001.json", c.err)
		for _, cl := range []error{ErrTransient, ErrPermission, ErrExist, ErrNotExist} {
			if errors.Is(err, cl) != (cl == c.class) {
				t.Errorf("%v: errors.Is(%v) = %v", c.err, cl, errors.Is(err, cl))
			}
		}
		if !strings.Contains(err.Error(), "gs://lake/tbl/_delta_log/00000000000000000001.json") {
			t.Errorf("%v: message does not name the object: %v", c.err, err)
		}
	}
}

func TestAzureErrorMapping(t *testing.T) {
	a := &Azure{container: "lake", prefix: "tbl"}
	ctx := context.Background()
	resp := func(status int, code string) error {
		return &azcore.ResponseError{StatusCode: status, ErrorCode: code, RawResponse: &http.Response{StatusCode: status, Header: http.Header{}, Request: &http.Request{Method: "PUT", URL: &url.URL{Scheme: "http", Host: "x", Path: "/lake/tbl"}}}}
	}
	cases := []struct {
		err   error
		class error
	}{
		{resp(409, "BlobAlreadyExists"), ErrExist},
		{resp(412, "ConditionNotMet"), ErrExist},
		{resp(404, "BlobNotFound"), ErrNotExist},
		{resp(503, "ServerBusy"), ErrTransient},
		{resp(500, "InternalError"), ErrTransient},
		{resp(403, "AuthorizationPermissionMismatch"), ErrPermission},
		{resp(403, "AuthenticationFailed"), ErrPermission},
		{resp(404, "ContainerNotFound"), nil},
		{resp(400, "InvalidHeaderValue"), nil},
	}
	for _, c := range cases {
		err := a.wrap(ctx, "put", "tbl/_delta_log/00000000000000000001.json", c.err)
		for _, cl := range []error{ErrTransient, ErrPermission, ErrExist, ErrNotExist} {
			if errors.Is(err, cl) != (cl == c.class) {
				t.Errorf("%v: errors.Is(%v) = %v", c.err, cl, errors.Is(err, cl))
			}
		}
		if !strings.Contains(err.Error(), "az://lake/tbl/_delta_log/00000000000000000001.json") {
			t.Errorf("message does not name the object: %v", err)
		}
	}
}

func TestParseCloudURIs(t *testing.T) {
	cases := []struct{ uri, cont, account, prefix, err string }{
		{uri: "abfss://lake@acct.dfs.core.windows.net/bronze/orders", cont: "lake", account: "acct", prefix: "bronze/orders"},
		{uri: "az://lake/bronze/orders/", cont: "lake", prefix: "bronze/orders"},
		{uri: "abfss://acct.dfs.core.windows.net/x", err: "container@account"},
		{uri: "abfss://lake:pw@acct.dfs.core.windows.net/x", err: "credentials in the URI"},
	}
	for _, c := range cases {
		u, _ := url.Parse(c.uri)
		cont, account, prefix, err := parseAzureURI(u)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "pw") {
				t.Errorf("%s: error %v, want one mentioning %q (and no password)", c.uri, err, c.err)
			}
			continue
		}
		if err != nil || cont != c.cont || account != c.account || prefix != c.prefix {
			t.Errorf("%s: %q %q %q %v", c.uri, cont, account, prefix, err)
		}
	}
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;")
	if _, err := Open("abfss://lake@other.dfs.core.windows.net/t"); err == nil || !strings.Contains(err.Error(), `names storage account "other" but AZURE_STORAGE_CONNECTION_STRING is for account "devstoreaccount1"`) || strings.Contains(err.Error(), "a2V5") {
		t.Errorf("abfss account other than the connection string's: %v", err)
	}
	if st, err := Open("abfss://lake@devstoreaccount1.dfs.core.windows.net/t"); err != nil || st.URI() != "abfss://lake@devstoreaccount1.dfs.core.windows.net/t" {
		t.Errorf("abfss with the connection string's account: %v, %v", st, err)
	}
	if _, err := Open("s3://user:secret@lake/x"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("s3 URI with credentials: %v, want a refusal that does not repeat them", err)
	}
	if _, err := Open("s3:///x"); err == nil || !strings.Contains(err.Error(), "no bucket") {
		t.Errorf("s3 URI without bucket: %v", err)
	}
	if _, err := OpenWith(context.Background(), "gs://lake/x", Options{Endpoint: "http://x"}); err == nil || !strings.Contains(err.Error(), "STORAGE_EMULATOR_HOST") {
		t.Errorf("gs with endpoint: %v", err)
	}
	if _, err := Open("hdfs://nn/x"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("hdfs: %v", err)
	}
}

func TestListFromFallback(t *testing.T) {
	ctx := context.Background()
	st, _ := NewLocal(t.TempDir())
	for _, n := range []string{"00000000000000000001.json", "00000000000000000002.checkpoint.parquet", "00000000000000000002.json", "00000000000000000003.json", "_last_checkpoint"} {
		if err := st.Put(ctx, "_delta_log/"+n, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := ListFrom(ctx, st, "_delta_log", "00000000000000000002")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if got, want := strings.Join(names, " "), "00000000000000000002.checkpoint.parquet 00000000000000000002.json 00000000000000000003.json _last_checkpoint"; got != want {
		t.Fatalf("ListFrom:\n got %s\nwant %s", got, want)
	}
}

// TestDeleteAllBatchesS3 deletes 2,500 objects of an S3 store: three DeleteObjects
// requests of at most 1,000 keys, every object gone, the count exact; on a local store
// the same call deletes one by one, missing objects included without error.
func TestDeleteAllBatchesS3(t *testing.T) {
	ctx := context.Background()
	f, st := newFakeS3(t)
	var paths []string
	for i := range 2500 {
		p := fmt.Sprintf("d=%d/part-%05d.parquet", i%7, i)
		f.objects["lake/tbl/"+p] = []byte("x")
		paths = append(paths, p)
	}
	f.objects["lake/tbl/keep.parquet"] = []byte("k")
	n, err := DeleteAll(ctx, st, paths, 4)
	if err != nil || n != 2500 {
		t.Fatalf("DeleteAll = %d, %v; want 2500", n, err)
	}
	sizes := append([]int(nil), f.batchDeletes...)
	slices.Sort(sizes)
	if fmt.Sprint(sizes) != "[500 1000 1000]" || len(f.objects) != 1 || f.objects["lake/tbl/keep.parquet"] == nil {
		t.Fatalf("requests %v, objects left %d", sizes, len(f.objects))
	}

	dir := t.TempDir()
	local, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths[:100] {
		if err := local.Put(ctx, p, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := local.Put(ctx, "keep.parquet", []byte("k")); err != nil {
		t.Fatal(err)
	}
	n, err = DeleteAll(ctx, local, paths[:150], 8) // 50 of them never existed
	if err != nil || n != 150 {
		t.Fatalf("local DeleteAll = %d, %v; want 150", n, err)
	}
	left, err := local.List(ctx, "d=0")
	if err != nil || len(left) != 0 {
		t.Fatalf("left in d=0: %v, %v", left, err)
	}
	if _, err := local.Stat(ctx, "keep.parquet"); err != nil {
		t.Fatal(err)
	}
}

// TestS3ListPages lists a directory of 2,500 objects and 2 subdirectories through the
// ListObjectsV2 paginator: three requests of max-keys 1000, the second and third with the
// continuation token; pages of 1,000, 1,000 and 502 entries, in name order across pages,
// each once, sizes and times from the listing; List gives the same entries.
func TestS3ListPages(t *testing.T) {
	ctx := context.Background()
	f, st := newFakeS3(t)
	var want []string
	for i := range 2500 {
		n := fmt.Sprintf("part-%05d.parquet", i)
		f.objects["lake/tbl/"+n] = []byte(strings.Repeat("x", i%7))
		want = append(want, n)
	}
	f.objects["lake/tbl/d=1/a.parquet"] = []byte("x")
	f.objects["lake/tbl/d=2/b/c.parquet"] = []byte("x")
	f.objects["lake/other/part-00000.parquet"] = []byte("x")
	want = append(want, "d=1", "d=2")
	slices.Sort(want)

	var got []string
	var sizes []int
	err := st.ListPages(ctx, "", func(page []FileInfo) error {
		sizes = append(sizes, len(page))
		for _, e := range page {
			got = append(got, e.Name)
			if e.IsDir != strings.HasPrefix(e.Name, "d=") {
				t.Errorf("%s: IsDir %v", e.Name, e.IsDir)
			}
			var i int
			if _, err := fmt.Sscanf(e.Name, "part-%05d.parquet", &i); err == nil && (e.Size != int64(i%7) || e.ModTime.Year() != 2026) {
				t.Errorf("%s: size %d, time %v", e.Name, e.Size, e.ModTime)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) || fmt.Sprint(sizes) != "[1000 1000 502]" {
		t.Fatalf("ListPages: %d entries in pages %v (first %v), want %d in name order in [1000 1000 502]", len(got), sizes, got[:min(3, len(got))], len(want))
	}
	if fmt.Sprint(f.lists) != "[1000  1000 tbl/part-00997.parquet 1000 tbl/part-01997.parquet]" {
		t.Fatalf("ListObjectsV2 requests (max-keys, token): %q", f.lists)
	}
	all, err := st.List(ctx, "")
	if err != nil || len(all) != len(want) || all[0].Name != "d=1" || all[len(all)-1].Name != "part-02499.parquet" {
		t.Fatalf("List: %d entries, %v", len(all), err)
	}
}
