package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// The chaos stream: v2 adds the nullable field "channel" (the table evolves).
const (
	chaosV1 = `{"type":"record","name":"Event","namespace":"chaos","fields":[
  {"name":"id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"amount","type":"double"}]}`
	chaosV2 = `{"type":"record","name":"Event","namespace":"chaos","fields":[
  {"name":"id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"amount","type":"double"},
  {"name":"channel","type":["null","string"],"default":null}]}`
)

// chaosPlan sizes one run: the short one runs in `make test`, the long one with
// INGESTD_CHAOS_LONG=1.
type chaosPlan struct {
	records      int           // good records
	pillEvery    int           // one poison pill after every pillEvery good records
	produceFor   time.Duration // production is spread over this long
	chaosFor     time.Duration // kill -9 loop from the start until this
	killEvery    [2]time.Duration
	brokerAt     time.Duration // broker restart
	registryAt   time.Duration // registry outage start (30 s)
	registryDown time.Duration
	drain        time.Duration // after the chaos, time allowed to catch up
	// partitioned: the records carry event_date (a date, 7 values) and the table is
	// partitioned by it.
	partitioned bool
	// optimizeLoop runs `ingestd table optimize --min-files 2` in a loop on the table
	// during the chaos: it must cost no record and fail no pipeline.
	optimizeLoop bool
	// upsert: the records are keyed changes (chaosStream over upsertKeys hot and
	// upsertCold cold keys), records counting the changes; every daemon runs two
	// pipelines on them (chaosUpsertTables) instead of the append one.
	upsert                 bool
	upsertKeys, upsertCold int
}

// TestChaos runs three `ingestd run` processes in one group on one table from a
// 12-partition topic carrying a schema change and poison pills, on a private Kafka broker
// (started with scripts/stack.sh under its own STACK_DIR, so the shared one is never
// touched) and the shared registry behind a TCP proxy. While records arrive it kills a
// random process with SIGKILL every few seconds and restarts it, restarts the broker
// once, and cuts the registry off for 30 s. At the end: delta-rs reads every good record
// exactly once by id (and so does Spark), the dead-letter topic holds every poison pill (duplicates counted),
// each partition's txn version is its end offset - 1, and no data file is added twice.
func TestChaos(t *testing.T) {
	t.Parallel() // waits on Spark or the broker; own topics and temp dirs (see TestMain)
	s := need(t)
	plan := chaosPlan{records: 100_000, pillEvery: 997, produceFor: 70 * time.Second, chaosFor: 75 * time.Second,
		killEvery: [2]time.Duration{3 * time.Second, 6 * time.Second}, brokerAt: 12 * time.Second,
		registryAt: 32 * time.Second, registryDown: 30 * time.Second, drain: 5 * time.Minute}
	if os.Getenv("INGESTD_CHAOS_LONG") == "1" {
		plan = chaosPlan{records: 1_000_000, pillEvery: 4999, produceFor: 5 * time.Minute, chaosFor: 5 * time.Minute,
			killEvery: [2]time.Duration{3 * time.Second, 8 * time.Second}, brokerAt: 90 * time.Second,
			registryAt: 150 * time.Second, registryDown: 30 * time.Second, drain: 20 * time.Minute}
	} else if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	runChaos(t, s, plan, nil)
}

// TestChaosS3 is TestChaos's short run with the table on the S3 emulator (versitygw,
// conditional-put commits): the same three processes killed at random, broker restart and
// registry outage, on fewer records and a shorter schedule (about 80 s); exactly once by
// id (delta-rs), every pill dead-lettered, txn versions at the end offsets, no data file
// added twice. Spark is left out to keep the run short (its S3A read of an ingestd table
// is TestSeedScenarioObjectStores').
func TestChaosS3(t *testing.T) {
	s := need(t)
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	o := needStore(t, "s3")
	plan := chaosPlan{records: 20_000, pillEvery: 499, produceFor: 25 * time.Second, chaosFor: 30 * time.Second,
		killEvery: [2]time.Duration{3 * time.Second, 6 * time.Second}, brokerAt: 6 * time.Second,
		registryAt: 15 * time.Second, registryDown: 10 * time.Second, drain: 3 * time.Minute}
	runChaos(t, s, plan, &o)
}

// TestChaosPartitioned is TestChaos's short run on a table partitioned by event_date
// (7 dates, one data file per date per flush): the same kills, broker restart and
// registry outage on 20,000 records; exactly once by id (delta-rs and Spark), every pill
// dead-lettered, txns at the end offsets, no data file added twice, and every file in
// its date's directory with its partition value. OPTIMIZE runs in a loop on the same
// table all along: it commits compactions beside the killed writers and costs
// no record.
func TestChaosPartitioned(t *testing.T) {
	s := need(t)
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	plan := chaosPlan{records: 20_000, pillEvery: 499, produceFor: 25 * time.Second, chaosFor: 30 * time.Second,
		killEvery: [2]time.Duration{3 * time.Second, 6 * time.Second}, brokerAt: 6 * time.Second,
		registryAt: 15 * time.Second, registryDown: 10 * time.Second, drain: 3 * time.Minute, partitioned: true, optimizeLoop: true}
	runChaos(t, s, plan, nil)
}

// checkChaosPartitions checks every add of the partitioned chaos table: one of the 7
// dates in partitionValues, the file under event_date=<date>/.
func checkChaosPartitions(t *testing.T, table string) {
	t.Helper()
	dates := map[string]int{}
	for _, a := range logAdds(t, table) {
		pv := a.PartitionValues["event_date"]
		if pv == nil || len(a.PartitionValues) != 1 || !strings.HasPrefix(a.Path, "event_date="+*pv+"/part-") {
			t.Errorf("add %s with partitionValues %v: want one event_date and its directory", a.Path, pvMap(a.PartitionValues))
			continue
		}
		dates[*pv]++
	}
	if len(dates) != 7 || dates["2025-12-01"] == 0 || dates["2025-12-07"] == 0 {
		t.Errorf("files per date %v; want the 7 dates 2025-12-01 … 2025-12-07", dates)
	}
	t.Logf("files per date: %v", dates)
}

// chaosPipe is one pipeline of a chaos run: its name (the prefix of its txns' appIds),
// its table (a local path or an object-store URI, and the URI the pipeline writes) and
// its dead-letter topic; upsert is its keyed options (append when nil).
type chaosPipe struct {
	name, table, tableURI, dlq string
	upsert                     *chaosUpsertTable
}

// runChaos runs one chaos plan with the table on local disk (store nil; Spark reads it
// too) or in store.
func runChaos(t *testing.T, s stack, plan chaosPlan, store *objectStore) {
	// Knobs for investigating a failure: INGESTD_CHAOS_KILLS=0 (no kill -9),
	// INGESTD_CHAOS_BROKER=0 (no broker restart), INGESTD_CHAOS_REGISTRY=0 (no outage),
	// INGESTD_CHAOS_LOGS=DIR (keep the daemons' debug logs there), INGESTD_CHAOS_SEED=N
	// (the upsert run's stream of a logged seed).
	var spark *sparkSession
	if store == nil {
		python, jars := needSpark(t)
		spark = startSpark(t, python, jars) // boots now, reads the table at the end
	}
	noKills, noBroker, noRegistry := os.Getenv("INGESTD_CHAOS_KILLS") == "0", os.Getenv("INGESTD_CHAOS_BROKER") == "0", os.Getenv("INGESTD_CHAOS_REGISTRY") == "0"
	logDir := os.Getenv("INGESTD_CHAOS_LOGS")
	start := time.Now()
	kafka := startPrivateKafka(t)
	t.Logf("private Kafka at %s (started in %v)", kafka.brokers, time.Since(start).Round(time.Second))
	regURL, err := url.Parse(s.registry)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, regURL.Host)
	proxied := *regURL
	proxied.Host = proxy.addr

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka.brokers), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordRetries(1<<30), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic := "chaos-" + suffix
	dir := t.TempDir()
	var pipes []chaosPipe
	if plan.upsert {
		for i := range chaosUpsertTables {
			u := &chaosUpsertTables[i]
			pipes = append(pipes, chaosPipe{name: u.name, dlq: topic + "-" + u.name + ".dlq", upsert: u})
		}
	} else {
		pipes = []chaosPipe{{name: "chaos", dlq: topic + ".dlq"}}
	}
	for i := range pipes {
		p := &pipes[i]
		p.table = filepath.Join(dir, p.name) // the table URI (a local path, or s3://…)
		p.tableURI = "file://" + p.table
		if store != nil {
			p.table = store.base + "/" + p.name
			p.tableURI = p.table
		}
	}
	parts := map[string]int32{topic: 12} // topic → partitions
	for _, p := range pipes {
		parts[p.dlq] = 3
	}
	for name, n := range parts {
		if resp, err := adm.CreateTopic(ctx, n, 1, nil, name); err != nil || resp.Err != nil {
			t.Fatalf("create topic %s: %v %v", name, err, resp.Err)
		}
	}

	// Schemas registered directly (not through the proxy) under this run's subject.
	src, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	var ids [2]int
	var schemas [2]avro.Schema
	texts := []string{chaosV1, chaosV2}
	if plan.upsert {
		texts = []string{chaosUpsertV1, chaosUpsertV2}
	}
	if plan.partitioned {
		for i := range texts {
			texts[i] = strings.Replace(texts[i], `{"name":"amount","type":"double"}`,
				`{"name":"amount","type":"double"},
  {"name":"event_date","type":{"type":"int","logicalType":"date"}}`, 1)
		}
	}
	for i, text := range texts {
		ss, err := src.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
		if err != nil {
			t.Fatalf("register schema v%d: %v", i+1, err)
		}
		ids[i] = ss.ID
		if schemas[i], err = avro.ParseWithCache(text, "", &avro.SchemaCache{}); err != nil {
			t.Fatal(err)
		}
	}

	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	for _, p := range pipes {
		tableOpts := ""
		if plan.partitioned {
			tableOpts = ", partition_by: [event_date]"
		}
		if u := p.upsert; u != nil {
			tableOpts = `, mode: upsert, key: [id], delete_when: "op = 'd'", key_format: string`
			if u.ordered {
				tableOpts += ", sequence_by: seq"
			}
			if u.cow {
				tableOpts += ", upsert_write: copy_on_write"
			}
			if u.partitioned {
				tableOpts += ", partition_by: [grp]"
			}
		}
		writePipeline(t, cfgDir, p.name, fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%s, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true`+tableOpts+`}
schema: {policy: evolve, on_incompatible: halt}
dead_letter: {topic: %s}
batch: {max_records: 5000, max_bytes: 64MiB, max_age: 500ms}
`, p.name, kafka.brokers, topic, p.name, suffix, proxied.String(), p.tableURI, p.dlq))
	}

	// The keyed changes of an upsert run, decided up front; where each landed (partition,
	// offset) is recorded as it is produced, for the model.
	var (
		stream   []kpChange
		landedAt []chaosOffset
	)
	if plan.upsert {
		seed := uint64(time.Now().UnixNano())
		if v := os.Getenv("INGESTD_CHAOS_SEED"); v != "" {
			if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
				t.Fatalf("INGESTD_CHAOS_SEED=%q: %v", v, err)
			}
		}
		t.Logf("upsert stream seed %d (INGESTD_CHAOS_SEED=%d makes the same stream; the timing differs)", seed, seed)
		stream = chaosStream(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), plan.records, plan.upsertKeys, plan.upsertCold)
		landedAt = make([]chaosOffset, len(stream))
		for i := range landedAt {
			landedAt[i].offset = -1
		}
	}

	// The daemons must be running while the records arrive: the binary is built (once per
	// test binary) before production starts, not at the first launch.
	ingestdBin(t)

	// Production, spread over plan.produceFor: v1 for the first half, v2 after; poison
	// pills of four kinds interleaved. Pills are remembered by their source offset.
	type pill struct {
		partition int32
		offset    int64
		kind      string
	}
	var (
		pillsMu  sync.Mutex
		pills    []pill
		produced atomic.Int64
	)
	prodDone := make(chan error, 1)
	go func() {
		prodDone <- func() error {
			const chunk = 1000
			begin := time.Now()
			pillKinds := []string{"bad_magic", "too_short", "truncated", "schema_not_found"}
			var hdr sr.ConfluentHeader
			nPills := 0
			for from := 1; from <= plan.records; from += chunk {
				var recs []*kgo.Record
				change := map[*kgo.Record]int{} // upsert: the record of stream[i]
				for id := from; id < from+chunk && id <= plan.records; id++ {
					v := 0
					if id > plan.records/2 {
						v = 1
					}
					framed, _ := hdr.AppendEncode(nil, ids[v], nil)
					var rec *kgo.Record
					if plan.upsert {
						c := stream[id-1]
						rec = &kgo.Record{Topic: topic, Key: []byte(strconv.FormatInt(c.id, 10))}
						if !c.tomb {
							row := map[string]any{"id": c.id, "v": nil, "seq": c.seq, "op": c.op, "grp": c.grp}
							if c.v != "" {
								row["v"] = c.v
							}
							if v == 1 {
								row["channel"] = "web"
							}
							body, err := avro.Marshal(schemas[v], row)
							if err != nil {
								return err
							}
							rec.Value = append(framed, body...)
						}
						change[rec] = id - 1
					} else {
						row := map[string]any{"id": int64(id), "customer": fmt.Sprintf("c-%d", id%97), "amount": float64(id) / 4}
						if plan.partitioned {
							row["event_date"] = int32(20423 + id%7) // 2025-12-01 … 2025-12-07
						}
						if v == 1 {
							row["channel"] = "web"
						}
						body, err := avro.Marshal(schemas[v], row)
						if err != nil {
							return err
						}
						rec = &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(id)), Value: append(framed, body...)}
					}
					recs = append(recs, rec)
					if id%plan.pillEvery == 0 {
						kind := pillKinds[nPills%len(pillKinds)]
						nPills++
						var val []byte
						switch kind {
						case "bad_magic":
							val = []byte(`{"id":` + strconv.Itoa(id) + `}`)
						case "too_short":
							val = []byte{0, 0, 0}
						case "truncated":
							val = append(append([]byte(nil), framed...), 0x02)
						case "schema_not_found":
							val = []byte{0, 0x7f, 0xff, 0xff, 0x01, 2}
						}
						recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("pill-" + strconv.Itoa(nPills)),
							Value: val, Headers: []kgo.RecordHeader{{Key: "pill", Value: []byte(kind)}}})
					}
				}
				res := cl.ProduceSync(ctx, recs...)
				if err := res.FirstErr(); err != nil {
					return fmt.Errorf("produce: %w", err)
				}
				pillsMu.Lock()
				for _, r := range res {
					if len(r.Record.Headers) > 0 && r.Record.Headers[0].Key == "pill" {
						pills = append(pills, pill{r.Record.Partition, r.Record.Offset, string(r.Record.Headers[0].Value)})
					} else {
						produced.Add(1)
						if i, ok := change[r.Record]; ok {
							landedAt[i] = chaosOffset{r.Record.Partition, r.Record.Offset}
						}
					}
				}
				pillsMu.Unlock()
				// Paced on purpose: chunk k is due at k/n of produceFor, so that records
				// arrive all through the chaos.
				due := begin.Add(time.Duration(float64(plan.produceFor) * float64(from+chunk-1) / float64(plan.records)))
				time.Sleep(time.Until(due))
			}
			return nil
		}()
	}()

	// Three processes, killed and restarted at random.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	daemons := make([]*daemon, 3)
	nStarted := 0
	launch := func() *daemon {
		nStarted++
		if logDir == "" {
			return startDaemon(t, cfgDir)
		}
		return startDaemonLogged(t, cfgDir, filepath.Join(logDir, fmt.Sprintf("ingestd-%02d.log", nStarted)))
	}
	for i := range daemons {
		daemons[i] = launch()
	}
	chaosStart := time.Now()
	var kills int
	optimizeStop, optimizeDone := make(chan struct{}), make(chan struct{})
	var optimizeRuns, optimizeCommits int
	if plan.optimizeLoop {
		go func() {
			defer close(optimizeDone)
			for {
				select {
				case <-optimizeStop:
					return
				case <-time.After(2 * time.Second):
				}
				r := runOptimize(t, "--table", pipes[0].tableURI, "--min-files", "2")
				optimizeRuns++
				switch {
				case r.err == nil && strings.Contains(r.out, ": OPTIMIZE removed"):
					optimizeCommits++
				case r.err == nil:
				case strings.Contains(r.err.Error(), "changed metaData") || strings.Contains(r.err.Error(), "no Delta table"):
					// the v2 schema's evolution won (run again), or nothing written yet
				default:
					t.Errorf("optimize during the chaos: %v\n%s", r.err, r.out)
				}
			}
		}()
	} else {
		close(optimizeDone)
	}
	brokerDone := make(chan error, 1)
	brokerStarted, registryCut := false, false
	var registryBack time.Time
	for time.Since(chaosStart) < plan.chaosFor {
		el := time.Since(chaosStart)
		if !brokerStarted && !noBroker && el >= plan.brokerAt {
			brokerStarted = true
			go func() { brokerDone <- kafka.restart() }()
			t.Logf("t=%v: restarting the broker", el.Round(time.Second))
		}
		if !registryCut && !noRegistry && el >= plan.registryAt {
			registryCut = true
			proxy.cut(true)
			registryBack = time.Now().Add(plan.registryDown)
			t.Logf("t=%v: registry unreachable for %v", el.Round(time.Second), plan.registryDown)
		}
		if registryCut && !registryBack.IsZero() && time.Now().After(registryBack) {
			proxy.cut(false)
			registryBack = time.Time{}
			t.Logf("t=%v: registry reachable again", el.Round(time.Second))
		}
		// The chaos's schedule: the next kill -9 comes a random killEvery after the last.
		wait := plan.killEvery[0] + time.Duration(rng.Int64N(int64(plan.killEvery[1]-plan.killEvery[0])))
		time.Sleep(min(wait, time.Until(chaosStart.Add(plan.chaosFor))))
		if time.Since(chaosStart) >= plan.chaosFor {
			break
		}
		if noKills {
			continue
		}
		i := rng.IntN(len(daemons))
		daemons[i].kill9(t)
		kills++
		daemons[i] = launch()
	}
	if !registryBack.IsZero() {
		// The registry outage lasts its planned registryDown, even past the chaos.
		time.Sleep(time.Until(registryBack))
		proxy.cut(false)
	}
	close(optimizeStop)
	<-optimizeDone
	if plan.optimizeLoop {
		t.Logf("optimize loop: %d runs, %d OPTIMIZE commits", optimizeRuns, optimizeCommits)
		if optimizeCommits == 0 {
			t.Errorf("the optimize loop never committed (%d runs)", optimizeRuns)
		}
	}
	if brokerStarted {
		if err := <-brokerDone; err != nil {
			t.Fatalf("broker restart: %v", err)
		}
	}
	if err := <-prodDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos over after %v: %d kill -9, broker restarted: %v, registry outage: %v; produced %d good records and %d pills",
		time.Since(chaosStart).Round(time.Second), kills, brokerStarted, registryCut, produced.Load(), len(pills))

	// Drain: every partition's txn reaches its end offset - 1, in every table.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets: %v %v", err, ends.Error())
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	drainStart := time.Now()
	waitForEvery(t, nil, plan.drain, 200*time.Millisecond, "every record handled after the chaos", func() bool {
		for _, p := range pipes {
			if handledAt(t, p.table) != total {
				return false
			}
		}
		return true
	})
	t.Logf("drained in %v", time.Since(drainStart).Round(time.Second))
	for i, d := range daemons {
		var lines []string
		for _, l := range strings.Split(d.metrics(t), "\n") {
			if strings.HasPrefix(l, "ingestd_transient_errors_total") || strings.HasPrefix(l, "ingestd_schema_registry_errors_total") ||
				strings.HasPrefix(l, "ingestd_delta_commit_conflicts_total") || strings.HasPrefix(l, "ingestd_keyed_changes_total") {
				lines = append(lines, l)
			}
		}
		t.Logf("daemon %d (the last started) metrics: %s", i, strings.Join(lines, "; "))
	}
	for _, d := range daemons {
		if code := d.stop(t); code != 0 {
			t.Errorf("ingestd exited %d after SIGTERM", code)
		}
	}

	// txn versions equal end offsets - 1.
	for _, p := range pipes {
		txns := txnVersionsAt(t, p.table)
		ends.Each(func(o kadm.ListedOffset) {
			app := fmt.Sprintf("%s-%s-%d", p.name, topic, o.Partition)
			if v, ok := txns[app]; o.Offset > 0 && (!ok || v != o.Offset-1) {
				t.Errorf("%s: partition %d: txn version %d (present %v), want end offset %d - 1", p.name, o.Partition, v, ok, o.Offset)
			}
		})
	}

	var result string // the table's part of the CHAOS RESULT line
	if plan.upsert {
		result = checkChaosUpsert(t, s, plan, pipes, stream, landedAt, spark)
	} else {
		result = checkChaosAppend(t, s, plan, pipes[0].table, store, spark)
	}

	// Each dead-letter topic holds every pill, at least once, and nothing else.
	var dlqTotal, dups int
	for _, p := range pipes {
		got := map[[2]int64]int{}
		reasons := map[string]int{}
		n, pdups := 0, 0
		for _, r := range readAll(t, kafka.brokers, p.dlq) {
			n++
			var part, off int64 = -1, -1
			for _, h := range r.Headers {
				switch h.Key {
				case "__connect.errors.partition":
					part, _ = strconv.ParseInt(string(h.Value), 10, 32)
				case "__connect.errors.offset":
					off, _ = strconv.ParseInt(string(h.Value), 10, 64)
				case "ingestd.error.reason":
					reasons[string(h.Value)]++
				}
			}
			got[[2]int64{part, off}]++
		}
		for _, pl := range pills {
			n := got[[2]int64{int64(pl.partition), pl.offset}]
			if n == 0 {
				t.Errorf("%s: poison pill %s at partition %d offset %d is not in the dead-letter topic", p.name, pl.kind, pl.partition, pl.offset)
			}
			pdups += max(n-1, 0)
		}
		if len(got) != len(pills) {
			t.Errorf("%s: dead-letter topic holds %d distinct source records, want the %d pills", p.name, len(got), len(pills))
		}
		t.Logf("%s: dead-letter topic: %d records for %d pills (%d duplicates), reasons %v", p.name, n, len(pills), pdups, reasons)
		dlqTotal += n
		dups += pdups
	}
	t.Logf("CHAOS RESULT records=%d pills=%d kills=%d %s dlq_records=%d dlq_duplicates=%d total_time=%v",
		plan.records, len(pills), kills, result, dlqTotal, dups, time.Since(start).Round(time.Second))
}

// checkChaosAppend checks the append chaos table: delta-rs (and Spark, for a local table)
// read every good id exactly once, the v2 records carry channel, and no data file is
// added twice. It returns the table's figures for the CHAOS RESULT line.
func checkChaosAppend(t *testing.T, s stack, plan chaosPlan, table string, store *objectStore, spark *sparkSession) string {
	t.Helper()
	// delta-rs reads every good id exactly once.
	var chk struct {
		Version         int64    `json:"version"`
		Columns         []string `json:"columns"`
		Rows            int64    `json:"rows"`
		Distinct        int64    `json:"distinct"`
		Duplicated      int64    `json:"duplicated"`
		Missing         int64    `json:"missing"`
		OutOfRange      int64    `json:"out_of_range"`
		ChannelNonNull  int64    `json:"channel_non_null"`
		Files           int64    `json:"files"`
		DistinctFiles   int64    `json:"distinct_files"`
		FirstDuplicates []int64  `json:"first_duplicates"`
		FirstMissing    []int64  `json:"first_missing"`
	}
	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "chaos_check.py"), table, strconv.Itoa(plan.records))
	if store != nil {
		opts, _ := json.Marshal(store.storageOptions)
		cmd.Env = append(os.Environ(), "READ_TABLE_STORAGE_OPTIONS="+string(opts))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chaos_check.py: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(out, &chk); err != nil {
		t.Fatalf("chaos_check.py output %q: %v", out, err)
	}
	t.Logf("delta-rs: version %d, %d rows, %d distinct ids, %d duplicated, %d missing, %d files, columns %v",
		chk.Version, chk.Rows, chk.Distinct, chk.Duplicated, chk.Missing, chk.Files, chk.Columns)
	if chk.Rows != int64(plan.records) || chk.Distinct != int64(plan.records) || chk.Duplicated != 0 || chk.Missing != 0 || chk.OutOfRange != 0 {
		t.Errorf("table is not exactly once: %+v", chk)
	}
	if want := int64(plan.records - plan.records/2); chk.ChannelNonNull != want {
		t.Errorf("%d rows carry channel, want the %d v2 records", chk.ChannelNonNull, want)
	}
	if chk.Files != chk.DistinctFiles {
		t.Errorf("delta-rs lists %d files, %d distinct", chk.Files, chk.DistinctFiles)
	}
	if dup := duplicateAdds(t, table); len(dup) > 0 {
		t.Errorf("data files added more than once across the log: %v", dup)
	}
	if plan.partitioned {
		checkChaosPartitions(t, table)
	}

	// Spark reads every good id exactly once too (local tables).
	if spark != nil {
		var counts []map[string]any
		spark.call(t, map[string]any{"op": "sql", "query": "SELECT count(*) AS n, count(DISTINCT id) AS d, count(channel) AS c FROM delta.`" + table + "`"}, &counts)
		if len(counts) != 1 || fmt.Sprint(counts[0]["n"]) != strconv.Itoa(plan.records) || fmt.Sprint(counts[0]["d"]) != strconv.Itoa(plan.records) ||
			fmt.Sprint(counts[0]["c"]) != strconv.Itoa(plan.records-plan.records/2) {
			t.Errorf("Spark counts %v, want %d rows, %d distinct ids, %d with channel", counts, plan.records, plan.records, plan.records-plan.records/2)
		} else {
			t.Logf("Spark: %v rows, %v distinct ids, %v with channel", counts[0]["n"], counts[0]["d"], counts[0]["c"])
		}
	}
	return fmt.Sprintf("table_rows=%d distinct=%d duplicated=%d missing=%d files=%d", chk.Rows, chk.Distinct, chk.Duplicated, chk.Missing, chk.Files)
}

// startDaemonLogged is startDaemon with debug logs kept in logPath.
func startDaemonLogged(t *testing.T, configDir, logPath string) *daemon {
	t.Helper()
	return startDaemonAt(t, configDir, logPath, "debug")
}

// startDaemonAt is startDaemon at --log-level level, its output kept in logPath.
func startDaemonAt(t *testing.T, configDir, logPath, level string) *daemon {
	t.Helper()
	d := &daemon{listen: freePort(t), done: make(chan error, 1)}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	d.logs = logs
	d.cmd = exec.Command(ingestdBin(t), "run", "--config", configDir, "--listen", d.listen, "--log-level", level)
	d.cmd.Stdout, d.cmd.Stderr = logs, logs
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	})
	return d
}

// privateKafka is a Kafka broker of this test only: scripts/stack.sh with its own
// STACK_DIR and ports.
type privateKafka struct {
	dir     string
	brokers string
	env     []string
}

func startPrivateKafka(t *testing.T) *privateKafka {
	t.Helper()
	dir, err := os.MkdirTemp("", "ingestd-chaos-kafka-")
	if err != nil {
		t.Fatal(err)
	}
	// Every listener on a port of its own: stack.sh's fallbacks for the SSL and SASL_SSL
	// ports (19094, 19095) are the same for every private broker, so two at once (parallel
	// tests, or another checkout's) would collide.
	_, kport, _ := net.SplitHostPort(freePort(t))
	_, cport, _ := net.SplitHostPort(freePort(t))
	_, sslPort, _ := net.SplitHostPort(freePort(t))
	_, saslPort, _ := net.SplitHostPort(freePort(t))
	k := &privateKafka{dir: dir, brokers: "127.0.0.1:" + kport,
		env: append(os.Environ(), "STACK_DIR="+dir, "KAFKA_PORT="+kport, "KAFKA_CONTROLLER_PORT="+cport,
			"KAFKA_SSL_PORT="+sslPort, "KAFKA_SASL_PORT="+saslPort, "KAFKA_HEAP=-Xms128m -Xmx512m")}
	t.Cleanup(func() {
		if os.Getenv("INGESTD_CHAOS_KEEP") == "1" && t.Failed() {
			t.Logf("private Kafka kept running for inspection: STACK_DIR=%s (stop it with scripts/stack.sh stop-kafka)", dir)
			return
		}
		if err := k.script("stop-kafka"); err != nil {
			t.Logf("stop private kafka: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "logs", "kafka.log"))
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("private kafka log tail:\n%s", b)
		}
		_ = os.RemoveAll(dir)
	})
	if err := k.script("start-kafka"); err != nil {
		t.Fatalf("start a private Kafka broker: %v", err)
	}
	return k
}

func (k *privateKafka) script(cmd string) error {
	if k.dir == "" || !strings.HasPrefix(k.dir, os.TempDir()) {
		return fmt.Errorf("refusing to run stack.sh %s outside a private STACK_DIR", cmd)
	}
	c := exec.Command(filepath.Join(repoRoot, "scripts", "stack.sh"), cmd)
	c.Env = k.env
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("stack.sh %s: %v\n%s", cmd, err, out)
	}
	return nil
}

func (k *privateKafka) restart() error { return k.script("restart-kafka") }

// proxy forwards TCP to target; cut(true) closes every connection and refuses new ones
// (accepted and closed at once), like a registry that is unreachable.
type proxy struct {
	addr   string
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *proxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.conns[c] = true
	p.mu.Unlock()
	u, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[u] = true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

func (p *proxy) cut(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// readAll reads a whole topic from its start to its current end offsets.
func readAll(t *testing.T, brokers, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d records: %v", topic, len(out), want, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// txnVersionsAt is txnVersions for a local path or an object-store URI.
func txnVersionsAt(t *testing.T, uri string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	st, err := storage.OpenWith(ctx, uri, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		return map[string]int64{}
	}
	return snap.Txns
}

// duplicateAdds returns the data files that more than one add action names with the
// same deletion vector (none for an append table) across the table's JSON commits (table:
// a local path or an object-store URI). An upsert adds a file again with each new deletion
// vector; the same file with the same vector twice is a commit applied twice.
func duplicateAdds(t *testing.T, table string) []string {
	t.Helper()
	ctx := context.Background()
	st, err := storage.OpenWith(ctx, table, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := st.List(ctx, "_delta_log")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatalf("%s/_delta_log lists no entries", table)
	}
	seen := map[string]int{}
	for _, e := range entries {
		if e.IsDir || !strings.HasSuffix(e.Name, ".json") || strings.HasPrefix(e.Name, "_") {
			continue
		}
		b, err := st.Get(ctx, "_delta_log/"+e.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			var a struct {
				Add *struct {
					Path           string                   `json:"path"`
					DeletionVector *deltalog.DeletionVector `json:"deletionVector"`
				} `json:"add"`
			}
			if len(line) == 0 || json.Unmarshal(line, &a) != nil || a.Add == nil {
				continue
			}
			seen[deltalog.FileKey(a.Add.Path, a.Add.DeletionVector)]++
		}
	}
	var dup []string
	for p, n := range seen {
		if n > 1 {
			dup = append(dup, p)
		}
	}
	sort.Strings(dup)
	return dup
}
