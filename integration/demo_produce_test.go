package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// examplePipeline copies the repository's pipeline file configs/<name> into dir with its
// topics and group made unique to this run (the shared broker outlives tests) and a 1 s
// batch age; everything else, the ${VAR} addresses and the security block included, is
// the file the compose services run.
func examplePipeline(t *testing.T, dir, name, topic, dlq string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for old, new := range map[string]string{
		"topics: [orders]":      "topics: [" + topic + "]",
		"topic: orders.dlq":     "topic: " + dlq,
		"max_age: 10s":          "max_age: 1s",
		"group: ingestd-orders": fmt.Sprintf("group: t%d-ingestd-orders", time.Now().UnixNano()),
	} {
		if !strings.Contains(text, old) {
			t.Fatalf("configs/%s has no %q", name, old)
		}
		text = strings.ReplaceAll(text, old, new)
	}
	path := filepath.Join(dir, filepath.Base(name))
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// demoOrders are the orders `ingestd demo produce` writes (cmd/ingestd/demo.go,
// demoOrder): order i+1 for i in [0, v1+v2), v2 records from i = v1 on.
func demoOrders(v1, v2 int) []order {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	out := make([]order, 0, v1+v2)
	for i := range v1 + v2 {
		cents := 1000 + i*37%90000
		o := order{OrderID: int64(i + 1), Customer: fmt.Sprintf("customer-%03d", i%250),
			Amount: fmt.Sprintf("%d.%02d", cents/100, cents%100), CreatedAt: base.Add(time.Duration(i) * time.Minute).UnixMicro(),
			Status: [...]string{"NEW", "PAID", "SHIPPED"}[i%3], Version: "v1"}
		if i >= v1 {
			ch := [...]string{"web", "app", "store"}[i%3]
			o.Channel, o.Version = &ch, "v2"
		}
		out = append(out, o)
	}
	return out
}

// checkDemoRows is checkOrders for the demo's orders, which have no note column.
func checkDemoRows(t *testing.T, table string, d tableData, want []order, withChannel bool) {
	t.Helper()
	if len(d.Rows) != len(want) {
		t.Fatalf("%s has %d rows, want %d", table, len(d.Rows), len(want))
	}
	rows := rowsByID(t, table, d)
	for _, o := range want {
		r, ok := rows[o.OrderID]
		if !ok {
			t.Fatalf("%s: order %d missing", table, o.OrderID)
		}
		if _, has := r["note"]; has {
			t.Fatalf("%s has a note column: not the demo's orders", table)
		}
		r["note"] = nil
		checkRow(t, table, r, o, withChannel)
	}
}

// TestDemoProduceFeedsExamplePipelines is the compose project's data path without
// Docker: `ingestd demo produce --config configs/orders-bronze.yaml --if-empty` (the
// orders-producer service's command) against the real broker and registry, with the
// addresses in KAFKA_BROKERS and SCHEMA_REGISTRY_URL as the compose file sets them; a
// second run leaves the topic alone; `ingestd run` with the three example pipeline files
// consumes it: bronze holds all 360 orders with their exact values (channel NULL for v1),
// silver the 300 v1 orders and its DLQ the 60 v2 records, gold halts at the first v2
// record of each partition with the 300 v1 rows before it.
func TestDemoProduceFeedsExamplePipelines(t *testing.T) {
	s := need(t)
	const nV1, nV2 = 300, 60
	topic := createTopic(t, s, "demo-orders", 3)
	dlq := createTopic(t, s, "demo-orders.dlq", 1)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	for _, f := range []string{"orders-bronze.yaml", "orders-silver.yaml", "orders-gold.yaml"} {
		examplePipeline(t, cfgDir, f, topic, dlq)
	}
	t.Setenv("KAFKA_BROKERS", s.brokers)
	t.Setenv("SCHEMA_REGISTRY_URL", s.registry)
	t.Setenv("INGESTD_DATA", dir)

	produce := func() string {
		t.Helper()
		cmd := exec.Command(ingestdBin(t), "demo", "produce", "--config", filepath.Join(cfgDir, "orders-bronze.yaml"),
			"--v1", fmt.Sprint(nV1), "--v2", fmt.Sprint(nV2), "--if-empty")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("demo produce: %v\n%s", err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	first := produce()
	if want := fmt.Sprintf("produced %d orders to %s: %d with schema v1 (id ", nV1+nV2, topic, nV1); !strings.HasPrefix(first, want) ||
		!strings.HasSuffix(first, "subject "+topic+"-value at "+s.registry) {
		t.Errorf("demo produce printed %q, want %q… ending in the subject and registry", first, want)
	}
	if again, want := produce(), fmt.Sprintf("topic %s already holds %d records: nothing produced (--if-empty)", topic, nV1+nV2); again != want {
		t.Errorf("second demo produce --if-empty printed %q, want %q", again, want)
	}
	if src := readTopic(t, s, topic, nV1+nV2); len(src) != nV1+nV2 {
		t.Fatalf("topic holds %d records, want %d", len(src), nV1+nV2)
	}

	tables := map[string]string{}
	for _, p := range []string{"bronze", "silver", "gold"} {
		tables[p] = filepath.Join(dir, p, "orders")
	}
	d := startDaemon(t, cfgDir)
	var goldHalted []int64
	waitFor(t, d, 3*time.Minute, "bronze and silver to handle 360 records and gold to halt on 3 partitions", func() bool {
		r, _ := d.readyz(t)
		goldHalted = goldHalted[:0]
		for _, p := range r.Pipelines {
			if p.Pipeline == "orders-gold" {
				for _, h := range p.Halted {
					if h.Reason == "schema_mismatch" && h.Field == "channel" {
						goldHalted = append(goldHalted, h.Offset)
					}
				}
			}
		}
		return handled(t, tables["bronze"]) == nV1+nV2 && handled(t, tables["silver"]) == nV1+nV2 && len(goldHalted) == 3
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exit code after SIGTERM = %d, want 0", code)
	}
	orders := demoOrders(nV1, nV2)
	checkDemoRows(t, "bronze", readTable(t, s, tables["bronze"]), orders, true)
	checkDemoRows(t, "silver", readTable(t, s, tables["silver"]), orders[:nV1], false)
	if n := len(readDLQ(t, s, dlq)); n != nV2 {
		t.Errorf("DLQ holds %d records, want %d (the v2 orders silver dead-letters)", n, nV2)
	}
	var beforeHalt int64
	for _, o := range goldHalted {
		beforeHalt += o
	}
	checkDemoRows(t, "gold", readTable(t, s, tables["gold"]), orders[:nV1], false)
	if beforeHalt != nV1 {
		t.Errorf("gold halt offsets sum to %d, want %d (every partition's v1 records come first)", beforeHalt, nV1)
	}
	t.Logf("demo produce → %s: %q; bronze %d rows, silver %d rows + DLQ %d, gold halted at %v", topic, first, nV1+nV2, nV1, nV2, goldHalted)
}

// TestDemoProduceSecured runs the secured variant's pipeline file, configs/secure/
// orders-bronze.yaml, as docker-compose.secure.yml does (KAFKA_BROKERS, KAFKA_TLS_CA_FILE,
// KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD_FILE), against the stack's SASL_SSL listener
// (SCRAM-SHA-512, a private CA, the authorizer on): `demo produce` with that file
// produces the orders over SASL_SSL and `ingestd run` lands all of them, exact values.
func TestDemoProduceSecured(t *testing.T) {
	s := needSecure(t)
	const nV1, nV2 = 120, 30
	topic := createTopic(t, s.stack, "demo-sec-orders", 3)
	dlq := createTopic(t, s.stack, "demo-sec-orders.dlq", 1)
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	file := examplePipeline(t, cfgDir, filepath.Join("secure", "orders-bronze.yaml"), topic, dlq)
	b, _ := os.ReadFile(file)
	group := strings.Fields(strings.SplitN(strings.SplitN(string(b), "group: ", 2)[1], "\n", 2)[0])[0]
	grant(t, s, s.user, s.password, map[string][]kadm.ACLOperation{
		topic: {kadm.OpRead, kadm.OpDescribe, kadm.OpWrite},
		dlq:   {kadm.OpWrite, kadm.OpDescribe, kadm.OpRead},
	}, group)
	t.Setenv("KAFKA_BROKERS", s.saslSSL)
	t.Setenv("KAFKA_TLS_CA_FILE", s.ca)
	t.Setenv("KAFKA_SASL_USERNAME", s.user)
	t.Setenv("KAFKA_SASL_PASSWORD_FILE", s.passwordFile)
	t.Setenv("SCHEMA_REGISTRY_URL", s.registry)
	t.Setenv("INGESTD_DATA", dir)

	// A wrong password is not waited out (--wait): a failed SASL login is not retried.
	wrong := cmdEnv(exec.Command(ingestdBin(t), "demo", "produce", "--config", file, "--if-empty"), "KAFKA_SASL_PASSWORD_FILE="+writeFile(t, filepath.Join(dir, "wrong.pw"), "wrong\n"))
	start := time.Now()
	if out, err := wrong.CombinedOutput(); err == nil || !strings.Contains(string(out), "SASL_AUTHENTICATION_FAILED") || time.Since(start) > 10*time.Second {
		t.Errorf("demo produce with a wrong password: %v after %v, want SASL_AUTHENTICATION_FAILED within 10 s:\n%s", err, time.Since(start), out)
	}
	out, err := exec.Command(ingestdBin(t), "demo", "produce", "--config", file, "--v1", fmt.Sprint(nV1), "--v2", fmt.Sprint(nV2), "--if-empty").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), fmt.Sprintf("produced %d orders to %s:", nV1+nV2, topic)) {
		t.Fatalf("demo produce over SASL_SSL: %v\n%s", err, out)
	}
	noSecret(t, "demo produce output", string(out), s.password)
	d := startDaemon(t, cfgDir)
	table := filepath.Join(dir, "secure", "bronze", "orders")
	waitFor(t, d, 3*time.Minute, "the secured bronze pipeline to handle 150 records", func() bool {
		return handled(t, table) == nV1+nV2
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exit code after SIGTERM = %d, want 0", code)
	}
	checkDemoRows(t, "secure bronze", readTable(t, s.stack, table), demoOrders(nV1, nV2), true)
	t.Logf("demo produce over SASL_SSL %s as %s: %s", s.saslSSL, s.user, strings.TrimSpace(string(out)))
}

// cmdEnv runs cmd with the test's environment plus kv ("NAME=value", last wins).
func cmdEnv(cmd *exec.Cmd, kv ...string) *exec.Cmd {
	cmd.Env = append(os.Environ(), kv...)
	return cmd
}
