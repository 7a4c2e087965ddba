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

// pbDirect3 has every kind of top-level field the direct decoder reads (protodirect.go),
// and a oneof and an Empty, which it reads only when absent.
const pbDirect3 = `syntax = "proto3"; package d;
import "google/protobuf/timestamp.proto"; import "google/protobuf/duration.proto"; import "google/protobuf/empty.proto";
enum Kind { CLICK = 0; VIEW = 1; BUY = 2; GAP = 5; }
message Rec {
  int64 i64 = 1; sint64 s64 = 2; sfixed64 sf64 = 3; uint32 u32 = 4; fixed32 f32 = 5;
  int32 i32 = 6; sint32 s32 = 7; sfixed32 sf32 = 8; double d = 9; bool b = 10;
  string s = 11; bytes by = 12; Kind kind = 13;
  google.protobuf.Timestamp ts = 14; google.protobuf.Duration dur = 15;
  optional string note = 16; optional int64 oi = 17; optional Kind ok = 18; optional double od = 19;
  repeated string tags = 20; repeated bytes blobs = 21;
  oneof pick { string word = 22; int32 num = 23; }
  google.protobuf.Empty nothing = 24;
}`

// pbDirect2 is proto2: strings the wire decoder does not check for UTF-8 (the Avro
// decoder does), closed enums, explicit presence everywhere.
const pbDirect2 = `syntax = "proto2"; package d2;
import "google/protobuf/timestamp.proto";
enum E { A = 1; B = 2; }
message Rec {
  optional int64 i64 = 1 [default = -3]; optional int32 i32 = 2 [default = 7]; optional string s = 3 [default = "dflt"];
  optional bytes by = 4; optional E e = 5 [default = B]; optional bool b = 6 [default = true];
  optional double d = 7 [default = 2.5]; repeated string tags = 8; optional google.protobuf.Timestamp ts = 9;
  optional sint32 s32 = 10;
}`

// directTables are the tables the direct decoder is checked against for ws: its own;
// one without some of its columns (the fields are read and discarded); one with an extra
// column (null) and a NOT NULL column for a nullable field.
func directTables(t testing.TB, ws *WriterSchema) map[string]*deltalog.StructType {
	t.Helper()
	own := ws.Delta
	fewer := &deltalog.StructType{}
	for _, f := range own.Fields {
		switch f.Name {
		case "s64", "tags", "note", "kind", "s", "i32", "nothing":
			continue
		}
		fewer.Fields = append(fewer.Fields, f)
	}
	more := &deltalog.StructType{}
	for _, f := range own.Fields {
		g := *f
		if g.Name == "note" || g.Name == "i64" && g.Nullable {
			g.Nullable = false
		}
		more.Fields = append(more.Fields, &g)
	}
	more.Fields = append(more.Fields, &deltalog.StructField{Name: "extra", Type: deltalog.String, Nullable: true})
	return map[string]*deltalog.StructType{"own": own, "fewer": fewer, "more": more}
}

// directPair is the decoder CompileRecord returns for a Protobuf message and table, and
// the same decoder without its direct path: the transcoding path, the reference.
type directPair struct {
	td, ref *transcodingDecoder
	leaves  []column.Leaf
	pq      *parquet.Schema
}

func newDirectPair(t testing.TB, ws *WriterSchema, table *deltalog.StructType) directPair {
	t.Helper()
	pq := mustParquet(t, table, "none")
	rd, err := CompileRecord(ws, table, "none", pq)
	if err != nil {
		t.Fatal(err)
	}
	td := rd.(*transcodingDecoder)
	if td.direct == nil {
		t.Fatalf("no direct decoder for %s", ws.body.(*protoBody).md.FullName())
	}
	return directPair{td: td, ref: &transcodingDecoder{avro: td.avro, body: td.body}, leaves: column.Leaves(pq), pq: pq}
}

// sameColumns reports the first difference between two decoders' columns: form (dense
// or levelled), dense words and bytes, and every entry as At gives it.
func sameColumns(got, want []column.Column) error {
	for i := range want {
		g, w := &got[i], &want[i]
		if g.IsDense() != w.IsDense() {
			return fmt.Errorf("column %d: dense %v, want %v", i, g.IsDense(), w.IsDense())
		}
		if g.IsDense() && (!slices.Equal(g.Dense, w.Dense) || !bytes.Equal(g.Bytes, w.Bytes)) {
			return fmt.Errorf("column %d: dense words %v bytes %q, want %v %q", i, g.Dense, g.Bytes, w.Dense, w.Bytes)
		}
	}
	if err := sameValues(materialise(got), materialise(want)); err != nil {
		return err
	}
	for i := range want { // a value's bytes, not only its rendering
		for j := range want[i].Len() {
			if v := want[i].At(j); v.IsNull() || v.Kind() != parquet.ByteArray {
				continue
			}
			if !bytes.Equal(got[i].At(j).ByteArray(), want[i].At(j).ByteArray()) {
				return fmt.Errorf("column %d entry %d: bytes %q, want %q", i, j, got[i].At(j).ByteArray(), want[i].At(j).ByteArray())
			}
		}
	}
	return nil
}

// directRun decodes bodies one after another with both decoders of p into columns of a
// batch, through arenas of one kind (alias, copy, none), and fails t at the first
// difference of error (message, reason, field) or column. It returns how many bodies the
// direct decoder read itself.
func directRun(t *testing.T, p directPair, arenas string, bodies [][]byte) (direct int) {
	t.Helper()
	var ga, wa *Arena
	switch arenas {
	case "alias":
		ga, wa = &Arena{}, &Arena{}
		ga.AliasPayloads()
		wa.AliasPayloads()
	case "copy":
		ga, wa = &Arena{}, &Arena{}
	}
	got, want := make([]column.Column, len(p.leaves)), make([]column.Column, len(p.leaves))
	for i, l := range p.leaves {
		got[i].Reset(l)
		want[i].Reset(l)
	}
	slots := make([]pdSlot, len(p.td.direct.fields))
	for k, body := range bodies {
		if p.td.direct.read(slots, body) {
			direct++
		}
		in := bytes.Clone(body)
		gerr := p.td.DecodeColumns(ga, in, got)
		werr := p.ref.DecodeColumns(wa, body, want)
		switch {
		case (gerr == nil) != (werr == nil),
			gerr != nil && (gerr.Error() != werr.Error() || ReasonOf(gerr) != ReasonOf(werr) || FieldOf(gerr) != FieldOf(werr)):
			t.Fatalf("%s body %d %x: error %v, want %v", arenas, k, body, gerr, werr)
		}
		if !bytes.Equal(in, body) {
			t.Fatalf("%s body %d: the decoder modified its input", arenas, k)
		}
		for i := range want {
			if got[i].Len() != want[i].Len() || got[i].IsDense() != want[i].IsDense() {
				t.Fatalf("%s body %d %x: column %d has %d entries (dense %v), want %d (%v)", arenas, k, body, i, got[i].Len(), got[i].IsDense(), want[i].Len(), want[i].IsDense())
			}
		}
		if k%32 != 31 && k != len(bodies)-1 {
			continue // the whole batch's values every 32 bodies
		}
		if err := sameColumns(got, want); err != nil {
			t.Fatalf("%s body %d %x: %v", arenas, k, body, err)
		}
	}
	return direct
}

// TestProtobufDirectMatchesTranscoding compares the direct decoder with the transcoding
// path it short-cuts on random bodies (pbGen: in and out of order, repeated and unknown
// fields, wrong wire types, invalid UTF-8, out-of-range Timestamps, flipped bytes) of a
// proto3 and a proto2 message, each into three tables and through three kinds of arena:
// the same columns, dense or levelled alike, and the same errors. The direct decoder must
// read a good share of the bodies itself, and not all.
func TestProtobufDirectMatchesTranscoding(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 200
	}
	for _, text := range []string{pbDirect3, pbDirect2} {
		ws := mustProto(t, text, nil)
		md := ws.body.(*protoBody).md
		g := &pbGen{r: rand.New(rand.NewPCG(uint64(len(text)), 7))}
		bodies := make([][]byte, 0, n)
		for k := range n {
			b := g.message(md, 1)
			if k%5 == 4 && len(b) > 0 {
				b[g.r.IntN(len(b))] ^= byte(1 + g.r.IntN(255))
			}
			bodies = append(bodies, b)
		}
		for name, table := range directTables(t, ws) {
			p := newDirectPair(t, ws, table)
			for _, arenas := range []string{"alias", "copy", "none"} {
				t.Run(fmt.Sprintf("%s/%s/%s", md.FullName(), name, arenas), func(t *testing.T) {
					direct := directRun(t, p, arenas, bodies)
					least := n / 10
					if name == "more" {
						least = max(1, 5*n/600) // the NOT NULL column's field is absent from most bodies (9 and 20 of 600 read)
					}
					t.Logf("the direct decoder read %d of %d bodies", direct, n)
					if direct < least || direct == n {
						t.Fatalf("the direct decoder read %d of %d bodies", direct, n)
					}
				})
			}
		}
	}
}

// TestProtobufDirectB1 decodes B1's record (BenchmarkFormats) through the direct decoder:
// every column's exact value, and the transcoding path's columns.
func TestProtobufDirectB1(t *testing.T) {
	ws := mustProto(t, tenFieldsProto, nil)
	body := pbBody(t, ws, `{"id":"123456789","name":"customer-000042","score":98.25,"active":true,
	 "ts":"2023-12-17T00:00:00.123456Z","note":"gift wrap","count":17,"amount":"-123456789","kind":"BUY","tags":["web","eu-west-1"]}`)
	p := newDirectPair(t, ws, ws.Delta)
	if !p.td.direct.read(make([]pdSlot, 10), body) {
		t.Fatal("the direct decoder does not read B1's record")
	}
	if direct := directRun(t, p, "alias", [][]byte{body, body}); direct != 2 {
		t.Fatalf("direct %d of 2", direct)
	}
	var a Arena
	cols := make([]column.Column, len(p.leaves))
	for i, l := range p.leaves {
		cols[i].Reset(l)
	}
	if err := p.td.DecodeColumns(&a, body, cols); err != nil {
		t.Fatal(err)
	}
	got := renderCols(p.pq, materialise(cols))
	want := map[string][]string{"id": {"123456789"}, "name": {`"customer-000042"`}, "score": {"98.25"}, "active": {"true"},
		"ts": {"1702771200123456"}, "note": {`"gift wrap"`}, "count": {"17"}, "amount": {"-123456789"}, "kind": {`"BUY"`},
		"tags.list.element": {`"web"`, `"eu-west-1"`}}
	if len(got) != len(want) {
		t.Fatalf("columns %v, want %v", got, want)
	}
	for name, w := range want {
		vals := make([]string, len(got[name]))
		for j, r := range got[name] {
			vals[j] = r[strings.IndexByte(r, ':')+1:] // the value without its levels
		}
		if !slices.Equal(vals, w) {
			t.Fatalf("column %s: %v, want %v", name, got[name], w)
		}
	}
}

// TestProtobufDirectScope: the messages and tables the direct decoder does not read have
// none (the transcoding path reads all their bodies).
func TestProtobufDirectScope(t *testing.T) {
	for name, text := range map[string]string{"rich": pbRich, "uint64": `syntax = "proto3"; message M { uint64 u = 1; }`,
		"required": `syntax = "proto2"; message M { required int32 i = 1; }`, "message": `syntax = "proto3"; message M { message N { int32 i = 1; } N n = 1; }`,
		"unordered": `syntax = "proto3"; message M { int32 b = 2; int32 a = 1; }`} {
		ws := mustProto(t, text, nil)
		pq := mustParquet(t, ws.Delta, "none")
		rd, err := CompileRecord(ws, ws.Delta, "none", pq)
		if err != nil {
			t.Fatal(err)
		}
		if rd.(*transcodingDecoder).direct != nil {
			t.Errorf("%s: a direct decoder", name)
		}
	}
	// int32 into a long column: the Avro decoder widens it in a compiled step.
	ws := mustProto(t, `syntax = "proto3"; message M { int32 i = 1; }`, nil)
	table := &deltalog.StructType{Fields: []*deltalog.StructField{{Name: "i", Type: deltalog.Long, Nullable: true}}}
	rd, err := CompileRecord(ws, table, "none", mustParquet(t, table, "none"))
	if err != nil {
		t.Fatal(err)
	}
	if rd.(*transcodingDecoder).direct != nil {
		t.Error("int32 into long: a direct decoder")
	}
}

// FuzzProtobufDirect is TestProtobufDirectMatchesTranscoding under the fuzzer: a
// generated body of pbDirect3 or pbDirect2 with raw XORed over it.
func FuzzProtobufDirect(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed, []byte{})
		f.Add(seed, []byte{0x80, 0x01})
	}
	var pairs [2][]directPair
	var wss [2]*WriterSchema
	for k, text := range []string{pbDirect3, pbDirect2} {
		wss[k] = mustProto(f, text, nil)
		for _, table := range directTables(f, wss[k]) {
			pairs[k] = append(pairs[k], newDirectPair(f, wss[k], table))
		}
	}
	f.Fuzz(func(t *testing.T, seed uint64, raw []byte) {
		k := seed % 2
		g := &pbGen{r: rand.New(rand.NewPCG(seed, seed^0x51ed27))}
		body := g.message(wss[k].body.(*protoBody).md, 1)
		if len(body) > 0 {
			for i, x := range raw {
				body[i%len(body)] ^= x
			}
		}
		for _, p := range pairs[k] {
			directRun(t, p, "alias", [][]byte{body})
			directRun(t, p, "copy", [][]byte{body})
		}
	})
}
