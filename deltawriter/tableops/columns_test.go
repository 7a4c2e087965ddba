package tableops

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// The schema of the Spark probe (ALTER TABLE … SET TBLPROPERTIES ('delta.columnMapping.mode'='name',
// 'delta.minReaderVersion'='2', 'delta.minWriterVersion'='5') on Spark 4.2 / Delta 4): the
// wanted JSON below is what Spark wrote, field for field.
const cmSchema = `{"type":"struct","fields":[{"name":"order_id","type":"long","nullable":true,"metadata":{}},{"name":"status","type":"string","nullable":true,"metadata":{}},{"name":"country","type":"string","nullable":true,"metadata":{}},{"name":"tier","type":"string","nullable":true,"metadata":{}},{"name":"channel","type":"string","nullable":true,"metadata":{}},{"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"b","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"arr","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"x","type":"integer","nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}}]}`

func cm(id int, phys string) string {
	return fmt.Sprintf(`{"delta.columnMapping.id":%d,"delta.columnMapping.physicalName":"%s"}`, id, phys)
}

// commitJSON returns the actions of version v as maps keyed by action name.
func commitJSON(t *testing.T, st storage.Store, v int64) map[string]map[string]any {
	t.Helper()
	b, err := st.Get(context.Background(), fmt.Sprintf("_delta_log/%020d.json", v))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a map[string]map[string]any
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		for k, v := range a {
			out[k] = v
		}
	}
	return out
}

func schemaJSON(t *testing.T, tbl *deltawriter.Table) string {
	t.Helper()
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(snap.Schema)
	return string(b)
}

// TestEnableColumnMappingLikeSpark: the upgrade commit of a reader 1 / writer 2 table is
// Spark's: protocol 2/5, ids in pre-order (a struct before its fields, array elements
// too), physical names equal to the names, maxColumnId, SET TBLPROPERTIES with the three
// properties; then rename (top level and nested), drop (two at once) and moves.
func TestEnableColumnMappingLikeSpark(t *testing.T) {
	ctx := context.Background()
	tbl, st := newTable(t, cmSchema)
	res, err := Apply(ctx, tbl, Alter{EnableColumnMapping: "name"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Version != 1 || res[0].Operation != "SET TBLPROPERTIES" {
		t.Fatalf("results %+v", res)
	}
	c := commitJSON(t, st, 1)
	if got := fmt.Sprint(c["protocol"]); got != "map[minReaderVersion:2 minWriterVersion:5]" {
		t.Errorf("protocol %s", got)
	}
	ci := c["commitInfo"]
	if ci["operation"] != "SET TBLPROPERTIES" || fmt.Sprint(ci["operationParameters"]) != `map[properties:{"delta.columnMapping.mode":"name","delta.minReaderVersion":"2","delta.minWriterVersion":"5"}]` {
		t.Errorf("commitInfo %v", ci)
	}
	if got := fmt.Sprint(c["metaData"]["configuration"]); got != "map[delta.columnMapping.maxColumnId:10 delta.columnMapping.mode:name]" {
		t.Errorf("configuration %s", got)
	}
	want := `{"type":"struct","fields":[{"name":"order_id","type":"long","nullable":true,"metadata":` + cm(1, "order_id") + `},{"name":"status","type":"string","nullable":true,"metadata":` + cm(2, "status") + `},{"name":"country","type":"string","nullable":true,"metadata":` + cm(3, "country") + `},{"name":"tier","type":"string","nullable":true,"metadata":` + cm(4, "tier") + `},{"name":"channel","type":"string","nullable":true,"metadata":` + cm(5, "channel") + `},{"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":` + cm(7, "a") + `},{"name":"b","type":"string","nullable":true,"metadata":` + cm(8, "b") + `}]},"nullable":true,"metadata":` + cm(6, "s") + `},{"name":"arr","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"x","type":"integer","nullable":true,"metadata":` + cm(10, "x") + `}]},"containsNull":true},"nullable":true,"metadata":` + cm(9, "arr") + `}]}`
	if got := c["metaData"]["schemaString"]; got != want {
		t.Errorf("schema\n got %s\nwant %s", got, want)
	}

	// Rename, nested rename, drop two, move: one commit each, Spark's operation parameters.
	r1, _ := ParseRename("country TO country_code")
	r2, _ := ParseRename("s.a TO a2")
	m1, _ := ParseMove("channel AFTER order_id")
	m2, _ := ParseMove("status FIRST")
	d1, _ := ParseColumnPath("tier")
	d2, _ := ParseColumnPath("s.b")
	res, err = Apply(ctx, tbl, Alter{RenameColumns: []RenameColumn{r1, r2}, DropColumns: [][]string{d1, d2}, MoveColumns: []MoveColumn{m1, m2}})
	if err != nil {
		t.Fatal(err)
	}
	wantOps := []struct{ op, params string }{
		{"RENAME COLUMN", `map[newColumnPath:country_code oldColumnPath:country]`},
		{"RENAME COLUMN", `map[newColumnPath:s.a2 oldColumnPath:s.a]`},
		{"DROP COLUMNS", `map[columns:["tier","s.b"]]`},
		{"CHANGE COLUMN", `map[column:{"metadata":{"delta.columnMapping.id":5,"delta.columnMapping.physicalName":"channel"},"name":"channel","nullable":true,"type":"string"} position:AFTER order_id]`},
		{"CHANGE COLUMN", `map[column:{"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"status"},"name":"status","nullable":true,"type":"string"} position:FIRST]`},
	}
	if len(res) != len(wantOps) {
		t.Fatalf("results %+v", res)
	}
	for i, w := range wantOps {
		c := commitJSON(t, st, int64(2+i))
		if c["commitInfo"]["operation"] != w.op || fmt.Sprint(c["commitInfo"]["operationParameters"]) != w.params || c["protocol"] != nil || c["add"] != nil {
			t.Errorf("version %d: %v %v (protocol %v)", 2+i, c["commitInfo"]["operation"], c["commitInfo"]["operationParameters"], c["protocol"])
		}
	}
	want = `{"type":"struct","fields":[{"name":"status","type":"string","nullable":true,"metadata":` + cm(2, "status") + `},{"name":"order_id","type":"long","nullable":true,"metadata":` + cm(1, "order_id") + `},{"name":"channel","type":"string","nullable":true,"metadata":` + cm(5, "channel") + `},{"name":"country_code","type":"string","nullable":true,"metadata":` + cm(3, "country") + `},{"name":"s","type":{"type":"struct","fields":[{"name":"a2","type":"integer","nullable":true,"metadata":` + cm(7, "a") + `}]},"nullable":true,"metadata":` + cm(6, "s") + `},{"name":"arr","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"x","type":"integer","nullable":true,"metadata":` + cm(10, "x") + `}]},"containsNull":true},"nullable":true,"metadata":` + cm(9, "arr") + `}]}`
	if got := schemaJSON(t, tbl); got != want {
		t.Errorf("schema after the changes\n got %s\nwant %s", got, want)
	}

	// A column added under the dropped name is a new column: a fresh id above
	// maxColumnId and a col-<uuid> physical name, never "tier" (whose old values are in
	// the data files under that name).
	add, _ := ParseColumnDef("tier STRING")
	if _, err := Apply(ctx, tbl, Alter{AddColumns: []ColumnDef{add}}); err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	tier := snap.Schema.Fields[len(snap.Schema.Fields)-1]
	id, _ := tier.FieldID()
	phys := tier.PhysicalName(snap.ColumnMapping)
	if tier.Name != "tier" || id != 11 || !strings.HasPrefix(phys, "col-") || len(phys) != 40 || snap.Metadata.Configuration[deltalog.PropColumnMappingMaxColumnID] != "11" {
		t.Errorf("re-added tier: id %d physical name %q, maxColumnId %s", id, phys, snap.Metadata.Configuration[deltalog.PropColumnMappingMaxColumnID])
	}
}

// TestEnableColumnMappingOnTableFeatures: a table already on table features (reader 3 /
// writer 7, here for type widening) gains the columnMapping reader and writer feature,
// as Spark does; the operation parameters name only the mode.
func TestEnableColumnMappingOnTableFeatures(t *testing.T) {
	ctx := context.Background()
	tbl, st := newTable(t, `{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},{"name":"b","type":"string","nullable":true,"metadata":{}}]}`)
	if _, err := Apply(ctx, tbl, Alter{EnableFeatures: []string{"typeWidening"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, tbl, Alter{EnableColumnMapping: "name"}); err != nil {
		t.Fatal(err)
	}
	c := commitJSON(t, st, 2)
	if got := fmt.Sprint(c["protocol"]); got != "map[minReaderVersion:3 minWriterVersion:7 readerFeatures:[typeWidening columnMapping] writerFeatures:[appendOnly invariants typeWidening columnMapping]]" {
		t.Errorf("protocol %s", got)
	}
	if got := fmt.Sprint(c["commitInfo"]["operationParameters"]); got != `map[properties:{"delta.columnMapping.mode":"name"}]` {
		t.Errorf("parameters %s", got)
	}
	if got := fmt.Sprint(c["metaData"]["configuration"]); got != "map[delta.columnMapping.maxColumnId:2 delta.columnMapping.mode:name delta.enableTypeWidening:true]" {
		t.Errorf("configuration %s", got)
	}
}

// writeLog writes a table's first commit as raw JSON (for tables Table.Commit would not
// create, e.g. with CHECK constraints ingestd does not enforce yet).
func writeLog(t *testing.T, schema string, partition []string, conf map[string]string) *deltawriter.Table {
	t.Helper()
	ctx := context.Background()
	st, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{"id": "5f2c0b2e-6d0b-4b6f-9d38-1f4e7c1a2b3c", "format": map[string]any{"provider": "parquet", "options": map[string]any{}},
		"schemaString": schema, "partitionColumns": partition, "configuration": conf, "createdTime": 1}
	var lines []string
	for _, a := range []map[string]any{
		{"protocol": map[string]any{"minReaderVersion": 2, "minWriterVersion": 5}},
		{"metaData": meta},
		{"commitInfo": map[string]any{"operation": "CREATE TABLE", "timestamp": 1}},
	} {
		b, _ := json.Marshal(a)
		lines = append(lines, string(b))
	}
	if err := st.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte(strings.Join(lines, "\n")+"\n")); err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// TestColumnChangesRefused: every refusal, with its exact message, and nothing committed.
func TestColumnChangesRefused(t *testing.T) {
	ctx := context.Background()
	f := func(name, typ string, id int, extra string) string {
		return fmt.Sprintf(`{"name":%q,"type":%s,"nullable":true,"metadata":{"delta.columnMapping.id":%d,"delta.columnMapping.physicalName":"col-%d"%s}}`, name, typ, id, id, extra)
	}
	mapped := `{"type":"struct","fields":[` + strings.Join([]string{
		f("order_id", `"long"`, 1, ""),
		f("amount", `"double"`, 2, ""),
		f("created_at", `"timestamp"`, 3, ""),
		f("day", `"date"`, 4, `,"delta.generationExpression":"CAST(created_at AS DATE)"`),
		f("s", `{"type":"struct","fields":[`+f("only", `"string"`, 6, "")+`]}`, 5, ""),
		f("p", `"string"`, 7, ""),
		f("tier", `"string"`, 8, ""),
	}, ",") + `]}`
	conf := map[string]string{"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "8", "delta.constraints.amount_pos": "amount >= 0"}
	rn := func(s string) Alter { r, _ := ParseRename(s); return Alter{RenameColumns: []RenameColumn{r}} }
	dr := func(ss ...string) Alter {
		var a Alter
		for _, s := range ss {
			p, _ := ParseColumnPath(s)
			a.DropColumns = append(a.DropColumns, p)
		}
		return a
	}
	mv := func(s string) Alter { m, _ := ParseMove(s); return Alter{MoveColumns: []MoveColumn{m}} }
	const partitionMsg = "it is a partition column; Delta does not rename or drop partition columns (repartition the table with Spark: CREATE TABLE … AS SELECT)"
	for _, tc := range []struct {
		name  string
		plain bool // on a table without column mapping
		a     Alter
		want  string
	}{
		{"rename without column mapping", true, rn("order_id TO id"), "rename column needs column mapping, which this table does not have (Parquet columns are found by name without it); run `ingestd table alter --table URI --enable-column-mapping name` first (a protocol upgrade to reader 2 / writer 5 that readers older than Delta 1.2 cannot follow)"},
		{"drop without column mapping", true, dr("qty"), "drop column needs column mapping, which this table does not have (Parquet columns are found by name without it); run `ingestd table alter --table URI --enable-column-mapping name` first (a protocol upgrade to reader 2 / writer 5 that readers older than Delta 1.2 cannot follow)"},
		{"id mode", true, Alter{EnableColumnMapping: "id"}, `enable column mapping: mode "id": Delta changes a table's mapping mode only from none to name (id mode is set when a table is created); use --enable-column-mapping name`},
		{"already enabled", false, Alter{EnableColumnMapping: "name"}, "enable column mapping: the table already uses column mapping mode name"},
		{"the property instead of the flag", true, Alter{SetProperties: map[string]string{"delta.columnMapping.mode": "name"}}, "set property delta.columnMapping.mode: use --enable-column-mapping name, which also gives every column its id and physical name and upgrades the protocol"},
		{"rename a partition column", false, rn("P TO q"), "rename column P: " + partitionMsg},
		{"drop a partition column", false, dr("p"), "drop column p: " + partitionMsg},
		{"rename a column a generated column uses", false, rn("created_at TO ts"), "rename column created_at: generated column day (GENERATED ALWAYS AS (CAST(created_at AS DATE))) uses it; drop that first"},
		{"drop a column a CHECK constraint uses", false, dr("tier", "Amount"), "drop column Amount: CHECK constraint amount_pos (amount >= 0) uses it; drop that first"},
		{"rename to an existing name, other case", false, rn("tier TO Order_ID"), "rename column tier TO Order_ID: the table already has a column order_id (names match ignoring case)"},
		{"drop the last field of a struct", false, dr("s.only"), "drop column s.only: it is the last field of struct s; drop s instead"},
		{"drop an unknown column", false, dr("nope"), "drop column nope: no such column"},
		{"rename an unknown nested column", false, rn("s.nope TO x"), "rename column s.nope: no such column"},
		{"rename below a non-struct", false, rn("tier.x TO y"), "rename column: column tier.x: tier is string, not a struct"},
		{"move after an unknown column", false, mv("tier AFTER nope"), "move column tier AFTER nope: no such column nope"},
		{"move an unknown column", false, mv("nope FIRST"), "move column nope: no such column"},
		{"valid rename then a refused drop commits nothing", false, Alter{RenameColumns: rn("tier TO level").RenameColumns, DropColumns: dr("p").DropColumns}, "drop column p: " + partitionMsg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tbl *deltawriter.Table
			if tc.plain {
				tbl, _ = newTable(t, ordersSchema)
			} else {
				tbl = writeLog(t, mapped, []string{"p"}, conf)
			}
			_, err := Apply(ctx, tbl, tc.a)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error\n got %v\nwant %s", err, tc.want)
			}
			if snap, _ := tbl.Snapshot(ctx); snap.Version != 0 {
				t.Errorf("a refused alter committed: version %d", snap.Version)
			}
		})
	}
	// The last column of a table.
	tbl := writeLog(t, `{"type":"struct","fields":[`+f("a", `"long"`, 1, "")+`]}`, nil, map[string]string{"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "1"})
	if _, err := Apply(ctx, tbl, dr("a")); err == nil || err.Error() != "drop column a: it is the table's last column; a Delta table needs at least one" {
		t.Errorf("drop the last column: %v", err)
	}
}

func TestParseColumnOps(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a TO b", "{[a] b}"}, {"s.a to b", "{[s a] b}"}, {"s.a TO s.b", "{[s a] b}"}, {"`a b`.c TO `d.e`", "{[a b c] d.e}"},
	} {
		r, err := ParseRename(tc.in)
		if err != nil || fmt.Sprint(r) != tc.want {
			t.Errorf("ParseRename(%q) = %v, %v; want %s", tc.in, r, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"a FIRST", "{[a] }"}, {"s.a after b", "{[s a] b}"}, {"s.a AFTER s.b", "{[s a] b}"},
	} {
		m, err := ParseMove(tc.in)
		if err != nil || fmt.Sprint(m) != tc.want {
			t.Errorf("ParseMove(%q) = %v, %v; want %s", tc.in, m, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"a", `parse rename "a": write 'column TO new_name' (nested: 's.a TO b')`},
		{"s.a TO t.b", `parse rename "s.a TO t.b": a column stays in its struct; write 'column TO new_name'`},
		{"a TO b c", `parse rename "a TO b c": the new name must be one name (quote dots and spaces with backticks)`},
		{"a LAST", `parse move "a LAST": write 'column FIRST' or 'column AFTER other_column'`},
		{"s.a AFTER t.b", `parse move "s.a AFTER t.b": a column moves within its struct; AFTER names a sibling`},
	} {
		var err error
		if strings.HasPrefix(tc.want, "parse rename") {
			_, err = ParseRename(tc.in)
		} else {
			_, err = ParseMove(tc.in)
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %s", tc.in, err, tc.want)
		}
	}
}

// TestMoveColumnWithoutColumnMapping: reordering needs no column mapping (Delta allows
// it: Parquet columns are found by name, not position); nested fields move within their
// struct.
func TestMoveColumnWithoutColumnMapping(t *testing.T) {
	ctx := context.Background()
	tbl, st := newTable(t, ordersSchema)
	m1, _ := ParseMove("qty FIRST")
	m2, _ := ParseMove("customer AFTER order_id")
	if _, err := Apply(ctx, tbl, Alter{MoveColumns: []MoveColumn{m1, m2}}); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"struct","fields":[{"name":"qty","type":"integer","nullable":true,"metadata":{}},{"name":"order_id","type":"long","nullable":true,"metadata":{}},{"name":"customer","type":{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`
	if got := schemaJSON(t, tbl); got != want {
		t.Errorf("schema\n got %s\nwant %s", got, want)
	}
	c := commitJSON(t, st, 2)
	if got := fmt.Sprint(c["commitInfo"]["operationParameters"]); got != `map[column:{"metadata":{},"name":"customer","nullable":true,"type":{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}}]}} position:AFTER order_id]` {
		t.Errorf("parameters %s", got)
	}
}

// TestRenameDropFollowStatsColumns: delta.dataSkippingStatsColumns names logical columns;
// rename and drop edit it as Spark does (RENAME COLUMN a TO a2 turns "a,b" into "a2,b";
// DROP COLUMNS (b) into "a2").
func TestRenameDropFollowStatsColumns(t *testing.T) {
	ctx := context.Background()
	f := func(name, typ string, id int) string {
		return fmt.Sprintf(`{"name":%q,"type":%s,"nullable":true,"metadata":{"delta.columnMapping.id":%d,"delta.columnMapping.physicalName":"col-%d"}}`, name, typ, id, id)
	}
	schema := `{"type":"struct","fields":[` + f("a", `"long"`, 1) + "," + f("b c", `"string"`, 2) + "," +
		f("s", `{"type":"struct","fields":[`+f("x", `"long"`, 4)+","+f("z", `"long"`, 5)+`]}`, 3) + `]}`
	tbl := writeLog(t, schema, nil, map[string]string{"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "5",
		"delta.dataSkippingStatsColumns": "a,`b c`,s.x"})
	r1, _ := ParseRename("a TO a2")
	r2, _ := ParseRename("s.x TO y")
	d, _ := ParseColumnPath("`b c`")
	if _, err := Apply(ctx, tbl, Alter{RenameColumns: []RenameColumn{r1, r2}}); err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	if got := snap.Metadata.Configuration["delta.dataSkippingStatsColumns"]; got != "a2,`b c`,s.y" {
		t.Errorf("after the renames: %q", got)
	}
	if _, err := Apply(ctx, tbl, Alter{DropColumns: [][]string{d}}); err != nil {
		t.Fatal(err)
	}
	snap, _ = tbl.Snapshot(ctx)
	if got := snap.Metadata.Configuration["delta.dataSkippingStatsColumns"]; got != "a2,s.y" {
		t.Errorf("after the drop: %q", got)
	}
}
