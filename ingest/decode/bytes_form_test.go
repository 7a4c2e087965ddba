package decode

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
)

// byteFormSchema has every kind of value the decoder writes to a BYTE_ARRAY leaf: a
// string, [null, string] and [string, null] unions, bytes, a fixed into binary, an enum,
// a uuid, a three-branch union (its struct's string member), and the repeated leaves
// (list items, map keys and values) that stay levelled; last is a one-byte long after
// all of them, so that a record cut by one byte fails after its byte values were
// appended.
const byteFormSchema = `{"type":"record","name":"S","fields":[
	{"name":"s","type":"string"},
	{"name":"ns","type":["null","string"]},
	{"name":"sn","type":["string","null"]},
	{"name":"b","type":"bytes"},
	{"name":"f","type":{"type":"fixed","name":"F4","size":4}},
	{"name":"e","type":{"type":"enum","name":"E","symbols":["A","BB","CCC"]}},
	{"name":"u","type":{"type":"string","logicalType":"uuid"}},
	{"name":"m","type":["null","long","string"]},
	{"name":"tags","type":{"type":"array","items":"string"}},
	{"name":"kv","type":{"type":"map","values":"string"}},
	{"name":"last","type":"long"}]}`

// byteFormRecord is record i of byteFormSchema: s is empty for i = 0 and 17 KiB (a
// record over 16 KiB, not copied whole) for i = 1 and 5; ns and sn are null for i = 3;
// m is a long for odd i, else a string.
func byteFormRecord(i int) map[string]any {
	s := fmt.Sprintf("s%d", i)
	switch i {
	case 0:
		s = ""
	case 1, 5:
		s = strings.Repeat(string(rune('a'+i)), 17<<10)
	}
	var ns, sn any = map[string]any{"string": fmt.Sprintf("n%d", i)}, map[string]any{"string": fmt.Sprintf("sn%d", i)}
	if i == 3 {
		ns, sn = nil, nil
	}
	var m any = map[string]any{"string": fmt.Sprintf("m%d", i)}
	if i%2 == 1 {
		m = map[string]any{"long": int64(i)}
	}
	return map[string]any{
		"s": s, "ns": ns, "sn": sn, "b": []byte{byte(i), 0, 0xff}, "f": [4]byte{byte(i), 1, 2, 3},
		"e": []string{"A", "BB", "CCC"}[i%3], "u": fmt.Sprintf("00000000-0000-0000-0000-%012d", i), "m": m,
		"tags": []any{fmt.Sprintf("t%d", i), ""}, "kv": map[string]any{fmt.Sprintf("k%d", i): "v"}, "last": int64(-3),
	}
}

// DecodeColumns appends every kind of BYTE_ARRAY value in the byte form while the column
// is dense, through the inline steps and the compiled closures, copying and aliasing:
// an empty string, bytes, a fixed, an enum symbol, a uuid, records over 16 KiB, a failed
// record cut back after its strings were appended (their bytes cut from Bytes), a null
// turning [null, string] and [string, null] levelled after dense values (which then alias
// the column's kept Bytes) and later set values appended levelled. After every record the
// columns equal Decode's (columnsMatch: values, and a dense column's Bytes and end offsets
// exactly); at the end the dense set, s's Bytes and offsets, and ns's levelled values are
// the exact expected ones, and overwriting the payloads changes no value of a dense
// column (the byte form holds copies; under copying, no value at all).
func TestDecodeColumnsByteForm(t *testing.T) {
	ws := mustWriter(t, 1, byteFormSchema)
	table := ws.Delta
	pq := mustParquet(t, table, "none")
	var payloads [][]byte
	for i := range 6 {
		p := mustMarshal(t, ws.Avro, byteFormRecord(i))
		if i == 2 {
			p = p[:len(p)-1] // fails at last, after every byte value was appended
		}
		payloads = append(payloads, p)
	}
	if n := len(payloads[1]); n < 16<<10 {
		t.Fatalf("record 1 is %d bytes, want over 16 KiB", n)
	}
	leafIdx := map[string]int{}
	for i, p := range pq.Columns() {
		leafIdx[strings.Join(p, ".")] = i
	}
	for _, inline := range []bool{true, false} {
		for _, alias := range []bool{false, true} {
			name := fmt.Sprintf("inline %v alias %v", inline, alias)
			d, err := compile(ws, table, "none", pq, inline)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := compile(ws, table, "none", pq, false)
			if err != nil {
				t.Fatal(err)
			}
			var a Arena
			if alias {
				a.AliasPayloads()
			}
			bufs := make([][]byte, len(payloads)) // each record in its own buffer, overwritten below
			cols := newColumns(d, nil)
			var want [][]parquet.Value
			for i, p := range payloads {
				bufs[i] = append([]byte(nil), p...)
				var wantErr error
				want, wantErr = ref.Decode(p, want)
				err := d.DecodeColumns(&a, bufs[i], cols)
				if (err != nil) != (i == 2) || (wantErr != nil) != (i == 2) {
					t.Fatalf("%s: record %d: DecodeColumns %v, Decode %v", name, i, err, wantErr)
				}
				if err != nil && (err.Error() != wantErr.Error() || ReasonOf(err) != ReasonTruncated || FieldOf(err) != "last") {
					t.Fatalf("%s: record %d: DecodeColumns %v (reason %v, field %q), Decode %v; want truncated at last", name, i, err, ReasonOf(err), FieldOf(err), wantErr)
				}
				if err := columnsMatch(d, cols, want, err == nil); err != nil {
					t.Fatalf("%s: record %d: %v", name, i, err)
				}
			}
			dense := map[string]bool{}
			for c, p := range pq.Columns() {
				if cols[c].IsDense() {
					dense[strings.Join(p, ".")] = true
				}
			}
			wantDense := map[string]bool{"s": true, "b": true, "f": true, "e": true, "u": true, "last": true}
			if !reflect.DeepEqual(dense, wantDense) {
				t.Fatalf("%s: dense columns %v, want %v", name, dense, wantDense)
			}
			s := &cols[leafIdx["s"]]
			big1, big5 := strings.Repeat("b", 17<<10), strings.Repeat("f", 17<<10)
			wantS := "" + big1 + "s3" + "s4" + big5
			wantEnds := []uint64{0, 17 << 10, 17<<10 + 2, 17<<10 + 4, 34<<10 + 4}
			if string(s.Bytes) != wantS || !reflect.DeepEqual(s.Dense, wantEnds) || s.ByteSize() != len(wantS) {
				t.Fatalf("%s: s holds %d bytes, ends %v, ByteSize %d; want %d bytes, ends %v", name, len(s.Bytes), s.Dense, s.ByteSize(), len(wantS), wantEnds)
			}
			if v := s.At(0); v.IsNull() || v.ByteArray() == nil || len(v.ByteArray()) != 0 {
				t.Fatalf("%s: s row 0 is %s (nil %v), want a set, non-nil empty value", name, render(v), v.ByteArray() == nil)
			}
			e := &cols[leafIdx["e"]]
			if string(e.Bytes) != "ABBABBCCC" || !reflect.DeepEqual(e.Dense, []uint64{1, 3, 4, 6, 9}) { // records 0 1 3 4 5
				t.Fatalf("%s: e holds %q, ends %v; want \"ABBABBCCC\", [1 3 4 6 9]", name, e.Bytes, e.Dense)
			}
			wantNs := []string{`0/1:"n0"`, `0/1:"n1"`, `0/0:null`, `0/1:"n4"`, `0/1:"n5"`}
			if got := renderAll(materialise(cols))[leafIdx["ns"]]; !reflect.DeepEqual(got, wantNs) {
				t.Fatalf("%s: ns %v, want %v", name, got, wantNs)
			}
			snapshot := renderAll(materialise(cols))
			for _, b := range bufs {
				for i := range b {
					b[i] = 0xee
				}
			}
			after := renderAll(materialise(cols))
			for c := range cols {
				if (cols[c].IsDense() || !alias) && !reflect.DeepEqual(after[c], snapshot[c]) {
					t.Fatalf("%s: column %v changed when the payloads were overwritten (dense %v): a value aliases a payload", name, pq.Columns()[c], cols[c].IsDense())
				}
			}
		}
	}
}

// A record whose byte values all go to dense columns copies nothing into a copying
// arena (the byte form copies them from the payload into the columns' Bytes): no chunk
// is ever taken. Once a column turned levelled (a null), a record with a value for it is
// copied into the arena exactly once, at that value; a failed record's copy is handed
// back; Decode's levelled path copies every record as before.
func TestDecodeColumnsDenseBytesCopyNothingIntoArena(t *testing.T) {
	ws := mustWriter(t, 1, `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"s","type":"string"},
		{"name":"b","type":"bytes"},{"name":"e","type":{"type":"enum","name":"E","symbols":["X","YY"]}},{"name":"ns","type":["null","string"]}]}`)
	d, pq := mustCompile(t, ws, ws.Delta, "none")
	nsLeaf, _ := column.LeafOf(pq, "ns")
	sl, _ := column.LeafOf(pq, "s")
	rec := func(i int, ns any) []byte {
		return mustMarshal(t, ws.Avro, map[string]any{"id": int64(i), "s": fmt.Sprintf("string %d", i), "b": []byte{byte(i)},
			"e": "YY", "ns": ns})
	}
	var a Arena
	cols := newColumns(d, nil)
	for i := range 1000 {
		if err := d.DecodeColumns(&a, rec(i, map[string]any{"string": "set"}), cols); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.s.cur) != 0 || a.Retained() != 0 || a.Detached() != 0 {
		t.Fatalf("1000 records of dense byte columns: arena handed out %d bytes, retains %d, detached %d; want none", len(a.s.cur), a.Retained(), a.Detached())
	}
	for c := range cols {
		if !cols[c].IsDense() {
			t.Fatalf("column %d is levelled", c)
		}
	}
	if err := d.DecodeColumns(&a, rec(1000, nil), cols); err != nil { // ns turns levelled
		t.Fatal(err)
	}
	if len(a.s.cur) != 0 || cols[nsLeaf.Index].IsDense() {
		t.Fatalf("a null: arena handed out %d bytes (want 0), ns dense %v (want levelled)", len(a.s.cur), cols[nsLeaf.Index].IsDense())
	}
	p := rec(1001, map[string]any{"string": "levelled now"})
	if err := d.DecodeColumns(&a, p, cols); err != nil {
		t.Fatal(err)
	}
	if len(a.s.cur) != len(p) {
		t.Fatalf("a record with a levelled string: arena handed out %d bytes, want the record's %d", len(a.s.cur), len(p))
	}
	bad := append(rec(1002, map[string]any{"string": "x"}), 0) // a trailing byte: fails after ns
	if err := d.DecodeColumns(&a, bad, cols); ReasonOf(err) != ReasonTrailingBytes {
		t.Fatalf("trailing byte: %v", err)
	}
	if len(a.s.cur) != len(p) {
		t.Fatalf("after a failed record: arena handed out %d bytes, want %d (its copy handed back)", len(a.s.cur), len(p))
	}
	if got := string(cols[nsLeaf.Index].At(cols[nsLeaf.Index].Len() - 1).ByteArray()); got != "levelled now" || cols[nsLeaf.Index].Len() != 1002 || cols[sl.Index].Len() != 1002 {
		t.Fatalf("ns last %q, %d rows; s %d rows; want \"levelled now\", 1002, 1002", got, cols[nsLeaf.Index].Len(), cols[sl.Index].Len())
	}
	a.Reset()
	if _, err := d.DecodeWith(&a, p, nil); err != nil {
		t.Fatal(err)
	}
	if len(a.s.cur) != len(p) {
		t.Fatalf("DecodeWith (levelled): arena handed out %d bytes, want the record's %d", len(a.s.cur), len(p))
	}
}
