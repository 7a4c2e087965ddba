package decode

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// Repetition levels deeper than one: lists of lists and lists of maps, with empty and
// null inner values, checked at the level of Dremel values and of reassembled rows.
func TestDecodeNestedRepetition(t *testing.T) {
	ws := mustWriter(t, 9, `{"type":"record","name":"R","fields":[
		{"name":"aa","type":{"type":"array","items":["null",{"type":"array","items":["null","int"]}]}},
		{"name":"am","type":{"type":"array","items":{"type":"map","values":"long"}}}]}`)
	d, pq := mustCompile(t, ws, ws.Delta, "none")
	var cols [][]parquet.Value
	var err error
	for _, r := range []map[string]any{
		{"aa": []any{[]any{1, 2}, []any{}, []any{3}}, "am": []any{map[string]any{"k": int64(1)}, map[string]any{}}},
		{"aa": []any{nil, []any{nil}}, "am": []any{}},
	} {
		if cols, err = decodeCase(t, d, mustMarshal(t, ws.Avro, r), cols); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]string{
		"aa.list.element.list.element":    {"0/5:1", "2/5:2", "1/3:null", "1/5:3", "0/2:null", "1/4:null"},
		"am.list.element.key_value.key":   {`0/4:"k"`, "1/3:null", "0/1:null"},
		"am.list.element.key_value.value": {"0/5:1", "1/3:null", "0/1:null"},
	}
	file := writeParquet(t, pq, cols)
	got, n := readColumns(t, file)
	if n != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("%d rows\n got %q\nwant %q", n, got, want)
	}
	rows := []map[string]any{{}, {}}
	if k, _ := parquet.NewGenericReader[map[string]any](bytes.NewReader(file), pq).Read(rows); k != 2 {
		t.Fatalf("read %d rows", k)
	}
	if got, want := rows[0]["aa"], []any{[]any{int32(1), int32(2)}, []any{}, []any{int32(3)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("row 0 aa = %#v, want %#v", got, want)
	}
	if got, want := rows[1]["aa"], []any{nil, []any{nil}}; !reflect.DeepEqual(got, want) {
		t.Errorf("row 1 aa = %#v, want %#v", got, want)
	}
}
