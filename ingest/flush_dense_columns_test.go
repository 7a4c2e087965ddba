package ingest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// The typed column path of the flush: a fixed-width column stays dense (one
// word a row) while its values are set and turns levelled at its first null; the files
// read back hold exactly the records' values either way, and exactly what the same flush
// writes with every column levelled (flusher.levelled, the baseline).

// denseAvro is the writer schema of these tests: fixed-width columns, set (id, ok, ts)
// and nullable (n, x), and a string.
const denseAvro = `{"type":"record","name":"m","fields":[
 {"name":"id","type":"long"},{"name":"n","type":["null","long"]},{"name":"x","type":["null","double"]},
 {"name":"ok","type":"boolean"},{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"region","type":"string"}]}`

// denseRec is one record of denseAvro; nil n or x is null. ts is id days after
// 2023-11-14T22:13:20Z.
type denseRec struct {
	id     int64
	n      *int64
	x      *float64
	region string
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }

// denseTS is record id's ts, in microseconds.
func denseTS(id int64) int64 { return 1_700_000_000_000_000 + id*86_400_000_000 }

// denseKafkaTS is the Kafka timestamp of the record at offset, in milliseconds.
func denseKafkaTS(offset int64) int64 { return 1_800_000_000_000 + offset }

// denseRecords frames recs (writer schema id 7) as Kafka records of partition 0.
func denseRecords(t *testing.T, recs []denseRec) []*kgo.Record {
	t.Helper()
	sch := avro.MustParse(denseAvro)
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		v := map[string]any{"id": r.id, "n": nil, "x": nil, "ok": r.id%2 == 0, "ts": denseTS(r.id), "region": r.region}
		if r.n != nil {
			v["n"] = map[string]any{"long": *r.n}
		}
		if r.x != nil {
			v["x"] = map[string]any{"double": *r.x}
		}
		body, err := avro.Marshal(sch, v)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = &kgo.Record{Topic: "dense", Partition: 0, Offset: int64(i), Timestamp: time.UnixMilli(denseKafkaTS(int64(i))),
			Value: append([]byte{0, 0, 0, 0, 7}, body...)}
	}
	return out
}

// denseFlush is one flush's result, read back.
type denseFlush struct {
	out   *outcome
	forms map[string]string   // after the decode: "" → the table-wide columns' forms, dir → its file's
	files map[string][]string // data file dir ("" unpartitioned) → its rows, rendered (renderRow)
}

// runDenseFlush makes one flush of recs to the table at dir (created by the flush unless
// it exists) as the consumer pipeline does, up to the data files: collect, prepare,
// route (decode, fills, partitioner), write the files. It records the columns' forms
// after the decode and reads the files back. levelled starts every column levelled.
func runDenseFlush(t *testing.T, dir string, cfg *config.Config, recs []*kgo.Record, levelled bool) denseFlush {
	t.Helper()
	ctx := context.Background()
	ws, err := decode.ParseWriterSchema(7, denseAvro)
	if err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPipeline(cfg, Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: NewMetrics(prometheus.NewRegistry()),
		Schemas: mapSchemas{7: ws}, Framed: true, Table: tbl})
	f := p.fl
	f.levelled = levelled
	ts, err := f.readTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	items, err := f.collect(ctx, ts, recs, frameNote{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.prepare(ts, items)
	if err != nil {
		t.Fatal(err)
	}
	out := f.route(ts, b, items)
	res := denseFlush{out: out, forms: map[string]string{"": forms(b.pq, b.cols)}, files: map[string][]string{}}
	if b.parts != nil {
		for _, part := range b.parts.Files() {
			res.forms[part.Dir] = forms(b.parts.FileSchema(), part.Cols)
		}
	}
	adds, err := f.writeFiles(ctx, b, out)
	if err != nil {
		t.Fatal(err)
	}
	f.releaseCols(b)
	endFlush(f, items)
	for _, a := range adds {
		d := ""
		if i := strings.LastIndexByte(a.Path, '/'); i >= 0 {
			d = a.Path[:i]
		}
		res.files[d] = readRendered(t, st, a.Path)
	}
	return res
}

// forms renders each column's form: "name:D" dense, "name:L" levelled, in leaf order
// (name order: parquet-go sorts a group's fields).
func forms(pq *parquet.Schema, cols []column.Column) string {
	var s []string
	for i, path := range pq.Columns() {
		f := "L"
		if cols[i].IsDense() {
			f = "D"
		}
		s = append(s, strings.Join(path, ".")+":"+f)
	}
	return strings.Join(s, " ")
}

// readRendered reads the data file at path back with parquet-go's reader and renders
// every row (renderRow).
func readRendered(t *testing.T, st storage.Store, path string) []string {
	t.Helper()
	b, err := st.Get(context.Background(), deltalog.CanonicalPath(path))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	names := f.Schema().Columns()
	r := parquet.NewReader(bytes.NewReader(b))
	var out []string
	for {
		buf := make([]parquet.Row, 16)
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			out = append(out, renderRow(names, row))
		}
		if err == io.EOF || n == 0 {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if int64(len(out)) != f.NumRows() {
		t.Fatalf("%s: read %d rows of %d", path, len(out), f.NumRows())
	}
	return out
}

// renderRow renders a row of a flat file as "name=value …" in leaf order (null: null).
func renderRow(names [][]string, row parquet.Row) string {
	var s []string
	for _, v := range row {
		var val string
		switch {
		case v.IsNull():
			val = "null"
		case v.Kind() == parquet.Boolean:
			val = strconv.FormatBool(v.Boolean())
		case v.Kind() == parquet.Int32:
			val = strconv.FormatInt(int64(v.Int32()), 10)
		case v.Kind() == parquet.Int64:
			val = strconv.FormatInt(v.Int64(), 10)
		case v.Kind() == parquet.Double:
			val = strconv.FormatFloat(v.Double(), 'g', -1, 64)
		default:
			val = strconv.Quote(string(v.ByteArray()))
		}
		s = append(s, strings.Join(names[v.Column()], ".")+"="+val)
	}
	return strings.Join(s, " ")
}

// wantRow renders the expected row of r as renderRow does (the file's leaves are in name
// order), with region unless it is the partition column, and the generated date column
// day when withDay.
func wantRow(r denseRec, withRegion, withDay bool) string {
	n, x := "null", "null"
	if r.n != nil {
		n = strconv.FormatInt(*r.n, 10)
	}
	if r.x != nil {
		x = strconv.FormatFloat(*r.x, 'g', -1, 64)
	}
	s := ""
	if withDay {
		s = fmt.Sprintf("day=%d ", denseTS(r.id)/86_400_000_000)
	}
	s += fmt.Sprintf("id=%d n=%s ok=%v", r.id, n, r.id%2 == 0)
	if withRegion {
		s += fmt.Sprintf(" region=%q", r.region)
	}
	return s + fmt.Sprintf(" ts=%d x=%s", denseTS(r.id), x)
}

func denseConfig(dir string) *config.Config {
	return &config.Config{Name: "dense", AppID: "dense", Table: config.Table{URI: "file://" + dir, Create: true},
		Schema: config.Schema{Policy: config.PolicyEvolve, OnIncompatible: config.PolicyHalt}, DeadLetter: config.DeadLetter{Topic: "dense.dlq"},
		Batch: config.Batch{MaxRecords: 1000, MaxBytes: 64 << 20, MaxOpenPartitions: 256}}
}

// deadLetters renders the outcome's dead letters: "offset:reason".
func deadLetters(out *outcome) []string {
	var s []string
	for _, d := range out.deadLetters() {
		s = append(s, fmt.Sprintf("%d:%s", d.Rec.Offset, d.Reason))
	}
	return s
}

// A nullable long whose first null comes after dense rows turns levelled at that row and
// keeps the earlier rows' values; a record that fails to decode after it turned (a body
// cut short in x) is rolled back and dead-lettered (truncated); the other columns stay dense. The
// file holds exactly the written records, as the levelled baseline's does.
func TestDenseColumnTurnsLevelledMidBatch(t *testing.T) {
	rows := []denseRec{{0, i64(10), f64(0.5), "a"}, {1, i64(11), f64(1.5), "a"}, {2, i64(-12), f64(-2.25), "a"},
		{3, nil, f64(3), "a"}, {4, i64(14), f64(4), "a"}, {5, i64(15), f64(5), "a"}}
	recs := denseRecords(t, rows)
	// Record 4's body is cut after n: the decoder has appended id and n when it fails.
	cut := denseRecords(t, rows[4:5])[0]
	cut.Value = cut.Value[:5+1+2] // frame, id (zig-zag 1 byte), n's union branch and 1 byte
	recs[4].Value = cut.Value
	var written []string
	for _, r := range append(slices.Clone(rows[:4]), rows[5]) {
		written = append(written, wantRow(r, true, false))
	}
	for _, levelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			dir := t.TempDir()
			res := runDenseFlush(t, dir, denseConfig(dir), recs, levelled)
			wantForms := "id:D n:L ok:D region:D ts:D x:D" // region: a set string, the byte form
			if levelled {
				wantForms = "id:L n:L ok:L region:L ts:L x:L"
			}
			if got := res.forms[""]; got != wantForms {
				t.Errorf("forms after the decode: %s; want %s", got, wantForms)
			}
			if got := deadLetters(res.out); fmt.Sprint(got) != "[4:truncated]" {
				t.Errorf("dead letters %v; want [4:truncated]", got)
			}
			if res.out.rows != 5 || len(res.files) != 1 {
				t.Fatalf("%d rows in %d files; want 5 in 1", res.out.rows, len(res.files))
			}
			if got := res.files[""]; !slices.Equal(got, written) {
				t.Errorf("file rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(written, "\n"))
			}
		})
	}
}

// A partitioned table: rows move into their partition's file as words while they are
// set, so the file of region a keeps n dense although the batch's table-wide n turned
// levelled at region b's null, and b's file turns levelled at it. A row the partitioner
// drops (a third region over batch.max_open_partitions 2) after n turned levelled
// leaves nothing behind; it is left for the next flush.
func TestDenseColumnsPerPartitionFile(t *testing.T) {
	rows := []denseRec{{0, i64(1), f64(1), "a"}, {1, i64(2), f64(2), "b"}, {2, nil, f64(3), "b"},
		{3, i64(4), f64(4), "a"}, {4, i64(5), nil, "b"}, {5, i64(6), f64(6), "a"}, {6, nil, nil, "c"}}
	recs := denseRecords(t, rows)
	want := map[string][]string{}
	for _, r := range rows[:6] {
		d := "region=" + r.region
		want[d] = append(want[d], wantRow(r, false, false))
	}
	for _, levelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			dir := t.TempDir()
			cfg := denseConfig(dir)
			cfg.Table.PartitionBy = []string{"region"}
			cfg.Batch.MaxOpenPartitions = 2
			res := runDenseFlush(t, dir, cfg, recs, levelled)
			wantForms := map[string]string{"": "id:D n:L ok:D region:D ts:D x:L",
				"region=a": "id:D n:D ok:D ts:D x:D", "region=b": "id:D n:L ok:D ts:D x:L"}
			if levelled {
				wantForms = map[string]string{"": "id:L n:L ok:L region:L ts:L x:L",
					"region=a": "id:L n:L ok:L ts:L x:L", "region=b": "id:L n:L ok:L ts:L x:L"}
			}
			if !maps.Equal(res.forms, wantForms) {
				t.Errorf("forms after the decode: %v; want %v", res.forms, wantForms)
			}
			if got := res.out.cutAt[topicPartition{"dense", 0}]; got != 6 || len(res.out.cutAt) != 1 {
				t.Errorf("cut at %v; want offset 6 of dense/0 (region c, over the limit)", res.out.cutAt)
			}
			if res.out.rows != 6 || len(res.out.deadLetters()) != 0 {
				t.Errorf("%d rows, dead letters %v; want 6, none", res.out.rows, deadLetters(res.out))
			}
			if !maps.EqualFunc(res.files, want, slices.Equal) {
				t.Errorf("files %v;\nwant %v", res.files, want)
			}
		})
	}
}

// A generated column computed from a dense column (day = CAST(ts AS DATE)), the Kafka
// columns partition, offset and timestamp, and CHECK constraints reading a dense column
// (id) and one that turned levelled (n): the rows they reject are dropped after n turned
// levelled (a null n violates n < 100 too), the others are written with their computed
// day and Kafka coordinates. The columns the fills set stay dense: the decoder's NULL
// for them (the writer lacks them) goes to the row's spare columns.
func TestDenseColumnsGeneratedAndConstraints(t *testing.T) {
	rows := []denseRec{{0, i64(1), f64(0.5), "a"}, {1, i64(2), f64(1), "a"}, {2, nil, f64(2), "a"},
		{3, i64(500), f64(3), "a"}, {4, i64(4), f64(4), "a"}, {-5, i64(5), f64(5), "a"}, {6, i64(99), f64(6), "a"}}
	recs := denseRecords(t, rows)
	var written []string
	for _, i := range []int{0, 1, 4, 6} {
		written = append(written, fmt.Sprintf("_kafka_offset=%d _kafka_partition=0 _kafka_timestamp=%d ", i, denseKafkaTS(int64(i))*1000)+
			wantRow(rows[i], true, true))
	}
	for _, levelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			dir := t.TempDir()
			createDenseTable(t, dir, map[string]string{"delta.constraints.id_nonneg": "id >= 0", "delta.constraints.n_small": "n < 100"})
			cfg := denseConfig(dir)
			cfg.Schema.Policy = config.PolicyDeadLetter
			cfg.Table.KafkaColumns = denseKafka
			res := runDenseFlush(t, dir, cfg, recs, levelled)
			wantForms := "_kafka_offset:D _kafka_partition:D _kafka_timestamp:D day:D id:D n:L ok:D region:D ts:D x:D"
			if levelled {
				wantForms = "_kafka_offset:L _kafka_partition:L _kafka_timestamp:L day:L id:L n:L ok:L region:L ts:L x:L"
			}
			if got := res.forms[""]; got != wantForms {
				t.Errorf("forms after the decode: %s; want %s", got, wantForms)
			}
			if got := deadLetters(res.out); fmt.Sprint(got) != "[2:check_violation 3:check_violation 5:check_violation]" {
				t.Errorf("dead letters %v; want records 2, 3 and 5 as check_violation", got)
			}
			if got := res.files[""]; !slices.Equal(got, written) {
				t.Errorf("file rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(written, "\n"))
			}
		})
	}
}

// denseKafka are the Kafka columns of createDenseTable's table.
var denseKafka = []string{kafkacols.Partition, kafkacols.Offset, kafkacols.Timestamp}

// createDenseTable creates the table of denseAvro at dir with a generated column day =
// CAST(ts AS DATE), the Kafka columns denseKafka and configuration conf (CHECK
// constraints), as another writer would.
func createDenseTable(t *testing.T, dir string, conf map[string]string) {
	t.Helper()
	ws, err := decode.ParseWriterSchema(7, denseAvro)
	if err != nil {
		t.Fatal(err)
	}
	schema := ws.Delta.Clone()
	for _, f := range schema.Fields {
		f.Nullable = true
		if f.Metadata == nil {
			f.Metadata = map[string]any{}
		}
	}
	schema.Fields = append(schema.Fields, &deltalog.StructField{Name: "day", Type: deltalog.Date, Nullable: true,
		Metadata: map[string]any{deltalog.MetaGenerationExpression: "CAST(ts AS DATE)"}})
	kafka, err := kafkacols.Fields(denseKafka, kafkacols.KeyBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	schema.Fields = append(schema.Fields, kafka...)
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "dense", Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	proto, meta := *create.Protocol, *create.Metadata
	maps.Copy(meta.Configuration, conf)
	proto.MinWriterVersion = max(proto.MinWriterVersion, 4) // CHECK constraints (3), generated columns (4)
	(&harness{t: t, tableDir: dir}).commitOther(0, proto, meta)
}

// Random batches (nulls anywhere in n and x, three regions, some records cut short, a
// partitioned or unpartitioned table, with or without the Kafka columns) flush to
// exactly the records' values, the dense columns and the levelled baseline alike: the
// whole kind of fault (a row's entries lost, doubled or shifted when a column changes
// form, in the table-wide columns or a partition file's).
func TestDenseColumnsRandomBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 23))
	for round := range 12 {
		partitioned, kafka := round%2 == 1, round%3 == 0
		var rows []denseRec
		cutAt := map[int]bool{}
		for i := range 40 + rng.IntN(80) {
			r := denseRec{id: int64(i), region: string(rune('a' + rng.IntN(3)))}
			if rng.IntN(4) > 0 || i < 5 { // the first rows set: the columns start dense
				r.n = i64(rng.Int64N(1<<50) - 1<<49)
			}
			if rng.IntN(6) > 0 {
				r.x = f64(rng.NormFloat64())
			}
			rows = append(rows, r)
			cutAt[i] = rng.IntN(15) == 0
		}
		recs := denseRecords(t, rows)
		want := map[string][]string{}
		var wantDead []string
		for i, r := range rows {
			if cutAt[i] {
				recs[i].Value = recs[i].Value[:len(recs[i].Value)-3] // in region's string: truncated
				wantDead = append(wantDead, fmt.Sprintf("%d:truncated", i))
				continue
			}
			d, row := "", wantRow(r, !partitioned, false)
			if partitioned {
				d = "region=" + r.region
			}
			if kafka {
				row = fmt.Sprintf("_kafka_offset=%d _kafka_partition=0 _kafka_timestamp=%d ", i, denseKafkaTS(int64(i))*1000) + row
			}
			want[d] = append(want[d], row)
		}
		for _, levelled := range []bool{false, true} {
			dir := t.TempDir()
			cfg := denseConfig(dir)
			cfg.Schema.Policy = config.PolicyDeadLetter
			if partitioned {
				cfg.Table.PartitionBy = []string{"region"}
			}
			if kafka {
				cfg.Table.KafkaColumns = denseKafka
			}
			res := runDenseFlush(t, dir, cfg, recs, levelled)
			what := fmt.Sprintf("round %d (partitioned %v, Kafka columns %v, levelled %v)", round, partitioned, kafka, levelled)
			if got := deadLetters(res.out); fmt.Sprint(got) != fmt.Sprint(wantDead) {
				t.Errorf("%s: dead letters %v; want %v", what, got, wantDead)
			}
			if !maps.EqualFunc(res.files, want, slices.Equal) {
				t.Errorf("%s: files\n%v\nwant\n%v", what, res.files, want)
			}
			if !levelled && strings.Contains(res.forms[""], "id:L") {
				t.Errorf("%s: forms %v; want id dense (never null)", what, res.forms)
			}
		}
	}
}
