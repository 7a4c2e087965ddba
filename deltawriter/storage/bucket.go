package storage

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/googleapi"
)

// CreateBucket creates the bucket (S3, GCS) or container (Azure) of a table URI if it does
// not exist yet; it does nothing for local tables. It is meant for emulators and test
// set-up (GCS buckets are created in project "ingestd-test"): production buckets are
// made by their owners with the settings (region, retention, lifecycle) they need.
func CreateBucket(ctx context.Context, uri string, opts Options) error {
	st, err := OpenWith(ctx, uri, opts)
	if err != nil {
		return err
	}
	switch s := st.(type) {
	case *S3:
		_, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.bucket})
		var se *StoreError
		if err = s.wrap(ctx, "create bucket", "", err); errors.As(err, &se) && (se.Code == "BucketAlreadyOwnedByYou" || se.Code == "BucketAlreadyExists") {
			return nil
		}
		return err
	case *GCS:
		err := s.client.Bucket(s.bucket).Create(ctx, "ingestd-test", nil)
		var ge *googleapi.Error
		if errors.As(err, &ge) && ge.Code == 409 {
			return nil
		}
		return s.wrap(ctx, "create bucket", "", err)
	case *Azure:
		_, err := s.cc.Create(ctx, nil)
		if bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
			return nil
		}
		return s.wrap(ctx, "create container", "", err)
	case *Local:
		return nil
	}
	return fmt.Errorf("create bucket of %s: unsupported store", (&url.URL{Path: uri}).Redacted())
}
