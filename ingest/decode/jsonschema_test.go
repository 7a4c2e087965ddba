package decode

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const jsOrder = `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
 "properties": {
  "id": {"type": "integer"},
  "price": {"type": "number"},
  "name": {"type": ["string", "null"]},
  "at": {"type": "string", "format": "date-time"},
  "day": {"type": "string", "format": "date"},
  "uid": {"type": "string", "format": "uuid"},
  "ok": {"type": "boolean"},
  "tags": {"type": "array", "items": {"type": "string"}},
  "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
  "customer": {"$ref": "customer.json"},
  "note": {"oneOf": [{"type": "null"}, {"type": "string"}]}
 },
 "required": ["id", "price"]}`

const jsCustomer = `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"cid": {"type": "integer"}, "email": {"type": "string"}}, "required": ["cid"]}`

func TestJSONSchemaMapping(t *testing.T) {
	ws, err := CompileJSONSchema(11, jsOrder, map[string]string{"customer.json": jsCustomer})
	if err != nil || ws.DeltaErr != nil {
		t.Fatal(err, ws.DeltaErr)
	}
	// Properties in name order; integer → long, number → double, date-time → timestamp,
	// date → date, uuid → string, additionalProperties → map, a $ref to a reference →
	// struct, ["string", "null"] and oneOf with null → nullable.
	if got := ws.Delta.String(); got != "struct<at:timestamp,attrs:map<string,long>,customer:struct<cid:long,email:string>,day:date,id:long,name:string,note:string,ok:boolean,price:double,tags:array<string>,uid:string>" {
		t.Fatal(got)
	}
	var notNull []string
	for _, f := range ws.Delta.Fields {
		if !f.Nullable {
			notNull = append(notNull, f.Name)
		}
	}
	if strings.Join(notNull, ",") != "id,price" {
		t.Fatalf("NOT NULL columns %v (the required properties)", notNull)
	}
	got, err := jsonValue(t, ws, []byte(`{"id": 9007199254740993, "price": 1.5, "at": "2024-05-01T00:00:00Z", "day": "2024-05-01", "tags": ["a"],
	 "attrs": {"x": 1}, "customer": {"cid": 7, "extra": true}, "unknown": {"deep": [1]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": int64(9007199254740993), "price": 1.5, "at": time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), "day": time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC),
		"tags": []any{"a"}, "attrs": map[string]any{"x": int64(1)}, "customer": map[string]any{"cid": int64(7), "email": nil}, "name": nil, "note": nil, "ok": nil, "uid": nil}
	for k, w := range want {
		g := got[k]
		if m, ok := g.(map[string]any); ok && len(m) == 1 { // hamba names a union's branch
			for _, v := range m {
				g = v
			}
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s = %#v, want %#v", k, g, w)
		}
	}
	// A record that does not match its schema is a dead letter with the validator's message.
	_, err = ws.Transcode([]byte(`{"id": 1, "price": "x"}`))
	if ReasonOf(err) != ReasonDecodeError || FieldOf(err) != "price" || !strings.Contains(err.Error(), "does not match its JSON schema") {
		t.Fatalf("invalid record: %v (field %q)", err, FieldOf(err))
	}
	if _, err := ws.Transcode([]byte(`{"id": 1}`)); ReasonOf(err) != ReasonDecodeError || !strings.Contains(err.Error(), "price") {
		t.Fatalf("a missing required property: %v", err)
	}
}

func TestJSONSchemaRefused(t *testing.T) {
	for _, c := range []struct{ schema, field, msg string }{
		{`{"type": "object", "properties": {"o": {"type": "object"}}}`, "o", "without properties nor an additionalProperties schema"},
		{`{"type": "object", "properties": {"u": {"type": ["string", "integer"]}}}`, "u", "a union of the types"},
		{`{"type": "object", "properties": {"u": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}`, "u", "a union of 2 non-null schemas"},
		{`{"type": "object", "properties": {"n": {"$ref": "#"}}}`, "n", "recursive schema"},
		{`{"type": "array", "items": {"type": "integer"}}`, "", "not an object with properties"},
	} {
		ws, err := CompileJSONSchema(12, c.schema, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		if ReasonOf(ws.DeltaErr) != ReasonUnsupportedType || FieldOf(ws.DeltaErr) != c.field || !strings.Contains(ws.DeltaErr.Error(), c.msg) {
			t.Errorf("%s: %v", c.schema, ws.DeltaErr)
		}
	}
	if _, err := CompileJSONSchema(13, `{"type": "object", "properties": {"c": {"$ref": "missing.json"}}}`, nil); ReasonOf(err) != ReasonSchemaParseError {
		t.Fatalf("a $ref outside the references: %v", err)
	}
	if _, err := CompileJSONSchema(13, `{"type": `, nil); ReasonOf(err) != ReasonSchemaParseError {
		t.Fatalf("not JSON: %v", err)
	}
}
