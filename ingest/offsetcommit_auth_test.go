package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// gafCommit answers an OffsetCommit with GROUP_AUTHORIZATION_FAILED for every partition.
func gafCommit(kr kmsg.Request) kmsg.Response {
	req := kr.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.Version = req.Version
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// committedOffsets are the group's committed offsets per partition of topic.
func committedOffsets(t *testing.T, h *harness, group string) map[int32]int64 {
	t.Helper()
	resps, err := kadm.NewClient(h.producer).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, ps := range resps {
		for p, r := range ps {
			out[p] = r.At
		}
	}
	return out
}

// One OffsetCommit answered with GROUP_AUTHORIZATION_FAILED for every partition while
// records flow (brokers have been seen to refuse one commit so right after a
// re-authentication). Its offsets are committed again (up to commitAuthRetries retries,
// the first commitAuthBackoff later), so the group's offsets end at the topic's end even
// for a partition no later commit covered (without the retry one partition stayed 500
// behind); once the retry is accepted nothing is left to retry, the pipeline is running
// and lands every record once.
func TestSpuriousOffsetCommitAuthErrorIsNotFatal(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	h := newHarness(t, 2)
	group := h.config().Kafka.Group
	h.produce(1, 1000, 0, 2, -1)
	m := h.start("a", nil)
	h.waitHandled(1000, 30*time.Second, m)
	committedTo := func(want int64) error {
		if got := committedOffsets(t, h, group); got[0]+got[1] != want {
			return fmt.Errorf("group offsets %v, want %d records committed over 2 partitions", got, want)
		}
		return nil
	}
	waitFor(t, 30*time.Second, func() error { return committedTo(1000) }) // the last commit of the first records is out
	var injected, after atomic.Int32
	h.cluster.ControlKey(kmsg.OffsetCommit.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		if injected.Load() == 0 {
			injected.Add(1)
			return gafCommit(kr), nil, true
		}
		after.Add(1)
		return nil, nil, false
	})
	h.produce(1001, 1000, 0, 2, -1)
	h.waitHandled(2000, 30*time.Second, m)
	waitFor(t, 30*time.Second, func() error { return atLeast("injected offset commit failures", int64(injected.Load()), 1) })
	waitFor(t, 10*time.Second, func() error { return atLeast("offset commits after the refused one", int64(after.Load()), 1) })
	// The retry, commitAuthBackoff after the refusal, is accepted: the group's offsets
	// reach the topic's end and no retry is left.
	waitFor(t, 30*time.Second, func() error {
		if err := committedTo(2000); err != nil {
			return err
		}
		if !m.p.cm.commits.settled() {
			return errors.New("a retry of the refused offset commit is still pending")
		}
		return nil
	})
	if s := m.p.Status(); s.State != StateRunning {
		t.Fatalf("after one spurious GROUP_AUTHORIZATION_FAILED on OffsetCommit: %+v", s)
	}
	if got := injected.Load(); got != 1 {
		t.Errorf("%d offset commits answered with the failure, want 1", got)
	}
	m.stop(t)
	h.checkExactlyOnce(2000)
}

// settled reports whether no refused offset commit waits for a retry and none failed
// the pipeline.
func (c *offsetCommits) settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.retrying && len(c.pending) == 0 && !c.failed
}

// A persisting refusal: every OffsetCommit answered with
// GROUP_AUTHORIZATION_FAILED (heartbeats and fetches still fine, so only the commit
// path sees it). After the 3 retries (1, 2 and 4 s apart) the pipeline fails, 7 to 10 s
// after the first refusal (a burst of refused commits from several flushes is one
// refusal, not a persisting one), naming the principal and READ on the group; the records
// it wrote before are in the table once.
func TestPersistentOffsetCommitAuthErrorIsFatal(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	h := newHarness(t, 2)
	m := h.start("a", nil)
	var refused atomic.Int32
	var first atomic.Int64
	h.cluster.ControlKey(kmsg.OffsetCommit.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		if refused.Add(1) == 1 {
			first.Store(time.Now().UnixNano())
		}
		return gafCommit(kr), nil, true
	})
	h.produce(1, 1000, 0, 2, -1)
	h.waitHandled(1000, 30*time.Second, m)
	var err error
	select {
	case err = <-m.done:
		m.done <- err
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20 s after offset commits began to be refused (%d refused)", refused.Load())
	}
	took := time.Since(time.Unix(0, first.Load()))
	want := "commit group offsets: kafka authorization failed: User:ANONYMOUS (no SASL, no client certificate) is missing READ on group ingestd-orders (fix: kafka-acls.sh --bootstrap-server <broker> --add --allow-principal <principal> --operation Read --group ingestd-orders)"
	if s := m.p.Status(); s.State != StateFailed || s.Error != want {
		t.Errorf("after persisting refusals: %s %q\nwant failed %q (run returned %v)", s.State, s.Error, want, err)
	}
	if took < 6*time.Second || took > 10*time.Second {
		t.Errorf("failed %v after the first refusal, want after the retries (about 7 s), within 10 s", took)
	}
	if n := refused.Load(); n < 1+commitAuthRetries {
		t.Errorf("%d offset commits refused, want at least %d (the commit and its retries)", n, 1+commitAuthRetries)
	}
	h.checkExactlyOnce(1000)
}
