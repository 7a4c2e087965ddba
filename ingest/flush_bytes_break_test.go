package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// Attacks on the byte form of string columns: each attack runs its flushes twice, on one
// flusher whose column buffers start in the byte form and on one whose columns are all
// levelled (the baseline), and both must give exactly the expected rows and the same
// add.stats.

// bytesTable is the table of an attack: bytesTableSchema with extra columns, partitioned
// by partitionBy, written with breakConfig changed by tune (nil: unchanged).
type bytesTable struct {
	extra       []*deltalog.StructField
	partitionBy []string
	tune        func(*config.Config)
	avsc        map[int]string // writer schemas; nil: bytesAvsc
	mapping     deltalog.ColumnMappingMode
}

// bytesFlushes creates tbl at a fresh directory and makes each batch of batches a flush
// of one flusher (levelled or not; its buffers kept from flush to flush).
func bytesFlushes(t *testing.T, levelled bool, tbl bytesTable, batches ...[]*kgo.Record) []breakFlush {
	t.Helper()
	dir := t.TempDir()
	if tbl.mapping != "" {
		create, _, err := deltawriter.PrepareSchemaChange(nil, deltawriter.SchemaChange{Name: "brk", Schema: bytesTableSchema(tbl.extra...),
			PartitionColumns: tbl.partitionBy, ColumnMapping: string(tbl.mapping), Enable: []string{deltalog.FeatureColumnMapping}})
		if err != nil {
			t.Fatal(err)
		}
		(&harness{t: t, tableDir: dir}).commitOther(0, *create.Protocol, *create.Metadata)
	} else {
		createBreakTable(t, dir, bytesTableSchema(tbl.extra...), tbl.partitionBy, nil)
	}
	cfg := breakConfig(dir)
	if tbl.tune != nil {
		tbl.tune(cfg)
	}
	avsc := tbl.avsc
	if avsc == nil {
		avsc = bytesAvsc
	}
	f, st := newBreakFlusher(t, dir, cfg, breakSchemas(t, avsc), levelled)
	var out []breakFlush
	for _, recs := range batches {
		r := breakFlushWith(t, f, st, recs)
		if tbl.mapping != "" {
			// Files are in random directories: key each file's rows, by logical name, by
			// its add.partitionValues ("" unpartitioned).
			logical := logicalRows(t, dir, r.files)
			files := map[string][]string{}
			for d, rows := range logical {
				key := fmt.Sprint(len(r.parts[d]))
				for _, v := range r.parts[d] {
					if key = "null"; v != nil {
						key = *v
					}
				}
				if len(r.parts[d]) == 0 {
					key = ""
				}
				files[key] = append(files[key], rows...)
			}
			r.files = files
		}
		out = append(out, r)
	}
	return out
}

// bothForms runs run dense and levelled and checks that they give the same add.stats.
func bothForms(t *testing.T, run func(t *testing.T, levelled bool) []breakFlush) {
	t.Helper()
	var stats [2][]map[string]string
	for i, levelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("levelled=%v", levelled), func(t *testing.T) {
			for _, r := range run(t, levelled) {
				stats[i] = append(stats[i], r.stats)
			}
		})
	}
	if !slices.EqualFunc(stats[0], stats[1], maps.Equal) {
		t.Errorf("add.stats differ:\ndense    %v\nlevelled %v", stats[0], stats[1])
	}
}

// wantByDir groups rows by the add.path directory of their region (partition column,
// dropped from the row): region as written, "" and null in the default partition.
func wantByDir(rows []bytesRec) map[string][]string {
	want := map[string][]string{}
	for _, r := range rows {
		d := wantDirOf("region", r.region)
		want[d] = append(want[d], bytesRow(r, nil, "region"))
	}
	return want
}

// Partitioned by a string column, three flushes of one flusher: the table-wide buffers
// (Bytes grown by the first flush's long values) and the partitioner's kept last value
// are reused, so every later flush must put each row into its own value's file with its
// own bytes — a value of the same length as the previous flush's last one, an empty
// string (the null partition, with a null region's row), long values after short ones,
// a partition whose first row has a null s and one whose s stays dense.
func TestBytesBreakPartitionAcrossFlushes(t *testing.T) {
	long := strings.Repeat("L", 5000)
	flushes := [][]bytesRec{
		{{0, strp(long), "aa", []byte(long), "RED"}, {1, strp("s1"), "bb", []byte("b1"), "GREEN"},
			{2, nil, "bb", []byte("b2"), "BLUE"}, {3, strp("s3"), "aa", nil, "RED"}},
		{{10, strp("x"), "bb", []byte("x"), "BLUE"}, {11, strp("yy"), "cc", []byte("yy"), "RED"},
			{12, strp("zz" + long), "", []byte("z"), "GREEN"}, {13, nil, "aa", []byte("q"), "RED"},
			{14, strp(""), "cc", []byte(""), "GREEN"}, {15, strp("t"), "", nil, "BLUE"}},
		{{20, strp("a b"), "a b", []byte("1"), "RED"}, {21, strp("c"), "aa", []byte("2"), "RED"}, {22, strp("d"), "a b", []byte("3"), "RED"},
			{23, strp("e"), "tab\there", []byte("4"), "RED"}, {24, strp("f"), "\u00fc:#[x]^%", []byte("5"), "BLUE"}, {25, strp("g"), "tab\there", nil, "GREEN"}},
	}
	wantForms := []map[string]string{
		{"": "b:D e:D id:D region:D s:L", "region=aa": "b:D e:D id:D s:D", "region=bb": "b:D e:D id:D s:L"},
		{"": "b:D e:D id:D region:D s:L", "region=bb": "b:D e:D id:D s:D", "region=cc": "b:D e:D id:D s:D",
			"region=__HIVE_DEFAULT_PARTITION__": "b:D e:D id:D s:D", "region=aa": "b:D e:D id:D s:L"},
		{"": "b:D e:D id:D region:D s:D", "region=a b": "b:D e:D id:D s:D", "region=aa": "b:D e:D id:D s:D",
			"region=tab%09here": "b:D e:D id:D s:D", "region=\u00fc%3A%23%5Bx%5D%5E%25": "b:D e:D id:D s:D"},
	}
	bothForms(t, func(t *testing.T, levelled bool) []breakFlush {
		var batches [][]*kgo.Record
		for _, rows := range flushes {
			batches = append(batches, bytesRecords(t, rows))
		}
		res := bytesFlushes(t, levelled, bytesTable{partitionBy: []string{"region"}}, batches...)
		for i, r := range res {
			if dl := deadLetters(r.out); len(dl) != 0 {
				t.Errorf("flush %d: dead letters %v", i, dl)
			}
			if want := wantByDir(flushes[i]); !maps.EqualFunc(r.files, want, slices.Equal) {
				t.Errorf("flush %d: files\n%v\nwant\n%v", i, r.files, want)
			}
			if !levelled && !maps.Equal(r.forms, wantForms[i]) {
				t.Errorf("flush %d: forms %v\nwant %v", i, r.forms, wantForms[i])
			}
			for d, pv := range r.parts {
				var want *string
				for _, row := range flushes[i] {
					if wantDirOf("region", row.region) == d && row.region != "" {
						want = strp(row.region)
					}
				}
				if got := pv["region"]; (got == nil) != (want == nil) || got != nil && *got != *want {
					t.Errorf("flush %d %s: add.partitionValues %v, want region %v", i, d, pv, want)
				}
			}
		}
		return res
	})
}

// A record whose string holds invalid UTF-8 (Avro strings are UTF-8; delta-rs refuses a
// whole data file holding one: "encountered non UTF-8 data") is dead-lettered as
// decode_error at the field, the string column before it in the byte form keeping
// exactly the other rows; bytes (b) may hold any bytes.
func TestBytesBreakInvalidUTF8DeadLettered(t *testing.T) {
	rows := []bytesRec{{0, strp("ok"), "eu", []byte("\xff"), "RED"}, {1, strp("bad\xff"), "eu", []byte("x"), "RED"},
		{2, strp("é€"), "e\xc3", []byte("y"), "GREEN"}, {3, strp("fine"), "us", []byte("\xc3"), "BLUE"}}
	want := []string{bytesRow(rows[0], nil), bytesRow(rows[3], nil)}
	bothForms(t, func(t *testing.T, levelled bool) []breakFlush {
		res := bytesFlushes(t, levelled, bytesTable{}, bytesRecords(t, rows))
		if got := fmt.Sprint(deadLetters(res[0].out)); got != "[1:decode_error 2:decode_error]" {
			t.Errorf("dead letters %s; want [1:decode_error 2:decode_error]", got)
		}
		for i, dl := range res[0].out.deadLetters() {
			if f, w := dl.Field, []string{"s", "region"}[i]; f != w {
				t.Errorf("dead letter %d at field %q; want %q", i, f, w)
			}
		}
		if got := res[0].files[""]; !slices.Equal(got, want) {
			t.Errorf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		return res
	})
}

// String Kafka keys (key_format string) empty, null and multi-byte, in both orders of
// empty and null (an empty key is a set, empty value: the byte form holds it without a
// byte; a null turns _kafka_key levelled), and headers whose key is not UTF-8 (a Delta
// map<string, binary> key must be: such a record is dead-lettered as decode_error at
// _kafka_headers, its bytes untouched; a header value may hold any bytes).
func TestBytesBreakStringKeysAndHeaders(t *testing.T) {
	kcols := []string{kafkacols.Key, kafkacols.Headers}
	kfields, err := kafkacols.Fields(kcols, kafkacols.KeyString, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl := bytesTable{extra: kfields, tune: func(c *config.Config) { c.Table.KafkaColumns, c.Table.KeyFormat = kcols, kafkacols.KeyString }}
	keys := [][]byte{[]byte(""), nil, []byte("k\u00e9"), []byte(""), nil, []byte("z")}
	rows := make([]bytesRec, len(keys))
	for i := range rows {
		rows[i] = bytesRec{int64(i), strp(fmt.Sprint("s", i)), "eu", []byte{byte(i)}, "RED"}
	}
	recs := bytesRecords(t, rows)
	var want []string
	for i, r := range recs {
		r.Key = keys[i]
		r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("\xff")}}
		hdr := `_kafka_headers.key_value.key="h" _kafka_headers.key_value.value="\xff"`
		if i == 4 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "bad\xc3", Value: []byte("v")})
			continue
		}
		key := "null"
		if keys[i] != nil {
			key = fmt.Sprintf("%q", keys[i])
		}
		want = append(want, hdr+" "+bytesRow(rows[i], map[string]string{"_kafka_key": key}))
	}
	bothForms(t, func(t *testing.T, levelled bool) []breakFlush {
		res := bytesFlushes(t, levelled, tbl, recs)
		dl := res[0].out.deadLetters()
		if got := fmt.Sprint(deadLetters(res[0].out)); got != "[4:decode_error]" || dl[0].Field != "_kafka_headers" {
			t.Errorf("dead letters %s (%v); want [4:decode_error] at _kafka_headers", got, dl)
		}
		if got := res[0].files[""]; !slices.Equal(got, want) {
			t.Errorf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		return res
	})
}

// mixedAvsc is bytesAvsc's writer 30 and three later writers of the same table: 31 has
// the enum's symbols reordered and two more (a symbol's index differs between writers),
// 32 writes region nullable and e as a plain string, 33 lacks region.
var mixedAvsc = map[int]string{30: bytesAvsc[30],
	31: `{"type":"record","name":"s","fields":[
 {"name":"id","type":"long"},{"name":"s","type":["null","string"]},{"name":"region","type":"string"},
 {"name":"b","type":"bytes"},{"name":"e","type":{"type":"enum","name":"color","symbols":["BLUE","YELLOW","RED","GREEN","ULTRAVIOLET"]}}]}`,
	32: `{"type":"record","name":"s","fields":[
 {"name":"id","type":"long"},{"name":"s","type":["null","string"]},{"name":"region","type":["null","string"]},
 {"name":"b","type":"bytes"},{"name":"e","type":"string"}]}`,
	33: `{"type":"record","name":"s","fields":[
 {"name":"id","type":"long"},{"name":"s","type":["null","string"]},{"name":"b","type":"bytes"},{"name":"e","type":"string"}]}`,
}

// mixedRec is record id of writer w: region reg (nil: null, or absent for writer 33),
// enum or string e.
func mixedRec(w int, id int64, reg *string, e string) breakRec {
	v := map[string]any{"id": id, "s": map[string]any{"string": fmt.Sprint("s", id)}, "b": []byte{byte(id)}, "e": e}
	switch w {
	case 32:
		v["region"] = nil
		if reg != nil {
			v["region"] = map[string]any{"string": *reg}
		}
	case 30, 31:
		v["region"] = *reg
	}
	return breakRec{w, v}
}

// One batch of writers that differ in a byte-form column: an enum whose symbols a newer
// writer reordered and extended (each row gets its own writer's symbol), the enum column
// written as a plain string by another, and region required in two writers, nullable in
// one (null and set) and absent in another — interleaved in both orders (the nulls first,
// and after dense rows), unpartitioned and partitioned by region (the null and the absent
// region in the default partition) and by e.
func TestBytesBreakMixedWriters(t *testing.T) {
	type row struct {
		rec  breakRec
		want bytesRec
	}
	mk := func(w int, id int64, reg *string, e string) row {
		r := bytesRec{id: id, s: strp(fmt.Sprint("s", id)), b: []byte{byte(id)}, e: e}
		if reg != nil {
			r.region = *reg
		}
		return row{mixedRec(w, id, reg, e), r}
	}
	setFirst := []row{mk(30, 0, strp("eu"), "GREEN"), mk(31, 1, strp("eu"), "ULTRAVIOLET"), mk(31, 2, strp("us"), "BLUE"),
		mk(32, 3, nil, "free t\u00e9xt/%"), mk(30, 4, strp("us"), "BLUE"), mk(33, 5, nil, "x"), mk(32, 6, strp("eu"), ""), mk(31, 7, strp("eu"), "YELLOW")}
	nullFirst := []row{mk(33, 0, nil, "x"), mk(32, 1, nil, "RED"), mk(31, 2, strp("us"), "RED"), mk(30, 3, strp("eu"), "RED"),
		mk(31, 4, strp("us"), "GREEN"), mk(32, 5, strp("us"), "y")}
	for name, rows := range map[string][]row{"set first": setFirst, "null first": nullFirst} {
		var recs []breakRec
		for _, r := range rows {
			recs = append(recs, r.rec)
		}
		for _, by := range []string{"", "region", "e"} {
			t.Run(name+"/by="+by, func(t *testing.T) {
				want := map[string][]string{}
				for _, r := range rows {
					extra := map[string]string{}
					if r.want.region == "" {
						extra["region"] = "null"
					}
					switch by {
					case "":
						want[""] = append(want[""], bytesRow(r.want, extra))
					case "region":
						d := wantDirOf("region", r.want.region)
						want[d] = append(want[d], bytesRow(r.want, extra, "region"))
					case "e":
						d := wantDirOf("e", r.want.e)
						want[d] = append(want[d], bytesRow(r.want, extra, "e"))
					}
				}
				var partBy []string
				if by != "" {
					partBy = []string{by}
				}
				bothForms(t, func(t *testing.T, levelled bool) []breakFlush {
					res := bytesFlushes(t, levelled, bytesTable{avsc: mixedAvsc, partitionBy: partBy}, breakRecords(t, mixedAvsc, recs))
					if dl := deadLetters(res[0].out); len(dl) != 0 {
						t.Errorf("dead letters %v", dl)
					}
					if !maps.EqualFunc(res[0].files, want, slices.Equal) {
						t.Errorf("files\n%v\nwant\n%v", res[0].files, want)
					}
					return res
				})
			})
		}
	}
}

// wantDirOf is the add.path directory of partition column col's string value v ("" is
// the null partition value).
func wantDirOf(col, v string) string {
	if v == "" {
		return col + "=__HIVE_DEFAULT_PARTITION__"
	}
	// add.path is a URI: the Hive escapes' '%' and spaces are escaped, other characters kept.
	return col + "=" + strings.NewReplacer("%", "%25", " ", "%20").Replace(deltawriter.EscapePartitionName(v))
}

// failUploads fails the upload (Writer.Close) of the data files whose Create is among
// the first n of the store's data files, with errUpload.
type failUploads struct {
	storage.Store
	mu    sync.Mutex
	n     int
	calls int
}

var errUpload = errors.New("upload: 503 slow down")

func (s *failUploads) Create(ctx context.Context, p string) (storage.Writer, error) {
	w, err := s.Store.Create(ctx, p)
	if err != nil || strings.HasPrefix(p, "_delta_log/") {
		return w, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= s.n {
		return failClose{w}, nil
	}
	return w, nil
}

type failClose struct{ storage.Writer }

func (w failClose) Close() error {
	_ = w.Writer.Abort()
	return errUpload
}

// A flush whose data file uploads fail (the store answers 503 to the first two data files
// created) is a transient failure that commits nothing; the retry of the same records on
// the same flusher (its byte-form buffers and arena holding the failed attempt's bytes)
// commits each row exactly once, with its own bytes, unpartitioned and partitioned by
// region. Unpartitioned, each attempt creates one file: two fail, the third commits. A
// partitioned batch's three files are uploaded concurrently and the first failure cancels
// the others, so whether one attempt meets one or both failures depends on the order the
// uploads start: two or three attempts, and both failures consumed either way.
func TestBytesBreakUploadRetry(t *testing.T) {
	long := strings.Repeat("€", 3000)
	rows := []bytesRec{{0, strp(long), "eu", []byte(long), "RED"}, {1, nil, "us", []byte("b1"), "GREEN"},
		{2, strp("s2"), "eu", nil, "BLUE"}, {3, strp(""), "ap", []byte("x"), "RED"}, {4, strp("s4"), "us", []byte(long[:30]), "GREEN"}}
	for _, by := range []string{"", "region"} {
		for _, levelled := range []bool{false, true} {
			t.Run(fmt.Sprintf("by=%s/levelled=%v", by, levelled), func(t *testing.T) {
				var partBy []string
				want := map[string]bool{}
				for _, r := range rows {
					want[bytesRow(r, nil)] = true
				}
				if by != "" {
					partBy = []string{by}
				}
				dir := t.TempDir()
				createBreakTable(t, dir, bytesTableSchema(), partBy, nil)
				st, err := storage.Open("file://" + dir)
				if err != nil {
					t.Fatal(err)
				}
				fs := &failUploads{Store: st, n: 2}
				tbl, err := deltawriter.Open(context.Background(), fs)
				if err != nil {
					t.Fatal(err)
				}
				p := NewPipeline(breakConfig(dir), Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: NewMetrics(prometheus.NewRegistry()),
					Schemas: breakSchemas(t, bytesAvsc), Framed: true, Table: tbl})
				p.fl.levelled = levelled
				recs := bytesRecords(t, rows)
				attempts := 0
				for {
					attempts++
					out, err := p.fl.flush(context.Background(), recs, frameNote{})
					if err != nil {
						var te *transientError
						if !errors.As(err, &te) || !errors.Is(err, errUpload) {
							t.Fatalf("attempt %d: %v; want a transient upload error", attempts, err)
						}
						continue
					}
					if out.rows != len(rows) {
						t.Fatalf("attempt %d wrote %d rows, want %d", attempts, out.rows, len(rows))
					}
					break
				}
				if by == "" && attempts != 3 || by != "" && (attempts < 2 || attempts > 3) {
					t.Errorf("%d attempts, want %s", attempts, map[bool]string{true: "3", false: "2 or 3"}[by == ""])
				}
				if fs.calls <= fs.n {
					t.Errorf("%d data files created, want more than the %d failed ones", fs.calls, fs.n)
				}
				snap, err := tbl.Snapshot(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]bool{}
				n := 0
				for _, add := range snap.Files.All() {
					for _, r := range readAny(t, st, add.Path) {
						if by != "" {
							v := add.PartitionValues["region"]
							r = strings.Join(slices.Sorted(slices.Values(append(strings.Fields(r), "region="+strconv.Quote(*v)))), " ")
						}
						got[r] = true
						n++
					}
				}
				if n != len(rows) || !maps.Equal(got, want) {
					t.Errorf("table holds %d rows:\n%v\nwant %d:\n%v", n, got, len(rows), want)
				}
			})
		}
	}
}

// Column mapping (name and id) on byte-form columns: the data files' leaves are the
// columns' physical names (random, in their own order), so each byte-form column must be
// appended at its physical leaf; a string column turning levelled at its null keeps the
// leaf; unpartitioned and partitioned by the string region (files in random directories,
// keyed here by add.partitionValues), across two flushes of one flusher.
func TestBytesBreakColumnMapping(t *testing.T) {
	flushes := [][]bytesRec{
		{{0, strp("zero"), "eu", []byte("b0"), "RED"}, {1, nil, "us", []byte(""), "GREEN"}, {2, strp("twee_€"), "eu", []byte("\xff"), "BLUE"}},
		{{3, strp("drie"), "us", []byte("b3"), "BLUE"}, {4, strp(""), "", []byte("b4"), "RED"}},
	}
	for _, mode := range []deltalog.ColumnMappingMode{deltalog.ColumnMappingName, deltalog.ColumnMappingID} {
		for _, by := range []string{"", "region"} {
			t.Run(fmt.Sprintf("mode=%s/by=%s", mode, by), func(t *testing.T) {
				var partBy []string
				if by != "" {
					partBy = []string{by}
				}
				bothForms(t, func(t *testing.T, levelled bool) []breakFlush {
					var batches [][]*kgo.Record
					for _, rows := range flushes {
						batches = append(batches, bytesRecords(t, rows))
					}
					res := bytesFlushes(t, levelled, bytesTable{partitionBy: partBy, mapping: mode}, batches...)
					for i, r := range res {
						want := map[string][]string{}
						for _, row := range flushes[i] {
							switch {
							case by == "":
								want[""] = append(want[""], bytesRow(row, nil))
							case row.region == "":
								want["null"] = append(want["null"], bytesRow(row, nil, "region"))
							default:
								want[row.region] = append(want[row.region], bytesRow(row, nil, "region"))
							}
						}
						if dl := deadLetters(r.out); len(dl) != 0 {
							t.Errorf("flush %d: dead letters %v", i, dl)
						}
						if !maps.EqualFunc(r.files, want, slices.Equal) {
							t.Errorf("flush %d: files\n%v\nwant\n%v", i, r.files, want)
						}
					}
					return nil // add.stats not compared: the two tables' physical names differ
				})
			})
		}
	}
}
