package ingest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingestd/ingestd/internal/backoff"
)

// Retries of the advisory group offset commits: brokers have been seen to answer one
// OffsetCommit with GROUP_AUTHORIZATION_FAILED right after a re-authentication, and a
// refusal that passes is no reason to fail the pipeline. The offsets of a refused commit are kept as pending and committed
// again up to commitAuthRetries times, waiting commitAuthBackoff before each (1 s, 2 s,
// 4 s: the last retry goes out about 7 s after the first refusal, so a persisting
// denial is fatal within 10 s); an accepted commit that covers them ends the retries.
// When the last retry is refused too, the pipeline fails naming the missing ACL (READ
// on the group). Other commit errors are logged (the offsets are advisory: the Delta
// txns are the truth, and the next commit covers them).
const commitAuthRetries = 3

var commitAuthBackoff = backoff.Policy{Min: time.Second, Max: 4 * time.Second}

// commitTimeout bounds one advisory commit.
const commitTimeout = 30 * time.Second

type offsets = map[string]map[int32]kgo.EpochOffset

// offsetCommits sends a pipeline's advisory commits and retries refused ones: latest is
// the highest offset asked for per partition (a retry never commits less than a later
// commit asked for), pending what was refused and no accepted commit has covered yet.
type offsetCommits struct {
	log  *slog.Logger
	fail func(error) // fails the pipeline; set by setup
	deny func(error) error

	mu       sync.Mutex
	latest   offsets
	pending  offsets
	retrying bool // a retry is scheduled or in flight
	failed   bool
	inflight int           // commits sent whose callback has not run
	idle     chan struct{} // closed when inflight drops to 0; nil while it is 0
}

// commitWaitOnStop bounds how long the end of a session (the drain on SIGTERM, a revoke)
// waits for the advisory commits in flight: their answer must arrive while the group
// session lives, or the client warns that it came after the session ended.
const commitWaitOnStop = 5 * time.Second

// wait returns when no commit is in flight, or after d.
func (c *offsetCommits) wait(d time.Duration) {
	c.mu.Lock()
	idle := c.idle
	c.mu.Unlock()
	if idle == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
}

// sent and answered count the commits in flight (wait).
func (c *offsetCommits) sent() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight++; c.inflight == 1 {
		c.idle = make(chan struct{})
	}
}

func (c *offsetCommits) answered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight--; c.inflight == 0 {
		close(c.idle)
		c.idle = nil
	}
}

// setup gives the commits their logger, how to fail the pipeline, and how to turn the
// authorization error into the pipeline's error (naming principal and ACL).
func (c *offsetCommits) setup(log *slog.Logger, fail func(error), deny func(error) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log, c.fail, c.deny = log, fail, deny
}

// merge raises dst's offsets to src's, partition by partition.
func merge(dst, src offsets) {
	for t, ps := range src {
		if dst[t] == nil {
			dst[t] = map[int32]kgo.EpochOffset{}
		}
		for p, o := range ps {
			if cur, ok := dst[t][p]; !ok || o.Offset > cur.Offset {
				dst[t][p] = o
			}
		}
	}
}

// commit sends offs asynchronously. kgo orders commits and forbids committing inside
// its callback, so retries are scheduled outside it.
func (c *offsetCommits) commit(ctx context.Context, cl *kgo.Client, offs offsets) {
	c.mu.Lock()
	if c.latest == nil {
		c.latest, c.pending = offsets{}, offsets{}
	}
	merge(c.latest, offs)
	c.mu.Unlock()
	c.send(ctx, cl, offs, -1)
}

// send commits offs; retry is the retry's number (0-based), -1 for a flush's commit.
func (c *offsetCommits) send(ctx context.Context, cl *kgo.Client, offs offsets, retry int) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	c.sent()
	cl.CommitOffsets(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		defer c.answered()
		defer cancel()
		if err == nil {
			err = commitResponseErr(resp)
		}
		c.done(ctx, cl, offs, retry, err)
	})
}

// done handles one commit's result (in kgo's callback: it must not commit).
func (c *offsetCommits) done(ctx context.Context, cl *kgo.Client, offs offsets, retry int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	log := c.log
	if log == nil {
		log = slog.Default()
	}
	switch {
	case c.failed:
		return
	case err == nil:
		for t, ps := range offs {
			for p, o := range ps {
				if q, ok := c.pending[t][p]; ok && o.Offset >= q.Offset {
					delete(c.pending[t], p)
				}
			}
			if len(c.pending[t]) == 0 {
				delete(c.pending, t)
			}
		}
		if retry >= 0 {
			c.retrying = false
			log.Info("kafka offset commit accepted on retry after GROUP_AUTHORIZATION_FAILED", "retry", retry+1)
			if len(c.pending) > 0 { // refused again meanwhile: a new round of retries
				c.schedule(ctx, cl, 0)
			}
		}
		return
	case !errors.Is(err, kerr.GroupAuthorizationFailed):
		log.Warn("commit kafka offsets (advisory) failed", "err", err)
		return
	}
	merge(c.pending, offs)
	switch {
	case retry < 0 && c.retrying: // the scheduled retry will carry these offsets too
		log.Warn("kafka offset commit refused with GROUP_AUTHORIZATION_FAILED; a retry is under way", "err", err)
	case retry < 0:
		c.schedule(ctx, cl, 0)
		log.Warn("kafka offset commit refused with GROUP_AUTHORIZATION_FAILED; retrying", "retries", commitAuthRetries, "err", err)
	case retry+1 < commitAuthRetries:
		c.schedule(ctx, cl, retry+1)
		log.Warn("kafka offset commit retry refused with GROUP_AUTHORIZATION_FAILED", "retry", retry+1, "of", commitAuthRetries, "err", err)
	default:
		c.failed = true
		log.Warn("kafka offset commit still refused with GROUP_AUTHORIZATION_FAILED after its retries", "retries", commitAuthRetries, "err", err)
		if c.fail != nil && c.deny != nil {
			c.fail(c.deny(err))
		}
	}
}

// schedule sends retry n of the pending offsets after its backoff (under c.mu).
func (c *offsetCommits) schedule(ctx context.Context, cl *kgo.Client, n int) {
	c.retrying = true
	time.AfterFunc(commitAuthBackoff.Duration(n), func() {
		c.mu.Lock()
		if len(c.pending) == 0 || c.failed || ctx.Err() != nil { // covered by an accepted commit, or the pipeline ended
			c.retrying = false
			c.mu.Unlock()
			return
		}
		again := offsets{}
		merge(again, c.pending)
		for t, ps := range again { // never less than a later commit asked for
			for p := range ps {
				if l := c.latest[t][p]; l.Offset > ps[p].Offset {
					ps[p] = l
				}
			}
		}
		c.mu.Unlock()
		c.send(ctx, cl, again, n)
	})
}
