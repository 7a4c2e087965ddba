package integration

import (
	"testing"
	"time"
)

// TestSigtermWhileMemberJoins stops a consumer-group member with SIGTERM while another
// member of the same group is joining (0.2 s, 1 s and 2.5 s after the new member's start:
// before its JoinGroup, during the rebalance, after it), three times over, each time on
// the real broker with records still flowing. Each stopped member must exit 0 within
// sigtermBound (a healthy exit takes 0.1–0.6 s here; the bug this test was written for
// made it about 41 s, the group's session timeout), and the table must end with every
// record exactly once.
func TestSigtermWhileMemberJoins(t *testing.T) {
	s := need(t)
	const n = 60_000
	const sigtermBound = 10 * time.Second
	cfgDir, table, orders := backlogPipeline(t, s, "orders-join-term", n)
	cur := startDaemon(t, cfgDir)
	waitFor(t, cur, 2*time.Minute, "progress past n/10", func() bool { return handled(t, table) > n/10 })
	for _, delay := range []time.Duration{200 * time.Millisecond, time.Second, 2500 * time.Millisecond} {
		next := startDaemon(t, cfgDir)
		time.Sleep(delay) // the moment of the SIGTERM in the new member's join is what varies
		at := handled(t, table)
		start := time.Now()
		code := cur.stop(t)
		took := time.Since(start)
		t.Logf("SIGTERM %v after a member's start, %d of %d records handled: exit %d after %v", delay, at, n, code, took.Round(time.Millisecond))
		if code != 0 {
			t.Fatalf("exit code %d after SIGTERM while a member joins (%v after its start)", code, delay)
		}
		if took > sigtermBound {
			t.Errorf("the member took %v to exit after SIGTERM while another joined (%v after its start), want at most %v", took, delay, sigtermBound)
		}
		cur = next
	}
	waitFor(t, cur, 3*time.Minute, "all records handled by the last member", func() bool { return handled(t, table) == n })
	start := time.Now()
	if code := cur.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM of the last member", code)
	}
	if took := time.Since(start); took > sigtermBound {
		t.Errorf("the last member took %v to exit after SIGTERM, want at most %v", took, sigtermBound)
	}
	checkEveryOrder(t, s, table, orders, "after members joined and left under SIGTERM")
}
