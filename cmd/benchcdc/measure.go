package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// phaseResult is one line of results.jsonl: a phase's changes, the time each stage took to
// pass them on, and the CPU seconds the Connect worker and ingestd spent meanwhile.
type phaseResult struct {
	Phase          string  `json:"phase"` // snapshot, warmup, steady or flat
	TargetRate     float64 `json:"target_rate,omitempty"`
	TxRows         int     `json:"tx_rows,omitempty"`
	Workers        int     `json:"workers,omitempty"`
	Changes        int64   `json:"changes"` // source rows changed (snapshot: rows read)
	Updates        int64   `json:"updates"`
	Inserts        int64   `json:"inserts"`
	Deletes        int64   `json:"deletes"`
	Records        int64   `json:"records"` // Kafka records Debezium wrote for them
	WorkloadS      float64 `json:"workload_s"`
	PGRate         float64 `json:"pg_changes_per_s"`       // changes committed in PostgreSQL per workload second
	DebeziumS      float64 `json:"debezium_s"`             // phase start → the last record in Kafka
	DebeziumRate   float64 `json:"debezium_records_per_s"` // Kafka records per DebeziumS
	DebeziumChRate float64 `json:"debezium_changes_per_s"` // changes per DebeziumS
	E2ES           float64 `json:"e2e_s"`                  // phase start → the last record committed to Delta
	E2ERate        float64 `json:"e2e_changes_per_s"`      // changes per E2ES
	ConnectCPU     float64 `json:"connect_cpu_s"`          // worker JVM, phase start → DebeziumS
	IngestdCPU     float64 `json:"ingestd_cpu_s"`          // ingestd, phase start → E2ES
	ConnectPer     float64 `json:"connect_cpu_us_per_change"`
	IngestdPer     float64 `json:"ingestd_cpu_us_per_change"`
	Ratio          float64 `json:"ingestd_to_connect_cpu"` // IngestdCPU / ConnectCPU
	StartMS        int64   `json:"start_ms"`               // Unix ms: the phase's start
	EndMS          int64   `json:"end_ms"`                 // Unix ms: the workload's end
	DoneMS         int64   `json:"done_ms"`                // Unix ms: every record committed to Delta
	DeadLetters    int64   `json:"dead_letters"`           // records in the dead-letter topic after the phase
	Load           string  `json:"loadavg"`                // /proc/loadavg at the start and the end
}

func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	pg := fs.String("pg", "", "PostgreSQL URL of a superuser (POSTGRES_URL)")
	db := fs.String("db", "", "the source database")
	connect := fs.String("connect", "", "the Connect worker's REST root, http://127.0.0.1:PORT")
	connector := fs.String("connector", "", "connector name")
	config := fs.String("config", "", "the connector's config (JSON object of strings)")
	brokers := fs.String("brokers", "", "Kafka brokers, comma-separated")
	topic := fs.String("topic", "", "the table's change topic (one partition)")
	dlq := fs.String("dlq", "", "the pipeline's dead-letter topic")
	table := fs.String("table", "", "the Delta table's local directory")
	connectPid := fs.String("connect-pid", "", "the Connect worker JVM's pid")
	ingestdPid := fs.String("ingestd-pid", "", "ingestd's pid")
	rows := fs.Int64("rows", 0, "rows in src before the connector starts (the snapshot's records)")
	phases := fs.String("phases", "snapshot warmup steady flat", "phases, in order")
	rate := fs.Float64("rate", 1000, "steady phase: changes/s")
	duration := fs.Duration("duration", time.Minute, "the steady phase's workload")
	flatDuration := fs.Duration("flat-duration", 30*time.Second, "the flat phase's workload")
	warmup := fs.Duration("warmup", 15*time.Second, "the warmup phase's workload (at -rate): JIT and caches, reported apart")
	workers := fs.Int("workers", 4, "workload connections")
	txRows := fs.Int("tx-rows", 1, "steady phase: changes per transaction")
	flatTxRows := fs.Int("flat-tx-rows", 10, "flat phase: changes per transaction")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long a phase may take to reach the table after its workload")
	seed := fs.Uint64("seed", 1, "workload seed")
	out := fs.String("out", "", "results.jsonl to append to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	m := &meter{adm: kadm.NewClient(cl), topic: *topic, table: *table, connectPid: *connectPid, ingestdPid: *ingestdPid}
	srcURL, err := dbURL(*pg, *db)
	if err != nil {
		return err
	}
	var wl *workload
	for _, ph := range strings.Fields(*phases) {
		var r phaseResult
		switch ph {
		case "snapshot":
			r, err = m.phase(ctx, ph, *timeout, func() (workloadStats, error) {
				if err := registerConnector(*connect, *connector, *config); err != nil {
					return workloadStats{}, err
				}
				return workloadStats{Inserts: *rows}, nil
			})
			if err != nil {
				return err
			}
		case "warmup", "steady", "flat":
			if wl == nil {
				if !strings.Contains(*phases, "snapshot") { // snapshot.mode no_data: nothing to measure before streaming
					if err := registerConnector(*connect, *connector, *config); err != nil {
						return err
					}
				}
				if wl, err = newWorkload(ctx, srcURL, *workers); err != nil {
					return err
				}
				if err := waitStreaming(ctx, *pg, *db, *timeout); err != nil {
					return err
				}
			}
			pr, tx, d := *rate, *txRows, *duration
			switch ph {
			case "flat":
				pr, tx, d = 0, *flatTxRows, *flatDuration
			case "warmup":
				d = *warmup
			}
			wl.txRow = max(tx, 1)
			r, err = m.phase(ctx, ph, *timeout, func() (workloadStats, error) {
				return wl.run(ctx, pr, d, *seed+uint64(len(ph)))
			})
			if err != nil {
				return err
			}
			r.TargetRate, r.TxRows, r.Workers = pr, wl.txRow, *workers
		default:
			return fmt.Errorf("unknown phase %q: want snapshot, warmup, steady or flat", ph)
		}
		if *dlq != "" {
			if r.DeadLetters, err = (&meter{adm: m.adm, topic: *dlq}).topicEnd(ctx); err != nil {
				return err
			}
		}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		if err := appendLine(*out, b); err != nil {
			return err
		}
	}
	return nil
}

// newWorkload reads src's live ids and splits them among workers.
func newWorkload(ctx context.Context, url string, workers int) (*workload, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to the source: %w", err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT id FROM src")
	if err != nil {
		return nil, fmt.Errorf("read live ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read live ids: %w", err)
	}
	var maxID int64
	for _, id := range ids {
		maxID = max(maxID, id)
	}
	return &workload{url: url, keys: splitKeys(ids, maxID, workers), txRow: 1}, nil
}

// waitStreaming waits until a walsender reads the database's replication slot: Debezium
// opens it after its snapshot.
func waitStreaming(ctx context.Context, pg, db string, timeout time.Duration) error {
	c, err := pgx.Connect(ctx, pg)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer c.Close(ctx)
	deadline := time.Now().Add(timeout)
	for {
		var active bool
		err := c.QueryRow(ctx, "SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE database = $1", db).Scan(&active)
		if err != nil {
			return fmt.Errorf("look up the replication slot: %w", err)
		}
		if active {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no walsender on the replication slot of %s after %v", db, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// meter watches the stages of one phase: the topic's end offset (what Debezium has
// written), the table's txn versions (what ingestd has committed) and both processes' CPU.
type meter struct {
	adm                    *kadm.Client
	topic, table           string
	connectPid, ingestdPid string
	log                    txnLog
}

// phase runs work (which changes the source and returns what it committed) and waits
// until Kafka and then the Delta table hold every resulting record.
func (m *meter) phase(ctx context.Context, name string, timeout time.Duration, work func() (workloadStats, error)) (phaseResult, error) {
	r := phaseResult{Phase: name, Load: loadavg()}
	end0, err := m.topicEnd(ctx)
	if err != nil {
		return r, err
	}
	if err := m.log.update(m.table); err != nil {
		return r, err
	}
	if h := m.log.handled(); h != end0 {
		return r, fmt.Errorf("phase %s: the table has handled %d records of %d before the phase", name, h, end0)
	}
	c0, err := cpuSeconds(m.connectPid)
	if err != nil {
		return r, err
	}
	i0, err := cpuSeconds(m.ingestdPid)
	if err != nil {
		return r, err
	}
	start := time.Now()
	st, err := work()
	if err != nil {
		return r, fmt.Errorf("phase %s: %w", name, err)
	}
	end := time.Now()
	want := end0 + st.records()
	deadline := end.Add(timeout)
	var c1, i1 float64
	var dbzDone, ingDone time.Time
	for dbzDone.IsZero() || ingDone.IsZero() {
		now := time.Now()
		if dbzDone.IsZero() {
			e, err := m.topicEnd(ctx)
			if err != nil {
				return r, err
			}
			if e >= want {
				dbzDone = now
				if c1, err = cpuSeconds(m.connectPid); err != nil {
					return r, err
				}
			}
		}
		if ingDone.IsZero() {
			if err := m.log.update(m.table); err != nil {
				return r, err
			}
			if m.log.handled() >= want {
				ingDone = now
				if i1, err = cpuSeconds(m.ingestdPid); err != nil {
					return r, err
				}
			}
		}
		if now.After(deadline) {
			e, _ := m.topicEnd(ctx)
			return r, fmt.Errorf("phase %s: after %v the topic ends at %d and the table has handled %d records, want %d", name, timeout, e, m.log.handled(), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e, err := m.topicEnd(ctx); err != nil || e != want {
		return r, fmt.Errorf("phase %s: the topic ends at %d, want exactly %d (%v)", name, e, want, err)
	}
	r.Changes, r.Updates, r.Inserts, r.Deletes, r.Records = st.changes(), st.Updates, st.Inserts, st.Deletes, st.records()
	r.WorkloadS = round3(end.Sub(start).Seconds())
	r.DebeziumS = round3(dbzDone.Sub(start).Seconds())
	r.E2ES = round3(ingDone.Sub(start).Seconds())
	if name != "snapshot" {
		r.PGRate = round3(float64(r.Changes) / r.WorkloadS)
	}
	r.DebeziumRate = round3(float64(r.Records) / r.DebeziumS)
	r.DebeziumChRate = round3(float64(r.Changes) / r.DebeziumS)
	r.E2ERate = round3(float64(r.Changes) / r.E2ES)
	r.ConnectCPU, r.IngestdCPU = round3(c1-c0), round3(i1-i0)
	if r.Changes > 0 {
		r.ConnectPer = round3(r.ConnectCPU / float64(r.Changes) * 1e6)
		r.IngestdPer = round3(r.IngestdCPU / float64(r.Changes) * 1e6)
	}
	if r.ConnectCPU > 0 {
		r.Ratio = round3(r.IngestdCPU / r.ConnectCPU)
	}
	r.StartMS, r.EndMS, r.DoneMS = start.UnixMilli(), end.UnixMilli(), ingDone.UnixMilli()
	r.Load += " → " + loadavg()
	return r, nil
}

// topicEnd is the topic's end offset (one partition); 0 while it does not exist.
func (m *meter) topicEnd(ctx context.Context) (int64, error) {
	ends, err := m.adm.ListEndOffsets(ctx, m.topic)
	if err != nil {
		return 0, fmt.Errorf("list end offsets of %s: %w", m.topic, err)
	}
	var n int64
	var lerr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && !errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			lerr = o.Err
		}
		n += o.Offset
	})
	if lerr != nil {
		return 0, fmt.Errorf("list end offsets of %s: %w", m.topic, lerr)
	}
	return n, nil
}

// txnLog reads a local Delta table's log incrementally for its txn actions (PROTOCOL.md,
// "Transaction Identifiers"): ingestd's appId per topic partition, whose version is the
// last offset the table holds.
type txnLog struct {
	next     int64 // the first version not read yet
	versions map[string]int64
}

// update reads the versions from l.next on until the first one missing.
func (l *txnLog) update(table string) error {
	if l.versions == nil {
		l.versions = map[string]int64{}
	}
	for {
		name := filepath.Join(table, "_delta_log", fmt.Sprintf("%020d.json", l.next))
		b, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read Delta log: %w", err)
		}
		if err := l.parse(b); err != nil {
			return fmt.Errorf("parse Delta log %s: %w", name, err)
		}
		l.next++
	}
}

func (l *txnLog) parse(b []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(`"txn"`)) {
			continue
		}
		var a struct {
			Txn *struct {
				AppID   string `json:"appId"`
				Version int64  `json:"version"`
			} `json:"txn"`
		}
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			return err
		}
		if a.Txn == nil {
			continue
		}
		if v, ok := l.versions[a.Txn.AppID]; !ok || a.Txn.Version > v {
			l.versions[a.Txn.AppID] = a.Txn.Version
		}
	}
	return sc.Err()
}

// handled is the records the table has handled: the sum over its txn appIds of version+1
// (one partition each).
func (l *txnLog) handled() int64 {
	var n int64
	for _, v := range l.versions {
		n += v + 1
	}
	return n
}

// registerConnector registers the connector whose config is in file.
func registerConnector(root, name, file string) error {
	cfg, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read connector config: %w", err)
	}
	return putConnector(root, name, cfg)
}

// putConnector creates or updates a connector (PUT /connectors/{name}/config), retrying
// while the worker's group rebalances (409) or the herder is busy (5xx).
func putConnector(root, name string, config []byte) error {
	deadline := time.Now().Add(time.Minute)
	for {
		req, err := http.NewRequest(http.MethodPut, root+"/connectors/"+url.PathEscape(name)+"/config", bytes.NewReader(config))
		if err != nil {
			return fmt.Errorf("register connector: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		code := 0
		var body bytes.Buffer
		if err == nil {
			code = resp.StatusCode
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if code == http.StatusOK || code == http.StatusCreated {
				return nil
			}
		}
		if err == nil && code != http.StatusConflict && code < 500 || time.Now().After(deadline) {
			return fmt.Errorf("register connector %s: %d %v %s", name, code, err, body.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on every
// Linux architecture Go supports (proc(5)).
const clockTicks = 100

// cpuSeconds is a process's utime+stime in seconds (/proc/<pid>/stat fields 14 and 15).
func cpuSeconds(pid string) (float64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read process stat: %w", err)
	}
	return parseStatCPU(b)
}

func parseStatCPU(stat []byte) (float64, error) {
	// The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse process stat: no ')' in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("parse process stat: %d fields after the name, want ≥ 13", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse process stat: utime %q stime %q", f[11], f[12])
	}
	return float64(ut+st) / clockTicks, nil
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func appendLine(path string, b []byte) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open results: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write results: %w", err)
	}
	return f.Close()
}
