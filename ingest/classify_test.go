package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/decode"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		want  action
		stage string
	}{
		{"nil", nil, actNone, ""},
		{"snapshot changed", errSnapshotChanged, actRebuild, ""},
		{"metadata changed", fmt.Errorf("commit: %w", deltawriter.ErrMetadataChanged), actRebuild, ""},
		{"concurrent txn", deltawriter.ErrConcurrentTxn, actRebuild, ""},
		{"txn already committed", deltawriter.ErrTxnAlreadyCommitted, actRebuild, ""},
		{"unsupported feature", fmt.Errorf("commit: %w", deltawriter.ErrUnsupportedFeature), actFatal, ""},
		{"no write access", &transientError{stage: "write data file", err: fs.ErrPermission}, actFatal, ""},
		{"store refused the credentials (403)", &transientError{stage: "commit", err: &storage.StoreError{Op: "put", Object: "s3://lake/t/_delta_log/00000000000000000001.json", Status: 403, Class: storage.ErrPermission, Err: errors.New("AccessDenied")}}, actFatal, ""},
		{"store overwrites", fmt.Errorf("open store: %w", storage.ErrUnsafeStore), actFatal, ""},
		{"an fsync under the table failed", &transientError{stage: "commit", err: fmt.Errorf("put _delta_log/00000000000000000003.json: %w: fsync /t/part-1.parquet: %w", storage.ErrDataLost, errors.New("input/output error"))}, actFatal, ""},
		{"store throttles", &storage.StoreError{Op: "get", Object: "s3://lake/t/_delta_log/_last_checkpoint", Status: 503, Class: storage.ErrTransient, Err: errors.New("SlowDown")}, actRetry, "store"},
		{"transient", &transientError{stage: "read snapshot", err: errors.New("503")}, actRetry, "read snapshot"},
		{"registry", fmt.Errorf("look up: %w", decode.ErrTransient), actRetry, "schema registry"},
		{"dead letter refused", produceError("produce dead letters", "t.dlq", fmt.Errorf("x: %w", kerr.MessageTooLarge)), actFatal, ""},
		{"dead letter retriable", produceError("produce dead letters", "t.dlq", kerr.NotLeaderForPartition), actRetry, "produce dead letters"},
		{"dead letter timeout", produceError("produce dead letters", "t.dlq", context.DeadlineExceeded), actRetry, "produce dead letters"},
		{"unknown", errors.New("boom"), actFatal, ""},
		// the label is the stage alone: a schema id or a partition directory stays in the
		// message, never a metric series of its own
		{"schema id", &transientError{stage: "resolve schema", what: "resolve schema id 7", err: decode.ErrTransient}, actRetry, "resolve schema"},
		{"partition file", &transientError{stage: "write data file", what: "write data file in day=2024-06-15", err: errors.New("503")}, actRetry, "write data file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := classify(tt.err)
			if v.action != tt.want || v.stage != tt.stage {
				t.Fatalf("classify(%v) = action %d stage %q, want %d %q", tt.err, v.action, v.stage, tt.want, tt.stage)
			}
			if tt.err != nil && !errors.Is(v.err, tt.err) {
				t.Fatalf("verdict error %v does not wrap %v", v.err, tt.err)
			}
		})
	}
}

// A transient error's message keeps the detail its label leaves out.
func TestTransientErrorMessage(t *testing.T) {
	for _, tt := range []struct {
		err  *transientError
		want string
	}{
		{&transientError{stage: "resolve schema", what: "resolve schema id 7", err: errors.New("503")}, "resolve schema id 7: 503"},
		{&transientError{stage: "commit", err: errors.New("timeout")}, "commit: timeout"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestProduceErrorNamesTheFix(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want []string
	}{
		{kerr.MessageTooLarge, []string{"orders.dlq", "MESSAGE_TOO_LARGE", "max.message.bytes"}},
		{kerr.TopicAuthorizationFailed, []string{"orders.dlq", "TOPIC_AUTHORIZATION_FAILED", "WRITE"}},
	} {
		err := produceError("produce dead letters", "orders.dlq", fmt.Errorf("produce to orders.dlq: %w", tt.err))
		if !errors.Is(err, tt.err) {
			t.Errorf("%v: produce error does not wrap it", tt.err)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("produce error %q does not mention %q", err, w)
			}
		}
	}
}

// TestDeadLetterRefusedFailsPipeline: the dead-letter topic accepts at most 256 bytes per
// record batch, and a dead letter (its headers alone) is larger: the broker answers
// MESSAGE_TOO_LARGE, which no retry can change. The pipeline fails with a message naming
// the topic, the error and the fix, instead of pausing the partition and retrying
// forever; nothing is committed.
func TestDeadLetterRefusedFailsPipeline(t *testing.T) {
	h := newHarness(t, 1)
	adm := kadm.NewClient(h.producer)
	small := "256"
	rs, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &small}}, h.dlq)
	if err == nil {
		_, err = rs.On(h.dlq, nil)
	}
	if err != nil {
		t.Fatalf("set max.message.bytes on %s: %v", h.dlq, err)
	}
	h.produceRaw(0, []byte(`{"order_id":1}`)) // bad magic: a dead letter
	m := h.start("a", nil)
	runErr := m.stopped(t, 30*time.Second, "the pipeline kept retrying a dead letter the broker refuses for good")
	if runErr == nil {
		t.Fatal("Run returned nil, want the refused dead letter")
	}
	if !errors.Is(runErr, kerr.MessageTooLarge) {
		t.Errorf("Run error %v does not wrap MESSAGE_TOO_LARGE", runErr)
	}
	for _, w := range []string{h.dlq, "MESSAGE_TOO_LARGE", "max.message.bytes"} {
		if !strings.Contains(runErr.Error(), w) {
			t.Errorf("Run error %q does not mention %q", runErr, w)
		}
	}
	if s := m.p.Status(); s.State != StateFailed || s.Error == "" {
		t.Errorf("status %+v, want failed with the error", s)
	}
	if n := h.handled(); n != 0 {
		t.Errorf("the table's txns account for %d records, want 0", n)
	}
	if n := h.dlqCount(); n != 0 {
		t.Errorf("%d dead letters landed, want 0", n)
	}
}
