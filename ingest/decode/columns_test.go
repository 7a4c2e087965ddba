package decode

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// The oracle of DecodeColumns is Decode: decoding into columns Reset from
// column.Leaves(pq) (numeric leaves start dense) and materialising them with At gives
// exactly Decode's levelled values. columnsAgree is called by the corpus helpers
// (decodeCase, decodeWithAgrees of the differential, FuzzDecode, checkInline), so every
// oracle, reported-failure (writer_schemas_test.go), generated, nested and fuzz input
// checks it.

// newColumns returns columns Reset for every leaf of d's Parquet schema (d.leaves,
// column.Leaves(pq)) holding the values of before, appended with Append: a column stays
// dense while its values are set, and turns levelled at its first null.
func newColumns(d *Decoder, before [][]parquet.Value) []column.Column {
	cols := make([]column.Column, d.Columns())
	for i := range cols {
		cols[i].Reset(d.leaves[i])
		if i < len(before) {
			for _, v := range before[i] {
				cols[i].Append(v)
			}
		}
	}
	return cols
}

// materialise returns every entry of cols as At gives it.
func materialise(cols []column.Column) [][]parquet.Value {
	out := make([][]parquet.Value, len(cols))
	for i := range cols {
		out[i] = make([]parquet.Value, cols[i].Len())
		for j := range out[i] {
			out[i][j] = cols[i].At(j)
		}
	}
	return out
}

// hasNull reports whether vals holds a null.
func hasNull(vals []parquet.Value) bool {
	for _, v := range vals {
		if v.IsNull() {
			return true
		}
	}
	return false
}

// columnsMatch reports the first difference between cols (after DecodeColumns) and want
// (Decode's levelled values for the same records): every entry equal (sameValues: kind,
// nullness, levels, column index, value bits and bytes); every present value of want at
// its leaf's maximum definition level (the dense form's premise); a dense column's words
// exactly column.Bits of want's values, or for a BYTE_ARRAY leaf its Bytes exactly want's
// values back to back with their end offsets; and each column dense
// exactly when its leaf is Denseable and none of its values is a null (only checked
// when exact, i.e. not after a failed record, which may have turned a column levelled
// with the null it appended before failing: then a column holding a null must be
// levelled).
func columnsMatch(d *Decoder, cols []column.Column, want [][]parquet.Value, exact bool) error {
	if len(want) < len(cols) {
		w := make([][]parquet.Value, len(cols))
		copy(w, want)
		want = w
	}
	if err := sameValues(materialise(cols), want[:len(cols)]); err != nil {
		return fmt.Errorf("DecodeColumns: %w", err)
	}
	for i := range cols {
		leaf := d.leaves[i]
		for j, v := range want[i] {
			if !v.IsNull() && int(v.DefinitionLevel()) != leaf.MaxDef {
				return fmt.Errorf("column %d value %d %s: a present value below the leaf's max definition level %d", i, j, render(v), leaf.MaxDef)
			}
		}
		if c := &cols[i]; c.IsDense() && leaf.Kind == parquet.ByteArray {
			// The byte form: the values back to back in Bytes, each row's end offset in Dense.
			var end uint64
			for j, v := range want[i] {
				end += uint64(len(v.ByteArray()))
				if c.Dense[j] != end || string(c.ValueBytes(j)) != string(v.ByteArray()) {
					return fmt.Errorf("column %d row %d: end offset %d, value %q; want %d, %q (%s)", i, j, c.Dense[j], c.ValueBytes(j), end, v.ByteArray(), render(v))
				}
			}
			if uint64(len(c.Bytes)) != end || c.ByteSize() != int(end) {
				return fmt.Errorf("column %d: %d bytes in Bytes, ByteSize %d, want %d (the values back to back)", i, len(c.Bytes), c.ByteSize(), end)
			}
		} else if c.IsDense() {
			for j, b := range c.Dense { // the words as column.Bits encodes them
				if w := column.Bits(want[i][j]); b != w {
					return fmt.Errorf("column %d row %d: dense word %#x, want %#x (column.Bits of %s)", i, j, b, w, render(want[i][j]))
				}
			}
		}
		null := hasNull(want[i])
		if dense := cols[i].IsDense(); (exact && dense != (leaf.Denseable() && !null)) || (dense && (null || !leaf.Denseable())) {
			return fmt.Errorf("column %d (leaf %+v, a null: %v): IsDense %v", i, leaf, null, dense)
		}
	}
	return nil
}

// columnsAgree decodes payload with DecodeColumns through a (nil: none) into columns
// holding before's values (newColumns) and reports any difference from Decode's result
// want and error wantErr for the same payload appended to before: the error (reason,
// field and message), the values (columnsMatch), and on an error the rollback to
// before.
func columnsAgree(d *Decoder, a *Arena, payload []byte, before, want [][]parquet.Value, wantErr error) error {
	cols := newColumns(d, before)
	err := d.DecodeColumns(a, payload, cols)
	if (err == nil) != (wantErr == nil) || (err != nil && (err.Error() != wantErr.Error() || ReasonOf(err) != ReasonOf(wantErr) || FieldOf(err) != FieldOf(wantErr))) {
		return fmt.Errorf("Decode: %v; DecodeColumns: %v", wantErr, err)
	}
	return columnsMatch(d, cols, want, err == nil)
}

// nullableTable is t with every top-level column nullable.
func nullableTable(t *deltalog.StructType) *deltalog.StructType {
	out := &deltalog.StructType{}
	for _, f := range t.Fields {
		g := *f
		g.Nullable = true
		out.Fields = append(out.Fields, &g)
	}
	return out
}

// Several writer schemas append to the same columns through DecodeColumns, as a batch
// does: the benchmark record (every numeric column dense), a writer whose score is
// [null, double] (a set score keeps it dense, a null turns it levelled mid-batch), a
// writer lacking count (null: count turns levelled), and failed records in between (cut
// back; a column the failed record turned levelled stays levelled). After every record
// the columns equal Decode's levelled values for the same records (columnsMatch), and at
// the end exactly the expected columns are dense.
func TestDecodeColumnsAcrossWriterSchemas(t *testing.T) {
	v1 := mustWriter(t, 1, tenFields)
	v2 := mustWriter(t, 2, strings.Replace(tenFields, `{"name":"score","type":"double"}`, `{"name":"score","type":["null","double"]}`, 1))
	v3 := mustWriter(t, 3, strings.Replace(tenFields, `{"name":"count","type":"int"},`, ``, 1))
	table := nullableTable(v1.Delta)
	pq := mustParquet(t, table, "none")
	decs := map[*WriterSchema]*Decoder{}
	for _, ws := range []*WriterSchema{v1, v2, v3} {
		d, err := Compile(ws, table, "none", pq)
		if err != nil {
			t.Fatalf("compile writer %d: %v", ws.ID, err)
		}
		decs[ws] = d
	}
	rec := func(i int) map[string]any {
		return map[string]any{
			"id": int64(1000 + i), "name": fmt.Sprintf("n%d", i), "score": float64(i) + 0.25, "active": i%2 == 0,
			"ts": time.UnixMicro(1702771200123456 + int64(i)).UTC(), "note": nil, "count": int32(-i), "amount": rat(t, fmt.Sprintf("%d.05", -i)),
			"kind": "VIEW", "tags": []any{"a"},
		}
	}
	v2Null := rec(4)
	v2Null["score"] = nil
	v2NullPayload := mustMarshal(t, v2.Avro, v2Null)
	steps := []struct {
		name    string
		ws      *WriterSchema
		payload []byte
		fail    bool
	}{
		{"v1", v1, mustMarshal(t, v1.Avro, rec(0)), false},
		{"v1", v1, mustMarshal(t, v1.Avro, rec(1)), false},
		{"v2, score set", v2, mustMarshal(t, v2.Avro, rec(2)), false},
		{"v1 truncated", v1, mustMarshal(t, v1.Avro, rec(3))[:20], true},
		{"v2, score null, truncated after it", v2, v2NullPayload[:len(v2NullPayload)-1], true},
		{"v2, score set", v2, mustMarshal(t, v2.Avro, rec(5)), false},
		{"v3, no count", v3, mustMarshal(t, v3.Avro, rec(6)), false},
		{"v1", v1, mustMarshal(t, v1.Avro, rec(7)), false},
	}
	var a Arena
	cols := newColumns(decs[v1], nil)
	var want [][]parquet.Value
	turned := map[int]bool{} // columns a failed record turned levelled
	for i, st := range steps {
		d := decs[st.ws]
		var wantErr error
		want, wantErr = d.Decode(st.payload, want)
		err := d.DecodeColumns(&a, st.payload, cols)
		if (err != nil) != st.fail || (wantErr != nil) != st.fail {
			t.Fatalf("step %d %s: DecodeColumns %v, Decode %v, want failure %v", i, st.name, err, wantErr, st.fail)
		}
		if err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("step %d %s: DecodeColumns %v, Decode %v", i, st.name, err, wantErr)
		}
		if err := columnsMatch(d, cols, want, false); err != nil {
			t.Fatalf("step %d %s: %v", i, st.name, err)
		}
		if st.name == "v2, score null, truncated after it" {
			turned[7] = true // score (leaf 7): its null was appended before the failure
		}
		for c := range cols {
			if w := d.leaves[c].Denseable() && !hasNull(want[c]) && !turned[c]; cols[c].IsDense() != w {
				t.Fatalf("step %d %s: column %d IsDense %v, want %v", i, st.name, c, cols[c].IsDense(), w)
			}
		}
	}
	dense := map[string]bool{}
	for i, p := range pq.Columns() {
		dense[strings.Join(p, ".")] = cols[i].IsDense()
		if n := cols[i].Len(); n != 6 && p[0] != "tags" {
			t.Errorf("column %v has %d entries, want 6 rows", p, n)
		}
	}
	wantDense := map[string]bool{"active": true, "amount": true, "count": false, "id": true, "kind": true, "name": true,
		"note": false, "score": false, "tags.list.element": false, "ts": true}
	if !reflect.DeepEqual(dense, wantDense) {
		t.Fatalf("dense columns %v, want %v", dense, wantDense)
	}
	if got, w := renderAll(materialise(cols))[7], []string{"0/1:0.25", "0/1:1.25", "0/1:2.25", "0/1:5.25", "0/1:6.25", "0/1:7.25"}; !reflect.DeepEqual(got, w) {
		t.Fatalf("score %v, want %v", got, w)
	}
	if got, w := renderAll(materialise(cols))[2], []string{"0/1:0", "0/1:-1", "0/1:-2", "0/1:-5", "0/0:null", "0/1:-7"}; !reflect.DeepEqual(got, w) {
		t.Fatalf("count %v, want %v", got, w)
	}
}

// DecodeColumns refuses columns it cannot append to before reading anything: the wrong
// number of columns, or an empty dense column Reset for another leaf.
func TestDecodeColumnsRefusesMismatchedColumns(t *testing.T) {
	ws := mustWriter(t, 1, tenFields)
	d, _ := mustCompile(t, ws, ws.Delta, "none")
	payload := tenFieldsPayload(t, ws)
	if err := d.DecodeColumns(nil, payload, make([]column.Column, d.Columns()-1)); err == nil || !strings.Contains(err.Error(), "got 9 columns, the decoder writes 10") {
		t.Fatalf("9 columns: %v", err)
	}
	cols := newColumns(d, nil)
	cols[1].Reset(d.leaves[3]) // amount (INT64) Reset as id's leaf
	if err := d.DecodeColumns(nil, payload, cols); err == nil || !strings.Contains(err.Error(), "column 1 is dense for leaf") {
		t.Fatalf("a column Reset for another leaf: %v", err)
	}
	for i := range cols {
		if cols[i].Len() != 0 {
			t.Fatalf("column %d got %d entries from a refused call", i, cols[i].Len())
		}
	}
	cols[1].Reset(d.leaves[1])
	if err := d.DecodeColumns(nil, payload, cols); err != nil {
		t.Fatal(err)
	}
	if !cols[1].IsDense() || cols[1].Len() != 1 || cols[1].At(0).Int64() != -123456789 {
		t.Fatalf("amount: dense %v, %d entries", cols[1].IsDense(), cols[1].Len())
	}
}

// DecodeColumns at steady state allocates nothing per record: columns Reset for the next
// batch keep both forms' capacity, the arena its chunks; the dense columns stay dense
// and hold the record's words.
func TestDecodeColumnsReusesMemoryWithoutAllocating(t *testing.T) {
	ws := mustWriter(t, 1, tenFields)
	d, _ := mustCompile(t, ws, ws.Delta, "none")
	payload := tenFieldsPayload(t, ws)
	one, err := d.Decode(payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, alias := range []bool{false, true} {
		var a Arena
		if alias {
			a.AliasPayloads()
		}
		cols := newColumns(d, nil)
		batch := func() {
			for c := range cols {
				cols[c].Reset(d.leaves[c])
			}
			a.Reset()
			for i := 0; i < 4096; i++ {
				if err := d.DecodeColumns(&a, payload, cols); err != nil {
					t.Fatal(err)
				}
			}
		}
		batch() // warm up
		if allocs := testing.AllocsPerRun(5, batch); allocs != 0 {
			t.Fatalf("alias %v: a reused batch allocated %v times, want 0", alias, allocs)
		}
		want := make([][]parquet.Value, len(one))
		for i := range one {
			for range 4096 {
				want[i] = append(want[i], one[i]...)
			}
		}
		if err := columnsMatch(d, cols, want, true); err != nil {
			t.Fatalf("alias %v: %v", alias, err)
		}
		ndense := 0
		for c := range cols {
			if cols[c].IsDense() {
				ndense++
			}
		}
		if ndense != 9 { // id, name, score, active, ts, note, count, amount, kind
			t.Fatalf("alias %v: %d dense columns, want 9", alias, ndense)
		}
	}
}
