package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

const seedConsAvsc = `{"type":"record","name":"Order","namespace":"seed.cons","fields":[
 {"name":"order_id","type":"long"},
 {"name":"customer","type":"string"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}}]}`

type seedConsOrder struct {
	OrderID  int64    `avro:"order_id"`
	Customer string   `avro:"customer"`
	Amount   *big.Rat `avro:"amount"`
}

// seedConsProducer registers the seed orders schema in the registry and produces
// Confluent-framed orders to partition 0 of topic; amount is cents.
type seedConsProducer struct {
	t     *testing.T
	cl    *kgo.Client
	sch   avro.Schema
	id    int
	topic string
}

func newSeedConsProducer(t *testing.T, s stack, topic string) *seedConsProducer {
	rc, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := rc.CreateSchema(context.Background(), topic+"-value", sr.Schema{Schema: seedConsAvsc})
	if err != nil {
		t.Fatalf("register the orders schema: %v", err)
	}
	return &seedConsProducer{t: t, cl: kafkaClient(t, s), sch: avro.MustParse(seedConsAvsc), id: ss.ID, topic: topic}
}

func (p *seedConsProducer) produce(cents map[int64]int64, ids ...int64) {
	p.t.Helper()
	var recs []*kgo.Record
	for _, id := range ids {
		body, err := avro.Marshal(p.sch, seedConsOrder{OrderID: id, Customer: fmt.Sprintf("c-%d", id%17), Amount: big.NewRat(cents[id], 100)})
		if err != nil {
			p.t.Fatal(err)
		}
		var h sr.ConfluentHeader
		v, err := h.AppendEncode(nil, p.id, nil)
		if err != nil {
			p.t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: p.topic, Partition: 0, Value: append(v, body...)})
	}
	if err := p.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		p.t.Fatal(err)
	}
}

func idRange(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// tableAlter runs `ingestd table alter --table path args…` and returns its output.
func tableAlter(t *testing.T, path string, args ...string) (string, error) {
	t.Helper()
	return runCLI(t, append([]string{"table", "alter", "--table", path}, args...)...)
}

// commitJSON returns the actions of commit version of a table, by action name.
func commitJSON(t *testing.T, path string, version int) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(path, "_delta_log", fmt.Sprintf("%020d.json", version)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a map[string]map[string]any
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("commit %d: %v", version, err)
		}
		for k, v := range a {
			out[k] = v
		}
	}
	return out
}

// constraintsSeed is the CHECK constraint workflow: CHECK (amount >= 0) added with ingestd
// under running silver (dead_letter) and gold (halt) pipelines, 1,000 good orders and one
// negative; Spark's insert of a negative row is refused; Spark adds a constraint under
// the running pipeline; after the constraint is dropped, replay lands the negative order
// exactly once.
func constraintsSeed(t *testing.T, spark *sparkSession) {
	s := need(t)
	dir := t.TempDir()
	topic := createTopic(t, s, "cons-seed", 1)
	p := newSeedConsProducer(t, s, topic)
	cents := map[int64]int64{}
	for id := int64(0); id <= 3000; id++ {
		cents[id] = 100 + id
	}
	cents[501] = -500 // the negative order, at offset 501
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	silver, gold := filepath.Join(dir, "silver"), filepath.Join(dir, "gold")
	dlqs := map[string]string{"silver": createTopic(t, s, "cons-silver.dlq", 1), "gold": createTopic(t, s, "cons-gold.dlq", 1)}
	batch := "{max_records: 5000, max_bytes: 64MiB, max_age: 1s}"
	writePipeline(t, cfgDir, "silver", pipelineYAML("cons-silver", s, topic, silver, "dead_letter", dlqs["silver"], batch))
	writePipeline(t, cfgDir, "gold", pipelineYAML("cons-gold", s, topic, gold, "halt", dlqs["gold"], batch))
	p.produce(cents, 0)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 60*time.Second, "both tables to be created with order 0", func() bool {
		return handled(t, silver) == 1 && handled(t, gold) == 1
	})
	// ingestd adds the constraint under the running pipelines.
	for _, tbl := range []string{silver, gold} {
		out, err := tableAlter(t, tbl, "--add-constraint", "amount_pos CHECK (amount >= 0)")
		if err != nil || !strings.Contains(out, "ADD CONSTRAINT amount_pos CHECK (amount >= 0)") {
			t.Fatalf("table alter --add-constraint on %s: %v\n%s", tbl, err, out)
		}
	}
	p.produce(cents, idRange(1, 1001)...) // offsets 1–1001: 1,000 good orders and order 501
	var haltedAt int64 = -1
	waitFor(t, d, 60*time.Second, "silver to handle 1,002 records and gold to halt", func() bool {
		r, _ := d.readyz(t)
		for _, x := range r.Pipelines {
			if x.Pipeline == "cons-gold" && len(x.Halted) > 0 {
				haltedAt = x.Halted[0].Offset
			}
		}
		return haltedAt >= 0 && handled(t, silver) == 1002
	})
	if haltedAt != 501 {
		t.Errorf("gold halted at offset %d, want 501 (the negative order)", haltedAt)
	}
	// Spark adds a constraint under the running silver pipeline: the next commit checks it.
	spark.call(t, map[string]any{"op": "sql", "query": "ALTER TABLE delta.`" + silver + "` ADD CONSTRAINT id_max CHECK (order_id < 2000)"}, nil)
	p.produce(cents, 1500, 2500) // offsets 1002, 1003
	waitFor(t, d, 60*time.Second, "silver to handle the records after Spark's constraint", func() bool { return handled(t, silver) == 1004 })
	d.stop(t)

	wantIDs := func(extra ...int64) string {
		all := slices.DeleteFunc(idRange(0, 1001), func(i int64) bool { return i == 501 })
		return fmt.Sprint(append(all, extra...))
	}
	tableIDs := func(path string) string {
		var got []int64
		for _, r := range readTable(t, s, path).Rows {
			var id int64
			fmt.Sscan(fmt.Sprint(r["order_id"]), &id)
			got = append(got, id)
		}
		slices.Sort(got)
		return fmt.Sprint(got)
	}
	if got := tableIDs(silver); got != wantIDs(1500) {
		t.Errorf("silver (delta-rs): ids %.200s…, want 0–1001 without 501, and 1500", got)
	}
	if got := tableIDs(gold); got != fmt.Sprint(idRange(0, 500)) {
		t.Errorf("gold (delta-rs): ids %.200s…, want 0–500", got)
	}
	dl := readDLQ(t, s, dlqs["silver"])
	want := map[string][2]string{"501": {"amount_pos", "amount >= 0"}, "1003": {"id_max", "order_id < 2000"}}
	for _, r := range dl {
		w := want[r.headers["__connect.errors.offset"]]
		if r.headers["ingestd.error.reason"] != "check_violation" || r.headers["ingestd.error.constraint"] != w[0] || r.headers["ingestd.error.constraint."+w[0]] != w[1] {
			t.Errorf("silver dead letter at offset %s: %v", r.headers["__connect.errors.offset"], r.headers)
		}
	}
	if len(dl) != 2 {
		t.Errorf("silver: %d dead letters, want 2 (offsets 501 and 1003)", len(dl))
	}

	// The constraint is real to Spark: its own insert of a negative row is refused.
	if err := sparkTry(t, spark, "INSERT INTO delta.`"+silver+"` VALUES (9999, 'c-x', -1.00)"); err == nil || !strings.Contains(err.Error(), "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES") {
		t.Errorf("Spark's insert of a negative amount: %v, want DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", err)
	}
	// ingestd's ADD CONSTRAINT commit is shaped like Spark's (same operation, parameters
	// and protocol); DESCRIBE HISTORY shows it.
	var hist []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "DESCRIBE HISTORY delta.`" + silver + "`"}, &hist)
	slices.Reverse(hist) // oldest first
	var ops []string
	ours, theirs := -1, -1
	for i, h := range hist {
		params, _ := h["operationParameters"].(map[string]any)
		ops = append(ops, fmt.Sprintf("%v %v %v", h["version"], h["operation"], params))
		if h["operation"] == "ADD CONSTRAINT" {
			if params["name"] == "amount_pos" && params["expr"] == "amount >= 0" {
				ours = i
			} else if params["name"] == "id_max" {
				theirs = i
			}
		}
	}
	t.Logf("silver's history (Spark):\n%s", strings.Join(ops, "\n"))
	if ours < 0 || theirs < 0 || len(hist) != 5 {
		t.Errorf("DESCRIBE HISTORY: want CREATE/WRITE, ingestd's ADD CONSTRAINT {name: amount_pos, expr: amount >= 0}, WRITE, Spark's ADD CONSTRAINT, WRITE; got %v", ops)
	} else {
		version := func(i int) int { v, _ := strconv.Atoi(fmt.Sprint(hist[i]["version"])); return v }
		o, sp := commitJSON(t, silver, version(ours)), commitJSON(t, silver, version(theirs))
		t.Logf("ingestd's ADD CONSTRAINT commit: protocol %v commitInfo %v; Spark's: protocol %v commitInfo %v", o["protocol"], o["commitInfo"], sp["protocol"], sp["commitInfo"])
		op, sop := o["commitInfo"]["operationParameters"], sp["commitInfo"]["operationParameters"]
		if fmt.Sprint(keysOf(op)) != fmt.Sprint(keysOf(sop)) || o["metaData"] == nil || sp["metaData"] == nil {
			t.Errorf("ingestd's ADD CONSTRAINT parameters %v, Spark's %v: want the same keys, both with metaData", op, sop)
		}
	}

	// Replay: after the constraint is dropped, the negative order lands, exactly once;
	// order 2500 still violates id_max and stays dead-lettered.
	if out, err := tableAlter(t, silver, "--drop-constraint", "amount_pos"); err != nil || !strings.Contains(out, "DROP CONSTRAINT amount_pos") {
		t.Fatalf("table alter --drop-constraint: %v\n%s", err, out)
	}
	cfg := filepath.Join(cfgDir, "silver.yaml")
	r1 := replay(t, cfg)
	if r1.Landed != 1 || r1.DeadLettered["check_violation"] != 1 {
		t.Errorf("first replay: %+v, want 1 landed and 1 check_violation dead-lettered again", r1)
	}
	r2 := replay(t, cfg)
	if r2.Landed != 0 {
		t.Errorf("second replay landed %d, want 0 (exactly once)", r2.Landed)
	}
	if got := tableIDs(silver); got != strings.Replace(wantIDs(1500), "500 502", "500 501 502", 1) {
		t.Errorf("silver after replay: ids %.300s…, want 0–1001 and 1500", got)
	}
}

func keysOf(v any) []string {
	m, _ := v.(map[string]any)
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
