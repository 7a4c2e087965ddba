package decode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// jsRichTable has a column of every kind plain JSON writes, NOT NULL and nullable.
const jsRichTable = `{"type":"record","name":"R","fields":[
 {"name":"id","type":"long"},{"name":"i","type":["null","int"]},{"name":"d","type":["null","double"]},{"name":"f","type":["null","float"]},
 {"name":"ok","type":"boolean"},{"name":"s","type":["null","string"]},{"name":"by","type":["null","bytes"]},
 {"name":"day","type":["null",{"type":"int","logicalType":"date"}]},{"name":"at","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
 {"name":"ntz","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}]},
 {"name":"amt","type":["null",{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}]},
 {"name":"sub","type":["null",{"type":"record","name":"Sub","fields":[{"name":"a","type":"long"},{"name":"b","type":["null","string"]}]}]},
 {"name":"items","type":["null",{"type":"array","items":"Sub"}]},{"name":"m","type":["null",{"type":"map","values":["null","long"]}]}]}`

const jsRichDoc = `{"id": 7, "i": -2147483648, "d": 1.5e300, "f": 0.1, "ok": true, "s": "héllo", "by": "AAEC", "day": "2024-02-29",
 "at": "2024-05-01T12:00:00.123456+02:00", "ntz": "2024-05-01T12:00:00.5", "amt": -1234567.89,
 "sub": {"b": null, "a": 9}, "items": [{"a": 1}, {"a": 2, "b": "x"}], "m": {"k": 1, "z": null}, "extra": null}`

// TestJSONOnePassMatchesTwoPass checks the one-pass transcoder against the two-pass one on
// mutations of a document with every kind of column: whatever the one-pass transcoder
// accepts, the two-pass one accepts with the same bytes; and it takes the common documents.
func TestJSONOnePassMatchesTwoPass(t *testing.T) {
	both := richOnePass(t)
	check := func(doc []byte) bool { fast, _ := both(doc); return fast }
	if !check([]byte(jsRichDoc)) {
		t.Fatal("the one-pass transcoder gave up on the plain document")
	}
	// Keys in another order and missing nullable keys take the one-pass path too.
	if !check([]byte(`{"ok": true, "sub": {"a": 1}, "id": 3}`)) {
		t.Fatal("the one-pass transcoder gave up on reordered keys")
	}
	r := rand.New(rand.NewPCG(1, 2))
	fast, slowOK := 0, 0
	for range 20000 {
		doc := []byte(jsRichDoc)
		for range 1 + r.IntN(3) {
			i := r.IntN(len(doc))
			switch r.IntN(3) {
			case 0:
				const alphabet = " {}[],:\"\\0123456789.eE-+tfnux\xff"
				doc[i] = alphabet[r.IntN(len(alphabet))]
			case 1:
				doc = append(doc[:i:i], doc[i+1:]...)
			default:
				doc = append(doc[:i:i], append([]byte{doc[r.IntN(len(doc))]}, doc[i:]...)...)
			}
		}
		f, slow := both(doc)
		if f {
			fast++
		}
		if slow {
			slowOK++
		}
	}
	if fast == 0 || fast < slowOK/2 {
		t.Fatalf("one pass took %d documents of the %d the two-pass transcoder accepts", fast, slowOK)
	}
}

// richOnePass returns a check of jsRichTable's writer: it transcodes a document with the
// one pass and with the two passes, fails t where the one pass accepts a document the two
// passes refuse or writes other bytes, and reports which of them accepted it.
func richOnePass(t *testing.T) func(doc []byte) (fast, slow bool) {
	table := mustWriter(t, 1, jsRichTable)
	src := NewJSONSource(nil, nil)
	ws, _, err := src.Writer(table.Delta, []byte(`{"id": 1, "ok": false}`))
	if err != nil || ws.DeltaErr != nil {
		t.Fatal(err, ws.DeltaErr)
	}
	jb := ws.body.(*jsonBody)
	return func(doc []byte) (bool, bool) {
		t.Helper()
		want, werr := jb.slowAvro(nil, doc)
		got, _, ok := fastJSON(nil, doc, jb.top, false, false)
		if ok && (werr != nil || !bytes.Equal(got, want)) {
			t.Fatalf("document %q: one pass %x, two passes %x (%v)", doc, got, want, werr)
		}
		return ok, werr == nil
	}
}

// TestJSONSourceTranscodesOnce checks that a plain JSON record whose keys the base has is
// transcoded while its writer schema is chosen, and that the decode takes that result.
func TestJSONSourceTranscodesOnce(t *testing.T) {
	table := mustWriter(t, 1, jsRichTable)
	src := NewJSONSource(nil, nil)
	doc := []byte(strings.Replace(jsRichDoc, `, "extra": null`, "", 1)) // a key the base lacks takes the inferring path
	first, _, err := src.Writer(table.Delta, doc)
	if err != nil {
		t.Fatal(err)
	}
	ws, body, err := src.Writer(table.Delta, doc)
	if err != nil || ws != first {
		t.Fatal(err, ws == first)
	}
	jb := ws.body.(*jsonBody)
	jb.memo.mu.Lock()
	kept := len(jb.memo.entries) - jb.memo.head
	jb.memo.mu.Unlock()
	if kept != 1 {
		t.Fatal("the writer did not keep the transcoding")
	}
	want, err := jb.slowAvro(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ws.Transcode(body)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("transcode %x, %v; want %x", got, err, want)
	}
	// A batch: every record's writer schema first, then every decode (as the flush does).
	docs := [][]byte{bytes.Replace(doc, []byte(`"id": 7`), []byte(`"id": 8`), 1), bytes.Replace(doc, []byte(`"id": 7`), []byte(`"id": 9`), 1)}
	for _, d := range docs {
		if w, _, err := src.Writer(table.Delta, d); err != nil || w != ws {
			t.Fatal(err)
		}
	}
	if n := len(jb.memo.entries) - jb.memo.head; n != 2 {
		t.Fatalf("%d transcodings kept for a batch of 2", n)
	}
	for _, d := range docs {
		want, _ := jb.slowAvro(nil, d)
		if got, err := ws.Transcode(d); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("transcode %x, %v; want %x", got, err, want)
		}
	}
	if n := len(jb.memo.entries) - jb.memo.head; n != 0 {
		t.Fatalf("%d kept transcodings were not taken", n)
	}
	// A record routed elsewhere is never decoded: the next decode passes its entry.
	for _, d := range docs {
		src.Writer(table.Delta, d)
	}
	if _, err := ws.Transcode(docs[1]); err != nil || jb.memo.head != len(jb.memo.entries) || jb.memo.entries[0].jb != nil {
		t.Fatalf("passing an entry: %v, head %d of %d", err, jb.memo.head, len(jb.memo.entries))
	}
}

// TestJSONOnePassDocument checks the document the one pass builds for the JSON Schema
// validator against the one jsonschema.UnmarshalJSON decodes (numbers as json.Number).
func TestJSONOnePassDocument(t *testing.T) {
	ws, err := CompileJSONSchema(11, jsOrder, map[string]string{"customer.json": jsCustomer})
	if err != nil || ws.DeltaErr != nil {
		t.Fatal(err, ws.DeltaErr)
	}
	top := ws.body.(*jsonSchemaBody).json.top
	for _, doc := range []string{
		`{"id": 1, "price": 2.50, "name": null, "tags": [], "attrs": {"a": 1, "b": -2}, "customer": {"cid": 3, "more": [1, {"x": true}]}, "other": "kept"}`,
		`{"price": 1e3, "id": -5, "ok": false, "at": "2024-05-01T12:00:00Z", "day": "2024-05-01", "note": "n"}`,
	} {
		want, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		_, got, ok := fastJSON(nil, []byte(doc), top, false, true)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("document %s: one pass %#v (%v), want %#v", doc, got, ok, want)
		}
	}
}

// TestJSONStrScan compares jFast.str, which scans eight bytes at a time, with its
// definition on strings that put a quote, a backslash, a control character, an ASCII
// byte, a valid multi-byte character or an invalid byte at every offset of the words it
// reads: the text up to the first quote, accepted when it has no backslash, no byte below
// 0x20 and is valid UTF-8.
func TestJSONStrScan(t *testing.T) {
	want := func(doc []byte) ([]byte, bool) {
		q := bytes.IndexByte(doc[1:], '"')
		if q < 0 {
			return nil, false
		}
		raw := doc[1 : 1+q]
		for _, c := range raw {
			if c < 0x20 || c == '\\' {
				return nil, false
			}
		}
		if !utf8.Valid(raw) {
			return nil, false
		}
		return raw, true
	}
	pieces := [][]byte{[]byte("a"), []byte("Z"), []byte(" "), []byte("~"), []byte("é"), []byte("€"), []byte("𝄞"),
		{0xff}, {0xc3}, {0x80}, []byte("\\"), {0x1f}, {0x00}, {0x7f}, []byte("\"")}
	r := rand.New(rand.NewPCG(7, 11))
	accepted, refused := 0, 0
	for n := range 20000 {
		doc := []byte{'"'}
		for range r.IntN(40) {
			p := pieces[0]
			if r.IntN(4) == 0 {
				p = pieces[r.IntN(len(pieces))]
			}
			doc = append(doc, p...)
		}
		if n%5 != 0 {
			doc = append(doc, '"')
		}
		doc = append(doc, []byte(`,"x":1}`)[:r.IntN(8)]...)
		f := &jFast{b: doc}
		got, ok := f.str()
		w, wok := want(doc)
		if ok != wok || !bytes.Equal(got, w) {
			t.Fatalf("str(%q) = %q, %v; want %q, %v", doc, got, ok, w, wok)
		}
		if ok {
			accepted++
			if f.i != len(w)+2 {
				t.Fatalf("str(%q) left the reader at %d, want %d (after the closing quote)", doc, f.i, len(w)+2)
			}
		} else {
			refused++
		}
	}
	if accepted < 2000 || refused < 2000 {
		t.Fatalf("%d strings accepted, %d refused: the generator misses a side", accepted, refused)
	}
}

// TestUTCMicrosMatchesTimeParse compares utcMicros with what text did before it, time.Parse
// and the range checks, on timestamps with every field at and past its bounds (leap days,
// year 0 and 9999, hour 24, second 60, 0 to 10 fraction digits, parts of a µs) and with
// suffixes the fast path leaves to time.Parse.
func TestUTCMicrosMatchesTimeParse(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	pick := func(xs ...int) int { return xs[r.IntN(len(xs))] }
	sure, accepted := 0, 0
	for range 200000 {
		y := pick(0, 1, 4, 100, 1582, 1900, 1969, 1970, 2000, 2024, 2100, 9999, r.IntN(10000))
		s := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", y, pick(0, 1, 2, 12, 13, 1+r.IntN(12)), pick(0, 1, 28, 29, 30, 31, 32, 1+r.IntN(31)),
			pick(0, 23, 24, r.IntN(24)), pick(0, 59, 60, r.IntN(60)), pick(0, 59, 60, r.IntN(60)))
		if digits := r.IntN(11); digits > 0 {
			frac := []byte(".")
			for range digits {
				frac = append(frac, byte('0'+pick(0, 0, r.IntN(10))))
			}
			s += string(frac)
		}
		s += []string{"Z", "", "+01:00", "z", "-00:00", "Z"}[r.IntN(6)]
		for _, ntz := range []bool{false, true} {
			decided, ok := checkUTCMicros(t, s, ntz)
			if decided {
				sure++
			}
			if ok {
				accepted++
			}
		}
	}
	if sure < 50000 || accepted < 10000 || sure-accepted < 10000 {
		t.Fatalf("%d texts read by the fast path, %d of them accepted: the generator misses a side", sure, accepted)
	}
}

// timeParseMicros is what (*jFast).text read a timestamp as before utcMicros: time.Parse
// and its range checks; ok false where it refuses the text.
func timeParseMicros(raw string, ntz bool) (int64, bool) {
	layout := time.RFC3339Nano
	if ntz {
		layout = "2006-01-02T15:04:05.999999999"
	}
	ts, err := time.Parse(layout, raw)
	if err != nil || ts.Year() < 1 || ts.UTC().Year() > 9999 || ts.Nanosecond()%1000 != 0 {
		return 0, false
	}
	return ts.UnixMicro(), true
}

// checkUTCMicros fails t where utcMicros decides in otherwise than timeParseMicros; it
// reports whether the fast path decided (sure) and whether it accepted in.
func checkUTCMicros(t *testing.T, in string, ntz bool) (sure, ok bool) {
	t.Helper()
	us, ok, sure := utcMicros([]byte(in), ntz)
	if !sure {
		return false, false
	}
	if wus, wok := timeParseMicros(in, ntz); ok != wok || ok && us != wus {
		t.Fatalf("utcMicros(%q, ntz %v) = %d, %v; time.Parse gives %d, %v", in, ntz, us, ok, wus, wok)
	}
	return true, ok
}
