package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
)

// OpenFunc builds the Pipeline of one table of a routed pipeline from its config
// (config.Config.ForTopic); Open, with the process's logger, metrics and shared state,
// in production.
type OpenFunc func(ctx context.Context, cfg *config.Config) (*Pipeline, error)

// TopicLister returns the names of the cluster's topics. Errors: the broker's (retried
// at the next discovery).
type TopicLister func(ctx context.Context) ([]string, error)

// Router runs a routed pipeline (config.Config.Routed): one Pipeline per topic whose
// whole name matches kafka.topic_pattern, each reading that topic into its own table
// (config.Config.ForTopic: its own table, key, txn app ids and schema guard), all members
// of the pipeline's one consumer group. It lists the cluster's topics when Run starts
// and every kafka.discover_every, and starts a pipeline for each new match, so a topic
// created while it runs is read within that interval. A topic that two listings in a row
// no longer name (deleted) has its pipeline stopped: its table stays as written, it leaves
// Statuses and the share of batch.max_bytes, and it is not opened again until the
// process restarts (a topic created again under that name starts at offset 0, below the
// table's txn versions of the old one); when a listing names it again, Statuses reports
// its table halted with the fix (ingestd table reset-offsets, then a restart).
//
// Memory: the tables share batch.max_bytes equally (Pipeline.SetMaxBytes): with n tables
// each flushes at max_bytes / n, so that the records buffered by all of them stay within
// the pipeline's max_bytes as they do for one table.
//
// Failure: a table that cannot be opened, or whose pipeline fails, is reported in
// Statuses (and ingestd_routed_tables{state="failed"}) and is not retried until the
// process restarts; it never stops the other tables, nor the discovery of new ones. So
// is a table whose topic another pipeline of the process already writes into the same
// table (TableClaims): it fails before it is opened, and the other pipeline goes on.
//
// Goroutines: Run owns the discovery loop and one goroutine per table, and returns when
// ctx has ended and every table's pipeline has stopped and closed.
type Router struct {
	cfg    *config.Config
	log    *slog.Logger
	m      *Metrics
	open   OpenFunc
	topics TopicLister
	claims *TableClaims // the process's tables by topic; nil: not checked

	mu       sync.Mutex
	tables   map[string]*routedTable // by topic
	listed   bool                    // the topics were listed once
	listErr  error                   // the last listing's error, nil after a success
	failures int                     // tables that failed (to open or while running)
}

// routedTable is one table of a Router: its pipeline, or why it has none.
type routedTable struct {
	p       *Pipeline
	stop    context.CancelFunc // ends p's Run (its topic was deleted)
	failed  *Status            // set when it could not be opened
	done    bool               // its pipeline's Run returned
	deleted bool               // its topic is gone from the listing: stopped, not reported
	missing int                // consecutive listings without its topic
	// recreated is set when a listing names the deleted topic again: the table stays
	// stopped and is reported halted with the fix, rather than left out while the new
	// topic's records wait unread.
	recreated *Status
}

// deletedAfter is how many consecutive listings must miss a topic before its table's
// pipeline stops: one listing may miss a topic that exists (a broker that has just
// restarted may answer Metadata before it has loaded every topic), and a stopped table is
// not opened again until the process restarts.
const deletedAfter = 2

// NewRouter returns the router of cfg (cfg.Routed() must hold), which opens each table's
// pipeline with open and lists topics with topics. Before opening a table it claims the
// table's topic in claims, shared by every pipeline of the process (nil: no check). m
// may be nil. It does no I/O.
func NewRouter(cfg *config.Config, log *slog.Logger, m *Metrics, open OpenFunc, topics TopicLister, claims *TableClaims) *Router {
	if log == nil {
		log = slog.Default()
	}
	return &Router{cfg: cfg, log: log.With("pipeline", cfg.Name), m: m, open: open, topics: topics, claims: claims, tables: map[string]*routedTable{}}
}

// KafkaTopicLister lists the topics cfg's principal may describe, through a client of
// its own (kafkaclient.Clients.TopicDiscovery, with the pipeline's TLS and SASL plus
// extra); close ends the client. Internal topics are left out. Errors: the client's
// options (SecurityOpts).
func KafkaTopicLister(cfg *config.Config, log *slog.Logger, m *Metrics, extra []kgo.Opt) (TopicLister, func(), error) {
	sec, err := kafkaclient.SecurityOpts(cfg.Kafka, m.kafka())
	if err != nil {
		return nil, nil, err
	}
	cl, err := kafkaclient.New(cfg, log, m.kafka(), append(sec, extra...)).TopicDiscovery()
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	list := func(ctx context.Context) ([]string, error) {
		ds, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, fmt.Errorf("list topics: %w", err)
		}
		return ds.Names(), nil
	}
	return list, cl.Close, nil
}

// Name returns the pipeline name.
func (r *Router) Name() string { return r.cfg.Name }

// Close does nothing: Run closes each table's pipeline (Pipeline.Close) before it
// returns. It is here so that a Router runs where a Pipeline does.
func (r *Router) Close(context.Context) error { return nil }

// Run discovers topics and runs their tables' pipelines until ctx ends, then waits for
// them to stop and close. It returns nil when every table ran until ctx ended, else an
// error counting the tables that failed (each one's reason is in Statuses and its log).
func (r *Router) Run(ctx context.Context) error {
	r.log.Info("routing topics to tables", "topic_pattern", r.cfg.Kafka.TopicPattern, "table_uri", r.cfg.Table.URI,
		"group", r.cfg.Kafka.Group, "discover_every", r.cfg.Kafka.DiscoverEvery.String())
	var wg sync.WaitGroup
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.failures > 0 {
				return fmt.Errorf("run pipeline %s: %d of its %d tables failed", r.cfg.Name, r.failures, len(r.tables))
			}
			return nil
		case <-t.C:
		}
		for _, t := range r.discover(ctx) {
			tctx, stop := context.WithCancel(ctx)
			r.mu.Lock()
			t.stop = stop
			r.mu.Unlock()
			wg.Go(func() { defer stop(); r.runTable(tctx, t.p) })
		}
		t.Reset(r.cfg.Kafka.DiscoverEvery)
	}
}

// discover lists the topics, stops the pipelines of deleted topics and opens the
// pipeline of each new match; it returns the new tables, not yet started, after giving
// every table its share of batch.max_bytes.
func (r *Router) discover(ctx context.Context) []*routedTable {
	names, err := r.topics(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("topic discovery failed; it is retried", "err", err, "retry_in", r.cfg.Kafka.DiscoverEvery.String())
		}
		r.mu.Lock()
		r.listErr = err
		r.mu.Unlock()
		return nil
	}
	slices.Sort(names)
	r.stopDeleted(names)
	var added []*routedTable
	var topics []string
	for _, topic := range names {
		if ctx.Err() != nil {
			break // shutting down: open no more tables
		}
		r.mu.Lock()
		t, known := r.tables[topic]
		if known && t.deleted && t.recreated == nil {
			r.recreatedLocked(topic, t)
		}
		r.mu.Unlock()
		if known || !r.cfg.MatchTopic(topic) {
			continue
		}
		p, err := r.openTable(ctx, topic)
		if err != nil && ctx.Err() != nil {
			break // shutting down: the tables opened so far still run (and close)
		}
		r.mu.Lock()
		if err != nil {
			r.log.Error("table failed to open; the other tables run", "topic", topic, "err", err)
			r.tables[topic] = &routedTable{failed: &Status{Pipeline: r.cfg.Name + "/" + topic, State: StateFailed, Error: err.Error(), Since: time.Now()}}
			r.failures++
		} else {
			t := &routedTable{p: p}
			r.tables[topic] = t
			added = append(added, t)
			topics = append(topics, topic)
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.listed, r.listErr = true, nil
	r.shareLocked()
	n := len(r.tables)
	r.mu.Unlock()
	if len(added) > 0 {
		r.log.Info("tables added", "topics", topics, "tables", n)
	}
	return added
}

// stopDeleted stops the pipeline of each running table whose topic is not among names
// (sorted), the topics just listed, nor among the previous listing's (deletedAfter): the
// topic was deleted. Without this its consumer
// would retry fetching the deleted topic's partitions (UNKNOWN_TOPIC_ID) without end.
func (r *Router) stopDeleted(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for topic, t := range r.tables {
		if t.deleted || t.p == nil || t.done {
			continue
		}
		if _, listed := slices.BinarySearch(names, topic); listed {
			t.missing = 0
			continue
		}
		if t.missing++; t.missing < deletedAfter {
			r.log.Warn("topic missing from the listing; its table stops if the next listing misses it too", "topic", topic)
			continue
		}
		r.log.Warn("topic deleted; its table's pipeline stops, the table stays as written", "topic", topic, "table_pipeline", t.p.Name())
		t.deleted = true
		if t.stop != nil {
			t.stop()
		}
	}
}

// recreatedLocked reports table t, whose topic was deleted while it ran, as halted now
// that a listing names the topic again: a topic created again starts at offset 0, below
// the txn versions its table holds of the old one, so reading it on would skip its first
// records; the operator resets the table's offsets and restarts. r.mu held.
func (r *Router) recreatedLocked(topic string, t *routedTable) {
	msg := fmt.Sprintf("topic %s was deleted while the pipeline read it and has been created again; its table stays stopped, "+
		"since reading it from the table's txn offsets would skip its first records. Fix: stop ingestd, run "+
		"ingestd table reset-offsets --config PIPELINE.yaml --topic %s --to-earliest, then start ingestd", topic, topic)
	r.log.Error("pipeline halted: a deleted source topic was created again", "table_pipeline", t.p.Name(), "topic", topic, "reason", "topic_deleted", "message", msg)
	t.recreated = &Status{Pipeline: t.p.Name(), State: StateHalted, Error: msg, Since: time.Now()}
}

// openTable claims topic's table (TableClaims) and opens its pipeline; a table that
// fails to open gives its claim back.
func (r *Router) openTable(ctx context.Context, topic string) (*Pipeline, error) {
	cfg, err := r.cfg.ForTopic(topic)
	if err != nil {
		return nil, err
	}
	release, err := r.claims.Claim(cfg)
	if err != nil {
		return nil, err
	}
	p, err := r.open(ctx, cfg)
	if err != nil {
		release()
		return nil, err
	}
	return p, nil
}

// runTable runs p until ctx ends or it fails, then closes it; a failure frees its share
// of batch.max_bytes for the others.
func (r *Router) runTable(ctx context.Context, p *Pipeline) {
	err := p.Run(ctx)
	if cerr := p.Close(ctx); cerr != nil {
		r.log.Warn("background checkpoint not finished; the next one covers it", "table_pipeline", p.Name(), "err", cerr)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.tables {
		if t.p == p {
			t.done = true
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		r.failures++
		r.shareLocked()
	}
}

// shareLocked gives each running table an equal share of batch.max_bytes and updates
// ingestd_routed_tables. r.mu held.
func (r *Router) shareLocked() {
	var running []*Pipeline
	for _, t := range r.tables {
		if t.p != nil && !t.done && !t.deleted {
			running = append(running, t.p)
		}
	}
	if len(running) > 0 {
		share := int64(r.cfg.Batch.MaxBytes) / int64(len(running))
		for _, p := range running {
			p.SetMaxBytes(share)
		}
	}
	if r.m != nil {
		r.m.RoutedTables.WithLabelValues(r.cfg.Name, "running").Set(float64(len(running)))
		r.m.RoutedTables.WithLabelValues(r.cfg.Name, "failed").Set(float64(r.failures))
	}
}

// Statuses returns the state of each table's pipeline (named "<pipeline>/<topic>"), in
// topic order, deleted topics' tables left out until a listing names their topic again
// (then halted); before the first listing of the topics, or while no topic matches, one
// status of the pipeline itself: starting (not listed yet, Error the listing's failure)
// or running (listening for matching topics).
func (r *Router) Statuses() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	var topics []string
	for topic, t := range r.tables {
		if !t.deleted || t.recreated != nil {
			topics = append(topics, topic)
		}
	}
	if len(topics) == 0 {
		s := Status{Pipeline: r.cfg.Name, State: StateRunning}
		if !r.listed {
			s.State = StateStarting
		}
		if r.listErr != nil {
			s.Error = r.listErr.Error()
		}
		return []Status{s}
	}
	slices.Sort(topics)
	out := make([]Status, 0, len(topics))
	for _, topic := range topics {
		t := r.tables[topic]
		switch {
		case t.failed != nil:
			out = append(out, *t.failed)
		case t.recreated != nil:
			out = append(out, *t.recreated)
		default:
			out = append(out, t.p.Status())
		}
	}
	return out
}
