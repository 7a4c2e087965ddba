package rowfill

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/internal/configtest"
)

func modeConfig(t *testing.T, table string) *config.Config {
	t.Helper()
	cfgs, err := config.Load(configtest.Write(t, `name: customers
kafka: {brokers: ["k:9092"], topics: [customers]}
schema_registry: {url: "http://r:8081"}
table:
  uri: "file:///tmp/t"
  create: true
`+table+`
schema: {policy: evolve}
dead_letter: {topic: customers.dlq}
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfgs[0]
}

// An existing table without the columns the mode fills, with them in another type, or,
// for a changelog, with a NOT NULL column other than the key, is refused naming the
// columns and the fix.
func TestCheckKeyedModeColumns(t *testing.T) {
	field := func(name string, typ deltalog.DataType, nullable bool) *deltalog.StructField {
		return &deltalog.StructField{Name: name, Type: typ, Nullable: nullable}
	}
	changelog := modeConfig(t, "  mode: changelog\n  key: [id]")
	soft := modeConfig(t, "  mode: upsert\n  key: [id]\n  deletes: soft")
	hard := modeConfig(t, "  mode: upsert\n  key: [id]")
	for _, c := range []struct {
		name   string
		cfg    *config.Config
		fields []*deltalog.StructField
		want   string
	}{
		{"changelog missing both", changelog, []*deltalog.StructField{field("id", deltalog.Long, false)},
			"p.yaml:7: table.mode changelog fills columns the table lacks: _change_operation STRING, _change_sequence BIGINT (fix: ALTER TABLE <table> ADD COLUMNS (_change_operation STRING, _change_sequence BIGINT), or write a new table: ingestd adds them when it creates the table)"},
		{"changelog wrong type", changelog, []*deltalog.StructField{field("id", deltalog.Long, false), field("_change_operation", deltalog.String, true), field("_change_sequence", deltalog.Integer, true)},
			"p.yaml:7: table.mode changelog fills columns the table holds in another type: _change_sequence is integer, not long (fix: write a new table, or rename those columns)"},
		{"changelog not null", changelog, []*deltalog.StructField{field("id", deltalog.Long, false), field("v", deltalog.String, false), field("w", deltalog.Long, false),
			field("_change_operation", deltalog.String, true), field("_change_sequence", deltalog.Long, true)},
			"p.yaml:7: table.mode changelog writes a tombstone as a row holding only its key, but columns v, w are NOT NULL (fix: ALTER TABLE <table> ALTER COLUMN <column> DROP NOT NULL for each; a table ingestd creates has nullable columns)"},
		{"changelog fits", changelog, []*deltalog.StructField{field("id", deltalog.Long, false), field("v", deltalog.String, true),
			field("_change_operation", deltalog.String, true), field("_change_sequence", deltalog.Long, true)}, ""},
		{"soft missing one", soft, []*deltalog.StructField{field("id", deltalog.Long, false), field("v", deltalog.String, false), field("_deleted", deltalog.Boolean, true)},
			"p.yaml:9: table.deletes soft fills columns the table lacks: _deleted_sequence BIGINT (fix: ALTER TABLE <table> ADD COLUMNS (_deleted_sequence BIGINT), or write a new table: ingestd adds them when it creates the table)"},
		{"hard needs none", hard, []*deltalog.StructField{field("id", deltalog.Long, false), field("v", deltalog.String, false)}, ""},
	} {
		err := CheckKeyed(c.cfg, &deltalog.StructType{Fields: c.fields})
		got := ""
		if err != nil {
			got = strings.TrimPrefix(err.Error(), filepath.Dir(c.cfg.File)+string(filepath.Separator))
		}
		if got != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, got, c.want)
		}
	}
	if got := ModeColumns(hard); got != nil {
		t.Errorf("hard deletes fill %v, want none", got)
	}
	if got := strings.Join(ModeColumns(soft), ","); got != "_deleted,_deleted_sequence" {
		t.Errorf("soft deletes fill %s", got)
	}
}

// Set replaces one row's value in place: a dense word stays dense, a null turns the
// column levelled with the other rows' values intact.
func TestColumnSetKeepsOtherRows(t *testing.T) {
	pq := parquet.NewSchema("r", parquet.Group{"n": parquet.Optional(parquet.Leaf(parquet.Int64Type))})
	leaf := column.Leaves(pq)[0]
	var c column.Column
	c.Reset(leaf)
	for _, n := range []int64{1, 2, 3} {
		c.Append(parquet.Int64Value(n).Level(0, 1, 0))
	}
	c.Set(1, parquet.Int64Value(20).Level(0, 1, 0))
	if !c.IsDense() || c.At(0).Int64() != 1 || c.At(1).Int64() != 20 || c.At(2).Int64() != 3 {
		t.Fatalf("after Set(1, 20): dense %v, values %v %v %v; want dense 1 20 3", c.IsDense(), c.At(0), c.At(1), c.At(2))
	}
	c.Set(2, parquet.NullValue().Level(0, 0, 0))
	if c.IsDense() || c.At(0).Int64() != 1 || c.At(1).Int64() != 20 || !c.At(2).IsNull() {
		t.Fatalf("after Set(2, NULL): dense %v, values %v %v %v; want levelled 1 20 NULL", c.IsDense(), c.At(0), c.At(1), c.At(2))
	}
}
