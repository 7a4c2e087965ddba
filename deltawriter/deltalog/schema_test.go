package deltalog

import (
	"encoding/json"
	"testing"
	"time"
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

// The date and timestamp range constants are PROTOCOL.md's ends ("Primitive Types"), as
// the time package computes them; the integer ranges are their Go types'.
func TestValueRanges(t *testing.T) {
	first, last := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	for _, c := range []struct {
		t      DataType
		lo, hi int64
	}{
		{Date, first.Unix() / 86400, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).Unix() / 86400},
		{Timestamp, first.UnixMicro(), last.UnixMicro()},
		{TimestampNtz, first.UnixMicro(), last.UnixMicro()},
	} {
		if lo, hi, ok := TimeRange(c.t); !ok || lo != c.lo || hi != c.hi {
			t.Errorf("TimeRange(%s) = %d, %d, %v; want %d, %d", c.t, lo, hi, ok, c.lo, c.hi)
		}
	}
	for _, c := range []struct {
		t      DataType
		lo, hi int64
	}{{Byte, -128, 127}, {Short, -32768, 32767}, {Integer, -1 << 31, 1<<31 - 1}, {Long, -1 << 63, 1<<63 - 1}} {
		if lo, hi, ok := IntegerRange(c.t); !ok || lo != c.lo || hi != c.hi {
			t.Errorf("IntegerRange(%s) = %d, %d, %v", c.t, lo, hi, ok)
		}
	}
	for _, other := range []DataType{String, Double, DecimalType{Precision: 10}} {
		if _, _, ok := TimeRange(other); ok {
			t.Errorf("TimeRange(%s) ok", other)
		}
		if _, _, ok := IntegerRange(other); ok {
			t.Errorf("IntegerRange(%s) ok", other)
		}
	}
}
