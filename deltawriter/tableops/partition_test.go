package tableops

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// partitionedTable creates a table partitioned by (qty, ts) and adds files with the
// given partition values (as other writers wrote them).
func partitionedTable(t *testing.T, pvs ...map[string]*string) (*deltawriter.Table, storage.Store) {
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
	s, err := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"order_id","type":"long","nullable":true,"metadata":{}},{"name":"qty","type":"integer","nullable":true,"metadata":{}},{"name":"ts","type":"timestamp","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "orders", Schema: s, PartitionColumns: []string{"qty", "ts"},
		Properties: map[string]string{deltalog.PropEnableTypeWidening: "true"}, Enable: []string{deltalog.FeatureTypeWidening}})
	if err != nil {
		t.Fatal(err)
	}
	c := deltawriter.Commit{ReadVersion: -1, Protocol: create.Protocol, Metadata: create.Metadata, Operation: "CREATE TABLE"}
	for i, pv := range pvs {
		c.Adds = append(c.Adds, deltalog.Add{Path: "f" + string(rune('a'+i)) + ".parquet", PartitionValues: pv, Size: 10, DataChange: true})
	}
	if _, err := tbl.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	return tbl, st
}

func pv(s string) *string { return &s }

// TestAlterPartitionWidening: table alter widens a partition column only where its
// partition values keep their form (integer widening: qty int → bigint, the rule evolve
// applies too); int → double would change it and is refused, committing nothing. The
// files' partition values are untouched and read as the wider type.
func TestAlterPartitionWidening(t *testing.T) {
	ctx := context.Background()
	tbl, _ := partitionedTable(t, map[string]*string{"qty": pv("7"), "ts": nil})
	c, _ := ParseColumnDef("QTY double")
	_, err := Apply(ctx, tbl, Alter{Widen: []ColumnDef{c}})
	want := "widen QTY: it is a partition column, whose values are serialised in every file's partitionValues; only byte→short→int→long keep that form (repartition the table with Spark for other types: CREATE TABLE … AS SELECT)"
	if err == nil || err.Error() != want {
		t.Fatalf("widen a partition column to double: %v\nwant %s", err, want)
	}
	if snap, _ := tbl.Snapshot(ctx); snap.Version != 0 {
		t.Errorf("a refused alter committed: version %d", snap.Version)
	}
	c, _ = ParseColumnDef("QTY bigint")
	if _, err := Apply(ctx, tbl, Alter{Widen: []ColumnDef{c}}); err != nil {
		t.Fatalf("widen partition column qty int → bigint: %v", err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f := snap.Schema.Field("qty"); f == nil || f.Type != deltalog.Long {
		t.Fatalf("qty after the widening: %+v", f)
	}
	if got := fmt.Sprint(snap.Metadata.PartitionColumns); got != "[qty ts]" {
		t.Errorf("partition columns %s", got)
	}
	// An ordinary column still widens.
	c, _ = ParseColumnDef("order_id decimal(20,0)")
	if _, err := Apply(ctx, tbl, Alter{Widen: []ColumnDef{c}}); err != nil {
		t.Fatalf("widen an ordinary column of a partitioned table: %v", err)
	}
}

// TestDescribePartitions: in a table whose older files Spark wrote before Delta 3.3, the
// legacy zone-less timestamp "2024-06-15 19:30:45" and the ISO form
// "2024-06-15T19:30:45.000000Z" of the same instant are one partition; the null partition
// is listed; counts exact.
func TestDescribePartitions(t *testing.T) {
	ctx := context.Background()
	tbl, _ := partitionedTable(t,
		map[string]*string{"qty": pv("1"), "ts": pv("2024-06-15 19:30:45")},
		map[string]*string{"qty": pv("1"), "ts": pv("2024-06-15T19:30:45.000000Z")},
		map[string]*string{"qty": nil, "ts": nil},
		map[string]*string{"qty": pv("1"), "ts": pv("2024-06-15 19:30:46")},
	)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := Describe("t", snap)
	var b bytes.Buffer
	WriteDetail(&b, d)
	out := b.String()
	for _, want := range []string{"partition columns: [qty ts]\n", "partitions:        3\n",
		"  qty=1, ts=2024-06-15T19:30:45.000000Z: 2 files (20 bytes)\n",
		"  qty=1, ts=2024-06-15T19:30:46.000000Z: 1 files (10 bytes)\n",
		"  qty=null, ts=null: 1 files (10 bytes)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe:\n%s\nwant the line %q", out, want)
		}
	}
	// A table whose legacy values were written in a US Pacific session says so.
	if _, err := Apply(ctx, tbl, Alter{SetProperties: map[string]string{deltalog.PropLegacyTimestampZone: "Mars/Olympus"}}); err == nil || !strings.Contains(err.Error(), "IANA time zone") {
		t.Fatalf("an unknown zone: %v; want a refusal", err)
	}
	if _, err := Apply(ctx, tbl, Alter{SetProperties: map[string]string{deltalog.PropLegacyTimestampZone: "America/Los_Angeles"}}); err != nil {
		t.Fatal(err)
	}
	snap, _ = tbl.Snapshot(ctx)
	b.Reset()
	WriteDetail(&b, Describe("t", snap))
	for _, want := range []string{"partitions:        4\n", "  qty=1, ts=2024-06-16T02:30:45.000000Z: 1 files (10 bytes)\n", "  qty=1, ts=2024-06-15T19:30:45.000000Z: 1 files (10 bytes)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe with %s:\n%s\nwant the line %q", deltalog.PropLegacyTimestampZone, b.String(), want)
		}
	}
}
