package decode

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExactFloat64MatchesStrconv checks exactFloat64 against strconv.ParseFloat on fixed
// texts (the bounds of its exact path) and on random JSON numbers of 1 to 20 digits with 0
// to 24 after the point, a third with an exponent: where it reads a text, the same bits;
// and it reads the common ones.
func TestExactFloat64MatchesStrconv(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
		v  float64
	}{
		{"98.25", true, 98.25},
		{"-1234567.89", true, -1234567.89},
		{"0", true, 0},
		{"0.1", true, 0.1},
		{"0.05", true, 0.05},
		{"-0.0", true, math.Copysign(0, -1)},
		{"4503599627370495", true, 4503599627370495}, // 2^52 - 1
		{"4503599627370496", false, 0},               // 2^52: strconv's exact path stops there too
		{"0.0000000000000000000001", true, 1e-22},
		{"0.00000000000000000000001", false, 0}, // 10^-23 is not exact
		{"1e3", true, 1000},
		{"1.5E-2", true, 0.015},
		{"-1.23456789e+06", true, -1234567.89},
		{"0e999", true, 0},
		{"-0.0e-999", true, math.Copysign(0, -1)},
		{"1e22", true, 1e22},
		{"1e37", true, 1e37},
		{"1e38", false, 0},
		{"1000000000000000e22", true, 1e37},
		{"10000000000000000e21", false, 0},
		{"1e-22", true, 1e-22},
		{"1e-23", false, 0},
		{"12.5e-21", true, 12.5e-21},
		{"1e", false, 0},
		{"1e+", false, 0},
		{"123456789012345678", false, 0},
		{"0.00000000000000000000000000000000000000000001", false, 0},
		{"", false, 0},
		{"-", false, 0},
	} {
		v, ok := exactFloat64([]byte(c.in))
		if ok != c.ok || ok && math.Float64bits(v) != math.Float64bits(c.v) {
			t.Errorf("exactFloat64(%q) = %v, %v; want %v, %v", c.in, v, ok, c.v, c.ok)
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	read := 0
	for range 300000 {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteByte('-')
		}
		whole := 1 + r.IntN(20)
		b.WriteByte(byte('1' + r.IntN(9)))
		if r.IntN(8) == 0 {
			b.Reset()
			b.WriteByte('0')
			whole = 1
		}
		for range whole - 1 {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		if fr := r.IntN(25); fr > 0 {
			b.WriteByte('.')
			for range fr {
				b.WriteByte(byte('0' + []int{0, 9, r.IntN(10)}[r.IntN(3)]))
			}
		}
		if r.IntN(3) == 0 {
			b.WriteString([]string{"e", "E", "e+", "e-", "E-"}[r.IntN(5)])
			b.WriteString(strconv.Itoa([]int{0, 1, 6, 15, 22, 23, 37, 38, r.IntN(400)}[r.IntN(9)]))
		}
		s := b.String()
		want, err := strconv.ParseFloat(s, 64)
		v, ok := exactFloat64([]byte(s))
		if err != nil { // out of range
			if ok {
				t.Fatalf("exactFloat64(%q) = %v; strconv: %v", s, v, err)
			}
			continue
		}
		if ok {
			read++
			if math.Float64bits(v) != math.Float64bits(want) {
				t.Fatalf("exactFloat64(%q) = %v (%#x), strconv %v (%#x)", s, v, math.Float64bits(v), want, math.Float64bits(want))
			}
		}
	}
	if read < 50000 {
		t.Fatalf("the exact path read %d of 300000 numbers: the generator misses it", read)
	}
}

// TestDaysFromCivil checks daysFromCivil and daysIn against the time package on every day
// of the years 1 to 9999.
func TestDaysFromCivil(t *testing.T) {
	for day := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC); day.Year() < 10000; day = day.AddDate(0, 0, 1) {
		y, mo, d := day.Date()
		if got, want := daysFromCivil(y, int(mo), d), day.Unix()/86400; got != want {
			t.Fatalf("daysFromCivil(%d, %d, %d) = %d, want %d", y, mo, d, got, want)
		}
		if last := day.AddDate(0, 0, 1).Day() == 1; last && daysIn(int(mo), y) != d {
			t.Fatalf("daysIn(%d, %d) = %d, want %d", mo, y, daysIn(int(mo), y), d)
		}
	}
}

// TestJSONKeyNamedNext checks the one pass's match of the key writers put next without
// scanning it, against the two-pass transcoder: names that are prefixes of the key, keys
// that are prefixes of the name, escaped keys, keys out of order, and names the match must
// leave to the scan (a quote, a backslash, a control byte, invalid UTF-8), whose text in
// a document is not the name's bytes.
func TestJSONKeyNamedNext(t *testing.T) {
	long := &jNode{kind: jLong, nullable: true}
	top := &jNode{kind: jStruct, fields: []jField{{"id", long}, {"idx", long}, {"é", long}, {`a"b`, long}, {`c\d`, long}, {"e\x01", long}, {"z\xff", long}}}
	top.index()
	if want := []bool{true, true, true, false, false, false, false}; fmt.Sprint(top.plain) != fmt.Sprint(want) {
		t.Fatalf("plain %v, want %v", top.plain, want)
	}
	jb := &jsonBody{top: top}
	for _, c := range []struct {
		doc  string
		fast bool // the one pass takes it
		want string
	}{
		{`{"id": 1, "idx": 2, "é": 3}`, true, "02020204020600000000"},
		{`{"idx": 2, "id": 1}`, true, "020202040000000000"},
		{`{"id": 1, "id": 2}`, false, ""},                  // a repeated key
		{`{"id": 1, "idxx": 2}`, true, "0202000000000000"}, // not a field: a top-level key dropped
		{`{"i": 1}`, true, "00000000000000"},               // a prefix of the name: dropped too
		{`{"\u0069d": 1}`, false, "0202000000000000"},      // an escape: the two passes read "id"
		{`{"id": 1, "idx": 2, "é": 3, "a\"b": 4}`, false, "0202020402060208000000"},
		{`{"id": 1, "idx": 2, "é": 3, "a"b": 4}`, false, ""}, // invalid JSON, the name's bytes
		{`{"id": 1, "idx": 2, "é": 3, "a\"b": 4, "c\\d": 5}`, false, "0202020402060208020a0000"},
		{`{"id": 1, "idx": 2, "é": 3, "a\"b": 4, "c\d": 5}`, false, ""}, // \d is no escape
		{"{\"id\": 1, \"idx\": 2, \"é\": 3, \"a\\\"b\": 4, \"c\\\\d\": 5, \"e\x01\": 6}", false, ""},
		{"{\"z\xff\": 7}", false, ""}, // invalid UTF-8
	} {
		want, werr := jb.slowAvro(nil, []byte(c.doc))
		got, _, ok := fastJSON(nil, []byte(c.doc), top, false, false)
		if ok != c.fast || ok && !bytes.Equal(got, want) {
			t.Errorf("document %q: one pass %x, %v; two passes %x, %v", c.doc, got, ok, want, werr)
		}
		if (werr == nil) != (c.want != "") || werr == nil && fmt.Sprintf("%x", want) != c.want {
			t.Errorf("document %q: two passes %x, %v; want %s", c.doc, want, werr, c.want)
		}
	}
}

// TestJSONMemoChunks checks the memo's chunks: entries across several chunks and one
// larger than a chunk are taken back exactly, in order and past an entry never taken;
// once all are taken, the next batch fills the same chunks again and the large one is
// dropped.
func TestJSONMemoChunks(t *testing.T) {
	var m jMemo
	jb := &jsonBody{}
	doc := func(i, n int) []byte { return []byte(fmt.Sprintf("%08d%s", i, strings.Repeat("d", n))) }
	out := func(i, n int) []byte { return []byte(fmt.Sprintf("%08d%s", i, strings.Repeat("o", n))) }
	sizes := func(i int) (int, int) {
		if i == 700 {
			return memoChunk, 100 // larger than a chunk, with its transcoding
		}
		return 3000 + i%7, 2000 + i%5
	}
	for round := range 2 {
		for i := range 1000 {
			dn, on := sizes(i)
			m.put(jb, doc(i, dn), out(i, on), nil)
		}
		if round == 0 && len(m.chunks) < 5 {
			t.Fatalf("%d chunks for 5 MB", len(m.chunks))
		}
		chunks := len(m.chunks)
		for i := range 1000 {
			if i == 500 {
				continue // routed elsewhere: the next take passes it
			}
			dn, on := sizes(i)
			got, ok := m.take(jb, []byte("x"), doc(i, dn))
			if !ok || !bytes.Equal(got, append([]byte("x"), out(i, on)...)) {
				t.Fatalf("round %d: take %d: %v, %d bytes", round, i, ok, len(got))
			}
		}
		if m.head != len(m.entries) {
			t.Fatalf("round %d: head %d of %d", round, m.head, len(m.entries))
		}
		if _, ok := m.take(jb, nil, doc(1, 3001)); ok {
			t.Fatal("a taken entry was taken again")
		}
		if round == 1 && len(m.chunks) != chunks {
			t.Fatalf("the second batch added chunks: %d, then %d", chunks, len(m.chunks))
		}
	}
	m.put(jb, []byte("a"), []byte("b"), nil)
	for i, c := range m.chunks {
		if cap(c) > memoChunk {
			t.Fatalf("chunk %d of %d bytes kept past the batch", i, cap(c))
		}
	}
}

// TestJSONKeyOrderLearned checks the one pass's guesses of the next key: after a document
// whose keys come in another order than the fields', succ holds that order; documents in
// two orders decoded by concurrent goroutines (which overwrite each other's guesses) give
// the two-pass transcoder's bytes.
func TestJSONKeyOrderLearned(t *testing.T) {
	long := &jNode{kind: jLong, nullable: true}
	top := &jNode{kind: jStruct, fields: []jField{{"a", long}, {"b", long}, {"c", long}, {"d", long}}}
	top.index()
	jb := &jsonBody{top: top}
	if _, _, ok := fastJSON(nil, []byte(`{"c": 3, "a": 1, "d": 4, "b": 2}`), top, false, false); !ok {
		t.Fatal("the one pass gave up")
	}
	var got []int32
	for i := range top.succ {
		got = append(got, top.succ[i].Load())
	}
	// Before the first key: c (2); after a: d (3); after b: its initial guess (2, never
	// seen followed); after c: a (0); after d: b (1).
	if fmt.Sprint(got) != "[2 3 2 0 1]" {
		t.Fatalf("succ %v, want [2 3 2 0 1]", got)
	}
	docs := []string{`{"c": 3, "a": 1, "d": 4, "b": 2}`, `{"b": 5, "d": 6, "a": 7}`, `{"a": 1, "b": 2, "c": 3, "d": 4}`}
	var wants [][]byte
	for _, d := range docs {
		w, err := jb.slowAvro(nil, []byte(d))
		if err != nil {
			t.Fatal(err)
		}
		wants = append(wants, w)
	}
	errs := make(chan error, 3)
	for g := range 3 {
		go func() {
			for k := range 2000 {
				d := (g + k) % len(docs)
				out, _, ok := fastJSON(nil, []byte(docs[d]), top, false, false)
				if !ok || !bytes.Equal(out, wants[d]) {
					errs <- fmt.Errorf("document %s: %x, %v; want %x", docs[d], out, ok, wants[d])
					return
				}
			}
			errs <- nil
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
