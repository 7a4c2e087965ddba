package parquetenc_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/internal/deltatest"
	"github.com/ingestd/ingestd/deltawriter/parquetenc"
	"github.com/ingestd/ingestd/deltawriter/storage"
)

// materialise returns the levelled values of every column (column.At of each entry).
func materialise(cols []column.Column) [][]parquet.Value {
	out := make([][]parquet.Value, len(cols))
	for i := range cols {
		out[i] = make([]parquet.Value, cols[i].Len())
		for j := range out[i] {
			out[i][j] = cols[i].At(j)
		}
	}
	return out
}

// denseTestSchema has a leaf of every physical type the dense form holds, under every
// Delta type that maps to them (byte, short, integer, date, decimal(9,2) → INT32;
// long, timestamp, timestamp_ntz, decimal(18,3) → INT64; string and binary →
// BYTE_ARRAY, the byte form), at definition level 1 and, in a struct, 2; and levelled
// leaves beside them (a list's element, a long that holds nulls).
const denseTestSchema = `{"type":"struct","fields":[
{"name":"b","type":"boolean","nullable":true,"metadata":{}},
{"name":"by","type":"byte","nullable":true,"metadata":{}},
{"name":"sh","type":"short","nullable":true,"metadata":{}},
{"name":"i","type":"integer","nullable":true,"metadata":{}},
{"name":"l","type":"long","nullable":true,"metadata":{}},
{"name":"f","type":"float","nullable":true,"metadata":{}},
{"name":"d","type":"double","nullable":true,"metadata":{}},
{"name":"day","type":"date","nullable":true,"metadata":{}},
{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
{"name":"ntz","type":"timestamp_ntz","nullable":true,"metadata":{}},
{"name":"dec9","type":"decimal(9,2)","nullable":true,"metadata":{}},
{"name":"dec18","type":"decimal(18,3)","nullable":true,"metadata":{}},
{"name":"st","type":{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}},{"name":"y","type":"double","nullable":true,"metadata":{}},{"name":"z","type":"integer","nullable":true,"metadata":{}},{"name":"w","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
{"name":"s","type":"string","nullable":true,"metadata":{}},
{"name":"bin","type":"binary","nullable":true,"metadata":{}},
{"name":"arr","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}},
{"name":"nl","type":"long","nullable":true,"metadata":{}}
]}`

// requiredTestSchema is a Parquet schema of required leaves (maximum definition level 0:
// no definition levels at all) and its Delta schema.
func requiredTestSchema(t *testing.T) (*parquet.Schema, *deltalog.StructType) {
	t.Helper()
	pq := parquet.NewSchema("root", parquet.Group{
		"rb": parquet.Required(parquet.Leaf(parquet.BooleanType)),
		"rd": parquet.Required(parquet.Leaf(parquet.DoubleType)),
		"rf": parquet.Required(parquet.Leaf(parquet.FloatType)),
		"ri": parquet.Required(parquet.Leaf(parquet.Int32Type)),
		"rl": parquet.Required(parquet.Leaf(parquet.Int64Type)),
		"rs": parquet.Required(parquet.String()),
	})
	schema, err := deltalog.ParseSchema(`{"type":"struct","fields":[
{"name":"rb","type":"boolean","nullable":false,"metadata":{}},
{"name":"rd","type":"double","nullable":false,"metadata":{}},
{"name":"rf","type":"float","nullable":false,"metadata":{}},
{"name":"ri","type":"integer","nullable":false,"metadata":{}},
{"name":"rl","type":"long","nullable":false,"metadata":{}},
{"name":"rs","type":"string","nullable":false,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	return pq, schema
}

// gen gives row i's value of a leaf of kind k (the leaf's index in the file is ci).
type gen func(k parquet.Kind, ci, i int) parquet.Value

var (
	f32Edges = []float32{float32(math.NaN()), float32(math.Copysign(0, -1)), 0, float32(math.Inf(1)), float32(math.Inf(-1)),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1.5, -2.25}
	f64Edges = []float64{math.NaN(), math.Copysign(0, -1), 0, math.Inf(1), math.Inf(-1),
		math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1.5, -2.25}
	i32Edges = []int32{math.MinInt32, math.MaxInt32, 0, -1, 1, math.MinInt32 + 1, math.MaxInt32 - 1}
	i64Edges = []int64{math.MinInt64, math.MaxInt64, 0, -1, 1, math.MinInt64 + 1, math.MaxInt64 - 1}
	// BYTE_ARRAY values at the edges of the statistics: empty, NUL, invalid UTF-8 (no
	// Delta bounds), 40 characters of ASCII, 2-byte, 4-byte (surrogate pairs at the
	// UTF-16 cut) and U+10FFFF characters (past delta.dataSkippingStringPrefixLength:
	// truncated, tie-breakers U+007F and U+10FFFF, or no max), bytes 0xff (the byte-order
	// maximum)
	strEdges = []string{"", "\x00", "\xff\xfe not UTF-8", strings.Repeat("a", 40), strings.Repeat("é", 40), strings.Repeat("😀", 20),
		strings.Repeat("\U0010FFFF", 40), "\xff\xff\xff"}
)

// randomBytes gives row i of column ci random bytes of 0 to 47 (any bit pattern: empty
// and invalid UTF-8 values included).
func randomBytes(ci, i int) parquet.Value {
	r := rand.New(rand.NewPCG(uint64(ci)+7, uint64(i)))
	b := make([]byte, r.IntN(48))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return parquet.ByteArrayValue(b)
}

func typed(k parquet.Kind, b bool, i32 int32, i64 int64, f32 float32, f64 float64) parquet.Value {
	switch k {
	case parquet.Boolean:
		return parquet.BooleanValue(b)
	case parquet.Int32:
		return parquet.Int32Value(i32)
	case parquet.Int64:
		return parquet.Int64Value(i64)
	case parquet.Float:
		return parquet.FloatValue(f32)
	case parquet.Double:
		return parquet.DoubleValue(f64)
	default:
		return parquet.ByteArrayValue(fmt.Appendf(nil, "v%d", i64%37))
	}
}

var denseGens = map[string]gen{
	// random values of every bit pattern (NaNs, infinities, subnormals included)
	"random-bits": func(k parquet.Kind, ci, i int) parquet.Value {
		if k == parquet.ByteArray {
			return randomBytes(ci, i)
		}
		r := rand.New(rand.NewPCG(uint64(ci), uint64(i)))
		x := r.Uint64()
		return typed(k, x&1 == 1, int32(x), int64(x), math.Float32frombits(uint32(x)), math.Float64frombits(x))
	},
	// random finite values (footer and Delta bounds present)
	"random-finite": func(k parquet.Kind, ci, i int) parquet.Value {
		r := rand.New(rand.NewPCG(uint64(ci)+99, uint64(i)))
		if k == parquet.ByteArray { // distinct UTF-8 strings of 8 to 30 bytes
			return parquet.ByteArrayValue(fmt.Appendf(nil, "row-%d-%x", i, r.Uint64()>>r.IntN(64)))
		}
		return typed(k, r.IntN(2) == 1, r.Int32()-math.MaxInt32/2, r.Int64()-math.MaxInt64/2, float32(r.NormFloat64()*1e6), r.NormFloat64()*1e12)
	},
	// NaN, ±0.0, ±Inf, the extremes; one run per column starting at a different edge
	// (strings: every other row an edge string, the others random bytes, so the column
	// is PLAIN; at row 1000 of every 4096 a value past a 32 KiB page, at row 2000 one
	// past MaxFooterBound)
	"edges": func(k parquet.Kind, ci, i int) parquet.Value {
		j := i + ci
		if k == parquet.ByteArray {
			switch {
			case i%4096 == 1000:
				return parquet.ByteArrayValue(bytes.Repeat([]byte{'p'}, 40<<10))
			case i%4096 == 2000:
				return parquet.ByteArrayValue(bytes.Repeat([]byte{'z'}, parquetenc.MaxFooterBound+1))
			case i%2 == 1:
				return randomBytes(ci, i)
			}
			return parquet.ByteArrayValue([]byte(strEdges[(j/2)%len(strEdges)]))
		}
		return typed(k, j%3 == 0, i32Edges[j%len(i32Edges)], i64Edges[j%len(i64Edges)], f32Edges[j%len(f32Edges)], f64Edges[j%len(f64Edges)])
	},
	// -0.0 and +0.0 only: the footer bounds are written -0.0 and +0.0 (strings: all
	// empty)
	"zeros": func(k parquet.Kind, ci, i int) parquet.Value {
		if k == parquet.ByteArray {
			return parquet.ByteArrayValue(nil)
		}
		neg := (i+ci)%2 == 0
		f32, f64 := float32(0), 0.0
		if neg {
			f32, f64 = float32(math.Copysign(0, -1)), math.Copysign(0, -1)
		}
		return typed(k, neg, 0, 0, f32, f64)
	},
	// one value per column: every min is the first row, so is every max (strings: one
	// value longer than 8 bytes, past the prefix length, the dictionary's
	// previous-value shortcut)
	"all-equal": func(k parquet.Kind, ci, i int) parquet.Value {
		if k == parquet.ByteArray {
			return parquet.ByteArrayValue(fmt.Appendf(nil, "%d: %s", ci, strings.Repeat("Grüße ", 10)))
		}
		return typed(k, ci%2 == 0, int32(ci)-3, int64(ci)*1e12, float32(ci)/4, float64(ci)/8)
	},
	// five values: INT32 and INT64 columns dictionary-encoded
	"low-cardinality": func(k parquet.Kind, ci, i int) parquet.Value {
		j := (i*7 + ci) % 5
		if k == parquet.ByteArray { // the enum of the benchmark record, one value long
			return parquet.ByteArrayValue([]byte([]string{"NEW", "PAID", "SHIPPED", "DELIVERED", "RETURNED-TO-SENDER"}[j]))
		}
		return typed(k, j == 0, int32(j)*1000-2000, int64(j)*1e15-2e15, float32(j)-2, float64(j)-2.5)
	},
	// low-cardinality for the first DictProbe rows, then all distinct: the dictionary
	// is started and abandoned for PLAIN once it outgrows DictMaxBytes
	"dict-full": func(k parquet.Kind, ci, i int) parquet.Value {
		if k == parquet.ByteArray {
			if i < parquetenc.DictProbe {
				return parquet.ByteArrayValue([]byte([]string{"", "short", "a value of more than 8 bytes"}[i%3]))
			}
			return parquet.ByteArrayValue(fmt.Appendf(nil, "distinct value %d of column %d", i, ci))
		}
		if i < parquetenc.DictProbe {
			j := i % 3
			return typed(k, j == 0, int32(j), int64(j), float32(j), float64(j))
		}
		return typed(k, i%2 == 0, int32(i*31-ci), int64(i)*1_000_003-int64(ci), float32(i)/3, float64(i)/7)
	},
}

// denseColumns makes n rows of gen for every leaf of pq: levelled values (nulls in the
// "nl" leaf from row 3 on, every 7th row; two list elements per row) and the columns the
// decoder builds from them (columnsOf). It fails the test unless every non-repeated
// fixed-width leaf but "nl" is dense (and "nl", when it holds a null, levelled).
func denseColumns(t *testing.T, pq *parquet.Schema, n int, g gen) ([][]parquet.Value, []column.Column) {
	t.Helper()
	leaves := column.Leaves(pq)
	vals := make([][]parquet.Value, len(leaves))
	for ci, l := range leaves {
		name := strings.Join(pq.Columns()[ci], ".")
		for i := range n {
			switch {
			case l.MaxRep > 0:
				vals[ci] = append(vals[ci], g(l.Kind, ci, i).Level(0, l.MaxDef, ci), g(l.Kind, ci, i+n).Level(1, l.MaxDef, ci))
			case name == "nl" && i%7 == 3:
				vals[ci] = append(vals[ci], parquet.NullValue().Level(0, l.MaxDef-1, ci))
			default:
				vals[ci] = append(vals[ci], g(l.Kind, ci, i).Level(0, l.MaxDef, ci))
			}
		}
	}
	cols := deltatest.ColumnsOf(pq, vals)
	for ci, l := range leaves {
		name := strings.Join(pq.Columns()[ci], ".")
		want := l.Denseable() && !(name == "nl" && n > 3)
		if cols[ci].IsDense() != want {
			t.Fatalf("column %s: dense %v, want %v", name, cols[ci].IsDense(), want)
		}
	}
	return vals, cols
}

// footerStats tells which columns of an encoded file are dictionary-encoded and how many
// data pages each has.
func footerStats(t *testing.T, data []byte) (dict map[string]bool, pages map[string]int32) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	dict, pages = map[string]bool{}, map[string]int32{}
	for _, c := range f.Metadata().RowGroups[0].Columns {
		name := strings.Join(c.MetaData.PathInSchema, ".")
		for _, es := range c.MetaData.EncodingStats {
			if es.PageType == format.DictionaryPage {
				dict[name] = true
			}
			if es.PageType == format.DataPage {
				pages[name] += es.Count
			}
		}
	}
	return dict, pages
}

// The proof of the dense pass: for random and edge values (NaN, ±0.0, ±Inf, the integer
// extremes, one value, one row), page boundaries (pages of one row up to the default
// target; row counts either side of a page's rows), dictionary encoding on, abandoned
// when full, and off, every codec, definition levels 0, 1 and 2, and several columns on
// several workers, the file encoded from dense columns is byte for byte the file encoded
// from the same values levelled, with the same summaries; and WriteColumns' file and
// stats JSON are WriteDataFile's (with GOMAXPROCS 4, so that the larger files take
// helpers).
func TestWriteColumnsDenseSameBytes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	defer func(p, d int) { *parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = p, d }(*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes)
	schema, err := deltalog.ParseSchema(denseTestSchema)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	rpq, rschema := requiredTestSchema(t)
	codecs := []compress.Codec{parquetenc.Snappy(), parquetenc.Zstd(), &parquet.Gzip, &parquet.Uncompressed}
	confCodec := map[format.CompressionCodec]string{format.Snappy: "snappy", format.Zstd: "zstd", format.Gzip: "gzip", format.Uncompressed: "uncompressed"}
	type tc struct {
		gen        string
		n          int
		pageTarget int
		dictBytes  int
		wantDict   bool // the INT64 "l" column is dictionary-encoded
		wantPages  bool // the "l" column has more than one data page
		wantDictS  bool // the same of the string column "s" (the byte form)
		wantPagesS bool
	}
	var cases []tc
	for _, g := range []string{"random-bits", "random-finite", "edges", "zeros", "all-equal"} {
		cases = append(cases, tc{gen: g, n: 20_000, pageTarget: 32 << 10, dictBytes: 64 << 10, wantDict: g == "zeros" || g == "all-equal" || g == "edges", wantPages: true,
			wantDictS: g == "zeros" || g == "all-equal", wantPagesS: true})
	}
	cases = append(cases,
		tc{gen: "low-cardinality", n: 20_000, pageTarget: 1 << 20, dictBytes: 1 << 20, wantDict: true, wantDictS: true},
		tc{gen: "low-cardinality", n: 20_000, pageTarget: 4 << 10, dictBytes: 1 << 20, wantDict: true, wantPages: true, wantDictS: true, wantPagesS: true},
		tc{gen: "dict-full", n: 20_000, pageTarget: 32 << 10, dictBytes: 4 << 10, wantPages: true, wantPagesS: true},
		tc{gen: "random-finite", n: 1, pageTarget: 1 << 20, dictBytes: 1 << 20},
		tc{gen: "edges", n: 1, pageTarget: 1 << 20, dictBytes: 1 << 20},
		tc{gen: "edges", n: 300, pageTarget: 1, dictBytes: 1 << 20, wantDict: true, wantPages: true, wantPagesS: true}, // a page per row
		// strings past a page: at a 1 KiB target, each of the five 40 KiB values of
		// "s" fills a page of its own
		tc{gen: "edges", n: 20_000, pageTarget: 1 << 10, dictBytes: 1 << 20, wantDict: true, wantPages: true, wantPagesS: true},
	)
	// row counts around a page's rows at a 1 KiB target: INT64 PLAIN 8·k + k/8 ≥ 1024
	// at k = 127, INT32 254, BOOLEAN 512, dictionary indexes 482 (strings: pages of
	// about 40 of the "random-finite" values)
	for _, n := range []int{126, 127, 128, 253, 254, 255, 481, 482, 483, 511, 512, 513, 1016, 1017} {
		cases = append(cases,
			tc{gen: "random-finite", n: n, pageTarget: 1 << 10, dictBytes: 1 << 20, wantPages: n >= 128, wantPagesS: true},
			tc{gen: "low-cardinality", n: n, pageTarget: 1 << 10, dictBytes: 1 << 20, wantDict: true, wantPages: n >= 483, wantDictS: true, wantPagesS: n >= 483})
	}
	for _, c := range cases {
		*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = c.pageTarget, c.dictBytes
		for _, sc := range []struct {
			name   string
			pq     *parquet.Schema
			schema *deltalog.StructType
		}{{"optional", pq, schema}, {"required", rpq, rschema}} {
			vals, cols := denseColumns(t, sc.pq, c.n, denseGens[c.gen])
			for _, codec := range codecs {
				name := fmt.Sprintf("%s/%s/%d-rows/page-%d/%s", sc.name, c.gen, c.n, c.pageTarget, codec)
				want, wantSums := encodeBytes(t, sc.pq, vals, c.n, codec, 0)
				if sc.name == "optional" && codec == codecs[0] {
					dict, pages := footerStats(t, want)
					if dict["l"] != c.wantDict || (pages["l"] > 1) != c.wantPages {
						t.Fatalf("%s: case does not exercise its path: dictionary on l %v (want %v), %d pages (want more than one: %v)",
							name, dict["l"], c.wantDict, pages["l"], c.wantPages)
					}
					if dict["s"] != c.wantDictS || (pages["s"] > 1) != c.wantPagesS {
						t.Fatalf("%s: case does not exercise its path: dictionary on s %v (want %v), %d pages (want more than one: %v)",
							name, dict["s"], c.wantDictS, pages["s"], c.wantPagesS)
					}
				}
				for _, helpers := range []int{0, 1, 3} {
					enc, sums, err := parquetenc.EncodeWith(sc.pq, cols, c.n, codec, helpers)
					if err != nil {
						t.Fatalf("%s, %d helpers: %v", name, helpers, err)
					}
					got := bytes.Clone(enc.Bytes())
					enc.Release()
					if !bytes.Equal(got, want) {
						t.Fatalf("%s, %d helpers: dense file of %d bytes differs from the levelled one of %d at byte %d", name, helpers, len(got), len(want), firstDiff(got, want))
					}
					if !reflect.DeepEqual(sums, wantSums) {
						t.Fatalf("%s, %d helpers: dense summaries %+v, levelled %+v", name, helpers, sums, wantSums)
					}
				}
				opts := deltawriter.FileOptions{Schema: sc.schema, Configuration: map[string]string{deltalog.PropCompressionCodec: confCodec[codec.CompressionCodec()]}}
				var lbuf, dbuf bytes.Buffer
				ladd, err := deltawriter.WriteDataFile(context.Background(), deltatest.NewMemStore(&lbuf), sc.pq, vals, c.n, opts)
				if err != nil {
					t.Fatalf("%s: WriteDataFile: %v", name, err)
				}
				dadd, err := deltawriter.WriteColumns(context.Background(), deltatest.NewMemStore(&dbuf), sc.pq, cols, c.n, opts)
				if err != nil {
					t.Fatalf("%s: WriteColumns: %v", name, err)
				}
				if !bytes.Equal(dbuf.Bytes(), lbuf.Bytes()) || !bytes.Equal(lbuf.Bytes(), want) {
					t.Fatalf("%s: WriteColumns wrote %d bytes, WriteDataFile %d, the levelled encoder %d (first difference at %d)",
						name, dbuf.Len(), lbuf.Len(), len(want), firstDiff(dbuf.Bytes(), lbuf.Bytes()))
				}
				if dadd.Stats != ladd.Stats || dadd.Size != ladd.Size {
					t.Fatalf("%s: WriteColumns stats %s (%d bytes), WriteDataFile %s (%d bytes)", name, dadd.Stats, dadd.Size, ladd.Stats, ladd.Size)
				}
				if sums, err := parquetenc.Summarize(sc.pq, cols, c.n); err != nil || !reflect.DeepEqual(sums, wantSums) {
					t.Fatalf("%s: summarising only: %+v %v, encoding %+v", name, sums, err, wantSums)
				}
			}
		}
	}
}

// recordingStore is a deltatest.MemStore that counts the files created.
type recordingStore struct {
	deltatest.MemStore
	created int
}

func (r *recordingStore) Create(ctx context.Context, name string) (storage.Writer, error) {
	r.created++
	return r.MemStore.Create(ctx, name)
}

// A dense column that does not fit the schema's leaf is refused, naming the column, with
// the error the levelled pass gives for the same values (its first value's kind, levels
// or column index, or the row count), before any byte is written; on several workers the
// first failing column in schema order is reported. A dense column for a repeated leaf
// is refused too (the levelled form would take each word as a one-element list).
func TestWriteColumnsDenseErrors(t *testing.T) {
	schema, err := deltalog.ParseSchema(denseTestSchema)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	_, good := denseColumns(t, pq, n, denseGens["random-finite"])
	leaves := column.Leaves(pq)
	index := map[string]int{}
	for ci, p := range pq.Columns() {
		index[strings.Join(p, ".")] = ci
	}
	arr := index["arr.list.element"]
	// dense replaces column ci of good with rows words of leaf l.
	dense := func(ci int, l column.Leaf, rows int) []column.Column {
		cols := slices.Clone(good)
		cols[ci] = column.Column{}
		cols[ci].Reset(l)
		for i := range rows {
			cols[ci].AppendDense(uint64(i))
		}
		if !cols[ci].IsDense() {
			t.Fatalf("column %d: not dense", ci)
		}
		return cols
	}
	// denseBytes replaces column ci of good with rows byte-form values of leaf l, then
	// lets bad spoil them.
	denseBytes := func(ci int, l column.Leaf, rows int, bad func(*column.Column)) []column.Column {
		cols := slices.Clone(good)
		cols[ci] = column.Column{}
		cols[ci].Reset(l)
		for i := range rows {
			cols[ci].AppendBytes(fmt.Appendf(nil, "value %d", i))
		}
		if !cols[ci].IsDense() {
			t.Fatalf("column %d: not dense", ci)
		}
		if bad != nil {
			bad(&cols[ci])
		}
		return cols
	}
	with := func(l column.Leaf, f func(*column.Leaf)) column.Leaf { f(&l); return l }
	i, l, str := index["i"], index["l"], index["s"]
	for _, c := range []struct {
		name     string
		cols     []column.Column
		want     string
		levelled bool // the levelled form of the same values fails the same way
	}{
		{"kind", dense(i, with(leaves[i], func(x *column.Leaf) { x.Kind = parquet.Int64 }), n),
			"write data file: column i value 0: INT64 value for a INT32 column", true},
		{"kind-double", dense(l, with(leaves[l], func(x *column.Leaf) { x.Kind = parquet.Double }), n),
			"write data file: column l value 0: DOUBLE value for a INT64 column", true},
		{"definition-level-above", dense(l, with(leaves[l], func(x *column.Leaf) { x.MaxDef = 2 }), n),
			"write data file: column l value 0: levels (0,2) exceed max (0,1)", true},
		{"definition-level-below", dense(l, with(leaves[l], func(x *column.Leaf) { x.MaxDef = 0 }), n),
			"write data file: column l value 0: null=false at definition level 0 of 1", true},
		{"column-index", dense(l, with(leaves[l], func(x *column.Leaf) { x.Index = l + 1 }), n),
			fmt.Sprintf("write data file: column l value 0: carries column index %d, want %d", l+1, l), true},
		{"rows-fewer", dense(l, leaves[l], n-1), "write data file: column l has 9 rows, want 10", true},
		{"rows-more", dense(l, leaves[l], n+1), "write data file: column l has 11 rows, want 10", true},
		{"rows-none", dense(l, leaves[l], 0), "write data file: column l has 0 rows, want 10", true},
		{"repeated-leaf", dense(arr, with(leaves[arr], func(x *column.Leaf) { x.MaxRep = 0 }), n),
			"write data file: column arr.list.element: dense values for a repeated leaf (max repetition level 1); a repeated leaf takes levelled values", false},
		// the byte form (BYTE_ARRAY leaves)
		{"bytes-kind-words", dense(str, with(leaves[str], func(x *column.Leaf) { x.Kind = parquet.Int64 }), n),
			"write data file: column s value 0: INT64 value for a BYTE_ARRAY column", true},
		{"bytes-kind-for-long", denseBytes(l, with(leaves[l], func(x *column.Leaf) { x.Kind = parquet.ByteArray }), n, nil),
			"write data file: column l value 0: BYTE_ARRAY value for a INT64 column", true},
		{"bytes-definition-level-above", denseBytes(str, with(leaves[str], func(x *column.Leaf) { x.MaxDef = 2 }), n, nil),
			"write data file: column s value 0: levels (0,2) exceed max (0,1)", true},
		{"bytes-definition-level-below", denseBytes(str, with(leaves[str], func(x *column.Leaf) { x.MaxDef = 0 }), n, nil),
			"write data file: column s value 0: null=false at definition level 0 of 1", true},
		{"bytes-column-index", denseBytes(str, with(leaves[str], func(x *column.Leaf) { x.Index = str - 1 }), n, nil),
			fmt.Sprintf("write data file: column s value 0: carries column index %d, want %d", str-1, str), true},
		{"bytes-rows-fewer", denseBytes(str, leaves[str], n-1, nil), "write data file: column s has 9 rows, want 10", true},
		{"bytes-rows-more", denseBytes(str, leaves[str], n+1, nil), "write data file: column s has 11 rows, want 10", true},
		{"bytes-rows-none", denseBytes(str, leaves[str], 0, nil), "write data file: column s has 0 rows, want 10", true},
		{"bytes-offset-decreasing", denseBytes(str, leaves[str], n, func(c *column.Column) { c.Dense[3] = c.Dense[2] - 1 }),
			"write data file: column s row 3: byte offset 20 after 21; a dense BYTE_ARRAY column takes its values through column.Column.AppendBytes", false},
		{"bytes-offsets-words", denseBytes(str, leaves[str], n, func(c *column.Column) { c.Bytes = c.Bytes[:0] }),
			"write data file: column s: last byte offset 70, want the 0 bytes held; a dense BYTE_ARRAY column takes its values through column.Column.AppendBytes", false},
		{"bytes-beyond-offsets", denseBytes(str, leaves[str], n, func(c *column.Column) { c.Bytes = append(c.Bytes, 'x') }),
			"write data file: column s: last byte offset 70, want the 71 bytes held; a dense BYTE_ARRAY column takes its values through column.Column.AppendBytes", false},
	} {
		st := &recordingStore{MemStore: *deltatest.NewMemStore(new(bytes.Buffer))}
		_, err := deltawriter.WriteColumns(context.Background(), st, pq, c.cols, n, deltawriter.FileOptions{Schema: schema})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
			continue
		}
		if st.created != 0 {
			t.Errorf("%s: %d files created before the error", c.name, st.created)
		}
		if c.levelled {
			_, lerr := deltawriter.WriteDataFile(context.Background(), st, pq, materialise(c.cols), n, deltawriter.FileOptions{Schema: schema})
			if lerr == nil || lerr.Error() != err.Error() {
				t.Errorf("%s: levelled form: %v, dense %v", c.name, lerr, err)
			}
		}
		for _, helpers := range []int{0, 3} {
			if _, _, perr := parquetenc.EncodeWith(pq, c.cols, n, parquetenc.Snappy(), helpers); perr == nil || "write data file: "+perr.Error() != c.want {
				t.Errorf("%s, %d helpers: %v", c.name, helpers, perr)
			}
		}
	}
	// Two failing columns: the first in schema order is reported on every worker count.
	cols := dense(i, with(leaves[i], func(x *column.Leaf) { x.Kind = parquet.Int64 }), n)
	cols[l] = dense(l, leaves[l], n-1)[l]
	for _, helpers := range []int{0, 1, 3} {
		if _, _, err := parquetenc.EncodeWith(pq, cols, n, parquetenc.Snappy(), helpers); err == nil || !strings.HasPrefix(err.Error(), "column i value 0:") {
			t.Errorf("%d helpers: %v, want column i's error", helpers, err)
		}
	}
	if len(good) == 0 || !good[l].IsDense() {
		t.Fatal("the valid columns are not dense")
	}
}

// After a dictionary pass is abandoned for PLAIN (dictionary full), the PLAIN pass cuts
// its pages like any other, levelled or dense: every page but the last holds the rows
// that fill PageTargetBytes (127 INT64 values at 1 KiB: 8·127 + 127/8 ≥ 1024). Found by
// TestWriteColumnsDenseSameBytes: the aborted pass's last page of dictionary indexes was
// counted into the first PLAIN page, which was cut early.
func TestEncodeDictionaryFallbackPageSizes(t *testing.T) {
	defer func(p, d int) { *parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = p, d }(*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes)
	*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = 1<<10, 1<<10
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"l","type":"long","nullable":true,"metadata":{}}]}`)
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	vals, cols := denseColumns(t, pq, n, denseGens["dict-full"])
	for _, form := range []struct {
		name string
		cols []column.Column
	}{{"levelled", deltatest.Levelled(vals)}, {"dense", cols}} {
		enc, _, err := parquetenc.EncodeWith(pq, form.cols, n, parquetenc.Snappy(), 0)
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Clone(enc.Bytes())
		enc.Release()
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		md := f.Metadata().RowGroups[0].Columns[0].MetaData
		if md.DictionaryPageOffset != 0 {
			t.Fatalf("%s: the dictionary was kept", form.name)
		}
		var rows []int32
		for off := md.DataPageOffset; off < md.DataPageOffset+md.TotalCompressedSize; {
			var h format.PageHeader
			hl, err := decodePageHeader(data[off:], &h)
			if err != nil {
				t.Fatal(err)
			}
			dp, ok := h.DataPageHeader.Get()
			if !ok {
				t.Fatalf("%s: page at %d is a %v page", form.name, off, h.Type)
			}
			rows = append(rows, dp.NumValues)
			off += int64(hl) + int64(h.CompressedPageSize)
		}
		want := slices.Repeat([]int32{127}, n/127)
		want = append(want, n%127)
		if !slices.Equal(rows, want) {
			t.Fatalf("%s: pages of %v rows, want %v", form.name, rows, want)
		}
	}
}

// FuzzDenseSameBytes: for any words (as column.Bits of each of the five dense kinds, the
// values masked to make low-cardinality columns likely) and byte arrays cut from the same
// data (string and binary leaves in the byte form: 0 to 31 bytes, or 1,000 to 5,095,
// past MaxFooterBound, when a word's second byte is 0xff, up to 64 KiB of them; any bytes, invalid UTF-8
// included), any page target and dictionary size, the file of the dense columns is the
// file of the same values levelled, with the same summaries and stats JSON.
func FuzzDenseSameBytes(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"), uint16(64), uint16(256), uint64(0xff))
	f.Add(bytes.Repeat([]byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 0x80}, 300), uint16(1), uint16(16), ^uint64(0))
	f.Add(bytes.Repeat([]byte{0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 700), uint16(1000), uint16(64), uint64(3))
	// strings: low-cardinality (three lengths, masked bytes), then long and distinct
	f.Add(bytes.Repeat([]byte{0x01, 0, 0, 0x61, 0x62, 0, 0, 0, 0x03, 0, 0, 0x63, 0, 0, 0, 0}, 200), uint16(500), uint16(2000), uint64(0xff0000ff))
	f.Add(bytes.Repeat([]byte{0x1f, 0xff, 0x34, 0x12, 0xc3, 0xa9, 0xff, 0xfe, 0x05, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86}, 300), uint16(4000), uint16(60000), ^uint64(0))
	schema, err := deltalog.ParseSchema(`{"type":"struct","fields":[
{"name":"b","type":"boolean","nullable":true,"metadata":{}},
{"name":"i","type":"integer","nullable":true,"metadata":{}},
{"name":"l","type":"long","nullable":true,"metadata":{}},
{"name":"f","type":"float","nullable":true,"metadata":{}},
{"name":"d","type":"double","nullable":true,"metadata":{}},
{"name":"s","type":"string","nullable":true,"metadata":{}},
{"name":"bin","type":"binary","nullable":true,"metadata":{}},
{"name":"st","type":{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}},{"name":"w","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`)
	if err != nil {
		f.Fatal(err)
	}
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		f.Fatal(err)
	}
	leaves := column.Leaves(pq)
	f.Fuzz(func(t *testing.T, data []byte, pageTarget, dictBytes uint16, mask uint64) {
		n := len(data) / 8
		if n == 0 || n > 20_000 {
			return
		}
		defer func(p, d int) { *parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = p, d }(*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes)
		*parquetenc.PageTargetBytes, *parquetenc.DictMaxBytes = int(pageTarget)+1, int(dictBytes)+1
		vals := make([][]parquet.Value, len(leaves))
		for ci, l := range leaves {
			long := 0 // bytes of the long values: at most 64 KiB a column, so that an input stays fast
			for i := range n {
				off := 8 * ((i + ci) % n)
				w := binary.LittleEndian.Uint64(data[off:]) & mask
				if l.Kind == parquet.ByteArray {
					size := int(w & 31)
					if w&0xff00 == 0xff00 && long+1000+int(w>>16&0xfff) <= 64<<10 {
						size = 1000 + int(w>>16&0xfff)
						long += size
					}
					b := make([]byte, size)
					for j := range b {
						b[j] = data[(off+j)%len(data)] & byte(mask>>24)
					}
					vals[ci] = append(vals[ci], parquet.ByteArrayValue(b).Level(0, l.MaxDef, ci))
					continue
				}
				vals[ci] = append(vals[ci], column.FromBits(l.Kind, column.Bits(column.FromBits(l.Kind, w))).Level(0, l.MaxDef, ci))
			}
		}
		cols := deltatest.ColumnsOf(pq, vals)
		for ci := range cols {
			if !cols[ci].IsDense() {
				t.Fatalf("column %d is not dense", ci)
			}
		}
		want, wantSums := encodeBytes(t, pq, vals, n, parquetenc.Snappy(), 0)
		got, _ := encodeBytes(t, pq, materialise(cols), n, parquetenc.Snappy(), 0) // the At round trip
		if !bytes.Equal(got, want) {
			t.Fatal("column.At does not give back the values")
		}
		enc, sums, err := parquetenc.EncodeWith(pq, cols, n, parquetenc.Snappy(), 2)
		if err != nil {
			t.Fatal(err)
		}
		got = bytes.Clone(enc.Bytes())
		enc.Release()
		if !bytes.Equal(got, want) || !reflect.DeepEqual(sums, wantSums) {
			t.Fatalf("dense file differs from the levelled one at byte %d (summaries %+v, levelled %+v)", firstDiff(got, want), sums, wantSums)
		}
		var lbuf, dbuf bytes.Buffer
		ladd, lerr := deltawriter.WriteDataFile(context.Background(), deltatest.NewMemStore(&lbuf), pq, vals, n, deltawriter.FileOptions{Schema: schema})
		dadd, derr := deltawriter.WriteColumns(context.Background(), deltatest.NewMemStore(&dbuf), pq, cols, n, deltawriter.FileOptions{Schema: schema})
		if lerr != nil || derr != nil || ladd.Stats != dadd.Stats || !bytes.Equal(lbuf.Bytes(), dbuf.Bytes()) {
			t.Fatalf("WriteColumns %v %s, WriteDataFile %v %s", derr, dadd.Stats, lerr, ladd.Stats)
		}
	})
}

// The dictionary probe of a byte-form column decides as the levelled one: dictionary
// encoding when the first DictProbe values hold at most a quarter distinct values (n
// rows, k distinct values cycling; a quarter exactly is in), the same file either way.
func TestDenseBytesDictionaryProbe(t *testing.T) {
	schema, _ := deltalog.ParseSchema(`{"type":"struct","fields":[{"name":"s","type":"string","nullable":true,"metadata":{}}]}`)
	pq, err := deltawriter.ParquetSchema(schema, deltalog.ColumnMappingNone)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n, k     int
		wantDict bool
	}{
		{8, 2, true}, {8, 3, false}, {1024, 256, true}, {1024, 257, false}, {5000, 256, true}, {5000, 257, false},
		{1, 1, false}, {4, 1, true}, {3, 1, false},
	} {
		vals := make([][]parquet.Value, 1)
		for i := range c.n {
			vals[0] = append(vals[0], parquet.ByteArrayValue(fmt.Appendf(nil, "value %d", i%c.k)).Level(0, 1, 0))
		}
		cols := deltatest.ColumnsOf(pq, vals)
		want, _ := encodeBytes(t, pq, vals, c.n, parquetenc.Snappy(), 0)
		enc, _, err := parquetenc.EncodeWith(pq, cols, c.n, parquetenc.Snappy(), 0)
		if err != nil {
			t.Fatal(err)
		}
		got := bytes.Clone(enc.Bytes())
		enc.Release()
		if dict, _ := footerStats(t, got); dict["s"] != c.wantDict || !bytes.Equal(got, want) {
			t.Errorf("%d rows of %d values: dictionary %v (want %v); same bytes as levelled: %v", c.n, c.k, dict["s"], c.wantDict, bytes.Equal(got, want))
		}
	}
}
