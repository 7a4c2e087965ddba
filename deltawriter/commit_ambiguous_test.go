package deltawriter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/internal/backoff"
)

// TestAmbiguousPutWaitsThroughContext: the waits between the identical puts of an
// ambiguous commit end with ctx: a cancelled commit reports ErrCommitOutcomeUnknown at
// once instead of sleeping out its retries.
func TestAmbiguousPutWaitsThroughContext(t *testing.T) {
	defer func(p backoff.Policy) { putRetry = p }(putRetry)
	putRetry = backoff.Policy{Min: time.Hour, Max: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fs := &flakyStore{Local: newStore(t)}
	tbl, err := Open(ctx, fs)
	if err != nil {
		t.Fatal(err)
	}
	createTable(t, tbl, nil)
	fs.failNoWrite.Store(10)
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = tbl.Commit(ctx, Commit{ReadVersion: 0, Txns: []deltalog.Txn{{AppID: "app", Version: 1}}})
	if !errors.Is(err, ErrCommitOutcomeUnknown) {
		t.Fatalf("Commit = %v, want ErrCommitOutcomeUnknown", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Commit took %v after its context ended", d)
	}
}
