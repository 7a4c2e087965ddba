package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3 is a Store on Amazon S3 or an S3-compatible server, through aws-sdk-go-v2.
//
//   - PutIfAbsent is PutObject with If-None-Match: * (AWS S3 since 2024-08): 412
//     PreconditionFailed → ErrExist; 409 ConditionalRequestConflict (a concurrent
//     operation on the key; the SDK does not retry it) is re-sent with jittered backoff
//     up to conflictRetries times, then returned as ErrTransient. An SDK retry of a put
//     that landed comes back as ErrExist: the caller reads the object back
//     (deltawriter's Commit compares commitInfo.txnId).
//   - Create streams through the transfer manager: one PutObject below 16 MiB, else a
//     multipart upload of 8 MiB parts (at most 5 in flight), so memory stays bounded.
//   - List and ListPages use ListObjectsV2 with a delimiter, ListFrom its StartAfter
//     (exclusive); List's result and each page are sorted client-side as well (directory
//     buckets do not sort).
//   - With an endpoint (Options.Endpoint, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL),
//     path-style addressing is used and checksums are sent only when required (many
//     S3-compatible servers reject the SDK's default CRC trailers).
//
// Errors are *StoreError values classed as documented at ErrTransient.
type S3 struct {
	client   *s3.Client
	tm       *transfermanager.Client
	bucket   string
	prefix   string
	endpoint string // "" for AWS itself
	probe    *probeOnce
	unprobed bool // the probe's own view: writes skip the probe
}

// requestAnswerTimeout bounds the wait for the start of an answer to a sent request.
const requestAnswerTimeout = time.Minute

func openS3(ctx context.Context, u *url.URL, opts Options) (*S3, error) {
	bucket, prefix, err := bucketPrefix(u)
	if err != nil {
		return nil, err
	}
	var lopts []func(*config.LoadOptions) error
	if opts.Region != "" {
		lopts = append(lopts, config.WithRegion(opts.Region))
	}
	// A store that accepts a request and never answers must not stall a commit forever:
	// the answer to a fully sent request (a commit, one 8 MiB part) must start within a
	// minute; the SDK then retries, or the caller does.
	lopts = append(lopts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.ResponseHeaderTimeout = requestAnswerTimeout
	})))
	cfg, err := config.LoadDefaultConfig(ctx, lopts...)
	if err != nil {
		return nil, fmt.Errorf("open store s3://%s/%s: load AWS configuration: %w", bucket, prefix, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	st := &S3{bucket: bucket, prefix: prefix, probe: &probeOnce{}}
	st.client = s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		if o.BaseEndpoint != nil {
			st.endpoint = *o.BaseEndpoint
			o.UsePathStyle = true
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	st.tm = transfermanager.New(st.client, func(o *transfermanager.Options) {
		if st.endpoint != "" {
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		}
	})
	return st, nil
}

// URI implements Store: s3://bucket/prefix.
func (s *S3) URI() string { return "s3://" + s.bucket + "/" + s.prefix }

// Endpoint returns the custom endpoint, or "" for AWS.
func (s *S3) Endpoint() string { return s.endpoint }

func (s *S3) object(key string) string { return "s3://" + s.bucket + "/" + key }

// wrap turns an SDK error into a *StoreError (nil stays nil).
func (s *S3) wrap(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%s %s: %w", op, s.object(key), err)
	}
	status, code := 0, ""
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	class := classifyStatus(status, code)
	switch {
	case code == "PreconditionFailed" || status == 412:
		class = ErrExist
	case code == "OperationAborted":
		class = ErrTransient
	case class == nil && status == 0 && isNetworkError(ctx, err):
		class = ErrTransient
	}
	return &StoreError{Op: op, Object: s.object(key), Status: status, Code: code, Class: class, Err: err}
}

func (s *S3) key(op, p string) (string, error) {
	k, err := joinKey(s.prefix, p)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", op, p, err)
	}
	return k, nil
}

// beforeWrite runs the put-if-absent probe once per store, before its first write.
func (s *S3) beforeWrite(ctx context.Context) error {
	if s.unprobed {
		return nil
	}
	return s.probe.check(ctx, func(ctx context.Context) error {
		v := *s
		v.unprobed = true
		return Probe(ctx, &v)
	})
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, p string) ([]byte, error) {
	k, err := s.key("get", p)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &k})
	if err != nil {
		return nil, s.wrap(ctx, "get", k, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, s.wrap(ctx, "get", k, err)
	}
	return b, nil
}

// GetRange returns length bytes of the object at p from offset off (a ranged GET).
func (s *S3) GetRange(ctx context.Context, p string, off, length int64) ([]byte, error) {
	k, err := s.key("get", p)
	if err != nil {
		return nil, err
	}
	rng := fmt.Sprintf("bytes=%d-%d", off, off+length-1)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &k, Range: &rng})
	if err != nil {
		return nil, s.wrap(ctx, "get", k, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, s.wrap(ctx, "get", k, err)
	}
	return b, nil
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, p string) (FileInfo, error) {
	k, err := s.key("stat", p)
	if err != nil {
		return FileInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &k})
	if err != nil {
		return FileInfo{}, s.wrap(ctx, "stat", k, err)
	}
	fi := FileInfo{Name: k[strings.LastIndexByte(k, '/')+1:], Size: aws.ToInt64(out.ContentLength)}
	if out.LastModified != nil {
		fi.ModTime = *out.LastModified
	}
	return fi, nil
}

// List implements Store.
func (s *S3) List(ctx context.Context, dir string) ([]FileInfo, error) {
	return s.ListFrom(ctx, dir, "")
}

// ListFrom implements ListerFrom with ListObjectsV2 StartAfter.
func (s *S3) ListFrom(ctx context.Context, dir, after string) ([]FileInfo, error) {
	var out []FileInfo
	if err := s.listPages(ctx, dir, after, gather(&out)); err != nil {
		return nil, err
	}
	return sortFilter(out, after), nil
}

// ListPages implements Store: one page per ListObjectsV2 request (MaxKeys MaxListPage,
// the paginator carrying the continuation token).
func (s *S3) ListPages(ctx context.Context, dir string, fn func(page []FileInfo) error) error {
	return s.listPages(ctx, dir, "", fn)
}

// listPages lists dir after the name `after` (exclusive; "" for all), a ListObjectsV2
// page at a time.
func (s *S3) listPages(ctx context.Context, dir, after string, fn func(page []FileInfo) error) error {
	pfx, err := dirKey(s.prefix, dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &pfx, Delimiter: aws.String("/"), MaxKeys: aws.Int32(MaxListPage)}
	if after != "" {
		in.StartAfter = aws.String(pfx + after)
	}
	page := make([]FileInfo, 0, MaxListPage)
	pg := s3.NewListObjectsV2Paginator(s.client, in)
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return s.wrap(ctx, "list", pfx, err)
		}
		page = page[:0]
		for _, o := range out.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), pfx)
			if name == "" || strings.Contains(name, "/") {
				continue
			}
			fi := FileInfo{Name: name, Size: aws.ToInt64(o.Size)}
			if o.LastModified != nil {
				fi.ModTime = *o.LastModified
			}
			page = append(page, fi)
		}
		for _, cp := range out.CommonPrefixes {
			name := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), pfx), "/")
			if name != "" {
				page = append(page, FileInfo{Name: name, IsDir: true})
			}
		}
		if err := emitPage(page, fn); err != nil {
			return err
		}
	}
	return nil
}

// Put implements Store (PutObject; S3 replaces objects atomically).
func (s *S3) Put(ctx context.Context, p string, data []byte) error {
	k, err := s.key("put", p)
	if err != nil {
		return err
	}
	if err := s.beforeWrite(ctx); err != nil {
		return err
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &k, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
	return s.wrap(ctx, "put", k, err)
}

// PutIfAbsent implements Store: PutObject with If-None-Match: *.
func (s *S3) PutIfAbsent(ctx context.Context, p string, data []byte) error {
	k, err := s.key("put", p)
	if err != nil {
		return err
	}
	if err := s.beforeWrite(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: &k, Body: bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))), IfNoneMatch: aws.String("*"),
		})
		err = s.wrap(ctx, "put", k, err)
		var se *StoreError
		// 409 ConditionalRequestConflict: nothing landed, retry the same put.
		if attempt < conflictRetries && errors.As(err, &se) && se.Status == 409 && se.Code != "" && errors.Is(err, ErrTransient) {
			if berr := retryPolicy.Sleep(ctx, attempt); berr != nil {
				return err
			}
			continue
		}
		return err
	}
}

// Delete implements Deleter.
func (s *S3) Delete(ctx context.Context, p string) error {
	k, err := s.key("delete", p)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &k})
	if err = s.wrap(ctx, "delete", k, err); errors.Is(err, ErrNotExist) {
		return nil
	}
	return err
}

// DeleteBatch implements BatchDeleter with one DeleteObjects request (quiet mode: only
// the keys that failed are reported; a missing key is not a failure).
func (s *S3) DeleteBatch(ctx context.Context, paths []string) (int, error) {
	if len(paths) > MaxDeleteBatch {
		return 0, fmt.Errorf("delete %d objects: at most %d per request", len(paths), MaxDeleteBatch)
	}
	ids := make([]types.ObjectIdentifier, len(paths))
	for i, p := range paths {
		k, err := s.key("delete", p)
		if err != nil {
			return 0, err
		}
		ids[i] = types.ObjectIdentifier{Key: aws.String(k)}
	}
	out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &s.bucket,
		Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
	if err != nil {
		return 0, s.wrap(ctx, "delete", fmt.Sprintf("%d objects", len(paths)), err)
	}
	if len(out.Errors) > 0 {
		e := out.Errors[0]
		return len(paths) - len(out.Errors), fmt.Errorf("delete %s: %s: %s (and %d more failed)", aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors)-1)
	}
	return len(paths), nil
}

// Create implements Store: the bytes written stream to the transfer manager's
// UploadObject through a pipe; Close waits for the upload (the object appears only
// then: one PutObject, or CompleteMultipartUpload); Abort cancels it, and the transfer
// manager aborts a multipart upload it started.
func (s *S3) Create(ctx context.Context, p string) (Writer, error) {
	k, err := s.key("create", p)
	if err != nil {
		return nil, err
	}
	if err := s.beforeWrite(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	w := &pipeWriter{pw: pw, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		_, err := s.tm.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: &s.bucket, Key: &k, Body: pr})
		w.err = s.wrap(ctx, "upload", k, err)
		pr.CloseWithError(errUploadEnded) // unblock a writer if the upload stopped reading
	}()
	return w, nil
}

var errUploadEnded = errors.New("upload ended")

type pipeWriter struct {
	pw     *io.PipeWriter
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	closed bool
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	n, err := w.pw.Write(b)
	if err != nil {
		<-w.done
		if w.err != nil {
			return n, w.err
		}
		return n, fmt.Errorf("write: %w", err)
	}
	return n, nil
}

// Close finishes the upload and returns its error.
func (w *pipeWriter) Close() error {
	if w.closed {
		return errors.New("close: writer already closed")
	}
	w.closed = true
	w.pw.Close()
	<-w.done
	w.cancel()
	return w.err
}

// Abort discards the upload.
func (w *pipeWriter) Abort() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.pw.CloseWithError(errors.New("upload aborted"))
	w.cancel()
	<-w.done
	return nil
}
