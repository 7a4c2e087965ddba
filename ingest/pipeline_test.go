package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"path/filepath"
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
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
)

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
	body, err := avro.Marshal(h.schemas[v], row)
	if err != nil {
		h.t.Fatal(err)
	}
	var hdr sr.ConfluentHeader
	framed, err := hdr.AppendEncode(nil, h.ids[v], nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return append(framed, body...)
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

func (h *harness) snapshot() *deltawriter.Snapshot {
	h.t.Helper()
	st, err := storage.Open("file://" + h.tableDir)
	if err != nil {
		h.t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		h.t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background())
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
	for _, add := range snap.Files {
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

// TestTwoMembersShareTopicExactlyOnce: two members of one group share a 6-partition topic
// into one table while records keep arriving; a member joins (rebalance: revoked
// partitions are flushed within the callback) and later leaves cleanly. Every record is
// in the table exactly once and the txns end at the end offsets.
func TestTwoMembersShareTopicExactlyOnce(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	const parts = 6
	h := newHarness(t, parts)
	h.produce(1, 6000, 0, parts, -1)
	a := h.start("a", nil)
	h.waitHandled(1500, 30*time.Second, a)
	b := h.start("b", nil)
	h.produce(6001, 6000, 0, parts, -1)
	h.waitHandled(9000, 30*time.Second, a, b)
	a.stop(t) // b takes over a's partitions from their txn versions
	h.produce(12001, 3000, 1, parts, -1)
	h.waitHandled(15000, 30*time.Second, b)
	b.stop(t)
	h.checkExactlyOnce(15000)
	h.checkTxnsAtEnd()
	if n := testutil.ToFloat64(h.metrics.RecordsWritten.WithLabelValues("orders")); n != 15000 {
		t.Errorf("ingestd_records_written_total = %v, want 15000", n)
	}
	if n := h.dlqCount(); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
	// A backlog of 6,000 records fills batches of batch.max_records (500).
	if n := testutil.ToFloat64(h.metrics.BatchFlushes.WithLabelValues("orders", "records")); n < 1 {
		t.Errorf("ingestd_batch_flushes_total{trigger=\"records\"} = %v, want >= 1", n)
	}
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

// TestKilledMemberWithoutLeaving: a member that owns half the partitions dies in the
// middle of its records without flushing, committing or leaving the group (ctx cancelled
// with errAbandon, LeaveGroup swallowed). After the session timeout the survivor owns
// every partition, seeks to the txn versions and the table ends with every record
// exactly once.
func TestKilledMemberWithoutLeaving(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	const parts = 4
	h := newHarness(t, parts)
	h.produce(1, 8000, 0, parts, -1) // offsets 0..1999 of each partition
	a := h.start("a", nil)
	b := h.start("b", nil)
	h.waitHandled(2000, 30*time.Second, a, b)
	// Kill a only in a stable group where it owns partitions. Killed while it still
	// joins, a would own nothing; worse, b rejoins for the cooperative second phase at
	// that moment and kfake, unlike Kafka (MemberMetadata.shouldKeepAlive: never expire
	// a member with a JoinGroup or SyncGroup in purgatory), expires a member waiting in
	// JoinGroup when its session timer fires and never answers that request: if b's
	// timer fires before dead a's, b waits out its JoinGroup read timeout (rebalance
	// timeout + 10 s = 130 s) while a's partitions stay unowned.
	h.waitStableSplit(2, parts, 30*time.Second, a, b)
	h.produce(8001, 2000, 0, parts, -1)
	a.waitCommittedPast(t, 1999, 30*time.Second) // a is in the middle of its new records
	var swallowed atomic.Int32
	swallowLeave(h.cluster, &swallowed)
	a.cancel(errAbandon)
	if err := <-a.done; err != nil {
		t.Fatalf("abandoned member returned %v", err)
	}
	a.done <- nil
	if swallowed.Load() != 1 {
		t.Fatalf("the killed member's LeaveGroup was not swallowed (%d)", swallowed.Load())
	}
	at := h.handled()
	h.produce(10001, 2000, 0, parts, -1)
	h.waitHandled(12000, 60*time.Second, b)
	b.stop(t)
	t.Logf("killed at %d handled records", at)
	h.checkExactlyOnce(12000)
	h.checkTxnsAtEnd()
}

// waitCommittedPast waits until m has committed a record past offset off in one of the
// partitions it owns.
func (m *member) waitCommittedPast(t *testing.T, off int64, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, func() error {
		m.p.lag.mu.Lock()
		defer m.p.lag.mu.Unlock()
		for _, next := range m.p.lag.next {
			if next > off+1 {
				return nil
			}
		}
		return fmt.Errorf("the member committed nothing past offset %d", off)
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

// hookStore runs before once, just before the first commit file is written.
type hookStore struct {
	storage.Store
	once   sync.Once
	before func()
}

func (s *hookStore) PutIfAbsent(ctx context.Context, p string, data []byte) error {
	if strings.HasPrefix(p, "_delta_log/") && strings.HasSuffix(p, ".json") && s.before != nil {
		s.once.Do(s.before)
	}
	return s.Store.PutIfAbsent(ctx, p, data)
}

// TestZombieFencing: member A still holds records of a partition that member B (its new
// owner) has already committed, together with records of a partition A still owns. A's
// flush must drop exactly what the table has: first when B's commit is visible before A
// reads the snapshot, then when B's commit lands between A's snapshot read and A's commit
// (the put-if-absent race). Nothing is lost for the partition only A handled.
func TestZombieFencing(t *testing.T) {
	h := newHarness(t, 2)
	schemas := h.staticSchemas()
	newMember := func(hook func()) *Pipeline {
		st, err := storage.Open("file://" + h.tableDir)
		if err != nil {
			t.Fatal(err)
		}
		hs := &hookStore{Store: st, before: hook}
		tbl, err := deltawriter.Open(context.Background(), hs)
		if err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(testWriter{t, "zombie"}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return NewPipeline(h.config(), Deps{Logger: log, Metrics: h.metrics, Schemas: schemas, Framed: true, Table: tbl})
	}
	recs := func(part int32, from, to int64) []*kgo.Record {
		var out []*kgo.Record
		for off := from; off <= to; off++ {
			id := int64(part)*1_000_000 + off + 1
			out = append(out, &kgo.Record{Topic: h.topic, Partition: part, Offset: off, Value: h.encode(id, 0)})
		}
		return out
	}
	flush := func(p *Pipeline, rs ...[]*kgo.Record) {
		t.Helper()
		var all []*kgo.Record
		for _, r := range rs {
			all = append(all, r...)
		}
		tok := p.acquireFlush()
		defer p.releaseFlush(tok)
		left, err := p.tryFlushLocked(context.Background(), all)
		if err != nil || len(left) > 0 {
			t.Fatalf("flush: %v (%d left)", err, len(left))
		}
	}
	zombie, owner := newMember(nil), newMember(nil)
	flush(owner, recs(0, 0, 149))
	flush(zombie, recs(0, 0, 99), recs(1, 0, 49)) // partition 0 is covered; partition 1 is new
	txns := h.snapshot().Txns
	if txns["orders-orders-0"] != 149 || txns["orders-orders-1"] != 49 {
		t.Fatalf("txns after the visible race = %v, want p0=149 p1=49", txns)
	}

	// The race: the owner commits partition 0 up to 249 after the zombie read its snapshot.
	owner2 := newMember(nil)
	zombie2 := newMember(func() { flush(owner2, recs(0, 150, 249)) })
	before := testutil.ToFloat64(h.metrics.CommitConflicts.WithLabelValues("orders"))
	flush(zombie2, recs(0, 150, 199), recs(1, 50, 59))
	txns = h.snapshot().Txns
	if txns["orders-orders-0"] != 249 || txns["orders-orders-1"] != 59 {
		t.Fatalf("txns after the put-if-absent race = %v, want p0=249 p1=59", txns)
	}
	if got := testutil.ToFloat64(h.metrics.CommitConflicts.WithLabelValues("orders")) - before; got < 1 {
		t.Errorf("commit conflicts went up by %v, want >= 1", got)
	}
	ids := h.orderIDs()
	want := map[int64]bool{}
	for off := int64(0); off <= 249; off++ {
		want[off+1] = true
	}
	for off := int64(0); off <= 59; off++ {
		want[1_000_000+off+1] = true
	}
	for id, c := range ids {
		if !want[id] || c != 1 {
			t.Errorf("order %d is in the table %d times (expected: %v)", id, c, want[id])
		}
	}
	if len(ids) != len(want) {
		t.Errorf("table has %d distinct orders, want %d", len(ids), len(want))
	}
}

// TestIdlePollsAndDeadLetterOnlyBatch: a batch made only of poison pills (an hour old)
// advances the txn with one txn-only commit after the dead letters are acknowledged
// (C23 a); then ten
// poll cycles without records commit nothing (C23 b). The metrics pass client_golang's
// linter.
func TestIdlePollsAndDeadLetterOnlyBatch(t *testing.T) {
	h := newHarness(t, 1)
	h.produce(1, 100, 0, 1, -1)
	a := h.start("a", func(d *Deps) { d.KafkaOpts = append(d.KafkaOpts, kgo.FetchMaxWait(100*time.Millisecond)) })
	h.waitHandled(100, 30*time.Second, a)
	v0 := h.snapshot().Version
	var pills [][]byte
	for i := range 50 {
		switch i % 3 {
		case 0:
			pills = append(pills, []byte(`{"order_id":1}`)) // bad magic
		case 1:
			pills = append(pills, []byte{0, 0, 0}) // too short
		default:
			pills = append(pills, []byte{0, 0, 0, 0x0f, 0x42, 2}) // unknown schema id
		}
	}
	h.produceRaw(0, pills...)
	h.waitHandled(150, 30*time.Second, a)
	snap := h.snapshot()
	if snap.Version != v0+1 {
		t.Fatalf("the dead-letter-only batch made versions %d..%d, want one commit", v0+1, snap.Version)
	}
	if n := h.dlqCount(); n != 50 {
		t.Fatalf("dead-letter topic holds %d records, want 50", n)
	}
	// The commit file is visible before the pipeline counts the commit (it does so after
	// Table.Commit returns): wait until it counted every version, all of them its own, so
	// that the idle polls below start from a settled count.
	commits := h.waitCounter(h.metrics.Commits.WithLabelValues("orders"), float64(snap.Version+1), 30*time.Second)
	batches := testutil.ToFloat64(h.metrics.Batches.WithLabelValues("orders"))
	var fetches atomic.Int32
	h.cluster.ControlKey(kmsg.Fetch.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		fetches.Add(1)
		return nil, nil, false
	})
	waitFor(t, 30*time.Second, func() error { // ten empty polls (FetchMaxWait is 100 ms here)
		if n := fetches.Load(); n < 10 {
			return fmt.Errorf("only %d fetches", n)
		}
		return nil
	})
	if v := h.snapshot().Version; v != snap.Version {
		t.Errorf("idle polls made commits: version %d -> %d", snap.Version, v)
	}
	if c := testutil.ToFloat64(h.metrics.Commits.WithLabelValues("orders")); c != commits {
		t.Errorf("idle polls counted commits: %v -> %v", commits, c)
	}
	if b := testutil.ToFloat64(h.metrics.Batches.WithLabelValues("orders")); b != batches {
		t.Errorf("idle polls counted batches: %v -> %v", batches, b)
	}
	a.stop(t)
	if v := h.snapshot().Version; v != snap.Version {
		t.Errorf("shutdown with nothing buffered committed: version %d -> %d", snap.Version, v)
	}
	for reason, want := range map[string]float64{"bad_magic": 17, "too_short": 17, "schema_not_found": 16} {
		if got := testutil.ToFloat64(h.metrics.RecordsDeadLettered.WithLabelValues("orders", reason)); got != want {
			t.Errorf("dead-lettered %s = %v, want %v", reason, got, want)
		}
	}
	if lag := testutil.ToFloat64(h.metrics.ConsumerLag.WithLabelValues("orders", "orders", "0")); lag != 0 {
		t.Errorf("consumer lag after catching up = %v, want 0", lag)
	}
	problems, err := testutil.GatherAndLint(h.promReg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
	}
	n, err := testutil.GatherAndCount(h.promReg, "ingestd_schema_registry_requests_total", "ingestd_consumer_lag_records",
		"ingestd_batches_total", "ingestd_delta_commit_duration_seconds")
	if err != nil || n < 4 {
		t.Errorf("expected registry, lag, batch and duration series, counted %d (%v)", n, err)
	}
}

// TestRegistryOutagePausesOnlyWaitingPartitions (C20): while the registry cannot serve
// schema v2, the partition whose next record needs it is paused with backoff and holds
// its txn before that record; the other partitions keep committing; nothing is
// dead-lettered; after recovery everything lands exactly once.
func TestRegistryOutagePausesOnlyWaitingPartitions(t *testing.T) {
	const parts = 3
	h := newHarness(t, parts)
	schemas := h.staticSchemas()
	schemas.fail[h.ids[1]] = true
	schemas.setDown(true)
	h.produce(1, 300, 0, parts, -1)
	a := h.start("a", func(d *Deps) { d.Schemas = schemas })
	h.waitHandled(300, 30*time.Second, a)
	h.produce(301, 100, 1, parts, 0) // v2, partition 0 only: waits for the registry
	h.produce(401, 200, 0, parts, 1) // v1 to partition 1 flows meanwhile
	h.produce(601, 200, 0, parts, 2)
	waitFor(t, 30*time.Second, func() error {
		txns := h.snapshot().Txns
		if txns["orders-orders-1"] == 299 && txns["orders-orders-2"] == 299 {
			if txns["orders-orders-0"] != 99 {
				t.Fatalf("partition 0 moved to %d during the outage, want 99", txns["orders-orders-0"])
			}
			return nil
		}
		return fmt.Errorf("other partitions did not progress during the outage: %v", txns)
	})
	time.Sleep(time.Second)
	if b := testutil.ToFloat64(h.metrics.PartitionsBackingOff.WithLabelValues("orders")); b != 1 {
		t.Errorf("partitions backing off = %v, want 1", b)
	}
	if e := testutil.ToFloat64(h.metrics.TransientErrors.WithLabelValues("orders", "schema registry")); e < 1 {
		t.Errorf("transient registry errors = %v, want >= 1", e)
	}
	if n := h.dlqCount(); n != 0 {
		t.Fatalf("%d records dead-lettered during a registry outage", n)
	}
	schemas.setDown(false)
	h.waitHandled(800, 60*time.Second, a)
	a.stop(t)
	h.checkExactlyOnce(800)
	h.checkTxnsAtEnd()
	if n := h.dlqCount(); n != 0 {
		t.Fatalf("%d records dead-lettered after the outage", n)
	}
	if b := testutil.ToFloat64(h.metrics.PartitionsBackingOff.WithLabelValues("orders")); b != 0 {
		t.Errorf("partitions backing off after recovery = %v, want 0", b)
	}
	for _, trigger := range []string{"age", "retry"} {
		if n := testutil.ToFloat64(h.metrics.BatchFlushes.WithLabelValues("orders", trigger)); n < 1 {
			t.Errorf("ingestd_batch_flushes_total{trigger=%q} = %v, want >= 1", trigger, n)
		}
	}
}
