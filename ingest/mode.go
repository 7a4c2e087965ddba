package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingestd/ingestd/ingest/dlq"
)

// mode is what differs between the consumer pipeline and a replay in a flush, the seam a
// replay plugs into: whose txn records progress, which records the mode routes itself
// (a replay's duplicates and carried-forward records), the shape of a dead letter, a
// check before dead letters are produced, and what follows a flush.
type mode interface {
	// txnAppID is the Delta txn appId recording progress through topic/partition.
	txnAppID(topic string, partition int32) string
	// route is the route the mode gives r before the guard sees it (a replay: a copy of
	// an original already landed, or a record to carry forward); ok false leaves r to the
	// guard. Called once per record and flush attempt.
	route(r *kgo.Record) (rt route, ok bool)
	// identity names the source record of a record, so that of several records of one
	// source only the first is written (a replay: dlq.OriginalKey); nil: every record is
	// its own source.
	identity() func(r *kgo.Record) string
	// deadLetter is the record produced for d.
	deadLetter(d dlq.DeadLetter, now time.Time) *kgo.Record
	// beforeProduce runs once a flush attempt is routed and decoded, before anything is
	// produced or written: proceed false ends the flush there without effects (a dry
	// run); an error ends it too (a replay: <dlq>.parked is missing).
	beforeProduce(ctx context.Context, out *outcome) (proceed bool, err error)
	// done runs after a flush that returns no error: committed (out.version >= 0), or with
	// nothing to commit.
	done(ctx context.Context, out *outcome)
}

// consumerMode is the mode of the consumer pipeline: txns <app_id>-<topic>-<partition>,
// dead letters to dead_letter.topic, advisory Kafka group offsets after each commit.
type consumerMode struct {
	appID string // the pipeline's app_id
	topic string // dead_letter.topic
	table string // table.uri, named in the dead letters
	log   *slog.Logger
	cl    *kgo.Client // the group consumer, set once Run has built it; nil: no offsets committed
	// commits sends the advisory commits and retries a spurious GROUP_AUTHORIZATION_FAILED
	// (offsetcommit.go).
	commits offsetCommits
}

func (m *consumerMode) txnAppID(topic string, partition int32) string {
	return TxnAppID(m.appID, topic, partition)
}

func (m *consumerMode) route(*kgo.Record) (route, bool) { return routeGuard, false }

func (m *consumerMode) identity() func(*kgo.Record) string { return nil }

func (m *consumerMode) deadLetter(d dlq.DeadLetter, now time.Time) *kgo.Record {
	return d.Record(m.topic, m.table, now)
}

func (m *consumerMode) beforeProduce(context.Context, *outcome) (bool, error) { return true, nil }

// done commits the Kafka group offsets past what the flush handled. After a commit they
// are advisory, for lag tools (the txn actions are the truth, so a late commit for a
// partition that moved is harmless), and asynchronous: a synchronous commit would wait
// for a rebalance that itself waits for the poll loop (BlockRebalanceOnPoll). After a
// dead-letter-only flush while the table does not exist they are the only record of
// progress (adjustOffsets resumes from them until a table exists), so they are committed
// synchronously, bounded by noTableCommitTimeout; a failure is logged, and after a
// restart those records are dead-lettered again (replay dedupes the copies). An advisory
// commit refused with GROUP_AUTHORIZATION_FAILED is retried, and fails the pipeline when
// that persists (offsetCommits).
func (m *consumerMode) done(ctx context.Context, out *outcome) {
	if m.cl == nil || len(out.handled) == 0 || (out.version < 0 && !out.noTable) {
		return
	}
	offs := map[string]map[int32]kgo.EpochOffset{}
	for k, off := range out.handled {
		if offs[k.topic] == nil {
			offs[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offs[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: off + 1}
	}
	if out.noTable {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noTableCommitTimeout)
		defer cancel()
		var cerr error
		m.cl.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = err
			if err == nil {
				cerr = commitResponseErr(resp)
			}
		})
		if cerr != nil {
			m.log.Warn("commit kafka offsets of a dead-letter-only flush without a table failed; after a restart these records are dead-lettered again",
				"err", cerr, "partitions", len(offs))
		}
		return
	}
	m.commits.commit(ctx, m.cl, offs)
}

// noTableCommitTimeout bounds the synchronous group offset commit of a dead-letter-only
// flush while the table does not exist.
const noTableCommitTimeout = 10 * time.Second

// commitResponseErr is the first partition error of an offset commit response.
func commitResponseErr(resp *kmsg.OffsetCommitResponse) error {
	if resp == nil {
		return nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("commit offset of %s[%d]: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
