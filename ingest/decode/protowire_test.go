package decode

import (
	"bytes"
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// pbProto2 covers what proto3 cannot say: required fields, groups, closed enums,
// defaults, and messages merged across repeated occurrences inside oneofs and maps.
const pbProto2 = `syntax = "proto2";
package t2;
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
enum E { A = 1; B = 2; }
message Leaf { required int32 n = 1; optional string s = 2; repeated sint64 z = 3 [packed = true]; }
message Rec {
  required string id = 1;
  optional int32 i = 2 [default = 7];
  optional E e = 3;
  repeated fixed32 fx = 4;
  repeated double ds = 5 [packed = true];
  optional group G = 6 { optional int64 g = 7; repeated string gs = 8; }
  oneof pick { Leaf leaf = 9; string word = 10; google.protobuf.Timestamp when = 11; }
  map<string, Leaf> leaves = 12;
  map<sint32, E> codes = 13;
  map<bool, bytes> flags = 14;
  optional google.protobuf.ListValue lv = 15;
  optional google.protobuf.Struct st = 16;
  repeated Leaf many = 17;
  optional sfixed64 sf = 18;
  optional bool b = 19;
  repeated google.protobuf.UInt32Value us = 20;
  optional float f = 21;
  map<fixed64, string> big = 22;
  repeated E es = 23;
}
`

// pbGen writes random Protobuf bodies of a message descriptor: every field kind, repeated
// and merged occurrences, packed and unpacked lists, wrong wire types, unknown fields,
// invalid UTF-8, out-of-range timestamps, deep Structs.
type pbGen struct{ r *rand.Rand }

func (g *pbGen) message(md protoreflect.MessageDescriptor, depth int) []byte {
	var b []byte
	fields := md.Fields()
	n := g.r.IntN(10)
	if depth > 4 {
		n = g.r.IntN(2)
	}
	if g.r.IntN(2) == 0 {
		// As serializers write: ascending field numbers, a repeated field's occurrences
		// adjacent (a singular field picked twice is written twice), unknown fields last.
		picked := make([]int, 0, n)
		unknown := 0
		for range n {
			if fields.Len() == 0 || g.r.IntN(12) == 0 {
				unknown++
				continue
			}
			picked = append(picked, g.r.IntN(fields.Len()))
		}
		slices.SortFunc(picked, func(x, y int) int { return cmp.Compare(fields.Get(x).Number(), fields.Get(y).Number()) })
		for _, k := range picked {
			b = g.field(b, fields.Get(k), depth)
		}
		for range unknown {
			b = g.unknown(b)
		}
		return b
	}
	for range n {
		if fields.Len() == 0 || g.r.IntN(12) == 0 {
			b = g.unknown(b)
			continue
		}
		b = g.field(b, fields.Get(g.r.IntN(fields.Len())), depth)
	}
	return b
}

func (g *pbGen) unknown(b []byte) []byte {
	num := protowire.Number(900 + g.r.IntN(20))
	switch g.r.IntN(5) {
	case 0:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, g.r.Uint64())
	case 1:
		b = protowire.AppendTag(b, num, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, g.r.Uint32())
	case 2:
		b = protowire.AppendTag(b, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, g.r.Uint64())
	case 3:
		b = protowire.AppendTag(b, num, protowire.StartGroupType)
		b = g.unknown(b)
		return protowire.AppendTag(b, num, protowire.EndGroupType)
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, []byte("xyz"))
}

func (g *pbGen) field(b []byte, fd protoreflect.FieldDescriptor, depth int) []byte {
	num := fd.Number()
	if g.r.IntN(25) == 0 { // a wrong wire type: an unknown field
		b = protowire.AppendTag(b, num, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, g.r.Uint32())
	}
	if fd.IsMap() {
		var e []byte
		if g.r.IntN(8) != 0 {
			e = g.value(e, fd.MapKey(), 1, depth+1)
		}
		for range g.r.IntN(3) {
			e = g.value(e, fd.MapValue(), 2, depth+1)
		}
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, e)
	}
	if fd.IsList() && wireType(fd.Kind()) != protowire.BytesType && wireType(fd.Kind()) != protowire.StartGroupType && g.r.IntN(2) == 0 {
		var p []byte
		for range g.r.IntN(4) {
			p = g.scalar(p, fd)
		}
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, p)
	}
	return g.value(b, fd, num, depth)
}

func (g *pbGen) value(b []byte, fd protoreflect.FieldDescriptor, num protowire.Number, depth int) []byte {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, g.messageOf(fd.Message(), depth+1))
	case protoreflect.GroupKind:
		b = protowire.AppendTag(b, num, protowire.StartGroupType)
		b = append(b, g.messageOf(fd.Message(), depth+1)...)
		return protowire.AppendTag(b, num, protowire.EndGroupType)
	}
	b = protowire.AppendTag(b, num, wireType(fd.Kind()))
	return g.scalar(b, fd)
}

func (g *pbGen) messageOf(md protoreflect.MessageDescriptor, depth int) []byte {
	switch md.FullName() {
	case "google.protobuf.Timestamp", "google.protobuf.Duration":
		if g.r.IntN(3) != 0 {
			var b []byte
			b = protowire.AppendTag(b, 1, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(g.r.Int64N(2*maxTimestampSeconds)-maxTimestampSeconds/2))
			b = protowire.AppendTag(b, 2, protowire.VarintType)
			return protowire.AppendVarint(b, uint64(g.r.Int64N(1_000_000_000)))
		}
	case "google.protobuf.Value", "google.protobuf.Struct", "google.protobuf.ListValue":
		if g.r.IntN(40) == 0 { // a Struct nested near the recursion limit
			return g.deepValue(md.FullName(), 18+g.r.IntN(6))
		}
	}
	return g.message(md, depth)
}

// deepValue nests struct_value n times (each level a Struct, its entry and a Value).
func (g *pbGen) deepValue(top protoreflect.FullName, n int) []byte {
	v := protowire.AppendTag(nil, 4, protowire.VarintType)
	v = protowire.AppendVarint(v, 1)
	for range n {
		e := protowire.AppendTag(nil, 1, protowire.BytesType)
		e = protowire.AppendString(e, "k")
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendBytes(e, v)
		s := protowire.AppendTag(nil, 1, protowire.BytesType)
		s = protowire.AppendBytes(s, e)
		v = protowire.AppendTag(nil, 5, protowire.BytesType)
		v = protowire.AppendBytes(v, s)
	}
	if top == "google.protobuf.Struct" {
		v, _ = protowire.ConsumeBytes(v[1:])
	}
	return v
}

func (g *pbGen) scalar(b []byte, fd protoreflect.FieldDescriptor) []byte {
	switch wireType(fd.Kind()) {
	case protowire.Fixed32Type:
		if fd.Kind() == protoreflect.FloatKind && g.r.IntN(4) == 0 {
			return protowire.AppendFixed32(b, math.Float32bits(float32(g.r.NormFloat64())))
		}
		return protowire.AppendFixed32(b, g.r.Uint32())
	case protowire.Fixed64Type:
		if fd.Kind() == protoreflect.DoubleKind && g.r.IntN(4) != 0 {
			return protowire.AppendFixed64(b, math.Float64bits(g.r.NormFloat64()*1e6))
		}
		return protowire.AppendFixed64(b, g.r.Uint64())
	case protowire.BytesType:
		s := []byte([]string{"", "a", "héllo", "k", "z"}[g.r.IntN(5)])
		if g.r.IntN(20) == 0 {
			s = append(s, 0xff) // not UTF-8
		}
		return protowire.AppendBytes(b, s)
	}
	switch g.r.IntN(4) {
	case 0:
		return protowire.AppendVarint(b, g.r.Uint64())
	case 1:
		return protowire.AppendVarint(b, uint64(g.r.IntN(4)))
	}
	return protowire.AppendVarint(b, uint64(g.r.Int64N(1<<20)-1<<19))
}

// pbDifferential decodes body of ws's message with the wire decoder and with the dynamicpb
// oracle: both must give the same bytes, or the same error.
func pbDifferential(t *testing.T, ws *WriterSchema, body []byte) {
	t.Helper()
	p := ws.body.(*protoBody)
	want, werr := oracleToAvro(p, nil, body)
	got, gerr := p.toAvro(nil, body)
	switch {
	case (werr == nil) != (gerr == nil):
		t.Fatalf("body %x: oracle error %v, wire decoder error %v", body, werr, gerr)
	case werr != nil && werr.Error() != gerr.Error():
		t.Fatalf("body %x: errors differ\noracle %v\n  wire %v", body, werr, gerr)
	case !bytes.Equal(want, got):
		t.Fatalf("body %x: transcodings differ\noracle %x\n  wire %x", body, want, got)
	}
}

// pbDiffCase is body number seed of schema seed%3 (pbRich's Rec, pbProto2's Rec, and
// pbProto2's Rec without its required field, which the one-pass path reads), with raw
// XORed over it.
func pbDiffCase(t *testing.T, seed uint64, raw []byte) (*WriterSchema, []byte) {
	text, idx := pbRich, 0
	switch seed % 3 {
	case 1:
		text, idx = pbProto2, 2
	case 2:
		text, idx = strings.Replace(pbProto2, "required string id = 1;", "optional string id = 1;", 1), 2
	}
	ws := mustProto(t, text, nil)
	if idx != 0 {
		var err error
		if ws, _, err = ws.Message([]byte{2, byte(idx)}); err != nil {
			t.Fatal(err)
		}
	}
	g := &pbGen{r: rand.New(rand.NewPCG(seed, seed^0x51ed27))}
	body := g.message(ws.body.(*protoBody).md, 1)
	if len(body) > 0 {
		for i, x := range raw {
			body[i%len(body)] ^= x
		}
	}
	return ws, body
}

// TestProtobufWireDecoderMatchesDynamicpb compares the wire decoder with the dynamicpb
// transcoder it replaced on random bodies of three rich schemas: equal Avro bytes, or
// equal errors (reason and message). Both of the wire decoder's paths are exercised: the
// one pass (messageInOrder) reads a good share of the top-level bodies whole, and the two
// passes the rest.
func TestProtobufWireDecoderMatchesDynamicpb(t *testing.T) {
	n := uint64(900)
	if testing.Short() {
		n = 300
	}
	fails, onePass := 0, 0
	for seed := range n {
		ws, body := pbDiffCase(t, seed, nil)
		if _, err := oracleToAvro(ws.body.(*protoBody), nil, body); err != nil {
			fails++
		}
		if pbOnePass(ws, body) {
			onePass++
		}
		pbDifferential(t, ws, body)
		if seed%4 == 0 && len(body) > 0 { // one flipped byte
			body[int(seed/4)%len(body)] ^= byte(seed>>2) | 1
			pbDifferential(t, ws, body)
		}
	}
	// Both outcomes must be exercised: most bodies decode, some fail.
	if fails == 0 || fails > int(n)*3/4 {
		t.Fatalf("%d of %d generated bodies fail: the generator does not cover both outcomes", fails, n)
	}
	if onePass < int(n)/10 || onePass > int(n)*9/10 {
		t.Fatalf("the one pass reads %d of %d generated bodies whole: the generator does not cover both paths", onePass, n)
	}
}

// pbOnePass reports whether messageInOrder reads body of ws's message whole.
func pbOnePass(ws *WriterSchema, body []byte) bool {
	p := ws.body.(*protoBody)
	if !p.top.inOrder {
		return false
	}
	s := &pbState{avroAppender: newAvroAppender(nil, len(body))}
	return s.messageInOrder(p.top, body, 1)
}

// FuzzProtobufWireDecoder is TestProtobufWireDecoderMatchesDynamicpb under the fuzzer: a
// generated body with raw XORed over it.
func FuzzProtobufWireDecoder(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed, []byte{})
		f.Add(seed, []byte{0x80, 0x01})
	}
	f.Fuzz(func(t *testing.T, seed uint64, raw []byte) {
		ws, body := pbDiffCase(t, seed, raw)
		pbDifferential(t, ws, body)
	})
}
