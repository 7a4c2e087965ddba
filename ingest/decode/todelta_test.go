package decode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/ingestd/ingestd/deltawriter"
)

// TestToDeltaTypeTable checks every row of the "Avro to Delta types" table of
// docs/schema-policies.md: the Avro type of one field and the exact Delta JSON of that
// field.
func TestToDeltaTypeTable(t *testing.T) {
	for _, c := range []struct {
		name, avro, want string
	}{
		{"boolean", `"boolean"`, `{"name":"f","type":"boolean","nullable":false,"metadata":{}}`},
		{"int", `"int"`, `{"name":"f","type":"integer","nullable":false,"metadata":{}}`},
		{"long", `"long"`, `{"name":"f","type":"long","nullable":false,"metadata":{}}`},
		{"float", `"float"`, `{"name":"f","type":"float","nullable":false,"metadata":{}}`},
		{"double", `"double"`, `{"name":"f","type":"double","nullable":false,"metadata":{}}`},
		{"string", `"string"`, `{"name":"f","type":"string","nullable":false,"metadata":{}}`},
		{"enum", `{"type":"enum","name":"E","symbols":["A","B"]}`, `{"name":"f","type":"string","nullable":false,"metadata":{}}`},
		{"bytes", `"bytes"`, `{"name":"f","type":"binary","nullable":false,"metadata":{}}`},
		{"fixed", `{"type":"fixed","name":"X","size":3}`, `{"name":"f","type":"binary","nullable":false,"metadata":{}}`},
		{"decimal on bytes", `{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}`, `{"name":"f","type":"decimal(10,2)","nullable":false,"metadata":{}}`},
		{"decimal on fixed", `{"type":"fixed","name":"X","size":5,"logicalType":"decimal","precision":11,"scale":3}`, `{"name":"f","type":"decimal(11,3)","nullable":false,"metadata":{}}`},
		{"decimal 38 on fixed 16", `{"type":"fixed","name":"X","size":16,"logicalType":"decimal","precision":38,"scale":0}`, `{"name":"f","type":"decimal(38,0)","nullable":false,"metadata":{}}`},
		{"decimal fixed too small", `{"type":"fixed","name":"X","size":5,"logicalType":"decimal","precision":12,"scale":2}`, `{"name":"f","type":"binary","nullable":false,"metadata":{}}`},
		{"decimal precision 0", `{"type":"bytes","logicalType":"decimal","precision":0,"scale":0}`, `{"name":"f","type":"binary","nullable":false,"metadata":{}}`},
		{"decimal precision 39", `{"type":"bytes","logicalType":"decimal","precision":39,"scale":2}`, `{"name":"f","type":"binary","nullable":false,"metadata":{}}`},
		{"decimal scale > precision", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":5}`, `{"name":"f","type":"binary","nullable":false,"metadata":{}}`},
		{"decimal on string ignored", `{"type":"string","logicalType":"decimal","precision":4,"scale":2}`, `{"name":"f","type":"string","nullable":false,"metadata":{}}`},
		{"date", `{"type":"int","logicalType":"date"}`, `{"name":"f","type":"date","nullable":false,"metadata":{}}`},
		{"timestamp-millis", `{"type":"long","logicalType":"timestamp-millis"}`, `{"name":"f","type":"timestamp","nullable":false,"metadata":{}}`},
		{"timestamp-micros", `{"type":"long","logicalType":"timestamp-micros"}`, `{"name":"f","type":"timestamp","nullable":false,"metadata":{}}`},
		{"local-timestamp-millis", `{"type":"long","logicalType":"local-timestamp-millis"}`, `{"name":"f","type":"timestamp_ntz","nullable":false,"metadata":{}}`},
		{"local-timestamp-micros", `{"type":"long","logicalType":"local-timestamp-micros"}`, `{"name":"f","type":"timestamp_ntz","nullable":false,"metadata":{}}`},
		{"uuid", `{"type":"string","logicalType":"uuid"}`, `{"name":"f","type":"string","nullable":false,"metadata":{}}`},
		{"time-millis", `{"type":"int","logicalType":"time-millis"}`, `{"name":"f","type":"integer","nullable":false,"metadata":{}}`},
		{"time-micros", `{"type":"long","logicalType":"time-micros"}`, `{"name":"f","type":"long","nullable":false,"metadata":{}}`},
		{"unknown logical type", `{"type":"long","logicalType":"timestamp-nanos"}`, `{"name":"f","type":"long","nullable":false,"metadata":{}}`},
		{"record", `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":["null","string"]}]}`,
			`{"name":"f","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":false,"metadata":{}},{"name":"b","type":"string","nullable":true,"metadata":{}}]},"nullable":false,"metadata":{}}`},
		{"array", `{"type":"array","items":"long"}`, `{"name":"f","type":{"type":"array","elementType":"long","containsNull":false},"nullable":false,"metadata":{}}`},
		{"array of nullable", `{"type":"array","items":["null","long"]}`, `{"name":"f","type":{"type":"array","elementType":"long","containsNull":true},"nullable":false,"metadata":{}}`},
		{"map", `{"type":"map","values":"double"}`, `{"name":"f","type":{"type":"map","keyType":"string","valueType":"double","valueContainsNull":false},"nullable":false,"metadata":{}}`},
		{"map of nullable record", `{"type":"map","values":["null",{"type":"record","name":"V","fields":[{"name":"v","type":"int"}]}]}`,
			`{"name":"f","type":{"type":"map","keyType":"string","valueType":{"type":"struct","fields":[{"name":"v","type":"integer","nullable":false,"metadata":{}}]},"valueContainsNull":true},"nullable":false,"metadata":{}}`},
		{"[null,T]", `["null","string"]`, `{"name":"f","type":"string","nullable":true,"metadata":{}}`},
		{"[T,null]", `["string","null"]`, `{"name":"f","type":"string","nullable":true,"metadata":{}}`},
		{"[T]", `["string"]`, `{"name":"f","type":"string","nullable":false,"metadata":{}}`},
		{"union of two", `["long","string"]`, `{"name":"f","type":{"type":"struct","fields":[{"name":"member0","type":"long","nullable":true,"metadata":{}},{"name":"member1","type":"string","nullable":true,"metadata":{}}]},"nullable":false,"metadata":{}}`},
		{"nullable union of three", `["int","null","string",{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}]`,
			`{"name":"f","type":{"type":"struct","fields":[{"name":"member0","type":"integer","nullable":true,"metadata":{}},{"name":"member1","type":"string","nullable":true,"metadata":{}},{"name":"member2","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":false,"metadata":{}}]},"nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := `{"type":"record","name":"Top","fields":[{"name":"f","type":` + c.avro + `}]}`
			s, err := parseAvro(text, &avro.SchemaCache{})
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			st, err := ToDelta(s)
			if err != nil {
				t.Fatalf("ToDelta: %v", err)
			}
			got, _ := json.Marshal(st)
			want := `{"type":"struct","fields":[` + c.want + `]}`
			if string(got) != want {
				t.Errorf("ToDelta\n got %s\nwant %s", got, want)
			}
			// Every converted schema must be writable as Parquet by the Delta writer.
			if _, err := deltawriter.ParquetSchema(st, "none"); err != nil {
				t.Errorf("ParquetSchema: %v", err)
			}
		})
	}
}

func TestToDeltaSchemaShapes(t *testing.T) {
	for _, c := range []struct {
		name, avro, want, reason, field, errHas string
	}{
		{name: "null field omitted", avro: `{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"legacy","type":"null"},{"name":"only_null","type":["null"]}]}`,
			want: `{"type":"struct","fields":[{"name":"a","type":"long","nullable":false,"metadata":{}}]}`},
		{name: "top-level [null, record]", avro: `["null",{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}]`,
			want: `{"type":"struct","fields":[{"name":"a","type":"long","nullable":false,"metadata":{}}]}`},
		{name: "named type reused is not recursion", avro: `{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"record","name":"P","fields":[{"name":"x","type":"int"}]}},{"name":"b","type":"P"}]}`,
			want: `{"type":"struct","fields":[{"name":"a","type":{"type":"struct","fields":[{"name":"x","type":"integer","nullable":false,"metadata":{}}]},"nullable":false,"metadata":{}},{"name":"b","type":{"type":"struct","fields":[{"name":"x","type":"integer","nullable":false,"metadata":{}}]},"nullable":false,"metadata":{}}]}`},
		{name: "names outside the Avro grammar are kept", avro: `{"type":"record","name":"R","fields":[{"name":"order id","type":"string"},{"name":" amount","type":"double"},{"name":"a;b","type":"int"},{"name":"y--1","type":"long"}]}`,
			want: `{"type":"struct","fields":[{"name":"order id","type":"string","nullable":false,"metadata":{}},{"name":" amount","type":"double","nullable":false,"metadata":{}},{"name":"a;b","type":"integer","nullable":false,"metadata":{}},{"name":"y--1","type":"long","nullable":false,"metadata":{}}]}`},
		{name: "recursive record", avro: `{"type":"record","name":"Node","namespace":"x","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}`,
			reason: ReasonUnsupportedType, field: "next", errHas: "x.Node -> x.Node"},
		{name: "mutually recursive records", avro: `{"type":"record","name":"A","fields":[{"name":"b","type":{"type":"record","name":"B","fields":[{"name":"items","type":{"type":"array","items":"A"}}]}}]}`,
			reason: ReasonUnsupportedType, field: "b.items[]", errHas: "A -> B -> A"},
		{name: "top-level not a record", avro: `"long"`, reason: ReasonUnsupportedType},
		{name: "top-level union of two records", avro: `[{"type":"record","name":"A","fields":[]},{"type":"record","name":"B","fields":[]}]`, reason: ReasonUnsupportedType},
		{name: "case clash", avro: `{"type":"record","name":"R","fields":[{"name":"Id","type":"long"},{"name":"ID","type":"long"}]}`, reason: ReasonUnsupportedType, field: "ID"},
		{name: "NFC clash", avro: "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"caf\u00e9\",\"type\":\"long\"},{\"name\":\"CAFE\u0301\",\"type\":\"long\"}]}", reason: ReasonUnsupportedType, field: "CAFE\u0301"},
		{name: "empty nested record", avro: `{"type":"record","name":"R","fields":[{"name":"e","type":{"type":"record","name":"E","fields":[]}}]}`, reason: ReasonUnsupportedType, field: "e"},
		{name: "array of null", avro: `{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"array","items":"null"}}]}`, reason: ReasonUnsupportedType, field: "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := parseAvro(c.avro, &avro.SchemaCache{})
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			st, err := ToDelta(s)
			if c.reason != "" {
				if ReasonOf(err) != c.reason || FieldOf(err) != c.field || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("ToDelta error = %v (reason %q field %q), want reason %q field %q containing %q", err, ReasonOf(err), FieldOf(err), c.reason, c.field, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("ToDelta: %v", err)
			}
			if got, _ := json.Marshal(st); string(got) != c.want {
				t.Errorf("ToDelta\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestMaxFixedDigits(t *testing.T) {
	for n, want := range map[int]int{1: 2, 2: 4, 3: 6, 4: 9, 5: 11, 8: 18, 9: 21, 16: 38} {
		if got := maxFixedDigits(n); got != want {
			t.Errorf("maxFixedDigits(%d) = %d, want %d", n, got, want)
		}
	}
	for p := 1; p <= 38; p++ {
		if got, want := decimalBytes(p), deltawriter.DecimalBytes(p); got != want {
			t.Errorf("decimalBytes(%d) = %d, deltawriter says %d", p, got, want)
		}
	}
}

// nestedRecords is an Avro schema whose field "x" nests n records (the innermost holds
// a long "v"), optionally through an array at the second level.
func nestedRecords(n int, viaArray bool) string {
	t := `"long"`
	for i := n; i >= 1; i-- {
		f := "v"
		if i < n {
			f = "a"
		}
		t = fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":%q,"type":%s}]}`, i, f, t)
		if viaArray && i == 2 {
			t = fmt.Sprintf(`{"type":"array","items":%s}`, t)
		}
	}
	return fmt.Sprintf(`{"type":"record","name":"Top","fields":[{"name":"id","type":"long"},{"name":"x","type":%s}]}`, t)
}

// A column may nest MaxNestingDepth (32) levels of struct, array and map; one more is
// unsupported_type naming the deepest path (delta-rs cannot open a table past 41 structs).
func TestToDeltaRefusesNestingPastTheBound(t *testing.T) {
	if _, err := ToDelta(avro.MustParse(nestedRecords(32, false))); err != nil {
		t.Fatalf("32 nested records: %v, want accepted", err)
	}
	_, err := ToDelta(avro.MustParse(nestedRecords(33, false)))
	var de *Error
	wantPath := "x" + strings.Repeat(".a", 32) // the innermost record, R33
	if !errors.As(err, &de) || de.Reason != ReasonUnsupportedType || de.Field != wantPath || !strings.Contains(err.Error(), "nests 33 levels") {
		t.Fatalf("33 nested records: %v (field %q), want unsupported_type at %s, 33 levels", err, fieldOf(de), wantPath)
	}
	// 31 records and one array: 32 levels, accepted; 32 records and an array: 33.
	if _, err := ToDelta(avro.MustParse(nestedRecords(31, true))); err != nil {
		t.Fatalf("31 nested records through an array: %v, want accepted", err)
	}
	_, err = ToDelta(avro.MustParse(nestedRecords(32, true)))
	if !errors.As(err, &de) || de.Field != "x.a[]"+strings.Repeat(".a", 30) {
		t.Fatalf("32 nested records through an array: %v (field %q), want refused at x.a[].a…", err, fieldOf(de))
	}
}

func fieldOf(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Field
}
