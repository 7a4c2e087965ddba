package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/deltawriter/tableops"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
)

// The unit-test harness of the pipeline, in one place: an in-process broker (kfake),
// schema registry (srfake) and table directory (harness, newHarness); members, each a
// running pipeline standing in for one `ingestd run` (start, startHooked, stop, stopped,
// abandonOnCause); the table and topics read back (snapshot, handled, orderIDs, commits,
// checkExactlyOnce, readTopicAll, dlqCount); waiting on conditions (waitFor, running,
// atLeast, waitHandled, waitGroup, waitCounter, drained); flushes held in flight (latch,
// holdFirstFlush, failFirstCommit, waitBatched); tables made by hand (createTable,
// commitOther); records and files (encode, produce, writeConfig). The flusher-level
// fixtures (a flusher without a broker: newBreakFlusher, breakRecords, mapSchemas) are in
// flush_dense_break_test.go.

const (
	testOrdersV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"order_id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}}]}`
	testOrdersV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"order_id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
  {"name":"channel","type":["null","string"],"default":null}]}`
)

// harness is an in-process broker (kfake), registry (srfake) and a table directory.
type harness struct {
	t        *testing.T
	cluster  *kfake.Cluster
	reg      *srfake.Registry
	tableDir string
	topic    string
	dlq      string
	ids      [2]int
	schemas  [2]avro.Schema
	promReg  *prometheus.Registry
	metrics  *Metrics
	producer *kgo.Client
}

func newHarness(t *testing.T, partitions int32) *harness {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "orders"),
		kfake.SeedTopics(1, "orders.dlq"), kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	reg := srfake.New()
	t.Cleanup(reg.Close)
	h := &harness{t: t, cluster: cluster, reg: reg, tableDir: filepath.Join(t.TempDir(), "orders"),
		topic: "orders", dlq: "orders.dlq", promReg: prometheus.NewRegistry()}
	h.metrics = NewMetrics(h.promReg)
	for i, s := range []string{testOrdersV1, testOrdersV2} {
		id, _, err := reg.RegisterSchema("orders-value", sr.Schema{Schema: s, Type: sr.TypeAvro})
		if err != nil {
			t.Fatal(err)
		}
		h.ids[i] = id
		if h.schemas[i], err = avro.ParseWithCache(s, "", &avro.SchemaCache{}); err != nil {
			t.Fatal(err)
		}
	}
	h.producer, err = kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.producer.Close)
	return h
}

func (h *harness) config() *config.Config {
	return &config.Config{
		Name:  "orders",
		AppID: "orders",
		Kafka: config.Kafka{Brokers: h.cluster.ListenAddrs(), Topics: []string{h.topic}, Group: "ingestd-orders",
			StartOffset: "earliest", SessionTimeout: 3 * time.Second},
		SchemaRegistry: &config.Registry{URL: h.reg.URL()},
		Table:          config.Table{URI: "file://" + h.tableDir, Create: true},
		Schema:         config.Schema{Policy: config.PolicyEvolve, OnIncompatible: config.PolicyHalt},
		DeadLetter:     config.DeadLetter{Topic: h.dlq},
		Batch:          config.Batch{MaxRecords: 500, MaxBytes: 64 << 20, MaxAge: 100 * time.Millisecond},
	}
}

// encode returns a Confluent-framed order; v is 0 (v1) or 1 (v2).
func (h *harness) encode(id int64, v int) []byte {
	row := map[string]any{"order_id": id, "customer": fmt.Sprintf("c-%d", id%17), "amount": big.NewRat(id*37%100000, 100)}
	if v == 1 {
		row["channel"] = "web"
	}
	return h.framed(h.ids[v], h.schemas[v], row)
}

// framed is v written in Avro with schema s, Confluent-framed with schema id id.
func (h *harness) framed(id int, s avro.Schema, v any) []byte {
	h.t.Helper()
	body, err := avro.Marshal(s, v)
	if err != nil {
		h.t.Fatal(err)
	}
	var hdr sr.ConfluentHeader
	framed, err := hdr.AppendEncode(nil, id, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return append(framed, body...)
}

// register registers the Avro schema text under subject in the registry and returns its
// schema id.
func (h *harness) register(subject, text string) int {
	h.t.Helper()
	id, _, err := h.reg.RegisterSchema(subject, sr.Schema{Schema: text, Type: sr.TypeAvro})
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

// produce writes orders [from, from+n) round-robin over the partitions (or to partition
// only, if only >= 0) and returns the offsets per partition's end afterwards.
func (h *harness) produce(from, n int64, v int, partitions int32, only int32) {
	h.t.Helper()
	var recs []*kgo.Record
	for id := from; id < from+n; id++ {
		part := int32(id % int64(partitions))
		if only >= 0 {
			part = only
		}
		recs = append(recs, &kgo.Record{Topic: h.topic, Partition: part, Key: fmt.Appendf(nil, "%d", id), Value: h.encode(id, v)})
	}
	if err := h.producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) produceRaw(part int32, values ...[]byte) {
	h.t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		// An hour old, like a backlog: a dead letter keeps its source timestamp, which must
		// not make its delivery time out (kgo measures RecordDeliveryTimeout from it).
		recs = append(recs, &kgo.Record{Topic: h.topic, Partition: part, Value: v, Timestamp: time.Now().Add(-time.Hour)})
	}
	if err := h.producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// member is one running pipeline, the in-process stand-in for one `ingestd run`.
type member struct {
	p      *Pipeline
	cancel context.CancelCauseFunc
	done   chan error
}

func (h *harness) deps(log *slog.Logger) Deps {
	h.t.Helper()
	st, err := storage.Open("file://" + h.tableDir)
	if err != nil {
		h.t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		h.t.Fatal(err)
	}
	cl, err := sr.NewClient(sr.URLs(h.reg.URL()))
	if err != nil {
		h.t.Fatal(err)
	}
	return Deps{Logger: log, Metrics: h.metrics, Schemas: decode.NewRegistry(cl), Framed: true, Table: tbl,
		KafkaOpts: []kgo.Opt{kgo.HeartbeatInterval(200 * time.Millisecond)}}
}

func (h *harness) start(name string, tweak func(*Deps)) *member {
	h.t.Helper()
	return h.startWith(name, h.config(), tweak)
}

// startWith is start with a config of the test's own (e.g. another policy).
func (h *harness) startWith(name string, cfg *config.Config, tweak func(*Deps)) *member {
	h.t.Helper()
	return h.startHooked(name, cfg, tweak, nil)
}

// startHooked is startWith that also sets the pipeline's test seams (hooks) before Run.
func (h *harness) startHooked(name string, cfg *config.Config, tweak func(*Deps), seams func(*hooks)) *member {
	h.t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{h.t, name}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d := h.deps(log)
	if tweak != nil {
		tweak(&d)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	m := &member{p: NewPipeline(cfg, d), cancel: cancel, done: make(chan error, 1)}
	abandonOnCause(m.p)
	if seams != nil {
		seams(&m.p.hooks)
	}
	go func() { m.done <- m.p.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel(nil)
		<-m.done
		m.done <- nil
	})
	return m
}

// stop is SIGTERM: flush, commit, leave the group.
func (m *member) stop(t *testing.T) {
	t.Helper()
	m.cancel(nil)
	if err := <-m.done; err != nil {
		t.Fatalf("member stopped with %v", err)
	}
	m.done <- nil
}

type testWriter struct {
	t    *testing.T
	name string
}

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s: %s", w.name, bytes.TrimRight(b, "\n"))
	return len(b), nil
}

// table opens the harness's table (a Delta table of its own, not a pipeline's).
func (h *harness) table() *deltawriter.Table {
	h.t.Helper()
	st, err := storage.Open("file://" + h.tableDir)
	if err != nil {
		h.t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		h.t.Fatal(err)
	}
	return tbl
}

func (h *harness) snapshot() *deltawriter.Snapshot {
	h.t.Helper()
	snap, err := h.table().Snapshot(context.Background())
	if err != nil && !errors.Is(err, deltawriter.ErrTableNotFound) {
		h.t.Fatal(err)
	}
	return snap
}

// handled is the number of source records the table's txns account for.
func (h *harness) handled() int64 {
	var n int64
	for _, v := range h.snapshot().Txns {
		n += v + 1
	}
	return n
}

func (h *harness) waitHandled(want int64, timeout time.Duration, members ...*member) {
	h.t.Helper()
	waitFor(h.t, timeout, func() error {
		running(h.t, members...)
		if n := h.handled(); n < want {
			return fmt.Errorf("the table handled %d of %d records", n, want)
		}
		return nil
	})
}

// waitStableSplit waits until the group is Stable with n members that each own at least
// one partition and together own all partitions [0, parts): no rebalance is in flight.
func (h *harness) waitStableSplit(n int, parts int32, timeout time.Duration, members ...*member) {
	h.t.Helper()
	h.waitGroup(timeout, members, func(g kadm.DescribedGroup) error {
		owned, each := map[int32]bool{}, true
		var split []string
		for _, m := range g.Members {
			ca, _ := m.Assigned.AsConsumer()
			var mine []int32
			if ca != nil {
				for _, t := range ca.Topics {
					for _, p := range t.Partitions {
						owned[p] = true
						mine = append(mine, p)
					}
				}
			}
			each = each && len(mine) > 0
			split = append(split, fmt.Sprint(mine))
		}
		last := fmt.Sprintf("state %s, %d members, assignments %v", g.State, len(g.Members), split)
		if g.Err == nil && g.State == "Stable" && len(g.Members) == n && each && len(owned) == int(parts) {
			h.t.Logf("group %s", last)
			return nil
		}
		return fmt.Errorf("no stable group of %d members sharing %d partitions: %s", n, parts, last)
	})
}

// waitGroup waits until check accepts the described consumer group "ingestd-orders",
// failing at once when a member's Run has returned (running).
func (h *harness) waitGroup(timeout time.Duration, members []*member, check func(kadm.DescribedGroup) error) {
	h.t.Helper()
	adm := kadm.NewClient(h.producer)
	waitFor(h.t, timeout, func() error {
		running(h.t, members...)
		gs, err := adm.DescribeGroups(context.Background(), "ingestd-orders")
		if err != nil {
			h.t.Fatal(err)
		}
		return check(gs["ingestd-orders"])
	})
}

// waitCounter waits until c reaches want and returns it; it fails on another value
// after timeout.
func (h *harness) waitCounter(c prometheus.Collector, want float64, timeout time.Duration) float64 {
	h.t.Helper()
	waitFor(h.t, timeout, func() error {
		if got := testutil.ToFloat64(c); got != want {
			return fmt.Errorf("counter is %v, want %v", got, want)
		}
		return nil
	})
	return want
}

// orderIDs reads the order_id column of every live data file: id → times present. It also
// fails when a file is referenced by two add actions across the log.
func (h *harness) orderIDs() map[int64]int {
	h.t.Helper()
	ctx := context.Background()
	snap := h.snapshot()
	st, err := storage.Open("file://" + h.tableDir)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[int64]int{}
	for _, add := range snap.Files.All() {
		for _, id := range h.fileOrderIDs(st, add.Path) {
			out[id]++
		}
	}
	// Every add across the whole log names a distinct file.
	files, err := st.List(ctx, "_delta_log")
	if err != nil {
		h.t.Fatal(err)
	}
	seen := map[string]string{}
	for _, fi := range files {
		if !strings.HasSuffix(fi.Name, ".json") || strings.HasPrefix(filepath.Base(fi.Name), "_") {
			continue
		}
		b, err := st.Get(ctx, "_delta_log/"+filepath.Base(fi.Name))
		if err != nil {
			h.t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if i := strings.Index(line, `{"add":{"path":"`); i >= 0 {
				path := line[i+len(`{"add":{"path":"`):]
				path = path[:strings.IndexByte(path, '"')]
				if prev, dup := seen[path]; dup {
					h.t.Errorf("data file %s is added by %s and %s", path, prev, fi.Name)
				}
				seen[path] = fi.Name
			}
		}
	}
	return out
}

// fileOrderIDs reads the order_id column of the data file at path, in row order.
func (h *harness) fileOrderIDs(st storage.Store, path string) []int64 {
	h.t.Helper()
	b, err := st.Get(context.Background(), path)
	if err != nil {
		h.t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		h.t.Fatal(err)
	}
	leaf, ok := f.Schema().Lookup("order_id")
	if !ok {
		h.t.Fatalf("%s has no order_id column", path)
	}
	var out []int64
	for _, rg := range f.RowGroups() {
		pages := rg.ColumnChunks()[leaf.ColumnIndex].Pages()
		for {
			pg, err := pages.ReadPage()
			if err == io.EOF {
				break
			}
			if err != nil {
				h.t.Fatal(err)
			}
			vals := make([]parquet.Value, pg.NumValues())
			n, err := pg.Values().ReadValues(vals)
			if err != nil && err != io.EOF {
				h.t.Fatal(err)
			}
			for _, v := range vals[:n] {
				out = append(out, v.Int64())
			}
		}
		_ = pages.Close()
	}
	return out
}

// checkExactlyOnce asserts ids [1, n] are each in the table once and nothing else is.
func (h *harness) checkExactlyOnce(n int64) {
	h.t.Helper()
	ids := h.orderIDs()
	missing, dups := 0, 0
	for id := int64(1); id <= n; id++ {
		switch c := ids[id]; {
		case c == 0:
			missing++
		case c > 1:
			dups++
		}
	}
	if missing > 0 || dups > 0 || int64(len(ids)) != n {
		h.t.Fatalf("table holds %d distinct ids for %d orders: %d missing, %d duplicated", len(ids), n, missing, dups)
	}
}

// checkTxnsAtEnd asserts every partition's txn version is its end offset minus one.
func (h *harness) checkTxnsAtEnd() {
	h.t.Helper()
	ends, err := kadm.NewClient(h.producer).ListEndOffsets(context.Background(), h.topic)
	if err != nil {
		h.t.Fatal(err)
	}
	txns := h.snapshot().Txns
	ends.Each(func(o kadm.ListedOffset) {
		v, ok := txns[fmt.Sprintf("orders-%s-%d", o.Topic, o.Partition)]
		if o.Offset > 0 && (!ok || v != o.Offset-1) {
			h.t.Errorf("partition %d: txn version %d (present %v), want end offset %d - 1", o.Partition, v, ok, o.Offset)
		}
	})
}

func (h *harness) dlqCount() int64 {
	h.t.Helper()
	ends, err := kadm.NewClient(h.producer).ListEndOffsets(context.Background(), h.dlq)
	if err != nil {
		h.t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// swallowLeave makes the broker answer the next LeaveGroup with success without removing
// the member: like kill -9, the group only notices when the session times out.
func swallowLeave(c *kfake.Cluster, swallowed *atomic.Int32) {
	c.ControlKey(kmsg.LeaveGroup.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.LeaveGroupRequest)
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		for _, m := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
			resp.Members = append(resp.Members, rm)
		}
		swallowed.Add(1)
		return resp, nil, true
	})
}

// staticSchemas serves fixed writer schemas by id; down makes ids in fail transient.
type staticSchemas struct {
	mu   sync.Mutex
	byID map[int]*decode.WriterSchema
	down bool
	fail map[int]bool
}

func (s *staticSchemas) Schema(_ context.Context, id int) (*decode.WriterSchema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down && s.fail[id] {
		return nil, fmt.Errorf("look up schema %d: %w: registry unreachable", id, decode.ErrTransient)
	}
	ws, ok := s.byID[id]
	if !ok {
		return nil, &decode.Error{Reason: decode.ReasonSchemaNotFound, Err: fmt.Errorf("schema %d not found", id)}
	}
	return ws, nil
}

func (s *staticSchemas) setDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

func (h *harness) staticSchemas() *staticSchemas {
	h.t.Helper()
	s := &staticSchemas{byID: map[int]*decode.WriterSchema{}, fail: map[int]bool{}}
	for i, text := range []string{testOrdersV1, testOrdersV2} {
		ws, err := decode.ParseWriterSchema(h.ids[i], text)
		if err != nil {
			h.t.Fatal(err)
		}
		s.byID[h.ids[i]] = ws
	}
	return s
}

// errAbandon, as the cancel cause of a member's context, stops its Run like kill -9
// (hooks.abandon): nothing buffered is flushed, no offsets are committed. Tests pair it
// with a broker that ignores the LeaveGroup (swallowLeave).
var errAbandon = errors.New("pipeline abandoned without flushing")

// abandonOnCause makes p stop like kill -9 when its Run's context is cancelled with
// errAbandon as the cause.
func abandonOnCause(p *Pipeline) {
	p.hooks.abandon = func(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errAbandon) }
}

// waitFor calls cond every 10 ms until it returns nil, and fails t with cond's last error
// after timeout. cond runs on t's goroutine, so it may stop the test itself (t.Fatal).
func waitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running fails t if one of members has returned from Run.
func running(t testing.TB, members ...*member) {
	t.Helper()
	for _, m := range members {
		select {
		case err := <-m.done:
			m.done <- err
			t.Fatalf("a member stopped early: %v", err)
		default:
		}
	}
}

// atLeast is a waitFor condition: nil once got >= want.
func atLeast(what string, got, want int64) error {
	if got < want {
		return fmt.Errorf("%s is %d, want at least %d", what, got, want)
	}
	return nil
}

// stopped waits until m's Run returns by itself and returns its error; after timeout it
// fails t with why (what the member should not have kept doing).
func (m *member) stopped(t testing.TB, timeout time.Duration, why string) error {
	t.Helper()
	select {
	case err := <-m.done:
		m.done <- err
		return err
	case <-time.After(timeout):
		t.Fatal(why)
		return nil
	}
}

// commitLog is one Delta commit of the harness's table, as the log holds it: the order
// ids of its data files (in file order) and its txn versions by appId.
type commitLog struct {
	version int64
	ids     []int64
	txns    map[string]int64
}

// commits reads every commit of the table's log, oldest first.
func (h *harness) commits() []commitLog {
	h.t.Helper()
	st, err := storage.Open("file://" + h.tableDir)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []commitLog
	for v := int64(0); ; v++ {
		b, err := st.Get(context.Background(), fmt.Sprintf("_delta_log/%020d.json", v))
		if err != nil {
			if len(out) == 0 {
				h.t.Fatalf("read commit 0: %v", err)
			}
			return out
		}
		c := commitLog{version: v, txns: map[string]int64{}}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var a struct {
				Add *struct {
					Path string `json:"path"`
				} `json:"add"`
				Txn *struct {
					AppID   string `json:"appId"`
					Version int64  `json:"version"`
				} `json:"txn"`
			}
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				h.t.Fatalf("commit %d: %v", v, err)
			}
			if a.Add != nil {
				c.ids = append(c.ids, h.fileOrderIDs(st, a.Add.Path)...)
			}
			if a.Txn != nil {
				c.txns[a.Txn.AppID] = a.Txn.Version
			}
		}
		out = append(out, c)
	}
}

// batched is the number of records the member's batcher holds.
func (m *member) batched() int {
	m.p.batchMu.Lock()
	defer m.p.batchMu.Unlock()
	return m.p.batch.Len()
}

// drained is a waitFor condition: nil once m has nothing left to flush, no flush in
// flight (it waits for the flush token) and no record in its batcher. A halted member
// reaches it once the records it had buffered behind the halt have been flushed (and
// dropped), so no later age flush can commit anything.
func (m *member) drained() error {
	tok := m.p.acquireFlush()
	defer m.p.releaseFlush(tok)
	if n := m.batched(); n > 0 {
		return fmt.Errorf("the batcher still holds %d records", n)
	}
	return nil
}

// latch holds a test hook until the test opens it; open is idempotent. Register open with
// t.Cleanup after the member starts: cleanups run last in, first out, so a failed test opens
// the latch before the member's own cleanup waits for the flush worker.
type latch struct {
	ch   chan struct{}
	once sync.Once
}

func newLatch() *latch { return &latch{ch: make(chan struct{})} }

func (l *latch) wait() { <-l.ch }

func (l *latch) open() { l.once.Do(func() { close(l.ch) }) }

// isOpen reports whether l has been opened.
func (l *latch) isOpen() bool {
	select {
	case <-l.ch:
		return true
	default:
		return false
	}
}

// holdFirstFlush is a hooks.beforeFlush that counts the worker's flushes in calls, opens
// inFlight when the first one starts (that batch is in flight: the worker holds the flush
// token) and holds it until l opens, then runs then (nil: nothing more).
func holdFirstFlush(inFlight, l *latch, calls *atomic.Int32, then func()) func([]*kgo.Record) {
	return func([]*kgo.Record) {
		if calls.Add(1) == 1 {
			inFlight.open()
			l.wait()
			if then != nil {
				then()
			}
		}
	}
}

// failFirstCommit is a hooks.beforeCommit whose first call opens inFlight (the flush that
// reached it is in flight: its runner holds the flush token), waits until l opens and
// then fails transiently (an injected store timeout); later calls let their commit go on.
func failFirstCommit(inFlight, l *latch) func(int) error {
	var failed atomic.Bool
	return func(int) error {
		if failed.CompareAndSwap(false, true) {
			inFlight.open()
			l.wait()
			return &transientError{stage: "commit", err: errors.New("injected: the store timed out")}
		}
		return nil
	}
}

// waitBatched waits up to 30 s until m runs, a flush is in flight (a test hook opened
// inFlight and holds it: holdFirstFlush, failFirstCommit) and m's batcher holds at least n
// records behind it (exactly n with exact). The batcher's count alone does not say that a
// flush is in flight: the poll loop adds the record that fills a batch before it hands the
// batch to the worker (flushWorker.dispatch), so the count reaches n for a moment with
// nothing in flight, and a SIGTERM or a kill -9 then keeps that batch in the batcher.
func waitBatched(t *testing.T, m *member, inFlight *latch, n int, exact bool) {
	t.Helper()
	waitFor(t, 30*time.Second, func() error {
		running(t, m)
		if !inFlight.isOpen() {
			return errors.New("no flush is in flight (held by the test's hook)")
		}
		if got := m.batched(); got < n || exact && got != n {
			return fmt.Errorf("the batcher holds %d records behind the flush in flight, want %d", got, n)
		}
		return nil
	})
}

// createTable writes version 0 of the harness's table as another writer would: the
// orders columns, partitioned by partitionBy, with the given table properties.
func (h *harness) createTable(partitionBy []string, conf map[string]string, extra ...*deltalog.StructField) {
	h.t.Helper()
	schema := &deltalog.StructType{Fields: append([]*deltalog.StructField{
		{Name: "order_id", Type: deltalog.Long, Nullable: true, Metadata: map[string]any{}},
		{Name: "customer", Type: deltalog.String, Nullable: true, Metadata: map[string]any{}},
		{Name: "amount", Type: deltalog.DecimalType{Precision: 10, Scale: 2}, Nullable: true, Metadata: map[string]any{}},
	}, extra...)}
	if slices.ContainsFunc(extra, func(f *deltalog.StructField) bool { return f.Type == deltalog.Binary }) {
		// PrepareSchemaChange refuses a binary partition column: write it as another writer would.
		proto, meta := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, deltalog.Metadata{ID: "t", Format: deltalog.Format{Provider: "parquet", Options: map[string]string{}},
			PartitionColumns: partitionBy, Configuration: map[string]string{}}
		b, err := json.Marshal(schema)
		if err != nil {
			h.t.Fatal(err)
		}
		meta.SchemaString = string(b)
		h.commitOther(0, proto, meta)
		return
	}
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "orders", Schema: schema, PartitionColumns: partitionBy})
	if err != nil {
		h.t.Fatal(err)
	}
	proto, meta := *create.Protocol, *create.Metadata
	maps.Copy(meta.Configuration, conf)
	if len(conf) > 0 {
		proto.MinWriterVersion = 3 // CHECK constraints
	}
	h.commitOther(0, proto, meta)
}

// commitOther writes commit version of the harness's table by hand, as another writer
// (Spark) would: deltawriter itself refuses to commit metadata it cannot write.
func (h *harness) commitOther(version int64, proto deltalog.Protocol, meta deltalog.Metadata) {
	h.t.Helper()
	var buf bytes.Buffer
	for _, a := range []any{map[string]any{"protocol": proto}, map[string]any{"metaData": meta},
		map[string]any{"commitInfo": map[string]any{"timestamp": time.Now().UnixMilli(), "operation": "ADD CONSTRAINT"}}} {
		b, err := json.Marshal(a)
		if err != nil {
			h.t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	log := filepath.Join(h.tableDir, "_delta_log")
	if err := os.MkdirAll(log, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(log, fmt.Sprintf("%020d.json", version)), buf.Bytes(), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// syncBuffer is a log sink safe for the replay's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// readTopicAll reads every record of topic up to its end offsets now.
func (h *harness) readTopicAll(topic string) []*kgo.Record {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		h.t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	var out []*kgo.Record
	for int64(len(out)) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("read %s: %d of %d records", topic, len(out), total)
		}
		out = append(out, fs.Records()...)
	}
	return out
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

// encodeCustomer is encode(id, 0) with the given customer.
func (h *harness) encodeCustomer(id int64, customer string) []byte {
	return h.framed(h.ids[0], h.schemas[0], map[string]any{"order_id": id, "customer": customer, "amount": big.NewRat(id, 100)})
}
