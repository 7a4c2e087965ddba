package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/decode"
)

// blockedProber is a registry whose probe waits for its context to end, then fails as a
// request to an unreachable registry does.
type blockedProber struct{ ctxDone bool }

func (b blockedProber) Schema(context.Context, int) (*decode.WriterSchema, error) {
	return nil, errors.New("unused")
}

func (b blockedProber) Probe(ctx context.Context) error {
	if b.ctxDone {
		<-ctx.Done()
		return fmt.Errorf("transient failure: unable to GET %q: %w", "http://r/schemas/types", context.Cause(ctx))
	}
	return errors.New("transient failure: unable to GET \"http://r/schemas/types\": connection refused")
}

// A pipeline stopped (SIGTERM) while it starts logs no warning about the registry or the
// broker it was asking: the stop cut the request short, neither was at fault. A registry
// that cannot be reached while the pipeline runs is still reported.
func TestStartStoppedWarnsNothing(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("terminated signal received"))
	if err := probeRegistry(ctx, blockedProber{ctxDone: true}, log); err != nil {
		t.Fatalf("probe stopped: %v", err)
	}
	if logs.Len() != 0 {
		t.Errorf("a probe cut short by the stop logged:\n%s", logs.String())
	}
	if err := probeRegistry(context.Background(), blockedProber{}, log); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="schema registry not reachable at start-up; lookups retry it"`) {
		t.Errorf("an unreachable registry is not reported:\n%s", logs.String())
	}

	logs.Reset()
	h := newHarness(t, 1)
	p := NewPipeline(h.config(), h.deps(log))
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, _, err = p.listTopics(ctx, kadm.NewClient(cl), []string{"orders"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("listTopics stopped: %v, want context.Canceled", err)
	}
	if logs.Len() != 0 {
		t.Errorf("a topic listing cut short by the stop logged:\n%s", logs.String())
	}
}
