package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// pipelineYAMLAt is pipelineYAML for a table URI (s3://…, gs://…, az://…).
func pipelineYAMLAt(name string, s stack, topic, uri, policy, dlq string) string {
	return pipelineYAMLAtBatch(name, s, topic, uri, policy, dlq, "{max_records: 2000, max_bytes: 64MiB, max_age: 1s}")
}

// pipelineYAMLAtBatch is pipelineYAMLAt with the batch bounds given.
func pipelineYAMLAtBatch(name string, s stack, topic, uri, policy, dlq, batch string) string {
	return fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true}
schema: {policy: %s, on_incompatible: halt}
dead_letter: {topic: %s}
batch: %s
`, name, s.brokers, topic, name, time.Now().UnixNano(), s.registry, uri, policy, dlq, batch)
}

// handledAt is handled for a table URI (0 when the table does not exist yet).
func handledAt(t *testing.T, uri string) int64 {
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
		return 0
	}
	var n int64
	for app, v := range snap.Txns {
		if !strings.Contains(app, "-replay-") {
			n += v + 1
		}
	}
	return n
}

// readTableAt reads a table in object storage with delta-rs, given the store's
// storage_options (passed in the environment, never on the command line).
func readTableAt(t *testing.T, s stack, o objectStore, uri string) tableData {
	t.Helper()
	opts, _ := json.Marshal(o.storageOptions)
	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "read_table.py"), uri)
	cmd.Env = append(os.Environ(), "READ_TABLE_STORAGE_OPTIONS="+string(opts))
	if o.kind == "azure" {
		cmd.Env = append(cmd.Env, "AZURITE_BLOB_STORAGE_URL="+strings.TrimSuffix(o.endpoint, "/devstoreaccount1"))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_table.py %s: %v\n%s", uri, err, stderr.String())
	}
	var d tableData
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("parse read_table.py output: %v", err)
	}
	return d
}

// s3aConf is the Hadoop configuration with which Spark reads the S3 emulator through S3A
// (hadoop-aws from scripts/spark-jars.sh): path-style requests to the endpoint, plain HTTP,
// the emulator's static credentials.
func s3aConf(o objectStore) map[string]string {
	return map[string]string{
		"fs.s3a.endpoint":                 o.endpoint,
		"fs.s3a.endpoint.region":          o.storageOptions["aws_region"],
		"fs.s3a.path.style.access":        "true",
		"fs.s3a.connection.ssl.enabled":   "false",
		"fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
		"fs.s3a.access.key":               o.storageOptions["aws_access_key_id"],
		"fs.s3a.secret.key":               o.storageOptions["aws_secret_access_key"],
	}
}

// sparkReadS3A reads the table at an s3:// URI with Spark through S3A (s3a://), as a
// tableData with the schema as Spark reports it ([name, type, nullable]).
func sparkReadS3A(t *testing.T, spark *sparkSession, o objectStore, uri string) tableData {
	t.Helper()
	if !strings.HasPrefix(uri, "s3://") {
		t.Fatalf("sparkReadS3A: %s is not an s3:// URI", uri)
	}
	spark.call(t, map[string]any{"op": "hadoop", "conf": s3aConf(o)}, nil)
	var r sparkRead
	spark.call(t, map[string]any{"op": "read", "path": "s3a://" + strings.TrimPrefix(uri, "s3://")}, &r)
	// Rows as read_table.py's are decoded (numbers as float64), for checkOrders.
	b, _ := json.Marshal(r.Rows)
	var d tableData
	if err := json.Unmarshal(b, &d.Rows); err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Schema {
		d.Schema = append(d.Schema, []any{f.Name, f.Type, f.Nullable})
	}
	return d
}

// TestSeedScenarioObjectStores is the three-policy orders scenario (TestSeedScenario:
// 10,000 v1 + 1,000 v2 orders, bronze/silver/gold) with the tables on each object-store
// emulator: one `ingestd run` with nine pipelines (three per store) on one topic; every
// table read back by delta-rs through the store's own protocol: exact rows, channel NULL
// for v1, silver without v2, gold up to the first v2 offset of each partition. The S3
// tables are read by Spark too, through S3A (hadoop-aws): the same exact rows.
func TestSeedScenarioObjectStores(t *testing.T) {
	s := need(t)
	kinds := []string{"s3", "gcs", "azure"}
	stores := map[string]objectStore{}
	for _, k := range kinds {
		stores[k] = needStore(t, k)
	}
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while the tables are written
	const nV1, nV2 = 10_000, 1_000
	topic := createTopic(t, s, "orders", 3)
	dlq := createTopic(t, s, "orders.dlq", 1)
	orders := produce(t, s, topic, nV1, nV2, 1)
	byID := map[int64]order{}
	for _, o := range orders {
		byID[o.OrderID] = o
	}
	src := readTopic(t, s, topic, nV1+nV2)
	firstV2 := map[int32]int64{}
	for _, r := range src {
		id, _ := strconv.ParseInt(r.key, 10, 64)
		if byID[id].Version == "v2" {
			if o, ok := firstV2[r.partition]; !ok || r.offset < o {
				firstV2[r.partition] = r.offset
			}
		}
	}

	cfgDir := filepath.Join(t.TempDir(), "configs")
	mustMkdir(t, cfgDir)
	uris := map[string]string{} // "<kind>/<layer>" → table URI
	for _, k := range kinds {
		for _, p := range []struct{ layer, policy string }{{"bronze", "evolve"}, {"silver", "dead_letter"}, {"gold", "halt"}} {
			uri := stores[k].base + "/" + p.layer + "/orders"
			uris[k+"/"+p.layer] = uri
			writePipeline(t, cfgDir, k+"-"+p.layer, pipelineYAMLAt("orders-"+k+"-"+p.layer, s, topic, uri, p.policy, dlq))
		}
	}
	d := startDaemon(t, cfgDir)
	goldHalted := func() int {
		r, _ := d.readyz(t)
		n := 0
		for _, p := range r.Pipelines {
			if strings.HasSuffix(p.Pipeline, "-gold") && len(p.Halted) == 3 {
				n++
			}
		}
		return n
	}
	waitFor(t, d, 4*time.Minute, "bronze and silver on every store to handle 11,000 records and gold to halt on 3 partitions", func() bool {
		for _, k := range kinds {
			if handledAt(t, uris[k+"/bronze"]) != nV1+nV2 || handledAt(t, uris[k+"/silver"]) != nV1+nV2 {
				return false
			}
		}
		return goldHalted() == len(kinds)
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exit code after SIGTERM = %d, want 0", code)
	}
	var wantGold int64
	for _, off := range firstV2 {
		wantGold += off
	}
	for _, k := range kinds {
		o := stores[k]
		bronze := readTableAt(t, s, o, uris[k+"/bronze"])
		checkOrders(t, k+" bronze", bronze, orders, true)
		wantSchema := "[[order_id int64 true] [customer string true] [amount decimal128(10, 2) true] [created_at timestamp[us, tz=UTC] true] [status string true] [note string true] [channel string true]]"
		if got := fmt.Sprint(bronze.Schema); got != wantSchema {
			t.Errorf("%s bronze schema (delta-rs)\n got %s\nwant %s", k, got, wantSchema)
		}
		nullChannel := 0
		for _, r := range bronze.Rows {
			if id := int64(r["order_id"].(float64)); byID[id].Version == "v1" && r["channel"] == nil {
				nullChannel++
			}
		}
		if nullChannel != nV1 {
			t.Errorf("%s bronze: %d v1 rows read channel NULL, want %d", k, nullChannel, nV1)
		}
		silver := readTableAt(t, s, o, uris[k+"/silver"])
		var v1 []order
		for _, x := range orders {
			if x.Version == "v1" {
				v1 = append(v1, x)
			}
		}
		checkOrders(t, k+" silver", silver, v1, false)
		gold := readTableAt(t, s, o, uris[k+"/gold"])
		if int64(len(gold.Rows)) != wantGold {
			t.Errorf("%s gold has %d rows, want %d (records before the first v2 offset of each partition)", k, len(gold.Rows), wantGold)
		}
		goldRows := rowsByID(t, k+" gold", gold)
		for _, r := range src {
			id, _ := strconv.ParseInt(r.key, 10, 64)
			if _, in := goldRows[id]; in != (r.offset < firstV2[r.partition]) {
				t.Errorf("%s gold: order %d (p%d@%d) present=%v", k, id, r.partition, r.offset, in)
				break
			}
		}
		t.Logf("%s (%s): bronze %d rows, silver %d, gold %d", k, o.base, len(bronze.Rows), len(silver.Rows), len(gold.Rows))
	}
	// Spark through S3A reads the S3 tables with the same rows.
	{
		o := stores["s3"]
		bronze := sparkReadS3A(t, spark, o, uris["s3/bronze"])
		checkOrders(t, "s3 bronze (Spark S3A)", bronze, orders, true)
		wantSchema := "[[order_id bigint true] [customer string true] [amount decimal(10,2) true] [created_at timestamp true] [status string true] [note string true] [channel string true]]"
		if got := fmt.Sprint(bronze.Schema); got != wantSchema {
			t.Errorf("s3 bronze schema (Spark S3A)\n got %s\nwant %s", got, wantSchema)
		}
		nullChannel := 0
		for _, r := range bronze.Rows {
			if id := int64(r["order_id"].(float64)); byID[id].Version == "v1" && r["channel"] == nil {
				nullChannel++
			}
		}
		if nullChannel != nV1 {
			t.Errorf("s3 bronze (Spark S3A): %d v1 rows read channel NULL, want %d", nullChannel, nV1)
		}
		var v1 []order
		for _, x := range orders {
			if x.Version == "v1" {
				v1 = append(v1, x)
			}
		}
		silver := sparkReadS3A(t, spark, o, uris["s3/silver"])
		checkOrders(t, "s3 silver (Spark S3A)", silver, v1, false)
		gold := sparkReadS3A(t, spark, o, uris["s3/gold"])
		if int64(len(gold.Rows)) != wantGold {
			t.Errorf("s3 gold (Spark S3A) has %d rows, want %d", len(gold.Rows), wantGold)
		}
		t.Logf("Spark S3A (%s): bronze %d rows, silver %d, gold %d", o.base, len(bronze.Rows), len(silver.Rows), len(gold.Rows))
	}
	// One DLQ for the three silver pipelines: each v2 record once per store.
	if recs := readDLQ(t, s, dlq); len(recs) != nV2*len(kinds) {
		t.Errorf("DLQ holds %d records, want %d (1,000 per silver pipeline)", len(recs), nV2*len(kinds))
	}
}
