package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	repoRoot, _ = filepath.Abs("..")
	binOnce     sync.Once
	binPath     string
	binErr      error
)

// stack is the running services, from .stack/env or the environment.
type stack struct {
	brokers  string
	registry string
	python   string
}

// need returns the stack, or skips (locally) / fails (CI=true) naming what is missing.
func need(t *testing.T) stack {
	t.Helper()
	s := stack{brokers: os.Getenv("KAFKA_BROKERS"), registry: os.Getenv("SCHEMA_REGISTRY_URL"),
		python: filepath.Join(repoRoot, ".venv", "bin", "python")}
	if b, err := os.ReadFile(filepath.Join(repoRoot, ".stack", "env")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimPrefix(strings.TrimSpace(line), "export ")
			k, v, ok := strings.Cut(line, "=")
			v = strings.Trim(v, `"'`)
			switch {
			case !ok:
			case k == "KAFKA_BROKERS" && s.brokers == "":
				s.brokers = v
			case k == "SCHEMA_REGISTRY_URL" && s.registry == "":
				s.registry = v
			}
		}
	}
	var missing []string
	if s.brokers == "" || !reachable(s.brokers) {
		missing = append(missing, "Kafka broker (KAFKA_BROKERS="+s.brokers+")")
	}
	if u, err := url.Parse(s.registry); s.registry == "" || err != nil || !reachable(u.Host) {
		missing = append(missing, "schema registry (SCHEMA_REGISTRY_URL="+s.registry+")")
	}
	if _, err := os.Stat(s.python); err != nil {
		missing = append(missing, "Python venv with deltalake and confluent-kafka ("+s.python+")")
	}
	if len(missing) > 0 {
		msg := "integration test needs " + strings.Join(missing, ", ") + ": run scripts/venv.sh && scripts/stack.sh up (make test does both)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return s
}

func reachable(hostport string) bool {
	hostport = strings.Split(hostport, ",")[0]
	c, err := net.DialTimeout("tcp", hostport, 2*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// ingestdBin builds the daemon once per test process.
func ingestdBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ingestd-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "ingestd")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/ingestd")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func kafkaClient(t *testing.T, s stack, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(s.brokers, ",")...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic with a name unique to this run and returns the name.
func createTopic(t *testing.T, s stack, base string, partitions int32) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", base, time.Now().UnixNano())
	createTopicNamed(t, s, name, partitions)
	return name
}

// createTopicNamed creates the topic name.
func createTopicNamed(t *testing.T, s stack, name string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(kafkaClient(t, s))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// order is one produced record, as produce_orders.py wrote it.
type order struct {
	OrderID   int64   `json:"order_id"`
	Customer  string  `json:"customer"`
	Amount    string  `json:"amount"`
	CreatedAt int64   `json:"created_at"`
	Status    string  `json:"status"`
	Note      *string `json:"note"`
	Channel   *string `json:"channel"`
	Version   string  `json:"version"`
}

// produce runs produce_orders.py and returns the orders it produced, in order.
func produce(t *testing.T, s stack, topic string, v1, v2 int, start int64, extra ...string) []order {
	t.Helper()
	out := filepath.Join(t.TempDir(), "produced.jsonl")
	cmd := exec.Command(s.python, append([]string{filepath.Join(repoRoot, "integration", "testdata", "produce_orders.py"),
		"--brokers", s.brokers, "--registry", s.registry, "--topic", topic,
		"--v1", fmt.Sprint(v1), "--v2", fmt.Sprint(v2), "--start", fmt.Sprint(start), "--out", out}, extra...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("produce_orders.py: %v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var orders []order
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var o order
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatal(err)
		}
		orders = append(orders, o)
	}
	if len(orders) != v1+v2 {
		t.Fatalf("produced %d orders, want %d", len(orders), v1+v2)
	}
	return orders
}

// tableData is what read_table.py (delta-rs) prints.
type tableData struct {
	Version     int64            `json:"version"`
	Unsupported string           `json:"unsupported"` // delta-rs cannot read the table (e.g. typeWidening)
	Schema      [][]any          `json:"schema"`
	Rows        []map[string]any `json:"rows"`
	Files       int              `json:"files"`
	History     []string         `json:"history"`
}

// schemaText is the delta-rs schema as "name type, name type, …" in column order.
func (d tableData) schemaText() string {
	cols := make([]string, 0, len(d.Schema))
	for _, c := range d.Schema {
		cols = append(cols, fmt.Sprint(c[0], " ", c[1]))
	}
	return strings.Join(cols, ", ")
}

func readTable(t *testing.T, s stack, path string) tableData {
	t.Helper()
	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "read_table.py"), path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_table.py %s: %v\n%s", path, err, stderr.String())
	}
	var d tableData
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("parse read_table.py output: %v", err)
	}
	return d
}

// daemon is a running `ingestd run`.
type daemon struct {
	cmd    *exec.Cmd
	listen string
	logs   *os.File
	done   chan error
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startDaemon(t *testing.T, configDir string) *daemon {
	t.Helper()
	d := &daemon{listen: freePort(t), done: make(chan error, 1)}
	logs, err := os.CreateTemp(t.TempDir(), "ingestd-*.log")
	if err != nil {
		t.Fatal(err)
	}
	d.logs = logs
	d.cmd = exec.Command(ingestdBin(t), "run", "--config", configDir, "--listen", d.listen)
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
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("ingestd log tail (%s):\n%s", logs.Name(), b)
		}
	})
	return d
}

// stop sends SIGTERM and returns the exit code.
func (d *daemon) stop(t *testing.T) int {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(90 * time.Second):
		t.Fatal("ingestd did not exit within 90s of SIGTERM")
	}
	return d.cmd.ProcessState.ExitCode()
}

// stopClean sends SIGTERM and fails the test unless the daemon exits 0 without logging
// an ERROR line from the signal on: a clean shutdown (every pipeline drained, offsets
// committed, consumers out of their group) has nothing to report as an error, and an
// operator's alert on ERROR lines must not fire on every restart.
func (d *daemon) stopClean(t *testing.T) {
	t.Helper()
	st, err := d.logs.Stat()
	if err != nil {
		t.Fatal(err)
	}
	from := st.Size()
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d after SIGTERM, want 0", code)
	}
	b, err := os.ReadFile(d.logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, l := range strings.Split(string(b[min(from, int64(len(b))):]), "\n") {
		if strings.Contains(l, `"level":"ERROR"`) {
			errs = append(errs, l)
		}
	}
	if len(errs) > 0 {
		t.Errorf("ingestd logged %d ERROR lines after SIGTERM, in a clean shutdown:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// kill9 kills the daemon without warning.
func (d *daemon) kill9(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

type readyz struct {
	Ready     bool `json:"ready"`
	Pipelines []struct {
		Pipeline string `json:"pipeline"`
		State    string `json:"state"`
		Error    string `json:"error"`
		Halted   []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Reason    string `json:"reason"`
			Field     string `json:"field"`
		} `json:"halted"`
	} `json:"pipelines"`
}

func (d *daemon) readyz(t *testing.T) (readyz, int) {
	t.Helper()
	resp, err := http.Get("http://" + d.listen + "/readyz")
	if err != nil {
		return readyz{}, 0
	}
	defer resp.Body.Close()
	var r readyz
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &r)
	return r, resp.StatusCode
}

func (d *daemon) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + d.listen + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitFor polls cond every 20ms until it returns true or timeout passes; it fails the test
// at the deadline, or as soon as d (when not nil) exits.
func waitFor(t *testing.T, d *daemon, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitForEvery(t, d, timeout, 20*time.Millisecond, what, cond)
}

// waitForEvery is waitFor polling every interval: longer for a condition that is costly
// to check (a table read), shorter where the moment it turns true matters.
func waitForEvery(t *testing.T, d *daemon, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if d != nil {
			select {
			case err := <-d.done:
				d.done <- err
				t.Fatalf("ingestd exited while waiting for %s: %v", what, err)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(interval)
	}
}

// logHasLine reports whether one line of d's output so far contains every one of subs.
func logHasLine(t *testing.T, d *daemon, subs ...string) bool {
	t.Helper()
	b, err := os.ReadFile(d.logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		all := true
		for _, s := range subs {
			if !strings.Contains(l, s) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func writePipeline(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

// topicRecord is a record read back from a topic, headers as a map.
type topicRecord struct {
	partition int32
	offset    int64
	key       []byte
	value     []byte
	headers   map[string]string
	timestamp time.Time
}

// readDLQ reads every record of a topic up to its end offsets at the time of the call.
func readDLQ(t *testing.T, s stack, topic string) []topicRecord {
	t.Helper()
	cl := kafkaClient(t, s, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	var out []topicRecord
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for int64(len(out)) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d records", topic, len(out), total)
		}
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			out = append(out, topicRecord{partition: r.Partition, offset: r.Offset, key: r.Key, value: r.Value, headers: h, timestamp: r.Timestamp})
		})
	}
	return out
}
