package rowfill

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// KeySchemas are the key writer schemas a flush decodes _kafka_key with (key_format
// avro), resolved by the flush's owner before the Stage is built, so that a key's schema
// is never I/O while rows are filled. The Stage reads the maps during the flush and never
// writes them; the owner keeps them across flushes and must not change them while a
// Stage built on them is in use.
type KeySchemas struct {
	Schemas map[int]*decode.WriterSchema // the registry's key writer schemas, by schema id
	Fails   map[int]*decode.Error        // this flush's permanent lookup failures, by schema id
	// Connect reads Kafka Connect JSON keys (key_format connect_json), caching the
	// writer schema of each key schema text; nil: a fresh one per key.
	Connect *decode.ConnectSource
}

// connect is ks.Connect, or a fresh source when it is nil.
func (ks KeySchemas) connect() *decode.ConnectSource {
	if ks.Connect != nil {
		return ks.Connect
	}
	return decode.NewConnectSource()
}

// kafkaFill fills the Kafka columns of each written record (a columnFill): _kafka_topic,
// _kafka_partition, _kafka_offset and _kafka_timestamp (µs, the broker's milliseconds
// exactly; NULL for -1 and outside Delta's range: fillTimestamp),
// _kafka_headers (headerMap: the last value of a repeated key wins; a null
// value is NULL; no headers is an empty map) and _kafka_key in table.key_format.
// Errors: a *decode.Error with decode.ReasonKeyDecodeError for a key that cannot be
// written in the format (the record is dead-lettered with its bytes untouched), or
// decode.ReasonNotNullViolation for a null key in a NOT NULL _kafka_key.
type kafkaFill struct {
	cols    []string // configured table.kafka_columns
	format  string   // table.key_format
	schemas KeySchemas
	origin  func(*kgo.Record) Source // Options.Origin; nil: the record's own
	mode    deltalog.ColumnMappingMode
	pq      *parquet.Schema

	key       topColumn
	keyLeaves []int // leaf columns of _kafka_key (the struct's under avro)
	hdrKey    parquet.LeafColumn
	hdrValue  parquet.LeafColumn
	decs      map[int]*keyDecoder
	decErrs   map[int]error

	// row is the row view tops were looked up in (the flush's; New builds a fill per
	// flush), and tops the columns of kafkaSet's Kafka columns in it, by kafkaSet index:
	// found once, not by name for every column of every record (rowView.column).
	row  *rowView
	tops [len(kafkaSet)]kafkaTop

	// outOfRange is whether the last record filled had a timestamp outside Delta's range
	// (written NULL): Stage.Fill counts it once the row is placed.
	outOfRange bool

	// scratch, reused across records (replace copies the values into the buffers)
	entries    []header
	keys, vals []parquet.Value
	topics     map[string][]byte // topic name bytes, shared by the rows of a topic
}

// newKafkaFill builds the Kafka columns' fill for table schema (Parquet schema pq under
// column mapping mode cm). Errors: a configured Kafka column the schema lacks or cannot
// hold (kafkacols.Check).
func newKafkaFill(cfg *config.Config, schema *deltalog.StructType, cm deltalog.ColumnMappingMode, pq *parquet.Schema, o Options) (*kafkaFill, error) {
	if err := kafkacols.Check(schema, cfg.Table.KafkaColumns, cfg.Table.KeyFormat); err != nil {
		return nil, fmt.Errorf("fill Kafka columns of %s: %w", cfg.Table.URI, err)
	}
	k := &kafkaFill{cols: cfg.Table.KafkaColumns, format: cfg.Table.KeyFormat, schemas: o.Keys, origin: o.Origin, mode: cm, pq: pq,
		decs: map[int]*keyDecoder{}, decErrs: map[int]error{}}
	for _, f := range schema.Fields {
		switch deltalog.NameKey(f.Name) {
		case deltalog.NameKey(kafkacols.Column(kafkacols.Key)):
			k.key.field = f
		case deltalog.NameKey(kafkacols.Column(kafkacols.Headers)):
			phys := f.PhysicalName(cm)
			var ok1, ok2 bool
			k.hdrKey, ok1 = pq.Lookup(phys, "key_value", "key")
			k.hdrValue, ok2 = pq.Lookup(phys, "key_value", "value")
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("fill Kafka columns of %s: the Parquet schema has no key_value leaves under %s", cfg.Table.URI, phys)
			}
		}
	}
	if k.key.field != nil {
		phys := k.key.field.PhysicalName(cm)
		for _, path := range pq.Columns() {
			if len(path) > 0 && path[0] == phys {
				lc, _ := pq.Lookup(path...)
				k.keyLeaves = append(k.keyLeaves, lc.ColumnIndex)
			}
		}
	}
	return k, nil
}

func (k *kafkaFill) has(c string) bool { return slices.Contains(k.cols, c) }

func (k *kafkaFill) fill(rec *kgo.Record, row *rowView) error {
	topic, partition, offset, headers := rec.Topic, rec.Partition, rec.Offset, rec.Headers
	tsKnown, ms := false, int64(0)
	if k.origin != nil {
		src := k.origin(rec)
		topic, partition, offset, headers = src.Topic, src.Partition, src.Offset, src.Headers
		tsKnown, ms = true, src.TimestampMs
	}
	if k.row != row {
		k.bind(row)
	}
	set := func(i int, v parquet.Value) error { return k.set(row, i, v) }
	tb, ok := k.topics[topic]
	if !ok && k.has(kafkacols.Topic) {
		if k.topics == nil {
			k.topics = map[string][]byte{}
		}
		tb = []byte(topic)
		k.topics[topic] = tb
	}
	if err := set(setTopic, parquet.ByteArrayValue(tb)); err != nil {
		return err
	}
	if err := set(setPartition, parquet.Int32Value(partition)); err != nil {
		return err
	}
	if err := set(setOffset, parquet.Int64Value(offset)); err != nil {
		return err
	}
	if !tsKnown && k.tops[setTimestamp].has {
		ms = kafkacols.TimestampMillis(rec.Timestamp)
	}
	if err := k.fillTimestamp(ms, row); err != nil {
		return err
	}
	if k.has(kafkacols.Headers) {
		if err := checkHeaderKeys(headers); err != nil {
			return err
		}
		k.fillHeaders(headers, row)
	}
	if k.has(kafkacols.Key) {
		return k.fillKey(rec.Key, row)
	}
	return nil
}

// fillTimestamp sets _kafka_timestamp to the broker's milliseconds ms × 1000 µs (recovered
// exactly from franz-go's Record.Timestamp by kafkacols.TimestampMillis, or a replay's
// Source.TimestampMs): NULL for Kafka's
// -1 (no timestamp) and for a value outside the range Delta's readers hold
// (kafkacols.TimestampMicros: 0001-01-01..9999-12-31), which also sets outOfRange for the
// flush to count. A NULL for a NOT NULL _kafka_timestamp is a not_null_violation.
func (k *kafkaFill) fillTimestamp(ms int64, row *rowView) error {
	k.outOfRange = false
	if !k.tops[setTimestamp].has {
		return nil
	}
	us, ok, out := kafkacols.TimestampMicros(ms)
	if ok {
		return k.set(row, setTimestamp, parquet.Int64Value(us))
	}
	name := kafkacols.Column(kafkacols.Timestamp)
	if t := k.tops[setTimestamp]; t.ok && !t.col.field.Nullable {
		why := "the record has no timestamp (-1)"
		if out {
			why = fmt.Sprintf("the record's timestamp %d ms is outside %d..%d (0001-01-01..9999-12-31)", ms, kafkacols.TimestampMinMillis, kafkacols.TimestampMaxMillis)
		}
		return &decode.Error{Reason: decode.ReasonNotNullViolation, Field: name, Err: fmt.Errorf("%s, but column %s is NOT NULL", why, name)}
	}
	k.outOfRange = out
	return k.set(row, setTimestamp, parquet.NullValue())
}

// fillHeaders writes the map's key_value entries with the levels of its leaves: an
// empty map is one value per leaf one level below the key's maximum; entries after the
// first repeat at the key_value level; a null value is one level below its maximum.
func (k *kafkaFill) fillHeaders(hs []kgo.RecordHeader, row *rowView) {
	ki, vi := k.hdrKey.ColumnIndex, k.hdrValue.ColumnIndex
	kd, vd, rep := k.hdrKey.MaxDefinitionLevel, k.hdrValue.MaxDefinitionLevel, k.hdrKey.MaxRepetitionLevel
	k.entries = appendHeaderMap(k.entries[:0], hs)
	entries := k.entries
	if len(entries) == 0 {
		row.replace(ki, parquet.NullValue().Level(0, kd-1, ki))
		row.replace(vi, parquet.NullValue().Level(0, kd-1, vi))
		return
	}
	keys, vals := k.keys[:0], k.vals[:0]
	for j, e := range entries {
		r := 0
		if j > 0 {
			r = rep
		}
		keys = append(keys, parquet.ByteArrayValue([]byte(e.Key)).Level(r, kd, ki))
		if e.Value == nil {
			vals = append(vals, parquet.NullValue().Level(r, vd-1, vi))
		} else {
			vals = append(vals, parquet.ByteArrayValue(e.Value).Level(r, vd, vi))
		}
	}
	k.keys, k.vals = keys, vals
	row.replace(ki, keys...)
	row.replace(vi, vals...)
}

// fillKey writes _kafka_key in the key format.
func (k *kafkaFill) fillKey(key []byte, row *rowView) error {
	name := kafkacols.Column(kafkacols.Key)
	if key == nil {
		if !k.key.field.Nullable {
			return &decode.Error{Reason: decode.ReasonNotNullViolation, Field: name, Err: errors.New("the record key is null, but column _kafka_key is NOT NULL")}
		}
		for _, i := range k.keyLeaves {
			row.replace(i, parquet.NullValue().Level(0, 0, i))
		}
		return nil
	}
	switch k.format {
	case kafkacols.KeyString:
		if err := checkStringKey(key); err != nil {
			return err
		}
		return k.set(row, setKey, parquet.ByteArrayValue(key))
	case kafkacols.KeyAvro:
		return k.fillAvroKey(key, row)
	case kafkacols.KeyConnectJSON, kafkacols.KeyJSON:
		text, err := jsonKeyText(k.format, key)
		if err != nil {
			return err
		}
		return k.set(row, setKey, parquet.ByteArrayValue(text))
	}
	if len(key) == 0 {
		key = []byte{} // an empty key is X'', not NULL
	}
	return k.set(row, setKey, parquet.ByteArrayValue(key))
}

// jsonKeyText is what _kafka_key holds of a JSON key (a string column): under
// connect_json the text of its payload as the record has it ({"id":1} of
// {"schema": …, "payload": {"id":1}}: the schema is in every record and says nothing
// of this one), under json the key's text. Errors: a *decode.Error key_decode_error for a
// key that is not one JSON value (or not {"schema": …, "payload": …} under connect_json),
// its bytes untouched in the dead letter.
func jsonKeyText(format string, key []byte) ([]byte, error) {
	if !json.Valid(key) {
		return nil, keyError("decode key (table.key_format %s): not one valid JSON value", format)
	}
	if format == kafkacols.KeyJSON {
		return key, checkJSONKeyText(format, key)
	}
	var env struct {
		Schema  json.RawMessage `json:"schema"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(key, &env); err != nil || env.Schema == nil || env.Payload == nil {
		return nil, keyError(`decode key (table.key_format connect_json): not a Kafka Connect JSON record {"schema": …, "payload": …} (JsonConverter with schemas.enable=true; use key_format json without schemas)`)
	}
	return env.Payload, checkJSONKeyText(format, env.Payload)
}

// checkJSONKeyText refuses JSON text that is not UTF-8 (encoding/json lets it pass): a
// string column of other bytes is unreadable to readers that check UTF-8.
func checkJSONKeyText(format string, text []byte) error {
	if utf8.Valid(text) {
		return nil
	}
	i := decode.InvalidUTF8At(text)
	return keyError("decode key (table.key_format %s): byte %d (0x%02x) is not valid UTF-8", format, i, text[i])
}

// fillAvroKey decodes a Confluent-framed Avro key into the _kafka_key struct's leaves.
func (k *kafkaFill) fillAvroKey(key []byte, row *rowView) error {
	if len(key) == 0 {
		return keyError("decode key (table.key_format avro): the key is empty (0 bytes), not a Confluent-framed Avro value; a null key is written NULL")
	}
	id, payload, err := decode.ParseFrame(key)
	if err != nil {
		return keyError("decode key (table.key_format avro): %v", err)
	}
	dec, err := k.decoderFor(id)
	if err != nil {
		return err
	}
	vals, err := dec.Decode(payload)
	if err != nil {
		return err
	}
	for i, leaf := range dec.Leaves() {
		row.replace(leaf, vals[i]...)
	}
	return nil
}

// decoderFor compiles (once per flush and id) the decoder of key schema id.
func (k *kafkaFill) decoderFor(id int) (*keyDecoder, error) {
	if d, ok := k.decs[id]; ok {
		return d, nil
	}
	if err, ok := k.decErrs[id]; ok {
		return nil, err
	}
	var d *keyDecoder
	var err error
	switch ws, fail := k.schemas.Schemas[id], k.schemas.Fails[id]; {
	case fail != nil:
		err = keyError("resolve key schema id %d: %v", id, fail)
	case ws == nil:
		err = keyError("resolve key schema id %d: not looked up before the flush", id)
	default:
		d, err = compileKey(ws, k.key.field, k.mode, k.pq)
	}
	if err != nil {
		if _, ok := err.(*decode.Error); !ok {
			err = keyError("%v", err)
		}
		k.decErrs[id] = err
		return nil, err
	}
	k.decs[id] = d
	return d, nil
}

// ValueTable is the table schema a value decoder is compiled against (decode.Compile)
// for a flush whose Stage fills the Kafka columns names (kafkacols.Columns of
// table.kafka_columns: _kafka_key, …): schema with those columns made nullable, so that
// a NOT NULL Kafka column of an existing table is not "missing" from the value schema
// (the decoder writes placeholders there, which the Stage's Kafka fill replaces). The
// Parquet layout does not change: every top-level field is OPTIONAL in the data files.
// It returns schema itself when there is nothing to relax, else a copy.
func ValueTable(schema *deltalog.StructType, names []string) *deltalog.StructType {
	var out *deltalog.StructType
	for i, f := range schema.Fields {
		if f.Nullable || !slices.ContainsFunc(names, func(n string) bool { return deltalog.NameKey(n) == deltalog.NameKey(f.Name) }) {
			continue
		}
		if out == nil {
			out = &deltalog.StructType{Fields: slices.Clone(schema.Fields)}
		}
		relaxed := *f
		relaxed.Nullable = true
		out.Fields[i] = &relaxed
	}
	if out == nil {
		return schema
	}
	return out
}

// kafkaSet are the Kafka columns kafkaFill.fill sets as one value (setTop), by index.
// (setKey: a string or binary key; fillKey writes a null or an Avro key leaf by leaf.)
var kafkaSet = [...]string{setTopic: kafkacols.Topic, setPartition: kafkacols.Partition, setOffset: kafkacols.Offset,
	setTimestamp: kafkacols.Timestamp, setKey: kafkacols.Key}

const (
	setTopic = iota
	setPartition
	setOffset
	setTimestamp
	setKey
)

// kafkaTop is one of kafkaSet's columns in a flush's row view: has when configured, ok
// when the table has it as a top-level primitive column (col).
type kafkaTop struct {
	col     topColumn
	has, ok bool
}

// set sets kafkaSet's column i of the row to v (rowView.setTop) when it is configured.
func (k *kafkaFill) set(row *rowView, i int, v parquet.Value) error {
	switch t := &k.tops[i]; {
	case !t.has:
		return nil
	case !t.ok:
		return row.setTop(kafkacols.Column(kafkaSet[i]), v) // the error naming the column
	default:
		row.setColumn(t.col, v)
		return nil
	}
}

// bind looks kafkaSet's configured columns up in row, the flush's row view.
func (k *kafkaFill) bind(row *rowView) {
	k.row = row
	for i, c := range kafkaSet {
		t := kafkaTop{has: k.has(c)}
		if t.has {
			t.col, t.ok = row.column(kafkacols.Column(c))
			t.ok = t.ok && t.col.primitive
		}
		k.tops[i] = t
	}
}
