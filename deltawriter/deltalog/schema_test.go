package deltalog

import (
	"encoding/json"
	"testing"
)

// TestStructFieldJSON: a field marshals as in a schema string (PROTOCOL.md, "Struct
// Field"), keys in Spark's order, metadata always an object, by value or pointer.
func TestStructFieldJSON(t *testing.T) {
	s, err := ParseSchema(`{"type":"struct","fields":[{"name":"a","type":"long","nullable":false,"metadata":{}},{"name":"d","type":{"type":"array","elementType":"decimal(10,2)","containsNull":true},"nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-x"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{
		`{"name":"a","type":"long","nullable":false,"metadata":{}}`,
		`{"name":"d","type":{"type":"array","elementType":"decimal(10,2)","containsNull":true},"nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-x"}}`,
	} {
		f := s.Fields[i]
		for _, v := range []any{f, *f} {
			if b, err := json.Marshal(v); err != nil || string(b) != want {
				t.Errorf("json.Marshal(%T field %s) = %s, %v; want %s", v, f.Name, b, err, want)
			}
		}
	}
	if b, err := json.Marshal(StructField{Name: "n", Type: String}); err != nil || string(b) != `{"name":"n","type":"string","nullable":false,"metadata":{}}` {
		t.Errorf("field without metadata: %s, %v", b, err)
	}
}
