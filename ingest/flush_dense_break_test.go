package ingest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
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
)

// Trying to break the typed column path: batches that mix writer schemas (an Avro
// int, float or timestamp-millis read into a long, double or timestamp column; a field
// nullable in one writer and required in the next; a field one writer lacks), values at
// the edges (integer extremes, NaN, -0.0, ±Inf, dates before 1970, negative decimals)
// and partitions by a dense column. Each flush is made twice, dense and with every
// column levelled (flusher.levelled), and both must give exactly the expected rows and
// the same add.stats.

// breakFlush is one flush's files read back: data file dir ("" unpartitioned; the file's
// path when another file of the flush is in the same random directory) → rows
// (renderAny), and dir → add.stats.
type breakFlush struct {
	out   *outcome
	files map[string][]string
	stats map[string]string
	parts map[string]map[string]*string // dir → add.partitionValues
	forms map[string]string             // after the decode: "" → the table-wide columns' forms (forms), dir → its file's
}

// runBreakFlush flushes recs (framed with the ids of schemas) to the existing table at
// dir as the consumer pipeline does (collect, prepare, route, write the files).
func runBreakFlush(t *testing.T, dir string, cfg *config.Config, schemas mapSchemas, recs []*kgo.Record, levelled bool) breakFlush {
	t.Helper()
	f, st := newBreakFlusher(t, dir, cfg, schemas, levelled)
	return breakFlushWith(t, f, st, recs)
}

// newBreakFlusher opens the table at dir and returns a flusher of cfg on it (every
// column starting levelled when levelled) and its store.
func newBreakFlusher(t *testing.T, dir string, cfg *config.Config, schemas mapSchemas, levelled bool) (*flusher, storage.Store) {
	t.Helper()
	st, err := storage.Open("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPipeline(cfg, Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: NewMetrics(prometheus.NewRegistry()),
		Schemas: schemas, Framed: true, Table: tbl})
	p.fl.levelled = levelled
	return p.fl, st
}

// breakFlushWith makes one flush of recs with f (which keeps its column buffers from its
// previous flushes), up to the data files (nothing is committed).
func breakFlushWith(t *testing.T, f *flusher, st storage.Store, recs []*kgo.Record) breakFlush {
	t.Helper()
	ctx := context.Background()
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
	fms := map[string]string{"": forms(b.pq, b.cols)}
	if b.parts != nil {
		for _, part := range b.parts.Files() {
			fms[part.Dir] = forms(b.parts.FileSchema(), part.Cols)
		}
	}
	adds, err := f.writeFiles(ctx, b, out)
	if err != nil {
		t.Fatal(err)
	}
	f.releaseCols(b)
	endFlush(f, items)
	res := breakFlush{out: out, files: map[string][]string{}, stats: map[string]string{}, parts: map[string]map[string]*string{}, forms: fms}
	for _, a := range adds {
		d := ""
		if i := strings.LastIndexByte(a.Path, '/'); i >= 0 {
			d = a.Path[:i]
		}
		if _, dup := res.files[d]; dup {
			// Two partitions drew the same random two-character directory (column
			// mapping): key this file by its path.
			d = a.Path
		}
		res.files[d] = readAny(t, st, a.Path)
		res.stats[d] = a.Stats
		res.parts[d] = a.PartitionValues
	}
	return res
}

// readAny reads a flat data file back with parquet-go's reader, rendering every row as
// "name=value …" in leaf order: FLOAT and DOUBLE by their bits' value ('g', shortest; a
// NaN as NaN, -0 as -0), null as null.
func readAny(t *testing.T, st storage.Store, path string) []string {
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
				case v.Kind() == parquet.Float:
					val = strconv.FormatFloat(float64(v.Float()), 'g', -1, 32)
				case v.Kind() == parquet.Double:
					val = strconv.FormatFloat(v.Double(), 'g', -1, 64)
				default:
					val = strconv.Quote(string(v.ByteArray()))
				}
				s = append(s, strings.Join(names[v.Column()], ".")+"="+val)
			}
			out = append(out, strings.Join(s, " "))
		}
		if err == io.EOF || n == 0 {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// breakSchemas parses writer schemas by id.
func breakSchemas(t *testing.T, avsc map[int]string) mapSchemas {
	t.Helper()
	m := mapSchemas{}
	for id, s := range avsc {
		ws, err := decode.ParseWriterSchema(id, s)
		if err != nil {
			t.Fatal(err)
		}
		m[id] = ws
	}
	return m
}

// breakRec is one record: writer schema id and its Avro value.
type breakRec struct {
	id  int
	val map[string]any
}

// breakRecords frames recs as Kafka records of partition 0 at offsets 0, 1, ….
func breakRecords(t *testing.T, avsc map[int]string, recs []breakRec) []*kgo.Record {
	t.Helper()
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		body, err := avro.Marshal(avro.MustParse(avsc[r.id]), r.val)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		out[i] = &kgo.Record{Topic: "brk", Partition: 0, Offset: int64(i), Timestamp: time.UnixMilli(1_800_000_000_000 + int64(i)),
			Value: append([]byte{0, 0, 0, 0, byte(r.id)}, body...)}
	}
	return out
}

// createBreakTable creates a table of schema (every field nullable) partitioned by
// partitionBy at dir, with configuration conf, as another writer would.
func createBreakTable(t *testing.T, dir string, schema *deltalog.StructType, partitionBy []string, conf map[string]string) {
	t.Helper()
	for _, f := range schema.Fields {
		if f.Metadata == nil {
			f.Metadata = map[string]any{}
		}
	}
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "brk", Schema: schema, PartitionColumns: partitionBy})
	if err != nil {
		t.Fatal(err)
	}
	proto, meta := *create.Protocol, *create.Metadata
	if meta.Configuration == nil {
		meta.Configuration = map[string]string{}
	}
	maps.Copy(meta.Configuration, conf)
	meta.PartitionColumns = partitionBy
	(&harness{t: t, tableDir: dir}).commitOther(0, proto, meta)
}

func breakConfig(dir string) *config.Config {
	return &config.Config{Name: "brk", AppID: "brk", Table: config.Table{URI: "file://" + dir},
		Schema: config.Schema{Policy: config.PolicyDeadLetter, OnIncompatible: config.PolicyHalt}, DeadLetter: config.DeadLetter{Topic: "brk.dlq"},
		Batch: config.Batch{MaxRecords: 1000, MaxBytes: 64 << 20, MaxOpenPartitions: 256}}
}

// The writer schemas of TestBreakMixedWritersEdgeValues: 7 writes v as int, f as float,
// ts as timestamp-millis and b as a required boolean; 8 writes v as long, f as double,
// ts as timestamp-micros and b nullable; 9 lacks f and b. All are read into the table
// schema breakTableSchema (v long, f double, ts timestamp, b boolean, d decimal(9,2),
// e decimal(18,4), dt date).
var breakAvsc = map[int]string{
	7: `{"type":"record","name":"m","fields":[{"name":"id","type":"long"},{"name":"v","type":"int"},
 {"name":"f","type":"float"},{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"b","type":"boolean"},{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"e","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":4}},
 {"name":"dt","type":{"type":"int","logicalType":"date"}}]}`,
	8: `{"type":"record","name":"m","fields":[{"name":"id","type":"long"},{"name":"v","type":"long"},
 {"name":"f","type":"double"},{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"b","type":["null","boolean"]},{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"e","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":4}},
 {"name":"dt","type":{"type":"int","logicalType":"date"}}]}`,
	9: `{"type":"record","name":"m","fields":[{"name":"id","type":"long"},{"name":"v","type":"long"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"e","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":4}},
 {"name":"dt","type":{"type":"int","logicalType":"date"}}]}`,
}

func breakTableSchema() *deltalog.StructType {
	return &deltalog.StructType{Fields: []*deltalog.StructField{
		{Name: "id", Type: deltalog.Long, Nullable: true},
		{Name: "v", Type: deltalog.Long, Nullable: true},
		{Name: "f", Type: deltalog.Double, Nullable: true},
		{Name: "ts", Type: deltalog.Timestamp, Nullable: true},
		{Name: "b", Type: deltalog.Boolean, Nullable: true},
		{Name: "d", Type: deltalog.DecimalType{Precision: 9, Scale: 2}, Nullable: true},
		{Name: "e", Type: deltalog.DecimalType{Precision: 18, Scale: 4}, Nullable: true},
		{Name: "dt", Type: deltalog.Date, Nullable: true},
	}}
}

// breakCase is a record of the edge-value batch and its expected row, rendered as
// readAny renders it (leaves in name order: b d dt e f id ts v).
type breakCase struct {
	rec  breakRec
	want string
}

// unscaled gives the Avro decimal bytes (big-endian two's complement) of unscaled value u.
func unscaled(u int64) []byte {
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = byte(u)
		u >>= 8
	}
	// trim redundant sign bytes
	for len(b) > 1 && ((b[0] == 0 && b[1]&0x80 == 0) || (b[0] == 0xff && b[1]&0x80 != 0)) {
		b = b[1:]
	}
	return b
}

func breakCases() []breakCase {
	negZero32 := float32(math.Copysign(0, -1))
	rows := []breakCase{
		{breakRec{7, map[string]any{"id": int64(0), "v": int32(math.MinInt32), "f": float32(1.5), "ts": int64(-1), "b": true,
			"d": unscaled(-123456789), "e": unscaled(-999999999999999999), "dt": int32(-1)}},
			"b=true d=-123456789 dt=-1 e=-999999999999999999 f=1.5 id=0 ts=-1000 v=-2147483648"},
		{breakRec{7, map[string]any{"id": int64(1), "v": int32(-1), "f": negZero32, "ts": int64(1_700_000_000_123), "b": false,
			"d": unscaled(-1), "e": unscaled(-1), "dt": int32(-719162)}},
			"b=false d=-1 dt=-719162 e=-1 f=-0 id=1 ts=1700000000123000 v=-1"},
		{breakRec{8, map[string]any{"id": int64(2), "v": int64(math.MinInt64), "f": math.Inf(-1), "ts": deltalog.TimestampMinMicros, "b": map[string]any{"boolean": true},
			"d": unscaled(999999999), "e": unscaled(999999999999999999), "dt": deltalog.DateMaxDays}},
			"b=true d=999999999 dt=2932896 e=999999999999999999 f=-Inf id=2 ts=-62135596800000000 v=-9223372036854775808"},
		{breakRec{7, map[string]any{"id": int64(3), "v": int32(math.MaxInt32), "f": float32(math.Inf(1)), "ts": int64(0), "b": true,
			"d": unscaled(0), "e": unscaled(0), "dt": int32(0)}},
			"b=true d=0 dt=0 e=0 f=+Inf id=3 ts=0 v=2147483647"},
		{breakRec{8, map[string]any{"id": int64(4), "v": int64(math.MaxInt64), "f": 2.5e-300, "ts": deltalog.TimestampMaxMicros, "b": nil,
			"d": unscaled(-5), "e": unscaled(math.MinInt32), "dt": deltalog.DateMinDays}},
			"b=null d=-5 dt=-719162 e=-2147483648 f=2.5e-300 id=4 ts=253402300799999999 v=9223372036854775807"},
		{breakRec{9, map[string]any{"id": int64(5), "v": int64(-4294967296), "ts": int64(-62135596800000000),
			"d": unscaled(12345), "e": unscaled(-4294967296), "dt": int32(-25567)}},
			"b=null d=12345 dt=-25567 e=-4294967296 f=null id=5 ts=-62135596800000000 v=-4294967296"},
		{breakRec{7, map[string]any{"id": int64(6), "v": int32(-2), "f": float32(math.NaN()), "ts": int64(-86_400_000), "b": false,
			"d": unscaled(-100), "e": unscaled(-1234567890123), "dt": int32(-2)}},
			"b=false d=-100 dt=-2 e=-1234567890123 f=NaN id=6 ts=-86400000000 v=-2"},
	}
	return rows
}

// Mixed writer schemas in one unpartitioned batch, at the edges of every type: the file
// holds exactly each record's value (an int widened to long keeps its sign, a float
// widened to double keeps -0, ±Inf and NaN, timestamp-millis are scaled to micros,
// negative decimals and dates before 1970), dense and levelled alike, with the same
// add.stats.
func TestBreakMixedWritersEdgeValues(t *testing.T) {
	cases := breakCases()
	var recs []breakRec
	var want []string
	for _, c := range cases {
		recs = append(recs, c.rec)
		want = append(want, c.want)
	}
	schemas := breakSchemas(t, breakAvsc)
	krecs := breakRecords(t, breakAvsc, recs)
	var stats [2]string
	for i, levelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			dir := t.TempDir()
			createBreakTable(t, dir, breakTableSchema(), nil, nil)
			res := runBreakFlush(t, dir, breakConfig(dir), schemas, krecs, levelled)
			if dl := res.out.deadLetters(); len(dl) != 0 {
				t.Fatalf("dead letters %v; want none", deadLetters(res.out))
			}
			if got := res.files[""]; !slices.Equal(got, want) {
				t.Errorf("file rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			stats[i] = res.stats[""]
		})
	}
	if stats[0] != stats[1] {
		t.Errorf("add.stats differ:\ndense    %s\nlevelled %s", stats[0], stats[1])
	}
	t.Logf("stats %s", stats[0])
}

// without drops the leaves named in drop ("name=value" tokens) from a rendered row.
func without(row string, drop ...string) string {
	var keep []string
	for _, tok := range strings.Split(row, " ") {
		if !slices.Contains(drop, tok[:strings.IndexByte(tok, '=')]) {
			keep = append(keep, tok)
		}
	}
	return strings.Join(keep, " ")
}

// tokenOf returns the value of leaf name in a rendered row.
func tokenOf(row, name string) string {
	for _, tok := range strings.Split(row, " ") {
		if k, v, _ := strings.Cut(tok, "="); k == name {
			return v
		}
	}
	return ""
}

// Partitions by a dense column: a date (before 1970, the extremes), a boolean, and a
// long (the extremes) — each a column every row of the batch sets, so its table-wide
// column stays dense while the partitioner reads its values and moves the rows. Every
// partition file holds exactly its rows, with every column dense in the dense flush
// (writer 7 only: no nulls), and the same files and add.stats as the levelled flush.
// Then the same with all three writers, where f and b turn levelled at their nulls.
func TestBreakPartitionByDenseColumn(t *testing.T) {
	schemas := breakSchemas(t, breakAvsc)
	all := breakCases()
	for _, only7 := range []bool{true, false} {
		var cases []breakCase
		for _, c := range all {
			if !only7 || c.rec.id == 7 {
				cases = append(cases, c)
			}
		}
		var recs []breakRec
		for _, c := range cases {
			recs = append(recs, c.rec)
		}
		krecs := breakRecords(t, breakAvsc, recs)
		for _, by := range []string{"dt", "b", "v"} {
			want := map[string][]string{}
			for _, c := range cases {
				pv := tokenOf(c.want, by)
				var d string
				switch {
				case pv == "null":
					d = by + "=" + deltawriter.HiveDefaultPartition
				case by == "dt":
					days, _ := strconv.ParseInt(pv, 10, 64)
					pvs, err := deltawriter.PartitionValue(deltalog.Date, parquet.Int32Value(int32(days)))
					if err != nil {
						t.Fatal(err)
					}
					d = by + "=" + deltawriter.EscapePartitionName(*pvs)
				default:
					d = by + "=" + pv
				}
				want[d] = append(want[d], without(c.want, by))
			}
			var stats [2]map[string]string
			for i, levelled := range []bool{false, true} {
				t.Run(fmt.Sprintf("only7=%v/by=%s/levelled=%v", only7, by, levelled), func(t *testing.T) {
					dir := t.TempDir()
					createBreakTable(t, dir, breakTableSchema(), []string{by}, nil)
					res := runBreakFlush(t, dir, breakConfig(dir), schemas, krecs, levelled)
					if dl := res.out.deadLetters(); len(dl) != 0 {
						t.Fatalf("dead letters %v; want none", deadLetters(res.out))
					}
					if !maps.EqualFunc(res.files, want, slices.Equal) {
						t.Errorf("files:\n%v\nwant:\n%v", res.files, want)
					}
					stats[i] = res.stats
				})
			}
			if !maps.Equal(stats[0], stats[1]) {
				t.Errorf("only7=%v by=%s: add.stats differ:\ndense    %v\nlevelled %v", only7, by, stats[0], stats[1])
			}
		}
	}
}

// One flusher, several flushes: its column buffers are kept from flush to flush, so a
// column that turned levelled in one flush (after the reserve sample of 256 rows, in an
// unpartitioned table without fills, whose buffers are reused without clearing) must
// start dense again in the next, and one that starts with a null must turn levelled at
// once — each flush's file holding exactly its own rows, never a value of the previous
// flush's buffers.
func TestBreakColumnFormAcrossFlushes(t *testing.T) {
	schemas := breakSchemas(t, breakAvsc)
	// writer 8: b nullable; writer 9 lacks f and b.
	mk := func(n, nullAt int, first int64) ([]*kgo.Record, []string) {
		var recs []breakRec
		var want []string
		for i := 0; i < n; i++ {
			id := first + int64(i)
			v := id*7 - 3000
			b := any(map[string]any{"boolean": id%3 == 0})
			bs := strconv.FormatBool(id%3 == 0)
			if i == nullAt {
				b, bs = nil, "null"
			}
			recs = append(recs, breakRec{8, map[string]any{"id": id, "v": v, "f": float64(id) / 4, "ts": id * 1000, "b": b,
				"d": unscaled(-id), "e": unscaled(id * 10), "dt": int32(id - 500)}})
			want = append(want, fmt.Sprintf("b=%s d=%d dt=%d e=%d f=%s id=%d ts=%d v=%d", bs, -id, id-500, id*10,
				strconv.FormatFloat(float64(id)/4, 'g', -1, 64), id, id*1000, v))
		}
		krecs := breakRecords(t, breakAvsc, recs)
		return krecs, want
	}
	type step struct {
		n, nullAt int
	}
	steps := []step{{700, 300}, {600, -1}, {5, 0}, {400, -1}, {3, 2}}
	for _, levelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			dir := t.TempDir()
			createBreakTable(t, dir, breakTableSchema(), nil, nil)
			f, st := newBreakFlusher(t, dir, breakConfig(dir), schemas, levelled)
			first := int64(0)
			for si, sp := range steps {
				recs, want := mk(sp.n, sp.nullAt, first)
				first += int64(sp.n)
				res := breakFlushWith(t, f, st, recs)
				if got := res.files[""]; !slices.Equal(got, want) {
					n := 0
					for i := range min(len(got), len(want)) {
						if got[i] != want[i] && n < 5 {
							t.Errorf("flush %d row %d: %s\n want %s", si, i, got[i], want[i])
							n++
						}
					}
					if len(got) != len(want) {
						t.Errorf("flush %d: %d rows, want %d", si, len(got), len(want))
					}
				}
			}
		})
	}
}

// Writer schemas of TestBreakGeneratedMixedWriters: 20 lacks the generated column day,
// 21 supplies it (a date), 22 supplies it nullable; all write ts as timestamp-micros and
// a required long n.
var genAvsc = map[int]string{
	20: `{"type":"record","name":"g","fields":[{"name":"id","type":"long"},{"name":"n","type":"long"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}}]}`,
	21: `{"type":"record","name":"g","fields":[{"name":"id","type":"long"},{"name":"n","type":"long"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},{"name":"day","type":{"type":"int","logicalType":"date"}}]}`,
	22: `{"type":"record","name":"g","fields":[{"name":"id","type":"long"},{"name":"n","type":"long"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},{"name":"day","type":["null",{"type":"int","logicalType":"date"}]}]}`,
}

// A generated column day = CAST(ts AS DATE) (a dense date column the fill sets) that
// some writers of the batch supply and others lack, interleaved record by record, with
// a CHECK constraint on the dense n and on day: a writer that lacks day gets it computed
// (its decoder's NULL goes to the spare column), one that supplies the right day keeps
// it, one that supplies a wrong day or a NULL day is dead-lettered
// (generated_column_mismatch), a row violating a constraint is dead-lettered
// (check_violation) — and no dead-lettered row leaves a value behind in a dense column
// (the next row's values stay in their rows). Unpartitioned and partitioned by day,
// dense and levelled alike.
func TestBreakGeneratedMixedWriters(t *testing.T) {
	schemas := breakSchemas(t, genAvsc)
	const dayUs = 86_400_000_000
	type rc struct {
		w      int
		id, n  int64
		ts     int64
		day    any // supplied day (int32, nil for null) when w != 20
		reason string
	}
	rows := []rc{
		{20, 0, 1, -1, nil, ""},          // 1969-12-31 → day -1
		{21, 1, 2, 0, int32(0), ""},      // right
		{20, 2, 3, 5*dayUs + 1, nil, ""}, // day 5
		{21, 3, 4, 3 * dayUs, int32(2), "generated_column_mismatch"},
		{22, 4, 5, 7 * dayUs, nil, "generated_column_mismatch"}, // null day supplied
		{22, 5, 6, -3*dayUs - 1, int32(-4), ""},                 // right: floor
		{20, 6, -7, 9 * dayUs, nil, "check_violation"},          // n >= 0 violated
		{21, 7, 8, 10 * dayUs, int32(10), "check_violation"},    // day < 10 violated
		{20, 8, math.MaxInt64, -dayUs * 400, nil, ""},
		{22, 9, 0, 2 * dayUs, int32(2), ""},
	}
	var recs []breakRec
	for _, r := range rows {
		v := map[string]any{"id": r.id, "n": r.n, "ts": r.ts}
		switch r.w {
		case 21:
			v["day"] = r.day
		case 22:
			if r.day == nil {
				v["day"] = nil
			} else {
				v["day"] = map[string]any{"int.date": r.day}
			}
		}
		recs = append(recs, breakRec{r.w, v})
	}
	krecs := breakRecords(t, genAvsc, recs)
	floorDiv := func(a, b int64) int64 {
		q := a / b
		if a%b != 0 && (a < 0) != (b < 0) {
			q--
		}
		return q
	}
	var wantDead []string
	wantUnpart := []string{}
	wantPart := map[string][]string{}
	for i, r := range rows {
		if r.reason != "" {
			wantDead = append(wantDead, fmt.Sprintf("%d:%s", i, r.reason))
			continue
		}
		day := floorDiv(r.ts, dayUs)
		wantUnpart = append(wantUnpart, fmt.Sprintf("day=%d id=%d n=%d ts=%d", day, r.id, r.n, r.ts))
		pv, err := deltawriter.PartitionValue(deltalog.Date, parquet.Int32Value(int32(day)))
		if err != nil {
			t.Fatal(err)
		}
		d := "day=" + deltawriter.EscapePartitionName(*pv)
		wantPart[d] = append(wantPart[d], fmt.Sprintf("id=%d n=%d ts=%d", r.id, r.n, r.ts))
	}
	schema := func() *deltalog.StructType {
		return &deltalog.StructType{Fields: []*deltalog.StructField{
			{Name: "id", Type: deltalog.Long, Nullable: true},
			{Name: "n", Type: deltalog.Long, Nullable: true},
			{Name: "ts", Type: deltalog.Timestamp, Nullable: true},
			{Name: "day", Type: deltalog.Date, Nullable: true, Metadata: map[string]any{deltalog.MetaGenerationExpression: "CAST(ts AS DATE)"}},
		}}
	}
	conf := map[string]string{"delta.constraints.n_nonneg": "n >= 0", "delta.constraints.day_small": "day < CAST('1970-01-11' AS DATE)"}
	for _, part := range []bool{false, true} {
		var stats [2]map[string]string
		for li, levelled := range []bool{false, true} {
			t.Run(fmt.Sprintf("partitioned=%v/levelled=%v", part, levelled), func(t *testing.T) {
				dir := t.TempDir()
				var by []string
				if part {
					by = []string{"day"}
				}
				createGenTable(t, dir, schema(), by, conf)
				res := runBreakFlush(t, dir, breakConfig(dir), schemas, krecs, levelled)
				if got := deadLetters(res.out); !slices.Equal(got, wantDead) {
					t.Errorf("dead letters %v; want %v", got, wantDead)
				}
				if part {
					if !maps.EqualFunc(res.files, wantPart, slices.Equal) {
						t.Errorf("files:\n%v\nwant:\n%v", res.files, wantPart)
					}
				} else if got := res.files[""]; !slices.Equal(got, wantUnpart) {
					t.Errorf("file rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantUnpart, "\n"))
				}
				stats[li] = res.stats
			})
		}
		if !maps.Equal(stats[0], stats[1]) {
			t.Errorf("partitioned=%v: add.stats differ:\ndense    %v\nlevelled %v", part, stats[0], stats[1])
		}
	}
}

// createGenTable is createBreakTable for a table with generated columns and CHECK
// constraints (writer version 4).
func createGenTable(t *testing.T, dir string, schema *deltalog.StructType, partitionBy []string, conf map[string]string) {
	t.Helper()
	for _, f := range schema.Fields {
		if f.Metadata == nil {
			f.Metadata = map[string]any{}
		}
	}
	create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "brk", Schema: schema, PartitionColumns: partitionBy})
	if err != nil {
		t.Fatal(err)
	}
	proto, meta := *create.Protocol, *create.Metadata
	if meta.Configuration == nil {
		meta.Configuration = map[string]string{}
	}
	maps.Copy(meta.Configuration, conf)
	meta.PartitionColumns = partitionBy
	proto.MinWriterVersion = max(proto.MinWriterVersion, 4)
	(&harness{t: t, tableDir: dir}).commitOther(0, proto, meta)
}

// Random batches of the three writers of breakAvsc, past the reserve sample (8,000 rows;
// one data page a column at the 1 MiB page target: page cuts of dense columns are
// deltawriter's TestWriteColumnsDenseSameBytes), with values drawn from the edges and
// at random, a null b or a missing f now and then (a column turns levelled at a random
// row, or never), unpartitioned and partitioned by the boolean b: the
// files hold exactly the records' values, dense and levelled alike, with the same
// add.stats.
func TestBreakRandomMixedWriters(t *testing.T) {
	schemas := breakSchemas(t, breakAvsc)
	rng := rand.New(rand.NewPCG(15, 23))
	i32s := []int32{math.MinInt32, math.MaxInt32, -1, 0, 1, -2}
	i64s := []int64{math.MinInt64, math.MaxInt64, -1, 0, 1 << 40, -(1 << 33)}
	f64s := []float64{math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 1.5, -2.75, 1e308, -5e-324}
	pick32 := func() int32 {
		if rng.IntN(4) == 0 {
			return i32s[rng.IntN(len(i32s))]
		}
		return int32(rng.Uint32())
	}
	pick64 := func() int64 {
		if rng.IntN(4) == 0 {
			return i64s[rng.IntN(len(i64s))]
		}
		return int64(rng.Uint64())
	}
	fmtF := func(f float64, bits int) string { return strconv.FormatFloat(f, 'g', -1, bits) }
	for trial := range 3 {
		n := 8000
		// writer 8's null b and writer 9's rows (no f, no b) start at a random row, or never
		nullFrom := []int{rng.IntN(n), n, rng.IntN(200)}[trial]
		var recs []breakRec
		var want []string
		for i := range n {
			w := 7
			if i >= nullFrom {
				w = []int{7, 8, 9}[rng.IntN(3)]
			}
			id := int64(i)
			// ts and dt within Delta's range (its ends and values drawn over it); ts is
			// in ms from writer 7, so its range in ms serves both writers.
			tsLo, tsSpan := deltalog.TimestampMinMicros/1000, uint64(deltalog.TimestampMaxMicros/1000-deltalog.TimestampMinMicros/1000)
			ts := (tsLo + int64(uint64(pick64())%(tsSpan+1))) * 1000
			dt := deltalog.DateMinDays + int32(uint32(pick32())%uint32(deltalog.DateMaxDays-deltalog.DateMinDays+1))
			d := int64(rng.Int32N(1_000_000_000)) - 500_000_000
			e := int64(rng.Uint64()%1_999_999_999_999_999_999) - 999_999_999_999_999_999
			val := map[string]any{"id": id, "ts": ts, "d": unscaled(d), "e": unscaled(e), "dt": dt}
			var v int64
			var fs, bs string
			b := rng.IntN(2) == 0
			switch w {
			case 7:
				x := pick32()
				v = int64(x)
				f := float32(f64s[rng.IntN(len(f64s))])
				if rng.IntN(2) == 0 {
					f = math.Float32frombits(rng.Uint32() &^ 0x7f800000) // finite
				}
				val["v"], val["f"], val["b"], val["ts"] = x, f, b, ts/1000 // millis
				fs, bs = fmtF(float64(f), 64), strconv.FormatBool(b)
				ts = (ts / 1000) * 1000
			case 8:
				v = pick64()
				f := f64s[rng.IntN(len(f64s))]
				val["v"], val["f"] = v, f
				fs = fmtF(f, 64)
				if rng.IntN(5) == 0 {
					val["b"], bs = nil, "null"
				} else {
					val["b"], bs = map[string]any{"boolean": b}, strconv.FormatBool(b)
				}
			case 9:
				v = pick64()
				val["v"] = v
				fs, bs = "null", "null"
			}
			recs = append(recs, breakRec{w, val})
			want = append(want, fmt.Sprintf("b=%s d=%d dt=%d e=%d f=%s id=%d ts=%d v=%d", bs, d, dt, e, fs, id, ts, v))
		}
		krecs := breakRecords(t, breakAvsc, recs)
		for _, by := range []string{"", "b"} { // (dt: one file per random date, covered by TestBreakPartitionByDenseColumn)
			wantFiles := map[string][]string{}
			if by == "" {
				wantFiles[""] = want
			} else {
				for _, row := range want {
					pv := tokenOf(row, by)
					var dir string
					switch {
					case pv == "null":
						dir = by + "=" + deltawriter.HiveDefaultPartition
					case by == "dt":
						days, _ := strconv.ParseInt(pv, 10, 64)
						s, err := deltawriter.PartitionValue(deltalog.Date, parquet.Int32Value(int32(days)))
						if err != nil {
							t.Fatal(err)
						}
						dir = by + "=" + deltawriter.EscapePartitionName(*s)
					default:
						dir = by + "=" + pv
					}
					wantFiles[dir] = append(wantFiles[dir], without(row, by))
				}
			}
			var stats [2]map[string]string
			for li, levelled := range []bool{false, true} {
				t.Run(fmt.Sprintf("trial=%d/by=%q/levelled=%v", trial, by, levelled), func(t *testing.T) {
					dir := t.TempDir()
					var pb []string
					if by != "" {
						pb = []string{by}
					}
					createBreakTable(t, dir, breakTableSchema(), pb, nil)
					cfg := breakConfig(dir)
					cfg.Batch.MaxRecords = n
					res := runBreakFlush(t, dir, cfg, schemas, krecs, levelled)
					if dl := res.out.deadLetters(); len(dl) != 0 {
						t.Fatalf("dead letters %v; want none", deadLetters(res.out)[:min(5, len(dl))])
					}
					for d, rows := range wantFiles {
						got := res.files[d]
						if len(got) != len(rows) {
							t.Errorf("%s: %d rows, want %d", d, len(got), len(rows))
						}
						bad := 0
						for i := range min(len(got), len(rows)) {
							if got[i] != rows[i] && bad < 5 {
								t.Errorf("%s row %d:\n got %s\nwant %s", d, i, got[i], rows[i])
								bad++
							}
						}
					}
					if len(res.files) != len(wantFiles) {
						t.Errorf("%d files, want %d", len(res.files), len(wantFiles))
					}
					stats[li] = res.stats
				})
			}
			if !maps.Equal(stats[0], stats[1]) {
				t.Errorf("trial %d by %q: add.stats differ:\ndense    %v\nlevelled %v", trial, by, stats[0], stats[1])
			}
		}
	}
}

// heldBytes is the memory the column buffers cols hold (their capacities: a parquet.Value
// valueBytes, a dense word or offset denseBytes, a byte of Bytes one, and the earlier
// Bytes buffers that levelled values still alias, column.Column.ByteSize), whatever form
// each column is in now.
func heldBytes(cols []column.Column) int64 {
	var n int64
	for i := range cols {
		c := &cols[i]
		n += int64(cap(c.Values))*valueBytes + int64(cap(c.Dense))*denseBytes + int64(cap(c.Bytes)+c.ByteSize()-len(c.Bytes))
	}
	return n
}

// The batch budget (README, "batch": max_bytes bounds the memory of batches while they
// are written; a record is charged 24 bytes per column value, 8 per dense word; the
// flush sizes its column buffers before it decodes, never more than max_bytes in all):
// the column buffers a flush holds stay within what it charges for them (colBytes of the
// columns it decoded), up to an eighth more. The levelled baseline holds what it charges
// (prepare reserves one value a row). A dense column that turns levelled at the last row
// of a large unpartitioned batch holds its reserved words and a fresh levelled buffer of
// twice its rows (column.Column.ToLevelled), ≈ 56 bytes a row where 24 are charged.
func TestBreakColumnMemoryWithinCharge(t *testing.T) {
	schemas := breakSchemas(t, breakAvsc)
	const n = 8_000
	var recs []breakRec
	for i := range n {
		b := any(map[string]any{"boolean": i%2 == 0})
		if i == n-1 {
			b = nil // b's first null: the batch's last row
		}
		recs = append(recs, breakRec{8, map[string]any{"id": int64(i), "v": int64(i), "f": float64(i), "ts": int64(i), "b": b,
			"d": unscaled(int64(i)), "e": unscaled(int64(i)), "dt": int32(i)}})
	}
	krecs := breakRecords(t, breakAvsc, recs)
	for _, levelled := range []bool{true, false} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			dir := t.TempDir()
			createBreakTable(t, dir, breakTableSchema(), nil, nil)
			cfg := breakConfig(dir)
			cfg.Batch.MaxRecords = n
			f, st := newBreakFlusher(t, dir, cfg, schemas, levelled)
			res := breakFlushWith(t, f, st, krecs)
			if len(res.files[""]) != n {
				t.Fatalf("%d rows written, want %d", len(res.files[""]), n)
			}
			charged, held := colBytes(f.colBufs), heldBytes(f.colBufs)
			t.Logf("charged %d B, held %d B (%.2f×)", charged, held, float64(held)/float64(charged))
			if held > charged+charged/8 {
				for i := range f.colBufs {
					c := &f.colBufs[i]
					t.Logf("column %d: dense=%v len %d, cap(Values) %d, cap(Dense) %d", i, c.IsDense(), c.Len(), cap(c.Values), cap(c.Dense))
				}
				t.Errorf("the flush's column buffers hold %d bytes, %.2f× the %d bytes it charges for them", held, float64(held)/float64(charged), charged)
			}
		})
	}
}

// logicalRows renames the physical leaf names of rendered rows (column mapping) to the
// table's logical names and sorts each row's tokens by name, so that files of two tables
// (two sets of random physical names, in two leaf orders) compare.
func logicalRows(t *testing.T, dir string, files map[string][]string) map[string][]string {
	t.Helper()
	st, err := storage.Open("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := deltawriter.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	schema, err := snap.Metadata.Schema()
	if err != nil {
		t.Fatal(err)
	}
	mode := deltalog.ColumnMappingMode(snap.Metadata.Configuration["delta.columnMapping.mode"])
	logical := map[string]string{}
	for _, f := range schema.Fields {
		logical[f.PhysicalName(mode)] = f.Name
	}
	out := map[string][]string{}
	for d, rows := range files {
		for _, row := range rows {
			var toks []string
			for _, tok := range strings.Split(row, " ") {
				k, v, _ := strings.Cut(tok, "=")
				l, ok := logical[k]
				if !ok {
					t.Fatalf("leaf %q of a data file is no column of the table", k)
				}
				toks = append(toks, l+"="+v)
			}
			slices.Sort(toks)
			out[d] = append(out[d], strings.Join(toks, " "))
		}
	}
	return out
}

// Column mapping (name and id): the data files' leaves are the columns' physical names,
// in their order (random UUIDs: a column's leaf index is not its logical position), and
// the dense columns must carry the leaf index of their physical leaf. The edge-value
// batch of mixed writers, unpartitioned and partitioned by the dense dt: every file
// holds exactly each row's values under the right logical column, dense and levelled
// alike.
func TestBreakColumnMappingDense(t *testing.T) {
	schemas := breakSchemas(t, breakAvsc)
	cases := breakCases()
	var recs []breakRec
	for _, c := range cases {
		recs = append(recs, c.rec)
	}
	krecs := breakRecords(t, breakAvsc, recs)
	sortedRow := func(row string) string {
		toks := strings.Split(row, " ")
		slices.Sort(toks)
		return strings.Join(toks, " ")
	}
	for _, mode := range []string{"name", "id"} {
		for _, by := range []string{"", "dt"} {
			want := map[string][]string{}
			for _, c := range cases {
				if by == "" {
					want[""] = append(want[""], sortedRow(c.want))
					continue
				}
				// directories are random prefixes under column mapping: key by the row's
				// dt partition value
				days, _ := strconv.ParseInt(tokenOf(c.want, "dt"), 10, 64)
				pv, err := deltawriter.PartitionValue(deltalog.Date, parquet.Int32Value(int32(days)))
				if err != nil {
					t.Fatal(err)
				}
				want[*pv] = append(want[*pv], sortedRow(without(c.want, "dt")))
			}
			for _, levelled := range []bool{false, true} {
				t.Run(fmt.Sprintf("mode=%s/by=%q/levelled=%v", mode, by, levelled), func(t *testing.T) {
					dir := t.TempDir()
					var pb []string
					if by != "" {
						pb = []string{by}
					}
					create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "brk", Schema: breakTableSchema(),
						PartitionColumns: pb, ColumnMapping: mode, Enable: []string{deltalog.FeatureColumnMapping}})
					if err != nil {
						t.Fatal(err)
					}
					(&harness{t: t, tableDir: dir}).commitOther(0, *create.Protocol, *create.Metadata)
					res := runBreakFlush(t, dir, breakConfig(dir), schemas, krecs, levelled)
					if dl := res.out.deadLetters(); len(dl) != 0 {
						t.Fatalf("dead letters %v; want none", deadLetters(res.out))
					}
					got := logicalRows(t, dir, res.files)
					if by != "" {
						// one file per dt value: key each file's rows by its add's one
						// partition value (keyed by dt's physical name)
						byDT := map[string][]string{}
						for d, rows := range got {
							if len(res.parts[d]) != 1 {
								t.Fatalf("file in %s: partitionValues %v, want one", d, res.parts[d])
							}
							for _, v := range res.parts[d] {
								key := "null"
								if v != nil {
									key = *v
								}
								byDT[key] = append(byDT[key], rows...)
							}
						}
						got = byDT
					}
					if !maps.EqualFunc(got, want, slices.Equal) {
						t.Errorf("files:\n%v\nwant:\n%v", got, want)
					}
				})
			}
		}
	}
}

// A table partitioned by a generated TIMESTAMP hr = date_trunc('HOUR', ts), computed from
// the dense ts into a dense column the fill sets (its directory is formatted from the
// row's microseconds, read from the dense word), with timestamps before 1970 and at
// hour edges: each row lands in the file of its hour, with the same directories,
// add.partitionValues, rows and add.stats as the levelled flush.
func TestBreakGeneratedTimestampPartition(t *testing.T) {
	schemas := breakSchemas(t, genAvsc)
	const hourUs = 3_600_000_000
	tss := []int64{-1, 0, hourUs - 1, hourUs, -hourUs, -hourUs - 1, 1_700_000_000_000_000, -62135596800000000, 1}
	var recs []breakRec
	want := map[string][]string{}
	for i, ts := range tss {
		recs = append(recs, breakRec{20, map[string]any{"id": int64(i), "n": int64(i), "ts": ts}})
		hr := ts - ((ts%hourUs)+hourUs)%hourUs // floor to the hour
		pv, err := deltawriter.PartitionValue(deltalog.Timestamp, parquet.Int64Value(hr))
		if err != nil {
			t.Fatal(err)
		}
		want[*pv] = append(want[*pv], fmt.Sprintf("id=%d n=%d ts=%d", i, i, ts))
	}
	krecs := breakRecords(t, genAvsc, recs)
	schema := func() *deltalog.StructType {
		return &deltalog.StructType{Fields: []*deltalog.StructField{
			{Name: "id", Type: deltalog.Long, Nullable: true},
			{Name: "n", Type: deltalog.Long, Nullable: true},
			{Name: "ts", Type: deltalog.Timestamp, Nullable: true},
			{Name: "hr", Type: deltalog.Timestamp, Nullable: true, Metadata: map[string]any{deltalog.MetaGenerationExpression: "date_trunc('HOUR', ts)"}},
		}}
	}
	var dirs [2][]string
	var stats [2]map[string]string
	for li, levelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			dir := t.TempDir()
			createGenTable(t, dir, schema(), []string{"hr"}, nil)
			res := runBreakFlush(t, dir, breakConfig(dir), schemas, krecs, levelled)
			if dl := res.out.deadLetters(); len(dl) != 0 {
				t.Fatalf("dead letters %v; want none", deadLetters(res.out))
			}
			got := map[string][]string{}
			for d, rows := range res.files {
				dirs[li] = append(dirs[li], d)
				v := res.parts[d]["hr"]
				if v == nil {
					t.Fatalf("file in %s: partitionValues %v, want hr", d, res.parts[d])
				}
				got[*v] = append(got[*v], rows...)
			}
			slices.Sort(dirs[li])
			if !maps.EqualFunc(got, want, slices.Equal) {
				t.Errorf("files by hr:\n%v\nwant:\n%v", got, want)
			}
			stats[li] = res.stats
		})
	}
	if !slices.Equal(dirs[0], dirs[1]) || !maps.Equal(stats[0], stats[1]) {
		t.Errorf("dense and levelled differ:\ndirs %v\n     %v\nstats %v\n      %v", dirs[0], dirs[1], stats[0], stats[1])
	}
	t.Logf("directories %v", dirs[0])
}
