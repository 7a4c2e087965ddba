package rowfill

import (
	"strings"
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
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
		cfg := modeConfig(t, "  mode: upsert\n  key: [id]\n  key_format: string\n  delete_when: \""+c.expr+"\"") // delete_when on line 10
		_, err := newKeyFill(cfg, schema, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("delete_when %q: error %v, want it to hold %q", c.expr, err, c.want)
		}
	}
}
