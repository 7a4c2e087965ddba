package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
	"github.com/ingestd/ingestd/ingest/maintain"
	"github.com/ingestd/ingestd/internal/backoff"
)

// The demo's orders stream: v2 adds the nullable field "channel".
const (
	ordersV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"order_id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
  {"name":"created_at","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}}]}`
	ordersV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"order_id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
  {"name":"created_at","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}},
  {"name":"channel","type":["null","string"],"default":null}]}`
)

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "produce" {
		return cmdDemoProduce(ctx, args[1:], stdout, stderr)
	}
	fs := newFlagSet("demo", "demo [flags]\n       ingestd demo produce --config PIPELINE.yaml   (the same orders, to a real broker and registry)", "Run three pipelines (bronze/evolve, silver/dead_letter, gold/halt) on an in-process\nKafka broker and schema registry, with an orders stream whose schema gains a field midway.", stderr)
	out := fs.String("out", "demo-output", "`directory` for the Delta tables and pipeline files (a new or empty one, or an earlier demo's, which is replaced)")
	v1 := fs.Int("v1", 1000, "records produced with schema v1")
	v2 := fs.Int("v2", 200, "records produced with schema v2 (adds channel) after the v1 records")
	verbose := fs.Bool("v", false, "show pipeline logs")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	level := slog.LevelWarn + 100
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	rep, err := runDemo(ctx, log, *out, *v1, *v2)
	if err != nil {
		fmt.Fprintf(stderr, "ingestd demo: %v\n", err)
		return exitFailure
	}
	rep.print(stdout)
	return exitOK
}

// demoReport is what the demo found after the pipelines stopped.
type demoReport struct {
	Out         string
	Produced    int
	Tables      []tableReport
	DeadLetters map[string]int // "reason field=…" → count
	Halted      []ingest.HaltedPartition
}

type tableReport struct {
	Pipeline string
	Policy   string
	Path     string
	Version  int64
	Rows     int64
	Columns  []string
}

func runDemo(ctx context.Context, log *slog.Logger, out string, nV1, nV2 int) (*demoReport, error) {
	out, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	if err := cleanDemoDir(out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(out, "configs"), 0o755); err != nil {
		return nil, err
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"), kfake.SeedTopics(1, "orders.dlq"))
	if err != nil {
		return nil, fmt.Errorf("start in-process kafka: %w", err)
	}
	defer cluster.Close()
	reg := srfake.New()
	defer reg.Close()
	brokers := cluster.ListenAddrs()

	srcl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		return nil, fmt.Errorf("create registry client: %w", err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, fmt.Errorf("create producer: %w", err)
	}
	_, err = produceOrders(ctx, producer, srcl, "orders", nV1, nV2)
	producer.Close()
	if err != nil {
		return nil, err
	}
	policies := []struct{ name, policy, layer string }{
		{"orders-bronze", "evolve", "bronze"},
		{"orders-silver", "dead_letter", "silver"},
		{"orders-gold", "halt", "gold"},
	}
	for _, p := range policies {
		y := fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [orders], group: ingestd-%s, start_offset: earliest}
schema_registry: {url: %q}
table: {uri: "file://%s", create: true}
schema: {policy: %s, on_incompatible: halt}
dead_letter: {topic: orders.dlq}
batch: {max_records: 500, max_bytes: 16MiB, max_age: 300ms}
`, p.name, brokers[0], p.name, reg.URL(), filepath.Join(out, p.layer, "orders"), p.policy)
		if err := os.WriteFile(filepath.Join(out, "configs", p.name+".yaml"), []byte(y), 0o644); err != nil {
			return nil, err
		}
	}
	cfgs, err := config.Load(filepath.Join(out, "configs"))
	if err != nil {
		return nil, err
	}
	m := ingest.NewMetrics(prometheus.NewRegistry())
	maintainers := maintain.NewRegistry()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var pipelines []*ingest.Pipeline
	var runners []runner
	for _, c := range cfgs {
		p, err := ingest.Open(runCtx, c, log, m, ingest.Shared{Maintainers: maintainers})
		if err != nil {
			return nil, err
		}
		pipelines = append(pipelines, p)
		runners = append(runners, single{p})
	}
	done := make(chan int, 1)
	go func() { done <- runPipelines(runCtx, log, runners) }()

	// Wait until bronze and silver have handled every record and gold has halted on every
	// partition (or failed), then stop them like SIGTERM does.
	total := int64(nV1 + nV2)
	deadline := time.Now().Add(2 * time.Minute)
	var halted []ingest.HaltedPartition
	for {
		finished := true
		for i, p := range pipelines {
			st := p.Status()
			if st.State == ingest.StateFailed {
				stop()
				<-done
				return nil, fmt.Errorf("pipeline %s failed: %s", p.Name(), st.Error)
			}
			if cfgs[i].Schema.Policy == config.PolicyHalt {
				finished = finished && len(st.Halted) == 3
				continue
			}
			n, err := handledRecords(runCtx, cfgs[i])
			finished = finished && err == nil && n == total
		}
		if finished {
			for i, c := range cfgs { // the halt report, taken while the pipelines run
				if c.Schema.Policy == config.PolicyHalt {
					halted = pipelines[i].Status().Halted
				}
			}
			break
		}
		if time.Now().After(deadline) {
			stop()
			<-done
			return nil, fmt.Errorf("pipelines did not finish within 2 minutes")
		}
		select {
		case <-ctx.Done():
			stop()
			<-done
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	stop()
	<-done

	rep := &demoReport{Out: out, Produced: int(total), DeadLetters: map[string]int{}, Halted: halted}
	for _, c := range cfgs {
		tr, err := describeTable(ctx, c)
		if err != nil {
			return nil, err
		}
		tr.Policy = c.Schema.Policy
		rep.Tables = append(rep.Tables, tr)
	}
	if err := countDeadLetters(ctx, brokers, "orders.dlq", rep.DeadLetters); err != nil {
		return nil, err
	}
	return rep, nil
}

// produceOrders registers both schema versions under the subject <topic>-value (the
// Confluent TopicNameStrategy the pipelines' writer schemas are looked up by id, so any
// subject works) and produces nV1 v1 records, then nV2 v2 records, keyed by order id
// (1, 2, …), Confluent-framed, in one ProduceSync: every partition holds its v1 records
// before its v2 records. It returns the two schema ids. Registration is retried while the
// registry does not answer or answers 5xx (it may still be starting), until ctx ends.
// Errors: "register schema vN: …", "encode order N: …", "produce orders to T: …".
func produceOrders(ctx context.Context, cl *kgo.Client, reg *sr.Client, topic string, nV1, nV2 int) ([2]int, error) {
	var ids [2]int
	var schemas [2]avro.Schema
	for i, s := range []string{ordersV1, ordersV2} {
		id, err := registerSchema(ctx, reg, topic+"-value", s)
		if err != nil {
			return ids, fmt.Errorf("register schema v%d: %w", i+1, err)
		}
		ids[i] = id
		if schemas[i], err = avro.ParseWithCache(s, "", &avro.SchemaCache{}); err != nil {
			return ids, err
		}
	}
	recs := make([]*kgo.Record, 0, nV1+nV2)
	var hdr sr.ConfluentHeader
	for i := range nV1 + nV2 {
		v := 0
		if i >= nV1 {
			v = 1
		}
		body, err := avro.Marshal(schemas[v], demoOrder(i, v == 1))
		if err != nil {
			return ids, fmt.Errorf("encode order %d: %w", i+1, err)
		}
		framed, err := hdr.AppendEncode(nil, ids[v], nil)
		if err != nil {
			return ids, err
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%d", i+1), Value: append(framed, body...)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return ids, fmt.Errorf("produce orders to %s: %w", topic, err)
	}
	return ids, nil
}

// demoOrder is the demo's order number i+1 (i from 0), a pure function of i; v2 adds
// channel.
func demoOrder(i int, v2 bool) map[string]any {
	row := map[string]any{
		"order_id":   int64(i + 1),
		"customer":   fmt.Sprintf("customer-%03d", i%250),
		"amount":     big.NewRat(int64(1000+i*37%90000), 100),
		"created_at": demoBase.Add(time.Duration(i) * time.Minute),
		"status":     [...]string{"NEW", "PAID", "SHIPPED"}[i%3],
	}
	if v2 {
		row["channel"] = [...]string{"web", "app", "store"}[i%3]
	}
	return row
}

// demoBase is created_at of the first order; order i+1 is i minutes later.
var demoBase = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// registerSchema registers an Avro schema under subject and returns its id (an existing
// one when the subject already holds it). A registry that does not answer, or answers
// 5xx, is asked again with backoff until ctx ends; a 4xx (an incompatible schema, a
// wrong URL path) is returned at once.
func registerSchema(ctx context.Context, reg *sr.Client, subject, schema string) (int, error) {
	for attempt := 0; ; attempt++ {
		id, err := reg.RegisterSchema(ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro}, -1, -1)
		var re *sr.ResponseError
		if err == nil || (errors.As(err, &re) && re.StatusCode < 500) || ctx.Err() != nil {
			return id, err
		}
		if werr := backoff.Default.Sleep(ctx, attempt); werr != nil {
			return 0, fmt.Errorf("%w (gave up: %w)", err, werr)
		}
	}
}

// handledRecords is the number of source records the table's txn actions account for:
// the sum over partitions of version+1.
func handledRecords(ctx context.Context, c *config.Config) (int64, error) {
	t, err := openTable(ctx, c)
	if err != nil {
		return 0, err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, v := range snap.Txns {
		n += v + 1
	}
	return n, nil
}

func openTable(ctx context.Context, c *config.Config) (*deltawriter.Table, error) {
	st, err := storage.Open(c.Table.URI)
	if err != nil {
		return nil, err
	}
	return deltawriter.Open(ctx, st)
}

func describeTable(ctx context.Context, c *config.Config) (tableReport, error) {
	tr := tableReport{Pipeline: c.Name, Path: strings.TrimPrefix(c.Table.URI, "file://")}
	t, err := openTable(ctx, c)
	if err != nil {
		return tr, err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return tr, fmt.Errorf("read table %s: %w", c.Table.URI, err)
	}
	tr.Version = snap.Version
	for _, f := range snap.Schema.Fields {
		tr.Columns = append(tr.Columns, f.Name+" "+f.Type.String())
	}
	for _, add := range snap.Files.All() {
		var st struct {
			NumRecords int64 `json:"numRecords"`
		}
		if err := json.Unmarshal([]byte(add.Stats), &st); err != nil {
			return tr, fmt.Errorf("read stats of %s: %w", add.Path, err)
		}
		tr.Rows += st.NumRecords
	}
	return tr, nil
}

func countDeadLetters(ctx context.Context, brokers []string, topic string, into map[string]int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	for got := int64(0); got < want; {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("read %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			var reason, field string
			for _, h := range r.Headers {
				switch h.Key {
				case dlq.HeaderReason:
					reason = string(h.Value)
				case dlq.HeaderField:
					field = string(h.Value)
				}
			}
			into[reason+" field="+field]++
		})
	}
	return nil
}

func (r *demoReport) print(w io.Writer) {
	fmt.Fprintf(w, "ingestd demo: %d orders produced (schema v2 adds `channel` midway), 3 pipelines on an in-process broker\n\n", r.Produced)
	for _, t := range r.Tables {
		fmt.Fprintf(w, "%-14s policy=%-11s %6d rows  version %d  %s\n", t.Pipeline, t.Policy, t.Rows, t.Version, t.Path)
		fmt.Fprintf(w, "               columns: %s\n", strings.Join(t.Columns, ", "))
	}
	fmt.Fprintln(w, "\ndead-letter topic orders.dlq:")
	keys := make([]string, 0, len(r.DeadLetters))
	for k := range r.DeadLetters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		fmt.Fprintln(w, "  (empty)")
	}
	for _, k := range keys {
		fmt.Fprintf(w, "  %6d records  reason=%s\n", r.DeadLetters[k], k)
	}
	fmt.Fprintln(w, "\nhalted pipeline orders-gold (restart it and it halts at the same offsets):")
	for _, h := range r.Halted {
		fmt.Fprintf(w, "  %s[%d] at offset %d: %s %s\n", h.Topic, h.Partition, h.Offset, h.Reason, h.Field)
	}
	if len(r.Halted) > 0 {
		fmt.Fprintf(w, "  message: %s\n", strings.ReplaceAll(r.Halted[0].Message, "\n", "\n  "))
	}
	fmt.Fprintf(w, "\nThe tables are Delta tables: read them with Spark, delta-rs or DuckDB from %s\n", r.Out)
}

// demoMarker marks a directory the demo created, so a rerun may replace it.
const demoMarker = ".ingestd-demo"

// cleanDemoDir makes out an empty directory holding the demo marker. It refuses to touch
// a non-empty directory that an earlier demo did not create.
func cleanDemoDir(out string) error {
	entries, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read %s: %w", out, err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(out, demoMarker)); err != nil {
			return fmt.Errorf("refusing to replace %s: it is not empty and not an earlier demo's output (choose another --out)", out)
		}
		if err := os.RemoveAll(out); err != nil {
			return fmt.Errorf("clean %s: %w", out, err)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, demoMarker), []byte("created by ingestd demo; rerunning the demo replaces this directory\n"), 0o644)
}
