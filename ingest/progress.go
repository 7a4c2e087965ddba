package ingest

import (
	"context"
	"time"
)

// progressEvery is how often an idle pipeline holding progress made while the table did
// not exist (flusher.noTableTxns) checks whether a table exists now, to commit that
// progress as txns: another member, or another pipeline, may have created it.
const progressEvery = 5 * time.Second

// recordProgressLocked commits, as a txn-only commit, the progress of dead-letter-only
// flushes made while the table did not exist, once a table exists (so that replay finds
// the commit their dead letters name, or the group offset position it names, instead of
// waiting for this partition's next record). Without a table it does nothing; a transient
// failure is retried at the next check. Flush token held.
func (p *Pipeline) recordProgressLocked(ctx context.Context, now time.Time) error {
	p.batchMu.Lock()
	p.progressDue = now.Add(progressEvery)
	p.batchMu.Unlock()
	// Without a table the flush commits nothing and keeps noTableTxns for the next check.
	_, err := p.writeLocked(ctx, nil, frameNote{})
	if v := classify(err); v.action == actRetry {
		p.observe(v, 0, "commit of progress made without a table failed; retried later")
		return nil
	}
	return err
}

// publishProgressLocked tells the poll loop whether progress made without a table waits
// to be recorded (flusher.noTableTxns). Holding the flush token and batchMu.
func (p *Pipeline) publishProgressLocked() {
	p.progressPending = len(p.fl.noTableTxns) > 0
}
