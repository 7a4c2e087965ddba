package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// connectJars are the Kafka Connect worker's classpath directory and its plugin.path
// (the Debezium PostgreSQL connector and Apicurio's Avro converter), resolved by
// scripts/stack.sh into .stack/connect-<hash>.
type connectJars struct {
	lib, plugins string
}

var (
	connectJarsOnce sync.Once
	connectJarsVal  connectJars
	connectJarsErr  error
)

// needConnect returns the Connect jars: CONNECT_LIB_DIR and CONNECT_PLUGIN_PATH from the
// environment or .stack/env, else what `scripts/stack.sh connect-jars` resolves (Maven,
// once per POM set). Skips (locally) / fails (CI=true) without Java or the jars.
func needConnect(t *testing.T) connectJars {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		missingService(t, "CDC integration test needs Java 17+ for Kafka Connect")
	}
	connectJarsOnce.Do(func() {
		j := connectJars{lib: stackEnvOr("CONNECT_LIB_DIR"), plugins: stackEnvOr("CONNECT_PLUGIN_PATH")}
		if j.lib != "" && j.plugins != "" {
			if _, err := os.Stat(filepath.Join(j.plugins, "debezium-connector-postgres")); err == nil {
				connectJarsVal = j
				return
			}
		}
		// An older stack (or none): resolve the jars of this checkout's POMs.
		cmd := exec.Command(filepath.Join(repoRoot, "scripts", "stack.sh"), "connect-jars")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			connectJarsErr = fmt.Errorf("scripts/stack.sh connect-jars: %v\n%s", err, stderr.Bytes())
			return
		}
		for _, line := range strings.Split(string(out), "\n") {
			k, v, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
			switch k {
			case "CONNECT_LIB_DIR":
				j.lib = v
			case "CONNECT_PLUGIN_PATH":
				j.plugins = v
			}
		}
		connectJarsVal, connectJarsErr = j, nil
		if j.lib == "" || j.plugins == "" {
			connectJarsErr = fmt.Errorf("scripts/stack.sh connect-jars printed no directories:\n%s", out)
		}
	})
	if connectJarsErr != nil {
		missingService(t, "CDC integration test needs the Kafka Connect jars: "+connectJarsErr.Error())
	}
	return connectJarsVal
}

// connectWorker is a Kafka Connect worker of one test, in distributed mode with a group,
// config/offset/status topics and a REST port of its own: a restart (Stop, Kill, Start)
// finds its connectors and their source offsets in Kafka, as a production worker does, and
// the test never re-registers anything. One worker is a group of one.
type connectWorker struct {
	t        *testing.T
	jars     connectJars
	brokers  string
	registry string // the stack registry's ccompat root, as in SCHEMA_REGISTRY_URL
	dir      string // worker.properties, log4j2.properties, worker.log
	rest     string // http://127.0.0.1:port
	group    string // group.id, also the prefix of its internal topics

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// startConnect starts a worker on brokers (any broker: the shared one or a private one)
// and waits until its REST API serves connector requests. registryURL is the ccompat root
// of the registry that the Avro converter (avroConverter) registers schemas in. Cleanup
// stops the worker, deletes its internal topics, and logs the end of its log when the
// test failed.
func startConnect(t *testing.T, brokers, registryURL string) *connectWorker {
	t.Helper()
	jars := needConnect(t)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	w := &connectWorker{t: t, jars: jars, brokers: brokers, registry: registryURL,
		dir: t.TempDir(), rest: "http://" + freePort(t), group: "connect-" + suffix}
	if err := w.writeConfig(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Stop(t)
		if t.Failed() {
			// The whole log outlives the test's temp dir.
			keep := filepath.Join(os.TempDir(), "ingestd-"+w.group+".log")
			if b, err := os.ReadFile(filepath.Join(w.dir, "worker.log")); err == nil && os.WriteFile(keep, b, 0o644) == nil {
				t.Logf("Connect worker log: %s", keep)
			}
			t.Logf("Connect worker log tail:\n%s", tailFile(filepath.Join(w.dir, "worker.log"), 12000))
		}
		w.deleteTopics()
		if w.log != nil {
			_ = w.log.Close()
		}
	})
	w.Start(t)
	return w
}

func (w *connectWorker) writeConfig() error {
	u, err := url.Parse(w.rest)
	if err != nil {
		return err
	}
	props := strings.Join([]string{
		"bootstrap.servers=" + w.brokers,
		"group.id=" + w.group,
		"config.storage.topic=" + w.group + "-configs",
		"offset.storage.topic=" + w.group + "-offsets",
		"status.storage.topic=" + w.group + "-status",
		"config.storage.replication.factor=1",
		"offset.storage.replication.factor=1",
		"offset.storage.partitions=1",
		"status.storage.replication.factor=1",
		"status.storage.partitions=1",
		// The worker's default converters; a connector names its own (avroConverter, jsonConverter).
		"key.converter=org.apache.kafka.connect.json.JsonConverter",
		"value.converter=org.apache.kafka.connect.json.JsonConverter",
		"offset.flush.interval.ms=1000",
		"plugin.path=" + w.jars.plugins,
		// No reflection scan of the plugins (seconds): every plugin has a ServiceLoader
		// manifest (scripts/stack-cdc.sh writes the one Apicurio's converter lacks).
		"plugin.discovery=service_load",
		"listeners=http://" + u.Host,
		"rest.advertised.host.name=127.0.0.1",
		"rest.advertised.port=" + u.Port(),
		// A restarted worker is a new member: hand it the tasks of the one that died at
		// once (the default waits 5 minutes for it to come back), and let the broker drop
		// the dead member after 6 s (its minimum) rather than 10.
		"scheduled.rebalance.max.delay.ms=0",
		"session.timeout.ms=6000",
		"heartbeat.interval.ms=2000",
		"task.shutdown.graceful.timeout.ms=5000",
	}, "\n") + "\n"
	logCfg := `status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %X{connector.context}%m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = OUT
logger.reflections.name = org.reflections
logger.reflections.level = error
logger.kafka.name = org.apache.kafka.clients
logger.kafka.level = warn
`
	if err := os.WriteFile(filepath.Join(w.dir, "worker.properties"), []byte(props), 0o644); err != nil {
		return fmt.Errorf("write worker.properties: %w", err)
	}
	if err := os.WriteFile(filepath.Join(w.dir, "log4j2.properties"), []byte(logCfg), 0o644); err != nil {
		return fmt.Errorf("write log4j2.properties: %w", err)
	}
	return nil
}

// Start starts the worker JVM (after Stop or Kill) and waits up to 2 minutes until its
// REST API lists connectors (the worker has joined its group and read its config topic).
func (w *connectWorker) Start(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	if w.cmd != nil {
		w.mu.Unlock()
		t.Fatal("Connect worker already running")
	}
	if w.log == nil {
		f, err := os.OpenFile(filepath.Join(w.dir, "worker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			w.mu.Unlock()
			t.Fatal(err)
		}
		w.log = f
	}
	// C1 only and a small heap: start-up on two busy cores matters more than peak speed.
	cmd := exec.Command("java", "-Xms128m", "-Xmx768m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Djava.awt.headless=true", "-Dlog4j2.configurationFile="+filepath.Join(w.dir, "log4j2.properties"),
		"-cp", filepath.Join(w.jars.lib, "*"), "org.apache.kafka.connect.cli.ConnectDistributed",
		filepath.Join(w.dir, "worker.properties"))
	cmd.Stdout, cmd.Stderr = w.log, w.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.mu.Unlock()
		t.Fatalf("start Connect worker: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // owned by Stop/Kill, which wait for done
	w.cmd, w.done = cmd, done
	w.mu.Unlock()

	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, _, err := w.request(http.MethodGet, "/connectors", nil)
		if err == nil && code == http.StatusOK {
			return
		}
		select {
		case <-done:
			t.Fatalf("Connect worker exited during start-up:\n%s", tailFile(filepath.Join(w.dir, "worker.log"), 6000))
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("Connect worker REST API not ready after 2m (last: %d %v)", code, err)
		}
	}
}

// Stop stops the worker gracefully (SIGTERM: tasks commit their offsets), waiting up to
// 30 s before killing it. A no-op when it is not running.
func (w *connectWorker) Stop(t *testing.T) { w.signal(t, syscall.SIGTERM, 30*time.Second) }

// Kill kills the worker with SIGKILL (no offset commit, no group leave).
func (w *connectWorker) Kill(t *testing.T) { w.signal(t, syscall.SIGKILL, 30*time.Second) }

// Restart is Stop then Start.
func (w *connectWorker) Restart(t *testing.T) {
	t.Helper()
	w.Stop(t)
	w.Start(t)
}

func (w *connectWorker) signal(t *testing.T, sig syscall.Signal, wait time.Duration) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return
	}
	_ = syscall.Kill(-w.cmd.Process.Pid, sig)
	select {
	case <-w.done:
	case <-time.After(wait):
		t.Logf("Connect worker did not exit %v after %v; killing it", sig, wait)
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.done
	}
	w.cmd, w.done = nil, nil
}

// request sends a REST request with a JSON body (nil: none) and returns the status and body.
func (w *connectWorker) request(method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, w.rest+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// PutConnector creates or updates connector name (PUT /connectors/{name}/config),
// retrying while the worker's group rebalances (409) or the herder is busy (5xx).
func (w *connectWorker) PutConnector(t *testing.T, name string, config map[string]string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, body, err := w.request(http.MethodPut, "/connectors/"+url.PathEscape(name)+"/config", config)
		if err == nil && (code == http.StatusOK || code == http.StatusCreated) {
			return
		}
		if err == nil && code != http.StatusConflict && code < 500 || time.Now().After(deadline) {
			t.Fatalf("register connector %s: %d %v %s", name, code, err, body)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// DeleteConnector deletes connector name (its slot stays in PostgreSQL: createPGDatabase's
// cleanup drops it).
func (w *connectWorker) DeleteConnector(t *testing.T, name string) {
	t.Helper()
	code, body, err := w.request(http.MethodDelete, "/connectors/"+url.PathEscape(name), nil)
	if err != nil || code != http.StatusNoContent && code != http.StatusNotFound {
		t.Fatalf("delete connector %s: %d %v %s", name, code, err, body)
	}
}

// connectorStatus is GET /connectors/{name}/status.
type connectorStatus struct {
	Connector struct {
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"connector"`
	Tasks []struct {
		ID    int    `json:"id"`
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"tasks"`
}

// Status returns the connector's status; ok is false while the worker does not know it.
func (w *connectWorker) Status(t *testing.T, name string) (st connectorStatus, ok bool) {
	t.Helper()
	code, body, err := w.request(http.MethodGet, "/connectors/"+url.PathEscape(name)+"/status", nil)
	if err != nil || code != http.StatusOK {
		return st, false
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("connector %s status %s: %v", name, body, err)
	}
	return st, true
}

// WaitStreaming waits until the Debezium connector name and its one task are RUNNING and
// the task streams from its replication slot in db (the snapshot is over: Debezium opens
// the streaming replication connection after it). A FAILED connector or task fails the
// test at once with its stack trace.
func (w *connectWorker) WaitStreaming(t *testing.T, name string, db *pgDB, slot string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last connectorStatus
	for {
		st, ok := w.Status(t, name)
		if ok {
			last = st
			if st.Connector.State == "FAILED" {
				t.Fatalf("connector %s FAILED:\n%s", name, st.Connector.Trace)
			}
			for _, tk := range st.Tasks {
				if tk.State == "FAILED" {
					t.Fatalf("connector %s task %d FAILED:\n%s", name, tk.ID, tk.Trace)
				}
			}
			if st.Connector.State == "RUNNING" && len(st.Tasks) == 1 && st.Tasks[0].State == "RUNNING" && db.slotActive(t, slot) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("connector %s not streaming after %v (status %+v, slot %s active=%v)", name, timeout, last, slot, db.slotActive(t, slot))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Offsets returns the source offsets the worker has committed for connector name (GET
// /connectors/{name}/offsets, KIP-875), one per source partition (Debezium PostgreSQL: one,
// {server: <topic.prefix>}).
func (w *connectWorker) Offsets(t *testing.T, name string) []map[string]any {
	t.Helper()
	code, body, err := w.request(http.MethodGet, "/connectors/"+url.PathEscape(name)+"/offsets", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("offsets of connector %s: %d %v %s", name, code, err, body)
	}
	var r struct {
		Offsets []struct {
			Offset map[string]any `json:"offset"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("offsets of connector %s: %s: %v", name, body, err)
	}
	out := make([]map[string]any, 0, len(r.Offsets))
	for _, o := range r.Offsets {
		out = append(out, o.Offset)
	}
	return out
}

// WaitSnapshotCommitted waits until the worker has committed an offset of the Debezium
// connector name that records its snapshot as complete (snapshot_completed=true, or a
// streaming offset, which has no "snapshot" key). Until then a worker killed (SIGKILL:
// no last offset commit; commits are every offset.flush.interval.ms, 1 s) takes the
// snapshot again when it comes back: every row again as op r.
func (w *connectWorker) WaitSnapshotCommitted(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		offs := w.Offsets(t, name)
		for _, o := range offs {
			if _, snap := o["snapshot"]; !snap || o["snapshot_completed"] == true {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("connector %s: no committed offset after its snapshot within %v (offsets %v)", name, timeout, offs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deleteTopics deletes the worker's internal topics (best effort: the broker may be gone).
func (w *connectWorker) deleteTopics() {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(w.brokers, ",")...))
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(cl).DeleteTopics(ctx, w.group+"-configs", w.group+"-offsets", w.group+"-status")
}

// cdcConverter is the key/value converter settings of a connector.
type cdcConverter map[string]string

// avroConverter is Apicurio's Avro converter in the Confluent framing (magic byte 0, 4-byte
// id in the value, no headers) registering under TopicNameStrategy's <topic>-key and
// <topic>-value in the worker's registry: it speaks the registry's own v2 API, and
// use-id=contentId writes the ids that the ccompat API serves.
func (w *connectWorker) avroConverter(t *testing.T) cdcConverter {
	t.Helper()
	u, err := url.Parse(w.registry)
	if err != nil || !strings.HasSuffix(u.Path, "/apis/ccompat/v7") {
		t.Fatalf("registry URL %q: want Apicurio's ccompat root (…/apis/ccompat/v7)", w.registry)
	}
	u.Path = strings.TrimSuffix(u.Path, "/apis/ccompat/v7") + "/apis/registry/v2"
	c := cdcConverter{}
	for _, side := range []string{"key", "value"} {
		p := side + ".converter"
		c[p] = "io.apicurio.registry.utils.converter.AvroConverter"
		c[p+".apicurio.registry.url"] = u.String()
		c[p+".apicurio.registry.auto-register"] = "true"
		c[p+".apicurio.registry.find-latest"] = "true"
		c[p+".apicurio.registry.headers.enabled"] = "false"
		c[p+".apicurio.registry.as-confluent"] = "true"
		c[p+".apicurio.registry.use-id"] = "contentId"
	}
	// Avro names allow no '-' or '.' in a name part; Debezium adjusts them.
	c["schema.name.adjustment.mode"] = "avro"
	c["field.name.adjustment.mode"] = "avro"
	return c
}

// jsonConverter is Connect's JSON converter with the schema embedded in each record
// ({"schema":…,"payload":…}).
func jsonConverter() cdcConverter {
	return cdcConverter{
		"key.converter":                  "org.apache.kafka.connect.json.JsonConverter",
		"key.converter.schemas.enable":   "true",
		"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable": "true",
	}
}

// debeziumConnector is a Debezium PostgreSQL connector config for tables ("public.t") of
// db: pgoutput, its own slot and publication (named after name), topics <prefix>.<schema>.<table>
// created with one partition, an initial snapshot, and a tombstone after each delete.
// extra overrides any setting.
func debeziumConnector(db *pgDB, name, prefix string, tables []string, conv cdcConverter, extra map[string]string) map[string]string {
	c := map[string]string{
		"connector.class":             "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":                   "1",
		"database.hostname":           db.srv.host,
		"database.port":               db.srv.port,
		"database.user":               "postgres",
		"database.password":           "postgres", // trust authentication: unused
		"database.dbname":             db.name,
		"topic.prefix":                prefix,
		"plugin.name":                 "pgoutput",
		"slot.name":                   debeziumSlot(name),
		"publication.name":            debeziumSlot(name) + "_pub",
		"publication.autocreate.mode": "filtered",
		"table.include.list":          strings.Join(tables, ","),
		"snapshot.mode":               "initial",
		"tombstones.on.delete":        "true",
		"topic.creation.default.replication.factor": "1",
		"topic.creation.default.partitions":         "1",
	}
	for k, v := range conv {
		c[k] = v
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// debeziumSlot is the replication slot name debeziumConnector gives connector name
// (lower-case letters, digits and '_' only).
func debeziumSlot(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '_'
	}, name)
}

// readTopicN reads a topic from its start until it has n records or timeout passes
// (fatal), on any broker. The topic may not exist yet.
func readTopicN(t *testing.T, brokers, topic string, n int, timeout time.Duration) []topicRecord {
	t.Helper()
	return readTopicUntil(t, brokers, topic, timeout, func(recs []topicRecord) bool { return len(recs) >= n })
}

// readTopicUntil reads a topic from its start until done(every record so far) or timeout
// passes (fatal), on any broker. The topic may not exist yet.
func readTopicUntil(t *testing.T, brokers, topic string, timeout time.Duration, done func([]topicRecord) bool) []topicRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []topicRecord
	for !done(out) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: not done after %v with %d records", topic, timeout, len(out))
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, topicRecord{partition: r.Partition, offset: r.Offset, key: r.Key, value: r.Value, timestamp: r.Timestamp})
		})
	}
	return out
}

// tailFile is the last n bytes of a file ("" when unreadable).
func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
