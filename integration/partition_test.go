package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Partitioned writes end to end (docs/tables.md, "Partitioned tables"): records produced
// with their writer schema through the real registry into the real broker, one `ingestd
// run` with the process time zone set to Australia/Melbourne (so that any use of local
// time shows), the log checked action by action, and every table read back by Spark and
// delta-rs.

// produceAvro registers schemaText under <topic>-value and produces rows to partition 0
// of topic, Confluent-framed, in order.
func produceAvro(t *testing.T, s stack, topic, schemaText string, rows []map[string]any) {
	t.Helper()
	ctx := context.Background()
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := reg.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: schemaText, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("register schema for %s: %v", topic, err)
	}
	schema, err := avro.ParseWithCache(schemaText, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	var hdr sr.ConfluentHeader
	var recs []*kgo.Record
	for _, row := range rows {
		body, err := avro.Marshal(schema, row)
		if err != nil {
			t.Fatalf("encode %v: %v", row, err)
		}
		framed, _ := hdr.AppendEncode(nil, ss.ID, nil)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: append(framed, body...)})
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// partPipelineYAML is a pipeline writing topic into the table at path, partitioned by
// partitionBy (a YAML list body).
func partPipelineYAML(name string, s stack, topic, path, partitionBy, dlq, batch string) string {
	if batch == "" {
		batch = "{max_records: 2000, max_bytes: 64MiB, max_age: 300ms}"
	}
	return fmt.Sprintf(`name: %s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: "file://%s", create: true, partition_by: [%s]}
schema: {policy: evolve, on_incompatible: halt, allow_table_features: [timestampNtz]}
dead_letter: {topic: %s}
batch: %s
`, name, s.brokers, topic, name, time.Now().UnixNano(), s.registry, path, partitionBy, dlq, batch)
}

// logAdds returns every add action of the table's JSON commits, in version order.
func logAdds(t *testing.T, table string) []deltalog.Add {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(table, "_delta_log", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []deltalog.Add
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			var a struct {
				Add *deltalog.Add `json:"add"`
			}
			if len(line) > 0 && json.Unmarshal(line, &a) == nil && a.Add != nil {
				out = append(out, *a.Add)
			}
		}
	}
	return out
}

// partitionDirs lists the directories directly under table (not _delta_log).
func partitionDirs(t *testing.T, table string) []string {
	t.Helper()
	es, err := os.ReadDir(table)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if e.IsDir() && e.Name() != "_delta_log" {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func pvString(p *string) string {
	if p == nil {
		return "null"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(*p)
	return strings.TrimSuffix(b.String(), "\n")
}

// rowsByKey renders rows as "id → JSON of the other columns" for exact comparison.
func rowsByKey(t *testing.T, rows []map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range rows {
		id := fmt.Sprint(r["id"])
		rest := map[string]any{}
		for k, v := range r {
			if k != "id" {
				rest[k] = v
			}
		}
		b, _ := json.Marshal(rest)
		if _, dup := out[id]; dup {
			t.Errorf("id %s read twice", id)
		}
		out[id] = string(b)
	}
	return out
}

func sameRowMap(t *testing.T, who string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d\n got %v\nwant %v", who, len(got), len(want), got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: id %s = %s, want %s", who, id, got[id], w)
		}
	}
}

// c31A is table A of TestPartitionedC31C32, shipments(id bigint, region string)
// partitioned by region: the values, in row order (id = index + 1), with the expected
// add.partitionValues (pv), directory and add.path prefix. The directory is Spark's Hive
// escaping of the value; add.path is that directory as a URI (a second layer: % → %25,
// space → %20, } → %7D); "" and null are the null partition.
var c31A = []struct {
	value           *string
	pv, dir, prefix string // pv as JSON
}{
	{sp("US/East"), `"US/East"`, "region=US%2FEast", "region=US%252FEast/"},
	{sp("a:b"), `"a:b"`, "region=a%3Ab", "region=a%253Ab/"},
	{sp("x=y"), `"x=y"`, "region=x%3Dy", "region=x%253Dy/"},
	{sp("100%"), `"100%"`, "region=100%25", "region=100%2525/"},
	{sp("a b"), `"a b"`, "region=a b", "region=a%20b/"},
	{sp("R&D"), `"R&D"`, "region=R&D", "region=R&D/"},
	{sp("ID$"), `"ID$"`, "region=ID$", "region=ID$/"},
	{sp("a{b}"), `"a{b}"`, "region=a%7Bb}", "region=a%257Bb%7D/"},
	{sp("München"), `"München"`, "region=München", "region=München/"},
	{sp(" "), `" "`, "region= ", "region=%20/"},
	{sp(""), `null`, "region=__HIVE_DEFAULT_PARTITION__", "region=__HIVE_DEFAULT_PARTITION__/"},
	{nil, `null`, "region=__HIVE_DEFAULT_PARTITION__", "region=__HIVE_DEFAULT_PARTITION__/"},
	{sp("NULL"), `"NULL"`, "region=NULL", "region=NULL/"},
	// The string __HIVE_DEFAULT_PARTITION__ stays in pv, although its directory is the
	// null partition's (Spark would record NULL; Delta readers use pv): a warning is logged.
	{sp("__HIVE_DEFAULT_PARTITION__"), `"__HIVE_DEFAULT_PARTITION__"`, "region=__HIVE_DEFAULT_PARTITION__", "region=__HIVE_DEFAULT_PARTITION__/"},
	{sp("a\tb"), `"a\tb"`, "region=a%09b", "region=a%2509b/"},
}

func sp(s string) *string { return &s }

const c31ASchema = `{"type":"record","name":"Shipment","fields":[{"name":"id","type":"long"},{"name":"region","type":["null","string"],"default":null}]}`

func c31ARows(idBase int64) []map[string]any {
	var rows []map[string]any
	for i, c := range c31A {
		var v any
		if c.value != nil {
			v = *c.value
		}
		rows = append(rows, map[string]any{"id": idBase + int64(i) + 1, "region": v})
	}
	return rows
}

// c31AWant is the rows Spark and delta-rs read: the input values, "" as NULL.
func c31AWant(idBase int64) map[string]string {
	out := map[string]string{}
	for i, c := range c31A {
		var v any
		if c.value != nil && *c.value != "" {
			v = *c.value
		}
		b, _ := json.Marshal(map[string]any{"region": v})
		out[fmt.Sprint(idBase+int64(i)+1)] = string(b)
	}
	return out
}

// checkC31A checks the adds ingestd wrote for table A rows (ids idBase+1…): one per
// distinct pv, each with the exact pv, directory and add.path prefix; no stats for the
// partition column.
func checkC31A(t *testing.T, table string, adds []deltalog.Add, key string) {
	t.Helper()
	byPath := map[string]deltalog.Add{}
	for _, a := range adds {
		byPath[a.Path] = a
	}
	for _, c := range c31A {
		found := false
		for _, a := range adds {
			if !strings.HasPrefix(a.Path, c.prefix) || pvString(a.PartitionValues[key]) != c.pv {
				continue
			}
			found = true
			if len(a.PartitionValues) != 1 {
				t.Errorf("%s: partitionValues %v, want only %q", a.Path, a.PartitionValues, key)
			}
			if strings.Contains(a.Stats, `"region"`) {
				t.Errorf("%s: stats name the partition column: %s", a.Path, a.Stats)
			}
			// The object key is the directory form: decoded once from add.path.
			obj := filepath.Join(table, filepath.FromSlash(deltalog.CanonicalPath(a.Path)))
			if _, err := os.Stat(obj); err != nil || filepath.Base(filepath.Dir(obj)) != c.dir {
				t.Errorf("%q: add.path %s → object %s (%v), want it in directory %s", deref(c.value), a.Path, obj, err, c.dir)
			}
		}
		if !found {
			t.Errorf("%q: no add with pv %s and add.path prefix %s (adds: %v)", deref(c.value), c.pv, c.prefix, pathsOf(adds))
		}
	}
}

func pathsOf(adds []deltalog.Add) []string {
	var out []string
	for _, a := range adds {
		out = append(out, a.Path+" "+fmt.Sprint(pvMap(a.PartitionValues)))
	}
	return out
}

func pvMap(m map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = pvString(v)
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// TestPartitionedC31C32: partition values exactly as Spark writes and reads them. Writers
// disagreed with Spark about how a value becomes a directory name and an add.path, and
// could not read back values such as ID$, R&D or US/East (delta-io/delta-kernel-rs#2424
// describes Spark's two layers: Hive escaping, then URI encoding); Spark writes timestamp
// partition values as UTC ISO-8601 from Delta 3.3 (delta-io/delta#3378), and a pre-epoch
// timestamp_ntz value was once written a second late by truncating division
// (delta-io/delta#7287). One daemon under TZ=Australia/Melbourne writes seven tables:
//   - a (C31 table A): the 15 region values of c31A, each with its exact pv, directory and
//     add.path; "", null and the string __HIVE_DEFAULT_PARTITION__ share one directory;
//   - c (variant C): the same into a Spark table that already has files under
//     region=US%2FEast and region=a%3Ab, whose directories ingestd's files join;
//   - cm: the same into a Spark table with column mapping: pv keyed by the physical name,
//     files in random two-character directories as Spark writes them;
//   - b (C31 table B): six typed partition columns (int, long, boolean, date,
//     decimal(10,2), double) in Spark's renderings (42.00 keeps its scale, 1.0E7, -0.0 as
//     0.0, nulls as JSON null), with no partition column in add.stats;
//   - win (C32): a timestamp partition of six values (µs): UTC ISO-8601 with six fraction
//     digits, seconds by floor division before the epoch (-2342342342 →
//     1969-12-31T23:20:57.657658Z), Spark's directories (fraction without trailing zeros);
//   - ntz (variant N): the same values in a timestamp_ntz partition, zone-less;
//   - legacy (variant L): a Spark table whose add carries the zone-less value
//     "2024-06-15 19:30:45" Spark wrote before Delta 3.3, read as UTC, and ingestd's
//     append of the same instant: one partition, one directory, for ingestd's `table
//     describe`, Spark and delta-rs alike.
//
// Every table is read back by Spark and delta-rs with exactly the values produced.
func TestPartitionedC31C32(t *testing.T) {
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while the tables are written
	root := t.TempDir()
	tables := map[string]string{}
	for _, n := range []string{"a", "b", "c", "cm", "win", "ntz", "legacy"} {
		tables[n] = filepath.Join(root, n)
	}

	// Variant C, column mapping, variant L: tables Spark writes first.
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("CREATE TABLE delta.`%s` (id BIGINT, region STRING) USING delta PARTITIONED BY (region)", tables["c"])}, nil)
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("INSERT INTO delta.`%s` VALUES (101, 'US/East'), (102, 'a:b')", tables["c"])}, nil)
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("CREATE TABLE delta.`%s` (id BIGINT, region STRING) USING delta PARTITIONED BY (region) "+
		"TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')", tables["cm"])}, nil)
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("INSERT INTO delta.`%s` VALUES (101, 'US/East')", tables["cm"])}, nil)
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("CREATE TABLE delta.`%s` (id BIGINT, window_start TIMESTAMP, local_start TIMESTAMP_NTZ) USING delta PARTITIONED BY (window_start)", tables["legacy"])}, nil)
	spark.call(t, map[string]any{"op": "sql", "query": fmt.Sprintf("INSERT INTO delta.`%s` VALUES (100, TIMESTAMP '2024-06-15 19:30:45 UTC', TIMESTAMP_NTZ '2024-06-15 19:30:45')", tables["legacy"])}, nil)
	sparkAdds := map[string][]deltalog.Add{"c": logAdds(t, tables["c"]), "cm": logAdds(t, tables["cm"])}
	// Variant L: the add as Spark wrote it before Delta 3.3 (a UTC session): the legacy
	// zone-less value of the same instant.
	legacyLog := filepath.Join(tables["legacy"], "_delta_log", fmt.Sprintf("%020d.json", 1))
	lb, err := os.ReadFile(legacyLog)
	if err != nil {
		t.Fatal(err)
	}
	iso := regexp.MustCompile(`"window_start":"2024-06-15T19:30:45(\.0+)?Z"`)
	if !iso.Match(lb) {
		t.Fatalf("Spark's add for variant L: %s; want the ISO partition value", lb)
	}
	if err := os.WriteFile(legacyLog, iso.ReplaceAll(lb, []byte(`"window_start":"2024-06-15 19:30:45"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(filepath.Dir(legacyLog), "."+filepath.Base(legacyLog)+".crc")) // Hadoop's checksum of the old bytes

	typedSchema := `{"type":"record","name":"Typed","fields":[{"name":"id","type":"long"},
 {"name":"p_int","type":["null","int"]},{"name":"p_long","type":["null","long"]},{"name":"p_bool","type":["null","boolean"]},
 {"name":"p_date","type":["null",{"type":"int","logicalType":"date"}]},
 {"name":"p_dec","type":["null",{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}]},
 {"name":"p_dbl","type":["null","double"]}]}`
	dec := func(unscaled int64) any { return map[string]any{"bytes.decimal": big.NewRat(unscaled, 100)} }
	typedRows := []map[string]any{
		{"id": int64(1), "p_int": map[string]any{"int": int32(-1)}, "p_long": map[string]any{"long": int64(math.MaxInt64)}, "p_bool": map[string]any{"boolean": false},
			"p_date": map[string]any{"int.date": int32(19366)}, "p_dec": dec(4200), "p_dbl": map[string]any{"double": math.Copysign(0, -1)}},
		{"id": int64(2), "p_int": map[string]any{"int": int32(0)}, "p_long": map[string]any{"long": int64(math.MinInt64)}, "p_bool": map[string]any{"boolean": true},
			"p_date": map[string]any{"int.date": int32(0)}, "p_dec": dec(-5), "p_dbl": map[string]any{"double": 1e7}},
		{"id": int64(3), "p_int": nil, "p_long": nil, "p_bool": nil, "p_date": nil, "p_dec": nil, "p_dbl": nil},
	}
	winSchema := `{"type":"record","name":"Win","fields":[{"name":"id","type":"long"},
 {"name":"window_start","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},
 {"name":"local_start","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}],"default":null}]}`
	winValues := []any{int64(1718479845000000), int64(1718495999999999), int64(0), int64(-1), int64(-2342342342), nil}
	var winRows []map[string]any
	for i, v := range winValues {
		row := map[string]any{"id": int64(i + 1), "window_start": nil, "local_start": nil}
		if v != nil {
			row["window_start"] = map[string]any{"long.timestamp-micros": v}
			row["local_start"] = map[string]any{"long.local-timestamp-micros": v}
		}
		winRows = append(winRows, row)
	}

	topics := map[string]string{}
	for _, n := range []string{"a", "b", "c", "cm", "win", "ntz", "legacy"} {
		topics[n] = createTopic(t, s, "part-"+n, 1)
	}
	dlq := createTopic(t, s, "part.dlq", 1)
	produceAvro(t, s, topics["a"], c31ASchema, c31ARows(0))
	produceAvro(t, s, topics["c"], c31ASchema, c31ARows(0))
	produceAvro(t, s, topics["cm"], c31ASchema, c31ARows(0))
	produceAvro(t, s, topics["b"], typedSchema, typedRows)
	produceAvro(t, s, topics["win"], winSchema, winRows)
	produceAvro(t, s, topics["ntz"], winSchema, winRows)
	produceAvro(t, s, topics["legacy"], winSchema, winRows[:1])

	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	parts := map[string]string{"a": "region", "c": "region", "cm": "region", "b": "p_int, p_long, p_bool, p_date, p_dec, p_dbl",
		"win": "window_start", "ntz": "local_start", "legacy": "window_start"}
	for n, path := range tables {
		writePipeline(t, cfgDir, n, partPipelineYAML("part-"+n, s, topics[n], path, parts[n], dlq, ""))
	}
	t.Setenv("TZ", "Australia/Melbourne") // the daemon's zone; the results must not depend on it
	d := startDaemon(t, cfgDir)
	want := map[string]int64{"a": 15, "c": 15, "cm": 15, "b": 3, "win": 6, "ntz": 6, "legacy": 1}
	waitFor(t, d, 90*time.Second, "every pipeline to handle its records", func() bool {
		for n, w := range want {
			if handled(t, tables[n]) != w {
				return false
			}
		}
		return true
	})
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	logs, _ := os.ReadFile(d.logs.Name())
	if !bytes.Contains(logs, []byte("__HIVE_DEFAULT_PARTITION__: add.partitionValues keeps the string")) {
		t.Errorf("no warning for the string __HIVE_DEFAULT_PARTITION__ (row 14 of table A)")
	}

	// Table A (ingestd creates it) and variant C (Spark's table).
	checkC31A(t, tables["a"], logAdds(t, tables["a"]), "region")
	if got := partitionDirs(t, tables["a"]); len(got) != 13 { // "", null and the string __HIVE_DEFAULT_PARTITION__ share one directory
		t.Errorf("table A directories %q, want 13", got)
	}
	cmAdds := logAdds(t, tables["cm"])
	prefixDir := regexp.MustCompile(`^[A-Za-z0-9]{2}/part-00000-`)
	for _, a := range cmAdds {
		if !prefixDir.MatchString(a.Path) {
			t.Errorf("column mapping: %s; want a file in a random two-character directory, as Spark writes them", a.Path)
		}
	}
	cAdds := logAdds(t, tables["c"])
	checkC31A(t, tables["c"], cAdds[len(sparkAdds["c"]):], "region")
	for _, a := range sparkAdds["c"] {
		if !strings.HasPrefix(a.Path, "region=US%252FEast/") && !strings.HasPrefix(a.Path, "region=a%253Ab/") {
			t.Errorf("Spark's add.path %s: not under Spark's escaped directories", a.Path)
		}
	}
	if got := partitionDirs(t, tables["c"]); len(got) != 13 || !contains(got, "region=US%2FEast") || !contains(got, "region=a%3Ab") {
		t.Errorf("variant C directories %q: want 13, with Spark's region=US%%2FEast and region=a%%3Ab shared by ingestd's files", got)
	}
	for _, n := range []string{"a", "c", "cm"} {
		wantRows := c31AWant(0)
		if n != "a" {
			wantRows["101"] = `{"region":"US/East"}`
			if n == "c" {
				wantRows["102"] = `{"region":"a:b"}`
			}
		}
		sameRowMap(t, n+" (delta-rs)", rowsByKey(t, readDeltaRS(t, python, tables[n]).Rows), wantRows)
		var sr sparkRead
		spark.call(t, map[string]any{"op": "read", "path": tables[n]}, &sr)
		sameRowMap(t, n+" (Spark)", rowsByKey(t, sr.Rows), wantRows)
	}
	// Column mapping: partitionValues are keyed by the physical name.
	snapCM := openSnapshotT(t, tables["cm"])
	phys := snapCM.Schema.Field("region").PhysicalName(snapCM.ColumnMapping)
	if !strings.HasPrefix(phys, "col-") {
		t.Fatalf("physical name of region %q; want Spark's col-<uuid>", phys)
	}
	for _, a := range cmAdds[len(sparkAdds["cm"]):] {
		if _, ok := a.PartitionValues[phys]; !ok || len(a.PartitionValues) != 1 {
			t.Errorf("column mapping: %s has partitionValues %v; want the physical key %s", a.Path, pvMap(a.PartitionValues), phys)
		}
	}
	t.Logf("column mapping: Spark's file %s, ingestd's %s", sparkAdds["cm"][0].Path, cmAdds[len(cmAdds)-1].Path)

	// Table B: the typed partition columns.
	bAdds := logAdds(t, tables["b"])
	h := "__HIVE_DEFAULT_PARTITION__"
	wantB := map[string]string{
		`{"p_bool":"false","p_date":"2023-01-09","p_dbl":"0.0","p_dec":"42.00","p_int":"-1","p_long":"9223372036854775807"}`:  "p_int=-1/p_long=9223372036854775807/p_bool=false/p_date=2023-01-09/p_dec=42.00/p_dbl=0.0/",
		`{"p_bool":"true","p_date":"1970-01-01","p_dbl":"1.0E7","p_dec":"-0.05","p_int":"0","p_long":"-9223372036854775808"}`: "p_int=0/p_long=-9223372036854775808/p_bool=true/p_date=1970-01-01/p_dec=-0.05/p_dbl=1.0E7/",
		`{"p_bool":null,"p_date":null,"p_dbl":null,"p_dec":null,"p_int":null,"p_long":null}`:                                  "p_int=" + h + "/p_long=" + h + "/p_bool=" + h + "/p_date=" + h + "/p_dec=" + h + "/p_dbl=" + h + "/",
	}
	if len(bAdds) != 3 {
		t.Errorf("table B: %d adds, want 3", len(bAdds))
	}
	for _, a := range bAdds {
		b, _ := json.Marshal(a.PartitionValues) // keys sorted; nil values as null
		dir, ok := wantB[string(b)]
		if !ok {
			t.Errorf("table B: unexpected partitionValues %s", b)
			continue
		}
		if !strings.HasPrefix(deltalog.CanonicalPath(a.Path), dir) {
			t.Errorf("table B: %s is not in %s", a.Path, dir)
		}
		if !strings.Contains(a.Stats, `"numRecords":1`) || strings.Contains(a.Stats, "p_") {
			t.Errorf("table B: stats %s; want numRecords 1 and no partition column", a.Stats)
		}
	}
	wantBRows := map[string]string{
		"1": `{"p_bool":false,"p_date":"2023-01-09","p_dbl":0.0,"p_dec":"42.00","p_int":-1,"p_long":9223372036854775807}`,
		"2": `{"p_bool":true,"p_date":"1970-01-01","p_dbl":10000000.0,"p_dec":"-0.05","p_int":0,"p_long":-9223372036854775808}`,
		"3": `{"p_bool":null,"p_date":null,"p_dbl":null,"p_dec":null,"p_int":null,"p_long":null}`,
	}
	sameRowMap(t, "B (delta-rs)", rowsByKey(t, readDeltaRS(t, python, tables["b"]).Rows), wantBRows)
	var sb sparkRead
	spark.call(t, map[string]any{"op": "read", "path": tables["b"]}, &sb)
	sameRowMap(t, "B (Spark)", rowsByKey(t, sb.Rows), wantBRows)

	// Timestamp partitions: window_start (timestamp) and variant N (local_start,
	// timestamp_ntz).
	wantTS := []string{`"2024-06-15T19:30:45.000000Z"`, `"2024-06-15T23:59:59.999999Z"`, `"1970-01-01T00:00:00.000000Z"`, `"1969-12-31T23:59:59.999999Z"`, `"1969-12-31T23:20:57.657658Z"`, "null"}
	wantTSDir := []string{"window_start=2024-06-15 19%3A30%3A45", "window_start=2024-06-15 23%3A59%3A59.999999", "window_start=1970-01-01 00%3A00%3A00",
		"window_start=1969-12-31 23%3A59%3A59.999999", "window_start=1969-12-31 23%3A20%3A57.657658", "window_start=" + h}
	wantNtz := []string{`"2024-06-15 19:30:45"`, `"2024-06-15 23:59:59.999999"`, `"1970-01-01 00:00:00"`, `"1969-12-31 23:59:59.999999"`, `"1969-12-31 23:20:57.657658"`, "null"}
	checkTS := func(name, table, key string, pvs, dirs []string) {
		t.Helper()
		adds := logAdds(t, table)
		if len(adds) != len(pvs) {
			t.Errorf("%s: %d adds, want %d", name, len(adds), len(pvs))
		}
		for i, pv := range pvs {
			found := false
			for _, a := range adds {
				if pvString(a.PartitionValues[key]) == pv {
					found = true
					if dirs != nil && !strings.HasPrefix(deltalog.CanonicalPath(a.Path), dirs[i]+"/") {
						t.Errorf("%s: pv %s in %s; want directory %s", name, pv, a.Path, dirs[i])
					}
				}
			}
			if !found {
				t.Errorf("%s: no add with pv %s (adds %v)", name, pv, pathsOf(adds))
			}
		}
	}
	checkTS("win", tables["win"], "window_start", wantTS, wantTSDir)
	if a := logAdds(t, tables["win"]); len(a) > 0 {
		for _, add := range a {
			if strings.HasPrefix(deltalog.CanonicalPath(add.Path), "window_start=2024-06-15 19%3A30%3A45/") &&
				!strings.HasPrefix(add.Path, "window_start=2024-06-15%2019%253A30%253A45/part-") {
				t.Errorf("win add.path %s; want the URI layer window_start=2024-06-15%%2019%%253A30%%253A45/part-…", add.Path)
			}
		}
	}
	checkTS("ntz (variant N)", tables["ntz"], "local_start", wantNtz, nil)
	wantWin := map[string]string{}
	for i, v := range winValues {
		b, _ := json.Marshal(map[string]any{"window_start": v, "local_start": v})
		wantWin[fmt.Sprint(i+1)] = string(b)
	}
	for _, n := range []string{"win", "ntz"} {
		sameRowMap(t, n+" (delta-rs)", rowsByKey(t, readDeltaRS(t, python, tables[n]).Rows), wantWin)
		var sw sparkRead
		spark.call(t, map[string]any{"op": "read", "path": tables[n]}, &sw)
		sameRowMap(t, n+" (Spark)", rowsByKey(t, sw.Rows), wantWin)
	}
	// Variant L: the legacy row and the appended one have the same window_start.
	wantL := map[string]string{
		"100": `{"local_start":1718479845000000,"window_start":1718479845000000}`,
		"1":   `{"local_start":1718479845000000,"window_start":1718479845000000}`,
	}
	sameRowMap(t, "L (delta-rs)", rowsByKey(t, readDeltaRS(t, python, tables["legacy"]).Rows), wantL)
	var sl sparkRead
	spark.call(t, map[string]any{"op": "read", "path": tables["legacy"]}, &sl)
	sameRowMap(t, "L (Spark)", rowsByKey(t, sl.Rows), wantL)
	lAdds := logAdds(t, tables["legacy"])
	if got := pvString(lAdds[len(lAdds)-1].PartitionValues["window_start"]); got != wantTS[0] {
		t.Errorf("variant L: ingestd's pv %s, want %s", got, wantTS[0])
	}
	if got := partitionDirs(t, tables["legacy"]); len(got) != 1 {
		t.Errorf("variant L directories %q: want Spark's one directory, shared", got)
	}
	// `table describe` reads both forms as one partition.
	out := runIngestd(t, "table", "describe", "--table", "file://"+tables["legacy"])
	if !strings.Contains(out, "partition columns: [window_start]") || !strings.Contains(out, "window_start=2024-06-15T19:30:45.000000Z: 2 files") {
		t.Errorf("table describe of variant L:\n%s\nwant partition columns [window_start] and one partition 2024-06-15T19:30:45.000000Z with 2 files", out)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func openSnapshotT(t *testing.T, root string) *deltawriter.Snapshot {
	t.Helper()
	snap, err := openSnapshot(root)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func runIngestd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("ingestd %v: %v", args, err)
	}
	return out
}

// TestMaxOpenPartitions: a backlog of 10,000 records spanning 1,000 partition values
// (bucket = id / 10, ten rows each, spread over 4 source partitions) with
// batch.max_open_partitions 100 is written in flushes of at most 100 files each, every row
// exactly once (delta-rs), the txns at the end offsets; the daemon's peak RSS is logged
// and bounded.
func TestMaxOpenPartitions(t *testing.T) {
	s := need(t)
	python := filepath.Join(repoRoot, ".venv", "bin", "python")
	const n, parts = 10000, 4
	topic := createTopic(t, s, "maxopen", parts)
	dlq := createTopic(t, s, "maxopen.dlq", 1)
	schemaText := `{"type":"record","name":"Bucketed","fields":[{"name":"id","type":"long"},{"name":"bucket","type":"int"},{"name":"payload","type":"string"}]}`
	ctx := context.Background()
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := reg.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: schemaText, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(schemaText)
	var hdr sr.ConfluentHeader
	var recs []*kgo.Record
	for id := 0; id < n; id++ {
		body, err := avro.Marshal(schema, map[string]any{"id": int64(id), "bucket": int32(id / 10), "payload": strings.Repeat("x", 100)})
		if err != nil {
			t.Fatal(err)
		}
		framed, _ := hdr.AppendEncode(nil, ss.ID, nil)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(id % parts), Value: append(framed, body...)})
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	table := filepath.Join(root, "t")
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "maxopen", partPipelineYAML("maxopen", s, topic, table, "bucket", dlq,
		"{max_records: 20000, max_bytes: 64MiB, max_age: 2s, max_open_partitions: 100}"))
	start := time.Now()
	d := startDaemon(t, cfgDir)
	var peakKiB int64
	waitFor(t, d, 120*time.Second, "the pipeline to handle 10,000 records", func() bool {
		if k := vmHWM(d.cmd.Process.Pid); k > peakKiB {
			peakKiB = k
		}
		return handled(t, table) == n
	})
	took := time.Since(start)
	if k := vmHWM(d.cmd.Process.Pid); k > peakKiB {
		peakKiB = k
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	t.Logf("10,000 records, 1,000 partition values, max_open_partitions 100: %v, peak RSS %.1f MiB", took.Round(time.Millisecond), float64(peakKiB)/1024)
	if peakKiB == 0 || peakKiB > 256<<10 {
		t.Errorf("peak RSS %d KiB; want a measurement below 256 MiB", peakKiB)
	}
	// Every commit: at most 100 files, one per bucket value; 1,000 files in all.
	files, _ := filepath.Glob(filepath.Join(table, "_delta_log", "*.json"))
	commits, total := 0, 0
	seen := map[string]bool{}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		adds := 0
		for _, line := range bytes.Split(b, []byte("\n")) {
			var a struct {
				Add *deltalog.Add `json:"add"`
			}
			if len(line) > 0 && json.Unmarshal(line, &a) == nil && a.Add != nil {
				adds++
				seen[pvString(a.Add.PartitionValues["bucket"])] = true
			}
		}
		if adds > 100 {
			t.Errorf("%s: %d data files; want at most max_open_partitions = 100", filepath.Base(f), adds)
		}
		if adds > 0 {
			commits++
			total += adds
		}
	}
	if len(seen) != 1000 || commits < 10 {
		t.Errorf("%d distinct partition values in %d commits (%d files); want 1,000 values in at least 10 commits", len(seen), commits, total)
	}
	t.Logf("%d commits with data, %d files (%.1f per commit)", commits, total, float64(total)/float64(commits))
	r := readDeltaRS(t, python, table, txnApps("maxopen", topic, parts)...)
	ids := map[string]int{}
	for _, row := range r.Rows {
		id := fmt.Sprint(row["id"])
		ids[id]++
		var idn, b int64
		fmt.Sscan(id, &idn)
		fmt.Sscan(fmt.Sprint(row["bucket"]), &b)
		if b != idn/10 {
			t.Errorf("id %d read with bucket %d, want %d", idn, b, idn/10)
		}
	}
	dups := 0
	for _, c := range ids {
		if c > 1 {
			dups++
		}
	}
	if len(ids) != n || dups != 0 || len(r.Rows) != n {
		t.Errorf("delta-rs reads %d rows, %d distinct ids, %d duplicated; want %d once each", len(r.Rows), len(ids), dups, n)
	}
	for app, v := range r.Txns {
		if fmt.Sprint(v) != fmt.Sprint(n/parts-1) {
			t.Errorf("txn %s = %v, want %d", app, v, n/parts-1)
		}
	}
}

func txnApps(app, topic string, parts int) []string {
	var out []string
	for p := 0; p < parts; p++ {
		out = append(out, fmt.Sprintf("%s-%s-%d", app, topic, p))
	}
	return out
}

// vmHWM is the peak resident set size of process pid in KiB (Linux /proc), 0 if unknown.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var k int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "VmHWM:"), "kB")), &k)
			return k
		}
	}
	return 0
}
