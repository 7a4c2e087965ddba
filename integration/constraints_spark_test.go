package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/decode"
)

// c41Constraints are c41's CHECK constraints: the name, the expression as added with
// Spark's ALTER TABLE … ADD CONSTRAINT, and the text Spark stores in
// delta.constraints.<name> (its parser's tokens joined by spaces). ops.amount.max is a
// name with dots after the delta.constraints. prefix, never split on them.
var c41Constraints = [][3]string{
	{"amount_pos", "amount >= 0", "amount >= 0"},
	{"status_known", "status IN ('NEW', 'PAID', 'SHIPPED')", "status IN ( 'NEW' , 'PAID' , 'SHIPPED' )"},
	{"price_positive", "`unit price` > 0", "`unit price` > 0"},
	{"note_short", "length(note) <= 5", "length ( note ) <= 5"},
	{"line_total_ok", "amount * qty = line_total", "amount * qty = line_total"},
	{"ops.amount.max", "amount < 1000000", "amount < 1000000"},
}

// c41Order is one record of c41 (raw Avro: the registry refuses the name "unit price", so
// the pipelines read unframed Avro with avro_schema_file). Nil pointers are NULL.
type c41Order struct {
	OrderID   int64    `avro:"order_id"`
	Amount    *big.Rat `avro:"amount"`
	Qty       int32    `avro:"qty"`
	LineTotal *big.Rat `avro:"line_total"`
	Status    *string  `avro:"status"`
	UnitPrice float64  `avro:"unit price"`
	Note      *string  `avro:"note"`
}

const c41Avsc = `{"type":"record","name":"Order","fields":[
 {"name":"order_id","type":"long"},
 {"name":"amount","type":["null",{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}],"default":null},
 {"name":"qty","type":"int"},
 {"name":"line_total","type":["null",{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}],"default":null},
 {"name":"status","type":["null","string"],"default":null},
 {"name":"unit price","type":"double"},
 {"name":"note","type":["null","string"],"default":null}]}`

func strp(s string) *string { return &s }

// c41Rows are r1–r12, ids 1001–1012: the valid row (amount 1.00, qty 1, line_total 1.00,
// status 'NEW', unit price 2.5, note 'ok') with one change each, the constraints each
// violates (in name order; "" for none) and its Spark INSERT values.
func c41Rows() []struct {
	rec     c41Order
	violate string
	sql     string
} {
	valid := func(id int64) c41Order {
		return c41Order{OrderID: id, Amount: big.NewRat(1, 1), Qty: 1, LineTotal: big.NewRat(1, 1), Status: strp("NEW"), UnitPrice: 2.5, Note: strp("ok")}
	}
	type row = struct {
		rec     c41Order
		violate string
		sql     string
	}
	var out []row
	add := func(change func(*c41Order), violate, sql string) {
		o := valid(int64(1001 + len(out)))
		change(&o)
		out = append(out, row{o, violate, fmt.Sprintf("(%d, %s)", o.OrderID, sql)})
	}
	add(func(o *c41Order) { o.Amount, o.LineTotal = nil, nil }, "amount_pos, line_total_ok, ops.amount.max", "NULL, 1, NULL, 'NEW', 2.5D, 'ok'")
	add(func(o *c41Order) { o.Amount, o.LineTotal = big.NewRat(-1, 100), big.NewRat(-1, 100) }, "amount_pos", "-0.01, 1, -0.01, 'NEW', 2.5D, 'ok'")
	add(func(o *c41Order) { o.Status = strp("new") }, "status_known", "1.00, 1, 1.00, 'new', 2.5D, 'ok'")
	add(func(o *c41Order) { o.Status = nil }, "status_known", "1.00, 1, 1.00, NULL, 2.5D, 'ok'")
	add(func(o *c41Order) { o.Note = strp("Zoë!!") }, "", "1.00, 1, 1.00, 'NEW', 2.5D, 'Zoë!!'")
	add(func(o *c41Order) { o.Note = strp("Zoë!!!") }, "note_short", "1.00, 1, 1.00, 'NEW', 2.5D, 'Zoë!!!'")
	add(func(o *c41Order) { o.Note = nil }, "note_short", "1.00, 1, 1.00, 'NEW', 2.5D, NULL")
	add(func(o *c41Order) { o.Amount, o.Qty, o.LineTotal = big.NewRat(10, 100), 3, big.NewRat(30, 100) }, "", "0.10, 3, 0.30, 'NEW', 2.5D, 'ok'")
	add(func(o *c41Order) { o.Amount, o.Qty, o.LineTotal = big.NewRat(10, 100), 3, big.NewRat(31, 100) }, "line_total_ok", "0.10, 3, 0.31, 'NEW', 2.5D, 'ok'")
	add(func(o *c41Order) { o.UnitPrice = 0 }, "price_positive", "1.00, 1, 1.00, 'NEW', 0.0D, 'ok'")
	add(func(o *c41Order) { o.UnitPrice = math.NaN() }, "", "1.00, 1, 1.00, 'NEW', CAST('NaN' AS DOUBLE), 'ok'")
	add(func(o *c41Order) { o.Amount, o.LineTotal = big.NewRat(1000000, 1), big.NewRat(1000000, 1) }, "ops.amount.max", "1000000.00, 1, 1000000.00, 'NEW', 2.5D, 'ok'")
	return out
}

// produceC41 writes the 1,000 valid records (ids 1–1000, offsets 0–999) and r1–r12
// (offsets 1000–1011) as raw Avro to partition 0 of topic.
func produceC41(t *testing.T, s stack, topic string) {
	t.Helper()
	// Parsed as ingestd's decoder parses it, where "unit price" is a valid name.
	ws, err := decode.ParseWriterSchema(0, c41Avsc)
	if err != nil {
		t.Fatal(err)
	}
	sch := ws.Avro
	var recs []*kgo.Record
	enc := func(o c41Order) {
		b, err := avro.Marshal(sch, o)
		if err != nil {
			t.Fatalf("encode order %d: %v", o.OrderID, err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: b})
	}
	for id := int64(1); id <= 1000; id++ {
		enc(c41Order{OrderID: id, Amount: big.NewRat(1, 1), Qty: 1, LineTotal: big.NewRat(1, 1), Status: strp("NEW"), UnitPrice: 2.5, Note: strp("ok")})
	}
	for _, r := range c41Rows() {
		enc(r.rec)
	}
	cl := kafkaClient(t, s)
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// sparkTry runs one SQL statement and returns Spark's error (a *sparkError), if any; a
// Spark helper that is gone fails t.
func sparkTry(t *testing.T, spark *sparkSession, query string) error {
	t.Helper()
	return spark.try(t, map[string]any{"op": "sql", "query": query}, nil)
}

// createC41Table creates c41's table with Spark (column mapping name) and adds the
// constraints with ALTER TABLE … ADD CONSTRAINT (extra: more, e.g. one outside the subset).
func createC41Table(t *testing.T, spark *sparkSession, path string, cons [][3]string) {
	spark.call(t, map[string]any{"op": "sql", "query": "CREATE TABLE delta.`" + path + "` (order_id BIGINT, amount DECIMAL(10,2), qty INT, " +
		"line_total DECIMAL(10,2), status STRING, `unit price` DOUBLE, note STRING) USING DELTA TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"}, nil)
	for _, c := range cons {
		spark.call(t, map[string]any{"op": "sql", "query": "ALTER TABLE delta.`" + path + "` ADD CONSTRAINT `" + c[0] + "` CHECK (" + c[1] + ")"}, nil)
	}
}

// copyTable copies a table directory (a fresh table with the same log).
func copyTable(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-r", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
}

// logVersions returns the operation of every commit of a table, by version.
func logOperations(t *testing.T, path string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(path, "_delta_log", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var ops []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		op, adds := "", 0
		for _, l := range strings.Split(string(b), "\n") {
			var a struct {
				CommitInfo *struct {
					Operation string `json:"operation"`
				} `json:"commitInfo"`
				Add *struct{} `json:"add"`
			}
			if json.Unmarshal([]byte(l), &a) == nil {
				if a.CommitInfo != nil {
					op = a.CommitInfo.Operation
				}
				if a.Add != nil {
					adds++
				}
			}
		}
		ops = append(ops, fmt.Sprintf("%s adds=%d", op, adds))
	}
	return ops
}

// c41 is CHECK constraints per record, judged by Spark's rules. Delta Spark rejects a row
// whose CHECK expression is NULL (delta-io/delta#1714 argues with it); delta-rs rejected a
// NULL in a nullable column under such a check and kept that on purpose
// (delta-io/delta-rs#4183); engines also failed on names with spaces and on decimals.
// Spark creates orders(order_id bigint, amount decimal(10,2), qty int, line_total
// decimal(10,2), status string, `unit price` double, note string) with column mapping name
// and the constraints of c41Constraints; copies of it are written by a dead_letter, a halt
// and an evolve (on_incompatible: dead_letter) pipeline, and a fourth copy also has a
// constraint outside the evaluator's subset, regexp_like(status, '^[A-Z]+$'). The records
// are 1,000 valid orders (ids 1–1000), then r1–r12 of c41Rows. Expected:
//   - a NULL result is a violation: r1 (amount NULL: amount_pos, line_total_ok,
//     ops.amount.max), r4 (status NULL) and r7 (note NULL);
//   - decimal arithmetic is exact (r8: 0.10 × 3 = 0.30 passes, r9's 0.31 fails), string
//     comparison is case-sensitive (r3 'new' fails), length counts characters (r5 'Zoë!!'
//     passes, r6 'Zoë!!!' fails), NaN is greater than every other value (r11 passes, r10's
//     0.0 fails), r12's 1000000.00 fails ops.amount.max and r2's −0.01 amount_pos;
//   - dead_letter and evolve land the 1,000 valid rows and r5, r8, r11 in one commit and
//     dead-letter each other record as check_violation, its headers naming every
//     constraint it violates with its expression; halt stops at r1 (offset 1000);
//   - the regexp_like table is refused at start-up, naming the constraint and the
//     function, and gets no commit;
//   - Spark's own INSERT of r1–r12, one at a time, fails exactly for the rows ingestd
//     rejects.
func c41(t *testing.T, spark *sparkSession) {
	s := need(t)
	dir := t.TempDir()
	t0 := time.Now()
	tmpl := filepath.Join(dir, "template")
	createC41Table(t, spark, tmpl, c41Constraints)
	var props []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "SHOW TBLPROPERTIES delta.`" + tmpl + "`"}, &props)
	stored := map[string]string{}
	for _, p := range props {
		if k, _ := p["key"].(string); strings.HasPrefix(k, "delta.constraints.") {
			stored[strings.TrimPrefix(k, "delta.constraints.")] = fmt.Sprint(p["value"])
		}
	}
	t.Logf("Spark stored the constraints as %v", stored)
	for _, c := range c41Constraints {
		if stored[c[0]] != c[2] {
			t.Errorf("Spark stored delta.constraints.%s = %q, want %q", c[0], stored[c[0]], c[2])
		}
	}
	policies := []string{"dead_letter", "halt", "evolve"}
	for _, p := range append(policies, "spark") {
		copyTable(t, tmpl, filepath.Join(dir, p))
	}
	regex := filepath.Join(dir, "regex")
	copyTable(t, tmpl, regex)
	spark.call(t, map[string]any{"op": "sql", "query": "ALTER TABLE delta.`" + regex + "` ADD CONSTRAINT status_upper CHECK (regexp_like(status, '^[A-Z]+$'))"}, nil)
	setup := len(logOperations(t, tmpl))
	t.Logf("tables set up by Spark in %v", time.Since(t0).Round(100*time.Millisecond))

	topic := createTopic(t, s, "c41", 1)
	produceC41(t, s, topic)
	avsc := filepath.Join(dir, "order.avsc")
	if err := os.WriteFile(avsc, []byte(c41Avsc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	batch := "{max_records: 2000, max_bytes: 64MiB, max_age: 2s}"
	dlqs := map[string]string{}
	for _, p := range append(policies, "regex") {
		dlqs[p] = createTopic(t, s, "c41-"+strings.ReplaceAll(p, "_", "-")+".dlq", 1)
		table, policy := filepath.Join(dir, p), p
		if p == "regex" {
			table, policy = regex, "dead_letter"
		}
		y := pipelineYAML("c41-"+strings.ReplaceAll(p, "_", "-"), s, topic, table, policy, dlqs[p], batch)
		y = strings.Replace(y, fmt.Sprintf("schema_registry: {url: %q}", s.registry), fmt.Sprintf("avro_schema_file: %q", avsc), 1)
		y = strings.Replace(y, ", create: true}", ", create: false}", 1)
		if p == "evolve" {
			y = strings.Replace(y, "on_incompatible: halt}", "on_incompatible: dead_letter}", 1)
		}
		writePipeline(t, cfgDir, p, y)
	}
	start := time.Now()
	d := startDaemon(t, cfgDir)
	var haltedAt int64 = -1
	haltReason, regexErr := "", ""
	waitFor(t, d, 90*time.Second, "the c41 pipelines to handle their records, halt or fail", func() bool {
		r, _ := d.readyz(t)
		for _, p := range r.Pipelines {
			if p.Pipeline == "c41-halt" && len(p.Halted) > 0 {
				haltedAt, haltReason = p.Halted[0].Offset, p.Halted[0].Reason
			}
			if p.Pipeline == "c41-regex" && p.Error != "" {
				regexErr = p.Error
			}
		}
		return haltedAt >= 0 && regexErr != "" && handled(t, filepath.Join(dir, "dead_letter")) == 1012 && handled(t, filepath.Join(dir, "evolve")) == 1012
	})
	t.Logf("c41 pipelines done in %v", time.Since(start).Round(100*time.Millisecond))
	d.stop(t)

	if haltedAt != 1000 || haltReason != "check_violation" {
		t.Errorf("halt pipeline halted at offset %d (%s), want 1000 (r1, check_violation)", haltedAt, haltReason)
	}
	wantRefusal := `check CHECK constraint "status_upper" (regexp_like ( status , '^[A-Z]+$' )) (feature checkConstraints): bind expression "regexp_like ( status , '^[A-Z]+$' )": ` +
		"function regexp_like in regexp_like(`status`, '^[A-Z]+$'): not supported by ingestd's expression evaluator"
	if !strings.Contains(regexErr, wantRefusal) {
		t.Errorf("the regexp_like table: error %q, want one containing %q", regexErr, wantRefusal)
	}
	if ops := logOperations(t, regex); len(ops) != setup+1 {
		t.Errorf("the refused table has commits %v after the refusal, want none past version %d", ops, setup)
	}

	rows := c41Rows()
	wantIDs := []int64{}
	for id := int64(1); id <= 1000; id++ {
		wantIDs = append(wantIDs, id)
	}
	wantDLQ := map[int64]string{}
	for i, r := range rows {
		if r.violate == "" {
			wantIDs = append(wantIDs, r.rec.OrderID)
		} else {
			wantDLQ[int64(1000+i)] = r.violate
		}
	}
	exprOf := map[string]string{}
	for _, c := range c41Constraints {
		exprOf[c[0]] = c[2]
	}
	for _, p := range []string{"dead_letter", "evolve"} {
		path := filepath.Join(dir, p)
		// one commit past the setup holds every landed row: 1,000 valid rows and r5, r8, r11
		ops := logOperations(t, path)
		if len(ops) != setup+1 || ops[setup] != "WRITE adds=1" {
			t.Errorf("%s: commits %v, want exactly one WRITE with one file after the %d setup commits", p, ops, setup)
		}
		got := readTable(t, s, path)
		ids := []int64{}
		for _, r := range got.Rows {
			if fmt.Sprint(r["order_id"]) == "1011" && r["unit price"] != "NaN" {
				t.Errorf("%s (delta-rs): r11's unit price %v, want NaN", p, r["unit price"])
			}
			var id int64
			fmt.Sscan(fmt.Sprint(r["order_id"]), &id)
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
			t.Errorf("%s (delta-rs): %d rows, want 1,003 (ids 1–1000, 1005, 1008, 1011)", p, len(ids))
		}
		var agg []map[string]any
		spark.call(t, map[string]any{"op": "sql", "query": "SELECT count(*) AS n, CAST(sum(line_total) AS STRING) AS total, " +
			"max(CASE WHEN order_id = 1008 THEN CAST(line_total AS STRING) END) AS r8, max(CASE WHEN order_id = 1011 THEN isnan(`unit price`) END) AS r11 FROM delta.`" + path + "`"}, &agg)
		if len(agg) != 1 || fmt.Sprint(agg[0]["n"]) != "1003" || agg[0]["total"] != "1002.30" || agg[0]["r8"] != "0.30" || agg[0]["r11"] != true {
			t.Errorf("%s (Spark): %v, want 1003 rows, sum(line_total) 1002.30, r8's 0.30, r11's NaN", p, agg)
		}
		dl := readDLQ(t, s, dlqs[p])
		seen := map[int64]bool{}
		for _, r := range dl {
			var off int64
			fmt.Sscan(r.headers["__connect.errors.offset"], &off)
			seen[off] = true
			want, ok := wantDLQ[off]
			if !ok || r.headers["ingestd.error.reason"] != "check_violation" || r.headers["ingestd.error.constraint"] != want {
				t.Errorf("%s: dead letter of offset %d: reason %q constraint %q, want check_violation %q", p, off, r.headers["ingestd.error.reason"], r.headers["ingestd.error.constraint"], want)
				continue
			}
			for _, name := range strings.Split(want, ", ") {
				if got := r.headers["ingestd.error.constraint."+name]; got != exprOf[name] {
					t.Errorf("%s: dead letter of offset %d: ingestd.error.constraint.%s = %q, want %q", p, off, name, got, exprOf[name])
				}
				if msg := r.headers["__connect.errors.exception.message"]; !strings.Contains(msg, "CHECK constraint "+name+" ("+exprOf[name]+")") {
					t.Errorf("%s: dead letter of offset %d: message %q does not name %s with its expression", p, off, msg, name)
				}
			}
		}
		if len(dl) != len(wantDLQ) || len(seen) != len(wantDLQ) {
			t.Errorf("%s: %d dead letters at offsets %v, want %d", p, len(dl), seen, len(wantDLQ))
		}
	}
	if got := readTable(t, s, filepath.Join(dir, "halt")); len(got.Rows) != 1000 {
		t.Errorf("halt: %d rows, want the 1,000 before r1", len(got.Rows))
	}
	if n := len(readDLQ(t, s, dlqs["halt"])); n != 0 {
		t.Errorf("halt: %d dead letters, want none", n)
	}

	// Spark's own INSERT of r1–r12, one at a time, fails exactly for the rows ingestd
	// rejects.
	sp := filepath.Join(dir, "spark")
	for i, r := range rows {
		err := sparkTry(t, spark, "INSERT INTO delta.`"+sp+"` VALUES "+r.sql)
		if (err != nil) != (r.violate != "") {
			t.Errorf("Spark INSERT of r%d %s: error %v, ingestd rejects it: %v", i+1, r.sql, err, r.violate != "")
		} else if err != nil && !strings.Contains(err.Error(), "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES") {
			t.Errorf("Spark INSERT of r%d: %v, want DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", i+1, firstLine(err.Error()))
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// TestConstraintsSpark runs the CHECK-constraint checks that need Spark in one Spark
// session: the evaluator's property test against Spark, CHECK constraints per record on a
// Spark table (c41), and the constraint workflow (constraintsSeed: constraints added by
// ingestd and by Spark under running pipelines, replay after a drop).
func TestConstraintsSpark(t *testing.T) {
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	t.Run("PropertyVsSpark", func(t *testing.T) { constraintsPropertyVsSpark(t, spark) })
	t.Run("C41", func(t *testing.T) { c41(t, spark) })
	t.Run("Seed", func(t *testing.T) { constraintsSeed(t, spark) })
}
