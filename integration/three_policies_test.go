package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// openTable opens the Delta table at path (which need not exist yet) with deltawriter.
func openTable(t *testing.T, path string) *deltawriter.Table {
	t.Helper()
	st, err := storage.Open("file://" + path)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// txnVersions returns the table's txn versions by appId (empty if the table does not exist).
func txnVersions(t *testing.T, path string) map[string]int64 {
	t.Helper()
	snap, err := openTable(t, path).Snapshot(context.Background())
	if err != nil {
		return map[string]int64{}
	}
	return snap.Txns
}

// handled is the number of source records the pipeline txns account for (the sum of
// version+1 over appIds; replay txns excluded).
func handled(t *testing.T, path string) int64 {
	var n int64
	for app, v := range txnVersions(t, path) {
		if !strings.Contains(app, "-replay-") {
			n += v + 1
		}
	}
	return n
}

// pipelineYAML is one pipeline file; batch "" means the tests' default bounds.
func pipelineYAML(name string, s stack, topic, table, policy, dlq, batch string) string {
	if batch == "" {
		batch = "{max_records: 2000, max_bytes: 64MiB, max_age: 1s}"
	}
	return fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: "file://%s", create: true}
schema: {policy: %s, on_incompatible: halt}
dead_letter: {topic: %s}
batch: %s
`, name, s.brokers, topic, name, time.Now().UnixNano(), s.registry, table, policy, dlq, batch)
}

// sourceRecord is one record of the source topic, read back to learn offsets and bytes.
type sourceRecord struct {
	partition int32
	offset    int64
	schemaID  uint32
	value     []byte
	key       string
}

func readTopic(t *testing.T, s stack, topic string, want int) []sourceRecord {
	t.Helper()
	cl := kafkaClient(t, s, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []sourceRecord
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: got %d of %d records", topic, len(out), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sr := sourceRecord{partition: r.Partition, offset: r.Offset, value: r.Value, key: string(r.Key)}
			if len(r.Value) >= 5 {
				sr.schemaID = binary.BigEndian.Uint32(r.Value[1:5])
			}
			out = append(out, sr)
		})
	}
	return out
}

func checkRow(t *testing.T, table string, got map[string]any, want order, withChannel bool) {
	t.Helper()
	id := want.OrderID
	eq := func(col string, g, w any) {
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s order %d: %s = %v, want %v", table, id, col, g, w)
		}
	}
	eq("customer", got["customer"], want.Customer)
	eq("amount", got["amount"], want.Amount)
	eq("created_at", int64(got["created_at"].(float64)), want.CreatedAt)
	eq("status", got["status"], want.Status)
	if want.Note == nil {
		eq("note", got["note"], nil)
	} else {
		eq("note", got["note"], *want.Note)
	}
	if withChannel {
		if want.Channel == nil {
			eq("channel", got["channel"], nil)
		} else {
			eq("channel", got["channel"], *want.Channel)
		}
	}
}

// checkOrders fails the test unless d holds exactly want: as many rows, each order once
// (rowsByID reports duplicates), every value as produced (checkRow).
func checkOrders(t *testing.T, table string, d tableData, want []order, withChannel bool) {
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
		checkRow(t, table, r, o, withChannel)
	}
}

func rowsByID(t *testing.T, table string, d tableData) map[int64]map[string]any {
	t.Helper()
	m := make(map[int64]map[string]any, len(d.Rows))
	for _, r := range d.Rows {
		id := int64(r["order_id"].(float64))
		if _, dup := m[id]; dup {
			t.Errorf("%s: order %d appears more than once", table, id)
		}
		m[id] = r
	}
	return m
}

// TestSeedScenario is the three-policy orders scenario (the pipelines of
// configs/orders-*.yaml) on the real broker and registry: 10,000 v1 orders then 1,000 v2
// orders (v2 adds a nullable `channel`) into a 3-partition topic, one `ingestd run` with
// three pipelines, stopped by SIGTERM, tables read back with delta-rs. bronze (evolve)
// gains channel and holds all 11,000 orders with their exact values, channel NULL for v1;
// silver (dead_letter) holds exactly the 10,000 v1 orders and its DLQ the 1,000 v2 records
// with their original bytes; gold (halt) halts at the first v2 offset of each partition
// (schema_mismatch at channel), holds exactly the records before it, /readyz answers 503,
// and a restart halts at the same offsets and commits nothing more.
func TestSeedScenario(t *testing.T) {
	s := need(t)
	const nV1, nV2 = 10_000, 1_000
	topic := createTopic(t, s, "orders", 3)
	dlq := createTopic(t, s, "orders.dlq", 1)
	orders := produce(t, s, topic, nV1, nV2, 1)
	byID := map[int64]order{}
	for _, o := range orders {
		byID[o.OrderID] = o
	}
	src := readTopic(t, s, topic, nV1+nV2)
	v2ID := uint32(0)
	for _, r := range src {
		if id, _ := strconv.ParseInt(r.key, 10, 64); byID[id].Version == "v2" {
			v2ID = r.schemaID
		}
	}

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	tables := map[string]string{}
	for _, p := range []struct{ name, policy string }{{"bronze", "evolve"}, {"silver", "dead_letter"}, {"gold", "halt"}} {
		tables[p.name] = filepath.Join(dir, p.name, "orders")
		mustMkdir(t, cfgDir)
		writePipeline(t, cfgDir, p.name, pipelineYAML("orders-"+p.name, s, topic, tables[p.name], p.policy, dlq, ""))
	}
	d := startDaemon(t, cfgDir)
	goldHalted := func() bool {
		r, _ := d.readyz(t)
		for _, p := range r.Pipelines {
			if p.Pipeline == "orders-gold" {
				return len(p.Halted) == 3
			}
		}
		return false
	}
	waitFor(t, d, 3*time.Minute, "bronze and silver to handle 11,000 records and gold to halt on 3 partitions", func() bool {
		return handled(t, tables["bronze"]) == nV1+nV2 && handled(t, tables["silver"]) == nV1+nV2 && goldHalted()
	})
	r, code := d.readyz(t)
	if code != 503 || r.Ready {
		t.Errorf("/readyz with a halted pipeline: status %d ready %v, want 503 false", code, r.Ready)
	}
	if m := d.metrics(t); !containsLine(m, `ingestd_pipeline_halted{pipeline="orders-gold"} 1`) ||
		!containsLine(m, `ingestd_records_dead_lettered_total{pipeline="orders-silver",reason="schema_mismatch"} 1000`) {
		t.Errorf("metrics lack the halt gauge or the dead-letter count:\n%s", grepLines(m, "ingestd_pipeline_halted", "dead_lettered"))
	}
	firstV2 := map[int32]int64{} // partition → first v2 offset
	for _, p := range r.Pipelines {
		if p.Pipeline != "orders-gold" {
			continue
		}
		for _, h := range p.Halted {
			if h.Reason != "schema_mismatch" || h.Field != "channel" {
				t.Errorf("gold halted on %s[%d]@%d with reason %q field %q, want schema_mismatch channel", h.Topic, h.Partition, h.Offset, h.Reason, h.Field)
			}
			firstV2[h.Partition] = h.Offset
		}
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exit code after SIGTERM = %d, want 0", code)
	}

	// The first v2 offset of each partition, from the topic itself.
	wantFirst := map[int32]int64{}
	for _, r := range src {
		if r.schemaID == v2ID {
			if o, ok := wantFirst[r.partition]; !ok || r.offset < o {
				wantFirst[r.partition] = r.offset
			}
		}
	}
	if fmt.Sprint(firstV2) != fmt.Sprint(wantFirst) {
		t.Errorf("gold halted at %v, want the first v2 offset of each partition %v", firstV2, wantFirst)
	}

	// bronze: 11,000 rows with exact values; channel NULL for v1 rows.
	bronze := readTable(t, s, tables["bronze"])
	if len(bronze.Rows) != nV1+nV2 {
		t.Errorf("bronze has %d rows, want %d", len(bronze.Rows), nV1+nV2)
	}
	wantSchema := "[[order_id int64 true] [customer string true] [amount decimal128(10, 2) true] [created_at timestamp[us, tz=UTC] true] [status string true] [note string true] [channel string true]]"
	if got := fmt.Sprint(bronze.Schema); got != wantSchema {
		t.Errorf("bronze schema (delta-rs)\n got %s\nwant %s", got, wantSchema)
	}
	for id, row := range rowsByID(t, "bronze", bronze) {
		o, ok := byID[id]
		if !ok {
			t.Fatalf("bronze has unknown order %d", id)
		}
		checkRow(t, "bronze", row, o, true)
	}

	// silver: exactly the v1 rows; the DLQ holds the 1,000 v2 records, original bytes.
	silver := readTable(t, s, tables["silver"])
	silverRows := rowsByID(t, "silver", silver)
	if len(silver.Rows) != nV1 {
		t.Errorf("silver has %d rows, want %d", len(silver.Rows), nV1)
	}
	for id, row := range silverRows {
		if byID[id].Version != "v1" {
			t.Errorf("silver has v2 order %d", id)
		}
		checkRow(t, "silver", row, byID[id], false)
	}
	if len(silver.Schema) != 6 {
		t.Errorf("silver schema has %d columns, want the 6 of v1: %v", len(silver.Schema), silver.Schema)
	}
	checkDLQ(t, s, dlq, topic, src, v2ID, nV2)

	// gold: exactly the records before the first v2 offset of each partition.
	gold := readTable(t, s, tables["gold"])
	var wantGold int64
	for _, off := range wantFirst {
		wantGold += off
	}
	if int64(len(gold.Rows)) != wantGold {
		t.Errorf("gold has %d rows, want %d (records before the first v2 offset of each partition)", len(gold.Rows), wantGold)
	}
	goldRows := rowsByID(t, "gold", gold)
	for _, r := range src {
		id, _ := strconv.ParseInt(r.key, 10, 64)
		_, in := goldRows[id]
		if want := r.offset < wantFirst[r.partition]; in != want {
			t.Errorf("gold: order %d (p%d@%d) present=%v, want %v", id, r.partition, r.offset, in, want)
			break
		}
	}

	t.Logf("real broker %s, registry %s: bronze %d rows (%d columns), silver %d rows, DLQ checked, gold %d rows, halted at %v",
		s.brokers, s.registry, len(bronze.Rows), len(bronze.Schema), len(silver.Rows), len(gold.Rows), firstV2)

	// Restarting gold alone halts at the same offsets and commits nothing more.
	goldDir := filepath.Join(dir, "gold-only")
	mustMkdir(t, goldDir)
	writePipeline(t, goldDir, "gold", pipelineYAML("orders-gold", s, topic, tables["gold"], "halt", dlq, ""))
	before := txnVersions(t, tables["gold"])
	d2 := startDaemon(t, goldDir)
	waitFor(t, d2, 2*time.Minute, "gold to halt again after restart", func() bool {
		r, _ := d2.readyz(t)
		return len(r.Pipelines) == 1 && len(r.Pipelines[0].Halted) == 3
	})
	r2, _ := d2.readyz(t)
	again := map[int32]int64{}
	for _, h := range r2.Pipelines[0].Halted {
		again[h.Partition] = h.Offset
	}
	if fmt.Sprint(again) != fmt.Sprint(wantFirst) {
		t.Errorf("gold after restart halted at %v, want %v", again, wantFirst)
	}
	if code := d2.stop(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	if after := txnVersions(t, tables["gold"]); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("gold txn versions moved after the restart: %v → %v", before, after)
	}
}

func checkDLQ(t *testing.T, s stack, dlq, topic string, src []sourceRecord, v2ID uint32, want int) {
	t.Helper()
	recs := readDLQ(t, s, dlq)
	if len(recs) != want {
		t.Errorf("DLQ %s holds %d records, want %d", dlq, len(recs), want)
	}
	bySrc := map[string]sourceRecord{}
	for _, r := range src {
		bySrc[fmt.Sprintf("%d/%d", r.partition, r.offset)] = r
	}
	seen := map[string]bool{}
	for _, r := range recs {
		h := r.headers
		key := h["__connect.errors.partition"] + "/" + h["__connect.errors.offset"]
		orig, ok := bySrc[key]
		switch {
		case h["ingestd.error.reason"] != "schema_mismatch" || h["ingestd.error.field"] != "channel":
			t.Errorf("DLQ record for %s: reason %q field %q", key, h["ingestd.error.reason"], h["ingestd.error.field"])
		case h["__connect.errors.topic"] != topic || !ok:
			t.Errorf("DLQ record names source %s %s, not a record of %s", h["__connect.errors.topic"], key, topic)
		case string(orig.value) != string(r.value) || orig.key != string(r.key):
			t.Errorf("DLQ record for %s: bytes differ from the source record", key)
		case orig.schemaID != v2ID:
			t.Errorf("DLQ holds %s with schema id %d, want only v2 (%d)", key, orig.schemaID, v2ID)
		case h["ingestd.error.schema_id"] != strconv.Itoa(int(v2ID)) || h["ingestd.replay.count"] != "0" || h["__connect.errors.exception.message"] == "":
			t.Errorf("DLQ record for %s: headers %v", key, h)
		}
		if seen[key] {
			t.Errorf("DLQ holds %s twice", key)
		}
		seen[key] = true
	}
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func grepLines(text string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, s := range subs {
			if !strings.HasPrefix(l, "#") && strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}
