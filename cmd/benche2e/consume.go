package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeCmd is the consume-only baseline: a franz-go client reads every partition of the
// topic from its start to the end offsets it had at start-up, counting records and value
// bytes, without decoding anything; then it reports its own /proc usage.
func consumeCmd(args []string) (result, error) {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	brokers := fs.String("brokers", os.Getenv("KAFKA_BROKERS"), "Kafka bootstrap servers, comma-separated")
	topic := fs.String("topic", "", "topic to read")
	label := fs.String("label", "consume-only (franz-go)", "row label")
	recordBytes := fs.Int("record-bytes", 0, "framed record size, for the table")
	brokerPID := fs.String("broker-pid", "", "the Kafka broker's pid: its CPU seconds over the run are reported too")
	if err := fs.Parse(args); err != nil {
		return result{}, err
	}
	ctx := context.Background()
	broker, err := startBrokerMeter(*brokerPID)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return result{}, fmt.Errorf("make Kafka client: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, *topic)
	if err != nil {
		return result{}, fmt.Errorf("list end offsets of %s: %w", *topic, err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	var got, bytes int64
	for got < want {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			return result{}, fmt.Errorf("poll %s: %w", *topic, err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got++; bytes += int64(len(r.Value)) })
	}
	wall := time.Since(start).Seconds()
	u, err := readProcUsage("self")
	if err != nil {
		return result{}, err
	}
	brokerCPU, err := broker.used()
	if err != nil {
		return result{}, err
	}
	return result{Label: *label, Topic: *topic, RecordBytes: *recordBytes, Records: got, Bytes: bytes,
		WallSeconds: wall, CPUSeconds: u.CPUSeconds, BrokerCPUSeconds: brokerCPU, PeakRSSMiB: u.PeakRSSMiB, RowsChecked: -1}, nil
}
