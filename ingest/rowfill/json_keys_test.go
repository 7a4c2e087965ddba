package rowfill

import (
	"testing"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// A plain JSON key's numbers are read exactly (json.Number): 2^53 + 1 is not rounded to
// 2^53 as a float64 would; a bare scalar names a one-column key; what does not fit the
// column is refused with the column named.
func TestJSONKeyValues(t *testing.T) {
	k := &keyFill{key: []keyColumn{{name: "id", field: &deltalog.StructField{Name: "id", Type: deltalog.Long}}}}
	for _, c := range []struct {
		key  string
		want int64
		err  string
	}{
		{key: `{"id":9007199254740993}`, want: 9007199254740993},
		{key: `9007199254740993`, want: 9007199254740993},
		{key: ` {"ID": -42} `, want: -42},
		{key: `{"id":"17"}`, want: 17},
		{key: `{"id":1e3}`, err: "decode: missing_key at id: a tombstone's JSON key: 1e3 is not an integer within 64 bits (key column type long)"},
		{key: `{"id":true}`, err: "decode: missing_key at id: a tombstone's JSON key: a bool value cannot name a long key column"},
		{key: `{"id":null}`, err: "decode: missing_key at id: a tombstone's JSON key has no value for key column id"},
		{key: `[1]`, err: "decode: missing_key at id: a tombstone's JSON key: a JSON array cannot name a long key column"},
	} {
		v, err := plainJSONKey([]byte(c.key))
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		vals, err := k.keyValues(v, "JSON key", jsonKeyValue)
		switch {
		case c.err != "":
			if err == nil || err.Error() != c.err || decode.ReasonOf(err) != decode.ReasonMissingKey {
				t.Errorf("%s: %v, want %s", c.key, err, c.err)
			}
		case err != nil || len(vals) != 1 || vals[0].Int64() != c.want:
			t.Errorf("%s: %v %v, want %d", c.key, vals, err, c.want)
		}
	}
	for _, bad := range []string{`{"id":1} {"id":2}`, `{"id":`, ``} {
		if _, err := plainJSONKey([]byte(bad)); err == nil {
			t.Errorf("%q: read as a key", bad)
		}
	}
}

// _kafka_key of a JSON key is its text; of a Kafka Connect JSON key its payload's text;
// a key that is not that is a key_decode_error.
func TestJSONKeyText(t *testing.T) {
	for _, c := range []struct {
		format, key, want, err string
	}{
		{kafkacols.KeyJSON, `{"id":1}`, `{"id":1}`, ""},
		{kafkacols.KeyJSON, `7`, `7`, ""},
		{kafkacols.KeyJSON, `{"id":`, "", "decode: key_decode_error at _kafka_key: decode key (table.key_format json): not one valid JSON value"},
		{kafkacols.KeyJSON, "\"a\xffb\"", "", "decode: key_decode_error at _kafka_key: decode key (table.key_format json): byte 2 (0xff) is not valid UTF-8"},
		{kafkacols.KeyConnectJSON, `{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}]},"payload":{"id": 1}}`, `{"id": 1}`, ""},
		{kafkacols.KeyConnectJSON, `{"id":1}`, "", `decode: key_decode_error at _kafka_key: decode key (table.key_format connect_json): not a Kafka Connect JSON record {"schema": …, "payload": …} (JsonConverter with schemas.enable=true; use key_format json without schemas)`},
	} {
		got, err := jsonKeyText(c.format, []byte(c.key))
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s %s: %v, want %s", c.format, c.key, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%s %s: %q %v, want %q", c.format, c.key, got, err, c.want)
		}
	}
	if got := kafkacols.Type(kafkacols.Key, kafkacols.KeyConnectJSON, nil); got != deltalog.String {
		t.Errorf("_kafka_key under connect_json is %v, want string", got)
	}
}
