package decode

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// richPayload is one record of richSchema whose strings depend on i, so that values of
// different records differ.
func richPayload(t testing.TB, ws *WriterSchema, i int) []byte {
	ts := time.UnixMicro(1702771200123456 + int64(i)).UTC()
	s := fmt.Sprintf("string-%d-%s", i, strings.Repeat("x", i%50))
	return mustMarshal(t, ws.Avro, map[string]any{
		"b": i%2 == 0, "i": i, "l": int64(-i), "f": float32(1.5), "d": -2.25, "s": s, "by": []byte(s),
		"fx": [4]byte{1, 2, 3, byte(i)}, "e": "GREEN", "u": s, "dt": ts.Truncate(24 * time.Hour), "tm": time.Second, "tu": time.Microsecond,
		"tsm": ts.Truncate(time.Millisecond), "tsu": ts, "ltsm": ts.Truncate(time.Millisecond), "ltsu": ts,
		"dec9": rat(t, "-123.45"), "dec18": rat(t, "-0.0001"), "dec38": rat(t, fmt.Sprintf("-1234567890123456789%d.0123456789", i%10)),
		"ns": s, "sn": "x", "multi": "m" + s, "nested": map[string]any{"x": 1, "y": s},
		"onested": map[string]any{"t.Inner": map[string]any{"x": 7, "y": nil}},
		"items":   []any{map[string]any{"sku": s, "qty": 1}}, "tags": []any{s, nil},
		"m": map[string]any{"k" + s: map[string]any{"v": 0.5}}, "legacy": nil,
	})
}

// decodeBatch decodes records [from, to) through a into fresh columns.
func decodeBatch(t testing.TB, d *Decoder, ws *WriterSchema, a *Arena, from, to int) [][]parquet.Value {
	t.Helper()
	var cols [][]parquet.Value
	for i := from; i < to; i++ {
		var err error
		if cols, err = d.DecodeWith(a, richPayload(t, ws, i), cols); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	return cols
}

// DecodeWith produces exactly Decode's values, and without Reset an arena never hands the
// same bytes out twice: a batch's values stay intact while later batches are decoded.
func TestArenaWithoutResetKeepsEarlierValues(t *testing.T) {
	ws := mustWriter(t, 1, richSchema)
	d, pq := mustCompile(t, ws, ws.Delta, "none")
	var want1 [][]parquet.Value
	for i := 0; i < 3000; i++ {
		var err error
		if want1, err = d.Decode(richPayload(t, ws, i), want1); err != nil {
			t.Fatal(err)
		}
	}
	var a Arena
	cols1 := decodeBatch(t, d, ws, &a, 0, 3000) // several 64 KiB chunks
	if got, want := renderCols(pq, cols1), renderCols(pq, want1); !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeWith and Decode differ")
	}
	snapshot := renderCols(pq, cols1)
	cols2 := decodeBatch(t, d, ws, &a, 3000, 6000) // no Reset: cols1 is still referenced
	if !reflect.DeepEqual(renderCols(pq, cols1), snapshot) {
		t.Fatal("decoding without Reset changed the values of the previous batch")
	}
	if len(cols2[0]) != 3000 {
		t.Fatalf("second batch has %d rows", len(cols2[0]))
	}
}

// After Reset the arena reuses its chunks: decoding the next batch into reused column
// buffers allocates nothing, and the new values are right. (The previous batch's values
// may now be overwritten: that is the contract of Reset.)
func TestArenaResetReusesMemoryWithoutAllocating(t *testing.T) {
	ws := mustWriter(t, 1, tenFields)
	d, pq := mustCompile(t, ws, ws.Delta, "none")
	payload := tenFieldsPayload(t, ws)
	var a Arena
	cols := make([][]parquet.Value, d.Columns())
	batch := func() {
		for c := range cols {
			cols[c] = cols[c][:0]
		}
		a.Reset()
		for i := 0; i < 4096; i++ {
			var err error
			if cols, err = d.DecodeWith(&a, payload, cols); err != nil {
				t.Fatal(err)
			}
		}
	}
	batch() // warm up: column buffers and arena chunks reach their size
	retained := a.Retained()
	if allocs := testing.AllocsPerRun(5, batch); allocs != 0 {
		t.Fatalf("a reused batch allocated %v times, want 0", allocs)
	}
	if a.Retained() != retained {
		t.Fatalf("arena grew from %d to %d bytes on identical batches", retained, a.Retained())
	}
	one, err := d.Decode(payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := renderCols(pq, one)
	got := renderCols(pq, cols)
	for name, vals := range got {
		for i, v := range vals {
			if w := want[name][i%len(want[name])]; v != w {
				t.Fatalf("%s[%d] = %s after reuse, want %s", name, i, v, w)
			}
		}
	}
}

// A failed record is rolled back from the columns and from the arena: earlier values are
// intact, and the next record reuses the failed record's bytes.
func TestArenaRollbackOnError(t *testing.T) {
	w := mustWriter(t, 5, malformedSchema)
	d, pq := mustCompile(t, w, w.Delta, "none")
	valid := buildMalformed(t, nil, 0)
	var a Arena
	cols, err := d.DecodeWith(&a, valid, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := renderCols(pq, cols)
	used := len(a.s.cur)
	// The name and the tag are copied, then the record fails at its last field.
	for _, bad := range [][]byte{buildMalformed(t, nil, 1), buildMalformed(t, map[string]string{"e": "06"}, 0)} {
		if cols, err = d.DecodeWith(&a, bad, cols); err == nil {
			t.Fatal("malformed record accepted")
		}
		if !reflect.DeepEqual(renderCols(pq, cols), before) {
			t.Fatalf("columns not rolled back: %v", renderCols(pq, cols))
		}
		if len(a.s.cur) != used {
			t.Fatalf("arena holds %d bytes after a failed record, want %d", len(a.s.cur), used)
		}
	}
	if cols, err = d.DecodeWith(&a, valid, cols); err != nil {
		t.Fatal(err)
	}
	lc, _ := pq.Lookup("name")
	for i, v := range cols[lc.ColumnIndex] {
		if got := render(v); got != `0/1:"ab"` {
			t.Fatalf("name[%d] = %s", i, got)
		}
	}
}

// An arena that is never reset keeps at most its retention limit of chunks, and chunks
// beyond it are never reused, even after a Reset.
func TestArenaRetentionIsBounded(t *testing.T) {
	ws := mustWriter(t, 1, richSchema)
	d, pq := mustCompile(t, ws, ws.Delta, "none")
	a := Arena{s: state{retain: 2}}
	cols1 := decodeBatch(t, d, ws, &a, 0, 3000)
	if a.Retained() != 2*slabChunk {
		t.Fatalf("retained %d bytes, want %d", a.Retained(), 2*slabChunk)
	}
	snapshot := renderCols(pq, cols1)
	// After Reset only the two retained chunks may be overwritten: decode less than that
	// and check that the values in the unretained chunks are intact.
	a.Reset()
	_ = decodeBatch(t, d, ws, &a, 3000, 3010)
	cur := renderCols(pq, cols1)
	changed := 0
	for name, vals := range cur {
		for i, v := range vals {
			if v != snapshot[name][i] {
				changed++
			}
		}
	}
	if changed == 0 {
		t.Fatal("Reset did not reuse the retained chunks")
	}
	// Only values in the first chunk can have changed (10 records fit in it); those of
	// the records decoded last are beyond it.
	lc, _ := pq.Lookup("s")
	if got, want := render(cols1[lc.ColumnIndex][2999]), snapshot["s"][2999]; got != want {
		t.Fatalf("value in an unretained chunk changed: %s, want %s", got, want)
	}
}

// The zero Arena, a nil Arena and values of 16 KiB or more (their own allocation).
func TestArenaNilAndLargeValues(t *testing.T) {
	w := mustWriter(t, 5, malformedSchema)
	d, pq := mustCompile(t, w, w.Delta, "none")
	big := strings.Repeat("z", 20<<10)
	lenHex := func(n int) string {
		b := binary.AppendVarint(nil, int64(n))
		return fmt.Sprintf("%x", b)
	}
	p := buildMalformed(t, map[string]string{"name": lenHex(len(big)) + fmt.Sprintf("%x", big)}, 0)
	cols, err := d.DecodeWith(nil, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	var a Arena
	cols2, err := d.DecodeWith(&a, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Reset()
	if _, err := d.DecodeWith(&a, p, nil); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(renderCols(pq, cols), renderCols(pq, cols2)) {
		t.Fatal("nil arena and arena differ")
	}
	lc, _ := pq.Lookup("name")
	if got := string(cols2[lc.ColumnIndex][0].ByteArray()); got != big {
		t.Fatalf("large value changed after Reset (len %d)", len(got))
	}
}

// uvarintSlow (the wide path and the byte-by-byte path) agrees with a reference decoder on
// every length, at the end of the input and away from it.
func TestUvarintPaths(t *testing.T) {
	ref := func(b []byte) (uint64, int, bool) { // value, bytes, ok
		var v uint64
		for i := 0; i < len(b) && i < maxVarintLen; i++ {
			c := b[i]
			if i == 9 && c > 1 {
				return 0, 0, false
			}
			v |= uint64(c&0x7f) << (7 * i)
			if c < 0x80 {
				return v, i + 1, true
			}
		}
		return 0, 0, false
	}
	r := rand.New(rand.NewPCG(1, 2))
	check := func(b []byte) {
		t.Helper()
		for _, pad := range []int{0, 12} {
			buf := append(append([]byte(nil), b...), make([]byte, pad)...)
			s := &state{buf: buf}
			v, err := s.uvarint()
			// With padding, bytes after b may complete a varint b leaves open.
			wv, wn, ok := ref(buf)
			if ok != (err == nil) || (ok && (v != wv || s.pos != wn)) {
				t.Fatalf("% x (pad %d): got %d, pos %d, err %v; want %d, %d, ok %v", b, pad, v, s.pos, err, wv, wn, ok)
			}
		}
	}
	for _, v := range []uint64{0, 1, 127, 128, 1<<14 - 1, 1 << 14, 1<<56 - 1, 1 << 56, 1<<63 - 1, 1 << 63, ^uint64(0)} {
		check(binary.AppendUvarint(nil, v))
	}
	for i := 0; i < 200000; i++ {
		n := 1 + r.IntN(11)
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(r.Uint32())
			if j < n-1 && r.IntN(4) > 0 {
				b[j] |= 0x80
			}
		}
		check(b)
	}
}

// Detached counts the bytes handed out outside the kept chunks since the last Reset: 0
// while every value fits the retained chunks; a value of 16 KiB or more counts its
// length, a chunk beyond the retention limit its 64 KiB; Reset starts again at 0.
func TestArenaDetached(t *testing.T) {
	ws := mustWriter(t, 1, richSchema)
	d, _ := mustCompile(t, ws, ws.Delta, "none")
	a := Arena{s: state{retain: 2}}
	_ = decodeBatch(t, d, ws, &a, 0, 10)
	if got := a.Detached(); got != 0 {
		t.Fatalf("Detached after 10 small records = %d, want 0 (one chunk)", got)
	}
	_ = decodeBatch(t, d, ws, &a, 10, 3000)
	if got, chunks := a.Detached(), a.Retained()/slabChunk; chunks != 2 || got == 0 || got%slabChunk != 0 {
		t.Fatalf("Detached after 3000 records = %d with %d chunks kept, want whole chunks beyond the 2 kept", got, chunks)
	}
	a.Reset()
	if got := a.Detached(); got != 0 {
		t.Fatalf("Detached after Reset = %d, want 0", got)
	}

	w := mustWriter(t, 5, malformedSchema)
	dl, _ := mustCompile(t, w, w.Delta, "none")
	big := strings.Repeat("z", 20<<10)
	p := buildMalformed(t, map[string]string{"name": fmt.Sprintf("%x", binary.AppendVarint(nil, int64(len(big)))) + fmt.Sprintf("%x", big)}, 0)
	var b Arena
	if _, err := dl.DecodeWith(&b, p, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.Detached(); got != len(big) {
		t.Fatalf("Detached after one %d-byte string = %d, want its length", len(big), got)
	}
}

// Under AliasPayloads string, bytes, fixed and map-key values are the payload's bytes (no
// copy: changing the payload after DecodeWith changes them), while enum symbols and wide
// decimals (computed) are not; without it (Decode, and DecodeWith on a copying arena) no
// value changes with the payload.
func TestArenaAliasPayloadsSharesThePayload(t *testing.T) {
	ws := mustWriter(t, 1, richSchema)
	d, pq := mustCompile(t, ws, ws.Delta, "none")
	col := func(path ...string) int {
		t.Helper()
		lc, ok := pq.Lookup(path...)
		if !ok {
			t.Fatalf("no column %v", path)
		}
		return lc.ColumnIndex
	}
	aliased := []int{col("s"), col("by"), col("fx"), col("u"), col("m", "key_value", "key")}
	computed := []int{col("e"), col("dec38")}
	for _, alias := range []bool{false, true} {
		for _, useDecode := range []bool{false, true} {
			if alias && useDecode {
				continue // Decode never aliases
			}
			payload := richPayload(t, ws, 7)
			var a Arena
			if alias {
				a.AliasPayloads()
			}
			var cols [][]parquet.Value
			var err error
			if useDecode {
				cols, err = d.Decode(payload, nil)
			} else {
				cols, err = d.DecodeWith(&a, payload, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			before := renderAll(cols)
			if alias {
				// Only the 16-byte decimal(38) went to the arena: no copy of the record.
				if used := len(a.s.cur); used != 16 {
					t.Fatalf("aliasing arena holds %d bytes after one record, want 16 (the decimal(38) only)", used)
				}
			}
			for i := range payload {
				payload[i] ^= 0xff
			}
			after := renderAll(cols)
			for _, c := range aliased {
				if changed := !reflect.DeepEqual(before[c], after[c]); changed != alias {
					t.Errorf("alias %v, Decode %v: column %v changed with the payload: %v (%v -> %v)", alias, useDecode, pq.Columns()[c], changed, before[c], after[c])
				}
			}
			for _, c := range computed {
				if !reflect.DeepEqual(before[c], after[c]) {
					t.Errorf("alias %v: computed column %v changed with the payload: %v -> %v", alias, pq.Columns()[c], before[c], after[c])
				}
			}
			if !alias && !reflect.DeepEqual(before, after) {
				t.Errorf("Decode %v: copying decode changed with the payload", useDecode)
			}
		}
	}
}

// Under AliasPayloads an empty string is still emptyBytes (never nil, not null), records
// of 16 KiB or more take no arena bytes and detach nothing, a failed record leaves nothing
// behind (columns and arena), and Reset keeps the setting.
func TestArenaAliasPayloadsEmptyLargeAndRollback(t *testing.T) {
	w := mustWriter(t, 5, malformedSchema)
	d, pq := mustCompile(t, w, w.Delta, "none")
	lc, _ := pq.Lookup("name")
	name := lc.ColumnIndex
	var a Arena
	a.AliasPayloads()
	empty := buildMalformed(t, map[string]string{"name": "00"}, 0)
	cols, err := d.DecodeWith(&a, empty, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := cols[name][0]; v.IsNull() || v.ByteArray() == nil || len(v.ByteArray()) != 0 {
		t.Fatalf("empty name decoded as %s (nil %v), want a non-null empty value", render(v), v.ByteArray() == nil)
	}
	big := strings.Repeat("z", 20<<10)
	lenHex := fmt.Sprintf("%x", binary.AppendVarint(nil, int64(len(big))))
	large := buildMalformed(t, map[string]string{"name": lenHex + fmt.Sprintf("%x", big)}, 0)
	if cols, err = d.DecodeWith(&a, large, cols); err != nil {
		t.Fatal(err)
	}
	if got := string(cols[name][1].ByteArray()); got != big || a.Detached() != 0 || len(a.s.cur) != 0 {
		t.Fatalf("large value: %d bytes (want %d), detached %d, arena bytes %d; want the payload's bytes, no arena bytes", len(got), len(big), a.Detached(), len(a.s.cur))
	}
	before := renderCols(pq, cols)
	used, next := len(a.s.cur), a.s.next
	for _, bad := range [][]byte{buildMalformed(t, nil, 1), buildMalformed(t, map[string]string{"e": "06"}, 0)} {
		if cols, err = d.DecodeWith(&a, bad, cols); err == nil {
			t.Fatal("malformed record accepted")
		}
		if !reflect.DeepEqual(renderCols(pq, cols), before) {
			t.Fatalf("columns not rolled back: %v", renderCols(pq, cols))
		}
		if len(a.s.cur) != used || a.s.next != next {
			t.Fatalf("arena at %d bytes / chunk %d after a failed record, want %d / %d", len(a.s.cur), a.s.next, used, next)
		}
	}
	a.Reset()
	if !a.AliasesPayloads() {
		t.Fatal("Reset dropped AliasPayloads")
	}
}
