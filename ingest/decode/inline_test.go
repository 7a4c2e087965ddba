package decode

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter"
)

// sameValues reports the first difference between two decoded column sets: kinds, levels,
// column indexes, nullness and value bytes (pointers differ between copies).
func sameValues(a, b [][]parquet.Value) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d columns, want %d", len(a), len(b))
	}
	for c := range a {
		if len(a[c]) != len(b[c]) {
			return fmt.Errorf("column %d has %d values, want %d", c, len(a[c]), len(b[c]))
		}
		for i, v := range a[c] {
			w := b[c][i]
			if v.Kind() != w.Kind() || v.IsNull() != w.IsNull() || v.RepetitionLevel() != w.RepetitionLevel() ||
				v.DefinitionLevel() != w.DefinitionLevel() || v.Column() != w.Column() ||
				!bytes.Equal(v.Bytes(), w.Bytes()) || (isBytes(v) && (v.ByteArray() == nil) != (w.ByteArray() == nil)) {
				return fmt.Errorf("column %d value %d is %s (column %d), want %s (column %d)", c, i, render(v), v.Column(), render(w), w.Column())
			}
		}
	}
	return nil
}

func isBytes(v parquet.Value) bool {
	return !v.IsNull() && (v.Kind() == parquet.ByteArray || v.Kind() == parquet.FixedLenByteArray)
}

// mutations returns payload, every prefix of it, it with one extra byte, and it with each
// byte replaced by a few values that hit varint, length, index and boolean edges.
func mutations(payload []byte) [][]byte {
	out := [][]byte{payload, append(append([]byte(nil), payload...), 0)}
	for n := 0; n < len(payload); n++ {
		out = append(out, payload[:n])
	}
	for i, b := range payload {
		for _, x := range []byte{0x00, 0x01, 0x02, 0x03, 0x0f, 0x10, 0x11, 0x7f, 0x80, 0xff, b ^ 1, b + 2} {
			if x == b {
				continue
			}
			m := append([]byte(nil), payload...)
			m[i] = x
			out = append(out, m)
		}
	}
	return out
}

// checkInline decodes each payload with d (inline steps) and ref (closures only) into
// columns that already hold one record, and requires the same values and the same error
// (reason, field and message); and so for DecodeColumns with both, into columns holding
// the seed record (columnsAgree: the dense appends of the inline steps and of the
// closures).
func checkInline(t *testing.T, name string, d, ref *Decoder, seed []byte, payloads [][]byte) {
	t.Helper()
	var a Arena
	base, err := d.DecodeWith(&a, seed, nil)
	if err != nil && err != ErrNullRecord {
		t.Fatalf("%s: seed record: %v", name, err)
	}
	baseRef, err := ref.Decode(seed, nil)
	if err != nil && err != ErrNullRecord {
		t.Fatalf("%s: seed record (reference): %v", name, err)
	}
	n, nRef := colLens(base), colLens(baseRef)
	for _, p := range payloads {
		got, gotErr := d.DecodeWith(&a, p, base)
		want, wantErr := ref.Decode(p, baseRef)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Fatalf("%s: payload %x: error %v, want %v", name, p, gotErr, wantErr)
		}
		if gotErr != nil && (ReasonOf(gotErr) != ReasonOf(wantErr) || FieldOf(gotErr) != FieldOf(wantErr)) {
			t.Fatalf("%s: payload %x: error fields differ", name, p)
		}
		if err := sameValues(got, want); err != nil {
			t.Fatalf("%s: payload %x: %v", name, p, err)
		}
		seedCols := make([][]parquet.Value, len(got))
		for c := range got {
			seedCols[c] = got[c][:n[c]]
		}
		for _, dec := range []*Decoder{d, ref} {
			if err := columnsAgree(dec, &a, p, seedCols, want, wantErr); err != nil {
				t.Fatalf("%s: payload %x (inline %v): %v", name, p, dec == d, err)
			}
		}
		for c := range got { // keep the seed record, as the columns of the next payload
			got[c], want[c] = got[c][:n[c]], want[c][:nRef[c]]
		}
		base, baseRef = got, want
	}
}

// The inline steps of runFields (leaves, [null, x] unions, arrays of them, decimals) decode
// exactly like the compiled closures they replace: same values, levels and columns, and
// the same errors with the same field paths, on valid records, every truncation and
// single-byte mutations, for the test schemas and generated ones.
func TestInlineStepsMatchClosures(t *testing.T) {
	type input struct {
		name, schema string
		payload      func(*WriterSchema) []byte
	}
	inputs := []input{
		{"tenFields", tenFields, func(ws *WriterSchema) []byte { return tenFieldsPayload(t, ws) }},
		{"rich", richSchema, func(ws *WriterSchema) []byte { return richPayload(t, ws, 7) }},
		{"malformed", malformedSchema, func(*WriterSchema) []byte { return buildMalformed(t, nil, 0) }},
	}
	n := uint64(300)
	if testing.Short() {
		n = 40
	}
	for seed := uint64(0); seed < n; seed++ {
		text, payload, _ := diffCase(t, seed, 0, nil)
		inputs = append(inputs, input{fmt.Sprintf("seed %d", seed), text, func(*WriterSchema) []byte { return payload }})
	}
	for _, in := range inputs {
		ws, err := ParseWriterSchema(1, in.schema)
		if err != nil {
			t.Fatal(err)
		}
		pq, err := deltawriter.ParquetSchema(ws.Delta, "none")
		if err != nil {
			t.Fatal(err)
		}
		d, err := compile(ws, ws.Delta, "none", pq, true)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := compile(ws, ws.Delta, "none", pq, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range ref.ops {
			if o.kind != opCall {
				t.Fatalf("%s: reference decoder has inline step %d", in.name, o.kind)
			}
		}
		p := in.payload(ws)
		checkInline(t, in.name, d, ref, p, mutations(p))
	}
}

// Every inline step kind is exercised by the schemas above.
func TestInlineStepsCovered(t *testing.T) {
	seen := map[opKind]bool{}
	walk := func(ops []fieldOp) {
		for _, o := range ops {
			seen[o.kind] = true
			if o.item != nil {
				seen[o.item.kind] = true
				if o.item.opt {
					seen[opItemOpt] = true
				}
			}
			if o.opt {
				seen[opFieldOpt] = true
			}
		}
	}
	for _, text := range []string{tenFields, richSchema, malformedSchema} {
		ws := mustWriter(t, 1, text)
		d, _ := mustCompile(t, ws, ws.Delta, "none")
		walk(d.ops)
	}
	for _, k := range []opKind{opLong, opInt32, opMicros, opDays, opDouble, opBool, opString, opEnum, opDecimal, opArray, opCall, opItemOpt, opFieldOpt} {
		if !seen[k] {
			t.Errorf("no test schema has an inline step of kind %d", k)
		}
	}
}

// Pseudo kinds for TestInlineStepsCovered: a [null, x] field and a [null, x] array item.
const (
	opFieldOpt opKind = 100 + iota
	opItemOpt
)

// Values never alias the payload: a small record is copied whole (values are slices of
// the copy), a record of 16 KiB or more is not (values are copied one by one). Both
// decode like the reference, and overwriting the payload afterwards changes no value.
func TestRecordCopyValuesDoNotAliasPayload(t *testing.T) {
	ws := mustWriter(t, 1, tenFields)
	pq, err := deltawriter.ParquetSchema(ws.Delta, "none")
	if err != nil {
		t.Fatal(err)
	}
	d, err := compile(ws, ws.Delta, "none", pq, true)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := compile(ws, ws.Delta, "none", pq, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"n", strings.Repeat("n", 17<<10)} {
		payload := mustMarshal(t, ws.Avro, map[string]any{
			"id": int64(1), "name": name, "score": 0.5, "active": false, "ts": time.UnixMicro(7).UTC(),
			"note": "", "count": 3, "amount": rat(t, "0.01"), "kind": "VIEW", "tags": []any{"a", "", "ccc"},
		})
		var a Arena
		if _, err := d.DecodeWith(&a, payload, nil); err != nil { // the arena has a chunk now
			t.Fatal(err)
		}
		got, err := d.DecodeWith(&a, payload, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.Decode(payload, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameValues(got, want); err != nil {
			t.Fatalf("record of %d bytes: %v", len(payload), err)
		}
		snapshot := renderCols(pq, got)
		for i := range payload {
			payload[i] = 0xee
		}
		if !reflect.DeepEqual(renderCols(pq, got), snapshot) {
			t.Fatalf("record of %d bytes: a decoded value aliases the payload", len(payload))
		}
	}
}
