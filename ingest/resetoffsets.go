package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
)

// OffsetReset is one partition's txn moved by ResetOffsets: the pipeline read it from
// offset From (-1: the table held no txn for it) and will read it from offset To.
type OffsetReset struct {
	Partition int32
	From, To  int64
}

// TxnAppID is the Delta txn appId under which the pipeline with app id appID records
// its progress in partition of topic (docs/architecture.md, "Exactly-once").
func TxnAppID(appID, topic string, partition int32) string {
	return txnAppIDPrefix(appID, topic) + strconv.Itoa(int(partition))
}

// txnAppIDPrefix is what the txn appIds of topic's partitions start with.
func txnAppIDPrefix(appID, topic string) string { return appID + "-" + topic + "-" }

// ResetOffsets makes the pipeline of cfg read topic's partitions from offset next on (0:
// from the start of a topic created again; Kafka moves an offset before a partition's
// log start to the log start): one commit of the table whose txn actions (PROTOCOL.md,
// "Transaction Identifiers") set the version of each partition's appId to next-1, and
// whose commitInfo operation is "RESET OFFSETS". partitions nil means every partition of
// topic the table holds a txn for. It returns the partitions moved, in order, and the
// version committed. Errors: a negative next; no txn of topic in the table when
// partitions is nil; the commit's (a concurrent commit of a running pipeline for the
// same partitions fails it: stop the pipeline first).
//
// It is the fix of a partition halted with ReasonTxnBeyondLogEnd, and the way to read a
// range of a topic again into the table (duplicates are then the operator's choice).
func ResetOffsets(ctx context.Context, cfg *config.Config, table *deltawriter.Table, topic string, partitions []int32, next int64) ([]OffsetReset, int64, error) {
	if next < 0 {
		return nil, 0, fmt.Errorf("reset offsets: offset %d is negative", next)
	}
	snap, err := table.Snapshot(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("reset offsets: read the table: %w", err)
	}
	if partitions == nil {
		prefix := txnAppIDPrefix(cfg.AppID, topic)
		for id := range snap.Txns {
			if rest, ok := strings.CutPrefix(id, prefix); ok {
				if n, err := strconv.ParseInt(rest, 10, 32); err == nil && n >= 0 && strconv.FormatInt(n, 10) == rest {
					partitions = append(partitions, int32(n))
				}
			}
		}
		if len(partitions) == 0 {
			return nil, 0, fmt.Errorf("reset offsets: the table holds no txn of topic %s under app id %s (appIds %s<partition>): name the partitions", topic, cfg.AppID, prefix)
		}
	}
	slices.Sort(partitions)
	partitions = slices.Compact(partitions)
	out := make([]OffsetReset, len(partitions))
	txns := make([]deltalog.Txn, len(partitions))
	list := make([]string, len(partitions))
	for i, part := range partitions {
		id := TxnAppID(cfg.AppID, topic, part)
		from := int64(-1)
		if v, ok := snap.Txns[id]; ok {
			from = v + 1
		}
		out[i] = OffsetReset{Partition: part, From: from, To: next}
		txns[i] = deltalog.Txn{AppID: id, Version: next - 1}
		list[i] = strconv.Itoa(int(part))
	}
	v, err := table.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Txns: txns,
		Operation: "RESET OFFSETS", EngineInfo: engineInfo + " table reset-offsets",
		OperationParameters: map[string]string{"topic": topic, "partitions": strings.Join(list, ","), "offset": strconv.FormatInt(next, 10)},
		OperationMetrics:    map[string]string{}})
	if err != nil {
		return nil, 0, fmt.Errorf("reset offsets: commit: %w", err)
	}
	return out, v, nil
}

// checkResetTimeout bounds CheckOffsetReset's requests (a cluster that does not answer).
const checkResetTimeout = 30 * time.Second

// CheckOffsetReset checks on the cluster, before ResetOffsets, what would make a reset
// of topic's partitions (nil: every partition the table has a txn for) wrong: a member in
// the pipeline's consumer group (a running pipeline would commit over the reset, or skip
// records up to its old txn), topic missing, or a named partition the topic does not
// have. It connects with the pipeline's Kafka settings (TLS, SASL) through one client.
// Errors: each of those, naming the fix; the cluster's own (unreachable, not authorized).
func CheckOffsetReset(ctx context.Context, cfg *config.Config, log *slog.Logger, topic string, partitions []int32) error {
	ctx, cancel := context.WithTimeout(ctx, checkResetTimeout)
	defer cancel()
	m := NewMetrics(prometheus.NewRegistry())
	sec, err := kafkaclient.SecurityOpts(cfg.Kafka, m.kafka())
	if err != nil {
		return err
	}
	cl, err := kafkaclient.New(cfg, log, m.kafka(), sec).TopicDiscovery()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	groups, err := adm.DescribeGroups(ctx, cfg.Kafka.Group)
	if err == nil {
		err = groups.Error()
	}
	if err != nil {
		return fmt.Errorf("check offset reset: describe consumer group %s: %w", cfg.Kafka.Group, err)
	}
	for _, g := range groups {
		if len(g.Members) > 0 {
			return fmt.Errorf("check offset reset: consumer group %s has %d members (state %s): a pipeline of it is running and would commit over the reset, or skip records up to its old txn: stop it first (or --force)",
				g.Group, len(g.Members), g.State)
		}
	}
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("check offset reset: list topic %s: %w", topic, err)
	}
	td, ok := topics[topic]
	if !ok || td.Err != nil {
		return fmt.Errorf("check offset reset: topic %s does not exist on the cluster: create it first (or --force)", topic)
	}
	for _, p := range partitions {
		if _, ok := td.Partitions[p]; !ok {
			return fmt.Errorf("check offset reset: topic %s has %d partitions (0 to %d), not %d", topic, len(td.Partitions), len(td.Partitions)-1, p)
		}
	}
	return nil
}
