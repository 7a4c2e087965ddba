package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/dlq"
	"github.com/ingestd/ingestd/ingest/kafkacols"
	"github.com/ingestd/ingestd/ingest/rowfill"
)

// kafkaState is what a flusher keeps for the Kafka columns (table.kafka_columns) across
// flushes: the key writer schemas resolved by id (key_format avro) and whether its
// records are dead letters (a replay: the columns then hold the original record's
// coordinates and headers, dlq.Original, dlq.OriginalHeaders).
type kafkaState struct {
	replay  bool
	schemas map[int]*decode.WriterSchema // key writer schemas by id
	fails   map[int]*decode.Error        // this flush's permanent lookup failures by id
	// subjectKey is the id of the latest schema of subject <topic>-key, looked up when a
	// batch that creates the table has no record whose key resolves (0: none).
	subjectKey int
}

// latestIDSource is a schema source that also answers a subject's latest schema id
// (decode.Registry).
type latestIDSource interface {
	LatestID(ctx context.Context, subject string) (int, error)
}

func newKafkaState(md mode) *kafkaState {
	_, replay := md.(*replayMode)
	return &kafkaState{replay: replay, schemas: map[int]*decode.WriterSchema{}, fails: map[int]*decode.Error{}}
}

// kafkaColumns are the pipeline's Kafka column names (_kafka_key, …); none without
// table.kafka_columns.
func kafkaColumns(cfg *config.Config) []string { return kafkacols.Columns(cfg.Table.KafkaColumns) }

// avroKeys reports whether the pipeline decodes keys as Avro into _kafka_key.
func avroKeys(cfg *config.Config) bool {
	return cfg.Table.KeyFormat == kafkacols.KeyAvro && slices.Contains(cfg.Table.KafkaColumns, kafkacols.Key)
}

// resolveKeys looks up, before the flush decides anything, the key writer schemas of
// the records the guard routes (key_format avro): during the flush a key's schema is
// then never I/O. A key that is not Confluent-framed is left to the fill (a
// key_decode_error). Errors: a *transientError when the registry fails transiently, the
// registry's refusal of the credentials (permanent); a schema id the registry does not
// serve is a per-record key_decode_error, remembered for this flush only.
//
// Without a table, when no routed record's key resolves, it also looks up the latest
// schema of subject <topic>-key (Confluent's TopicNameStrategy; the first such topic of
// the batch, in record order) to type the _kafka_key column of the table the batch may
// create (kafkaState.subjectKey; an unknown subject leaves it 0).
func (f *flusher) resolveKeys(ctx context.Context, t tableState, items []item) error {
	if !avroKeys(f.cfg) {
		return nil
	}
	ks := f.kafka
	clear(ks.fails)
	ks.subjectKey = 0
	resolved := false
	if len(ks.schemas) > 1024 {
		clear(ks.schemas)
	}
	for i := range items {
		it := &items[i]
		if it.route != routeGuard || it.fail != nil || len(it.rec.Key) == 0 {
			continue
		}
		id, _, err := decode.ParseFrame(it.rec.Key)
		if err != nil {
			continue
		}
		if _, ok := ks.schemas[id]; ok {
			resolved = true
			continue
		}
		if _, ok := ks.fails[id]; ok {
			continue
		}
		ws, err := f.deps.Schemas.Schema(ctx, id)
		var de *decode.Error
		switch {
		case errors.As(err, &de):
			ks.fails[id] = de
		case errors.Is(err, decode.ErrRegistryAuth):
			return err
		case err != nil:
			return &transientError{"resolve key schema id " + strconv.Itoa(id), err}
		default:
			ks.schemas[id] = ws
			resolved = true
		}
	}
	if t.exists() || resolved {
		return nil
	}
	src, ok := f.deps.Schemas.(latestIDSource)
	if !ok {
		return nil
	}
	for _, it := range items {
		if it.route != routeGuard {
			continue
		}
		subject := it.rec.Topic + "-key"
		id, err := src.LatestID(ctx, subject)
		var de *decode.Error
		switch {
		case errors.As(err, &de):
			return nil // no such subject: the table cannot be typed (kafkaFieldsToCreate says so)
		case errors.Is(err, decode.ErrRegistryAuth):
			return err
		case err != nil:
			return &transientError{"resolve the latest schema of subject " + subject, err}
		}
		ws, err := f.deps.Schemas.Schema(ctx, id)
		switch {
		case errors.As(err, &de):
			return nil
		case errors.Is(err, decode.ErrRegistryAuth):
			return err
		case err != nil:
			return &transientError{"resolve key schema id " + strconv.Itoa(id), err}
		}
		ks.schemas[id], ks.subjectKey = ws, id
		return nil
	}
	return nil
}

// kafkaFieldsToCreate are the Kafka columns a flush that creates the table appends to
// its schema (nil when it creates none). Under key_format avro the _kafka_key struct is
// the Delta form of the key writer schema of the first routed record whose key resolves
// (resolveKeys), else the latest schema of subject <topic>-key; without either, the
// table cannot be typed and the flush fails (permanent), naming the fix.
func (f *flusher) kafkaFieldsToCreate(t tableState, create bool, items []item) ([]*deltalog.StructField, error) {
	if t.exists() || !create || len(f.cfg.Table.KafkaColumns) == 0 {
		return nil, nil
	}
	var keyType *deltalog.StructType
	if avroKeys(f.cfg) {
		for _, it := range items {
			if it.route != routeGuard || it.fail != nil || len(it.rec.Key) == 0 {
				continue
			}
			if id, _, err := decode.ParseFrame(it.rec.Key); err == nil {
				if ws := f.kafka.schemas[id]; ws != nil && ws.DeltaErr == nil {
					keyType = ws.Delta
					break
				}
			}
		}
		if ws := f.kafka.schemas[f.kafka.subjectKey]; keyType == nil && f.kafka.subjectKey != 0 && ws != nil && ws.DeltaErr == nil {
			keyType = ws.Delta // no keyed record in the batch: the latest <topic>-key schema
		}
		if keyType == nil {
			return nil, fmt.Errorf("create table %s: table.key_format is avro, and no record of the first batch has a Confluent-framed key whose schema the registry serves, nor does the registry have a subject <topic>-key, so the _kafka_key struct cannot be typed "+
				"(register the key schema under <topic>-key, create the table with a _kafka_key STRUCT column, or use key_format bytes in %s)", f.cfg.Table.URI, f.cfg.File)
		}
	}
	return kafkacols.Fields(f.cfg.Table.KafkaColumns, f.cfg.Table.KeyFormat, keyType)
}

// kafkaFill fills the Kafka columns of each written record (a columnFill): _kafka_topic,
// _kafka_partition, _kafka_offset and _kafka_timestamp (µs, from the record's timestamp),
// _kafka_headers (rowfill.HeaderMap: the last value of a repeated key wins; a null
// value is NULL; no headers is an empty map) and _kafka_key in table.key_format.
// Errors: a *decode.Error with decode.ReasonKeyDecodeError for a key that cannot be
// written in the format (the record is dead-lettered with its bytes untouched), or
// decode.ReasonNotNullViolation for a null key in a NOT NULL _kafka_key.
type kafkaFill struct {
	cols   []string // configured table.kafka_columns
	format string   // table.key_format
	state  *kafkaState
	mode   deltalog.ColumnMappingMode
	pq     *parquet.Schema

	key       topColumn
	keyLeaves []int // leaf columns of _kafka_key (the struct's under avro)
	hdrKey    parquet.LeafColumn
	hdrValue  parquet.LeafColumn
	decs      map[int]*rowfill.KeyDecoder
	decErrs   map[int]error

	// row is the row view tops were looked up in (the flush's; fillsFor builds a fill per
	// flush), and tops the columns of kafkaSet's Kafka columns in it, by kafkaSet index:
	// found once, not by name for every column of every record (rowView.column).
	row  *rowView
	tops [len(kafkaSet)]kafkaTop

	// scratch, reused across records (replace copies the values into the buffers)
	entries    []rowfill.Header
	keys, vals []parquet.Value
	topics     map[string][]byte // topic name bytes, shared by the rows of a topic
}

// newKafkaFill builds the Kafka columns' fill for table schema (Parquet schema pq under
// column mapping mode cm). Errors: a configured Kafka column the schema lacks or cannot
// hold (kafkacols.Check).
func newKafkaFill(cfg *config.Config, schema *deltalog.StructType, cm deltalog.ColumnMappingMode, pq *parquet.Schema, st *kafkaState) (*kafkaFill, error) {
	if err := kafkacols.Check(schema, cfg.Table.KafkaColumns, cfg.Table.KeyFormat); err != nil {
		return nil, fmt.Errorf("fill Kafka columns of %s: %w", cfg.Table.URI, err)
	}
	k := &kafkaFill{cols: cfg.Table.KafkaColumns, format: cfg.Table.KeyFormat, state: st, mode: cm, pq: pq,
		decs: map[int]*rowfill.KeyDecoder{}, decErrs: map[int]error{}}
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
	if k.state.replay {
		topic, partition, offset = dlq.Original(rec)
		headers = dlq.OriginalHeaders(rec)
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
	if err := set(setTimestamp, parquet.Int64Value(rec.Timestamp.UnixMicro())); err != nil {
		return err
	}
	if k.has(kafkacols.Headers) {
		if err := rowfill.HeaderKeys(headers); err != nil {
			return err
		}
		k.fillHeaders(headers, row)
	}
	if k.has(kafkacols.Key) {
		return k.fillKey(rec.Key, row)
	}
	return nil
}

// fillHeaders writes the map's key_value entries with the levels of its leaves: an
// empty map is one value per leaf one level below the key's maximum; entries after the
// first repeat at the key_value level; a null value is one level below its maximum.
func (k *kafkaFill) fillHeaders(hs []kgo.RecordHeader, row *rowView) {
	ki, vi := k.hdrKey.ColumnIndex, k.hdrValue.ColumnIndex
	kd, vd, rep := k.hdrKey.MaxDefinitionLevel, k.hdrValue.MaxDefinitionLevel, k.hdrKey.MaxRepetitionLevel
	k.entries = rowfill.AppendHeaderMap(k.entries[:0], hs)
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
		if err := rowfill.StringKey(key); err != nil {
			return err
		}
		return k.set(row, setKey, parquet.ByteArrayValue(key))
	case kafkacols.KeyAvro:
		return k.fillAvroKey(key, row)
	}
	if len(key) == 0 {
		key = []byte{} // an empty key is X'', not NULL
	}
	return k.set(row, setKey, parquet.ByteArrayValue(key))
}

// fillAvroKey decodes a Confluent-framed Avro key into the _kafka_key struct's leaves.
func (k *kafkaFill) fillAvroKey(key []byte, row *rowView) error {
	if len(key) == 0 {
		return rowfill.KeyError("decode key (table.key_format avro): the key is empty (0 bytes), not a Confluent-framed Avro value; a null key is written NULL")
	}
	id, payload, err := decode.ParseFrame(key)
	if err != nil {
		return rowfill.KeyError("decode key (table.key_format avro): %v", err)
	}
	dec, err := k.keyDecoder(id)
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

// keyDecoder compiles (once per flush and id) the decoder of key schema id.
func (k *kafkaFill) keyDecoder(id int) (*rowfill.KeyDecoder, error) {
	if d, ok := k.decs[id]; ok {
		return d, nil
	}
	if err, ok := k.decErrs[id]; ok {
		return nil, err
	}
	var d *rowfill.KeyDecoder
	var err error
	switch ws, fail := k.state.schemas[id], k.state.fails[id]; {
	case fail != nil:
		err = rowfill.KeyError("resolve key schema id %d: %v", id, fail)
	case ws == nil:
		err = rowfill.KeyError("resolve key schema id %d: not looked up before the flush", id)
	default:
		d, err = rowfill.CompileKey(ws, k.key.field, k.mode, k.pq)
	}
	if err != nil {
		if _, ok := err.(*decode.Error); !ok {
			err = rowfill.KeyError("%v", err)
		}
		k.decErrs[id] = err
		return nil, err
	}
	k.decs[id] = d
	return d, nil
}

// withColumns returns schema with cols appended (a copy; schema itself when cols is
// empty).
func withColumns(schema *deltalog.StructType, cols []*deltalog.StructField) *deltalog.StructType {
	if len(cols) == 0 || schema == nil {
		return schema
	}
	out := *schema
	out.Fields = append(slices.Clone(schema.Fields), cols...)
	return &out
}

// valueTable is the table schema a value decoder is compiled against: schema with its
// Kafka columns (names) made nullable, so that a NOT NULL Kafka column of an existing
// table is not "missing" from the value schema (the decoder writes placeholders there,
// which kafkaFill replaces). The Parquet layout does not change: every top-level field
// is OPTIONAL in the data files. schema itself when there is nothing to relax.
func valueTable(schema *deltalog.StructType, names []string) *deltalog.StructType {
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
