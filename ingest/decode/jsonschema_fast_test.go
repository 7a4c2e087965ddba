package decode

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// jsTyped are JSON Schemas the validator adds nothing to (jsGen.needs ""): nested objects,
// arrays, maps, nullable and required properties, integers, numbers, strings with the
// date and date-time formats, $ref to $defs, definitions and a registry reference, in
// drafts 2020-12, 7 and 4, with annotations.
var jsTyped = []string{
	`{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "order",
	 "description": "an order", "$comment": "c", "type": "object",
	 "properties": {
	  "id": {"type": "integer", "examples": [1], "default": 0, "deprecated": false, "readOnly": true},
	  "price": {"type": "number", "writeOnly": false},
	  "qty": {"type": ["integer", "number"]},
	  "name": {"type": ["string", "null"]},
	  "at": {"type": "string", "format": "date-time"},
	  "day": {"type": "string", "format": "date"},
	  "ok": {"type": "boolean"},
	  "tags": {"type": "array", "items": {"type": "string"}},
	  "attrs": {"type": "object", "additionalProperties": {"type": ["integer", "null"]}},
	  "customer": {"$ref": "#/$defs/customer"},
	  "buyer": {"$ref": "customer.json"},
	  "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
	  "memo": {"anyOf": [{"type": "string"}, {"type": "null"}]}
	 },
	 "required": ["id", "price", "name", "customer"], "additionalProperties": true,
	 "$defs": {"customer": {"type": "object", "properties": {"cid": {"type": "integer"}, "email": {"type": "string"}}, "required": ["cid"]}}}`,
	`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
	 "definitions": {"line": {"type": "object", "properties": {"sku": {"type": "string"}, "n": {"type": "integer"},
	   "sub": {"type": "object", "properties": {"deep": {"type": "array", "items": {"type": ["number", "null"]}}}, "required": ["deep"]}}, "required": ["sku"]}},
	 "properties": {
	  "id": {"type": "integer"},
	  "lines": {"type": "array", "items": {"$ref": "#/definitions/line"}},
	  "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
	  "at": {"type": ["string", "null"], "format": "date-time"}
	 },
	 "required": ["id", "lines", "at"]}`,
	`{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
	 "properties": {"id": {"type": "integer"}, "o": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "boolean"}}, "required": ["x"]},
	  "m": {"type": "object", "additionalProperties": {"type": "string", "format": "date"}},
	  "k": {"type": "string", "enum": ["a", "b", 1]}, "kn": {"type": ["string", "null"], "enum": ["x", null]}, "ke": {"type": ["string", "null"], "enum": ["x"]}},
	 "required": ["id"]}`,
}

// jsDocs are documents at the edges of what the transcoder and the validator take.
var jsDocs = []string{
	`{"id": 1, "price": 2.5, "name": null, "customer": {"cid": 3}}`,
	`{"id": 1, "price": 2.5, "name": "n", "customer": {"cid": 3, "email": "e", "x": [1]}, "buyer": {"cid": 4}, "extra": {"deep": [null]}}`,
	`{"id": 1.0, "price": 2, "name": null, "customer": {"cid": 3}}`,
	`{"id": 1e0, "price": 2, "name": null, "customer": {"cid": 3}}`,
	`{"id": -0, "price": -0, "name": null, "customer": {"cid": -0}}`,
	`{"id": 1, "price": 1e400, "name": null, "customer": {"cid": 3}}`,
	`{"id": 9223372036854775807, "price": 1e308, "name": null, "customer": {"cid": -9223372036854775808}}`,
	`{"id": 9223372036854775808, "price": 1, "name": null, "customer": {"cid": 3}}`,
	`{"id": 123456789012345678901234567890, "price": 1, "name": null, "customer": {"cid": 3}}`,
	`{"id": "1", "price": 1, "name": null, "customer": {"cid": 3}}`,
	`{"id": 1, "price": "2.5", "name": null, "customer": {"cid": 3}}`,
	`{"id": null, "price": 1, "name": null, "customer": {"cid": 3}}`,
	`{"id": 1, "price": 1, "customer": {"cid": 3}}`,
	`{"id": 1, "price": 1, "name": null}`,
	`{"id": 1, "price": 1, "name": null, "customer": {}}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": null}}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "ok": null}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "tags": null}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "tags": [null]}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "tags": ["a", 1]}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "attrs": {"a": null, "b": 2, "c": 2.5}}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "attrs": {"a": 1, "a": 2}}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "note": null, "memo": null}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "note": 5}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "qty": 1, "ok": true}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "qty": 1.5, "ok": 1}`,
	`{"id": 1, "id": 2, "price": 1, "name": null, "customer": {"cid": 3}}`,
	`{"ID": 1, "price": 1, "name": null, "customer": {"cid": 3}}`,
	`{"id": 1, "Price": 1, "price": 1, "name": null, "customer": {"CID": 3, "cid": 3}}`,
	`{"id": 1, "price": 1, "Name": "x", "name": null, "customer": {"cid": 3}}`,
	`{"id": 1, "price": 1, "name": "\u00e9", "customer": {"cid": 3}}`,
	"{\"id\": 1, \"price\": 1, \"name\": \"\xff\", \"customer\": {\"cid\": 3}}",
	"{\"id\": 1, \"price\": 1, \"name\": null, \"customer\": {\"cid\": 3}, \"x\xfe\": 1}",
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "at": "2024-05-01T00:00:00Z", "day": "2024-02-29"}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "at": "2024-05-01T00:00:00.123456+02:00", "day": "2023-02-29"}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "at": "2024-05-01T00:00:00,5Z"}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "at": "2024-05-01T00:00:00+24:00"}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "at": "2024-05-01t00:00:00z"}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "at": "2016-12-31T23:59:60Z"}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "at": "0000-01-01T00:00:00Z"}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "at": "2024-05-01T00:00:00.0000001Z"}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "at": "2024-04-31T00:00:00Z", "day": "2024-5-01"}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}, "at": null, "day": null}`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}} x`,
	`{"id": 1, "price": 1, "name": null, "customer": {"cid": 3}`,
	`null`, `[]`, `1`, `"s"`, `{}`,
	`{"id": 1, "lines": [], "at": null}`,
	`{"id": 1, "lines": [{"sku": "a", "n": 2, "sub": {"deep": [1, null, 2.5]}}, {"sku": "b"}], "grid": [[1], [], [2, 3]], "at": "2024-05-01T00:00:00Z"}`,
	`{"id": 1, "lines": [{"sku": "a", "sub": {}}], "at": null}`,
	`{"id": 1, "lines": [{"n": 1}], "at": null}`,
	`{"id": 1, "lines": [{"sku": "a", "sub": {"deep": [true]}}], "at": null}`,
	`{"id": 1, "lines": [{"sku": "a", "sub": {"deep": null}}], "at": null}`,
	`{"id": 1, "lines": [{"sku": "a", "n": null}], "at": null}`,
	`{"id": 1, "lines": [{"sku": "a"}], "grid": [[1.5]], "at": null}`,
	`{"id": 1, "lines": [{"sku": "a"}], "grid": [[1]]}`,
	`{"id": 1, "o": {"x": 1, "y": true}, "m": {"a": "2024-01-01"}}`,
	`{"id": 1, "o": {"y": true}}`,
	`{"id": 1, "o": {"x": null}}`,
	`{"id": 1, "o": {"x": 1, "y": null}, "m": {"a": "2024-13-01"}}`,
	`{"id": 1, "o": null, "m": {"a": null}}`,
	`{"id": 1.0, "o": {"x": 1}}`,
	`{"id": 1, "o": {"x": 1, "X": 2}}`,
	`{"id": 1, "o": {"X": 1}}`,
	`{"id": 1, "k": "a", "kn": null, "ke": "x"}`,
	`{"id": 1, "k": "\u0061", "kn": "x"}`,
	`{"id": 1, "k": "c"}`,
	`{"id": 1, "k": 1}`,
	`{"id": 1, "k": null}`,
	`{"id": 1, "ke": null}`,
	`{"id": 1, "kn": "y"}`,
}

// jsTypedPair compiles schema twice: as it reads now, and with the validator forced to
// read every document (the decoder before it could stand aside).
func jsTypedPair(t testing.TB, schema string) (fast, validated *WriterSchema) {
	t.Helper()
	files := map[string]string{"customer.json": jsCustomer}
	fast, err := CompileJSONSchema(1, schema, files)
	if err != nil {
		t.Fatal(err)
	}
	if fast.DeltaErr != nil {
		t.Fatal(fast.DeltaErr)
	}
	if n := fast.body.(*jsonSchemaBody).needs; n != "" {
		t.Fatalf("the validator is needed: %s", n)
	}
	validated, _ = CompileJSONSchema(1, schema, files)
	jb := validated.body.(*jsonSchemaBody)
	jb.needs = "forced"
	jb.json.top.clearChecks()
	return fast, validated
}

// jsDiffer checks doc against both: the same body or the same error, and a body only for
// a document the validator accepts.
func jsDiffer(t *testing.T, fast, validated *WriterSchema, doc []byte) (accepted bool) {
	t.Helper()
	got, gerr := fast.Transcode(doc)
	want, werr := validated.Transcode(doc)
	if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) || gerr != nil && (ReasonOf(gerr) != ReasonOf(werr) || sameError(gerr) != sameError(werr)) {
		t.Fatalf("%q: %x, %v; validated first: %x, %v", doc, got, gerr, want, werr)
	}
	if gerr != nil {
		return false
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%q: accepted, not JSON for the validator: %v", doc, err)
	}
	if err := fast.body.(*jsonSchemaBody).sch.Validate(v); err != nil {
		t.Fatalf("%q: accepted, refused by the validator: %v", doc, err)
	}
	return true
}

// sameError is what two runs of the same error share: the validator lists the causes of
// a mismatch (and names the field of the first) in no fixed order.
func sameError(err error) string {
	if !strings.Contains(err.Error(), "does not match its JSON schema") {
		return FieldOf(err) + " " + err.Error()
	}
	_, msg, _ := strings.Cut(err.Error(), "the record does not match")
	lines := strings.Split(msg, "\n")
	slices.Sort(lines[1:])
	return strings.Join(lines, "\n")
}

func TestJSONSchemaWithoutValidator(t *testing.T) {
	// accepted[i][j]: whether schema i takes document j (the validator's verdict as well).
	accepted := make([]string, len(jsTyped))
	for i, s := range jsTyped {
		fast, validated := jsTypedPair(t, s)
		for _, d := range jsDocs {
			if jsDiffer(t, fast, validated, []byte(d)) {
				accepted[i] += "1"
			} else {
				accepted[i] += "0"
			}
		}
	}
	for i, want := range []string{
		// Refused among others: 1.0 for an integer (the transcoder is stricter than the
		// validator, as before), a missing required property whose schema admits null, null
		// for an optional property whose schema does not, "ID" for the required "id", a
		// date-time with a comma or an offset of +24:00, a string outside the enum, null
		// where the enum lacks it.
		"11001010000000000000001010000010010000000000000000000000000000000000000000",
		"00000000000000000000000000000000000000000000000000110000000000000000000000",
		"11001110001011111111101111001110011111111110000000111111111100000001100000",
	} {
		if accepted[i] != want {
			t.Errorf("schema %d accepts %s, want %s", i, accepted[i], want)
		}
	}
}

// FuzzJSONSchemaFast feeds arbitrary documents to the schemas the validator adds nothing
// to (jsTyped, the first byte choosing one): the same body or error as with the
// validator reading first, and a body only for a document the validator accepts.
func FuzzJSONSchemaFast(f *testing.F) {
	for i := range jsTyped {
		for _, d := range jsDocs {
			f.Add(append([]byte{byte(i)}, d...))
		}
	}
	var pairs [][2]*WriterSchema
	for _, s := range jsTyped {
		fast, validated := jsTypedPair(f, s)
		pairs = append(pairs, [2]*WriterSchema{fast, validated})
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		p := pairs[int(in[0])%len(pairs)]
		jsDiffer(t, p[0], p[1], in[1:])
	})
}

func TestJSONSchemaValidatorNeeded(t *testing.T) {
	prop := func(p string) string {
		return `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"p": ` + p + `}}`
	}
	for _, c := range []struct{ schema, needs string }{
		{prop(`{"type": "integer"}`), ""},
		{prop(`{"type": "string", "title": "t", "description": "d", "$comment": "c", "examples": ["x"], "default": "y", "deprecated": true, "readOnly": true, "writeOnly": false, "$anchor": "a"}`), ""},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "$id": "https://example.com/s", "type": "object", "properties": {"p": {"type": "string", "format": "date-time"}, "q": {"type": "string", "format": "date"}}, "required": ["p"]}`, ""},
		{prop(`{"type": "string", "enum": ["a", "b"]}`), ""},
		{prop(`{"type": "integer", "enum": [1, 2]}`), "Enum"},
		{prop(`{"type": "string", "format": "date", "enum": ["2024-01-01"]}`), "Enum of a date or date-time"},
		{prop(`{"$ref": "#/$defs/i", "enum": [1]}`), "Enum beside $ref"},
		{prop(`{"type": "string", "const": "a"}`), "Const"},
		{prop(`{"type": "integer", "minimum": 0}`), "Minimum"},
		{prop(`{"type": "integer", "maximum": 0}`), "Maximum"},
		{prop(`{"type": "number", "exclusiveMinimum": 0}`), "ExclusiveMinimum"},
		{prop(`{"type": "number", "multipleOf": 2}`), "MultipleOf"},
		{prop(`{"type": "string", "pattern": "^a"}`), "Pattern"},
		{prop(`{"type": "string", "minLength": 1}`), "MinLength"},
		{prop(`{"type": "string", "maxLength": 1}`), "MaxLength"},
		{prop(`{"type": "string", "format": "email"}`), "format email"},
		{prop(`{"type": "string", "format": "uuid"}`), "format uuid"},
		{prop(`{"type": "array", "items": {"type": "integer"}, "minItems": 1}`), "MinItems"},
		{prop(`{"type": "array", "items": {"type": "integer"}, "uniqueItems": true}`), "UniqueItems"},
		{prop(`{"type": "array", "items": {"type": "integer"}, "contains": {"type": "integer"}}`), "Contains"},
		{prop(`{"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}}`), "PrefixItems"},
		{prop(`{"type": "integer", "not": {"const": 1}}`), "Not"},
		{prop(`{"type": "integer", "if": {"const": 1}, "then": {"const": 1}, "else": {"const": 2}}`), "If"},
		{prop(`{"type": "integer", "allOf": [{"type": "integer"}]}`), "AllOf"},
		{prop(`{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false}`), "AdditionalProperties beside properties"},
		{prop(`{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"}}`), "AdditionalProperties beside properties"},
		{prop(`{"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^x": {"type": "integer"}}}`), "PatternProperties"},
		{prop(`{"type": "object", "properties": {"a": {"type": "integer"}}, "dependentRequired": {"a": ["b"]}}`), "DependentRequired"},
		{prop(`{"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 1}`), "MinProperties"},
		{prop(`{"type": "object", "properties": {"a": {"type": "integer"}}, "propertyNames": {"maxLength": 3}}`), "PropertyNames"},
		{prop(`{"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": false}`), "UnevaluatedProperties"},
		{prop(`{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b"]}`), "Required b outside properties"},
		{prop(`{"type": "object", "additionalProperties": {"type": "integer"}, "required": ["b"]}`), "Required of a map"},
		{prop(`{"$ref": "#/$defs/i", "type": "integer"}`), "$ref beside type"},
		{prop(`{"oneOf": [{"type": "null"}, {"type": ["string", "null"]}]}`), "oneOf with branches that both match null"},
		{prop(`{"oneOf": [{"type": "null", "title": "t"}, {"type": "null"}, {"type": "string"}]}`), "oneOf with branches that both match null"},
		{prop(`{"anyOf": [{"type": "null", "not": {}}, {"type": "string"}]}`), "a null branch with other keywords"},
		{prop(`{"type": "null", "oneOf": [{"type": "string"}]}`), "oneOf or anyOf beside another oneOf, anyOf or type"},
		{prop(`{"type": "integer", "oneOf": [{"type": "integer"}]}`), "oneOf or anyOf beside type"},
		{prop(`{"type": "integer", "format": "date-time"}`), "Format"},
		{prop(`{"type": "string", "format": "not-a-format"}`), ""}, // not compiled: the validator asserts nothing
	} {
		s := c.schema
		if strings.Contains(s, "#/$defs/i") {
			s = strings.TrimSuffix(s, "}") + `, "$defs": {"i": {"type": "integer"}}}`
		}
		ws, err := CompileJSONSchema(1, s, nil)
		if err != nil || ws.DeltaErr != nil {
			t.Fatalf("%s: %v %v", s, err, ws.DeltaErr)
		}
		got := ws.body.(*jsonSchemaBody).needs
		if c.needs == "" && got != "" || c.needs != "" && !strings.HasPrefix(got, c.needs+" (") {
			t.Errorf("%s: needs %q, want %q", s, got, c.needs)
		}
	}
}
