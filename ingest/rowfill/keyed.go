package rowfill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
	"github.com/ingestd/ingestd/deltawriter/keyindex"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// Change is one record's change to a keyed table (table.mode upsert; docs/keyed-tables.md):
// its key, its sequence, whether it deletes the key, and where its row is in the flush's
// files.
type Change struct {
	// Key is the canonical key (keyindex.AppendValue of each key column in table.key
	// order); it aliases the Stage's key arena, valid until the Stage is dropped.
	Key []byte
	// Seq is table.sequence_by's value as an integer (the column's integer, days of a
	// date, µs of a timestamp); 0 without sequence_by.
	Seq int64
	// SeqFromPosition: the change is a snapshot read (decode.OpRead) whose envelope
	// sequence (table.sequence_by source.lsn or source.ts_ms) is null, as an incremental
	// snapshot's reads are (they come from a SELECT, not the log). It is ordered by its
	// position: the keyed flush gives it the greatest sequence of its key seen before it
	// (Seq holds keyindex.NullSequence until then) and writes that value into its row
	// (Stage.SetSequence). docs/keyed-tables.md, Change data capture.
	SeqFromPosition bool
	// Delete: the record deletes its key (table.delete_when was true, or a tombstone);
	// its row, if any, is not written.
	Delete bool
	// File is the row's partition file; nil: an unpartitioned table, whose rows stay in
	// the flush's columns. Row is the row's position there. A tombstone has no row (Row -1).
	File *PartitionFile
	Row  int
	// Rec is the change's record.
	Rec *kgo.Record
}

// keyFill reads the key of each row of a keyed table after the fills and before the row
// is placed in its partition's file.
type keyFill struct {
	key      []keyColumn
	seq      *keyColumn             // nil: no sequence_by, or an envelope path (envSeq)
	envSeq   string                 // table.sequence_by's envelope path (decode.SeqLSN, …); "": none
	envelope bool                   // table.envelope is set: each row's change comes with its record (Stage.Envelope)
	env      *decode.EnvelopeChange // the envelope change of the row being filled (Stage.Envelope)
	deleteIf *expr.Expr             // nil: no delete_when
	args     []expr.Value           // deleteIf's arguments, reused per row
	arena    []byte                 // the keys of the flush's changes, back to back
	changes  []Change               // the flush's changes, in record order
	unparted int                    // rows left in the flush's columns so far (unpartitioned)
	// mode sets the columns of a changelog or of soft deletes (nil: none); tomb is set
	// while a changelog tombstone's row is placed (TombstoneRow): it deletes its key and
	// has no sequence.
	mode *modeFill
	tomb bool
	// replay: the flush replays dead letters (Options.Origin is set), whose order is not
	// their source partition's: a snapshot read without its sequence cannot be ordered.
	replay bool
	// colMode is the table's column mapping mode; tombDecs the decoders of tombstone keys
	// (avro, connect_json) by key writer schema, compiled at the first key of each.
	colMode  deltalog.ColumnMappingMode
	tombDecs map[*decode.WriterSchema]*tombKeyDecoder
}

// keyColumn is a key (or sequence) column: its name in table.key and its field.
type keyColumn struct {
	name  string
	field *deltalog.StructField
}

// newKeyFill returns the key reader of a keyed table with schema, or nil for an append
// table. Errors: a key or sequence column the schema lacks or that cannot key a table
// (keyindex.CheckKeyColumns), a delete_when that does not compile to a boolean.
func newKeyFill(cfg *config.Config, schema *deltalog.StructType, o Options) (*keyFill, error) {
	if !cfg.Table.Keyed() {
		return nil, nil
	}
	if err := CheckKeyed(cfg, schema); err != nil {
		return nil, err
	}
	k := &keyFill{}
	if cfg.Table.Changelog() || cfg.Table.SoftDeletes() || cfg.Table.SequenceByEnvelope() || len(cfg.Table.EnvelopeColumns) > 0 {
		k.mode = &modeFill{changelog: cfg.Table.Changelog(), soft: cfg.Table.SoftDeletes(), ordered: cfg.Table.SequenceBy != "", origin: o.Origin}
		for _, f := range config.EnvelopeFields {
			if slices.Contains(cfg.Table.EnvelopeColumns, f) && envelopeColumn(f).name != SequenceColumn(cfg) {
				k.mode.envFields = append(k.mode.envFields, f)
			}
		}
		if cfg.Table.SequenceByEnvelope() {
			k.mode.seqColumn = SequenceColumn(cfg)
		}
	}
	for _, name := range cfg.Table.Key {
		k.key = append(k.key, keyColumn{name: name, field: schema.Field(name)})
	}
	k.envelope = cfg.Table.Envelope != ""
	k.replay = o.Origin != nil
	if s := cfg.Table.SequenceBy; cfg.Table.SequenceByEnvelope() {
		k.envSeq = s
	} else if s != "" {
		k.seq = &keyColumn{name: s, field: schema.Field(s)}
	}
	if src := cfg.Table.DeleteWhen; src != "" {
		e, err := expr.Compile(src, schema, expr.Options{})
		if err != nil {
			return nil, fmt.Errorf("%s:%d: table.delete_when: compile %q: %w", cfg.File, cfg.Line("$.table.delete_when"), src, err)
		}
		if t := e.Type(); t != deltalog.Boolean && t != deltalog.Void {
			return nil, fmt.Errorf("%s:%d: table.delete_when: %q is of type %s, not boolean (fix: write a condition, e.g. op = 'd')",
				cfg.File, cfg.Line("$.table.delete_when"), src, t)
		}
		k.deleteIf, k.args = e, make([]expr.Value, len(e.Columns()))
	}
	return k, nil
}

// CheckKeyed checks a keyed pipeline's key and sequence columns against the table schema
// (or the schema a table is created with): every key column a top-level column of a type
// that can key a table (keyindex.CheckKeyColumns), sequence_by an integer, date or
// timestamp column, none of them a Kafka column; the columns the mode fills
// (ModeFields) present, and for a changelog no other column NOT NULL. Errors name the
// pipeline file and line.
func CheckKeyed(cfg *config.Config, schema *deltalog.StructType) error {
	if !cfg.Table.Keyed() {
		return nil
	}
	for i, name := range cfg.Table.Key {
		if schema.Field(name) == nil {
			return fmt.Errorf("%s:%d: table.key: column %q is not in the table (columns: %s); name a top-level field of the value schema",
				cfg.File, cfg.Line(fmt.Sprintf("$.table.key[%d]", i)), name, columnNames(schema))
		}
	}
	if err := keyindex.CheckKeyColumns(schema, cfg.Table.Key); err != nil {
		return fmt.Errorf("%s:%d: table.key: %w", cfg.File, cfg.Line("$.table.key"), err)
	}
	if s := cfg.Table.SequenceBy; s != "" && !cfg.Table.SequenceByEnvelope() {
		f := schema.Field(s)
		if f == nil {
			return fmt.Errorf("%s:%d: table.sequence_by: column %q is not in the table (columns: %s)", cfg.File, cfg.Line("$.table.sequence_by"), s, columnNames(schema))
		}
		if !sequenceType(f.Type) {
			return fmt.Errorf("%s:%d: table.sequence_by: column %q is %s; a sequence is an integer (byte, short, integer, long), date or timestamp column",
				cfg.File, cfg.Line("$.table.sequence_by"), s, f.Type)
		}
	}
	return checkModeColumns(cfg, schema)
}

// sequenceType reports whether t can order changes (as an int64: Change.Seq).
func sequenceType(t deltalog.DataType) bool {
	switch t {
	case deltalog.Byte, deltalog.Short, deltalog.Integer, deltalog.Long, deltalog.Date, deltalog.Timestamp, deltalog.TimestampNtz:
		return true
	}
	return false
}

func columnNames(s *deltalog.StructType) string {
	names := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// read reads row's key, sequence and delete flag. Errors: a *decode.Error missing_key
// naming the key (or sequence) column that is NULL; delete_when that cannot be evaluated
// on the row is the record's decode_error.
func (k *keyFill) read(row *rowView) (Change, error) {
	start := len(k.arena)
	for _, c := range k.key {
		v, _, ok := row.top(c.name)
		if !ok {
			return Change{}, fmt.Errorf("read key: the row has no value of column %q", c.name)
		}
		var err error
		if k.arena, err = keyindex.AppendValue(k.arena, c.field.Type, v); err != nil {
			k.arena = k.arena[:start]
			if errors.Is(err, keyindex.ErrNullKey) {
				return Change{}, &decode.Error{Reason: decode.ReasonMissingKey, Field: c.field.Name,
					Err: fmt.Errorf("key column %s is NULL in this record (or the writer schema lacks it): a keyed table's row needs every key column (table.key)", c.field.Name)}
			}
			return Change{}, fmt.Errorf("read key column %s: %w", c.field.Name, err)
		}
	}
	ch := Change{Key: k.arena[start:len(k.arena):len(k.arena)]}
	if k.tomb {
		ch.Delete = true // a changelog tombstone's row: no sequence, no delete_when
		return ch, nil
	}
	if k.seq != nil {
		v, _, ok := row.top(k.seq.name)
		if !ok || v.IsNull() {
			k.arena = k.arena[:start]
			return Change{}, &decode.Error{Reason: decode.ReasonMissingKey, Field: k.seq.field.Name,
				Err: fmt.Errorf("sequence column %s (table.sequence_by) is NULL in this record (or the writer schema lacks it): a change without its sequence cannot be ordered", k.seq.field.Name)}
		}
		ch.Seq = v.Int64()
	}
	if k.envelope {
		if k.env == nil {
			k.arena = k.arena[:start]
			return Change{}, errors.New("read change: the row's envelope change is not set (Stage.Envelope)")
		}
		if k.envSeq != "" {
			seq, ok := k.env.Seq(k.envSeq)
			switch {
			case ok:
				ch.Seq = seq
			case k.env.Op == decode.OpRead && !k.replay:
				// An incremental snapshot's read: Debezium emits it at its chunk's high
				// watermark, after every streamed change of its key it could miss, so it
				// is current as of its position in its partition.
				ch.Seq, ch.SeqFromPosition = keyindex.NullSequence, true
			case k.env.Op == decode.OpRead:
				k.arena = k.arena[:start]
				return Change{}, &decode.Error{Reason: decode.ReasonMissingKey, Field: k.envSeq,
					Err: fmt.Errorf("the envelope's %s (table.sequence_by) is null in this snapshot read (op r): such a read is ordered by its position in its source partition, which a replay does not have (fix: run the incremental snapshot again)", k.envSeq)}
			default:
				k.arena = k.arena[:start]
				return Change{}, &decode.Error{Reason: decode.ReasonMissingKey, Field: k.envSeq,
					Err: fmt.Errorf("the envelope's %s (table.sequence_by) is null or absent in this %s change: a streamed change without its sequence cannot be ordered (only a snapshot read, op r, may lack it)", k.envSeq, opName(k.env.Op))}
			}
		}
		if k.env.Op == decode.OpDelete {
			ch.Delete = true
			return ch, nil // a delete's row is its before image: delete_when does not apply
		}
	}
	if k.deleteIf != nil {
		for j, col := range k.deleteIf.Columns() {
			pv, f, ok := row.top(col.Name)
			if !ok {
				k.arena = k.arena[:start]
				return Change{}, fmt.Errorf("evaluate table.delete_when: the row has no value of column %q", col.Name)
			}
			v, err := expr.FromParquet(f.Type, pv)
			if err != nil {
				k.arena = k.arena[:start]
				return Change{}, fmt.Errorf("evaluate table.delete_when: %w", err)
			}
			k.args[j] = v
		}
		v, err := k.deleteIf.Eval(k.args)
		if err != nil {
			k.arena = k.arena[:start]
			return Change{}, &decode.Error{Reason: decode.ReasonDecodeError, Err: fmt.Errorf("table.delete_when: %w", err)}
		}
		ch.Delete = !v.Null && v.Int != 0
	}
	return ch, nil
}

// Changes are the keyed table's changes of the rows the Stage accepted, in record order;
// nil for an append table (or a nil Stage).
func (s *Stage) Changes() []Change {
	if s == nil || s.keyed == nil {
		return nil
	}
	return s.keyed.changes
}

// Tombstone records the change of a tombstone (a record with a null value) of a keyed
// table: it deletes the key its Kafka key names. The Kafka key is read in
// table.key_format: string or bytes name a one-column key (the text parsed as the
// column's integer for an integer column); avro (Confluent-framed, its writer schema
// resolved for the flush: Options.Keys) and connect_json (Kafka Connect's JsonConverter
// with schemas.enable=true: {"schema": …, "payload": …}, the payload typed by the key's
// own Connect schema through the Avro schema derived from it, so its logical types read
// as avro's) are read by the decoder the rows are read with (decodeKey) and name each key
// column by a field of the same name of a record key (Delta's name matching), or a
// one-column key by a primitive key; json (schemas.enable=false)
// names them by the keys of an object, or a one-column key by a bare scalar, numbers read
// exactly (json.Number). Errors: a *decode.Error missing_key when the key is null or
// does not name a key of the table (naming what is missing).
func (s *Stage) Tombstone(cfg *config.Config, rec *kgo.Record) error {
	k := s.keyed
	if rec.Key == nil {
		return &decode.Error{Reason: decode.ReasonMissingKey, Err: errors.New("a tombstone (null value) with a null key names no key to delete")}
	}
	vals, err := s.tombstoneKey(cfg, rec.Key)
	if err != nil {
		return err
	}
	start := len(k.arena)
	if k.arena, err = k.appendKey(k.arena, vals, "a tombstone's key"); err != nil {
		k.arena = k.arena[:start]
		return err
	}
	k.changes = append(k.changes, Change{Key: k.arena[start:len(k.arena):len(k.arena)], Delete: true, Row: -1, Rec: rec})
	return nil
}

// appendKey appends the canonical key of vals (one value per key column, in table.key
// order; keyindex.AppendValue of each) to dst, what naming the key in errors. Errors: a
// *decode.Error missing_key naming the column whose value cannot key it (null, or out of
// the column's type); dst's tail is then partly written, the caller cuts it.
func (k *keyFill) appendKey(dst []byte, vals []parquet.Value, what string) ([]byte, error) {
	var err error
	for i, c := range k.key {
		if dst, err = keyindex.AppendValue(dst, c.field.Type, vals[i]); err != nil {
			return dst, &decode.Error{Reason: decode.ReasonMissingKey, Field: c.field.Name, Err: fmt.Errorf("%s: column %s: %w", what, c.field.Name, err)}
		}
	}
	return dst, nil
}

// OldKeyHeader is the Kafka header Debezium puts on the create (op c) of a primary-key
// change: the row's key before the change (its delete of the old key carries
// __debezium.newkey). docs/keyed-tables.md, Unavailable values (TOAST).
const OldKeyHeader = "__debezium.oldkey"

// HeaderKey returns the canonical key (Change.Key's form, a fresh slice) that a key
// header such as OldKeyHeader names. Kafka Connect writes a header with the worker's
// header.converter, not the key converter: by default SimpleHeaderConverter, which
// renders a key struct as {"id":1} (JSON for integer, string and boolean fields), so that
// form is read first, as an object naming every key column (the plain JSON key's rules:
// json.Number integers, Delta's name matching); else the header is read as a Kafka key
// in table.key_format (a header.converter set to the key converter: Confluent-framed
// Avro, Kafka Connect JSON, …), as a tombstone's key is. Errors: a *decode.Error
// missing_key of the key format's reading (Tombstone's reasons) or of appendKey.
func (s *Stage) HeaderKey(cfg *config.Config, header []byte) ([]byte, error) {
	k := s.keyed
	if k == nil {
		return nil, errors.New("read a key header: the table is not keyed")
	}
	if header == nil {
		return nil, &decode.Error{Reason: decode.ReasonMissingKey, Err: errors.New("the key header is null")}
	}
	if v, err := plainJSONKey(header); err == nil {
		if rec, ok := v.(map[string]any); ok {
			if vals, err := k.keyValues(rec, "key header", jsonKeyValue); err == nil {
				return k.appendKey(nil, vals, "a key header")
			}
		}
	}
	vals, err := s.tombstoneKey(cfg, header)
	if err != nil {
		return nil, err
	}
	return k.appendKey(nil, vals, "a key header")
}

// tombstoneKey reads a tombstone's Kafka key into one value per key column, as the
// decoder would hold them in column buffers (tombstone explains the formats).
func (s *Stage) tombstoneKey(cfg *config.Config, key []byte) ([]parquet.Value, error) {
	k := s.keyed
	missing := func(format string, args ...any) error {
		return &decode.Error{Reason: decode.ReasonMissingKey, Err: fmt.Errorf(format, args...)}
	}
	switch cfg.Table.KeyFormat {
	case kafkacols.KeyAvro:
		return s.avroTombstoneKey(key)
	case kafkacols.KeyConnectJSON:
		writer := func(key []byte) (*decode.WriterSchema, []byte, error) {
			ws, payload, err := s.keys.connect().Writer(nil, key)
			if err == nil && ws.Avro == nil {
				err = ws.DeltaErr // e.g. a top level that is not a struct
			}
			return ws, payload, err
		}
		ws, payload, err := writer(key)
		if err != nil && len(k.key) == 1 {
			if w := connectRecordKey(key, k.key[0].field.Name); w != nil {
				ws, payload, err = writer(w)
			}
		}
		var body []byte
		if err == nil {
			body, err = ws.Transcode(payload)
		}
		if err != nil {
			return nil, missing("a tombstone's Kafka Connect JSON key (table.key_format connect_json): %v", err)
		}
		return k.decodeKey(ws, body, "Kafka Connect JSON key")
	case kafkacols.KeyJSON:
		v, err := plainJSONKey(key)
		if err != nil {
			return nil, missing("a tombstone's JSON key (table.key_format json): %v", err)
		}
		return k.keyValues(v, "JSON key", jsonKeyValue)
	}
	if len(k.key) != 1 {
		return nil, missing("a tombstone's %s Kafka key names a key of one column; this table's key has %d (%s): use table.key_format avro, connect_json or json with a record key",
			cfg.Table.KeyFormat, len(k.key), keyNames(k.key))
	}
	v, err := textKeyValue(k.key[0].field.Type, string(key))
	if err != nil {
		return nil, &decode.Error{Reason: decode.ReasonMissingKey, Field: k.key[0].field.Name,
			Err: fmt.Errorf("a tombstone's Kafka key %q: %w", key, err)}
	}
	return []parquet.Value{v}, nil
}

// avroTombstoneKey reads a Confluent-framed Avro key (table.key_format avro).
func (s *Stage) avroTombstoneKey(key []byte) ([]parquet.Value, error) {
	missing := func(format string, args ...any) error {
		return &decode.Error{Reason: decode.ReasonMissingKey, Err: fmt.Errorf(format, args...)}
	}
	id, payload, err := decode.ParseFrame(key)
	if err != nil {
		return nil, missing("a tombstone's Kafka key is not Confluent-framed Avro (table.key_format avro): %v", err)
	}
	ws := s.keys.Schemas[id]
	if ws == nil {
		why := "not resolved"
		if f := s.keys.Fails[id]; f != nil {
			why = f.Error()
		}
		return nil, missing("a tombstone's key schema id %d: %s", id, why)
	}
	if ws.FormatName() != decode.FormatAvro || ws.Avro == nil {
		return nil, missing("a tombstone's key schema id %d is a %s schema, not Avro (table.key_format avro)", id, ws.FormatName())
	}
	return s.keyed.decodeKey(ws, payload, fmt.Sprintf("Avro key (schema id %d)", id))
}

// tombKeyDecoder reads the key columns' values from the Avro body of tombstone keys
// written with one key writer schema, with the decoder the table's rows are read with
// (decode.Compile against the key columns as a table of their own): a key value is
// converted exactly as the same value in a record is (logical types, Kafka Connect and
// Debezium types, Delta's date and timestamp range), so it names the row it was written
// to.
type tombKeyDecoder struct {
	dec  *decode.Decoder
	cols []int // the decoder's leaf column of each key column, in k.key order
	tmp  [][]parquet.Value
}

// decodeKey reads one value per key column from body, the Avro body of a tombstone's key
// written with ws (a record with a field per key column, Delta's name matching, other
// fields ignored; or, for a one-column key, a primitive), what naming the key in errors.
// Errors: a *decode.Error missing_key naming the key column when ws has no field for it
// or one whose type does not fit it losslessly, the body does not decode (a date or
// timestamp outside Delta's range included), or the value is null.
func (k *keyFill) decodeKey(ws *decode.WriterSchema, body []byte, what string) ([]parquet.Value, error) {
	td := k.tombDecs[ws]
	if td == nil {
		var err error
		if td, err = k.compileKey(ws, what); err != nil {
			return nil, err
		}
		if k.tombDecs == nil {
			k.tombDecs = make(map[*decode.WriterSchema]*tombKeyDecoder)
		}
		k.tombDecs[ws] = td
	}
	for i := range td.tmp {
		td.tmp[i] = td.tmp[i][:0]
	}
	var err error
	if td.tmp, err = td.dec.Decode(body, td.tmp); err != nil {
		if errors.Is(err, decode.ErrNullRecord) {
			return nil, &decode.Error{Reason: decode.ReasonMissingKey, Err: fmt.Errorf("a tombstone's %s is null", what)}
		}
		return nil, &decode.Error{Reason: decode.ReasonMissingKey, Field: decode.FieldOf(err), Err: fmt.Errorf("decode a tombstone's %s: %w", what, err)}
	}
	out := make([]parquet.Value, len(k.key))
	for i, c := range k.key {
		vs := td.tmp[td.cols[i]]
		if len(vs) != 1 || vs[0].IsNull() {
			return nil, &decode.Error{Reason: decode.ReasonMissingKey, Field: c.field.Name,
				Err: fmt.Errorf("a tombstone's %s has no value for key column %s", what, c.field.Name)}
		}
		if lo, hi, ok := deltalog.IntegerRange(c.field.Type); ok {
			if v := vs[0].Int64(); v < lo || v > hi {
				return nil, &decode.Error{Reason: decode.ReasonMissingKey, Field: c.field.Name,
					Err: fmt.Errorf("a tombstone's %s: %d does not fit key column %s (%s)", what, v, c.field.Name, c.field.Type)}
			}
		}
		out[i] = vs[0]
	}
	return out, nil
}

// connectRecordKey returns a Kafka Connect JSON key whose schema is not a struct (a
// primitive key, as Kafka Connect's ExtractField$Key transform leaves it) as the key of a
// struct of one field named name holding it, so that it names a one-column key as a
// primitive Avro key does; nil for any other key (a struct, or not a Connect key).
func connectRecordKey(key []byte, name string) []byte {
	var doc struct {
		Schema  json.RawMessage `json:"schema"`
		Payload json.RawMessage `json:"payload"`
	}
	var schema map[string]json.RawMessage
	if json.Unmarshal(key, &doc) != nil || json.Unmarshal(doc.Schema, &schema) != nil {
		return nil
	}
	var typ string
	if json.Unmarshal(schema["type"], &typ) != nil || typ == "struct" {
		return nil
	}
	field, _ := json.Marshal(name) // a string always encodes
	schema["field"] = field
	fs, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	payload := doc.Payload
	if payload == nil {
		payload = json.RawMessage("null")
	}
	return []byte(`{"schema":{"type":"struct","optional":false,"fields":[` + string(fs) + `]},"payload":{` + string(field) + `:` + string(payload) + `}}`)
}

// recordKey reports whether s is a record, or a union of null and one record.
func recordKey(s avro.Schema) bool {
	if u, ok := s.(*avro.UnionSchema); ok {
		var rec, other int
		for _, b := range u.Types() {
			switch b.Type() {
			case avro.Null:
			case avro.Record:
				rec++
			default:
				other++
			}
		}
		return rec == 1 && other == 0
	}
	return s.Type() == avro.Record
}

// compileKey compiles the tombKeyDecoder of key writer schema ws: a record, or a union of
// null and a record (a null key names no key). Any other schema names a one-column key:
// it is read as a record of one field named after the column, whose Avro binary is the
// same, the schema's own JSON (its properties, such as connect.name, kept) as the field's
// type.
func (k *keyFill) compileKey(ws *decode.WriterSchema, what string) (*tombKeyDecoder, error) {
	fail := func(field string, err error) error {
		return &decode.Error{Reason: decode.ReasonMissingKey, Field: field, Err: fmt.Errorf("a tombstone's %s: %w", what, err)}
	}
	if !recordKey(ws.Avro) {
		if len(k.key) != 1 {
			return nil, fail("", fmt.Errorf("its %s schema is not a record with the key columns %s", ws.Avro.Type(), keyNames(k.key)))
		}
		typ, err := json.Marshal(ws.Avro)
		if err != nil {
			return nil, fmt.Errorf("compile tombstone key decoder: encode key schema %d: %w", ws.ID, err)
		}
		// The record's name must not be one the key's own named types hold: a name no
		// string of the key's schema is.
		rec := "ingestd_tombstone_key"
		for i := 1; bytes.Contains(typ, []byte(`"`+rec+`"`)); i++ {
			rec = fmt.Sprintf("ingestd_tombstone_key%d", i)
		}
		name, _ := json.Marshal(k.key[0].field.Name) // a string always encodes
		wrapped, err := decode.ParseWriterSchema(ws.ID, `{"type":"record","name":"`+rec+`","fields":[{"name":`+string(name)+`,"type":`+string(typ)+`}]}`)
		if err != nil {
			return nil, fail(k.key[0].field.Name, err)
		}
		ws = wrapped
	}
	if ws.DeltaErr != nil {
		return nil, fail(decode.FieldOf(ws.DeltaErr), ws.DeltaErr)
	}
	st := &deltalog.StructType{}
	for _, c := range k.key {
		f := *c.field
		f.Nullable = true // a key without the field is refused below, naming the column
		if _, _, ok := deltalog.IntegerRange(f.Type); ok {
			// A key's integer field may be wider than its column (a long key for an
			// integer column): read as long, then checked against the column's width.
			f.Type = deltalog.Long
		}
		st.Fields = append(st.Fields, &f)
	}
	pq, err := deltawriter.ParquetSchema(st, k.colMode)
	if err != nil {
		return nil, fmt.Errorf("compile tombstone key decoder: %w", err)
	}
	dec, err := decode.Compile(ws, st, k.colMode, pq)
	if err != nil {
		return nil, fail(decode.FieldOf(err), err)
	}
	td := &tombKeyDecoder{dec: dec}
	for _, f := range st.Fields {
		leaf, ok := pq.Lookup(f.PhysicalName(k.colMode))
		if !ok {
			return nil, fmt.Errorf("compile tombstone key decoder: no leaf column for key column %s", f.Name)
		}
		td.cols = append(td.cols, leaf.ColumnIndex)
	}
	return td, nil
}

// keyValues maps a decoded key v (what names a key of its format in messages) to one
// value per key column: each column a field of a record (a map) of the same name,
// Delta's name matching; a one-column key may be a primitive. conv converts one value.
func (k *keyFill) keyValues(v any, what string, conv func(deltalog.DataType, any) (parquet.Value, error)) ([]parquet.Value, error) {
	rec, isRecord := v.(map[string]any)
	if !isRecord {
		if len(k.key) != 1 {
			return nil, &decode.Error{Reason: decode.ReasonMissingKey, Err: fmt.Errorf("a tombstone's %s is a %T, not a record with the key columns %s", what, v, keyNames(k.key))}
		}
		pv, err := conv(k.key[0].field.Type, v)
		if err != nil {
			return nil, &decode.Error{Reason: decode.ReasonMissingKey, Field: k.key[0].field.Name,
				Err: fmt.Errorf("a tombstone's %s: %w", what, err)}
		}
		return []parquet.Value{pv}, nil
	}
	out := make([]parquet.Value, len(k.key))
	for i, c := range k.key {
		var fv any
		found := false
		for name, val := range rec {
			if deltalog.NameKey(name) == deltalog.NameKey(c.field.Name) {
				fv, found = val, true
				break
			}
		}
		if !found || fv == nil {
			return nil, &decode.Error{Reason: decode.ReasonMissingKey, Field: c.field.Name,
				Err: fmt.Errorf("a tombstone's %s has no value for key column %s", what, c.field.Name)}
		}
		pv, err := conv(c.field.Type, fv)
		if err != nil {
			return nil, &decode.Error{Reason: decode.ReasonMissingKey, Field: c.field.Name, Err: fmt.Errorf("a tombstone's %s: %w", what, err)}
		}
		out[i] = pv
	}
	return out, nil
}

// plainJSONKey decodes a plain JSON key (table.key_format json): one JSON value, numbers
// as json.Number (exact beyond 2^53).
func plainJSONKey(key []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(key))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not one JSON value: bytes follow it")
	}
	return v, nil
}

// jsonKeyValue converts a value of a plain JSON key into the parquet.Value a key column of
// type t holds: a string for a string or binary column (its UTF-8 bytes), an integer
// number (or its text in a string) for an integer column, true or false for a boolean.
// Errors: any other pairing (a fraction or exponent for an integer, a number for a string
// column, an object or array).
func jsonKeyValue(t deltalog.DataType, v any) (parquet.Value, error) {
	switch x := v.(type) {
	case json.Number:
		switch t {
		case deltalog.Byte, deltalog.Short, deltalog.Integer, deltalog.Long:
			n, err := strconv.ParseInt(x.String(), 10, 64)
			if err != nil {
				return parquet.Value{}, fmt.Errorf("%s is not an integer within 64 bits (key column type %s)", x, t)
			}
			return parquet.Int64Value(n), nil
		}
	case string, bool:
		return textKeyValue(t, x)
	}
	return parquet.Value{}, fmt.Errorf("a JSON %s cannot name a %s key column", jsonKind(v), t)
}

// jsonKind names the JSON type of a value encoding/json decoded.
func jsonKind(v any) string {
	switch v.(type) {
	case json.Number:
		return "number"
	case string:
		return "string"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "null"
}

// textKeyValue converts the text of a string or bytes Kafka key, or a string or boolean
// of a plain JSON key, into the parquet.Value a key column of type t holds: a string for
// a string or binary column (its UTF-8 bytes), an integer's decimal text for an integer
// column, a boolean for a boolean column. Errors: any other pairing (a text that is not
// an integer within 64 bits for an integer column; a date, timestamp or decimal column,
// which only avro and connect_json keys name).
func textKeyValue(t deltalog.DataType, v any) (parquet.Value, error) {
	switch t {
	case deltalog.String, deltalog.Binary:
		if x, ok := v.(string); ok {
			return parquet.ByteArrayValue([]byte(x)), nil
		}
	case deltalog.Byte, deltalog.Short, deltalog.Integer, deltalog.Long:
		if x, ok := v.(string); ok {
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return parquet.Value{}, fmt.Errorf("%q is not an integer for a %s key column", x, t)
			}
			return parquet.Int64Value(n), nil
		}
	case deltalog.Boolean:
		if b, ok := v.(bool); ok {
			return parquet.BooleanValue(b), nil
		}
	}
	return parquet.Value{}, fmt.Errorf("a %T value cannot name a %s key column", v, t)
}

// opName names a Debezium operation code in a message.
func opName(op byte) string {
	switch op {
	case decode.OpCreate:
		return "create (op c)"
	case decode.OpUpdate:
		return "update (op u)"
	case decode.OpDelete:
		return "delete (op d)"
	}
	return fmt.Sprintf("op %c", op)
}

// keyNames is the key columns' names, comma-separated.
func keyNames(cols []keyColumn) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.field.Name
	}
	return strings.Join(names, ", ")
}
