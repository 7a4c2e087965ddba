package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/ingest"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
	"github.com/ingestd/ingestd/internal/backoff"
)

const demoProduceSummary = `Produce the demo's orders to a real Kafka topic through a real schema registry: --v1
records with schema v1, then --v2 records with schema v2 (adds the nullable field
channel), keyed by order id from 1, Confluent-framed, both schemas registered under the
subject <topic>-value. The same records ` + "`ingestd demo`" + ` produces in-process; the
example pipelines of configs/ consume them.

Where to produce comes from a pipeline file (--config: brokers, kafka.tls and kafka.sasl,
the registry with its auth, the first topic), from --brokers, --registry and --topic, or
from both (a flag overrides the file). The broker and the registry are waited for up to
--wait, as they may still be starting.`

// cmdDemoProduce is `ingestd demo produce`.
func cmdDemoProduce(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo produce", "demo produce [--config PIPELINE.yaml] [--brokers HOST:PORT,…] [--registry URL] [--topic T] [flags]", demoProduceSummary, stderr)
	configFlag := fs.String("config", "", "a pipeline `file` to take the brokers, security, registry and topic from")
	brokers := fs.String("brokers", "", "seed brokers, `host:port[,host:port…]` (overrides the pipeline file's)")
	registry := fs.String("registry", "", "schema registry `URL`, e.g. http://127.0.0.1:8081/apis/ccompat/v7 for Apicurio (overrides the pipeline file's)")
	topic := fs.String("topic", "", "the `topic` to produce to (default: the pipeline file's first topic)")
	v1 := fs.Int("v1", 1000, "records produced with schema v1")
	v2 := fs.Int("v2", 200, "records produced with schema v2 (adds channel) after the v1 records")
	ifEmpty := fs.Bool("if-empty", false, "produce only if the topic holds no record yet (a one-shot container that may be started again)")
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for the broker and the registry, all told")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	target, code := demoTarget(*configFlag, *brokers, *registry, *topic, fs, stderr)
	if target == nil {
		return code
	}
	if *v1 < 0 || *v2 < 0 {
		fmt.Fprintln(stderr, "ingestd demo produce: --v1 and --v2 must not be negative")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	msg, err := demoProduce(ctx, target, *v1, *v2, *ifEmpty)
	if err != nil {
		fmt.Fprintf(stderr, "ingestd demo produce: %v\n", err)
		return exitFailure
	}
	fmt.Fprintln(stdout, msg)
	return exitOK
}

// demoTarget is where `demo produce` writes: the pipeline file's kafka and
// schema_registry blocks and first topic, with the flags' values over them. A missing
// piece is a usage error naming the flag.
func demoTarget(file, brokers, registry, topic string, fs *flag.FlagSet, stderr io.Writer) (*config.Config, int) {
	cfg := &config.Config{}
	if file != "" {
		c, code := onePipeline(file, "", stderr)
		if c == nil {
			return nil, code
		}
		cfg = c
	}
	if brokers != "" {
		cfg.Kafka.Brokers = strings.Split(brokers, ",")
	}
	if topic != "" {
		cfg.Kafka.Topics = []string{topic}
	}
	if registry != "" {
		if cfg.SchemaRegistry == nil {
			cfg.SchemaRegistry = &config.Registry{}
		}
		cfg.SchemaRegistry.URL = registry
	}
	var missing []string
	if len(cfg.Kafka.Brokers) == 0 {
		missing = append(missing, "--brokers")
	}
	if cfg.SchemaRegistry == nil || cfg.SchemaRegistry.URL == "" {
		missing = append(missing, "--registry")
	}
	if len(cfg.Kafka.Topics) == 0 {
		missing = append(missing, "--topic")
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "ingestd demo produce: give --config PIPELINE.yaml or %s\n", strings.Join(missing, ", "))
		fs.Usage()
		return nil, exitUsage
	}
	return cfg, exitOK
}

// demoProduce produces the demo's orders to cfg's first topic and returns what it did,
// in one line. With ifEmpty, a topic that holds records already is left alone.
func demoProduce(ctx context.Context, cfg *config.Config, nV1, nV2 int, ifEmpty bool) (string, error) {
	topic := cfg.Kafka.Topics[0]
	sec, err := kafkaclient.SecurityOpts(cfg.Kafka, nil)
	if err != nil {
		return "", err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Kafka.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}, sec...)...)
	if err != nil {
		return "", fmt.Errorf("create producer: %w", err)
	}
	defer cl.Close()
	if ifEmpty {
		n, err := topicRecords(ctx, kadm.NewClient(cl), topic)
		if err != nil {
			return "", err
		}
		if n > 0 {
			return fmt.Sprintf("topic %s already holds %d records: nothing produced (--if-empty)", topic, n), nil
		}
	}
	reg, err := ingest.NewRegistryClient(cfg.SchemaRegistry)
	if err != nil {
		return "", err
	}
	ids, err := produceOrders(ctx, cl, reg, topic, nV1, nV2)
	var re *sr.ResponseError
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return "", fmt.Errorf("%w (create the topic first: kafka-topics.sh --bootstrap-server %s --create --topic %s --partitions 3)", err, cfg.Kafka.Brokers[0], topic)
	case errors.As(err, &re) && re.StatusCode == http.StatusNotFound:
		return "", fmt.Errorf("%w (is %s the registry's Confluent-compatible API? Apicurio's ends in /apis/ccompat/v7)", err, cfg.SchemaRegistry.URL)
	case err != nil:
		return "", err
	}
	return fmt.Sprintf("produced %d orders to %s: %d with schema v1 (id %d), then %d with schema v2 (id %d, adds channel); subject %s-value at %s",
		nV1+nV2, topic, nV1, ids[0], nV2, ids[1], topic, cfg.SchemaRegistry.URL), nil
}

// topicRecords is the number of records topic holds (the sum of its partitions' end
// offsets minus start offsets). A broker that does not answer yet, or a topic not
// created yet, is asked again with backoff until ctx ends; a Kafka error that is not
// retriable (a failed SASL login, a missing ACL) is returned at once.
func topicRecords(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	for attempt := 0; ; attempt++ {
		n, err := func() (int64, error) {
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err == nil {
				err = ends.Error()
			}
			if err != nil {
				return 0, err
			}
			starts, err := adm.ListStartOffsets(ctx, topic)
			if err == nil {
				err = starts.Error()
			}
			if err != nil {
				return 0, err
			}
			var n int64
			ends.Each(func(o kadm.ListedOffset) {
				if s, ok := starts.Lookup(o.Topic, o.Partition); ok {
					n += o.Offset - s.Offset
				}
			})
			return n, nil
		}()
		if err == nil {
			return n, nil
		}
		if ke := (*kerr.Error)(nil); errors.As(err, &ke) && !ke.Retriable {
			return 0, fmt.Errorf("list offsets of %s: %w", topic, err)
		}
		if werr := backoff.Default.Sleep(ctx, attempt); werr != nil {
			return 0, fmt.Errorf("list offsets of %s: %w", topic, errors.Join(err, werr))
		}
	}
}
