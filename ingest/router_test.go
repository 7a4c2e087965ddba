package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
)

// A pipeline with kafka.topic_pattern gives each matching topic a table of its own: the
// topics there at start, one created while it runs (found by discovery), none for a topic
// the pattern does not match; a table that fails to open is reported and the others
// run; the tables share batch.max_bytes and the one consumer group.
// routerFixture is a Router over an in-process broker and registry: its pipeline reads
// the topics matching pg\.(?P<t>.+) into tables under root/{t}.
type routerFixture struct {
	h      *harness
	adm    *kadm.Client
	root   string
	claims *TableClaims // shared by the fixture's routers, as by the pipelines of one process
	*routerRun
}

// routerRun is one Router of a fixture, running until stopped.
type routerRun struct {
	r       *Router
	cancel  context.CancelFunc
	done    chan error
	err     error // Run's, once stopped
	stopped bool
}

// startRouter creates topics, runs the router of a pipeline named cdc (tweak changes its
// config first) until the test ends; a table whose topic is in refuse fails to open with
// that error.
func startRouter(t *testing.T, topics []string, tweak func(*config.Config), refuse map[string]error) *routerFixture {
	t.Helper()
	f := newRouterFixture(t, topics)
	f.routerRun = f.start(tweak, refuse)
	return f
}

// newRouterFixture creates topics on a new broker; it runs no router yet (start).
func newRouterFixture(t *testing.T, topics []string) *routerFixture {
	t.Helper()
	h := newHarness(t, 1)
	f := &routerFixture{h: h, adm: kadm.NewClient(h.producer), root: t.TempDir(), claims: NewTableClaims()}
	if _, err := f.adm.CreateTopics(context.Background(), 1, 1, nil, topics...); err != nil {
		t.Fatal(err)
	}
	return f
}

// start runs one more router in the fixture, of a pipeline named cdc reading
// pg\.(?P<t>.+) into root/{t} unless tweak changes its config, until the test ends.
func (f *routerFixture) start(tweak func(*config.Config), refuse map[string]error) *routerRun {
	h, t := f.h, f.h.t
	t.Helper()
	cfg := h.config()
	cfg.Name, cfg.AppID, cfg.Kafka.Group = "cdc", "cdc", "ingestd-cdc"
	cfg.Kafka.Topics, cfg.Kafka.TopicPattern, cfg.Kafka.DiscoverEvery = nil, `pg\.(?P<t>.+)`, time.Second
	cfg.Table.URI = "file://" + f.root + "/{t}"
	if tweak != nil {
		tweak(cfg)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t, "router " + cfg.Name}, &slog.HandlerOptions{Level: slog.LevelError}))
	open := func(ctx context.Context, tc *config.Config) (*Pipeline, error) {
		if err := refuse[tc.Kafka.Topics[0]]; err != nil {
			return nil, err
		}
		at := *h // the harness of this table
		at.tableDir = strings.TrimPrefix(tc.Table.URI, "file://")
		return NewPipeline(tc, at.deps(log)), nil
	}
	list := func(ctx context.Context) ([]string, error) {
		ds, err := f.adm.ListTopics(ctx)
		return ds.Names(), err
	}
	run := &routerRun{r: NewRouter(cfg, log, h.metrics, open, list, f.claims)}
	ctx, cancel := context.WithCancel(context.Background())
	run.cancel, run.done = cancel, make(chan error, 1)
	go func() { run.done <- run.r.Run(ctx) }()
	t.Cleanup(func() { run.stop() })
	return run
}

// stop ends the router (like SIGTERM) and returns Run's error; later calls return it again.
func (f *routerRun) stop() error {
	if !f.stopped {
		f.cancel()
		f.err, f.stopped = <-f.done, true
	}
	return f.err
}

// produce writes orders [from, from+n) to topic in schema v (0: v1, 1: v2).
func (f *routerFixture) produce(topic string, from, n int64, v int) {
	f.h.t.Helper()
	var recs []*kgo.Record
	for id := from; id < from+n; id++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%d", id), Value: f.h.encode(id, v)})
	}
	if err := f.h.producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		f.h.t.Fatal(err)
	}
}

// ids are the order ids of table root/<table>, with their row counts.
func (f *routerFixture) ids(table string) map[int64]int {
	at := *f.h
	at.tableDir = filepath.Join(f.root, table)
	return at.orderIDs()
}

// states are the router's statuses as "<pipeline>=<state>".
func (f *routerRun) states() []string {
	var out []string
	for _, s := range f.r.Statuses() {
		out = append(out, s.Pipeline+"="+string(s.State))
	}
	return out
}

func TestRouterOneTablePerTopic(t *testing.T) {
	f := startRouter(t, []string{"pg.a", "pg.b", "pg.bad", "other"}, func(c *config.Config) { c.Batch.MaxBytes = 60 << 20 },
		map[string]error{"pg.bad": errors.New("check store: access denied")})
	adm, root, r, ids := f.adm, f.root, f.r, f.ids
	ctx := context.Background()
	produce := func(topic string, from, n int64) { f.produce(topic, from, n, 0) }
	produce("pg.a", 0, 50)
	produce("pg.b", 100, 30)
	produce("other", 200, 10)
	waitTables := func(want map[string]int) {
		t.Helper()
		waitFor(t, 30*time.Second, func() error {
			for table, n := range want {
				if got := len(ids(table)); got != n {
					return fmt.Errorf("table %s holds %d order ids, want %d", table, got, n)
				}
			}
			return nil
		})
	}
	waitTables(map[string]int{"a": 50, "b": 30})

	// A topic created while the pipeline runs gets its table within discover_every.
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "pg.c"); err != nil {
		t.Fatal(err)
	}
	produce("pg.c", 300, 20)
	produce("pg.a", 50, 5)
	waitTables(map[string]int{"a": 55, "b": 30, "c": 20})
	if got := ids("a"); got[0] != 1 || got[54] != 1 || got[100] != 0 {
		t.Fatalf("table a: ids 0, 54, 100 held %d, %d, %d times; want 1, 1, 0", got[0], got[54], got[100])
	}
	if _, err := os.Stat(filepath.Join(root, "other")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a table for topic other, which the pattern does not match: stat = %v", err)
	}

	if states, want := f.states(), []string{"cdc/pg.a=running", "cdc/pg.b=running", "cdc/pg.bad=failed", "cdc/pg.c=running"}; !slices.Equal(states, want) {
		t.Fatalf("statuses %v, want %v", states, want)
	}
	r.mu.Lock()
	for topic, tb := range r.tables {
		if tb.p == nil {
			continue
		}
		tb.p.batchMu.Lock()
		got := tb.p.batch.Limits().MaxBytes
		tb.p.batchMu.Unlock()
		if want := int64(60<<20) / 3 / 2; got != want {
			t.Errorf("table of %s: batch bound %d bytes, want %d (max_bytes shared by 3 tables, halved for the batch in flight)", topic, got, want)
		}
	}
	r.mu.Unlock()
	gs, err := adm.DescribeGroups(ctx, "ingestd-cdc")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(gs["ingestd-cdc"].Members); n != 3 {
		t.Fatalf("consumer group ingestd-cdc has %d members, want 3 (one per table)", n)
	}
	if err := f.stop(); err == nil || err.Error() != "run pipeline cdc: 1 of its 4 tables failed" {
		t.Fatalf("Run = %v, want the failed table counted", err)
	}
}

// One table's halt stops only that table's partitions: the other tables of the pipeline
// go on, and the halted one reports where it stopped.
func TestRouterHaltStaysInItsTable(t *testing.T) {
	f := startRouter(t, []string{"pg.a", "pg.b"}, func(c *config.Config) { c.Schema.Policy = config.PolicyHalt }, nil)
	r, produce := f.r, f.produce
	ids := func(table string) int { return len(f.ids(table)) }
	produce("pg.a", 0, 10, 0)
	produce("pg.b", 100, 10, 0)
	waitFor(t, 30*time.Second, func() error {
		if a, b := ids("a"), ids("b"); a != 10 || b != 10 {
			return fmt.Errorf("tables a, b hold %d, %d ids; want 10, 10", a, b)
		}
		return nil
	})
	produce("pg.b", 110, 5, 1) // v2 adds a column: the halt policy stops pg.b here
	produce("pg.a", 10, 20, 0)
	waitFor(t, 30*time.Second, func() error {
		if a := ids("a"); a != 30 {
			return fmt.Errorf("table a holds %d ids, want 30", a)
		}
		for _, s := range r.Statuses() {
			if s.Pipeline == "cdc/pg.b" && (s.State != StateHalted || len(s.Halted) != 1 || s.Halted[0].Offset != 10) {
				return fmt.Errorf("cdc/pg.b is %s halted at %+v; want halted at offset 10", s.State, s.Halted)
			}
		}
		return nil
	})
	if b := ids("b"); b != 10 {
		t.Fatalf("table b holds %d ids after its halt, want 10", b)
	}
}

// A topic deleted while the pipeline runs has its table's pipeline stopped at the next
// discovery: it leaves Statuses, ingestd_routed_tables and the share of batch.max_bytes,
// its table keeps what it wrote, and the other tables go on.
func TestRouterDeletedTopicStopsItsTable(t *testing.T) {
	f := startRouter(t, []string{"pg.a", "pg.b"}, func(c *config.Config) { c.Batch.MaxBytes = 60 << 20 }, nil)
	h, adm, r, states := f.h, f.adm, f.r, f.states
	ctx := context.Background()
	produce := func(topic string, from, n int64) { f.produce(topic, from, n, 0) }
	ids := func(table string) int { return len(f.ids(table)) }
	produce("pg.a", 0, 10)
	produce("pg.b", 100, 10)
	waitFor(t, 30*time.Second, func() error {
		if a, b := ids("a"), ids("b"); a != 10 || b != 10 {
			return fmt.Errorf("tables a, b hold %d, %d ids; want 10, 10", a, b)
		}
		return nil
	})
	if _, err := adm.DeleteTopics(ctx, "pg.b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() error {
		if got, want := states(), []string{"cdc/pg.a=running"}; !slices.Equal(got, want) {
			return fmt.Errorf("statuses %v, want %v", got, want)
		}
		return nil
	})
	produce("pg.a", 10, 5)
	waitFor(t, 30*time.Second, func() error {
		if a := ids("a"); a != 15 {
			return fmt.Errorf("table a holds %d ids, want 15", a)
		}
		return nil
	})
	if b := ids("b"); b != 10 {
		t.Fatalf("table b holds %d ids after its topic was deleted, want the 10 it wrote", b)
	}
	r.mu.Lock()
	a, b := r.tables["pg.a"], r.tables["pg.b"]
	r.mu.Unlock()
	a.p.batchMu.Lock()
	got := a.p.batch.Limits().MaxBytes
	a.p.batchMu.Unlock()
	if want := int64(60<<20) / 2; got != want {
		t.Errorf("table a: batch bound %d bytes, want %d (max_bytes all its own, halved for the batch in flight)", got, want)
	}
	if v := testutil.ToFloat64(h.metrics.RoutedTables.WithLabelValues("cdc", "running")); v != 1 {
		t.Errorf(`ingestd_routed_tables{state="running"} = %v, want 1`, v)
	}
	// b leaves Statuses when discovery marks it deleted; it is done only once its Run has
	// drained and its Close returned (runTable): wait for that.
	waitFor(t, 30*time.Second, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !b.done {
			return errors.New("the pipeline of deleted topic pg.b still runs")
		}
		return nil
	})
	if err := f.stop(); err != nil {
		t.Fatalf("Run = %v, want nil (a deleted topic is no failure)", err)
	}
}

// Two routed pipelines of one process whose different patterns both match a topic and
// render one table URI (written differently: a trailing slash, a plain path) would each
// write every record of that topic into the table. The second to claim it fails that
// table before opening it, naming both pipelines, their files and the URI; the first
// writes every record once, and each goes on with its other tables.
func TestRouterTwoPipelinesOneTable(t *testing.T) {
	f := newRouterFixture(t, []string{"pg.public.a", "pg.b", "db.public.c"})
	ids := func(table string) map[int64]int { return f.ids(table) }
	wide := f.start(func(c *config.Config) {
		c.Name, c.AppID, c.Kafka.Group, c.File = "wide", "wide", "ingestd-wide", "wide.yaml"
		c.Kafka.TopicPattern, c.Table.URI = `pg\..+`, "file://"+f.root+"/{topic}"
	}, nil)
	f.produce("pg.public.a", 0, 20, 0)
	f.produce("pg.b", 100, 10, 0)
	waitFor(t, 30*time.Second, func() error {
		if a, b := len(ids("pg.public.a")), len(ids("pg.b")); a != 20 || b != 10 {
			return fmt.Errorf("tables pg.public.a, pg.b hold %d, %d ids; want 20, 10", a, b)
		}
		return nil
	})
	narrow := f.start(func(c *config.Config) {
		c.Name, c.AppID, c.Kafka.Group, c.File = "narrow", "narrow", "ingestd-narrow", "narrow.yaml"
		c.Kafka.TopicPattern, c.Table.URI = `(pg|db)\.public\..+`, f.root+"/{topic}/"
	}, nil)
	uri := f.root + "/pg.public.a/"
	var failed Status
	waitFor(t, 15*time.Second, func() error {
		ss := narrow.r.Statuses()
		if len(ss) != 2 || ss[0].Pipeline != "narrow/db.public.c" || ss[0].State != StateRunning ||
			ss[1].Pipeline != "narrow/pg.public.a" || ss[1].State != StateFailed {
			return fmt.Errorf("narrow's statuses %v, want narrow/db.public.c running and narrow/pg.public.a failed", narrow.states())
		}
		failed = ss[1]
		return nil
	})
	want := "claim table " + uri + " for topic pg.public.a: pipeline wide/pg.public.a (wide.yaml) already writes that topic into this table, " +
		"so pipeline narrow/pg.public.a (narrow.yaml) would write every record a second time: " + ErrTableClaimed.Error()
	if failed.Error != want {
		t.Fatalf("narrow/pg.public.a failed with\n%q\nwant\n%q", failed.Error, want)
	}
	for _, c := range []struct {
		pipeline, state string
		want            float64
	}{{"wide", "running", 2}, {"wide", "failed", 0}, {"narrow", "running", 1}, {"narrow", "failed", 1}} {
		if v := testutil.ToFloat64(f.h.metrics.RoutedTables.WithLabelValues(c.pipeline, c.state)); v != c.want {
			t.Errorf(`ingestd_routed_tables{pipeline=%q,state=%q} = %v, want %v`, c.pipeline, c.state, v, c.want)
		}
	}
	// Both go on, and every record of every topic is in its table once.
	f.produce("pg.public.a", 20, 10, 0)
	f.produce("db.public.c", 300, 5, 0)
	waitFor(t, 30*time.Second, func() error {
		if a, c := len(ids("pg.public.a")), len(ids("db.public.c")); a != 30 || c != 5 {
			return fmt.Errorf("tables pg.public.a, db.public.c hold %d, %d ids; want 30, 5", a, c)
		}
		return nil
	})
	for _, table := range []string{"pg.public.a", "pg.b", "db.public.c"} {
		for id, n := range ids(table) {
			if n != 1 {
				t.Errorf("table %s holds id %d %d times, want once", table, id, n)
			}
		}
	}
	if err := wide.stop(); err != nil {
		t.Errorf("wide: Run = %v, want nil", err)
	}
	if err := narrow.stop(); err == nil || err.Error() != "run pipeline narrow: 1 of its 2 tables failed" {
		t.Errorf("narrow: Run = %v, want its table pg.public.a counted as failed", err)
	}
}

// A topic deleted while the pipeline runs and then created again under its name is not
// read from its old table's txn offsets (they would skip the new topic's first records),
// nor left out of Statuses while its records wait: at the next discovery its table is
// halted, with the reset-offsets fix, and keeps what it wrote; the other tables go on.
func TestRouterRecreatedTopicHalts(t *testing.T) {
	f := startRouter(t, []string{"pg.a", "pg.b"}, nil, nil)
	adm, states := f.adm, f.states
	ctx := context.Background()
	f.produce("pg.a", 0, 5, 0)
	f.produce("pg.b", 100, 10, 0)
	waitFor(t, 30*time.Second, func() error {
		if a, b := len(f.ids("a")), len(f.ids("b")); a != 5 || b != 10 {
			return fmt.Errorf("tables a, b hold %d, %d ids; want 5, 10", a, b)
		}
		return nil
	})
	if _, err := adm.DeleteTopics(ctx, "pg.b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() error {
		if got, want := states(), []string{"cdc/pg.a=running"}; !slices.Equal(got, want) {
			return fmt.Errorf("statuses %v, want %v", got, want)
		}
		return nil
	})
	waitFor(t, 30*time.Second, func() error { // the broker may still be deleting it
		_, err := adm.CreateTopics(ctx, 1, 1, nil, "pg.b")
		return err
	})
	// A new client: the harness's producer holds the old topic's id.
	pr, err := kgo.NewClient(kgo.SeedBrokers(f.h.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for id := int64(200); id < 203; id++ {
		if err := pr.ProduceSync(ctx, &kgo.Record{Topic: "pg.b", Value: f.h.encode(id, 0)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, func() error {
		if got, want := states(), []string{"cdc/pg.a=running", "cdc/pg.b=halted"}; !slices.Equal(got, want) {
			return fmt.Errorf("statuses %v, want %v", got, want)
		}
		return nil
	})
	st := f.r.Statuses()[1]
	if want := "ingestd table reset-offsets --config PIPELINE.yaml --topic pg.b --to-earliest"; !strings.Contains(st.Error, want) {
		t.Errorf("status error %q, want the fix %q", st.Error, want)
	}
	f.produce("pg.a", 5, 5, 0)
	waitFor(t, 30*time.Second, func() error {
		if a := len(f.ids("a")); a != 10 {
			return fmt.Errorf("table a holds %d ids, want 10", a)
		}
		return nil
	})
	if b := f.ids("b"); len(b) != 10 || b[200] != 0 {
		t.Errorf("table b holds %d ids (id 200: %d rows), want the old topic's 10", len(b), b[200])
	}
	if err := f.stop(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}
