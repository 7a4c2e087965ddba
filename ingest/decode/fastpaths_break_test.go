package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
		// The oracle's error, not a literal: the protobuf library spaces its messages with
		// a space or a no-break space, chosen per binary.
		_, werr := oracleToAvro(p, nil, bad)
		if err == nil || werr == nil || err.Error() != werr.Error() || !strings.Contains(err.Error(), "field chain.M26.s contains invalid UTF-8") {
			t.Fatalf("error %v, want %v (field chain.M26.s contains invalid UTF-8)", err, werr)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("a %d-byte body nested %d deep with invalid UTF-8 innermost is not decoded after 2 s (decoding it at depth d takes about 2^d message passes)", len(bad), depth)
	}
}

// pbBreak's R and pbBreak2's R (each the file's first message, the one a schema id
// names) are declared in field-number order, so their bodies take the one pass
// (messageInOrder) whenever it can read them.
const pbBreak = `syntax = "proto3";
package brk;
enum E { Z = 0; A = 1; }
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
message Sub { int32 a = 1; repeated int32 r = 2; }
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
	// The bodies the one pass reads whole; it leaves every other one to the two passes
	// ("one with p inside unordered" too: a nested message out of order gives up the body).
	onePass := map[string]bool{"big alone": true, "empty packed run": true, "enum negative": true, "enum out of range": true,
		"opt zero": true, "overlong packed element": true, "p then big": true,
		"subs adjacent": true, "subs empty message": true, "tag max number": true, "u unpacked": true,
		"u unpacked sent packed": true}
	ws := mustProto(t, pbBreak, nil)
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			if got := pbOnePass(ws, body); got != onePass[name] {
				t.Errorf("the one pass reads the body %x whole: %v, want %v", body, got, onePass[name])
			}
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
			if !pbOnePass(ws2, body) {
				t.Errorf("the one pass does not read the body %x whole", body)
			}
			pbDifferential(t, ws2, body)
		})
	}
}

// TestPlainJSONStringsMatchEncodingJSON reads documents whose strings put quotes,
// backslash escapes, control characters, DEL, multi-byte characters, surrogates, overlong
// and invalid UTF-8 at every offset of the eight-byte words the one pass scans, in a
// top-level string, an array element, a map key and value, through JSONSource.Writer and
// the transcoding: the values encoding/json reads from the same document, and a
// decode_error exactly for the documents with invalid UTF-8 (which encoding/json would
// replace by U+FFFD).
func TestPlainJSONStringsMatchEncodingJSON(t *testing.T) {
	table := mustTable(t, jsonTable)
	src := NewJSONSource(nil, []string{"_kafka_offset"})
	pieces := []string{"a", "Z", " ", "~", "\x7f", "é", "€", "𝄞", `\"`, `\\`, `\n`, `\u0000`, `\u00e9`, `\ud834\udd1e`, `\/`}
	bad := []string{"\xff", "\xc3", "\x80", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\x1f", "\t"}
	r := rand.New(rand.NewPCG(9, 13))
	str := func() string {
		var b strings.Builder
		for range r.IntN(20) {
			p := pieces[0]
			switch r.IntN(60) {
			case 0:
				p = bad[r.IntN(len(bad))]
			case 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18:
				p = pieces[r.IntN(len(pieces))]
			}
			b.WriteString(p)
		}
		return b.String()
	}
	valid, invalid := 0, 0
	for n := range 5000 {
		s, e, k := str(), str(), str()
		doc := fmt.Sprintf(`{"id": %d, "tags": ["%s", "%s"], "m": {"%s": 1}, "s": {"a": 2}}`, n, s, e, k)
		var want struct {
			ID   int64            `json:"id"`
			Tags []string         `json:"tags"`
			M    map[string]int64 `json:"m"`
		}
		jerr := json.Unmarshal([]byte(doc), &want)
		ws, body, err := src.Writer(table, []byte(doc))
		var got map[string]any
		if err == nil {
			got, err = jsonValue(t, ws, body)
		}
		switch {
		case jerr != nil:
			if err == nil {
				t.Fatalf("document %q: encoding/json refuses it (%v), ingestd reads %v", doc, jerr, got)
			}
			continue
		case !utf8.ValidString(doc):
			if err == nil || ReasonOf(err) != ReasonDecodeError {
				t.Fatalf("document %q with invalid UTF-8: %v, %v; want a decode_error", doc, got, err)
			}
			invalid++
			continue
		case err != nil:
			t.Fatalf("document %q: %v; encoding/json reads %+v", doc, err, want)
		}
		valid++
		tags, m := unwrapUnion(got["tags"]).([]any), unwrapUnion(got["m"]).(map[string]any)
		if len(tags) != 2 || unwrapUnion(tags[0]) != want.Tags[0] || unwrapUnion(tags[1]) != want.Tags[1] {
			t.Fatalf("document %q: tags %#v, encoding/json reads %q", doc, tags, want.Tags)
		}
		if k := firstKey(want.M); len(m) != 1 || unwrapUnion(m[k]) != int64(1) {
			t.Fatalf("document %q: m %#v, encoding/json reads %v", doc, m, want.M)
		}
	}
	if valid < 2000 || invalid < 300 {
		t.Fatalf("%d valid and %d invalid documents: the generator misses a side", valid, invalid)
	}
}

func firstKey(m map[string]int64) string {
	for k := range m {
		return k
	}
	return ""
}

// unwrapUnion is the value of an Avro union as hamba/avro reads it ({"branch": value}).
func unwrapUnion(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for k, x := range m {
			if k == "string" || k == "long" || k == "array" || k == "map" {
				return x
			}
		}
	}
	return v
}

// TestUTCMicrosEveryByte compares utcMicros with time.Parse and text's checks on edge
// timestamps (leap days of 2000 and 2024, 1900-02-29, 9999-12-31T23:59:59.999999,
// 0001-01-01, fractions of 1 to 9 digits with trailing zeros, day 31 of a 30-day month)
// with every byte value put at every position, and with each byte deleted: wherever the
// fast path decides (sure), it decides as time.Parse does.
func TestUTCMicrosEveryByte(t *testing.T) {
	bases := []string{"2000-02-29T00:00:00Z", "2024-02-29T12:34:56.5Z", "1900-02-28T23:59:59.000001Z",
		"9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00Z", "1970-01-01T00:00:00.100000000Z",
		"2023-04-30T10:00:00.120Z", "1969-12-31T23:59:59.999999000Z", "2100-02-28T00:00:00.9Z"}
	sure, accepted := 0, 0
	try := func(s string) {
		for _, ntz := range []bool{false, true} {
			in := s
			if ntz && strings.HasSuffix(in, "Z") {
				in = in[:len(in)-1]
			}
			decided, ok := checkUTCMicros(t, in, ntz)
			if decided {
				sure++
			}
			if ok {
				accepted++
			}
		}
	}
	for _, base := range bases {
		try(base)
		for i := range len(base) {
			for c := range 256 {
				b := []byte(base)
				b[i] = byte(c)
				try(string(b))
			}
			try(base[:i] + base[i+1:])
			try(base[:i] + "0" + base[i:])
		}
	}
	if sure < 3000 || accepted < 1000 || sure-accepted < 500 {
		t.Fatalf("%d texts decided by the fast path, %d accepted: the cases miss a side", sure, accepted)
	}
}

// TestProtobufOnePassEligibility checks which messages the one pass may read: fields
// declared in number order and no required field, wherever the numbers lie (above 1023,
// in byNumMap, too); and that the bodies of the others, in wire order or not, decode as
// the oracle does.
func TestProtobufOnePassEligibility(t *testing.T) {
	for _, c := range []struct {
		text string
		want bool
	}{
		{`syntax = "proto3"; package e; message M { int32 a = 1; int32 b = 2; }`, true},
		{`syntax = "proto3"; package e; message M { int32 b = 2; int32 a = 1; }`, false},
		{`syntax = "proto3"; package e; message M { int32 a = 1; int32 z = 5000; int32 b = 2000; }`, false},
		{`syntax = "proto3"; package e; message M { int32 a = 1; int32 b = 2000; int32 z = 5000; }`, true},
		{`syntax = "proto2"; package e; message M { optional int32 a = 1; required int32 b = 2; }`, false},
		{`syntax = "proto2"; package e; message M { optional int32 a = 1; optional int32 b = 2; }`, true},
	} {
		ws := mustProto(t, c.text, nil)
		p := ws.body.(*protoBody)
		if p.top.inOrder != c.want {
			t.Errorf("%s: inOrder %v, want %v", c.text, p.top.inOrder, c.want)
		}
		for _, body := range [][]byte{
			nil,
			{0x08, 0x01, 0x10, 0x02},
			{0x10, 0x02, 0x08, 0x01},
			{0x80, 0x7d, 0x03, 0x08, 0x01}, // 2000 then 1
			{0x08, 0x01, 0x80, 0x7d, 0x03}, // 1 then 2000
			{0xc0, 0xb8, 0x02, 0x04, 0x80, 0x7d, 0x03},
		} {
			pbDifferential(t, ws, body)
		}
	}
}

// TestProtobufRecursionLimitMatchesOracle decodes good bodies nested to the recursion
// limit (maxProtoRecursion) through a chain of distinct messages, as the oracle does.
func TestProtobufRecursionLimitMatchesOracle(t *testing.T) {
	for _, depth := range []int{maxProtoRecursion - 1, maxProtoRecursion} {
		ws := mustProto(t, pbChain(depth), nil)
		body := pbChainBody(depth, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("end")))
		if !pbOnePass(ws, body) {
			t.Errorf("depth %d: the one pass does not read the body whole", depth)
		}
		pbDifferential(t, ws, body)
	}
}

// TestJSONTimestampsOnePassMatchesTwoPass reads documents whose timestamp and
// timestamp_ntz columns hold edge timestamps with every byte at every position, or one
// byte deleted, with the one pass and with the two passes: whatever the one pass
// accepts, the two passes accept with the same bytes, and the one pass takes the
// documents whose timestamps utcMicros reads.
func TestJSONTimestampsOnePassMatchesTwoPass(t *testing.T) {
	both := richOnePass(t)
	fast, slowOK := 0, 0
	check := func(at, ntz string) {
		f, slow := both([]byte(fmt.Sprintf(`{"id": 1, "ok": true, "at": "%s", "ntz": "%s"}`, at, ntz)))
		if f {
			fast++
		}
		if slow {
			slowOK++
		}
	}
	for _, base := range []string{"2000-02-29T00:00:00Z", "9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00Z",
		"1969-12-31T23:59:59.000001Z", "2023-04-30T10:00:00.120000000Z"} {
		for i := range len(base) {
			for _, c := range []byte("09Zz+-.,:Tt 12345678\x00\x7f\xff") {
				b := []byte(base)
				b[i] = c
				if !utf8.Valid(b) || c < 0x20 {
					continue
				}
				check(string(b), strings.TrimSuffix(string(b), "Z"))
			}
			check(base[:i]+base[i+1:], strings.TrimSuffix(base[:i]+base[i+1:], "Z"))
		}
	}
	if fast < 300 || fast < slowOK*9/10 {
		t.Fatalf("the one pass took %d documents of the %d the two passes accept", fast, slowOK)
	}
}

// TestProtobufPackedEnumsStopAtTheBound: a packed run of enum numbers, one byte each,
// whose name is 1,000 characters, grows a thousandfold. The one pass stops once the output
// passes the transcoding bound (1 MiB + 64 × the body's size), as the two passes do, so a
// 100,000-byte body allocates a few times that bound (both passes' growing buffers, and
// the protobuf library's check of the refused body: about 55 MB), not the 600 MB it did
// when the one pass wrote the whole run first; the error is the two passes' (errExpand),
// and equals the oracle's.
func TestProtobufPackedEnumsStopAtTheBound(t *testing.T) {
	name := "V" + strings.Repeat("x", 999)
	ws := mustProto(t, `syntax = "proto3"; package pe; enum E { Z = 0; `+name+` = 1; } message R { repeated E es = 1; }`, nil)
	run := bytes.Repeat([]byte{1}, 100_000)
	body := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), run)
	p := ws.body.(*protoBody)
	if !p.top.inOrder {
		t.Fatal("R is not read by the one pass")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := p.toAvro(nil, body)
	runtime.ReadMemStats(&after)
	if err == nil || !errors.Is(err, errExpand) {
		t.Fatalf("error %v, want the transcoding bound's", err)
	}
	limit := uint64(maxExpandFixed + maxExpandFactor*len(body))
	if got := after.TotalAlloc - before.TotalAlloc; got > 12*limit {
		t.Errorf("the refused body allocated %d bytes, want at most %d (12 × the bound)", got, 12*limit)
	}
	pbDifferential(t, ws, body)
}
