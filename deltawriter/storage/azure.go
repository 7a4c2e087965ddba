package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// Azure is a Store on Azure Blob Storage (and ADLS Gen2 accounts, through their Blob
// API, which also serves hierarchical-namespace accounts), through azblob.
//
// URIs: az://container/prefix (the account from the connection string, the endpoint or
// AZURE_STORAGE_ACCOUNT) and abfss://container@account.dfs.core.windows.net/prefix
// (mapped onto https://account.blob.core.windows.net/container/prefix).
//
//   - PutIfAbsent is Put Blob with If-None-Match: *: 409 BlobAlreadyExists (what Azure and
//     Azurite answer) or 412 ConditionNotMet → ErrExist.
//   - Create streams with UploadStream (8 MiB blocks, 2 in flight); If-None-Match is not
//     used there and the blob appears at Commit Block List, on Close.
//   - ListFrom uses StartFrom (inclusive; Azurite ignores it) and filters client-side.
//   - Credentials, in this order: AZURE_STORAGE_CONNECTION_STRING; AZURE_STORAGE_KEY (shared
//     key of the account); AZURE_STORAGE_SAS_TOKEN; DefaultAzureCredential (env service
//     principal, workload identity, managed identity, Azure CLI).
type Azure struct {
	cc        *container.Client
	account   string
	container string
	prefix    string
	base      string // az://container or abfss://container@account.dfs.core.windows.net
	probe     *probeOnce
	unprobed  bool
}

func openAzure(ctx context.Context, u *url.URL, opts Options) (*Azure, error) {
	cont, account, prefix, err := parseAzureURI(u)
	if err != nil {
		return nil, err
	}
	base := "az://" + cont // how the URI named the container, for URI and messages
	if u.Scheme != "az" {
		base = u.Scheme + "://" + cont + "@" + u.Host
	}
	cc, account, err := azureContainerClient(cont, account, opts.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("open store %s/%s: %w", base, prefix, err)
	}
	return &Azure{cc: cc, account: account, container: cont, prefix: prefix, base: base, probe: &probeOnce{}}, nil
}

// parseAzureURI returns container, account ("" when the URI does not name it) and key
// prefix of an az:// or abfss:// URI.
func parseAzureURI(u *url.URL) (cont, account, prefix string, err error) {
	prefix = strings.Trim(u.Path, "/")
	switch u.Scheme {
	case "az":
		if u.Host == "" || u.User != nil {
			return "", "", "", fmt.Errorf("open store %s://%s%s: write az://container/path", u.Scheme, u.Host, u.Path)
		}
		return u.Host, "", prefix, nil
	default: // abfss, abfs
		if u.User == nil || u.User.Username() == "" {
			return "", "", "", fmt.Errorf("open store %s://%s%s: write abfss://container@account.dfs.core.windows.net/path", u.Scheme, u.Host, u.Path)
		}
		if _, hasPw := u.User.Password(); hasPw {
			return "", "", "", fmt.Errorf("open store %s://%s@%s%s: credentials in the URI are not supported (use the environment)", u.Scheme, u.User.Username(), u.Host, u.Path)
		}
		host := u.Hostname()
		account, _, _ = strings.Cut(host, ".")
		if account == "" {
			return "", "", "", fmt.Errorf("open store %s://%s@%s%s: no account in the host", u.Scheme, u.User.Username(), host, u.Path)
		}
		return u.User.Username(), account, prefix, nil
	}
}

// azureContainerClient builds the container client from the credential sources listed
// at Azure. endpoint, when set, is the Blob service URL (Azurite:
// http://127.0.0.1:10000/devstoreaccount1).
func azureContainerClient(cont, account, endpoint string) (*container.Client, string, error) {
	if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); cs != "" && endpoint == "" {
		if csAccount := connStringAccount(cs); account != "" && csAccount != "" && !strings.EqualFold(account, csAccount) {
			return nil, "", fmt.Errorf("the URI names storage account %q but AZURE_STORAGE_CONNECTION_STRING is for account %q", account, csAccount)
		}
		cc, err := container.NewClientFromConnectionString(cs, cont, azureClientOptions())
		if err != nil {
			// The SDK's message may quote the string: never pass it on.
			return nil, "", errors.New("AZURE_STORAGE_CONNECTION_STRING is not a valid connection string")
		}
		return cc, account, nil
	}
	if account == "" {
		account = os.Getenv("AZURE_STORAGE_ACCOUNT")
	}
	if endpoint == "" {
		if account == "" {
			return nil, "", errors.New("no storage account: use abfss://container@account.dfs.core.windows.net/path, or set AZURE_STORAGE_ACCOUNT or AZURE_STORAGE_CONNECTION_STRING")
		}
		endpoint = "https://" + account + ".blob.core.windows.net"
	}
	curl := strings.TrimSuffix(endpoint, "/") + "/" + cont
	if key := os.Getenv("AZURE_STORAGE_KEY"); key != "" {
		if account == "" {
			return nil, "", errors.New("AZURE_STORAGE_KEY is set but no account: set AZURE_STORAGE_ACCOUNT")
		}
		cred, err := azblob.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, "", errors.New("AZURE_STORAGE_KEY is not a valid account key (base64)")
		}
		cc, err := container.NewClientWithSharedKeyCredential(curl, cred, azureClientOptions())
		return cc, account, err
	}
	if sas := os.Getenv("AZURE_STORAGE_SAS_TOKEN"); sas != "" {
		cc, err := container.NewClientWithNoCredential(curl+"?"+strings.TrimPrefix(sas, "?"), azureClientOptions())
		if err != nil {
			return nil, "", errors.New("AZURE_STORAGE_SAS_TOKEN does not make a valid container URL")
		}
		return cc, account, nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, "", fmt.Errorf("no Azure credential (set AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, or configure DefaultAzureCredential): %w", err)
	}
	cc, err := container.NewClient(curl, cred, azureClientOptions())
	return cc, account, err
}

// azureClientOptions bounds each try of a request (a commit, one 8 MiB block) to two
// minutes, so a store that never answers does not stall a commit; the SDK then retries.
func azureClientOptions() *container.ClientOptions {
	o := &container.ClientOptions{}
	o.Retry.TryTimeout = 2 * time.Minute
	return o
}

// connStringAccount returns the AccountName of an Azure connection string, or "".
func connStringAccount(cs string) string {
	for _, part := range strings.Split(cs, ";") {
		if k, v, ok := strings.Cut(part, "="); ok && strings.EqualFold(strings.TrimSpace(k), "AccountName") {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// URI implements Store: az://container/prefix, or the abfss:// form it was opened with.
func (a *Azure) URI() string { return a.baseURI() + "/" + a.prefix }

func (a *Azure) baseURI() string {
	if a.base == "" {
		return "az://" + a.container
	}
	return a.base
}

func (a *Azure) object(key string) string { return a.baseURI() + "/" + key }

func (a *Azure) key(op, p string) (string, error) {
	k, err := joinKey(a.prefix, p)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", op, p, err)
	}
	return k, nil
}

func (a *Azure) wrap(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%s %s: %w", op, a.object(key), err)
	}
	status, code := 0, ""
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		status, code = re.StatusCode, re.ErrorCode
	}
	class := classifyStatus(status, code)
	switch {
	case bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet):
		class = ErrExist
	case bloberror.HasCode(err, bloberror.BlobNotFound):
		class = ErrNotExist
	case class == nil && status == 0 && isNetworkError(ctx, err):
		class = ErrTransient
	}
	return &StoreError{Op: op, Object: a.object(key), Status: status, Code: code, Class: class, Err: err}
}

func (a *Azure) beforeWrite(ctx context.Context) error {
	if a.unprobed {
		return nil
	}
	return a.probe.check(ctx, func(ctx context.Context) error {
		v := *a
		v.unprobed = true
		return Probe(ctx, &v)
	})
}

// Get implements Store.
func (a *Azure) Get(ctx context.Context, p string) ([]byte, error) { return a.GetRange(ctx, p, 0, 0) }

// GetRange returns length bytes from offset off of the blob at p (the rest when
// length is 0).
func (a *Azure) GetRange(ctx context.Context, p string, off, length int64) ([]byte, error) {
	k, err := a.key("get", p)
	if err != nil {
		return nil, err
	}
	r, err := a.cc.NewBlobClient(k).DownloadStream(ctx, &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: off, Count: length}})
	if err != nil {
		return nil, a.wrap(ctx, "get", k, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, a.wrap(ctx, "get", k, err)
	}
	return b, nil
}

// Stat implements Store.
func (a *Azure) Stat(ctx context.Context, p string) (FileInfo, error) {
	k, err := a.key("stat", p)
	if err != nil {
		return FileInfo{}, err
	}
	pr, err := a.cc.NewBlobClient(k).GetProperties(ctx, nil)
	if err != nil {
		return FileInfo{}, a.wrap(ctx, "stat", k, err)
	}
	fi := FileInfo{Name: k[strings.LastIndexByte(k, '/')+1:]}
	if pr.ContentLength != nil {
		fi.Size = *pr.ContentLength
	}
	if pr.LastModified != nil {
		fi.ModTime = *pr.LastModified
	}
	return fi, nil
}

// List implements Store.
func (a *Azure) List(ctx context.Context, dir string) ([]FileInfo, error) {
	return a.ListFrom(ctx, dir, "")
}

// ListFrom implements ListerFrom.
func (a *Azure) ListFrom(ctx context.Context, dir, after string) ([]FileInfo, error) {
	var out []FileInfo
	if err := a.listPages(ctx, dir, after, gather(&out)); err != nil {
		return nil, err
	}
	return sortFilter(out, after), nil
}

// ListPages implements Store: one page per List Blobs request (maxresults MaxListPage,
// the pager carrying the marker).
func (a *Azure) ListPages(ctx context.Context, dir string, fn func(page []FileInfo) error) error {
	return a.listPages(ctx, dir, "", fn)
}

// listPages lists dir from the name `after` ("" for all; StartFrom is inclusive and
// Azurite ignores it, the callers filter), a List Blobs page at a time.
func (a *Azure) listPages(ctx context.Context, dir, after string, fn func(page []FileInfo) error) error {
	pfx, err := dirKey(a.prefix, dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	maxResults := int32(MaxListPage)
	o := &container.ListBlobsHierarchyOptions{Prefix: &pfx, MaxResults: &maxResults}
	if after != "" {
		s := pfx + after
		o.StartFrom = &s
	}
	page := make([]FileInfo, 0, MaxListPage)
	pg := a.cc.NewListBlobsHierarchyPager("/", o)
	for pg.More() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return a.wrap(ctx, "list", pfx, err)
		}
		page = page[:0]
		for _, b := range out.Segment.BlobItems {
			if b.Name == nil {
				continue
			}
			name := strings.TrimPrefix(*b.Name, pfx)
			if name == "" || strings.Contains(name, "/") {
				continue
			}
			fi := FileInfo{Name: name}
			if b.Properties != nil {
				if b.Properties.ContentLength != nil {
					fi.Size = *b.Properties.ContentLength
				}
				if b.Properties.LastModified != nil {
					fi.ModTime = *b.Properties.LastModified
				}
			}
			page = append(page, fi)
		}
		for _, bp := range out.Segment.BlobPrefixes {
			if bp.Name == nil {
				continue
			}
			if name := strings.TrimSuffix(strings.TrimPrefix(*bp.Name, pfx), "/"); name != "" {
				page = append(page, FileInfo{Name: name, IsDir: true})
			}
		}
		if err := emitPage(page, fn); err != nil {
			return err
		}
	}
	return nil
}

// Put implements Store (Put Blob replaces atomically).
func (a *Azure) Put(ctx context.Context, p string, data []byte) error {
	return a.put(ctx, p, data, false)
}

// PutIfAbsent implements Store: Put Blob with If-None-Match: *.
func (a *Azure) PutIfAbsent(ctx context.Context, p string, data []byte) error {
	return a.put(ctx, p, data, true)
}

func (a *Azure) put(ctx context.Context, p string, data []byte, ifAbsent bool) error {
	k, err := a.key("put", p)
	if err != nil {
		return err
	}
	if err := a.beforeWrite(ctx); err != nil {
		return err
	}
	var o blockblob.UploadOptions
	if ifAbsent {
		any := azcore.ETagAny
		o.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &any}}
	}
	_, err = a.cc.NewBlockBlobClient(k).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), &o)
	return a.wrap(ctx, "put", k, err)
}

// Delete implements Deleter.
func (a *Azure) Delete(ctx context.Context, p string) error {
	k, err := a.key("delete", p)
	if err != nil {
		return err
	}
	_, err = a.cc.NewBlobClient(k).Delete(ctx, nil)
	if err = a.wrap(ctx, "delete", k, err); errors.Is(err, ErrNotExist) {
		return nil
	}
	return err
}

// Create implements Store with UploadStream through a pipe.
func (a *Azure) Create(ctx context.Context, p string) (Writer, error) {
	k, err := a.key("create", p)
	if err != nil {
		return nil, err
	}
	if err := a.beforeWrite(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	w := &pipeWriter{pw: pw, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		_, err := a.cc.NewBlockBlobClient(k).UploadStream(ctx, pr, &blockblob.UploadStreamOptions{BlockSize: 8 << 20, Concurrency: 2})
		w.err = a.wrap(ctx, "upload", k, err)
		pr.CloseWithError(errUploadEnded)
	}()
	return w, nil
}
