package decode

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
)

// An Avro string (string, uuid; a column value, a list item, a map key or value, a
// union's string branch) is UTF-8 (Avro specification, "Primitive Types"): one that is
// not would make the data file unreadable to readers that check it (delta-rs: "encountered
// non UTF-8 data"), so the record is refused as decode_error at the field, with nothing
// appended, inline and compiled, dense and levelled alike. Bytes values (b, f) may hold
// any bytes.
func TestDecodeInvalidUTF8(t *testing.T) {
	ws := mustWriter(t, 1, byteFormSchema)
	pq := mustParquet(t, ws.Delta, "none")
	bad := "ok\xff\xfe"
	cases := []struct {
		field string
		set   func(m map[string]any)
	}{
		{"s", func(m map[string]any) { m["s"] = bad }},
		{"ns", func(m map[string]any) { m["ns"] = map[string]any{"string": bad} }},
		{"sn", func(m map[string]any) { m["sn"] = map[string]any{"string": "\xc3"} }}, // a cut 2-byte sequence
		{"u", func(m map[string]any) { m["u"] = "\xed\xa0\x80" }},                     // a UTF-16 surrogate
		{"m.member1", func(m map[string]any) { m["m"] = map[string]any{"string": bad} }},
		{"tags[]", func(m map[string]any) { m["tags"] = []any{"fine", bad} }},
		{"kv{}", func(m map[string]any) { m["kv"] = map[string]any{bad: "v"} }},
		{"kv{}", func(m map[string]any) { m["kv"] = map[string]any{"k": bad} }},
	}
	for _, inline := range []bool{true, false} {
		d, err := compile(ws, ws.Delta, "none", pq, inline)
		if err != nil {
			t.Fatal(err)
		}
		for ci, c := range cases {
			name := fmt.Sprintf("inline %v case %d (%s)", inline, ci, c.field)
			cols := newColumns(d, nil)
			var arena Arena
			good := byteFormRecord(4)
			good["b"], good["f"] = []byte("\xff\xfe"), [4]byte{0xff, 0xc3, 0, 0x80} // bytes: any bytes
			if err := d.DecodeColumns(&arena, mustMarshal(t, ws.Avro, good), cols); err != nil {
				t.Fatalf("%s: good record: %v", name, err)
			}
			before := renderAll(materialise(cols))
			m := byteFormRecord(4)
			c.set(m)
			p := mustMarshal(t, ws.Avro, m)
			for _, levelled := range []bool{false, true} {
				var err error
				if levelled {
					_, err = d.Decode(p, nil)
				} else {
					err = d.DecodeColumns(&arena, p, cols)
				}
				if ReasonOf(err) != ReasonDecodeError || FieldOf(err) != c.field {
					t.Errorf("%s levelled %v: err %v (reason %q, field %q); want decode_error at %s", name, levelled, err, ReasonOf(err), FieldOf(err), c.field)
				}
			}
			if after := renderAll(materialise(cols)); !reflect.DeepEqual(after, before) {
				t.Errorf("%s: the failed record changed the columns:\n%v\nwant\n%v", name, after, before)
			}
		}
	}
}

// validText is utf8.Valid: every string of up to 72 bytes drawn from ASCII, continuation
// and lead bytes, with the first non-ASCII byte at every offset (before, inside and
// after the word steps and the overlapping tail word, and past the 64 bytes from which
// validText is utf8.Valid itself).
func TestValidTextIsUTF8Valid(t *testing.T) {
	pieces := []string{"a", "\x7f", "é", "€", "😀", "\xff", "\xc3", "\xe2\x82", "\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		var b []byte
		for n := r.IntN(73); len(b) < n; {
			if r.IntN(3) == 0 {
				b = append(b, pieces[r.IntN(len(pieces))]...)
			} else {
				b = append(b, byte('a'+r.IntN(26)))
			}
		}
		if got, want := validText(b), utf8.Valid(b); got != want {
			t.Fatalf("validText(%q) = %v, utf8.Valid %v", b, got, want)
		}
	}
}

// A record that fails after it turned a string column levelled (ns and sn null, then
// the body cut short at last, after every other byte value was appended) is rolled back
// exactly: every column holds the values before it (ns and sn, levelled now, alias their
// kept Bytes, which a later record's values must not overwrite), the dense columns' Bytes
// and end offsets are those of the good records only; and so after each later record,
// inline and compiled, copying and aliasing.
func TestDecodeColumnsRollbackAfterTurn(t *testing.T) {
	ws := mustWriter(t, 1, byteFormSchema)
	pq := mustParquet(t, ws.Delta, "none")
	var payloads [][]byte
	for i, src := range []int{0, 3, 2, 4, 3, 5} {
		p := mustMarshal(t, ws.Avro, byteFormRecord(src))
		if i == 1 || i == 4 { // record 3 has ns and sn null: cut, it fails after the turn
			p = p[:len(p)-1]
		}
		payloads = append(payloads, p)
	}
	for _, inline := range []bool{true, false} {
		for _, alias := range []bool{false, true} {
			name := fmt.Sprintf("inline %v alias %v", inline, alias)
			d, err := compile(ws, ws.Delta, "none", pq, inline)
			if err != nil {
				t.Fatal(err)
			}
			var a Arena
			if alias {
				a.AliasPayloads()
			}
			cols := newColumns(d, nil)
			var want [][]parquet.Value
			for i, p := range payloads {
				buf := append([]byte(nil), p...)
				err := d.DecodeColumns(&a, buf, cols)
				if fails := i == 1 || i == 4; fails != (err != nil) || fails && (ReasonOf(err) != ReasonTruncated || FieldOf(err) != "last") {
					t.Fatalf("%s: record %d: %v", name, i, err)
				}
				if err == nil {
					if want, err = d.Decode(p, want); err != nil {
						t.Fatal(err)
					}
				}
				if err := columnsMatch(d, cols, want, false); err != nil {
					t.Fatalf("%s: after record %d: %v", name, i, err)
				}
			}
		}
	}
}
