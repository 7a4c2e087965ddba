package ingest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFatalWatch(t *testing.T) {
	var w fatalWatch
	t0 := time.Now()
	for i := range 10 { // a burst of polls, as kgo reports one failure
		if w.observe(t0.Add(time.Duration(i)*10*time.Millisecond), fatalGrace) {
			t.Fatalf("fatal within a burst (poll %d)", i)
		}
	}
	if !w.observe(t0.Add(fatalGrace), fatalGrace) {
		t.Fatal("a failure still seen fatalGrace later is fatal")
	}
	w = fatalWatch{}
	if w.observe(t0, fatalGrace) || w.observe(t0.Add(2*fatalForget), fatalGrace) || w.observe(t0.Add(2*fatalForget+time.Second), fatalGrace) {
		t.Fatal("a failure a quiet minute ago still counted")
	}
	w = fatalWatch{}
	if w.observe(t0, authGrace) || w.observe(t0.Add(fatalGrace), authGrace) || !w.observe(t0.Add(authGrace), authGrace) {
		t.Fatal("an authentication failure is fatal after authGrace, not before")
	}
}

// One spurious GROUP_AUTHORIZATION_FAILED on a heartbeat (as brokers have been seen to
// answer around a re-authentication) does not fail the pipeline: the poll loop sees it,
// the pipeline rejoins and goes on past the grace a persisting failure gets (hooks.fatalGrace
// shortens it to 200 ms), every record once. A persisting one is fatal
// (TestSecuredFailFast, real broker).
func TestSpuriousGroupAuthErrorIsNotFatal(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	h := newHarness(t, 2)
	h.produce(1, 1000, 0, 2, -1)
	const grace = 200 * time.Millisecond
	m := h.startHooked("a", h.config(), nil, func(hk *hooks) { hk.fatalGrace = grace })
	h.waitHandled(1000, 30*time.Second, m)
	fetchErrors := h.metrics.TransientErrors.WithLabelValues("orders", "fetch")
	before := testutil.ToFloat64(fetchErrors)
	var injected atomic.Int32
	h.cluster.ControlKey(kmsg.Heartbeat.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		resp := kr.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		injected.Add(1)
		return resp, nil, true
	})
	waitFor(t, 30*time.Second, func() error { return atLeast("injected heartbeat failures", int64(injected.Load()), 1) })
	// The poll loop has seen the failure (counted as a transient fetch error) ...
	waitFor(t, 30*time.Second, func() error {
		if got := testutil.ToFloat64(fetchErrors); got <= before {
			return fmt.Errorf("ingestd_transient_errors_total{stage=\"fetch\"} = %v, want more than %v (the poll loop has not seen the failure)", got, before)
		}
		return nil
	})
	seen := time.Now()
	// ... and polls records after the grace a persisting failure gets.
	waitFor(t, 10*time.Second, func() error {
		if d := time.Since(seen); d < grace {
			return fmt.Errorf("%v since the poll loop saw the failure, want the grace (%v) past", d, grace)
		}
		return nil
	})
	h.produce(1001, 1000, 0, 2, -1)
	h.waitHandled(2000, 30*time.Second, m)
	if s := m.p.Status(); s.State != StateRunning {
		t.Fatalf("after one spurious group authorization failure: %+v", s)
	}
	m.stop(t)
	h.checkExactlyOnce(2000)
}
