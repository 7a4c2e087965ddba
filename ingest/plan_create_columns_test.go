package ingest

import (
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/internal/configtest"
	"github.com/ingestd/ingestd/ingest/rowfill"
	"github.com/ingestd/ingestd/schemaguard"
)

// TestCreateRefusesMissingColumnsNamingLine: creating a table whose partition_by names a
// column neither the writer schema nor the configuration provides, or whose generated
// column reads a Kafka column table.kafka_columns does not list, is refused naming the
// pipeline file's line and the fix (not a bare "not a top-level column" from the log
// layer).
func TestCreateRefusesMissingColumnsNamingLine(t *testing.T) {
	writer := &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "order_id", Type: deltalog.Long, Nullable: true}, {Name: "created_at", Type: deltalog.Timestamp, Nullable: true}}}
	for _, c := range []struct {
		name, table string
		want        []string
	}{
		{"partition column missing", "  partition_by: [nope]\n", []string{"p.yaml:7: table.partition_by: column \"nope\"", "fix: "}},
		{"unlisted Kafka source", "  partition_by: [d]\n  generated_columns: {d: \"DATE(_kafka_timestamp)\"}\n",
			[]string{"p.yaml:8: table.generated_columns.d", "_kafka_timestamp"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := strings.Replace(configtest.GeneratedColumns, "  generated_columns:\n    event_date: \"CAST(created_at AS DATE)\"\n    y: \"YEAR(created_at)\"\n", c.table, 1)
			cfgs, err := config.Load(configtest.Write(t, body))
			if err != nil {
				t.Fatal(err)
			}
			cfg := cfgs[0]
			s := writer.Clone()
			if f := rowfill.GeneratedCreateColumns(cfg); f != nil {
				s = f(s)
			}
			_, _, err = commitSchema(cfg, tableState{version: -1}, schemaguard.BatchPlan{Base: s, Schema: s, Create: true}, nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
		})
	}
}
