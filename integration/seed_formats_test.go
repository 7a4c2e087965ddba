package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/ingestd/ingestd/deltawriter"
)

// The seed scenario and the schema changes of docs/schema-policies.md's decision table in
// every non-Avro format (docs/formats.md, "What is tested").

// fmtRow is one order of the format tests. Which fields a record carries, and with which
// type, is its version's (fmtVersion).
type fmtRow struct {
	ID       int64
	Customer string
	Qty      int64
	Status   string
	Note     *string
	Channel  *string
}

// fmtVersion is a writer schema of the orders, the same change in every format:
//
//	v1     order_id long, customer string (required), qty int, status string, note string (optional)
//	v2     v1 + channel string (optional)
//	v3     v1 without note
//	v4     v1 without customer
//	widen  v1 with qty long (int32 → int64)
//	str    v1 with status an int (string → int)
type fmtVersion string

const (
	fmtV1    fmtVersion = "v1"
	fmtV2    fmtVersion = "v2"
	fmtV3    fmtVersion = "v3"
	fmtV4    fmtVersion = "v4"
	fmtWiden fmtVersion = "widen"
	fmtStr   fmtVersion = "str"
)

// fmtField is one field of a version: its name and its type in the format's terms (the
// int32 / int64 / string of each format's schema language).
type fmtField struct {
	name, typ string // typ: "long", "int", "string"
	required  bool
}

func fmtFields(v fmtVersion) []fmtField {
	fs := []fmtField{{"order_id", "long", true}, {"customer", "string", true}, {"qty", "int", true}, {"status", "string", true}, {"note", "string", false}}
	switch v {
	case fmtV2:
		fs = append(fs, fmtField{"channel", "string", false})
	case fmtV3:
		fs = fs[:4]
	case fmtV4:
		fs = slices.Delete(fs, 1, 2)
	case fmtWiden:
		fs[2].typ = "long"
	case fmtStr:
		fs[3].typ = "int"
	}
	return fs
}

// fmtCodec writes fmtRows as one format's record values: Protobuf and JSON Schema framed
// by franz-go's sr.ConfluentHeader with ids of the stack's registry (each version under a
// subject of its own, so the registry's compatibility rules leave the decision to the
// guard), plain JSON and Kafka Connect JSON as they are.
type fmtCodec struct {
	format string
	config string // the pipeline's format line and its schema source
	ids    map[fmtVersion]int
	encode func(v fmtVersion, r fmtRow) []byte
}

// fmtFormats are the formats the tests run, in subtest order.
var fmtFormats = []string{"protobuf", "json_schema", "json", "connect_json"}

func newFmtCodec(t *testing.T, s stack, format, subject string, versions ...fmtVersion) *fmtCodec {
	t.Helper()
	ctx := context.Background()
	c := &fmtCodec{format: format, ids: map[fmtVersion]int{}}
	var reg *sr.Client
	if format == "protobuf" || format == "json_schema" {
		var err error
		if reg, err = sr.NewClient(sr.URLs(s.registry)); err != nil {
			t.Fatal(err)
		}
		c.config = fmt.Sprintf("format: %s\nschema_registry: {url: %q}", format, s.registry)
	}
	var hdr sr.ConfluentHeader
	frame := func(v fmtVersion, index []int, body []byte) []byte {
		b, err := hdr.AppendEncode(nil, c.ids[v], index)
		if err != nil {
			t.Fatalf("frame %s: %v", v, err)
		}
		return append(b, body...)
	}
	register := func(v fmtVersion, text string, typ sr.SchemaType) {
		ss, err := reg.CreateSchema(ctx, subject+"-"+string(v), sr.Schema{Schema: text, Type: typ})
		if err != nil {
			t.Fatalf("register %s %s: %v", format, v, err)
		}
		c.ids[v] = ss.ID
	}
	switch format {
	case "protobuf":
		msgs := map[fmtVersion]protoreflect.MessageDescriptor{}
		for _, v := range versions {
			text := fmtProto(v)
			register(v, text, sr.TypeProtobuf)
			comp := protocompile.Compiler{Resolver: &protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(map[string]string{"order.proto": text})}}
			files, err := comp.Compile(ctx, "order.proto")
			if err != nil {
				t.Fatalf("compile %s: %v", v, err)
			}
			msgs[v] = files[0].Messages().Get(0)
		}
		c.encode = func(v fmtVersion, r fmtRow) []byte {
			md := msgs[v]
			m := dynamicpb.NewMessage(md)
			for _, f := range fmtFields(v) {
				fd := md.Fields().ByName(protoreflect.Name(f.name))
				val, ok := fmtValue(f, r)
				if !ok {
					continue
				}
				switch x := val.(type) {
				case int64:
					if f.typ == "int" {
						m.Set(fd, protoreflect.ValueOfInt32(int32(x)))
					} else {
						m.Set(fd, protoreflect.ValueOfInt64(x))
					}
				case string:
					m.Set(fd, protoreflect.ValueOfString(x))
				}
			}
			body, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatalf("marshal %s: %v", v, err)
			}
			return frame(v, []int{0}, body)
		}
	case "json_schema":
		for _, v := range versions {
			register(v, fmtJSONSchema(v), sr.TypeJSON)
		}
		c.encode = func(v fmtVersion, r fmtRow) []byte { return frame(v, nil, fmtDocument(v, r)) }
	case "json":
		c.config = "format: json"
		c.encode = func(v fmtVersion, r fmtRow) []byte { return fmtDocument(v, r) }
	case "connect_json":
		c.config = "format: connect_json"
		c.encode = func(v fmtVersion, r fmtRow) []byte {
			return []byte(`{"schema":` + fmtConnectSchema(v) + `,"payload":` + string(fmtDocument(v, r)) + `}`)
		}
	default:
		t.Fatalf("unknown format %s", format)
	}
	return c
}

// fmtValue is r's value of field f (int64 or string); ok is false when the record leaves
// the field out (a null note or channel).
func fmtValue(f fmtField, r fmtRow) (any, bool) {
	switch f.name {
	case "order_id":
		return r.ID, true
	case "customer":
		return r.Customer, true
	case "qty":
		return r.Qty, true
	case "status":
		if f.typ == "int" {
			return int64(len(r.Status)), true
		}
		return r.Status, true
	case "note":
		if r.Note == nil {
			return nil, false
		}
		return *r.Note, true
	case "channel":
		if r.Channel == nil {
			return nil, false
		}
		return *r.Channel, true
	}
	return nil, false
}

// fmtDocument is r as the JSON document of version v (a null note written as null).
func fmtDocument(v fmtVersion, r fmtRow) []byte {
	doc := map[string]any{}
	for _, f := range fmtFields(v) {
		if val, ok := fmtValue(f, r); ok {
			doc[f.name] = val
		} else {
			doc[f.name] = nil
		}
	}
	b, _ := json.Marshal(doc)
	return b
}

func fmtProto(v fmtVersion) string {
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\npackage seed;\nmessage Order {\n")
	num := map[string]int{"order_id": 1, "customer": 2, "qty": 3, "status": 4, "note": 5, "channel": 6}
	for _, f := range fmtFields(v) {
		typ := map[string]string{"long": "int64", "int": "int32", "string": "string"}[f.typ]
		opt := ""
		if !f.required {
			opt = "optional "
		}
		fmt.Fprintf(&b, "  %s%s %s = %d;\n", opt, typ, f.name, num[f.name])
	}
	b.WriteString("}\n")
	return b.String()
}

func fmtJSONSchema(v fmtVersion) string {
	var props, req []string
	for _, f := range fmtFields(v) {
		typ := map[string]string{"long": `"integer"`, "int": `"integer"`, "string": `"string"`}[f.typ]
		if !f.required {
			typ = `["` + strings.Trim(typ, `"`) + `","null"]`
		} else {
			req = append(req, `"`+f.name+`"`)
		}
		props = append(props, fmt.Sprintf(`"%s":{"type":%s}`, f.name, typ))
	}
	return `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{` + strings.Join(props, ",") +
		`},"required":[` + strings.Join(req, ",") + `]}`
}

func fmtConnectSchema(v fmtVersion) string {
	var fs []string
	for _, f := range fmtFields(v) {
		typ := map[string]string{"long": "int64", "int": "int32", "string": "string"}[f.typ]
		fs = append(fs, fmt.Sprintf(`{"type":"%s","optional":%t,"field":"%s"}`, typ, !f.required, f.name))
	}
	return `{"type":"struct","name":"seed.orders.Value","optional":false,"fields":[` + strings.Join(fs, ",") + `]}`
}

// fmtPipeline is one pipeline file of a format test.
func fmtPipeline(name string, s stack, c *fmtCodec, topic, table, schema, dlq, batch string) string {
	return fmt.Sprintf(`name: %s
%s
kafka: {brokers: [%q], topics: [%s], group: %s-%d, start_offset: earliest, session_timeout: 6s}
table: {uri: "file://%s", create: true}
schema: %s
dead_letter: {topic: %s}
batch: %s
`, name, c.config, s.brokers, topic, name, time.Now().UnixNano(), table, schema, dlq, batch)
}

// fmtRowJSON is a row as delta-rs's rows are compared: the columns named, in a JSON object
// (keys sorted), a NULL as null.
func fmtRowJSON(r fmtRow, withChannel bool) string {
	m := map[string]any{"order_id": r.ID, "customer": r.Customer, "qty": r.Qty, "status": r.Status, "note": nil}
	if r.Note != nil {
		m["note"] = *r.Note
	}
	if withChannel {
		m["channel"] = nil
		if r.Channel != nil {
			m["channel"] = *r.Channel
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// fmtRows is d's rows as fmtRowJSON gives them (whole numbers as integers).
func fmtRows(t *testing.T, d tableData) []string {
	t.Helper()
	var out []string
	for _, r := range d.Rows {
		for k, v := range r {
			if f, ok := v.(float64); ok {
				r[k] = int64(f)
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// fmtSparkCheck is one format's table for Spark to read and its rows as fmtSparkWant
// gives them.
type fmtSparkCheck struct {
	table string
	want  []string
}

// fmtSparkUnion reads the tables of checks (by format) with Spark in one UNION ALL query,
// as to_json of cols, and compares each table's rows with its want. Formats whose
// subtest failed before its check are left out.
func fmtSparkUnion(t *testing.T, spark *sparkSession, who string, checks map[string]*fmtSparkCheck, cols ...string) {
	t.Helper()
	var union []string
	for _, f := range fmtFormats {
		if c := checks[f]; c != nil {
			union = append(union, fmt.Sprintf("SELECT '%s' AS f, to_json(struct(%s), map('ignoreNullFields', 'false')) AS j FROM delta.`%s`",
				f, strings.Join(cols, ", "), c.table))
		}
	}
	if len(union) == 0 {
		return
	}
	var rows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": strings.Join(union, " UNION ALL ")}, &rows)
	got := map[string][]string{}
	for _, r := range rows {
		f, _ := r["f"].(string)
		j, _ := r["j"].(string)
		got[f] = append(got[f], j)
	}
	for _, f := range fmtFormats {
		if c := checks[f]; c != nil {
			sameSorted(t, fmt.Sprintf("%s %s (Spark)", f, who), got[f], c.want)
		}
	}
}

// fmtSparkWant is r as fmtSparkRows gives it for cols.
func fmtSparkWant(r fmtRow, cols ...string) string {
	var parts []string
	for _, c := range cols {
		var v any
		switch c {
		case "order_id":
			v = r.ID
		case "customer":
			v = r.Customer
		case "qty":
			v = r.Qty
		case "status":
			v = r.Status
		case "note":
			if r.Note != nil {
				v = *r.Note
			}
		case "channel":
			if r.Channel != nil {
				v = *r.Channel
			}
		}
		b, _ := json.Marshal(v)
		parts = append(parts, fmt.Sprintf("%q:%s", c, b))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// produced is one record as the broker acknowledged it.
type produced struct {
	row       fmtRow
	version   fmtVersion
	partition int32
	offset    int64
	key       string
	value     []byte
}

// produceFmt produces recs (partition -1: by key) and returns them with their partitions
// and offsets.
func produceFmt(t *testing.T, s stack, topic string, recs []produced) []produced {
	t.Helper()
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		return func(r *kgo.Record, n int) int {
			if r.Partition >= 0 {
				return int(r.Partition)
			}
			id, _ := strconv.Atoi(string(r.Key))
			return id * 7 % n
		}
	})))
	krecs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krecs[i] = &kgo.Record{Topic: topic, Key: []byte(r.key), Value: r.value, Partition: r.partition}
	}
	if err := cl.ProduceSync(context.Background(), krecs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	out := slices.Clone(recs)
	for i, kr := range krecs {
		out[i].partition, out[i].offset = kr.Partition, kr.Offset
	}
	return out
}

// seedRow is order i of the seed scenario: a note on three orders of four, and on v2
// orders a channel (never null: plain JSON infers no column from a null).
func seedRow(i int64, v2 bool) fmtRow {
	r := fmtRow{ID: i, Customer: fmt.Sprintf("c%03d", i%97), Qty: i*7%1000 - 300, Status: []string{"NEW", "PAID", "SHIPPED"}[i%3]}
	if i%4 != 0 {
		n := fmt.Sprintf("note %d é", i)
		r.Note = &n
	}
	if v2 {
		c := []string{"web", "app", "store"}[i%3]
		r.Channel = &c
	}
	return r
}

// TestSeedScenarioFormats is TestSeedScenario in the other formats: per format
// (protobuf and json_schema Confluent-framed through the stack's Apicurio registry,
// plain json with a schema file's columns, connect_json with its embedded schema), 2,000
// v1 orders then 200 v2 orders (v2 adds an optional channel) into a 3-partition topic —
// a tenth of TestSeedScenario's counts, so the four formats run in parallel within the CI
// budget — and one `ingestd run` of three pipelines:
//
//   - bronze (evolve) gains channel and holds all 2,200 orders with their exact values,
//     channel NULL for v1 (delta-rs and Spark, every row);
//   - silver (dead_letter) holds exactly the 2,000 v1 orders, and its dead-letter topic
//     exactly the 200 v2 records, key and value byte for byte, with the documented headers
//     (schema_mismatch at channel, the v2 schema id for the framed formats, none for the
//     unframed ones, the source coordinates);
//   - gold (halt) halts at the first v2 offset of each partition with schema_mismatch at
//     channel, holds exactly the records before them, and a restart halts at the same
//     offsets and commits nothing; /readyz answers 503 meanwhile.
//
// For protobuf, the silver workflow then ends as docs/dead-letters-and-replay.md says:
// `ingestd table alter --add-column 'channel STRING'`, `ingestd replay`, and silver holds
// the same 2,200 rows as bronze.
func TestSeedScenarioFormats(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	checks := eachFormat(t, s, seedFormat)
	// Spark reads every format's bronze in one query.
	fmtSparkUnion(t, spark, "bronze", checks, fmtSparkCols...)
}

// eachFormat runs scenario for every format of fmtFormats, as parallel subtests, each
// with a directory of the test's own (Spark reads the tables after the subtests end),
// and returns what each left for Spark to check.
func eachFormat(t *testing.T, s stack, scenario func(t *testing.T, s stack, format, dir string) *fmtSparkCheck) map[string]*fmtSparkCheck {
	t.Helper()
	checks := map[string]*fmtSparkCheck{}
	var mu sync.Mutex
	dirs := map[string]string{}
	for _, f := range fmtFormats {
		dirs[f] = t.TempDir()
	}
	t.Run("formats", func(t *testing.T) {
		for _, format := range fmtFormats {
			t.Run(format, func(t *testing.T) {
				t.Parallel()
				c := scenario(t, s, format, dirs[format])
				mu.Lock()
				checks[format] = c
				mu.Unlock()
			})
		}
	})
	return checks
}

// fmtSparkCols are the columns Spark reads of the seed's bronze tables, in this order.
var fmtSparkCols = []string{"order_id", "customer", "qty", "status", "note", "channel"}

// seedFormat runs the seed scenario in format, its tables under dir, and returns bronze
// for Spark to check.
func seedFormat(t *testing.T, s stack, format, dir string) *fmtSparkCheck {
	const nV1, nV2 = 2_000, 200
	base := "seed." + strings.ReplaceAll(format, "_", "")
	topic := createTopic(t, s, base, 3)
	dlq := createTopic(t, s, base+".dlq", 1)
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	c := newFmtCodec(t, s, format, topic, fmtV1, fmtV2)

	var recs []produced
	for i := int64(1); i <= nV1+nV2; i++ {
		v := fmtV1
		if i > nV1 {
			v = fmtV2
		}
		r := seedRow(i, v == fmtV2)
		recs = append(recs, produced{row: r, version: v, partition: -1, key: strconv.FormatInt(i, 10), value: c.encode(v, r)})
	}
	recs = produceFmt(t, s, topic, recs)
	firstV2 := map[int32]int64{}
	for _, r := range recs {
		if o, ok := firstV2[r.partition]; r.version == fmtV2 && (!ok || r.offset < o) {
			firstV2[r.partition] = r.offset
		}
	}
	if len(firstV2) != 3 {
		t.Fatalf("v2 records on partitions %v, want all 3", firstV2)
	}

	if format == "json" {
		// The v1 columns come from a schema file, so a v1 record's null note is a NULL
		// of that column (a null infers no column), and v2's channel the only new key.
		avsc := filepath.Join(cfgDir, "orders.avsc")
		if err := os.WriteFile(avsc, []byte(`{"type":"record","name":"Order","fields":[
 {"name":"order_id","type":"long"},{"name":"customer","type":"string"},{"name":"qty","type":"int"},
 {"name":"status","type":"string"},{"name":"note","type":["null","string"]}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		c.config += "\navro_schema_file: " + avsc
	}
	tables := map[string]string{}
	batch := "{max_records: 1000, max_bytes: 64MiB, max_age: 500ms}"
	for _, p := range []struct{ name, policy string }{{"bronze", "evolve"}, {"silver", "dead_letter"}, {"gold", "halt"}} {
		tables[p.name] = filepath.Join(dir, p.name)
		writePipeline(t, cfgDir, p.name, fmtPipeline("seed-"+p.name, s, c, topic, tables[p.name], "{policy: "+p.policy+", on_incompatible: halt}", dlq, batch))
	}
	halts := func(d *daemon) map[int32]string {
		r, _ := d.readyz(t)
		out := map[int32]string{}
		for _, p := range r.Pipelines {
			if p.Pipeline == "seed-gold" {
				for _, h := range p.Halted {
					out[h.Partition] = fmt.Sprintf("%d %s@%s", h.Offset, h.Reason, h.Field)
				}
			}
		}
		return out
	}
	wantHalts := map[int32]string{}
	for p, o := range firstV2 {
		wantHalts[p] = fmt.Sprintf("%d schema_mismatch@channel", o)
	}
	d := startDaemon(t, cfgDir)
	waitForEvery(t, d, 90*time.Second, 100*time.Millisecond, "bronze and silver to handle every record and gold to halt on 3 partitions", func() bool {
		return handled(t, tables["bronze"]) == nV1+nV2 && handled(t, tables["silver"]) == nV1+nV2 && len(halts(d)) == 3
	})
	if got := halts(d); fmt.Sprint(got) != fmt.Sprint(wantHalts) {
		t.Errorf("gold halted at %v, want the first v2 offset of each partition %v", got, wantHalts)
	}
	if r, code := d.readyz(t); code != 503 || r.Ready {
		t.Errorf("/readyz with a halted pipeline: status %d ready %v, want 503 false", code, r.Ready)
	}
	if m := d.metrics(t); !containsLine(m, `ingestd_pipeline_halted{pipeline="seed-gold"} 1`) ||
		!containsLine(m, fmt.Sprintf(`ingestd_records_dead_lettered_total{pipeline="seed-silver",reason="schema_mismatch"} %d`, nV2)) {
		t.Errorf("metrics lack the halt gauge or the dead-letter count:\n%s", grepLines(m, "ingestd_pipeline_halted", "dead_lettered"))
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exit code after SIGTERM = %d, want 0", code)
	}

	// bronze: every order, exact values, channel NULL for v1 (delta-rs, then Spark).
	var wantBronze, wantSilver, wantGold, sparkBronze []string
	for _, r := range recs {
		wantBronze = append(wantBronze, fmtRowJSON(r.row, true))
		sparkBronze = append(sparkBronze, fmtSparkWant(r.row, fmtSparkCols...))
		if r.version == fmtV1 {
			wantSilver = append(wantSilver, fmtRowJSON(r.row, false))
		}
		if r.offset < firstV2[r.partition] {
			wantGold = append(wantGold, fmtRowJSON(r.row, false))
		}
	}
	bronze := readTable(t, s, tables["bronze"])
	wantSchema := map[string]string{
		"protobuf":     "order_id int64, customer string, qty int32, status string, note string, channel string",
		"json_schema":  "customer string, note string, order_id int64, qty int64, status string, channel string",
		"json":         "order_id int64, customer string, qty int32, status string, note string, channel string",
		"connect_json": "order_id int64, customer string, qty int32, status string, note string, channel string",
	}[format]
	if got := bronze.schemaText(); got != wantSchema {
		t.Errorf("bronze schema (delta-rs) %s, want %s", got, wantSchema)
	}
	sameSorted(t, "bronze (delta-rs)", fmtRows(t, bronze), wantBronze)
	check := &fmtSparkCheck{table: tables["bronze"], want: sparkBronze}

	// silver: exactly the v1 orders; its dead letters exactly the v2 records.
	silver := readTable(t, s, tables["silver"])
	if n := len(silver.Schema); n != 5 {
		t.Errorf("silver has %d columns, want v1's 5: %s", n, silver.schemaText())
	}
	sameSorted(t, "silver (delta-rs)", fmtRows(t, silver), wantSilver)
	checkFmtDLQ(t, s, c, dlq, topic, "seed-silver", recs, func(r produced) (bool, string) { return r.version == fmtV2, "schema_mismatch@channel" })
	for _, p := range []string{"seed-bronze", "seed-gold"} { // evolve and halt dead-letter nothing
		checkFmtDLQ(t, s, c, dlq, topic, p, recs, func(produced) (bool, string) { return false, "" })
	}

	// gold: exactly the records before the first v2 offset of each partition.
	gold := readTable(t, s, tables["gold"])
	sameSorted(t, "gold (delta-rs)", fmtRows(t, gold), wantGold)

	// gold alone again: the same halts, nothing committed.
	goldDir := filepath.Join(dir, "gold-only")
	mustMkdir(t, goldDir)
	b, err := os.ReadFile(filepath.Join(cfgDir, "gold.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writePipeline(t, goldDir, "gold", string(b))
	before := txnVersions(t, tables["gold"])
	d2 := startDaemon(t, goldDir)
	waitForEvery(t, d2, time.Minute, 100*time.Millisecond, "gold to halt again after a restart", func() bool { return len(halts(d2)) == 3 })
	if got := halts(d2); fmt.Sprint(got) != fmt.Sprint(wantHalts) {
		t.Errorf("gold after a restart halted at %v, want %v", got, wantHalts)
	}
	if code := d2.stop(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	if after := txnVersions(t, tables["gold"]); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("gold txn versions moved after the restart: %v → %v", before, after)
	}
	t.Logf("%s: bronze %d rows, silver %d rows and %d dead letters, gold %d rows, halted at %v",
		format, len(bronze.Rows), len(silver.Rows), nV2, len(gold.Rows), wantHalts)

	if format != "protobuf" {
		return check
	}
	// The silver workflow: add the column, replay the dead letters; silver equals bronze.
	cfg := filepath.Join(cfgDir, "silver.yaml")
	if out, err := runCLI(t, "table", "alter", "--config", cfg, "--add-column", "channel STRING"); err != nil || !strings.Contains(out, "ADD COLUMNS channel string") {
		t.Fatalf("table alter: %v\n%s", err, out)
	}
	sum := replay(t, cfg)
	if sum.Read != nV2 || sum.Landed != nV2 || len(sum.DeadLettered) != 0 || sum.Parked != 0 {
		t.Errorf("replay %+v, want %d read and landed, nothing failing", sum, nV2)
	}
	sameSorted(t, "silver after the replay (delta-rs)", fmtRows(t, readTable(t, s, tables["silver"])), wantBronze)
	if again := replay(t, cfg); again.Read != 0 || again.Landed != 0 || again.AlreadyReplayed != nV2 {
		t.Errorf("a second replay %+v, want nothing read and %d already replayed", again, nV2)
	}
	return check
}

// checkFmtDLQ checks that dlq holds, for pipeline, exactly the records of recs that dead
// says are dead letters, each once, key and value byte for byte, with the reason@field
// dead gives and the documented headers.
func checkFmtDLQ(t *testing.T, s stack, c *fmtCodec, dlq, topic, pipeline string, recs []produced, dead func(produced) (bool, string)) {
	t.Helper()
	bySrc := map[string]produced{}
	want := map[string]string{}
	for _, r := range recs {
		at := fmt.Sprintf("%d/%d", r.partition, r.offset)
		bySrc[at] = r
		if ok, why := dead(r); ok {
			want[at] = why
		}
	}
	got := map[string]string{}
	for _, r := range readDLQ(t, s, dlq) {
		h := r.headers
		if h["ingestd.error.pipeline"] != pipeline {
			continue
		}
		at := h["__connect.errors.partition"] + "/" + h["__connect.errors.offset"]
		orig, ok := bySrc[at]
		if _, dup := got[at]; dup {
			t.Errorf("%s: the dead-letter topic holds %s twice", pipeline, at)
		}
		got[at] = h["ingestd.error.reason"] + "@" + h["ingestd.error.field"]
		wantID := ""
		if id, framed := c.ids[orig.version]; framed {
			wantID = strconv.Itoa(id)
		}
		_, hasID := h["ingestd.error.schema_id"]
		switch {
		case !ok || h["__connect.errors.topic"] != topic:
			t.Errorf("%s: a dead letter names %s %s, not a record of %s", pipeline, h["__connect.errors.topic"], at, topic)
		case string(r.value) != string(orig.value) || string(r.key) != orig.key:
			t.Errorf("%s: the dead letter of %s differs from the source record", pipeline, at)
		case h["ingestd.error.schema_id"] != wantID || hasID != (wantID != ""):
			t.Errorf("%s: the dead letter of %s (%s) has schema id %q (present %v), want %q", pipeline, at, orig.version, h["ingestd.error.schema_id"], hasID, wantID)
		case h["__connect.errors.stage"] != "TASK_PUT" || h["__connect.errors.exception.class.name"] != "ingestd.SchemaMismatchError" ||
			h["ingestd.replay.count"] != "0" || h["__connect.errors.exception.message"] == "" || h["ingestd.txn.version"] != strconv.FormatInt(orig.offset, 10):
			t.Errorf("%s: the dead letter of %s has headers %v", pipeline, at, h)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: dead letters (partition/offset → reason@field)\n got %v\nwant %v", pipeline, got, want)
	}
}

// fmtChangeTable is the table the schema-change test's pipelines start from, as v1 of
// every format fits it: customer NOT NULL (so that a writer without it is incompatible),
// qty an integer (a long for JSON Schema, whose integers are all longs).
func fmtChangeTable(qty string) string {
	return `{"type":"struct","fields":[
{"name":"order_id","type":"long","nullable":true,"metadata":{}},
{"name":"customer","type":"string","nullable":false,"metadata":{}},
{"name":"qty","type":"` + qty + `","nullable":true,"metadata":{}},
{"name":"status","type":"string","nullable":true,"metadata":{}},
{"name":"note","type":"string","nullable":true,"metadata":{}}]}`
}

// TestSchemaChangesFormats checks the decision table of docs/schema-policies.md for a
// removed field and a changed type in every non-Avro format, under each policy. Per format,
// three tables are created beforehand with order_id, customer (NOT NULL), qty (integer),
// status and note; three pipelines (evolve with on_incompatible dead_letter and
// typeWidening allowed; dead_letter; halt) read one 3-partition topic:
//
//	partition 0: v1 ×2, v3 (no note) ×2, v4 (no customer) ×1, v1
//	partition 1: v1 ×2, widen (qty int32 → int64, beyond 32 bits) ×2, v1
//	partition 2: v1 ×2, str (status string → int) ×1, v1
//
// The documented decisions: a writer without a nullable column writes NULL there under
// every policy; without a NOT NULL column it is incompatible (evolve: on_incompatible,
// here a dead letter; dead_letter: a dead letter; halt: a halt), schema_mismatch at
// customer; int → long widens the column under evolve (the table gains typeWidening)
// and is schema_mismatch at qty for dead_letter and halt; string → int is incompatible
// under every policy, schema_mismatch at status. JSON Schema has no 32-bit integer (its
// integers are longs), so its partition 1 holds v1 records only. The evolve tables are
// read with Spark (delta-rs 1.6 cannot read typeWidening), the others with delta-rs.
func TestSchemaChangesFormats(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars)
	checks := eachFormat(t, s, schemaChangesFormat)
	// Spark reads every format's evolve table in one query.
	fmtSparkUnion(t, spark, "evolve", checks, fmtChangeCols...)
}

// fmtChangeCols are the columns of the schema-change tables, in this order.
var fmtChangeCols = []string{"order_id", "customer", "qty", "status", "note"}

// schemaChangesFormat runs the schema changes in format, its tables under dir, and
// returns the evolve table for Spark to check.
func schemaChangesFormat(t *testing.T, s stack, format, dir string) *fmtSparkCheck {
	base := "changes." + strings.ReplaceAll(format, "_", "")
	topic := createTopic(t, s, base, 3)
	dlq := createTopic(t, s, base+".dlq", 1)
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	widens := format != "json_schema"
	versions := []fmtVersion{fmtV1, fmtV3, fmtV4, fmtStr}
	if widens {
		versions = append(versions, fmtWiden)
	}
	c := newFmtCodec(t, s, format, topic, versions...)

	plan := []struct {
		partition int32
		versions  []fmtVersion
	}{
		{0, []fmtVersion{fmtV1, fmtV1, fmtV3, fmtV3, fmtV4, fmtV1}},
		{1, []fmtVersion{fmtV1, fmtV1, fmtWiden, fmtWiden, fmtV1}},
		{2, []fmtVersion{fmtV1, fmtV1, fmtStr, fmtV1}},
	}
	var recs []produced
	for _, p := range plan {
		for i, v := range p.versions {
			if v == fmtWiden && !widens {
				v = fmtV1
			}
			id := int64(p.partition)*10 + int64(i) + 1
			r := seedRow(id, false)
			if v == fmtWiden {
				r.Qty = []int64{3_000_000_000, -3_000_000_000}[id%2]
			}
			recs = append(recs, produced{row: r, version: v, partition: p.partition, key: strconv.FormatInt(id, 10), value: c.encode(v, r)})
		}
	}
	recs = produceFmt(t, s, topic, recs)

	qty := "integer"
	if !widens {
		qty = "long"
	}
	policies := []struct{ name, schema string }{
		{"evolve", "{policy: evolve, on_incompatible: dead_letter, allow_table_features: [typeWidening]}"},
		{"dead_letter", "{policy: dead_letter}"},
		{"halt", "{policy: halt}"},
	}
	tables := map[string]string{}
	for _, p := range policies {
		tables[p.name] = filepath.Join(dir, p.name)
		createTableWith(t, tables[p.name], fmtChangeTable(qty), deltawriter.SchemaChange{Name: "orders"})
		writePipeline(t, cfgDir, p.name, fmtPipeline("changes-"+p.name, s, c, topic, tables[p.name], p.schema, dlq, "{max_records: 100, max_age: 300ms}"))
	}
	// The decision for each version under each policy: "" writes it, else reason@field.
	decide := func(policy string, v fmtVersion) string {
		switch {
		case v == fmtV4:
			return "schema_mismatch@customer"
		case v == fmtStr:
			return "schema_mismatch@status"
		case v == fmtWiden && policy != "evolve":
			return "schema_mismatch@qty"
		}
		return ""
	}
	wantHalts := map[int32]string{}
	for _, r := range recs {
		if why := decide("halt", r.version); why != "" {
			if _, ok := wantHalts[r.partition]; !ok {
				wantHalts[r.partition] = fmt.Sprintf("%d %s", r.offset, why)
			}
		}
	}
	halts := func(d *daemon) map[int32]string {
		r, _ := d.readyz(t)
		out := map[int32]string{}
		for _, p := range r.Pipelines {
			if p.Pipeline == "changes-halt" {
				for _, h := range p.Halted {
					out[h.Partition] = fmt.Sprintf("%d %s@%s", h.Offset, h.Reason, h.Field)
				}
			}
		}
		return out
	}
	d := startDaemon(t, cfgDir)
	n := int64(len(recs))
	waitForEvery(t, d, time.Minute, 100*time.Millisecond, "evolve and dead_letter to handle every record and halt to halt", func() bool {
		return handled(t, tables["evolve"]) == n && handled(t, tables["dead_letter"]) == n && len(halts(d)) == len(wantHalts)
	})
	if got := halts(d); fmt.Sprint(got) != fmt.Sprint(wantHalts) {
		t.Errorf("halt: halted at %v, want %v", got, wantHalts)
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exit code after SIGTERM = %d, want 0", code)
	}

	want := func(policy string) (rs, spark []string) {
		for _, r := range recs {
			if decide(policy, r.version) != "" || policy == "halt" && wantHalts[r.partition] != "" && r.offset >= haltOffset(wantHalts[r.partition]) {
				continue
			}
			row := r.row
			if r.version == fmtV3 {
				row.Note = nil // the writer lacks note: NULL under every policy
			}
			rs = append(rs, fmtRowJSON(row, false))
			spark = append(spark, fmtSparkWant(row, fmtChangeCols...))
		}
		return rs, spark
	}
	var check *fmtSparkCheck
	for _, p := range policies {
		dead := func(r produced) (bool, string) {
			why := decide(p.name, r.version)
			return why != "" && p.name != "halt", why
		}
		checkFmtDLQ(t, s, c, dlq, topic, "changes-"+p.name, recs, dead)
		rs, sp := want(p.name)
		if p.name == "evolve" {
			check = &fmtSparkCheck{table: tables[p.name], want: sp}
			continue
		}
		sameSorted(t, p.name+" (delta-rs)", fmtRows(t, readTable(t, s, tables[p.name])), rs)
	}

	// The evolve table's qty: widened to long where a writer widened it, with the feature.
	snap, err := openTable(t, tables["evolve"]).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantQty, wantFeature := "long", widens
	var gotQty string
	for _, f := range snap.Schema.Fields {
		if f.Name == "qty" {
			b, _ := json.Marshal(f.Type)
			gotQty = strings.Trim(string(b), `"`)
		}
		if f.Name == "customer" && f.Nullable {
			t.Errorf("evolve relaxed customer to nullable: no writer has a nullable customer")
		}
	}
	if gotQty != wantQty || slices.Contains(snap.Protocol.WriterFeatures, "typeWidening") != wantFeature {
		t.Errorf("evolve table: qty %s, writer features %v; want qty %s, typeWidening %v", gotQty, snap.Protocol.WriterFeatures, wantQty, wantFeature)
	}
	return check
}

// haltOffset is the offset of a "offset reason@field" halt.
func haltOffset(h string) int64 {
	o, _ := strconv.ParseInt(strings.Fields(h)[0], 10, 64)
	return o
}
