package ingest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
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
	return appID + "-" + topic + "-" + strconv.Itoa(int(partition))
}

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
		prefix := TxnAppID(cfg.AppID, topic, 0)
		prefix = prefix[:len(prefix)-1]
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
