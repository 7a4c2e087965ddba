package ingest

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/ingest/config"
)

// NewRegistryClient returns a client of the schema registry r, configured as a pipeline's
// own (the URL, a 10 s HTTP timeout, schema_registry.tls, basic auth or a Bearer token
// re-read on every request), for commands that talk to the registry outside a pipeline
// (`ingestd demo produce`). Errors: "configure schema_registry.tls: …" (an unreadable or
// invalid CA or key pair), "create registry client: …".
func NewRegistryClient(r *config.Registry) (*sr.Client, error) {
	opts, err := registryClientOpts(r)
	if err != nil {
		return nil, err
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("create registry client: %w", err)
	}
	return cl, nil
}
