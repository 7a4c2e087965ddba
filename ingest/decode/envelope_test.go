package decode

import (
	"bytes"
	"testing"

	"github.com/hamba/avro/v2"
)

// testEnvelope is a Debezium envelope cut to what Split reads and skips: before and
// after of one Value record, a source with lsn and ts_ms among other fields, op, ts_ms
// and a transaction block.
const testEnvelope = `{"type":"record","name":"Envelope","namespace":"pg.public.t","fields":[
  {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
    {"name":"id","type":"int"},{"name":"tags","type":{"type":"array","items":"string"}},
    {"name":"attrs","type":{"type":"map","values":"double"}},{"name":"name","type":["null","string"],"default":null}]}],"default":null},
  {"name":"after","type":["null","Value"],"default":null},
  {"name":"source","type":{"type":"record","name":"Source","fields":[
    {"name":"version","type":"string"},{"name":"ts_ms","type":"long"},
    {"name":"snapshot","type":[{"type":"string"},"null"],"default":"false"},
    {"name":"lsn","type":["null","long"],"default":null},{"name":"flag","type":"boolean"},
    {"name":"h","type":{"type":"fixed","name":"H","size":2}},{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}}]}},
  {"name":"transaction","type":["null",{"type":"record","name":"block","fields":[{"name":"id","type":"string"},{"name":"total_order","type":"long"}]}],"default":null},
  {"name":"op","type":"string"},
  {"name":"ts_ms","type":["null","long"],"default":null}]}`

func envelopeOf(t *testing.T, text string, kind string) (*Envelope, avro.Schema) {
	t.Helper()
	ws, err := ParseWriterSchema(9, text)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEnvelope(kind, ws)
	if err != nil {
		t.Fatal(err)
	}
	return e, ws.Avro
}

func marshal(t *testing.T, s avro.Schema, v any) []byte {
	t.Helper()
	b, err := avro.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEnvelopeSplitDebezium(t *testing.T) {
	e, s := envelopeOf(t, testEnvelope, EnvelopeDebezium)
	if got := e.Row.Delta.String(); got != "struct<id:integer,tags:array<string>,attrs:map<string,double>,name:string>" {
		t.Fatalf("row schema %s", got)
	}
	row := map[string]any{"id": int32(7), "tags": []any{"a", "bc"}, "attrs": map[string]any{"x": 1.5}, "name": map[string]any{"string": "ann"}}
	keyOnly := map[string]any{"id": int32(7), "tags": []any{}, "attrs": map[string]any{}, "name": nil}
	value := func(op string, before, after any, lsn any) map[string]any {
		return map[string]any{"before": before, "after": after, "op": op, "ts_ms": map[string]any{"long": int64(1700000001000)},
			"transaction": map[string]any{"pg.public.t.block": map[string]any{"id": "tx1", "total_order": int64(3)}},
			"source": map[string]any{"version": "2.7", "ts_ms": int64(1700000000000), "snapshot": map[string]any{"string": "true"},
				"lsn": lsn, "flag": true, "h": [2]byte{1, 2}, "e": "B"}}
	}
	wrap := func(r any) any { return map[string]any{"pg.public.t.Value": r} }
	rowBytes := marshal(t, e.Row.Avro, row)
	keyBytes := marshal(t, e.Row.Avro, keyOnly)
	for _, tc := range []struct {
		name    string
		v       map[string]any
		op      byte
		row     []byte
		lsn     int64
		withLSN bool
	}{
		{"create", value("c", nil, wrap(row), map[string]any{"long": int64(42)}), OpCreate, rowBytes, 42, true},
		{"snapshot read", value("r", nil, wrap(row), map[string]any{"long": int64(40)}), OpRead, rowBytes, 40, true},
		{"update with before", value("u", wrap(keyOnly), wrap(row), map[string]any{"long": int64(43)}), OpUpdate, rowBytes, 43, true},
		{"delete by before's key", value("d", wrap(keyOnly), nil, map[string]any{"long": int64(44)}), OpDelete, keyBytes, 44, true},
		{"truncate", value("t", nil, nil, nil), OpTruncate, nil, 0, false},
		{"message", value("m", nil, nil, nil), OpMessage, nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := e.Split(marshal(t, s, tc.v))
			if err != nil {
				t.Fatal(err)
			}
			if ch.Op != tc.op || !bytes.Equal(ch.Row, tc.row) || ch.LSN != tc.lsn || ch.HasLSN != tc.withLSN ||
				ch.SourceTsMs != 1700000000000 || !ch.HasSourceTsMs || ch.TsMs != 1700000001000 || !ch.HasTsMs {
				t.Fatalf("change %+v, want op %c row %x lsn %d (%v), source ts 1700000000000, ts 1700000001000", ch, tc.op, tc.row, tc.lsn, tc.withLSN)
			}
			if seq, ok := ch.Seq(SeqLSN); seq != tc.lsn || ok != tc.withLSN {
				t.Fatalf("Seq(source.lsn) = %d, %v", seq, ok)
			}
		})
	}
	good := marshal(t, s, value("c", nil, wrap(row), nil))
	for _, tc := range []struct {
		name, reason, field string
		body                []byte
	}{
		{"unknown op", ReasonDecodeError, "op", marshal(t, s, value("x", nil, wrap(row), nil))},
		{"create without after", ReasonDecodeError, "after", marshal(t, s, value("c", nil, nil, nil))},
		{"delete without before", ReasonMissingKey, "before", marshal(t, s, value("d", nil, nil, nil))},
		{"truncated", ReasonTruncated, "source.version", good[:len(rowBytes)+4]},
		{"trailing bytes", ReasonTrailingBytes, "", append(append([]byte{}, good...), 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Split(tc.body)
			if ReasonOf(err) != tc.reason || FieldOf(err) != tc.field {
				t.Fatalf("error %v (reason %q field %q), want %s at %q", err, ReasonOf(err), FieldOf(err), tc.reason, tc.field)
			}
		})
	}
}

func TestNewEnvelopeRefusesAPlainRow(t *testing.T) {
	ws, err := ParseWriterSchema(3, `{"type":"record","name":"R","fields":[{"name":"id","type":"int"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewEnvelope(EnvelopeDebezium, ws)
	if ReasonOf(err) != ReasonSchemaMismatch || FieldOf(err) != "op" {
		t.Fatalf("error %v, want schema_mismatch at op", err)
	}
}

// The flattened form: the row is the value without its "__" fields, a sub-slice of the
// body when they trail it and a copy when one sits between the row's own; __deleted
// deletes as a string or a boolean; without __op a record is an update.
func TestEnvelopeSplitFlattened(t *testing.T) {
	const trailing = `{"type":"record","name":"Value","fields":[{"name":"id","type":"int"},{"name":"name","type":"string"},
	  {"name":"__op","type":["null","string"],"default":null},{"name":"__lsn","type":["null","long"],"default":null},
	  {"name":"__source_ts_ms","type":"long"},{"name":"__table","type":"string"},{"name":"__deleted","type":"boolean"}]}`
	const between = `{"type":"record","name":"Value","fields":[{"name":"id","type":"int"},{"name":"__deleted","type":["null","string"]},
	  {"name":"name","type":"string"},{"name":"__ts_ms","type":"long"}]}`
	e, s := envelopeOf(t, trailing, EnvelopeDebeziumFlattened)
	if got := e.Row.Delta.String(); got != "struct<id:integer,name:string>" {
		t.Fatalf("row schema %s", got)
	}
	body := marshal(t, s, map[string]any{"id": int32(5), "name": "eve", "__op": map[string]any{"string": "u"}, "__lsn": map[string]any{"long": int64(77)},
		"__source_ts_ms": int64(123), "__table": "t", "__deleted": false})
	ch, err := e.Split(body)
	if err != nil {
		t.Fatal(err)
	}
	want := marshal(t, e.Row.Avro, map[string]any{"id": int32(5), "name": "eve"})
	if ch.Op != OpUpdate || !bytes.Equal(ch.Row, want) || &ch.Row[0] != &body[0] || ch.LSN != 77 || !ch.HasLSN || ch.SourceTsMs != 123 || ch.HasTsMs {
		t.Fatalf("change %+v, want u, row %x aliasing the body, lsn 77, source ts 123, no ts", ch, want)
	}
	body = marshal(t, s, map[string]any{"id": int32(5), "name": "", "__op": nil, "__lsn": nil, "__source_ts_ms": int64(1), "__table": "t", "__deleted": true})
	if ch, err = e.Split(body); err != nil || ch.Op != OpDelete || ch.HasLSN {
		t.Fatalf("change %+v, %v; want a delete without an LSN", ch, err)
	}

	e, s = envelopeOf(t, between, EnvelopeDebeziumFlattened)
	body = marshal(t, s, map[string]any{"id": int32(6), "__deleted": map[string]any{"string": "true"}, "name": "fay", "__ts_ms": int64(9)})
	if ch, err = e.Split(body); err != nil {
		t.Fatal(err)
	}
	want = marshal(t, e.Row.Avro, map[string]any{"id": int32(6), "name": "fay"})
	if ch.Op != OpDelete || !bytes.Equal(ch.Row, want) || ch.TsMs != 9 || !ch.HasTsMs {
		t.Fatalf("change %+v, want d, row %x, ts 9", ch, want)
	}
	body = marshal(t, s, map[string]any{"id": int32(6), "__deleted": map[string]any{"string": "false"}, "name": "fay", "__ts_ms": int64(9)})
	if ch, err = e.Split(body); err != nil || ch.Op != OpUpdate {
		t.Fatalf("change %+v, %v; want an update", ch, err)
	}
}
