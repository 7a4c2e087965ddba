package decode

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/schemaguard"
)

func mustTable(t testing.TB, js string) *deltalog.StructType {
	t.Helper()
	var st deltalog.StructType
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// jsonTable: id long NOT NULL, amount decimal(20,2), ts timestamp, d date, tags
// array<string>, s struct<a:int>, m map<string,long>, b binary, f double, ok boolean,
// _kafka_offset long (a Kafka column: never from the record).
const jsonTable = `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"amount","type":"decimal(20,2)","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"d","type":"date","nullable":true,"metadata":{}},
 {"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}},
 {"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
 {"name":"m","type":{"type":"map","keyType":"string","valueType":"long","valueContainsNull":true},"nullable":true,"metadata":{}},
 {"name":"b","type":"binary","nullable":true,"metadata":{}},
 {"name":"f","type":"double","nullable":true,"metadata":{}},
 {"name":"ok","type":"boolean","nullable":true,"metadata":{}},
 {"name":"_kafka_offset","type":"long","nullable":true,"metadata":{}}]}`

// jsonValue is a document's transcoded body as Avro values (what dlq inspect shows).
func jsonValue(t testing.TB, ws *WriterSchema, body []byte) (map[string]any, error) {
	t.Helper()
	a, err := ws.Transcode(body)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := avro.Unmarshal(ws.Avro, a, &v); err != nil {
		t.Fatalf("avro unmarshal of the transcoded body: %v", err)
	}
	return v, nil
}

func TestPlainJSONValues(t *testing.T) {
	table := mustTable(t, jsonTable)
	src := NewJSONSource(nil, []string{"_kafka_offset"})
	doc := []byte(`{"id": 9007199254740993, "amount": 12345678901234567.89, "ts": "2024-05-01T12:00:00.123456+02:00", "d": "2024-02-29",
	 "tags": ["a", null, "\u00e9\n"], "s": {"a": -7}, "m": {"k": 1, "l": null}, "b": "AAEC", "f": 1e-3, "ok": false}`)
	ws, body, err := src.Writer(table, doc)
	if err != nil || ws.DeltaErr != nil {
		t.Fatal(err, ws.DeltaErr)
	}
	if got := ws.Delta.String(); got != "struct<id:long,amount:decimal(20,2),ts:timestamp,d:date,tags:array<string>,s:struct<a:integer>,m:map<string,long>,b:binary,f:double,ok:boolean>" {
		t.Fatalf("writer schema %s", got)
	}
	got, err := jsonValue(t, ws, body)
	if err != nil {
		t.Fatal(err)
	}
	amount, _ := new(big.Rat).SetString("12345678901234567.89")
	want := map[string]any{"id": int64(9007199254740993), "amount": amount, "ts": time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC),
		"d": time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), "tags": map[string]any{"array": []any{"a", nil, "é\n"}}, "s": map[string]any{"r2": map[string]any{"a": -7}},
		"m": map[string]any{"map": map[string]any{"k": int64(1), "l": nil}}, "b": []byte{0, 1, 2}, "f": 0.001, "ok": false}
	for k, w := range want {
		if r, ok := w.(*big.Rat); ok {
			if g, ok := got[k].(*big.Rat); !ok || g.Cmp(r) != 0 {
				t.Errorf("%s = %v, want %v", k, got[k], w)
			}
			continue
		}
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s = %#v, want %#v", k, got[k], w)
		}
	}
	// A document with only the same keys shares the writer schema (no drift).
	ws2, _, _ := src.Writer(table, []byte(`{"ok": true, "id": 1}`))
	if ws2 != ws {
		t.Fatal("a second document of the same columns got another writer schema")
	}
}

func TestPlainJSONDrift(t *testing.T) {
	table := mustTable(t, jsonTable)
	src := NewJSONSource(nil, []string{"_kafka_offset"})
	ws, _, err := src.Writer(table, []byte(`{"id": 1, "n": 18446744073709551616, "c": 7, "name": "x", "flag": true, "obj": {"x": [1, 2], "e": {}}, "list": [{"q": 1.5}], "nul": null, "empty": []}`))
	if err != nil || ws.DeltaErr != nil {
		t.Fatal(err, ws.DeltaErr)
	}
	// New keys in document order, each nullable with the inferred type; null, [] and {}
	// add nothing; a number beyond 64 bits infers double.
	want := "struct<id:long,amount:decimal(20,2),ts:timestamp,d:date,tags:array<string>,s:struct<a:integer>,m:map<string,long>,b:binary,f:double,ok:boolean," +
		"n:double,c:long,name:string,flag:boolean,obj:struct<x:array<long>>,list:array<struct<q:double>>>"
	if got := ws.Delta.String(); got != want {
		t.Fatalf("drifted writer\n got %s\nwant %s", got, want)
	}
	if _, _, err := src.Writer(table, []byte(`{"id": 1, "_kafka_offset": 3}`)); ReasonOf(err) != ReasonKafkaColumnCollision {
		t.Fatalf("a key named like a Kafka column: %v", err)
	}
	if _, _, err := src.Writer(table, []byte(`{"id": 1, "mixed": [1, "a"]}`)); ReasonOf(err) != ReasonDecodeError || FieldOf(err) != "mixed" {
		t.Fatalf("a new array of mixed items: %v", err)
	}
	// With a schema file, the file's columns are the base, whatever the table.
	file := mustTable(t, `{"type":"struct","fields":[{"name":"k","type":"string","nullable":true,"metadata":{}}]}`)
	ws, _, err = NewJSONSource(file, nil).Writer(nil, []byte(`{"k": "v", "z": 1}`))
	if err != nil || ws.Delta.String() != "struct<k:string,z:long>" {
		t.Fatalf("schema file base: %v %v", err, ws.Delta)
	}
}

func TestPlainJSONDeadLetters(t *testing.T) {
	table := mustTable(t, jsonTable)
	src := NewJSONSource(nil, []string{"_kafka_offset"})
	deep := strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)
	for _, c := range []struct{ doc, reason, field, msg string }{
		{`{"id": 1, "amount": 1.005}`, ReasonDecodeError, "amount", "more than 2 digits after the point"},
		{`{"id": 1, "amount": 1e30}`, ReasonDecodeError, "amount", "more than 18 digits before the point"},
		{`{"id": 1, "s": {"a": "y"}}`, ReasonDecodeError, "s.a", "JSON string where the column wants an integer within 32 bits"},
		{`{"id": 1, "s": {"zz": 1}}`, ReasonDecodeError, "s.zz", "not a field of the column's struct"},
		{`{"id": 1, "ts": "2024-05-01T12:00:00"}`, ReasonDecodeError, "ts", "with an offset"},
		{`{"id": 1, "ts": "2024-05-01T12:00:00.0000001Z"}`, ReasonDecodeError, "ts", "below the microsecond"},
		// Delta's timestamps and dates are within 0001-01-01..9999-12-31 UTC (PROTOCOL.md,
		// "Primitive Types"): a year 0 in UTC, or a year-0 date, makes the file's statistics
		// unreadable to delta-rs ("year 0 is out of range").
		{`{"id": 1, "ts": "0001-01-01T00:00:00+00:01"}`, ReasonDecodeError, "ts", `timestamp "0001-01-01T00:00:00+00:01" is outside 0001-01-01..9999-12-31`},
		{`{"id": 1, "ts": "0001-01-01T00:00:00.5+01:00"}`, ReasonDecodeError, "ts", "is outside 0001-01-01..9999-12-31"},
		{`{"id": 1, "d": "0000-01-01"}`, ReasonDecodeError, "d", `date "0000-01-01" is outside 0001-01-01..9999-12-31`},
		{`{"id": 1, "d": "0000-12-31"}`, ReasonDecodeError, "d", "is outside 0001-01-01..9999-12-31"},
		{`{"id": 1, "tags": [1]}`, ReasonDecodeError, "tags[]", "JSON number where the column wants a string"},
		{`{"id": null}`, ReasonNotNullViolation, "id", "null for a NOT NULL column"},
		{`{"id": 1, "ID": 2}`, ReasonDecodeError, "ID", "two keys name the same column"},
		{`{"id": 1, "new": 1, "NEW": 2}`, ReasonDecodeError, "NEW", "two keys name the same column"},
		{`{"id": 1, "obj": {"a": 1, "A": 2}}`, ReasonDecodeError, "obj.A", "two keys name the same column"},
		{`{"id": 1, "id": 2}`, ReasonDecodeError, "id", "the key appears twice"},
		{`{"id": 1, "s": {"a": 1, "a": 2}}`, ReasonDecodeError, "s.a", "the key appears twice"},
		{`{"id": 1,}`, ReasonDecodeError, "", "invalid JSON at offset 9: want a key"},
		{`{"id": 1} x`, ReasonTrailingBytes, "", "1 bytes after the document"},
		{`[1]`, ReasonDecodeError, "", "JSON array where a record wants an object"},
		{`not json{`, ReasonDecodeError, "", "invalid JSON at offset 0: not a JSON value, want an object"},
		{`nul`, ReasonDecodeError, "", "invalid JSON at offset 0: not a JSON value"},
		{`xyz`, ReasonDecodeError, "", "invalid JSON at offset 0: not a JSON value"},
		{``, ReasonDecodeError, "", "empty"},
		{`{"id": 1, "x": "` + "\xff" + `"}`, ReasonDecodeError, "x", "not valid UTF-8"},
		{`{"id": 1, "x": "a\ud800"}`, ReasonDecodeError, "x", "lone UTF-16 surrogate"},
		{`{"id": 1, "x": "\udc00\ud83d"}`, ReasonDecodeError, "x", "lone UTF-16 surrogate"},
		{`{"id": 1, "x": "\ud83d\u0041"}`, ReasonDecodeError, "x", "lone UTF-16 surrogate"},
		{`{"id": 1, "x": ` + deep + `}`, ReasonDecodeError, "x" + strings.Repeat(".a", 65), "nested deeper than 64"},
	} {
		ws, body, err := src.Writer(table, []byte(c.doc))
		if err == nil && ws.DeltaErr == nil {
			_, err = jsonValue(t, ws, body)
		}
		if ReasonOf(err) != c.reason || FieldOf(err) != c.field || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v (field %q), want %s at %q with %q", c.doc, err, FieldOf(err), c.reason, c.field, c.msg)
		}
	}
}

// TestPlainJSONTypeChanges: with the table as the base, a top-level key whose JSON type
// is not its column's, and a missing key of a NOT NULL column, change the record's writer
// schema, so the guard decides them as the decision table says (a widening, an
// incompatible type, a missing NOT NULL column) under the pipeline's policy, instead of
// dead-lettering them as unreadable whatever the policy. With a schema file they stay
// the record's fault (decode_error, not_null_violation).
func TestPlainJSONTypeChanges(t *testing.T) {
	table := mustTable(t, `{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":false,"metadata":{}},
 {"name":"qty","type":"integer","nullable":true,"metadata":{}},
 {"name":"status","type":"string","nullable":true,"metadata":{}},
 {"name":"at","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
 {"name":"_kafka_offset","type":"long","nullable":true,"metadata":{}}]}`)
	src := NewJSONSource(nil, []string{"_kafka_offset"})
	for _, c := range []struct{ doc, writer, changes string }{
		// Values of the columns' JSON types keep the table's writer schema.
		{`{"id": 1, "qty": -2147483648, "status": "x", "at": "2024-05-01T00:00:00Z", "s": {"a": 1}}`,
			"struct<id:long,qty:integer,status:string,at:timestamp,s:struct<a:integer>>", "[]"},
		{`{"id": 1, "qty": null, "status": null}`, "struct<id:long,qty:integer,status:string,at:timestamp,s:struct<a:integer>>", "[]"},
		// int32 → int64: a widening.
		{`{"id": 1, "qty": 3000000000}`, "struct<id:long,qty:long,status:string,at:timestamp,s:struct<a:integer>>", "[widen qty integer→long]"},
		// string → number, number → string, a fraction for a long, a number beyond 64 bits,
		// a number for a timestamp, a string for a struct: incompatible.
		{`{"id": 1, "status": 7}`, "struct<id:long,qty:integer,status:long,at:timestamp,s:struct<a:integer>>", "[type_mismatch status string→long]"},
		{`{"id": "1"}`, "struct<id:string,qty:integer,status:string,at:timestamp,s:struct<a:integer>>", "[type_mismatch id long→string]"},
		{`{"id": 1.5}`, "struct<id:double,qty:integer,status:string,at:timestamp,s:struct<a:integer>>", "[type_mismatch id long→double]"},
		{`{"id": 9223372036854775808}`, "struct<id:double,qty:integer,status:string,at:timestamp,s:struct<a:integer>>", "[type_mismatch id long→double]"},
		{`{"id": 1, "at": 1714557600}`, "struct<id:long,qty:integer,status:string,at:long,s:struct<a:integer>>", "[type_mismatch at timestamp→long]"},
		{`{"id": 1, "s": "a"}`, "struct<id:long,qty:integer,status:string,at:timestamp,s:string>", "[type_mismatch s struct<a:integer>→string]"},
		// A missing key of a NOT NULL column: the writer lacks the column. Of a nullable
		// one: the same writer, the column NULL.
		{`{"qty": 1}`, "struct<qty:integer,status:string,at:timestamp,s:struct<a:integer>>", "[missing_not_null id long→]"},
		{`{"id": 1}`, "struct<id:long,qty:integer,status:string,at:timestamp,s:struct<a:integer>>", "[]"},
	} {
		ws, _, err := src.Writer(table, []byte(c.doc))
		if err != nil || ws.DeltaErr != nil {
			t.Errorf("%s: %v %v", c.doc, err, ws.DeltaErr)
			continue
		}
		var changes []string
		for _, ch := range schemaguard.DiffValue(table, ws.Delta, []string{"_kafka_offset"}) {
			changes = append(changes, fmt.Sprintf("%s %s %s→%s", ch.Kind, ch.Path, ch.TableType, ch.WriterType))
		}
		if got := ws.Delta.String(); got != c.writer || fmt.Sprint(changes) != c.changes {
			t.Errorf("%s: writer %s, changes %v\nwant writer %s, changes %s", c.doc, got, changes, c.writer, c.changes)
		}
	}
	// Nested values are not retyped: nested objects do not evolve.
	ws, body, err := src.Writer(table, []byte(`{"id": 1, "s": {"a": "y"}}`))
	if err == nil {
		_, err = jsonValue(t, ws, body)
	}
	if ReasonOf(err) != ReasonDecodeError || FieldOf(err) != "s.a" {
		t.Errorf("a nested string for an integer: %v at %q, want decode_error at s.a", err, FieldOf(err))
	}
	// With a schema file, the file is the writer schema.
	file := mustTable(t, `{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},{"name":"qty","type":"integer","nullable":true,"metadata":{}}]}`)
	fsrc := NewJSONSource(file, nil)
	for _, c := range []struct{ doc, reason, field string }{
		{`{"id": 1, "qty": 3000000000}`, ReasonDecodeError, "qty"},
		{`{"id": "1"}`, ReasonDecodeError, "id"},
		{`{"qty": 1}`, ReasonNotNullViolation, "id"},
	} {
		ws, body, err := fsrc.Writer(table, []byte(c.doc))
		if err == nil {
			if got := ws.Delta.String(); got != "struct<id:long,qty:integer>" {
				t.Errorf("%s with a schema file: writer %s", c.doc, got)
			}
			_, err = jsonValue(t, ws, body)
		}
		if ReasonOf(err) != c.reason || FieldOf(err) != c.field {
			t.Errorf("%s with a schema file: %v at %q, want %s at %s", c.doc, err, FieldOf(err), c.reason, c.field)
		}
	}
}

func TestConnectJSON(t *testing.T) {
	src := NewConnectSource()
	schema := `{"type":"struct","name":"orders.Value","optional":false,"fields":[
	 {"type":"int64","optional":false,"field":"id"},
	 {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"amount"},
	 {"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","field":"day"},
	 {"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","field":"at"},
	 {"type":"int16","optional":true,"field":"small"},
	 {"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"tags"},
	 {"type":"map","keys":{"type":"string","optional":false},"values":{"type":"float64","optional":true},"optional":true,"field":"scores"},
	 {"type":"struct","fields":[{"type":"string","optional":true,"field":"city"}],"optional":true,"field":"addr"}]}`
	doc := fmt.Sprintf(`{"schema": %s, "payload": {"id": 42, "amount": "/zg=", "day": 19844, "at": 1714557600123, "small": -3, "tags": ["x"], "scores": {"a": 0.5}, "addr": {"city": "Zürich"}}}`, schema)
	ws, body, err := src.Writer(nil, []byte(doc))
	if err != nil || ws.DeltaErr != nil {
		t.Fatal(err, ws.DeltaErr)
	}
	if got := ws.Delta.String(); got != "struct<id:long,amount:decimal(10,2),day:date,at:timestamp,small:integer,tags:array<string>,scores:map<string,double>,addr:struct<city:string>>" {
		t.Fatalf("connect writer schema %s", got)
	}
	got, err := jsonValue(t, ws, body)
	if err != nil {
		t.Fatal(err)
	}
	amount := got["amount"].(*big.Rat)
	if amount.FloatString(2) != "-2.00" || got["id"] != int64(42) || got["day"] != time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC) ||
		got["at"] != time.Date(2024, 5, 1, 10, 0, 0, 123000000, time.UTC) || got["small"] != -3 || !reflect.DeepEqual(got["tags"], map[string]any{"array": []any{"x"}}) ||
		!reflect.DeepEqual(got["scores"], map[string]any{"map": map[string]any{"a": 0.5}}) || !reflect.DeepEqual(got["addr"], map[string]any{"r2": map[string]any{"city": "Zürich"}}) {
		t.Fatalf("connect values %v", got)
	}
	// The same schema text is the same writer schema; a decimal as a JSON number
	// (decimal.format NUMERIC) is exact too.
	ws2, body, _ := src.Writer(nil, []byte(fmt.Sprintf(`{"schema": %s, "payload": {"id": 1, "amount": 12.34}}`, schema)))
	got, err = jsonValue(t, ws2, body)
	if ws2 != ws || err != nil || got["amount"].(*big.Rat).FloatString(2) != "12.34" {
		t.Fatalf("numeric decimal: %v %v", err, got["amount"])
	}
	for _, c := range []struct{ doc, reason string }{
		{`{"payload": {}}`, ReasonDecodeError},
		{`{"schema": {"type": "string"}, "payload": "x"}`, ReasonUnsupportedType},
		{`{"schema": {"type": "struct", "fields": [{"type": "uint64", "field": "u"}]}, "payload": {}}`, ReasonUnsupportedType},
	} {
		ws, _, err := src.Writer(nil, []byte(c.doc))
		if err == nil {
			err = ws.DeltaErr
		}
		if ReasonOf(err) != c.reason {
			t.Errorf("%s: %v, want %s", c.doc, err, c.reason)
		}
	}
}

// Escaped surrogate pairs, escaped backslashes before "u" and literal text are kept;
// a surrogate escape without its pair is refused (TestPlainJSONDeadLetters).
func TestLoneSurrogate(t *testing.T) {
	for raw, want := range map[string]bool{
		`a\ud83d\ude00b`: false, // U+1F600 as a pair
		`\\ud800`:        false, // an escaped backslash, then the text "ud800"
		`\"\u00e9\n`:     false,
		`\ud800`:         true,
		`\ude00`:         true,
		`\ud83d\\ude00`:  true,
		`x\ud83d`:        true,
	} {
		if got := loneSurrogate([]byte(raw)); got != want {
			t.Errorf("loneSurrogate(%s) = %v, want %v", raw, got, want)
		}
	}
}
