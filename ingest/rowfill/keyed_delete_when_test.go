package rowfill

import (
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/internal/configtest"
)

// A table.delete_when that does not compile, or is not boolean, fails naming the file and
// line of the key, like the other keyed-table keys.
func TestKeyedDeleteWhenErrorsNameFileAndLine(t *testing.T) {
	schema := &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "id", Type: deltalog.String, Nullable: true}, {Name: "n", Type: deltalog.Long, Nullable: true}}}
	for _, c := range []struct{ expr, want string }{
		{"n + 1", `p.yaml:10: table.delete_when: "n + 1" is of type long, not boolean`},
		{"nosuch = 1", `p.yaml:10: table.delete_when: compile "nosuch = 1": bind expression`},
	} {
		cfgs, err := config.Load(configtest.Write(t, `name: customers
kafka: {brokers: ["k:9092"], topics: [customers]}
schema_registry: {url: "http://r:8081"}
table:
  uri: "file:///tmp/t"
  create: true
  mode: upsert
  key: [id]
  key_format: string
  delete_when: "`+c.expr+`"
schema: {policy: evolve}
dead_letter: {topic: customers.dlq}
`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = newKeyFill(cfgs[0], schema, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("delete_when %q: error %v, want it to hold %q", c.expr, err, c.want)
		}
	}
}
