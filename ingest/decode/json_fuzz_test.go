package decode

import (
	"bytes"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FuzzJSON feeds arbitrary documents to plain JSON (against jsonTable, new keys inferred)
// and, when the first byte is 'C', the rest to Kafka Connect JSON: no panic, a reasoned
// *Error or exactly one row, the rollback on failure, and no transcoding beyond the
// stated bound.
func FuzzJSON(f *testing.F) {
	table := mustTable(f, jsonTable)
	for _, s := range []string{
		`{"id": 9007199254740993, "amount": 1.25, "ts": "2024-05-01T12:00:00Z", "d": "2024-02-29", "tags": ["a", null], "s": {"a": 1}, "m": {"k": 2}, "b": "AA==", "f": 1e3, "ok": true}`,
		`{"id": 1, "new": {"x": [1, 2]}, "other": "s"}`,
		`{"id": 1, "id": 2}`,
		`{"id": 1, "s": {"a": "x"}}`,
		`C{"schema": {"type": "struct", "fields": [{"type": "int64", "field": "id"}, {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}, "field": "a"}]}, "payload": {"id": 1, "a": "AQ=="}}`,
	} {
		f.Add([]byte(s))
	}
	plain := NewJSONSource(nil, []string{"_kafka_offset"})
	connect := NewConnectSource()
	decs := map[*WriterSchema]*transcodingFuzz{}
	var arena Arena
	arena.AliasPayloads()
	f.Fuzz(func(t *testing.T, in []byte) {
		var src DocumentSource = plain
		if len(in) > 0 && in[0] == 'C' {
			src, in = connect, in[1:]
		}
		ws, body, err := src.Writer(table, in)
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if ws.DeltaErr != nil {
			return
		}
		checkExpansion(t, ws, body)
		c := decs[ws]
		if c == nil {
			if len(decs) > 64 {
				clear(decs)
			}
			c = newTranscodingFuzz(t, ws)
			decs[ws] = c
		}
		c.decode(t, &arena, body)
	})
}

// FuzzJSONSchema feeds arbitrary JSON Schema texts to CompileJSONSchema and a record to
// what compiles: no panic, reasoned errors only, and a record of a schema the validator
// does not read (jsGen.needs "") accepted only if the validator accepts it.
func FuzzJSONSchema(f *testing.F) {
	f.Add([]byte(jsOrder), []byte(`{"id": 1, "price": 2, "customer": {"cid": 3}}`))
	f.Add([]byte(`{"type": "object", "properties": {"a": {"type": "array", "items": {"$ref": "#/properties/a"}}}}`), []byte(`{"a": [[]]}`))
	f.Add([]byte(`{"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": ["null", "number"]}}}}`), []byte(`{"m": {"x": null}}`))
	for _, s := range jsTyped {
		f.Add([]byte(s), []byte(jsDocs[1]))
	}
	f.Fuzz(func(t *testing.T, schema, doc []byte) {
		ws, err := CompileJSONSchema(1, string(schema), map[string]string{"customer.json": jsCustomer})
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if ws.DeltaErr != nil {
			if ReasonOf(ws.DeltaErr) == "" {
				t.Fatalf("DeltaErr without a reason: %v", ws.DeltaErr)
			}
			return
		}
		_, err = ws.Transcode(doc)
		if err != nil && ReasonOf(err) == "" {
			t.Fatalf("record error without a reason: %v", err)
		}
		if jb := ws.body.(*jsonSchemaBody); err == nil && jb.needs == "" {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
			if err == nil {
				err = jb.sch.Validate(v)
			}
			if err != nil {
				t.Fatalf("%s accepted without the validator, which refuses it: %v", doc, err)
			}
		}
	})
}
