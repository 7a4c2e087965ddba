package ingest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// A dead-letter topic that appears shortly after the pipeline starts (a topic created just
// before the daemon started that the broker's metadata does not list yet: in TestChaosS3
// two daemons started a second after the test created its topics were told the DLQ did
// not exist, failed, and one exited 1 at the end; a just-restarted broker does the same
// until it has loaded its topics) is found by the start-up check's next look: the
// pipeline runs and lands every record. A topic
// that never appears still fails the start-up, with the message naming it and the fix,
// after missingTopicAttempts looks (about 4 s).
func TestCheckTopicsLooksAgainForMissingTopics(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	adm := kadm.NewClient(h.producer)

	cfg := h.config()
	cfg.DeadLetter.Topic = "orders.late-dlq"
	h.produce(1, 50, 0, 1, -1)
	logs := &syncBuffer{}
	m := h.startWith("late", cfg, func(d *Deps) {
		d.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t, "late"}, logs), &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	waitFor(t, 30*time.Second, func() error {
		if !strings.Contains(logs.String(), "topics not found on the broker; looking again") {
			return errors.New("the start-up check has not found the dead-letter topic missing yet")
		}
		return nil
	})
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, cfg.DeadLetter.Topic); err != nil {
		t.Fatalf("create the dead-letter topic: %v", err)
	}
	h.waitHandled(50, 30*time.Second, m)
	m.stop(t)

	cfg = h.config()
	cfg.DeadLetter.Topic = "orders.never"
	start := time.Now()
	never := h.startWith("never", cfg, nil)
	var err error
	select {
	case err = <-never.done:
		never.done <- nil
	case <-time.After(30 * time.Second):
		t.Fatal("a pipeline whose dead-letter topic does not exist did not fail within 30 s")
	}
	want := `check topics: dead-letter topic "orders.never" does not exist on [` + h.cluster.ListenAddrs()[0] + `] (create it, e.g. kafka-topics.sh --create --topic orders.never)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("pipeline ended with %v, want it to contain %q", err, want)
	}
	// Four waits of retryBackoff (0.25, 0.5, 1, 2 s, each −25 % at the least).
	if took := time.Since(start); took < 2800*time.Millisecond {
		t.Fatalf("failed after %v: the check did not look again before it failed", took)
	}
}
