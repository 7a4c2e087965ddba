package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter/tableops"
)

// runUntil runs a pipeline with hook (see hooks.beforeCommit; kill is kill -9: the
// pipeline stops without flushing) until the table's txns account for want source
// records (then stops it like SIGTERM), or until Run returns; it returns Run's error.
func (h *harness) runUntil(cfg *Config, hook func(dead int, kill func()) error, want int64) (*Pipeline, error) {
	h.t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{h.t, "pipeline"}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := NewPipeline(cfg, h.deps(log))
	abandonOnCause(p)
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancel := func() { cancelCause(nil) }
	defer cancel()
	if hook != nil {
		p.hooks.beforeCommit = func(dead int) error { return hook(dead, func() { cancelCause(errAbandon) }) }
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var runErr error
	waitFor(h.t, 30*time.Second, func() error {
		select {
		case runErr = <-done:
			return nil
		default:
		}
		if n := h.handled(); n < want {
			return fmt.Errorf("pipeline handled %d of %d", n, want)
		}
		cancel()
		runErr = <-done
		return nil
	})
	return p, runErr
}

func (h *harness) addChannel() {
	h.t.Helper()
	col, err := tableops.ParseColumnDef("channel STRING")
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := tableops.Apply(context.Background(), h.deps(nil).Table, tableops.Alter{AddColumns: []tableops.ColumnDef{col}}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) checkOrders(n int) {
	h.t.Helper()
	ids := h.orderIDs()
	if len(ids) != n {
		h.t.Errorf("table holds %d orders, want %d", len(ids), n)
	}
	for id, c := range ids {
		if c != 1 || id < 1 || id > int64(n) {
			h.t.Errorf("order %d is in the table %d times (want orders 1..%d once each)", id, c, n)
		}
	}
}

// classifyDLQ returns the ack state of every DLQ record, and their commit ids.
func (h *harness) classifyDLQ() (states []ackState, ids []string) {
	h.t.Helper()
	dl := h.readTopicAll(h.dlq)
	x, err := newAckIndex(context.Background(), h.deps(nil).Table.Store(), dl)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range dl {
		states = append(states, x.classify(r))
		a, _, _ := ackOfRecord(r)
		ids = append(ids, a.commitID)
	}
	return states, ids
}

func allStates(n int, s ackState) []ackState {
	out := make([]ackState, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestSchemaChangeBetweenDLQProduceAndCommit (case 1): a flush dead-letters 6 v2 orders,
// then `table alter --add-column channel` commits before the flush's commit. The rebuilt
// batch keeps them dead-lettered (they would fit now): the table gets them once, from the
// replay. An operator's re-produced exact copies of them are then skipped as duplicates.
func TestSchemaChangeBetweenDLQProduceAndCommit(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Schema.Policy = PolicyDeadLetter
	h.produce(1, 10, 0, 1, 0)
	if _, err := h.runUntil(cfg, nil, 10); err != nil {
		t.Fatal(err)
	}
	h.produce(11, 6, 1, 1, 0)
	var calls []int
	altered := false
	p, err := h.runUntil(cfg, func(dead int, _ func()) error {
		calls = append(calls, dead)
		if dead > 0 && !altered {
			altered = true
			h.addChannel() // commits before this flush's commit: ErrMetadataChanged
		}
		return nil
	}, 16)
	if err != nil {
		t.Fatal(err)
	}
	// The flush with the dead letters made two attempts: the second produced nothing new.
	if n := h.dlqCount(); n != 6 {
		t.Fatalf("DLQ holds %d records, want 6 (one dead letter per v2 order)", n)
	}
	if !slices.Contains(calls, 6) || calls[len(calls)-1] != 0 {
		t.Errorf("hook calls %v: want a flush with 6 dead letters, then its rebuild with none new", calls)
	}
	h.checkOrders(10)
	states, ids := h.classifyDLQ()
	if !slices.Equal(states, allStates(6, ackReal)) {
		t.Errorf("DLQ states %v, want all real", states)
	}
	for _, id := range ids {
		if id != ids[0] || id == "" {
			t.Errorf("commit ids %v: want one id for the flush", ids)
			break
		}
	}
	if p.commitID == ids[0] {
		t.Errorf("the pipeline kept commit id %s after committing it", ids[0])
	}

	s, err := h.replay(cfg, nil, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Read != 6 || s.Landed != 6 || s.Duplicates != 0 || s.Orphans != 0 || s.Pending != 0 {
		t.Fatalf("replay %+v", s)
	}
	h.checkOrders(16)

	// Case 3: the operator re-produces the 6 dead letters byte for byte.
	var copies []*kgo.Record
	for _, r := range h.readTopicAll(h.dlq) {
		copies = append(copies, &kgo.Record{Topic: h.dlq, Partition: 0, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
	}
	if err := h.producer.ProduceSync(context.Background(), copies...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	again, err := h.replay(cfg, nil, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Read != 6 || again.Duplicates != 6 || again.Landed != 0 || again.AlreadyReplayed != 6 {
		t.Fatalf("replay of re-produced copies %+v", again)
	}
	h.checkOrders(16)
}

// TestCrashBetweenDLQProduceAndCommit (case 2): the pipeline dies after producing 6 dead
// letters and before its commit. The column is added; a replay finds the dead letters
// pending (no commit acknowledged them) and leaves them. The restarted pipeline reads the
// records again and writes them; the old dead letters are orphans now, and a replay skips
// them.
func TestCrashBetweenDLQProduceAndCommit(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Schema.Policy = PolicyDeadLetter
	h.produce(1, 10, 0, 1, 0)
	if _, err := h.runUntil(cfg, nil, 10); err != nil {
		t.Fatal(err)
	}
	h.produce(11, 6, 1, 1, 0)
	killed := errors.New("killed between the DLQ produce and the commit")
	crashed := false
	_, err := h.runUntil(cfg, func(dead int, kill func()) error {
		if dead > 0 {
			crashed = true
			kill()
			return killed
		}
		return nil
	}, 16)
	if err != nil || !crashed {
		t.Fatalf("run: %v, crashed %v; want the simulated crash", err, crashed)
	}
	if n, hd := h.dlqCount(), h.handled(); n != 6 || hd != 10 {
		t.Fatalf("after the crash: DLQ %d, handled %d; want 6, 10", n, hd)
	}
	h.addChannel()

	logs := &syncBuffer{}
	s, err := h.replay(cfg, slog.New(slog.NewTextHandler(logs, nil)), ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Read != 0 || s.Pending != 6 || s.Remaining != 6 || s.Landed != 0 {
		t.Fatalf("replay while the dead letters are pending %+v", s)
	}
	if !strings.Contains(logs.String(), `msg="replay stops before a pending dead letter`) || !strings.Contains(logs.String(), "offset=0") {
		t.Errorf("no warning about the pending dead letter:\n%s", logs.String())
	}
	if _, ok := h.snapshot().Txns["orders-replay-orders.dlq-0"]; ok {
		t.Error("the replay moved its txn past a pending dead letter")
	}
	h.checkOrders(10)

	if _, err := h.runUntil(cfg, nil, 16); err != nil {
		t.Fatal(err)
	}
	h.checkOrders(16)
	if states, _ := h.classifyDLQ(); !slices.Equal(states, allStates(6, ackOrphan)) {
		t.Errorf("DLQ states %v, want all orphans", states)
	}
	s, err = h.replay(cfg, nil, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Read != 6 || s.Orphans != 6 || s.Landed != 0 || s.Pending != 0 || s.Duplicates != 0 {
		t.Fatalf("replay of orphans %+v", s)
	}
	if v := h.snapshot().Txns["orders-replay-orders.dlq-0"]; v != 5 {
		t.Errorf("replay txn %d, want 5 (past the orphans)", v)
	}
	h.checkOrders(16)
}

// TestDeadLetterOnlyFlushNamesTheCreatingCommit: without a table, a flush of dead letters
// only commits nothing; its dead letters name the commit id that the later commit
// creating the table (and moving the txn past them) carries, so they are real.
func TestDeadLetterOnlyFlushNamesTheCreatingCommit(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config()
	h.produceRaw(0, []byte(`{"order_id":1}`), []byte(`{"order_id":2}`))
	m := h.startWith("pipeline", cfg, nil)
	waitFor(h.t, 30*time.Second, func() error { return atLeast("dead letters", h.dlqCount(), 2) })
	if states, _ := h.classifyDLQ(); !slices.Equal(states, allStates(2, ackPending)) {
		t.Errorf("DLQ states before the table exists %v, want pending", states)
	}
	h.produce(1, 10, 0, 1, 0)
	h.waitHandled(12, 30*time.Second, m)
	m.stop(t)
	if v := h.snapshot().Version; v != 0 {
		t.Errorf("table version %d, want 0 (one creating commit)", v)
	}
	if states, _ := h.classifyDLQ(); !slices.Equal(states, allStates(2, ackReal)) {
		t.Errorf("DLQ states %v, want real", states)
	}
	h.checkOrders(10)
}

// Dead letters of one partition made while no table exists; the table is then created
// by a flush of another partition only, and a later commit moves the first partition.
// The creating commit must move the first partition's txn past its dead letters too (it
// is the commit they name): otherwise the later commit, under a new id, makes them
// orphans and replay drops them (found by a break-it review).
func TestDeadLettersBeforeTheTableOnAnotherPartition(t *testing.T) {
	h := newHarness(t, 2)
	h.produceRaw(0, []byte(`{"order_id":1}`), []byte(`{"order_id":2}`))
	m := h.start("pipeline", nil)
	waitFor(h.t, 30*time.Second, func() error { return atLeast("dead letters", h.dlqCount(), 2) })
	h.produce(1, 10, 0, 2, 1) // partition 1 only: creates the table
	waitFor(h.t, 30*time.Second, func() error { return atLeast("table version", h.snapshot().Version, 0) })
	if got := h.snapshot().Txns["orders-orders-0"]; got != 1 {
		t.Errorf("creating commit: partition 0 txn %d, want 1 (past its two dead letters)", got)
	}
	h.produce(11, 10, 0, 2, 0) // partition 0: a later commit under a new id
	h.waitHandled(22, 30*time.Second, m)
	m.stop(t)
	if states, _ := h.classifyDLQ(); !slices.Equal(states, allStates(2, ackReal)) {
		t.Errorf("DLQ states %v, want real", states)
	}
	h.checkOrders(20)
}
