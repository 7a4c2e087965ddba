package ingest

import (
	"context"
	"fmt"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
)

// InspectDLQ streams the whole dead-letter topic of cfg (up to its end offsets now) and
// counts this pipeline's records by reason, field, schema id and replay count, keeping up
// to samples records of each reason (only of reasons, when not empty) decoded with their
// own writer schema (dlq.Inspect); its memory is the reader's fetch buffer
// (kafkaclient.DLQFetchBytes of batch.max_bytes) and the samples, whatever the topic's size. It reads only; nothing is committed or produced. Errors: the
// pipeline has no dead_letter.topic, the client cannot be made, or dlq.Inspect's.
func InspectDLQ(ctx context.Context, cfg *config.Config, deps Deps, samples int, reasons []string) (*dlq.Report, error) {
	if cfg.DeadLetter.Topic == "" {
		return nil, fmt.Errorf("inspect %s: the pipeline has no dead_letter.topic", cfg.Name)
	}
	cl, err := deps.kafkaClients(cfg, deps.Logger).InspectReader()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := checkRead(ctx, cl, cfg.Kafka, cfg.DeadLetter.Topic); err != nil {
		return nil, err
	}
	return dlq.Inspect(ctx, cl, dlq.InspectOptions{Topic: cfg.DeadLetter.Topic, Pipeline: cfg.Name, Samples: samples, Reasons: reasons,
		Schemas: deps.Schemas, Framed: deps.Framed, Format: cfg.Format, Log: deps.Logger, FetchError: readFatal(cfg.Kafka, cfg.DeadLetter.Topic)})
}

// readFatal is the fetch-error check of a dead-letter topic read (dlq.ReadToEnd): a
// security failure (no READ on topic, authentication) ends the read with a
// *kafkaclient.SecurityError naming k's principal; other fetch errors are logged and retried.
func readFatal(k config.Kafka, topic string) func(error) error {
	return func(err error) error { return kafkaclient.AsSecurityError(k, "READ on topic "+topic, err) }
}
