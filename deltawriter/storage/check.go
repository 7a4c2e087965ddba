package storage

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/aws/aws-sdk-go-v2/config"
	"golang.org/x/oauth2/google"
)

// CheckURI validates a table URI and its settings without any I/O: an absolute path,
// file:///abs/path, s3://bucket/path, gs://bucket/path, az://container/path or
// abfss://container@account.dfs.core.windows.net/path; an endpoint must be an http(s)
// URL and is not used for GCS; a region only for S3. The error says what to write.
func CheckURI(uri string, opts Options) error {
	if strings.HasPrefix(uri, "/") {
		return nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return fmt.Errorf("not a URI: %w", err)
	}
	switch u.Scheme {
	case "file":
		if !strings.HasPrefix(uri, "file:///") && !strings.HasPrefix(uri, "file://localhost/") {
			return errors.New("a file URI needs an absolute path: file:///abs/path")
		}
	case "s3", "s3a", "gs":
		if _, _, err := bucketPrefix(u); err != nil {
			return err
		}
	case "az", "abfss", "abfs":
		if _, _, _, err := parseAzureURI(u); err != nil {
			return err
		}
	default:
		return fmt.Errorf("scheme %q is not supported: use file:///abs/path, s3://bucket/path, gs://bucket/path, az://container/path or abfss://container@account.dfs.core.windows.net/path", u.Scheme)
	}
	if opts.Endpoint != "" {
		if u.Scheme == "file" || strings.HasPrefix(uri, "/") {
			return errors.New("storage.endpoint is set for a local table")
		}
		if u.Scheme == "gs" {
			return errors.New("storage.endpoint is not used for GCS: set STORAGE_EMULATOR_HOST for an emulator")
		}
		e, err := url.Parse(opts.Endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return fmt.Errorf("storage.endpoint %q is not an http(s) URL", opts.Endpoint)
		}
		if e.User != nil {
			return errors.New("storage.endpoint must not carry credentials (use the environment)")
		}
	}
	if opts.Region != "" && u.Scheme != "s3" && u.Scheme != "s3a" {
		return fmt.Errorf("storage.region is only used for s3:// tables")
	}
	return nil
}

// CheckCredentials resolves the credentials a table URI would use, without sending a
// request to the store and without returning or logging any secret. It returns a
// description of where they come from ("AWS EnvConfigCredentials", "GCS emulator", …)
// or an error naming what to set. Resolving may contact a local credential endpoint
// (EC2/ECS metadata, workload identity) as the SDKs do.
func CheckCredentials(ctx context.Context, uri string, opts Options) (string, error) {
	if err := CheckURI(uri, opts); err != nil {
		return "", err
	}
	u, _ := url.Parse(uri)
	switch {
	case strings.HasPrefix(uri, "/") || u.Scheme == "file":
		return "local filesystem", nil
	case u.Scheme == "s3" || u.Scheme == "s3a":
		var lopts []func(*config.LoadOptions) error
		if opts.Region != "" {
			lopts = append(lopts, config.WithRegion(opts.Region))
		}
		cfg, err := config.LoadDefaultConfig(ctx, lopts...)
		if err != nil {
			return "", fmt.Errorf("load AWS configuration: %w", err)
		}
		if cfg.Credentials == nil {
			return "", errors.New("no AWS credentials: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with a role (IRSA, instance profile)")
		}
		c, err := cfg.Credentials.Retrieve(ctx)
		if err != nil {
			return "", fmt.Errorf("no AWS credentials (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with a role): %w", err)
		}
		return "AWS " + c.Source, nil
	case u.Scheme == "gs":
		if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
			return "GCS emulator at " + h + " (no authentication)", nil
		}
		if _, err := google.FindDefaultCredentials(ctx, "https://www.googleapis.com/auth/devstorage.full_control"); err != nil {
			return "", fmt.Errorf("no Google application default credentials (set GOOGLE_APPLICATION_CREDENTIALS or run gcloud auth application-default login, or use workload identity): %w", err)
		}
		return "Google application default credentials", nil
	default: // Azure
		switch {
		case os.Getenv("AZURE_STORAGE_CONNECTION_STRING") != "" && opts.Endpoint == "":
			_, _, _, err := parseAzureURI(u)
			if err != nil {
				return "", err
			}
			if _, _, err := azureContainerClient("probe", "", ""); err != nil {
				return "", err
			}
			return "AZURE_STORAGE_CONNECTION_STRING", nil
		case os.Getenv("AZURE_STORAGE_KEY") != "":
			return "AZURE_STORAGE_KEY (shared key)", nil
		case os.Getenv("AZURE_STORAGE_SAS_TOKEN") != "":
			return "AZURE_STORAGE_SAS_TOKEN", nil
		}
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err == nil {
			_, err = cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://storage.azure.com/.default"}})
		}
		if err != nil {
			return "", fmt.Errorf("no Azure credential (set AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, or configure DefaultAzureCredential): %w", err)
		}
		return "DefaultAzureCredential", nil
	}
}
