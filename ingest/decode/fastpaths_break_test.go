package decode

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// pbChain is a chain of depth distinct messages M1 → M2 → … (Delta has no recursive
// types), each declared in field-number order, so every level takes the one pass
// (messageInOrder) first: M<k> { M<k+1> child = 1; string s = 2; }.
func pbChain(depth int) string {
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\npackage chain;\n")
	for k := 1; k < depth; k++ {
		fmt.Fprintf(&b, "message M%d { M%d child = 1; string s = 2; }\n", k, k+1)
	}
	fmt.Fprintf(&b, "message M%d { string s = 2; }\n", depth)
	return b.String()
}

// pbChainBody is depth levels, each the child of the one above, the innermost with the
// bytes inner.
func pbChainBody(depth int, inner []byte) []byte {
	b := inner
	for range depth - 1 {
		b = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
	}
	return b
}

// TestProtobufNestedErrorDecodedOnce checks that a body whose innermost message fails
// (a string of invalid UTF-8 at depth 26) is refused in about the time a good body of the
// same shape takes. Every level reads its body with the one pass first and, when a child
// fails inside it, reads it again with the two passes, which decode the child again: a
// failure deep down must not be decoded once per path through the levels above (2^depth
// times). The bound is 2 s against the microseconds the body needs, so only that blow-up
// can fail it; the decode runs on its own goroutine so that a blow-up fails the test
// instead of hanging it.
func TestProtobufNestedErrorDecodedOnce(t *testing.T) {
	const depth = 26
	p := mustProto(t, pbChain(depth), nil).body.(*protoBody)
	good := pbChainBody(depth, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("ok")))
	bad := pbChainBody(depth, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte{0xff}))
	if _, err := p.toAvro(nil, good); err != nil {
		t.Fatalf("the good body: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.toAvro(nil, bad)
		done <- err
	}()
	select {
	case err := <-done:
		const want = "decode: decode_error: decode protobuf chain.M1: proto: field chain.M26.s contains invalid UTF-8"
		if err == nil || err.Error() != want {
			t.Fatalf("error %v, want %s", err, want)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("a %d-byte body nested %d deep with invalid UTF-8 innermost is not decoded after 2 s (decoding it at depth d takes about 2^d message passes)", len(bad), depth)
	}
}

// pbBreak and pbBreak2 are declared in field-number order, so their bodies take the one
// pass (messageInOrder) whenever it can read them.
const pbBreak = `syntax = "proto3";
package brk;
enum E { Z = 0; A = 1; }
message Sub { int32 a = 1; repeated int32 r = 2; }
message R {
  repeated int32 p = 1;
  repeated Sub subs = 2;
  Sub one = 3;
  optional int32 opt = 4;
  E e = 5;
  repeated string ss = 6;
  repeated sint64 u = 7 [packed = false];
  int64 big = 2000;
}
`

const pbBreak2 = `syntax = "proto2";
package brk2;
enum E { A = 1; B = 2; }
message R {
  optional E e = 1;
  repeated E es = 2;
  repeated E ep = 3 [packed = true];
  optional int32 d = 4 [default = -5];
}
`

// TestProtobufWireHandBuiltBodies compares the wire decoder (one pass, two passes behind
// it) with the dynamicpb oracle on bodies built by hand at the one pass's edges: packed
// and unpacked runs of one field mixed, a packed run twice, repeated messages adjacent
// and apart, unknown fields between occurrences, a singular message twice (merged),
// proto3 optional, open and closed enums out of range, a field number above 1023, a
// mismatched wire type, an overlong tag, field 0, truncated values.
func TestProtobufWireHandBuiltBodies(t *testing.T) {
	tag := func(b []byte, n protowire.Number, wt protowire.Type) []byte { return protowire.AppendTag(b, n, wt) }
	vi := func(b []byte, n protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(b, n, protowire.VarintType), v)
	}
	by := func(b []byte, n protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(tag(b, n, protowire.BytesType), v)
	}
	packed := func(b []byte, n protowire.Number, vs ...uint64) []byte {
		var p []byte
		for _, v := range vs {
			p = protowire.AppendVarint(p, v)
		}
		return by(b, n, p)
	}
	sub := func(a uint64) []byte { return vi(nil, 1, a) }
	cat := func(bs ...[]byte) []byte {
		var o []byte
		for _, b := range bs {
			o = append(o, b...)
		}
		return o
	}
	cases := map[string][]byte{
		"packed then unpacked":        cat(packed(nil, 1, 1, 2), vi(nil, 1, 3)),
		"unpacked then packed":        cat(vi(nil, 1, 3), packed(nil, 1, 1, 2)),
		"packed twice adjacent":       cat(packed(nil, 1, 1, 2), packed(nil, 1, 3)),
		"empty packed run":            packed(nil, 1),
		"empty packed then one":       cat(packed(nil, 1), vi(nil, 1, 4)),
		"overlong packed element":     by(nil, 1, []byte{0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}),
		"packed truncated element":    by(nil, 1, []byte{0x81}),
		"subs adjacent":               cat(by(nil, 2, sub(1)), by(nil, 2, sub(2))),
		"subs apart":                  cat(by(nil, 2, sub(1)), by(nil, 3, sub(5)), by(nil, 2, sub(2))),
		"subs with unknown between":   cat(by(nil, 2, sub(1)), vi(nil, 99, 1), by(nil, 2, sub(2))),
		"p with unknown between":      cat(vi(nil, 1, 1), vi(nil, 99, 1), vi(nil, 1, 2)),
		"one twice (merge)":           cat(by(nil, 3, sub(5)), by(nil, 3, packed(nil, 2, 9))),
		"opt zero":                    vi(nil, 4, 0),
		"opt twice":                   cat(vi(nil, 4, 1), vi(nil, 4, 2)),
		"enum out of range":           vi(nil, 5, 7),
		"enum negative":               vi(nil, 5, uint64(1<<64-1)),
		"ss invalid utf8":             by(nil, 6, []byte{0xff}),
		"ss valid then invalid":       cat(by(nil, 6, []byte("a")), by(nil, 6, []byte{0xed, 0xa0, 0x80})),
		"u unpacked sent packed":      packed(nil, 7, 1, 2, 3),
		"u unpacked":                  cat(vi(nil, 7, 1), vi(nil, 7, 2)),
		"big alone":                   vi(nil, 2000, 5),
		"big before p":                cat(vi(nil, 2000, 5), vi(nil, 1, 1)),
		"p then big":                  cat(vi(nil, 1, 1), vi(nil, 2000, 5)),
		"big wrong wire type":         by(nil, 2000, []byte("x")),
		"p wrong wire type fixed32":   protowire.AppendFixed32(tag(nil, 1, protowire.Fixed32Type), 1),
		"one as group":                cat(tag(nil, 3, protowire.StartGroupType), vi(nil, 1, 1), tag(nil, 3, protowire.EndGroupType)),
		"overlong tag p twice":        cat([]byte{0x88, 0x00, 0x01}, []byte{0x08, 0x02}),
		"field zero":                  []byte{0x00, 0x01},
		"tag max number":              vi(nil, protowire.MaxValidNumber, 1),
		"subs empty message":          cat(by(nil, 2, nil), by(nil, 2, nil)),
		"one with p inside unordered": by(nil, 3, cat(packed(nil, 2, 1), vi(nil, 1, 3))),
		"truncated last":              cat(vi(nil, 1, 1), []byte{0x10}),
	}
	ws := mustProto(t, pbBreak, nil)
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			t.Logf("one pass: %v", pbOnePass(ws, body))
			pbDifferential(t, ws, body)
		})
	}
	ws2 := mustProto(t, pbBreak2, nil)
	cases2 := map[string][]byte{
		"closed enum unknown":        vi(nil, 1, 7),
		"closed enum unknown then d": cat(vi(nil, 1, 7), vi(nil, 4, 3)),
		"closed enum list unknown":   cat(vi(nil, 2, 1), vi(nil, 2, 9), vi(nil, 2, 2)),
		"closed enum packed unknown": packed(nil, 3, 1, 9, 2),
		"closed enum packed all bad": packed(nil, 3, 9),
		"d default":                  nil,
	}
	for name, body := range cases2 {
		t.Run(name, func(t *testing.T) {
			t.Logf("one pass: %v", pbOnePass(ws2, body))
			pbDifferential(t, ws2, body)
		})
	}
}
