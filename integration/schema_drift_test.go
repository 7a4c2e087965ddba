package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// guardCase is one schema change run end to end: records produced with their own writer
// schemas by confluent-kafka through the real registry into one partition, one `ingestd
// run` with an evolve, a dead_letter and a halt pipeline, tables read back with delta-rs
// (and by Spark at the end), the DLQ read back from the broker. Each case is a change that
// broke other Kafka/Avro → lakehouse pipelines, as reported in public (named above it); its
// name starts with a label (C01, C03, …) shared with the guard's and the decoder's tests of
// the same change (schemaguard/drift_decisions_test.go, ingest/decode/writer_schemas_test.go),
// which also names its subtest, topic and tables.
type guardCase struct {
	name    string
	schemas map[string]string // label → avsc
	events  [][2]string       // (schema label, value JSON)
	allow   string            // schema.allow_table_features, YAML list
	table   string            // if set, each pipeline's table exists beforehand with this schema (Delta JSON)
	props   map[string]string // table properties of that table
	expect  map[string]caseExpect
}

type caseExpect struct {
	rows   []string         // canonical JSON rows (delta-rs), any order; nil: no table
	schema string           // delta-rs schema, "" to skip
	dlq    map[int64]string // source offset → "reason field"
	halt   int64            // first offending offset, -1 if the pipeline must not halt
}

func rec(name string, fields ...string) string {
	return fmt.Sprintf(`{"type":"record","name":%q,"fields":[%s]}`, name, strings.Join(fields, ","))
}

func TestGuardCases(t *testing.T) {
	t.Parallel() // waits on Spark or the broker; own topics and temp dirs (see TestMain)
	s := need(t)
	cases := []guardCase{
		// A consumer kept its start-up schema, so a column added mid-stream went missing
		// until a restart (AbsaOSS/ABRiS#309, delta-io/delta-rs#2355). v2 adds coupon;
		// offsets 0 and 2 are v1, 1 is v2, all in one batch.
		{
			name: "C01 new top-level column mid-batch",
			schemas: map[string]string{
				"v1": rec("Order", `{"name":"order_id","type":"long"}`, `{"name":"status","type":"string"}`, `{"name":"dt","type":"string"}`),
				"v2": rec("Order", `{"name":"order_id","type":"long"}`, `{"name":"status","type":"string"}`, `{"name":"dt","type":"string"}`, `{"name":"coupon","type":["null","string"],"default":null}`),
			},
			events: [][2]string{
				{"v1", `{"order_id":1,"status":"NEW","dt":"2024-05-01"}`},
				{"v2", `{"order_id":2,"status":"NEW","dt":"2024-05-01","coupon":"SPRING10"}`},
				{"v1", `{"order_id":3,"status":"PAID","dt":"2024-05-02"}`},
			},
			expect: map[string]caseExpect{
				"evolve": {rows: []string{`{"coupon":null,"dt":"2024-05-01","order_id":1,"status":"NEW"}`, `{"coupon":"SPRING10","dt":"2024-05-01","order_id":2,"status":"NEW"}`, `{"coupon":null,"dt":"2024-05-02","order_id":3,"status":"PAID"}`},
					schema: "[[order_id int64 true] [status string true] [dt string true] [coupon string true]]", halt: -1},
				"dead_letter": {rows: []string{`{"dt":"2024-05-01","order_id":1,"status":"NEW"}`, `{"dt":"2024-05-02","order_id":3,"status":"PAID"}`},
					dlq: map[int64]string{1: "schema_mismatch coupon"}, halt: -1},
				"halt": {rows: []string{`{"dt":"2024-05-01","order_id":1,"status":"NEW"}`}, halt: 1},
			},
		},
		// New fields inside a struct were dropped silently, and not evolved at all when the
		// first record had a null parent (apache/iceberg#15395): the decision follows the
		// schema (v2's customer.details), not the value (null at offset 1).
		{
			name: "C03 new field inside a nested struct, first seen with a null parent",
			schemas: map[string]string{
				"v1": rec("Order", `{"name":"order_id","type":"int"}`, `{"name":"customer","type":`+rec("Customer", `{"name":"customer_id","type":"int"}`)+`}`),
				"v2": rec("Order", `{"name":"order_id","type":"int"}`, `{"name":"customer","type":`+rec("Customer", `{"name":"customer_id","type":"int"}`,
					`{"name":"details","type":["null",`+rec("Details", `{"name":"name","type":"string"}`, `{"name":"email","type":"string"}`)+`],"default":null}`)+`}`),
			},
			events: [][2]string{
				{"v1", `{"order_id":9,"customer":{"customer_id":6}}`},
				{"v2", `{"order_id":10,"customer":{"customer_id":7,"details":null}}`},
				{"v2", `{"order_id":11,"customer":{"customer_id":8,"details":{"name":"Kim","email":"k@example.com"}}}`},
			},
			expect: map[string]caseExpect{
				"evolve": {rows: []string{`{"customer":{"customer_id":6,"details":null},"order_id":9}`, `{"customer":{"customer_id":7,"details":null},"order_id":10}`,
					`{"customer":{"customer_id":8,"details":{"email":"k@example.com","name":"Kim"}},"order_id":11}`},
					schema: "[[order_id int32 true] [customer struct<customer_id: int32, details: struct<name: string, email: string>> true]]", halt: -1},
				"dead_letter": {rows: []string{`{"customer":{"customer_id":6},"order_id":9}`},
					dlq: map[int64]string{1: "schema_mismatch customer.details", 2: "schema_mismatch customer.details"}, halt: -1},
				"halt": {rows: []string{`{"customer":{"customer_id":6},"order_id":9}`}, halt: 1},
			},
		},
		// A sink crashed when an optional field was dropped from the writer schema
		// (databricks/iceberg-kafka-connect#261): a missing nullable column is NULL, under
		// every policy.
		{
			name: "C05 field removed from the writer schema",
			schemas: map[string]string{
				"v1": rec("User", `{"name":"id","type":"long"}`, `{"name":"email","type":["null","string"],"default":null}`, `{"name":"tags","type":["null",{"type":"array","items":"string"}],"default":null}`),
				"v2": rec("User", `{"name":"id","type":"long"}`, `{"name":"tags","type":["null",{"type":"array","items":"string"}],"default":null}`),
			},
			events: [][2]string{
				{"v1", `{"id":1,"email":"a@example.com","tags":["x"]}`},
				{"v2", `{"id":2,"tags":["y"]}`},
				{"v1", `{"id":3,"email":null,"tags":null}`},
			},
			expect: allPolicies(caseExpect{rows: []string{`{"email":"a@example.com","id":1,"tags":["x"]}`, `{"email":null,"id":2,"tags":["y"]}`, `{"email":null,"id":3,"tags":null}`}, halt: -1}),
		},
		// A long written into an int column was refused, or cast down until it overflowed
		// (delta-io/delta#3443): without type widening on the table, int → long is
		// incompatible, and 2147483648 is never written as an int.
		{
			name: "C06 variant B: int to long without type widening",
			schemas: map[string]string{
				"v1": rec("M", `{"name":"id","type":"int"}`, `{"name":"count","type":"int"}`),
				"v2": rec("M", `{"name":"id","type":"int"}`, `{"name":"count","type":"long"}`),
			},
			events: [][2]string{{"v1", `{"id":1,"count":2147483647}`}, {"v2", `{"id":2,"count":2147483648}`}, {"v2", `{"id":3,"count":5}`}},
			expect: map[string]caseExpect{
				"evolve":      {rows: []string{`{"count":2147483647,"id":1}`}, halt: 1},
				"dead_letter": {rows: []string{`{"count":2147483647,"id":1}`}, dlq: map[int64]string{1: "schema_mismatch count", 2: "schema_mismatch count"}, halt: -1},
				"halt":        {rows: []string{`{"count":2147483647,"id":1}`}, halt: 1},
			},
		},
		// A string field that became a long, or a struct, was cast silently or failed the
		// whole batch (delta-io/delta-rs#2642, delta-io/delta#1551): the two records with
		// incompatible schemas (offsets 2 and 3) are isolated, the others written.
		{
			name: "C11 incompatible type changes isolated per record",
			schemas: map[string]string{
				"v1": rec("E", `{"name":"id","type":"long"}`, `{"name":"details","type":`+rec("D", `{"name":"code","type":"string"}`, `{"name":"message","type":"string"}`)+`}`),
				"v2": rec("E", `{"name":"id","type":"long"}`, `{"name":"details","type":`+rec("D", `{"name":"code","type":"long"}`, `{"name":"message","type":"string"}`)+`}`),
				"v3": rec("E", `{"name":"id","type":"long"}`, `{"name":"details","type":`+rec("D", `{"name":"code","type":"string"}`, `{"name":"message","type":`+rec("Msg", `{"name":"text","type":"string"}`, `{"name":"lang","type":"string"}`)+`}`)+`}`),
			},
			events: [][2]string{
				{"v1", `{"id":1,"details":{"code":"1","message":"m"}}`}, {"v1", `{"id":2,"details":{"code":"2","message":"m"}}`},
				{"v2", `{"id":999,"details":{"code":1,"message":"m"}}`}, {"v3", `{"id":1000,"details":{"code":"7","message":{"text":"hi","lang":"en"}}}`},
			},
			expect: map[string]caseExpect{
				"evolve": {rows: []string{`{"details":{"code":"1","message":"m"},"id":1}`, `{"details":{"code":"2","message":"m"},"id":2}`}, halt: 2},
				"dead_letter": {rows: []string{`{"details":{"code":"1","message":"m"},"id":1}`, `{"details":{"code":"2","message":"m"},"id":2}`},
					dlq: map[int64]string{2: "schema_mismatch details.code", 3: "schema_mismatch details.message"}, halt: -1},
				"halt": {rows: []string{`{"details":{"code":"1","message":"m"},"id":1}`, `{"details":{"code":"2","message":"m"},"id":2}`}, halt: 2},
			},
		},
		// NOT NULL inferred from a first batch refused later nulls, and a null map value was
		// accepted at write time and failed at read time (malon64/floe#99,
		// delta-io/delta-rs#3690): a table ingestd creates is nullable all the way down, so
		// v2's nulls (email, a map value) and v3 need no change.
		{
			name: "C12 nullable and required, map values and nested structs",
			schemas: map[string]string{
				"v1": rec("P", `{"name":"id","type":"long"}`, `{"name":"email","type":"string"}`, `{"name":"attrs","type":{"type":"map","values":"string"}}`, `{"name":"addr","type":["null",`+rec("Addr", `{"name":"zip","type":"string"}`)+`],"default":null}`),
				"v2": rec("P", `{"name":"id","type":"long"}`, `{"name":"email","type":["null","string"],"default":null}`, `{"name":"attrs","type":{"type":"map","values":["null","string"]}}`, `{"name":"addr","type":["null",`+rec("Addr", `{"name":"zip","type":"string"}`)+`],"default":null}`),
				"v3": rec("P", `{"name":"id","type":"long"}`, `{"name":"email","type":"string"}`, `{"name":"attrs","type":{"type":"map","values":"string"}}`, `{"name":"addr","type":["null",`+rec("Addr", `{"name":"zip","type":"string"}`)+`],"default":null}`),
			},
			events: [][2]string{
				{"v1", `{"id":1,"email":"a@example.com","attrs":{"k":"v"},"addr":null}`},
				{"v2", `{"id":2,"email":null,"attrs":{"a":null},"addr":{"zip":"10115"}}`},
				{"v3", `{"id":3,"email":"c@example.com","attrs":{},"addr":null}`},
			},
			expect: allPolicies(caseExpect{rows: []string{`{"addr":null,"attrs":{"k":"v"},"email":"a@example.com","id":1}`,
				`{"addr":{"zip":"10115"},"attrs":{"a":null},"email":null,"id":2}`, `{"addr":null,"attrs":{},"email":"c@example.com","id":3}`},
				schema: "[[id int64 true] [email string true] [attrs map<string, string> true] [addr struct<zip: string> true]]", halt: -1}),
		},
	}
	cases = append(cases, moreGuardCases()...)
	// Spark boots in the background while the cases run; it reads every table at the end.
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	var written []writtenTable
	root := t.TempDir() // outlives the subtests, for Spark's reads at the end
	for _, c := range cases {
		t.Run(strings.Fields(c.name)[0], func(t *testing.T) { written = append(written, runGuardCase(t, s, c, root)...) })
	}
	for _, w := range written {
		var got sparkRead
		spark.call(t, map[string]any{"op": "read", "path": w.path}, &got)
		var rows []string
		for _, r := range got.Rows {
			b, _ := json.Marshal(r)
			rows = append(rows, string(b))
		}
		slices.Sort(rows)
		if strings.Join(rows, "\n") != strings.Join(w.rows, "\n") {
			t.Errorf("%s (Spark)\n got %s\nwant %s", w.name, strings.Join(rows, "\n     "), strings.Join(w.rows, "\n     "))
		}
	}
	t.Logf("Spark read %d tables and agreed with delta-rs and the expected rows", len(written))
}

// writtenTable is a table a case wrote, with its expected rows (canonical JSON, sorted).
type writtenTable struct {
	name, path string
	rows       []string
}

func allPolicies(e caseExpect) map[string]caseExpect {
	return map[string]caseExpect{"evolve": e, "dead_letter": e, "halt": e}
}

func runGuardCase(t *testing.T, s stack, c guardCase, root string) (written []writtenTable) {
	t.Logf("%s", c.name)
	base := "case-" + strings.ToLower(strings.Fields(c.name)[0])
	topic := createTopic(t, s, base, 1)
	dlq := createTopic(t, s, base+".dlq", 1)
	dir := filepath.Join(root, base)
	mustMkdir(t, dir)
	spec := map[string]any{"schemas": map[string]json.RawMessage{}, "events": [][]any{}}
	for k, v := range c.schemas {
		spec["schemas"].(map[string]json.RawMessage)[k] = json.RawMessage(v)
	}
	for _, e := range c.events {
		spec["events"] = append(spec["events"].([][]any), []any{e[0], json.RawMessage(e[1])})
	}
	specFile, outFile := filepath.Join(dir, "spec.json"), filepath.Join(dir, "out.json")
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(specFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "produce_case.py"),
		"--brokers", s.brokers, "--registry", s.registry, "--topic", topic, "--spec", specFile, "--out", outFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("produce_case.py: %v\n%s", err, out)
	}

	if c.table != "" {
		for _, policy := range []string{"evolve", "dead_letter", "halt"} {
			createTable(t, filepath.Join(dir, policy), c.table, c.props)
		}
	}
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	tables := map[string]string{}
	for _, policy := range []string{"evolve", "dead_letter", "halt"} {
		tables[policy] = filepath.Join(dir, policy)
		y := pipelineYAML(base+"-"+strings.ReplaceAll(policy, "_", "-"), s, topic, tables[policy], policy, dlq, "{max_records: 100, max_bytes: 1MiB, max_age: 300ms}")
		if c.allow != "" {
			y = strings.Replace(y, "on_incompatible: halt}", "on_incompatible: halt, allow_table_features: "+c.allow+"}", 1)
		}
		writePipeline(t, cfgDir, policy, y)
	}
	d := startDaemon(t, cfgDir)
	n := int64(len(c.events))
	haltedAt := func(policy string) (int64, bool) {
		r, _ := d.readyz(t)
		for _, p := range r.Pipelines {
			if strings.HasSuffix(p.Pipeline, "-"+strings.ReplaceAll(policy, "_", "-")) && len(p.Halted) > 0 {
				return p.Halted[0].Offset, true
			}
		}
		return 0, false
	}
	waitFor(t, d, 90*time.Second, "every pipeline to handle all records or halt", func() bool {
		for policy, e := range c.expect {
			if e.halt >= 0 {
				if _, ok := haltedAt(policy); !ok {
					return false
				}
			} else if handled(t, tables[policy]) != n {
				return false
			}
		}
		return true
	})
	halts := map[string]int64{}
	for policy := range c.expect {
		if off, ok := haltedAt(policy); ok {
			halts[policy] = off
		}
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	for _, policy := range []string{"evolve", "dead_letter", "halt"} {
		e := c.expect[policy]
		if off, ok := halts[policy]; e.halt >= 0 && off != e.halt {
			t.Errorf("%s: halted at %d, want %d", policy, off, e.halt)
		} else if e.halt < 0 && ok {
			t.Errorf("%s: halted at %d, want no halt", policy, off)
		}
		if e.rows == nil {
			continue
		}
		data := readTable(t, s, tables[policy])
		want := slices.Clone(e.rows)
		slices.Sort(want)
		written = append(written, writtenTable{name: c.name + " / " + policy, path: tables[policy], rows: want})
		if data.Unsupported != "" {
			t.Logf("%s: delta-rs cannot read this table (%s); Spark checks it", policy, data.Unsupported)
			continue
		}
		var got []string
		for _, r := range data.Rows {
			b, _ := json.Marshal(r)
			got = append(got, string(b))
		}
		slices.Sort(got)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s rows (delta-rs)\n got %s\nwant %s", policy, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
		}
		if e.schema != "" && fmt.Sprint(data.Schema) != e.schema {
			t.Errorf("%s schema (delta-rs)\n got %v\nwant %s", policy, data.Schema, e.schema)
		}
	}
	// The DLQ holds exactly the dead_letter pipeline's records (the other pipelines
	// dead-letter nothing in these cases).
	wantDLQ := c.expect["dead_letter"].dlq
	got := map[int64]string{}
	for _, r := range readDLQ(t, s, dlq) {
		if r.headers["__connect.errors.topic"] != topic {
			t.Errorf("DLQ record from topic %q", r.headers["__connect.errors.topic"])
		}
		var off int64
		fmt.Sscan(r.headers["__connect.errors.offset"], &off)
		got[off] = r.headers["ingestd.error.reason"] + " " + r.headers["ingestd.error.field"]
		if !strings.Contains(r.headers["__connect.errors.exception.message"], "writer schema id") {
			t.Errorf("DLQ message for offset %d is not the guard's explanation: %q", off, r.headers["__connect.errors.exception.message"])
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(orEmpty(wantDLQ)) {
		t.Errorf("DLQ\n got %v\nwant %v", got, wantDLQ)
	}
	return written
}

func orEmpty(m map[int64]string) map[int64]string {
	if m == nil {
		return map[int64]string{}
	}
	return m
}

// createTable creates an empty Delta table with the given schema (Delta JSON) and
// properties, as another engine would have.
func createTable(t *testing.T, path, schemaJSON string, props map[string]string) {
	t.Helper()
	ctx := context.Background()
	schema, err := deltalog.ParseSchema(schemaJSON)
	if err != nil {
		t.Fatal(err)
	}
	tbl := openTable(t, path)
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "case", Schema: schema, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: create.Protocol, Metadata: create.Metadata, Operation: "CREATE TABLE"}); err != nil {
		t.Fatalf("create table %s: %v", path, err)
	}
}
