package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
)

// runUntil runs a pipeline with hook (see hooks.beforeCommit; kill is kill -9: the
// pipeline stops without flushing) until the table's txns account for want source
// records (then stops it like SIGTERM), or until Run returns; it returns Run's error.
func (h *harness) runUntil(cfg *config.Config, hook func(dead int, kill func()) error, want int64) (*Pipeline, error) {
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
func (h *harness) classifyDLQ() (states []dlq.AckState, ids []string) {
	h.t.Helper()
	dl := h.readTopicAll(h.dlq)
	x, err := dlq.NewAckIndex(context.Background(), h.deps(nil).Table.Store(), dl)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range dl {
		states = append(states, x.Classify(r))
		a, _, _ := dlq.AckOf(r)
		ids = append(ids, a.CommitID)
	}
	return states, ids
}

func allStates(n int, s dlq.AckState) []dlq.AckState {
	out := make([]dlq.AckState, n)
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
	cfg.Schema.Policy = config.PolicyDeadLetter
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
	if !slices.Equal(states, allStates(6, dlq.AckReal)) {
		t.Errorf("DLQ states %v, want all real", states)
	}
	for _, id := range ids {
		if id != ids[0] || id == "" {
			t.Errorf("commit ids %v: want one id for the flush", ids)
			break
		}
	}
	if p.fl.commitID == ids[0] {
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
	cfg.Schema.Policy = config.PolicyDeadLetter
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
	if states, _ := h.classifyDLQ(); !slices.Equal(states, allStates(6, dlq.AckOrphan)) {
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
	if states, _ := h.classifyDLQ(); !slices.Equal(states, allStates(2, dlq.AckPending)) {
		t.Errorf("DLQ states before the table exists %v, want pending", states)
	}
	h.produce(1, 10, 0, 1, 0)
	h.waitHandled(12, 30*time.Second, m)
	m.stop(t)
	if v := h.snapshot().Version; v != 0 {
		t.Errorf("table version %d, want 0 (one creating commit)", v)
	}
	if states, _ := h.classifyDLQ(); !slices.Equal(states, allStates(2, dlq.AckReal)) {
		t.Errorf("DLQ states %v, want real", states)
	}
	h.checkOrders(10)
}

// Dead letters of one partition made while no table exists; the table is then created
// by a flush of another partition only, and a later commit moves the first partition.
// The creating commit must move the first partition's txn past its dead letters too (it
// is the commit they name): otherwise the later commit, under a new id, makes them
// orphans and replay drops them.
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
	if states, _ := h.classifyDLQ(); !slices.Equal(states, allStates(2, dlq.AckReal)) {
		t.Errorf("DLQ states %v, want real", states)
	}
	h.checkOrders(20)
}

// TestProgressBeforeTheTableExists: a dead_letter pipeline whose table
// does not exist and whose records all fail keeps its progress in the Kafka group offset:
// restarted twice, it dead-letters each record once (before: 2 dead letters became 5
// after one restart and a new record). The commit that finally creates the table moves
// the txn from that position and names it, so the dead letters are real, and a replay
// after their schema is registered lands each exactly once.
func TestProgressBeforeTheTableExists(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Schema.Policy = config.PolicyDeadLetter
	// Orders framed with the schema id the registry gives next: unknown (404) until then.
	const v3 = `{"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"order_id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
  {"name":"note","type":["null","string"],"default":null}]}`
	s3, err := avro.Parse(v3)
	if err != nil {
		t.Fatal(err)
	}
	nextID := max(h.ids[0], h.ids[1]) + 1
	unknown := func(id int64) []byte {
		body, err := avro.Marshal(s3, map[string]any{"order_id": id, "customer": "c", "amount": big.NewRat(id, 1), "note": "late"})
		if err != nil {
			t.Fatal(err)
		}
		var hdr sr.ConfluentHeader
		framed, err := hdr.AppendEncode(nil, nextID, nil)
		if err != nil {
			t.Fatal(err)
		}
		return append(framed, body...)
	}
	run := func(wantDLQ int64, produce ...[]byte) {
		t.Helper()
		m := h.startWith("pipeline", cfg, nil)
		h.produceRaw(0, produce...)
		waitFor(h.t, 30*time.Second, func() error { return atLeast("dead letters", h.dlqCount(), wantDLQ) })
		m.stop(t)
		if n := h.dlqCount(); n != wantDLQ {
			t.Fatalf("DLQ holds %d records, want %d (each once)", n, wantDLQ)
		}
	}
	run(2, unknown(1), unknown(2))
	run(3, unknown(3)) // restart: resumes after the two dead letters
	run(4, unknown(4)) // and again
	if _, err := h.deps(nil).Table.Snapshot(context.Background()); !errors.Is(err, deltawriter.ErrTableNotFound) {
		t.Fatalf("table exists before any record fits: %v", err)
	}

	// A record that fits creates the table; its commit moves the txn past the dead letters.
	m := h.startWith("pipeline", cfg, nil)
	h.produce(5, 1, 0, 1, 0)
	h.waitHandled(5, 30*time.Second, m)
	m.stop(t)
	if got := h.snapshot().Txns["orders-orders-0"]; got != 4 {
		t.Errorf("txn after the creating commit %d, want 4", got)
	}
	if states, _ := h.classifyDLQ(); !slices.Equal(states, allStates(4, dlq.AckReal)) {
		t.Errorf("DLQ states %v, want 4 real (acknowledged by the group offset or by the commit they name)", states)
	}

	if _, _, err := h.reg.RegisterSchema("orders-value", sr.Schema{Schema: v3, Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	cfg.Schema.Policy = config.PolicyEvolve // the replay adds `note`
	sum, err := h.replay(cfg, nil, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Landed != 4 || sum.Orphans != 0 || sum.Pending != 0 || sum.Duplicates != 0 {
		t.Errorf("replay %+v, want 4 landed", sum)
	}
	h.checkOrders(5)
}

// TestShutdownDuringDeadLetterProduce: SIGTERM while a flush waits for the broker to
// acknowledge its dead letters. The flush finishes (the produce is not cancelled), so the
// drain does not produce them again: the DLQ holds each record once (when the SIGTERM
// cancelled the produce, 5 of 1,452 records were dead-lettered twice, and this test saw
// 6 dead letters for 3 records).
func TestShutdownDuringDeadLetterProduce(t *testing.T) {
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Schema.Policy = config.PolicyDeadLetter
	h.produceRaw(0, []byte(`{"order_id":1}`), []byte(`{"order_id":2}`), []byte(`{"order_id":3}`))
	// From here on the only producer is the pipeline's dead-letter producer.
	var delayed atomic.Bool
	inFlight, sigterm := newLatch(), newLatch()
	h.cluster.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		if !delayed.Swap(true) {
			inFlight.open()
			sigterm.wait() // the first produce is answered once SIGTERM has arrived
		}
		return nil, nil, false
	})
	m := h.startWith("pipeline", cfg, nil)
	t.Cleanup(sigterm.open) // runs before the member's cleanup: a failed test does not leave the broker blocked
	waitFor(t, 30*time.Second, func() error {
		if !inFlight.isOpen() {
			return errors.New("no dead-letter produce in flight")
		}
		return nil
	})
	m.cancel(nil) // SIGTERM while the produce is in flight
	sigterm.open()
	m.stop(t)
	if n := h.dlqCount(); n != 3 {
		t.Fatalf("DLQ holds %d records for 3 bad ones, want each once", n)
	}
}

// TestProgressWithoutTableWhenAnotherWriterCreatesIt: dead letters made
// while the table did not exist are acknowledged by the group offset; then another
// writer (here by hand; in the field another member or pipeline) creates the table.
//   - The idle pipeline commits that progress as txns within a few seconds, naming the
//     group offset position, so the dead letters are real (before: pending until the
//     partition's next record, forever when idle).
//   - A pipeline restarted after that resumes from the group offset (the table exists but
//     has no txn for the partition) instead of re-reading and re-dead-lettering them
//     (before: from earliest, a second copy of each, the first ones orphans).
func TestProgressWithoutTableWhenAnotherWriterCreatesIt(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	h := newHarness(t, 2)
	cfg := h.config()
	cfg.Schema.Policy = config.PolicyDeadLetter
	m := h.startWith("pipeline", cfg, nil)
	h.produceRaw(1, []byte(`{"order_id":1}`), []byte(`{"order_id":2}`))
	waitFor(t, 30*time.Second, func() error { return atLeast("dead letters", h.dlqCount(), 2) })
	h.createTable(nil, nil)
	waitFor(t, 30*time.Second, func() error {
		if v, ok := h.snapshot().Txns["orders-orders-1"]; !ok || v != 1 {
			return fmt.Errorf("txn of partition 1 %d (present %v), want 1", v, ok)
		}
		return nil
	})
	if states, _ := h.classifyDLQ(); !slices.Equal(states, allStates(2, dlq.AckReal)) {
		t.Errorf("DLQ states %v, want 2 real", states)
	}
	m.stop(t)

	// Same again on a partition whose progress is in the group offset only when the
	// pipeline restarts with the table already there.
	h2 := newHarness(t, 1)
	cfg2 := h2.config()
	cfg2.Schema.Policy = config.PolicyDeadLetter
	m2 := h2.startWith("pipeline", cfg2, nil)
	h2.produceRaw(0, []byte(`{"order_id":1}`), []byte(`{"order_id":2}`))
	waitFor(t, 30*time.Second, func() error { return atLeast("dead letters", h2.dlqCount(), 2) })
	m2.stop(t)
	h2.createTable(nil, nil)
	m2 = h2.startWith("pipeline", cfg2, nil)
	h2.produce(1, 1, 0, 1, 0)
	h2.waitHandled(3, 30*time.Second, m2)
	m2.stop(t)
	if n := h2.dlqCount(); n != 2 {
		t.Errorf("DLQ holds %d records after the restart, want 2 (each once)", n)
	}
	if states, _ := h2.classifyDLQ(); !slices.Equal(states, allStates(2, dlq.AckReal)) {
		t.Errorf("DLQ states %v, want 2 real", states)
	}
	h2.checkOrders(1)
}
