// Package backoff is ingestd's one retry-wait policy: exponential, bounded and jittered,
// sleeping through a context. It is pure apart from Sleep's timer and the jitter's random
// source; the retry loops (what to retry, how often) stay with their callers.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff: the wait before retry n (0-based) is Min·2ⁿ, capped at
// Max, then spread by ±Jitter (a fraction in [0, 1]: 0.25 means ±25%). The zero Policy
// waits nothing.
type Policy struct {
	Min    time.Duration // wait before the first retry, before jitter
	Max    time.Duration // cap of the wait before jitter; 0 means Min (no growth)
	Jitter float64       // ± fraction of the wait, in [0, 1]
}

// Default is the policy of ingestd's retries against brokers, registries and stores:
// 250 ms doubling to 30 s, ±25%.
var Default = Policy{Min: 250 * time.Millisecond, Max: 30 * time.Second, Jitter: 0.25}

// Duration returns the wait before retry attempt (0-based; a negative attempt counts as 0):
// in [d·(1−Jitter), d·(1+Jitter)] with d = min(Min·2^attempt, Max).
func (p Policy) Duration(attempt int) time.Duration {
	if p.Min <= 0 {
		return 0
	}
	limit := max(p.Max, p.Min)
	d := p.Min
	for range max(attempt, 0) {
		if d >= limit/2 {
			d = limit
			break
		}
		d *= 2
	}
	d = min(d, limit)
	if j := min(max(p.Jitter, 0), 1); j > 0 {
		spread := time.Duration(float64(d) * j)
		d = d - spread + time.Duration(rand.Int64N(int64(2*spread)+1))
	}
	return d
}

// Sleep waits Duration(attempt), or until ctx ends; it returns ctx's error in that case
// and nil otherwise.
func (p Policy) Sleep(ctx context.Context, attempt int) error {
	return Wait(ctx, p.Duration(attempt))
}

// Wait waits d, or until ctx ends; it returns ctx's error in that case and nil otherwise.
// A d ≤ 0 returns at once (ctx's error if it has ended).
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
