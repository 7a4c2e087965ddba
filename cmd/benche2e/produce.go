package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceResult is what `benche2e produce` prints (one JSON object): the topic's data.
type produceResult struct {
	Topic       string  `json:"topic"`
	Partitions  int32   `json:"partitions"`
	Records     int64   `json:"records"`
	Format      string  `json:"format"`       // avro, protobuf, json or json_schema
	RecordBytes int     `json:"record_bytes"` // value size of a record (Avro: every record's; other formats: the mean, rounded)
	Bytes       int64   `json:"bytes"`        // the values' total size
	Compression string  `json:"compression"`
	SchemaID    uint32  `json:"schema_id"`
	Seconds     float64 `json:"seconds"`
	RateLimit   float64 `json:"rate_limit,omitempty"` // records/s asked for; 0 = as fast as possible
}

func produceCmd(args []string) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	brokers := fs.String("brokers", os.Getenv("KAFKA_BROKERS"), "Kafka bootstrap servers, comma-separated")
	registry := fs.String("registry", os.Getenv("SCHEMA_REGISTRY_URL"), "Confluent-compatible schema registry URL (with its path)")
	topic := fs.String("topic", "", "topic to create (with <topic>.dlq, 1 partition) and fill; must not exist")
	partitions := fs.Int("partitions", 4, "partitions of the topic")
	n := fs.Int64("n", 1_000_000, "records to produce (0: only register the schema and create the topic)")
	existing := fs.Bool("existing", false, "the topic exists already (made by an earlier -n 0): do not create it")
	size := fs.Int("size", 200, "framed record size in bytes (200, or e.g. 1024)")
	compression := fs.String("compression", "none", "producer compression: none or lz4")
	rate := fs.Float64("rate", 0, "records per second (0: as fast as possible); records are stamped (field ts) when made")
	format := fs.String("format", formatAvro, "record format: avro (Confluent-framed), protobuf (Confluent-framed), json (plain) or json_schema (Confluent-framed JSON); the same record, its note as long as in the Avro record of -size")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *topic == "" || *brokers == "" || *registry == "" {
		return fmt.Errorf("produce: -topic, -brokers (or KAFKA_BROKERS) and -registry (or SCHEMA_REGISTRY_URL) are required")
	}
	var codec kgo.CompressionCodec
	switch *compression {
	case "none":
		codec = kgo.NoCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	default:
		return fmt.Errorf("produce: -compression %q is not none or lz4", *compression)
	}
	ctx := context.Background()
	var id uint32
	var err error
	switch *format {
	case formatAvro:
		id, err = registerSchema(ctx, *registry, *topic+"-value", recordSchema, "")
	case formatProtobuf:
		id, err = registerSchema(ctx, *registry, *topic+"-value", recordProto, "PROTOBUF")
	case formatJSONSchema:
		id, err = registerSchema(ctx, *registry, *topic+"-value", recordJSONSchema, "JSON")
	case formatJSON: // no registry
	default:
		return fmt.Errorf("produce: -format %q is not avro, protobuf, json or json_schema", *format)
	}
	if err != nil {
		return err
	}
	enc, err := newEncoder(id, *size)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(200_000))
	if err != nil {
		return fmt.Errorf("make Kafka client: %w", err)
	}
	defer cl.Close()
	if !*existing {
		// <topic>.dlq is the dead-letter topic of ingestd's pipeline (it must exist at start-up).
		adm := kadm.NewClient(cl)
		for _, t := range []struct {
			name       string
			partitions int32
		}{{*topic, int32(*partitions)}, {*topic + ".dlq", 1}} {
			resp, err := adm.CreateTopic(ctx, t.partitions, 1, nil, t.name)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				return fmt.Errorf("create topic %s: %w", t.name, err)
			}
		}
		// CreateTopics returns before every broker's metadata has the topics: wait until both
		// have a leader for every partition, or ingestd's start-up check may not find the
		// dead-letter topic yet (it refuses to start without it).
		if err := waitTopics(ctx, adm, *topic, *topic+".dlq"); err != nil {
			return err
		}
	}

	start := time.Now()
	var failed atomic.Pointer[error]
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	var total atomic.Int64
	var perTick int64 = 1 << 62
	tick := 10 * time.Millisecond
	if *rate > 0 {
		perTick = max(1, int64(*rate*tick.Seconds()))
	}
	next := start
	for i := int64(0); i < *n; {
		end := min(*n, i+perTick)
		for ; i < end; i++ {
			v := enc.appendFormat(*format, make([]byte, 0, *size+128), i, time.Now().UnixMicro())
			total.Add(int64(len(v)))
			cl.Produce(ctx, &kgo.Record{Topic: *topic, Partition: int32(i % int64(*partitions)), Value: v}, done)
		}
		if *rate > 0 {
			next = next.Add(tick)
			time.Sleep(time.Until(next))
		}
		if p := failed.Load(); p != nil {
			return fmt.Errorf("produce to %s: %w", *topic, *p)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush producer: %w", err)
	}
	if p := failed.Load(); p != nil {
		return fmt.Errorf("produce to %s: %w", *topic, *p)
	}
	recordBytes := *size
	if *n > 0 {
		recordBytes = int((total.Load() + *n/2) / *n)
	}
	return json.NewEncoder(os.Stdout).Encode(produceResult{Topic: *topic, Partitions: int32(*partitions), Records: *n,
		Format: *format, RecordBytes: recordBytes, Bytes: total.Load(), Compression: *compression, SchemaID: id,
		Seconds: time.Since(start).Seconds(), RateLimit: *rate})
}

// registerSchema registers schema under subject with the Confluent registry API
// (POST /subjects/{subject}/versions) and returns its id; schemaType is "" for Avro, else
// PROTOBUF or JSON.
func registerSchema(ctx context.Context, url, subject, schema, schemaType string) (uint32, error) {
	req0 := map[string]string{"schema": schema}
	if schemaType != "" {
		req0["schemaType"] = schemaType
	}
	body, _ := json.Marshal(req0)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(url, "/")+"/subjects/"+subject+"/versions", bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("register schema %s: %w", subject, err)
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("register schema %s: %w", subject, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("register schema %s: registry answered %s: %s", subject, resp.Status, b)
	}
	var out struct {
		ID uint32 `json:"id"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.ID == 0 {
		return 0, fmt.Errorf("register schema %s: no id in %q", subject, b)
	}
	return out.ID, nil
}

// waitTopics polls the metadata until every partition of each topic has a leader, for at
// most 30 s. Errors: the last metadata error, or a timeout naming the topic not ready.
func waitTopics(ctx context.Context, adm *kadm.Client, topics ...string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		details, err := adm.ListTopics(ctx, topics...)
		notReady := ""
		if err == nil {
			for _, name := range topics {
				td, ok := details[name]
				if !ok || td.Err != nil || len(td.Partitions) == 0 {
					notReady = name
					break
				}
				for _, pd := range td.Partitions {
					if pd.Err != nil || pd.Leader < 0 {
						notReady = name
					}
				}
			}
			if notReady == "" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("wait for topics %v: %w", topics, err)
			}
			return fmt.Errorf("wait for topics %v: %s has no leader for every partition after 30 s", topics, notReady)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
