package tableops

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

func newTable(t *testing.T, schema string) (*deltawriter.Table, storage.Store) {
	t.Helper()
	return newTableWith(t, schema, nil, "")
}

// newTableWith creates a local table of schema (JSON), partitioned by partCols, with
// column mapping mode colMap ("" or "name"), by one CREATE TABLE commit.
func newTableWith(t *testing.T, schema string, partCols []string, colMap string) (*deltawriter.Table, storage.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	s, err := deltalog.ParseSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "orders", Schema: s, PartitionColumns: partCols, ColumnMapping: colMap})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: -1, Protocol: create.Protocol, Metadata: create.Metadata, Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
	return tbl, st
}

const ordersSchema = `{"type":"struct","fields":[{"name":"order_id","type":"long","nullable":true,"metadata":{}},{"name":"customer","type":{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"qty","type":"integer","nullable":true,"metadata":{}}]}`

func TestAlterAddWidenPropertiesHistory(t *testing.T) {
	ctx := context.Background()
	tbl, st := newTable(t, ordersSchema)
	a := Alter{EnableFeatures: []string{"typeWidening"}, SetProperties: map[string]string{"delta.checkpointInterval": "5"}}
	for _, c := range []string{"channel STRING", "customer.tier STRING"} {
		cd, err := ParseColumnDef(c)
		if err != nil {
			t.Fatal(err)
		}
		a.AddColumns = append(a.AddColumns, cd)
	}
	w, _ := ParseColumnDef("qty BIGINT")
	a.Widen = []ColumnDef{w}
	res, err := Apply(ctx, tbl, a)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, r := range res {
		ops = append(ops, r.Operation)
	}
	if got := strings.Join(ops, ","); got != "UPGRADE PROTOCOL,SET TBLPROPERTIES,ADD COLUMNS,CHANGE COLUMN" || res[3].Version != 4 {
		t.Fatalf("commits %s (last version %d)", got, res[3].Version)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(snap.Schema)
	want := `{"type":"struct","fields":[{"name":"order_id","type":"long","nullable":true,"metadata":{}},{"name":"customer","type":{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}},{"name":"tier","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"qty","type":"long","nullable":true,"metadata":{"delta.typeChanges":[{"fromType":"integer","toType":"long"}]}},{"name":"channel","type":"string","nullable":true,"metadata":{}}]}`
	if string(b) != want {
		t.Errorf("schema\n got %s\nwant %s", b, want)
	}
	if snap.Metadata.Configuration["delta.enableTypeWidening"] != "true" || snap.Metadata.Configuration["delta.checkpointInterval"] != "5" ||
		!slices.Contains(snap.Protocol.WriterFeatures, "typeWidening") || !slices.Contains(snap.Protocol.ReaderFeatures, "typeWidening") || snap.Protocol.MinReaderVersion != 3 {
		t.Errorf("protocol %+v configuration %v", snap.Protocol, snap.Metadata.Configuration)
	}
	hist, err := History(ctx, st, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Version != 4 || hist[0].Timestamp.IsZero() || hist[0].Operation != "CHANGE COLUMN" || hist[1].Operation != "ADD COLUMNS" ||
		!strings.Contains(hist[1].Parameters["columns"], `"customer.tier"`) {
		t.Errorf("history %+v", hist)
	}
	var out bytes.Buffer
	WriteSchema(&out, snap.Schema, snap.ColumnMapping)
	wantTree := `root
 |-- order_id: long (nullable = true)
 |-- customer: struct (nullable = true)
 |    |-- id: integer (nullable = true)
 |    |-- tier: string (nullable = true)
 |-- qty: long (nullable = true) typeChanges=[{"fromType":"integer","toType":"long"}]
 |-- channel: string (nullable = true)
`
	if out.String() != wantTree {
		t.Errorf("tree\n%s\nwant\n%s", out.String(), wantTree)
	}
	d := Describe("file:///t", snap)
	if d.Version != 4 || d.NumFiles != 0 || d.MinWriterVersion != 7 {
		t.Errorf("describe %+v", d)
	}
}

func TestAlterRefusesBeforeCommitting(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		a    func() Alter
		want string
	}{
		{"existing column, any case", func() Alter { c, _ := ParseColumnDef("ORDER_ID string"); return Alter{AddColumns: []ColumnDef{c}} }, "already has order_id"},
		{"missing parent", func() Alter { c, _ := ParseColumnDef("nope.x string"); return Alter{AddColumns: []ColumnDef{c}} }, "nope does not exist"},
		{"parent not a struct", func() Alter { c, _ := ParseColumnDef("qty.x string"); return Alter{AddColumns: []ColumnDef{c}} }, "qty is integer, not a struct"},
		{"widen without the feature", func() Alter { c, _ := ParseColumnDef("qty bigint"); return Alter{Widen: []ColumnDef{c}} }, "--enable-feature typeWidening"},
		{"narrowing", func() Alter {
			c, _ := ParseColumnDef("order_id int")
			return Alter{EnableFeatures: []string{"typeWidening"}, Widen: []ColumnDef{c}}
		}, "long → integer is not a Delta type widening"},
		{"property that needs a feature", func() Alter {
			return Alter{SetProperties: map[string]string{"delta.enableDeletionVectors": "true"}}
		}, "deletion vectors need a table feature"},
		{"boolean property that is not a boolean", func() Alter {
			return Alter{SetProperties: map[string]string{"delta.appendOnly": "maybe"}}
		}, "set property delta.appendOnly=maybe: want true or false"},
		{"checkpoint interval zero", func() Alter {
			return Alter{SetProperties: map[string]string{"delta.checkpointInterval": "0"}}
		}, "want a whole number of commits, at least 1"},
		{"constraint as a property", func() Alter {
			return Alter{SetProperties: map[string]string{"delta.constraints.Upper": "order_id > 0"}}
		}, "set property delta.constraints.Upper: CHECK constraints are added with --add-constraint 'name CHECK (expression)' (which checks the existing rows and upgrades the protocol) and dropped with --drop-constraint name"},
		{"empty constraint name as a property", func() Alter {
			return Alter{SetProperties: map[string]string{"DELTA.CONSTRAINTS.": "order_id > 0"}}
		}, "set property DELTA.CONSTRAINTS.: CHECK constraints are added with --add-constraint"},
		{"column mapping max id", func() Alter {
			return Alter{SetProperties: map[string]string{"delta.columnMapping.maxColumnId": "1"}}
		}, "set property delta.columnMapping.maxColumnId: Delta maintains it"},
		{"protocol version as a property", func() Alter {
			return Alter{SetProperties: map[string]string{"delta.minWriterVersion": "7"}}
		}, "set property delta.minWriterVersion: the protocol is not a table property"},
		{"retention without interval syntax", func() Alter {
			return Alter{SetProperties: map[string]string{"delta.logRetentionDuration": "30 days"}}
		}, `want an interval such as "interval 30 days"`},
		{"valid add then invalid widen commits nothing", func() Alter {
			a, _ := ParseColumnDef("channel string")
			w, _ := ParseColumnDef("qty string")
			return Alter{EnableFeatures: []string{"typeWidening"}, AddColumns: []ColumnDef{a}, Widen: []ColumnDef{w}}
		}, "integer → string is not a Delta type widening"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl, _ := newTable(t, ordersSchema)
			_, err := Apply(ctx, tbl, tc.a())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if snap, _ := tbl.Snapshot(ctx); snap.Version != 0 {
				t.Errorf("a refused alter committed: version %d", snap.Version)
			}
		})
	}
}

func TestAlterAddTimestampNtzUpgradesProtocol(t *testing.T) {
	ctx := context.Background()
	tbl, _ := newTable(t, ordersSchema)
	c, _ := ParseColumnDef("pickup TIMESTAMP_NTZ")
	if _, err := Apply(ctx, tbl, Alter{AddColumns: []ColumnDef{c}}); err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Snapshot(ctx)
	if !slices.Contains(snap.Protocol.ReaderFeatures, "timestampNtz") || !slices.Contains(snap.Protocol.WriterFeatures, "timestampNtz") {
		t.Errorf("protocol %+v lacks timestampNtz", snap.Protocol)
	}
}

// ALTER accepts every Delta type widening, including those evolution never applies.
func TestAlterWideningRules(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"integer", "long", true}, {"integer", "double", true}, {"long", "double", false},
		{"integer", "decimal(10,0)", true}, {"integer", "decimal(10,1)", false}, {"long", "decimal(20,0)", true},
		{"long", "integer", false}, {"string", "long", false}, {"date", "timestamp_ntz", true},
	} {
		from, _ := deltalog.ParsePrimitive(tc.from)
		to, _ := deltalog.ParsePrimitive(tc.to)
		if got := deltalog.Widening(from, to) != deltalog.WideningNone; got != tc.ok {
			t.Errorf("%s → %s: %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
}

const generatedSchema = `{"type":"struct","fields":[{"name":"order_id","type":"long","nullable":true,"metadata":{}},{"name":"created_at","type":"timestamp","nullable":true,"metadata":{}},{"name":"y","type":"integer","nullable":true,"metadata":{"delta.generationExpression":"YEAR(created_at)"}}]}`

// TestGeneratedColumnsDescribeAndAlter: describe and schema show generation expressions;
// alter cannot widen a generated column or change the zone it is computed in.
func TestGeneratedColumnsDescribeAndAlter(t *testing.T) {
	ctx := context.Background()
	tbl, _ := newTable(t, generatedSchema)
	snap, _ := tbl.Snapshot(ctx)
	d := Describe("/t", snap)
	if len(d.GeneratedColumns) != 1 || d.GeneratedColumns["y"] != "YEAR(created_at)" {
		t.Errorf("describe: generated columns %v", d.GeneratedColumns)
	}
	var out bytes.Buffer
	WriteDetail(&out, d)
	if !strings.Contains(out.String(), "generated columns: 1\n  y GENERATED ALWAYS AS (YEAR(created_at))\n") {
		t.Errorf("describe output:\n%s", out.String())
	}
	out.Reset()
	WriteSchema(&out, snap.Schema, snap.ColumnMapping)
	if !strings.Contains(out.String(), "-- y: integer (nullable = true) GENERATED ALWAYS AS (YEAR(created_at))") {
		t.Errorf("schema output:\n%s", out.String())
	}
	for _, tc := range []struct {
		name string
		a    Alter
		want string
	}{
		{"widen a generated column", func() Alter {
			c, _ := ParseColumnDef("y bigint")
			return Alter{EnableFeatures: []string{"typeWidening"}, Widen: []ColumnDef{c}}
		}(), "widen y: it is a generated column (GENERATED ALWAYS AS (YEAR(created_at)))"},
		{"change the generation zone", Alter{SetProperties: map[string]string{deltalog.PropGenerationTimeZone: "Europe/Berlin"}}, "the table has generated columns (y, …) computed in UTC"},
		{"an invalid zone", Alter{SetProperties: map[string]string{deltalog.PropGenerationTimeZone: "Nowhere/Land"}}, `ingestd.generation.timeZone="Nowhere/Land"`},
	} {
		if _, err := Apply(ctx, tbl, tc.a); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if snap, _ := tbl.Snapshot(ctx); snap.Version != 0 {
		t.Errorf("a refused alter committed: version %d", snap.Version)
	}
	if _, err := Apply(ctx, tbl, Alter{SetProperties: map[string]string{deltalog.PropGenerationTimeZone: "UTC"}}); err != nil {
		t.Errorf("setting the zone it already uses: %v", err)
	}
}
