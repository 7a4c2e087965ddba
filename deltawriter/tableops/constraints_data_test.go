package tableops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// dataFile is one data file to write: its rows keyed by logical column name (data
// columns only) and its partition values keyed by logical name (nil value = null).
type dataFile struct {
	partition map[string]*string
	rows      []map[string]any
}

// dataTable creates a table of schema (partitioned by partCols, column mapping mode
// colMap: "" or "name") and appends files through deltawriter's write path
// (ParquetSchema, RowsToColumns, WriteDataFile, Commit), one commit each. It returns the
// table and the add action of each file, in the order given.
func dataTable(t *testing.T, schema string, partCols []string, colMap string, files ...dataFile) (*deltawriter.Table, []deltalog.Add) {
	t.Helper()
	ctx := context.Background()
	tbl, st := newTableWith(t, schema, partCols, colMap)
	var adds []deltalog.Add
	for _, f := range files {
		snap, err := tbl.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		data := &deltalog.StructType{}
		isPart := map[string]bool{}
		for _, p := range partCols {
			isPart[deltalog.NameKey(p)] = true
		}
		for _, fld := range snap.Schema.Fields {
			if !isPart[deltalog.NameKey(fld.Name)] {
				data.Fields = append(data.Fields, fld)
			}
		}
		pq, err := deltawriter.ParquetSchema(data, snap.ColumnMapping)
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		for _, r := range f.rows {
			pr := map[string]any{}
			for k, v := range r {
				pr[snap.Schema.FieldByKey(k).PhysicalName(snap.ColumnMapping)] = v
			}
			rows = append(rows, pr)
		}
		cols, err := deltawriter.RowsToColumns(pq, rows)
		if err != nil {
			t.Fatal(err)
		}
		opts := snap.FileOptions()
		if len(f.partition) > 0 {
			opts.PartitionValues = map[string]*string{}
			for k, v := range f.partition {
				opts.PartitionValues[snap.Schema.FieldByKey(k).PhysicalName(snap.ColumnMapping)] = v
			}
		}
		add, err := deltawriter.WriteDataFile(ctx, st, pq, cols, len(rows), opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Adds: []deltalog.Add{add}}); err != nil {
			t.Fatal(err)
		}
		adds = append(adds, add)
	}
	return tbl, adds
}

const dataSchema = `{"type":"struct","fields":[{"name":"order_id","type":"long","nullable":true,"metadata":{}},{"name":"amount","type":"integer","nullable":true,"metadata":{}},{"name":"status","type":"string","nullable":true,"metadata":{}},{"name":"region","type":"string","nullable":true,"metadata":{}}]}`

// first returns the example of the file scanned first (scanViolations reads the files in
// path order): ea when adds[a] sorts before adds[b].
func first(adds []deltalog.Add, a, b int, ea, eb string) string {
	if adds[a].Path < adds[b].Path {
		return fmt.Sprintf(ea, adds[a].Path)
	}
	return fmt.Sprintf(eb, adds[b].Path)
}

// TestAddConstraintScansData: on tables with data (several files; plain, partitioned,
// column-mapped with physical names; NULLs), --add-constraint and --set-not-null are
// refused with the count and one example when existing rows violate them, commit nothing
// then (not even the changes of the same alter that come first), and are accepted when
// the rows satisfy them.
func TestAddConstraintScansData(t *testing.T) {
	ctx := context.Background()
	files := []dataFile{
		{partition: map[string]*string{"region": pv("eu")}, rows: []map[string]any{
			{"order_id": int64(1), "amount": int32(5), "status": "NEW"},
			{"order_id": int64(2), "amount": int32(-3), "status": nil},
			{"order_id": int64(3), "amount": nil, "status": "PAID"},
		}},
		{partition: map[string]*string{"region": pv("us")}, rows: []map[string]any{
			{"order_id": int64(4), "amount": int32(-7), "status": "NEW"},
			{"order_id": int64(5), "amount": int32(9), "status": "PAID"},
		}},
		{partition: map[string]*string{"region": pv("us")}, rows: []map[string]any{
			{"order_id": int64(6), "amount": int32(1), "status": nil},
		}},
	}
	for _, tc := range []struct {
		name     string
		partCols []string
		colMap   string
	}{
		{"plain", nil, ""},
		{"partitioned", []string{"region"}, ""},
		{"partitioned, column mapping", []string{"region"}, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := files
			if tc.partCols == nil { // region is a data column: move it into the rows
				fs = nil
				for _, f := range files {
					var rows []map[string]any
					for _, r := range f.rows {
						c := map[string]any{"region": *f.partition["region"]}
						for k, v := range r {
							c[k] = v
						}
						rows = append(rows, c)
					}
					fs = append(fs, dataFile{rows: rows})
				}
			}
			tbl, adds := dataTable(t, dataSchema, tc.partCols, tc.colMap, fs...)
			before, err := tbl.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if before.Version != 3 {
				t.Fatalf("version %d after 3 appends", before.Version)
			}
			pos, _ := ParseConstraint("Amount_Pos CHECK (amount > 0)")
			refusals := []struct {
				a    Alter
				want string
			}{
				// amount -3 and NULL in file 0, -7 in file 1: 3 rows; NULL violates (Spark: CHECK must be true).
				{Alter{SetProperties: map[string]string{"delta.checkpointInterval": "5"}, AddConstraints: []ConstraintDef{pos}},
					"add constraint amount_pos: 3 rows in " + tbl.String() + " violate the new CHECK constraint amount_pos (amount > 0), for example " +
						first(adds, 0, 1, "amount = -3 (in %s)", "amount = -7 (in %s)") + "; fix or delete them first (DELTA_NEW_CHECK_CONSTRAINT_VIOLATION)"},
				// status NULL in files 0 and 2.
				{Alter{SetNotNull: []string{"STATUS"}},
					"set not null status: 2 rows in " + tbl.String() + " violate the new NOT NULL constraint on status, for example " +
						first(adds, 0, 2, "status = NULL (in %s)", "status = NULL (in %s)") + "; fix or delete them first (DELTA_NEW_CHECK_CONSTRAINT_VIOLATION)"},
				// Two columns, one of them the partition column.
				{Alter{AddConstraints: []ConstraintDef{{Name: "eu_small", Expr: "region <> 'eu' OR order_id < 2"}}},
					"add constraint eu_small: 2 rows in " + tbl.String() + " violate the new CHECK constraint eu_small (region <> 'eu' OR order_id < 2), for example " +
						fmt.Sprintf("region = eu, order_id = 2 (in %s)", adds[0].Path) + "; fix or delete them first (DELTA_NEW_CHECK_CONSTRAINT_VIOLATION)"},
			}
			for _, r := range refusals {
				_, err := Apply(ctx, tbl, r.a)
				if err == nil || err.Error() != r.want {
					t.Errorf("Apply(%+v):\n got %v\nwant %s", r.a, err, r.want)
				}
				if snap, _ := tbl.Snapshot(ctx); snap.Version != before.Version {
					t.Errorf("a refused alter committed: version %d, want %d", snap.Version, before.Version)
				}
			}
			// Satisfied by every row: accepted, one commit each.
			ok, _ := ParseConstraint("known_region CHECK (region = 'eu' OR region = 'us')")
			nonneg, _ := ParseConstraint("id_pos CHECK (order_id > 0 AND order_id <= 6)")
			res, err := Apply(ctx, tbl, Alter{AddConstraints: []ConstraintDef{ok, nonneg}, SetNotNull: []string{"order_id", "region"}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range res {
				got = append(got, fmt.Sprintf("%d %s %s", r.Version, r.Operation, r.Detail))
			}
			want := []string{"4 ADD CONSTRAINT known_region CHECK (region = 'eu' OR region = 'us')", "5 ADD CONSTRAINT id_pos CHECK (order_id > 0 AND order_id <= 6)",
				"6 CHANGE COLUMN order_id SET NOT NULL", "7 CHANGE COLUMN region SET NOT NULL"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("commits\n got %q\nwant %q", got, want)
			}
			snap, _ := tbl.Snapshot(ctx)
			if snap.Schema.FieldByKey("order_id").Nullable || snap.Schema.FieldByKey("region").Nullable || !snap.Schema.FieldByKey("status").Nullable ||
				snap.Metadata.Configuration["delta.constraints.known_region"] != "region = 'eu' OR region = 'us'" {
				t.Errorf("schema %s configuration %v", snap.Metadata.SchemaString, snap.Metadata.Configuration)
			}
		})
	}
}

// TestConstraintCommitsLikeSpark: the commitInfo of each constraint change is Spark's
// (Delta 4.4 on Spark 4.2, read from its _delta_log for the same statements on a
// reader 1 / writer 2 table with data): ADD CONSTRAINT read the data (isBlindAppend
// false), DROP CONSTRAINT and DROP NOT NULL did not (true), all with operationMetrics {};
// the actions are those Spark writes. Spark refuses SET NOT NULL on a nullable column
// ("Cannot change nullable column to non-nullable"); ingestd's scans the data like ADD
// CONSTRAINT, so its commit has isBlindAppend false too.
func TestConstraintCommitsLikeSpark(t *testing.T) {
	ctx := context.Background()
	tbl, _ := dataTable(t, dataSchema, nil, "", dataFile{rows: []map[string]any{
		{"order_id": int64(1), "amount": int32(5), "status": "a", "region": "eu"},
		{"order_id": int64(2), "amount": int32(7), "status": "b", "region": "us"},
	}})
	st := tbl.Store()
	if got := fmt.Sprint(commitJSON(t, st, 0)["protocol"]); got != "map[minReaderVersion:1 minWriterVersion:2]" {
		t.Fatalf("protocol of the new table %s", got)
	}
	pos, _ := ParseConstraint("amount_pos CHECK (amount > 0)")
	steps := []Alter{{AddConstraints: []ConstraintDef{pos}}, {DropConstraints: []string{"amount_pos"}}, {SetNotNull: []string{"order_id"}}, {DropNotNull: []string{"order_id"}}}
	want := []struct{ commitInfo, actions string }{
		{`map[engineInfo:ingestd table alter isBlindAppend:false isolationLevel:Serializable operation:ADD CONSTRAINT operationMetrics:map[] operationParameters:map[expr:amount > 0 name:amount_pos] readVersion:1]`,
			`commitInfo metaData protocol map[minReaderVersion:1 minWriterVersion:3] map[delta.constraints.amount_pos:amount > 0]`},
		{`map[engineInfo:ingestd table alter isBlindAppend:true isolationLevel:Serializable operation:DROP CONSTRAINT operationMetrics:map[] operationParameters:map[existed:true expr:amount > 0 name:amount_pos] readVersion:2]`,
			`commitInfo metaData <nil> map[]`},
		{`map[engineInfo:ingestd table alter isBlindAppend:false isolationLevel:Serializable operation:CHANGE COLUMN operationMetrics:map[] operationParameters:map[column:{"name":"order_id","type":"long","nullable":false,"metadata":{}}] readVersion:3]`,
			`commitInfo metaData <nil> map[]`},
		{`map[engineInfo:ingestd table alter isBlindAppend:true isolationLevel:Serializable operation:CHANGE COLUMN operationMetrics:map[] operationParameters:map[column:{"name":"order_id","type":"long","nullable":true,"metadata":{}}] readVersion:4]`,
			`commitInfo metaData <nil> map[]`},
	}
	for i, a := range steps {
		res, err := Apply(ctx, tbl, a)
		if err != nil {
			t.Fatal(err)
		}
		c := commitJSON(t, st, res[0].Version)
		ci := c["commitInfo"]
		if _, ok := ci["txnId"].(string); !ok || ci["timestamp"] == nil {
			t.Errorf("commit %d: commitInfo without txnId or timestamp: %v", res[0].Version, ci)
		}
		delete(ci, "txnId")
		delete(ci, "timestamp")
		if got := fmt.Sprint(ci); got != want[i].commitInfo {
			t.Errorf("commit %d commitInfo\n got %s\nwant %s", res[0].Version, got, want[i].commitInfo)
		}
		var keys []string
		for k := range c {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var proto any
		if p, ok := c["protocol"]; ok {
			proto = p
		}
		if got := fmt.Sprint(strings.Join(keys, " "), " ", proto, " ", c["metaData"]["configuration"]); got != want[i].actions {
			t.Errorf("commit %d actions %s, want %s", res[0].Version, got, want[i].actions)
		}
	}
}

// TestConstraintStepScansNewFiles: a file added after Apply's dry-run scan (by another
// writer) is scanned by the commit step, and only that file is: its violations refuse
// the change with their count.
func TestConstraintStepScansNewFiles(t *testing.T) {
	ctx := context.Background()
	tbl, adds := dataTable(t, dataSchema, nil, "",
		dataFile{rows: []map[string]any{{"order_id": int64(1), "amount": int32(-1), "status": "a", "region": "eu"}}}, // scanned by the dry run
		dataFile{rows: []map[string]any{{"order_id": int64(2), "amount": int32(-2), "status": nil, "region": "us"}}})
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale := *snap // the dry run's snapshot: only the first file
	var kept []deltalog.Add
	for _, a := range snap.Files.All() {
		if a.Path == adds[0].Path {
			kept = append(kept, a)
		}
	}
	stale.Files = deltawriter.NewFileSet(kept...)
	if stale.Files.Len() != 1 {
		t.Fatalf("files %v", snap.Files)
	}
	step := func(op string, build func(s *deltawriter.Snapshot) (deltawriter.Commit, string, error)) error {
		s, err := tbl.Snapshot(ctx)
		if err != nil {
			return err
		}
		c, _, err := build(s)
		if err != nil {
			return err
		}
		c.ReadVersion, c.Operation = s.Version, op
		_, err = tbl.Commit(ctx, c)
		return err
	}
	pos, _ := ParseConstraint("amount_pos CHECK (amount > 0)")
	for _, tc := range []struct {
		a    Alter
		want string
	}{
		{Alter{AddConstraints: []ConstraintDef{pos}}, "add constraint amount_pos: 1 row in " + tbl.String() +
			" violates the new CHECK constraint amount_pos (amount > 0), for example amount = -2 (in " + adds[1].Path + "); fix or delete them first (DELTA_NEW_CHECK_CONSTRAINT_VIOLATION)"},
		{Alter{SetNotNull: []string{"status"}}, "set not null status: 1 row in " + tbl.String() +
			" violates the new NOT NULL constraint on status, for example status = NULL (in " + adds[1].Path + "); fix or delete them first (DELTA_NEW_CHECK_CONSTRAINT_VIOLATION)"},
	} {
		if err := applyConstraints(ctx, tbl, &stale, tc.a, step); err == nil || err.Error() != tc.want {
			t.Errorf("applyConstraints(%+v):\n got %v\nwant %s", tc.a, err, tc.want)
		}
	}
	if s, _ := tbl.Snapshot(ctx); s.Version != snap.Version {
		t.Errorf("a refused step committed: version %d, want %d", s.Version, snap.Version)
	}
}
