package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
	"github.com/ingestd/ingestd/internal/backoff"
)

// The failure model. Every error a flush (or the start-up) meets is classified once, by
// classify, into one action:
//
//	retry       transient (registry 5xx, broker unavailable, store throttling): keep the
//	            records, back off (retryBackoff), try again; never dead-lettered
//	rebuild     the table changed under the commit (a winner changed metadata or protocol,
//	            or moved one of our txns): rebuild the batch on the fresh snapshot
//	dead letter one record does not fit (bad bytes, unknown schema id, schema mismatch
//	            under dead_letter): it goes to the dead-letter topic with its reason code
//	halt        one record does not fit under halt: its partition stops before it
//	fatal       a person must act (unsupported table, no write access, a dead letter the
//	            broker refuses for good): the pipeline fails with the fix in the message
//
// Each action counts one metric and logs at one level (observe). Record-level actions
// (dead letter, halt) are decided per record by the schema policy (rules.onFailure, plan.go);
// classify decides the batch-level ones.
type action uint8

const (
	actNone       action = iota // no failure
	actRetry                    // ingestd_transient_errors_total{stage}, warn
	actRebuild                  // ingestd_delta_commit_conflicts_total, info
	actDeadLetter               // ingestd_records_dead_lettered_total{reason}, debug (deadLetterLog: warn, rate-limited)
	actHalt                     // ingestd_pipeline_halted, error
	actFatal                    // ingestd_pipeline_failures_total, error
)

// verdict is a classified failure.
type verdict struct {
	action action
	stage  string // retry: where it failed, the metric's stage label
	reason string // dead letter, halt: the stable reason code
	err    error  // the failure, wrapped with the fix for fatal ones
}

// retryBackoff is the wait between retries of one failure, everywhere in ingest: the
// consumer's per-partition pauses, the replay's flush retries, the start-up topic check
// and the rebuilds of a busy table.
var retryBackoff = backoff.Default

const (
	// freeRebuilds is how many rebuilds after a lost commit race run at once: a winner
	// rarely wins twice; later rebuilds of a busy table back off first.
	freeRebuilds = 2
	// maxConflictRebuilds bounds the consumer's rebuilds of one flush; then the flush is a
	// transient "commit" failure and its partitions back off.
	maxConflictRebuilds = 8
)

// transientError marks a failure worth retrying with the same records. stage names where it
// happened, one of a fixed set (the ingestd_transient_errors_total label, so that a schema
// id or a partition directory never becomes a series of its own); what, when set, says
// more for the log and the error ("resolve schema id 7").
type transientError struct {
	stage string
	what  string
	err   error
}

func (e *transientError) Error() string {
	if e.what != "" {
		return e.what + ": " + e.err.Error()
	}
	return e.stage + ": " + e.err.Error()
}
func (e *transientError) Unwrap() error { return e.err }

// refusedError is a produce that the broker will refuse again however often it is
// retried (franz-go: a Kafka error code that is not retriable, such as MESSAGE_TOO_LARGE
// or TOPIC_AUTHORIZATION_FAILED). Its message names the topic, the error and the fix.
type refusedError struct {
	msg string
	err error
}

func (e *refusedError) Error() string { return e.msg }
func (e *refusedError) Unwrap() error { return e.err }

// classify maps an error of a flush (or of the start-up) to the action its caller takes:
// actNone for nil, else actRebuild, actRetry (with its stage) or actFatal. Record-level
// actions (dead letter, halt) are not errors: the schema policy decides them per record
// (rules.onFailure, plan.go), and observe counts them like the others.
func classify(err error) verdict {
	var (
		te *transientError
		re *refusedError
	)
	switch {
	case err == nil:
		return verdict{}
	case errors.Is(err, errSnapshotChanged), errors.Is(err, deltawriter.ErrMetadataChanged),
		errors.Is(err, deltawriter.ErrConcurrentTxn), errors.Is(err, deltawriter.ErrTxnAlreadyCommitted):
		return verdict{action: actRebuild, err: err}
	case errors.As(err, &re), errors.As(err, new(*kafkaclient.SecurityError)), errors.Is(err, deltawriter.ErrUnsupportedFeature), errors.Is(err, storage.ErrUnsafeStore),
		errors.Is(err, storage.ErrDataLost):
		return verdict{action: actFatal, err: err}
	case errors.Is(err, fs.ErrPermission): // storage.ErrPermission too: a store's 401/403
		return verdict{action: actFatal, err: fmt.Errorf("%w (give ingestd write access to the table: "+
			"the directory's owner on local disk, the bucket or container policy of its credentials on an object store)", err)}
	case errors.As(err, &te):
		return verdict{action: actRetry, stage: te.stage, err: err}
	case errors.Is(err, storage.ErrTransient):
		return verdict{action: actRetry, stage: "store", err: err}
	case errors.Is(err, decode.ErrTransient):
		return verdict{action: actRetry, stage: "schema registry", err: err}
	}
	return verdict{action: actFatal, err: err}
}

// observe counts v's metric (n times, for dead letters) and logs it at v's level, with
// attrs as extra key-value pairs.
func (p *Pipeline) observe(v verdict, n int, msg string, attrs ...any) {
	observe(p.m, p.log, p.cfg.Name, v, n, msg, attrs...)
}

// observe is Pipeline.observe for pipeline name with metrics m and logger log (the
// flusher's and the replay's).
func observe(m *Metrics, log *slog.Logger, name string, v verdict, n int, msg string, attrs ...any) {
	switch v.action {
	case actRetry:
		m.TransientErrors.WithLabelValues(name, v.stage).Inc()
		log.Warn(msg, append([]any{"stage", v.stage, "err", v.err}, attrs...)...)
	case actRebuild:
		m.CommitConflicts.WithLabelValues(name).Inc()
		log.Info(msg, attrs...)
	case actDeadLetter:
		// Counted here; the flusher's deadLetterLog writes the (rate-limited) WARN lines.
		m.RecordsDeadLettered.WithLabelValues(name, v.reason).Add(float64(n))
		log.Debug(msg, append([]any{"reason", v.reason, "count", n}, attrs...)...)
	case actHalt:
		m.PipelineHalted.WithLabelValues(name).Set(1)
		log.Error(msg, append([]any{"reason", v.reason}, attrs...)...)
	case actFatal:
		m.PipelineFailures.WithLabelValues(name).Inc()
		log.Error(msg, append([]any{"err", v.err}, attrs...)...)
	}
}

// produceError classifies a failed produce to topic (dead letters, carried records): a
// Kafka error that franz-go does not retry (kerr.IsRetriable false, and not a retryable
// broker or network error) is refused for good and fails the pipeline with the fix;
// anything else (timeouts, leader moves, an unreachable broker) is a transient failure
// of stage.
func produceError(stage, topic string, err error) error {
	var ke *kerr.Error
	if !errors.As(err, &ke) || kerr.IsRetriable(err) || kgo.IsRetryableBrokerErr(err) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &transientError{stage: stage, err: err}
	}
	var fix string
	switch ke {
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		fix = fmt.Sprintf("raise max.message.bytes on topic %s (kafka-configs.sh --bootstrap-server BROKER --alter --entity-type topics "+
			"--entity-name %s --add-config max.message.bytes=N, N above the record size) and restart the pipeline", topic, topic)
	case kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed:
		fix = fmt.Sprintf("grant this client WRITE on topic %s (kafka-acls.sh --add --allow-principal User:... --operation Write --topic %s) and restart the pipeline", topic, topic)
	default:
		fix = fmt.Sprintf("fix topic %s so that it accepts the records, then restart the pipeline", topic)
	}
	return &refusedError{
		msg: fmt.Sprintf("%s: the broker refuses records for topic %s for good (%v): %s; nothing past them was committed", stage, topic, err, fix),
		err: err,
	}
}

// rebuildWait is the wait before rebuild attempt (0-based) of a batch after a lost commit
// race: none for the first freeRebuilds, then retryBackoff.
func rebuildWait(ctx context.Context, attempt int) error {
	if attempt < freeRebuilds {
		return ctx.Err()
	}
	return retryBackoff.Sleep(ctx, attempt-freeRebuilds)
}
