package decode

import (
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// datagenDir holds the real-world datagen schemas (Apache-2.0, from
// confluentinc/kafka-connect-datagen, with their LICENSE).
const datagenDir = "../../testdata/avro/datagen"

var updateGolden = flag.Bool("update", false, "rewrite golden files")

// The 38 .avsc files of the datagen folder (testdata/avro/datagen of the
// repository): 37 load through StaticSchema (the raw-Avro path) into the Delta
// schemas of testdata/datagen.golden; clickstream_schema.avsc is not valid JSON (a `//`
// comment) and fails naming the file, line and column. Every valid schema then decodes
// generated records exactly as hamba/avro does.
func TestDatagenSchemas(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(datagenDir, "*.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 38 {
		t.Fatalf("%d schemas in %s, want 38", len(paths), datagenDir)
	}
	var golden strings.Builder
	for _, p := range paths {
		name := filepath.Base(p)
		ws, err := StaticSchema(p)
		if name == "clickstream_schema.avsc" {
			want := p + ":59:1: schema is not valid JSON: invalid character '/' looking for beginning of value"
			if ReasonOf(err) != ReasonSchemaParseError || err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %v, want reason schema_parse_error and %q", name, err, want)
			}
			golden.WriteString(name + ": error: " + strings.TrimPrefix(err.Error(), "decode: schema_parse_error: ") + "\n")
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if ws.DeltaErr != nil {
			t.Errorf("%s: not representable: %v", name, ws.DeltaErr)
			continue
		}
		golden.WriteString(name + ": " + ws.Delta.String() + "\n")
		pq := mustParquet(t, ws.Delta, "none")
		d, err := Compile(ws, ws.Delta, "none", pq)
		if err != nil {
			t.Errorf("%s: compile: %v", name, err)
			continue
		}
		r := rand.New(rand.NewPCG(uint64(len(name)), 42))
		for i := 0; i < 25; i++ {
			vg := &valueGen{r: r}
			vg.value(ws.Avro, 0)
			if _, diff := differential(ws, d, pq, vg.out, true); diff != nil {
				t.Fatalf("%s record %d (%x): %v", name, i, vg.out, diff)
			}
		}
	}
	const goldenPath = "testdata/datagen.golden"
	if *updateGolden {
		if err := os.WriteFile(goldenPath, []byte(golden.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if golden.String() != string(want) {
		t.Errorf("Delta schemas differ from %s (go test -run TestDatagenSchemas -update to rewrite):\n%s", goldenPath, golden.String())
	}
}
