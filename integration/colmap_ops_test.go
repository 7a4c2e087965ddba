package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// rowsText renders rows as sorted JSON lines (keys sorted; sortedRows in vacuum_test.go)
// joined by newlines, to compare and print row sets as one string.
func rowsText(t *testing.T, rows []map[string]any) string {
	t.Helper()
	return strings.Join(sortedRows(t, rows), "\n")
}

// TestColumnMappingRenameDropUnderPipeline: a table ingestd created and filled
// without column mapping gets column mapping, a rename, a drop and a reorder from
// `ingestd table alter` while `ingestd run` keeps running, then a rename from Spark.
//   - Spark and delta-rs read the renamed column's old values under its new name; time
//     travel (Spark VERSION AS OF, delta-rs version=) to the version before the rename
//     shows the old names and values; Spark's column order is the reordered one.
//   - A record with the new name lands in the renamed column; a record still carrying the
//     old name (country) and the dropped one (tier) is a new field to the guard: evolve adds
//     both as new columns with col-<uuid> physical names and fresh ids, holding only that
//     record's values (the dropped column's old values never come back).
//   - The history names the four commits as Spark does (SET TBLPROPERTIES, RENAME
//     COLUMN, DROP COLUMNS, CHANGE COLUMN).
//   - After Spark's ALTER TABLE RENAME COLUMN status TO order_status the pipeline's next
//     records with order_status land in the renamed column.
func TestColumnMappingRenameDropUnderPipeline(t *testing.T) {
	s := need(t)
	start := time.Now()
	step := func(what string) { t.Logf("%5.1fs %s", time.Since(start).Seconds(), what) }
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while the pipeline runs
	topic := createTopic(t, s, "colmap-ops", 1)
	dlq := createTopic(t, s, "colmap-ops.dlq", 1)
	dir := t.TempDir()
	table := filepath.Join(dir, "orders")
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "bronze", pipelineYAML("colmap-ops", s, topic, table, "evolve", dlq, "{max_records: 100, max_bytes: 1MiB, max_age: 200ms}"))
	str := func(n string) string { return fmt.Sprintf(`{"name":%q,"type":"string"}`, n) }
	id := `{"name":"order_id","type":"long"}`
	v1 := rec("Order", id, str("status"), str("country"), str("tier"), str("channel"))
	v2 := rec("Order", id, str("status"), str("country_code"), str("channel"))
	v3 := rec("Order", id, str("order_status"), str("country_code"), str("channel"))
	schemas := map[string]string{"v1": v1, "v2": v2, "v3": v3}
	produceSpec(t, s, topic, schemas, [][2]string{
		{"v1", `{"order_id":1,"status":"NEW","country":"DE","tier":"gold","channel":"web"}`},
		{"v1", `{"order_id":2,"status":"PAID","country":"US","tier":"silver","channel":"app"}`}})
	d := startDaemon(t, cfgDir)
	step("daemon started")
	waitFor(t, d, time.Minute, "the first records", func() bool { return handled(t, table) == 2 })

	alter := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, append([]string{"table", "alter", "--table", table}, args...)...)
		if err != nil {
			t.Fatalf("ingestd table alter %v: %v\n%s", args, err, out)
		}
		return out
	}
	// Refused before column mapping, with the fix named.
	_, err := runCLI(t, "table", "alter", "--table", table, "--drop-column", "tier")
	if ce, ok := err.(*cliError); !ok || !strings.Contains(ce.stderr, "drop column needs column mapping") || !strings.Contains(ce.stderr, "--enable-column-mapping name") {
		t.Fatalf("drop without column mapping: %v", err)
	}
	step("first records landed")
	before := openTableVersion(t, table)
	out := alter("--enable-column-mapping", "name")
	if want := fmt.Sprintf("version %d: SET TBLPROPERTIES column mapping name (protocol 2/5, maxColumnId 5)\n", before+1); out != want {
		t.Errorf("enable: %q, want %q", out, want)
	}
	vBeforeRename := before + 1
	out = alter("--rename-column", "country TO country_code", "--drop-column", "tier", "--move-column", "channel AFTER order_id")
	if want := fmt.Sprintf("version %d: RENAME COLUMN country TO country_code\nversion %d: DROP COLUMNS tier\nversion %d: CHANGE COLUMN channel AFTER order_id\n",
		before+2, before+3, before+4); out != want {
		t.Errorf("alter: %q, want %q", out, want)
	}

	// The pipeline picks the new schema up at its next commit.
	produceSpec(t, s, topic, schemas, [][2]string{
		{"v2", `{"order_id":3,"status":"SHIPPED","country_code":"FR","channel":"web"}`},
		{"v1", `{"order_id":4,"status":"NEW","country":"IT","tier":"bronze","channel":"app"}`}})
	waitFor(t, d, time.Minute, "the records after the rename", func() bool { return handled(t, table) == 4 })

	step("records after the rename landed")
	// Spark renames a column under the running pipeline.
	spark.call(t, map[string]any{"op": "sql", "query": "ALTER TABLE delta.`" + table + "` RENAME COLUMN status TO order_status"}, nil)
	produceSpec(t, s, topic, schemas, [][2]string{{"v3", `{"order_id":5,"order_status":"PAID","country_code":"ES","channel":"web"}`}})
	waitFor(t, d, time.Minute, "the record after Spark's rename", func() bool { return handled(t, table) == 5 })
	step("record after Spark rename landed")
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if n := len(readDLQ(t, s, dlq)); n != 0 {
		t.Errorf("%d dead letters under evolve, want 0", n)
	}

	// The log: physical names kept for renamed columns, new ones for the re-added names.
	snap, err := openTable(t, table).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var layout []string
	for _, f := range snap.Schema.Fields {
		phys := f.PhysicalName(snap.ColumnMapping)
		if strings.HasPrefix(phys, "col-") && len(phys) == 40 {
			phys = "col-<uuid>"
		}
		fid, _ := f.FieldID()
		layout = append(layout, fmt.Sprintf("%s=%s#%d", f.Name, phys, fid))
	}
	if got, want := strings.Join(layout, " "), "order_id=order_id#1 channel=channel#5 order_status=status#2 country_code=country#3 country=col-<uuid>#6 tier=col-<uuid>#7"; got != want {
		t.Errorf("columns\n got %s\nwant %s", got, want)
	}
	if snap.Protocol.MinReaderVersion != 2 || snap.Protocol.MinWriterVersion != 5 || snap.Metadata.Configuration[deltalog.PropColumnMappingMaxColumnID] != "7" {
		t.Errorf("protocol %+v, maxColumnId %s", snap.Protocol, snap.Metadata.Configuration[deltalog.PropColumnMappingMaxColumnID])
	}

	want := rowsText(t, []map[string]any{
		{"order_id": 1, "channel": "web", "order_status": "NEW", "country_code": "DE", "country": nil, "tier": nil},
		{"order_id": 2, "channel": "app", "order_status": "PAID", "country_code": "US", "country": nil, "tier": nil},
		{"order_id": 3, "channel": "web", "order_status": "SHIPPED", "country_code": "FR", "country": nil, "tier": nil},
		{"order_id": 4, "channel": "app", "order_status": "NEW", "country_code": nil, "country": "IT", "tier": "bronze"},
		{"order_id": 5, "channel": "web", "order_status": "PAID", "country_code": "ES", "country": nil, "tier": nil},
	})
	wantCols := "order_id,channel,order_status,country_code,country,tier"
	rs := readTable(t, s, table)
	if got := rowsText(t, rs.Rows); got != want {
		t.Errorf("delta-rs rows\n got %s\nwant %s", got, want)
	}
	if got := strings.Join(schemaNames(rs), ","); got != wantCols {
		t.Errorf("delta-rs columns %s, want %s", got, wantCols)
	}
	step("delta-rs read")
	var sp sparkRead
	spark.call(t, map[string]any{"op": "read", "path": table}, &sp)
	var spCols []string
	for _, c := range sp.Schema {
		spCols = append(spCols, c.Name)
	}
	if got := strings.Join(spCols, ","); got != wantCols {
		t.Errorf("Spark columns %s, want %s", got, wantCols)
	}
	if got := rowsText(t, sp.Rows); got != want {
		t.Errorf("Spark rows\n got %s\nwant %s", got, want)
	}

	step("Spark read")
	// Time travel to the version before the rename: the old names and the old values.
	wantOld := rowsText(t, []map[string]any{
		{"order_id": 1, "status": "NEW", "country": "DE", "tier": "gold", "channel": "web"},
		{"order_id": 2, "status": "PAID", "country": "US", "tier": "silver", "channel": "app"},
	})
	var old []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("SELECT * FROM delta.`%s` VERSION AS OF %d", table, vBeforeRename)}, &old)
	if got := rowsText(t, old); got != wantOld {
		t.Errorf("Spark VERSION AS OF %d\n got %s\nwant %s", vBeforeRename, got, wantOld)
	}
	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "read_table.py"), table, "--version", fmt.Sprint(vBeforeRename))
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("delta-rs version=%d: %v", vBeforeRename, err)
	}
	var oldRS tableData
	if err := json.Unmarshal(raw, &oldRS); err != nil {
		t.Fatal(err)
	}
	if got := rowsText(t, oldRS.Rows); got != wantOld || strings.Join(schemaNames(oldRS), ",") != "order_id,status,country,tier,channel" {
		t.Errorf("delta-rs version=%d: columns %v\n got %s\nwant %s", vBeforeRename, schemaNames(oldRS), got, wantOld)
	}

	step("time travel read")

	// The history (delta-rs, newest first) names ingestd's commits as Spark does.
	var ops []string
	for v := before + 1; v <= before+4; v++ {
		if i := rs.Version - v; i >= 0 && i < int64(len(rs.History)) {
			ops = append(ops, rs.History[i])
		}
	}
	if got := strings.Join(ops, ","); got != "SET TBLPROPERTIES,RENAME COLUMN,DROP COLUMNS,CHANGE COLUMN" {
		t.Errorf("history of versions %d..%d: %s (all: %v)", before+1, before+4, got, rs.History)
	}
}

// TestColumnMappingRenameDeadLetter: under dead_letter, after `--rename-column 'country TO
// country_code'` on the live table, a record still carrying country is a new field to the
// guard: dead-lettered (schema_mismatch, field country), while a record with country_code
// lands in the renamed column beside its old values. No Spark: the readers' view of renames
// is TestColumnMappingRenameDropUnderPipeline's.
func TestColumnMappingRenameDeadLetter(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "colmap-dlq", 1)
	dlq := createTopic(t, s, "colmap-dlq.dlq", 1)
	dir := t.TempDir()
	table := filepath.Join(dir, "orders")
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "silver", pipelineYAML("colmap-dlq", s, topic, table, "dead_letter", dlq, "{max_records: 100, max_bytes: 1MiB, max_age: 200ms}"))
	id := `{"name":"order_id","type":"long"}`
	v1 := rec("Order", id, `{"name":"country","type":"string"}`)
	v2 := rec("Order", id, `{"name":"country_code","type":"string"}`)
	schemas := map[string]string{"v1": v1, "v2": v2}
	produceSpec(t, s, topic, schemas, [][2]string{{"v1", `{"order_id":1,"country":"DE"}`}})
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "the first record", func() bool { return handled(t, table) == 1 })
	for _, args := range [][]string{{"--enable-column-mapping", "name"}, {"--rename-column", "country TO country_code"}} {
		if out, err := runCLI(t, append([]string{"table", "alter", "--table", table}, args...)...); err != nil {
			t.Fatalf("table alter %v: %v\n%s", args, err, out)
		}
	}
	produceSpec(t, s, topic, schemas, [][2]string{{"v1", `{"order_id":2,"country":"US"}`}, {"v2", `{"order_id":3,"country_code":"FR"}`}})
	waitFor(t, d, time.Minute, "the records after the rename", func() bool { return handled(t, table) == 3 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	dead := readDLQ(t, s, dlq)
	if len(dead) != 1 || dead[0].headers["ingestd.error.reason"] != "schema_mismatch" || dead[0].headers["ingestd.error.field"] != "country" ||
		dead[0].headers["__connect.errors.offset"] != "1" {
		var hs []map[string]string
		for _, r := range dead {
			hs = append(hs, r.headers)
		}
		t.Fatalf("dead letters %v, want one: offset 1, schema_mismatch, field country", hs)
	}
	data := readTable(t, s, table)
	want := rowsText(t, []map[string]any{{"order_id": 1, "country_code": "DE"}, {"order_id": 3, "country_code": "FR"}})
	if got := rowsText(t, data.Rows); got != want || strings.Join(schemaNames(data), ",") != "order_id,country_code" {
		t.Errorf("table %v\n got %s\nwant %s", schemaNames(data), got, want)
	}
}
