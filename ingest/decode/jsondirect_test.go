package decode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// jdTable has a column of every kind the direct JSON decoder writes (jsondirect.go):
// id long NOT NULL, n int, x double, ok boolean, s string, ts timestamp, tn timestamp_ntz,
// d date, amt decimal(12,2), small decimal(5,2), tags array<string> (null elements),
// names array<string> (no null elements), and a Kafka column.
const jdTable = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"n","type":"integer","nullable":true,"metadata":{}},
 {"name":"x","type":"double","nullable":true,"metadata":{}},
 {"name":"ok","type":"boolean","nullable":true,"metadata":{}},
 {"name":"s","type":"string","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"tn","type":"timestamp_ntz","nullable":true,"metadata":{}},
 {"name":"d","type":"date","nullable":true,"metadata":{}},
 {"name":"amt","type":"decimal(12,2)","nullable":true,"metadata":{}},
 {"name":"small","type":"decimal(5,2)","nullable":true,"metadata":{}},
 {"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}},
 {"name":"names","type":{"type":"array","elementType":"string","containsNull":false},"nullable":true,"metadata":{}},
 {"name":"_kafka_offset","type":"long","nullable":true,"metadata":{}}]}`

// jdFile is a schema file for jdTable's records: id nullable where the table's is NOT
// NULL, small decimal(4,2) (rescaled into the column: the decoder checks the precision),
// an extra field the table lacks (read and discarded), no tn (written null).
const jdFile = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":true,"metadata":{}},
 {"name":"n","type":"integer","nullable":true,"metadata":{}},
 {"name":"x","type":"double","nullable":true,"metadata":{}},
 {"name":"s","type":"string","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"amt","type":"decimal(12,2)","nullable":true,"metadata":{}},
 {"name":"small","type":"decimal(4,1)","nullable":true,"metadata":{}},
 {"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}},
 {"name":"gone","type":"string","nullable":true,"metadata":{}}]}`

// jdValues are values of each jdTable key: fitting ones first, then edge cases the
// direct decoder hands to the transcoding path (escapes, other types, out of range).
var jdValues = map[string][]string{
	"id": {`123456789`, `0`, `-0`, `9007199254740993`, `-9223372036854775808`, `9223372036854775807`,
		`9223372036854775808`, `1.0`, `1e3`, `"12"`, `true`, `null`},
	"n": {`17`, `2147483647`, `-2147483648`, `-0`, `2147483648`, `0.5`, `"5"`, `null`},
	"x": {`98.25`, `-0`, `0`, `0.1`, `1e308`, `2.5e-3`, `1E+2`, `4.9e-324`, `-1.7976931348623157e308`, `123456789012345678901234567890`,
		`9007199254740993`, `1e309`, `"x"`, `null`},
	"ok": {`true`, `false`, `1`, `"true"`, `null`},
	"s": {`""`, `"abc"`, `"ünïcödé ✓ 𝄞"`, `"customer-000042 (Ann Example, ann@example.com)"`, `"esc\"aped"`, `"tab\tx"`,
		`"\u00e9"`, `"\ud800"`, "\"\xff\xfe\"", "\"ctl\x01\"", `5`, `{"a":1}`, `null`},
	"ts": {`"2023-12-17T00:00:00.123456Z"`, `"2024-05-01T12:00:00.123456+02:00"`, `"2024-02-29T23:59:59Z"`, `"1969-12-31T23:59:59.999999Z"`,
		`"0001-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999-01:00"`, `"2023-02-29T00:00:00Z"`, `"2024-05-01T12:00:00.1234567Z"`,
		`"2024-05-01 12:00:00Z"`, `"2024-05-01T12:00:00"`, `"2024-05-01T12:00:00,5Z"`, `"2024-05-01T24:00:00Z"`, `17`, `null`},
	"tn": {`"2024-05-01T12:00:00.5"`, `"2024-05-01T12:00:00"`, `"2024-05-01T12:00:00Z"`, `"2024-05-01T12:00:00.0000001"`, `null`},
	"d":  {`"2024-02-29"`, `"1969-12-31"`, `"0001-01-01"`, `"2023-02-29"`, `"2024-5-1"`, `20240229`, `null`},
	"amt": {`-1234567.89`, `0`, `-0`, `0.100`, `9999999999.99`, `12`, `1e2`, `0.001`, `99999999999.99`, `12345678901234567890`,
		`"1.5"`, `null`},
	"small": {`99.9`, `999.99`, `-0.01`, `3`, `1000`, `0.123`, `null`},
	"tags": {`[]`, `["web","promo-spring-2024","eu-west-1","returning-customer!!!"]`, `[ "x" , null ]`, `[null]`, `[ ]`, `["a","a"]`,
		`["a",1]`, `["\u0041"]`, `[[]]`, `"a"`, `["a",]`, `null`},
	"gone":  {`"was here"`, `null`, `3`},
	"names": {`["ann","bob"]`, `[""]`, `[]`, `[null]`, `["x", "y" ,"z"]`, `null`},
}

// jdKeys are jdTable's keys in table order, jdFileKeys jdFile's.
var (
	jdKeys     = []string{"id", "n", "x", "ok", "s", "ts", "tn", "d", "amt", "small", "tags", "names"}
	jdFileKeys = []string{"id", "n", "x", "s", "ts", "amt", "small", "tags", "gone"}
)

// jdGen writes random documents of jdTable's keys: mostly fitting values in table order,
// with whitespace everywhere, and now and then another order, a missing or repeated key,
// a key in other case, an unknown key, an edge-case value, a byte changed or dropped.
type jdGen struct {
	r    *rand.Rand
	keys []string
}

func (g *jdGen) ws() string {
	return []string{"", "", "", " ", "\n\t ", "\r\n  "}[g.r.IntN(6)]
}

func (g *jdGen) doc() []byte {
	keys := slices.Clone(g.keys)
	if g.r.IntN(4) == 0 {
		g.r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	}
	var b strings.Builder
	b.WriteString(g.ws() + "{")
	n := 0
	for _, k := range keys {
		switch g.r.IntN(80) {
		case 0, 1, 2:
			continue // missing
		case 3:
			k = strings.ToUpper(k)
		case 4:
			k = k + "_new"
		}
		vals := jdValues[strings.ToLower(strings.TrimSuffix(k, "_new"))]
		v := vals[0]
		if g.r.IntN(10) == 0 {
			v = vals[g.r.IntN(len(vals))]
		}
		if n > 0 {
			b.WriteString(g.ws() + "," + g.ws())
		}
		n++
		fmt.Fprintf(&b, "%q%s:%s%s", k, g.ws(), g.ws(), v)
		if g.r.IntN(60) == 0 {
			fmt.Fprintf(&b, ", %q: %s", k, v) // repeated
		}
	}
	b.WriteString(g.ws() + "}" + g.ws())
	doc := []byte(b.String())
	if g.r.IntN(10) == 0 {
		i := g.r.IntN(len(doc))
		if g.r.IntN(2) == 0 {
			const alphabet = " {}[],:\"\\0123456789.eE-+tfnux\xff"
			doc[i] = alphabet[g.r.IntN(len(alphabet))]
		} else {
			doc = append(doc[:i:i], doc[i+1:]...)
		}
	}
	return doc
}

// jdCorpus are documents of jdTable through both paths besides the generated ones.
var jdCorpus = []string{
	`{"id":1}`, `{}`, `[]`, `null`, ``, ` `, `{"id":1}x`, `{"id":1,}`, `{"id":1 "n":2}`, `{"id":1,"id":2}`, `{"id":1,"ID":2}`,
	`{"id":1,"n":null,"x":null,"ok":null,"s":null,"ts":null,"tn":null,"d":null,"amt":null,"small":null,"tags":null,"names":null}`,
	`{"id":null}`, `{"n":1}`, `{"id":1,"_kafka_offset":5}`, `{"id":1,"new":null}`, `{"id":1,"new":"x"}`, `{"id":1,"new":{}}`,
	` { "id" : 1 , "s" : "a" } `, "\t{\n\"id\"\r:\n2}\n", `{"id":1,"s":"\u0000"}`, `{"id":1,"tags":["\ud83d\ude00"]}`,
	`{"id":1,"tags":["a" "b"]}`, `{"id":1,"tags":[,]}`, `{"id":1,"names":[null]}`, `{"id":1,"amt":1.005}`, `{"id":-9223372036854775809}`,
	`{"id":01}`, `{"id":1.}`, `{"id":-}`, `{"id":1,"x":-0.0}`, `{"id":1,"x":1e-400}`, `{"id":1,"s":"a\/b"}`, "{\"id\":1,\"s\":\"\xed\xa0\x80\"}",
	tenFieldsJD,
}

// tenFieldsJD is B1's document for jdTable (tenFieldsDoc's values on its columns).
const tenFieldsJD = `{"id":123456789,"s":"customer-000042 (Ann Example, ann@example.com)","x":98.25,"ok":true,"ts":"2023-12-17T00:00:00.123456Z",` +
	`"n":17,"amt":-1234567.89,"tags":["web","promo-spring-2024","eu-west-1","returning-customer!!!"]}`

// jdPaths decodes documents through a plain JSON source and CompileRecord's decoders
// (the direct path) and through a second source and the transcoding path alone, into
// columns of one batch each: the reference and what is checked against it.
type jdPaths struct {
	table          *deltalog.StructType
	pq             *parquet.Schema
	leaves         []column.Leaf
	gsrc, wsrc     *JSONSource
	gdec           map[*WriterSchema]*transcodingDecoder
	wdec           map[*WriterSchema]*transcodingDecoder
	gerrs, werrs   map[*WriterSchema]error
	got, want      []column.Column
	garena, warena *Arena
	direct         int // documents the direct decoder read
}

func newJDPaths(t testing.TB, table, file *deltalog.StructType, arenas string) *jdPaths {
	t.Helper()
	p := &jdPaths{table: table, pq: mustParquet(t, table, "none"), gsrc: NewJSONSource(file, []string{"_kafka_offset"}),
		wsrc: NewJSONSource(file, []string{"_kafka_offset"}), gdec: map[*WriterSchema]*transcodingDecoder{}, wdec: map[*WriterSchema]*transcodingDecoder{},
		gerrs: map[*WriterSchema]error{}, werrs: map[*WriterSchema]error{}}
	p.leaves = column.Leaves(p.pq)
	p.got, p.want = make([]column.Column, len(p.leaves)), make([]column.Column, len(p.leaves))
	for i, l := range p.leaves {
		p.got[i].Reset(l)
		p.want[i].Reset(l)
	}
	switch arenas {
	case "alias":
		p.garena, p.warena = &Arena{}, &Arena{}
		p.garena.AliasPayloads()
		p.warena.AliasPayloads()
	case "copy":
		p.garena, p.warena = &Arena{}, &Arena{}
	}
	return p
}

// sameErr fails t unless both errors are nil or alike in message, reason and field.
func sameErr(t testing.TB, what string, doc []byte, gerr, werr error) {
	t.Helper()
	if (gerr == nil) != (werr == nil) || gerr != nil && (gerr.Error() != werr.Error() || ReasonOf(gerr) != ReasonOf(werr) || FieldOf(gerr) != FieldOf(werr)) {
		t.Fatalf("document %q: %s error %v, want %v", doc, what, gerr, werr)
	}
}

// decoders returns the decoders of the two paths for their writer schemas of one record.
func (p *jdPaths) decoders(t testing.TB, gws, wws *WriterSchema) (g, w *transcodingDecoder, err error) {
	t.Helper()
	if g, ok := p.gdec[gws]; ok || p.gerrs[gws] != nil {
		return g, p.wdec[wws], p.gerrs[gws]
	}
	rd, gerr := CompileRecord(gws, p.table, "none", p.pq)
	d, werr := Compile(wws, p.table, "none", p.pq)
	sameErr(t, "compile", nil, gerr, werr)
	if gerr != nil {
		p.gerrs[gws], p.werrs[wws] = gerr, werr
		return nil, nil, gerr
	}
	g = rd.(*transcodingDecoder)
	// The reference: no direct decoder, and its writer schema's never compiled with one
	// (its source keeps transcodings, as before the direct decoder).
	w = &transcodingDecoder{avro: d, body: wws.body}
	p.gdec[gws], p.wdec[wws] = g, w
	return g, w, nil
}

// run takes doc through both paths, the writer-schema step then the decode, and fails t
// at the first difference: the writer schema (its Avro schema), an error (message,
// reason, field), a column's entries and form; every check, also the values.
func (p *jdPaths) run(t testing.TB, doc []byte, check bool) {
	t.Helper()
	gws, gbody, gerr := p.gsrc.Writer(p.table, doc)
	wws, wbody, werr := p.wsrc.Writer(p.table, doc)
	sameErr(t, "writer", doc, gerr, werr)
	if gerr != nil {
		return
	}
	if (gws.Avro == nil) != (wws.Avro == nil) || gws.Avro != nil && gws.Avro.String() != wws.Avro.String() || !bytes.Equal(gbody, wbody) {
		t.Fatalf("document %q: writer schema %v, want %v", doc, gws.Avro, wws.Avro)
	}
	sameErr(t, "writer schema", doc, gws.DeltaErr, wws.DeltaErr)
	if gws.DeltaErr != nil {
		return
	}
	g, w, err := p.decoders(t, gws, wws)
	if err != nil {
		return
	}
	if jb := gws.body.(*jsonBody); jb.rd != nil {
		slots := make([]jdSlot, len(jb.rd.fields))
		if jb.rd.read(slots, gbody) {
			if _, _, ok := fastJSON(nil, gbody, jb.top, true, false); !ok {
				t.Fatalf("document %q: the direct reader takes it, the one-pass transcoder does not", doc)
			}
			if g.jdirect != nil {
				p.direct++
			}
		}
	}
	in := bytes.Clone(gbody)
	gerr = g.DecodeColumns(p.garena, in, p.got)
	werr = w.DecodeColumns(p.warena, wbody, p.want)
	sameErr(t, "decode", doc, gerr, werr)
	if !bytes.Equal(in, gbody) {
		t.Fatalf("document %q: the decoder modified its input", doc)
	}
	for i := range p.want {
		if p.got[i].Len() != p.want[i].Len() || p.got[i].IsDense() != p.want[i].IsDense() {
			t.Fatalf("document %q: column %d has %d entries (dense %v), want %d (%v)", doc, i, p.got[i].Len(), p.got[i].IsDense(), p.want[i].Len(), p.want[i].IsDense())
		}
	}
	if check {
		if err := sameColumns(p.got, p.want); err != nil {
			t.Fatalf("document %q: %v", doc, err)
		}
	}
}

// jdConfigs are the sources the direct decoder is checked with: the table's columns as
// the base, and a schema file.
func jdConfigs(t testing.TB) map[string]jdConfig {
	return map[string]jdConfig{"table": {mustTable(t, jdTable), nil, jdKeys}, "file": {mustTable(t, jdTable), mustTable(t, jdFile), jdFileKeys}}
}

// jdConfig is a plain JSON source's table, schema file (nil: none) and the keys of its
// documents.
type jdConfig struct {
	table, file *deltalog.StructType
	keys        []string
}

// TestJSONDirectMatchesTranscoding compares the direct JSON decoder with the transcoding
// path it short-cuts on the corpus and on generated documents (jdGen), with the table's
// columns and a schema file as the base, through three kinds of arena: the same writer
// schemas, the same columns, dense or levelled alike, and the same errors, each document
// decoded once after its writer-schema step (the step's read) and once more alone (the
// decode's own read). The direct decoder must read most documents itself, not all.
func TestJSONDirectMatchesTranscoding(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 600
	}
	for name, c := range jdConfigs(t) {
		g := &jdGen{r: rand.New(rand.NewPCG(43, 7)), keys: c.keys}
		docs := make([][]byte, 0, n+len(jdCorpus))
		for _, d := range jdCorpus {
			docs = append(docs, []byte(d))
		}
		for range n {
			docs = append(docs, g.doc())
		}
		for _, arenas := range []string{"alias", "copy", "none"} {
			t.Run(name+"/"+arenas, func(t *testing.T) {
				p := newJDPaths(t, c.table, c.file, arenas)
				for k, doc := range docs {
					p.run(t, doc, k%32 == 31 || k == len(docs)-1)
					p.run(t, doc, false) // no writer-schema step between: the decode reads it
				}
				if err := sameColumns(p.got, p.want); err != nil {
					t.Fatal(err)
				}
				t.Logf("the direct decoder read %d of %d documents", p.direct, 2*len(docs))
				if p.direct < len(docs)/2 || p.direct == 2*len(docs) { // a quarter of the runs at least
					t.Fatalf("the direct decoder read %d of %d documents", p.direct, 2*len(docs))
				}
			})
		}
	}
}

// TestJSONDirectB1 decodes B1's record (BenchmarkFormats's json) through the direct
// decoder: taken by it, with every column's exact value, at the writer-schema step and
// without it.
func TestJSONDirectB1(t *testing.T) {
	table := mustWriter(t, 1, tenFields).Delta
	src := NewJSONSource(nil, nil)
	doc := []byte(tenFieldsDoc)
	ws, body, err := src.Writer(table, doc)
	if err != nil {
		t.Fatal(err)
	}
	pq := mustParquet(t, table, "none")
	rd, err := CompileRecord(ws, table, "none", pq)
	if err != nil {
		t.Fatal(err)
	}
	td := rd.(*transcodingDecoder)
	if td.jdirect == nil {
		t.Fatal("no direct decoder for B1's table")
	}
	jb := ws.body.(*jsonBody)
	if !jb.direct.Load() {
		t.Fatal("the writer schema keeps transcodings")
	}
	var a Arena
	a.AliasPayloads()
	cols := make([]column.Column, rd.Columns())
	for i, l := range column.Leaves(pq) {
		cols[i].Reset(l)
	}
	// The first record's writer-schema step came before the decoder: a transcoding.
	if err := rd.DecodeColumns(&a, body, cols); err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		if ws2, _, err := src.Writer(table, doc); err != nil || ws2 != ws {
			t.Fatalf("writer %v, %v", ws2, err)
		}
		if k == 1 {
			if n := len(src.memo.entries) - src.memo.head; n != 1 || !src.memo.entries[src.memo.head].slots {
				t.Fatalf("the memo holds %d entries after the writer-schema step, want the read", n)
			}
		}
		if err := rd.DecodeColumns(&a, body, cols); err != nil {
			t.Fatal(err)
		}
		if src.memo.head != len(src.memo.entries) {
			t.Fatal("the decode did not take the read")
		}
	}
	if !jb.rd.read(make([]jdSlot, 10), body) {
		t.Fatal("the direct reader does not read B1's document")
	}
	if err := rd.DecodeColumns(&a, body, cols); err != nil { // the decode's own read
		t.Fatal(err)
	}
	got := renderCols(pq, materialise(cols))
	row := map[string]string{"id": "123456789", "name": `"customer-000042 (Ann Example, ann@example.com)"`, "score": "98.25", "active": "true",
		"ts": "1702771200123456", "note": `"first purchase after the spring campaign; gift wrap requested"`, "count": "17", "amount": "-123456789", "kind": `"BUY"`}
	tags := []string{`"web"`, `"promo-spring-2024"`, `"eu-west-1"`, `"returning-customer!!!"`}
	if len(got) != len(row)+1 {
		t.Fatalf("columns %v", got)
	}
	for name, w := range row {
		want := []string{w, w, w, w}
		if vals := jdVals(got[name]); !slices.Equal(vals, want) {
			t.Fatalf("column %s: %v, want %v", name, got[name], want)
		}
	}
	if vals := jdVals(got["tags.list.element"]); !slices.Equal(vals, slices.Concat(tags, tags, tags, tags)) {
		t.Fatalf("tags: %v", got["tags.list.element"])
	}
}

// jdVals are rendered entries without their levels.
func jdVals(rs []string) []string {
	vals := make([]string, len(rs))
	for j, r := range rs {
		vals[j] = r[strings.IndexByte(r, ':')+1:]
	}
	return vals
}

// TestJSONDirectValues: exact values and levels the direct decoder writes for the edge
// cases it reads itself (not only agreement with the transcoding path).
func TestJSONDirectValues(t *testing.T) {
	table := mustTable(t, jdTable)
	p := newJDPaths(t, table, nil, "alias")
	docs := []string{
		`{"id":-0,"n":-2147483648,"x":-0,"ok":false,"s":"ünï 𝄞","ts":"2024-05-01T12:00:00.123456+02:00","tn":"1970-01-01T00:00:01.5",` +
			`"d":"1969-12-31","amt":-0.5,"small":999.99,"tags":["a",null],"names":[]}`,
		` { "ID" : 9007199254740993 , "x" : 1E+2 , "tags" : [ ] , "names" : [ "" , "z" ] } `,
	}
	for _, d := range docs {
		p.run(t, []byte(d), true)
		p.run(t, []byte(d), true)
	}
	if p.direct != 4 {
		t.Fatalf("the direct decoder read %d of 4", p.direct)
	}
	got := renderCols(p.pq, materialise(p.got))
	want := map[string][]string{
		"id":                 {"0/1:0", "0/1:0", "0/1:9007199254740993", "0/1:9007199254740993"},
		"n":                  {"0/1:-2147483648", "0/1:-2147483648", "0/0:null", "0/0:null"},
		"x":                  {"0/1:-0", "0/1:-0", "0/1:100", "0/1:100"},
		"ok":                 {"0/1:false", "0/1:false", "0/0:null", "0/0:null"},
		"s":                  {`0/1:"ünï 𝄞"`, `0/1:"ünï 𝄞"`, "0/0:null", "0/0:null"},
		"ts":                 {"0/1:1714557600123456", "0/1:1714557600123456", "0/0:null", "0/0:null"},
		"tn":                 {"0/1:1500000", "0/1:1500000", "0/0:null", "0/0:null"},
		"d":                  {"0/1:-1", "0/1:-1", "0/0:null", "0/0:null"},
		"amt":                {"0/1:-50", "0/1:-50", "0/0:null", "0/0:null"},
		"small":              {"0/1:99999", "0/1:99999", "0/0:null", "0/0:null"},
		"tags.list.element":  {`0/3:"a"`, "1/2:null", `0/3:"a"`, "1/2:null", "0/1:null", "0/1:null"},
		"names.list.element": {"0/1:null", "0/1:null", `0/3:""`, `1/3:"z"`, `0/3:""`, `1/3:"z"`},
		"_kafka_offset":      {"0/0:null", "0/0:null", "0/0:null", "0/0:null"},
	}
	if len(got) != len(want) {
		t.Fatalf("columns %v", got)
	}
	for name, w := range want {
		if !slices.Equal(got[name], w) {
			t.Errorf("column %s: %v, want %v", name, got[name], w)
		}
	}
}

// TestJSONDirectScope: the writer schemas and tables the direct decoder does not write
// have none (the transcoding path reads all their documents), and the formats other
// than plain JSON have no reader.
func TestJSONDirectScope(t *testing.T) {
	for name, js := range map[string]string{
		"struct": `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`,
		"float":  `{"type":"struct","fields":[{"name":"f","type":"float","nullable":true,"metadata":{}}]}`,
		"binary": `{"type":"struct","fields":[{"name":"b","type":"binary","nullable":true,"metadata":{}}]}`,
		"wide":   `{"type":"struct","fields":[{"name":"w","type":"decimal(20,2)","nullable":true,"metadata":{}}]}`,
		"longs":  `{"type":"struct","fields":[{"name":"l","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}}]}`,
	} {
		table := mustTable(t, js)
		ws, _, err := NewJSONSource(nil, nil).Writer(table, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if ws.body.(*jsonBody).rd != nil {
			t.Errorf("%s: a direct reader", name)
		}
	}
	// An int key into a long column (a schema file): the Avro decoder widens it in a
	// compiled step.
	table := mustTable(t, `{"type":"struct","fields":[{"name":"i","type":"long","nullable":true,"metadata":{}}]}`)
	file := mustTable(t, `{"type":"struct","fields":[{"name":"i","type":"integer","nullable":true,"metadata":{}}]}`)
	ws, _, err := NewJSONSource(file, nil).Writer(table, []byte(`{"i": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := CompileRecord(ws, table, "none", mustParquet(t, table, "none"))
	if err != nil {
		t.Fatal(err)
	}
	if rd.(*transcodingDecoder).jdirect != nil || ws.body.(*jsonBody).direct.Load() {
		t.Error("int into long: a direct decoder")
	}
	cws, _, err := NewConnectSource().Writer(nil, []byte(`{"schema":{"type":"struct","fields":[{"type":"int64","field":"id"}]},"payload":{"id":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := CompileJSONSchema(1, `{"type":"object","properties":{"id":{"type":"integer"}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ws := range []*WriterSchema{cws, jws} {
		if jb, ok := ws.body.(*jsonBody); ok && jb.rd != nil {
			t.Errorf("%s: a direct reader", ws.Format)
		}
	}
}

// FuzzJSONDirect is TestJSONDirectMatchesTranscoding under the fuzzer: a document
// through both paths, with the table's columns and a schema file as the base, each
// document after its writer-schema step and alone.
func FuzzJSONDirect(f *testing.F) {
	for _, d := range jdCorpus {
		f.Add([]byte(d))
	}
	var paths []*jdPaths
	for _, c := range jdConfigs(f) {
		g := &jdGen{r: rand.New(rand.NewPCG(1, 2)), keys: c.keys}
		for range 16 {
			f.Add(g.doc())
		}
		for _, arenas := range []string{"alias", "copy"} {
			paths = append(paths, newJDPaths(f, c.table, c.file, arenas))
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, p := range paths {
			if p.got[0].Len() > 4096 {
				for i, l := range p.leaves {
					p.got[i].Reset(l)
					p.want[i].Reset(l)
				}
			}
			p.run(t, doc, true)
			p.run(t, doc, true)
		}
	})
}

// TestJSONDirectReadPassedOver: a read the writer-schema step kept is dropped by a decode
// without the direct path (the transcoding's memo lookup), which transcodes the document
// itself, and a transcoding kept before the direct decoder existed is left to that lookup.
func TestJSONDirectReadPassedOver(t *testing.T) {
	table := mustTable(t, jdTable)
	src := NewJSONSource(nil, []string{"_kafka_offset"})
	doc := []byte(tenFieldsJD)
	ws, _, err := src.Writer(table, doc) // the first: the writer schema built
	if err != nil {
		t.Fatal(err)
	}
	if ws2, _, err := src.Writer(table, doc); err != nil || ws2 != ws { // before any decoder: a transcoding
		t.Fatal(ws2, err)
	}
	pq := mustParquet(t, table, "none")
	rd, err := CompileRecord(ws, table, "none", pq)
	if err != nil {
		t.Fatal(err)
	}
	td := rd.(*transcodingDecoder)
	cols := make([]column.Column, rd.Columns())
	for i, l := range column.Leaves(pq) {
		cols[i].Reset(l)
	}
	slots := make([]jdSlot, len(td.jdirect.ops))
	if got := src.memo.takeSlots(ws.body.(*jsonBody), doc, slots); got != memoAvro {
		t.Fatalf("takeSlots %d, want the transcoding (%d)", got, memoAvro)
	}
	if err := rd.DecodeColumns(nil, doc, cols); err != nil { // the transcoding path takes it
		t.Fatal(err)
	}
	if src.memo.head != len(src.memo.entries) {
		t.Fatal("the transcoding was not taken")
	}
	if _, _, err := src.Writer(table, doc); err != nil { // now a read
		t.Fatal(err)
	}
	ref := &transcodingDecoder{avro: td.avro, body: td.body}
	if err := ref.DecodeColumns(nil, doc, cols); err != nil {
		t.Fatal(err)
	}
	if src.memo.head != len(src.memo.entries) || src.memo.entries[len(src.memo.entries)-1].jb != nil {
		t.Fatal("the read was not dropped")
	}
	got := renderCols(pq, materialise(cols))
	if want := []string{"0/1:123456789", "0/1:123456789"}; !slices.Equal(got["id"], want) {
		t.Fatalf("id %v, want %v", got["id"], want)
	}
	if want := []string{"0/1:-123456789", "0/1:-123456789"}; !slices.Equal(got["amt"], want) {
		t.Fatalf("amt %v, want %v", got["amt"], want)
	}
}
