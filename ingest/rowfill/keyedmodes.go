package rowfill

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/keyindex"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
)

// The columns a keyed table's mode adds to every row (docs/keyed-tables.md, Changelog
// and Soft deletes). The changelog's names avoid Delta's change data feed columns
// (_change_type, _commit_version, _commit_timestamp), which Delta reserves: a table
// holding those could not turn the change data feed on, and a reader of the feed would
// take ingestd's column for Delta's.
const (
	// ChangeOperation (string) is a changelog row's operation: OpUpsert or OpDelete.
	ChangeOperation = "_change_operation"
	// ChangeSequence (long) is a changelog row's sequence: table.sequence_by's value as
	// Change.Seq holds it, or the record's Kafka offset without sequence_by; NULL for a
	// tombstone's row under sequence_by (a tombstone carries no sequence), and for a
	// snapshot read ordered by its position (Change.SeqFromPosition) that no earlier
	// change of its key in the flush gives a sequence.
	ChangeSequence = "_change_sequence"
	// Deleted (boolean) is true on a soft-deleted row of an upsert table.
	Deleted = "_deleted"
	// DeletedSequence (long) is a soft-deleted row's delete sequence (as ChangeSequence);
	// NULL on a live row.
	DeletedSequence = "_deleted_sequence"
	// SourceLSN and SourceTsMs (long) hold each row's envelope sequence when
	// table.sequence_by names one (source.lsn, source.ts_ms; docs/keyed-tables.md, Change data capture):
	// the key index reads a key's sequence from the table, which keeps it across restarts.
	SourceLSN  = "_source_lsn"
	SourceTsMs = "_source_ts_ms"
	// EnvelopeOp (string) and EnvelopeTsMs (long) are the envelope's op (c, u, r, d) and
	// ts_ms, with SourceLSN and SourceTsMs the columns of table.envelope_columns.
	EnvelopeOp   = "_op"
	EnvelopeTsMs = "_ts_ms"
)

// envelopeColumn is the column of an envelope field of table.envelope_columns.
func envelopeColumn(field string) modeColumn {
	switch field {
	case config.EnvelopeOp:
		return modeColumn{EnvelopeOp, deltalog.String, "STRING"}
	case config.EnvelopeLSN:
		return modeColumn{SourceLSN, deltalog.Long, "BIGINT"}
	case config.EnvelopeSourceTsMs:
		return modeColumn{SourceTsMs, deltalog.Long, "BIGINT"}
	}
	return modeColumn{EnvelopeTsMs, deltalog.Long, "BIGINT"}
}

// SequenceColumn is the column that holds cfg's sequence in the table: table.sequence_by's
// column, the column an envelope sequence is stored in (SourceLSN, SourceTsMs), or ""
// without sequence_by.
func SequenceColumn(cfg *config.Config) string {
	if !cfg.Table.SequenceByEnvelope() {
		return cfg.Table.SequenceBy
	}
	if cfg.Table.SequenceBy == config.SequenceSourceTsMs {
		return SourceTsMs
	}
	return SourceLSN
}

// The values of ChangeOperation.
const (
	OpUpsert = "upsert"
	OpDelete = "delete"
)

// ModeFields are the columns cfg's table mode fills on every row, as a table ingestd
// creates gets them (nullable, after the value's and the Kafka columns): changelog
// _change_operation string and _change_sequence long; an upsert table with soft deletes
// _deleted boolean and _deleted_sequence long; none otherwise.
func ModeFields(cfg *config.Config) []*deltalog.StructField {
	var out []*deltalog.StructField
	for _, c := range modeColumns(cfg) {
		out = append(out, &deltalog.StructField{Name: c.name, Type: c.typ, Nullable: true, Metadata: map[string]any{}})
	}
	return out
}

// ModeColumns are the names of ModeFields.
func ModeColumns(cfg *config.Config) []string {
	var out []string
	for _, c := range modeColumns(cfg) {
		out = append(out, c.name)
	}
	return out
}

type modeColumn struct {
	name string
	typ  deltalog.DataType
	sql  string // the type in an ALTER TABLE fix
}

func modeColumns(cfg *config.Config) []modeColumn {
	var out []modeColumn
	if cfg.Table.SequenceByEnvelope() {
		out = append(out, modeColumn{SequenceColumn(cfg), deltalog.Long, "BIGINT"})
	}
	for _, f := range config.EnvelopeFields { // in a fixed order, whatever the list's
		if c := envelopeColumn(f); slices.Contains(cfg.Table.EnvelopeColumns, f) && (len(out) == 0 || out[0].name != c.name) {
			out = append(out, c)
		}
	}
	switch {
	case cfg.Table.Changelog():
		out = append(out, modeColumn{ChangeOperation, deltalog.String, "STRING"}, modeColumn{ChangeSequence, deltalog.Long, "BIGINT"})
	case cfg.Table.SoftDeletes():
		out = append(out, modeColumn{Deleted, deltalog.Boolean, "BOOLEAN"}, modeColumn{DeletedSequence, deltalog.Long, "BIGINT"})
	}
	return out
}

// checkModeColumns checks that schema has the columns cfg's mode fills, of their types,
// and, for a changelog, that no other column is NOT NULL (a tombstone's row holds only
// its key). Errors name the columns and the fix.
func checkModeColumns(cfg *config.Config, schema *deltalog.StructType) error {
	cols := modeColumns(cfg)
	var missing, wrong []string
	for _, c := range cols {
		f := schema.Field(c.name)
		switch {
		case f == nil:
			missing = append(missing, c.name+" "+c.sql)
		case f.Type != c.typ:
			wrong = append(wrong, fmt.Sprintf("%s is %s, not %s", c.name, f.Type, c.typ))
		}
	}
	what, line := "table.mode "+cfg.Table.Mode, cfg.Line("$.table.mode")
	switch {
	case cfg.Table.SoftDeletes():
		what, line = "table.deletes soft", cfg.Line("$.table.deletes")
	case len(cfg.Table.EnvelopeColumns) > 0 && !cfg.Table.Changelog():
		what, line = "table.envelope_columns", cfg.Line("$.table.envelope_columns")
	case cfg.Table.Upsert() && cfg.Table.SequenceByEnvelope():
		what, line = "table.sequence_by "+cfg.Table.SequenceBy, cfg.Line("$.table.sequence_by")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s:%d: %s fills columns the table lacks: %s (fix: ALTER TABLE <table> ADD COLUMNS (%s), or write a new table: ingestd adds them when it creates the table)",
			cfg.File, line, what, strings.Join(missing, ", "), strings.Join(missing, ", "))
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%s:%d: %s fills columns the table holds in another type: %s (fix: write a new table, or rename those columns)",
			cfg.File, line, what, strings.Join(wrong, "; "))
	}
	if !cfg.Table.Changelog() {
		return nil
	}
	var notNull []string
	for _, f := range schema.Fields {
		if !f.Nullable && !isKeyColumn(cfg, f.Name) {
			notNull = append(notNull, f.Name)
		}
	}
	if len(notNull) > 0 {
		return fmt.Errorf("%s:%d: table.mode changelog writes a tombstone as a row holding only its key, but columns %s are NOT NULL "+
			"(fix: ALTER TABLE <table> ALTER COLUMN <column> DROP NOT NULL for each; a table ingestd creates has nullable columns)",
			cfg.File, cfg.Line("$.table.mode"), strings.Join(notNull, ", "))
	}
	return nil
}

func isKeyColumn(cfg *config.Config, name string) bool {
	for _, k := range cfg.Table.Key {
		if deltalog.NameKey(k) == deltalog.NameKey(name) {
			return true
		}
	}
	return false
}

// modeFill sets the mode columns of a keyed row once its change is read (keyedPlace).
type modeFill struct {
	changelog bool
	soft      bool
	ordered   bool     // table.sequence_by is set
	seqColumn string   // the column an envelope sequence is stored in (SequenceColumn); "": none
	envFields []string // table.envelope_columns
	origin    func(*kgo.Record) Source
}

// sequence is the sequence a mode column records for ch: its sequence_by value, or its
// record's Kafka offset (the original record's in a replay) without sequence_by.
func (m *modeFill) sequence(ch Change, rec *kgo.Record) int64 {
	if m.ordered {
		return ch.Seq
	}
	if m.origin != nil {
		return m.origin(rec).Offset
	}
	return rec.Offset
}

// set sets the row's mode columns for change ch of rec; tomb is true for a tombstone's
// row. Errors: a mode column the table lacks (checked at start-up: not expected).
func (m *modeFill) set(row *rowView, ch Change, rec *kgo.Record, tomb bool, env *decode.EnvelopeChange) error {
	for _, f := range m.envFields {
		if err := row.setTop(envelopeColumn(f).name, envelopeValue(f, env, tomb)); err != nil {
			return err
		}
	}
	// A snapshot read ordered by its position (Change.SeqFromPosition) gets its sequence
	// once the flush is planned (Stage.SetSequence): NULL until then.
	if m.seqColumn != "" {
		seq := parquet.NullValue()
		if !tomb && !ch.SeqFromPosition {
			seq = parquet.Int64Value(ch.Seq)
		}
		if err := row.setTop(m.seqColumn, seq); err != nil {
			return err
		}
	}
	switch {
	case m.changelog:
		op := OpUpsert
		if ch.Delete {
			op = OpDelete
		}
		seq := parquet.NullValue()
		if (!tomb || !m.ordered) && !ch.SeqFromPosition {
			seq = parquet.Int64Value(m.sequence(ch, rec))
		}
		if err := row.setTop(ChangeOperation, parquet.ByteArrayValue([]byte(op))); err != nil {
			return err
		}
		return row.setTop(ChangeSequence, seq)
	case m.soft:
		seq := parquet.NullValue()
		if ch.Delete && !ch.SeqFromPosition {
			seq = parquet.Int64Value(m.sequence(ch, rec))
		}
		if err := row.setTop(Deleted, parquet.BooleanValue(ch.Delete)); err != nil {
			return err
		}
		return row.setTop(DeletedSequence, seq)
	}
	return nil
}

// envelopeValue is the value of envelope field f (table.envelope_columns) of change env;
// NULL for a tombstone's row, and for a field the change lacks.
func envelopeValue(f string, env *decode.EnvelopeChange, tomb bool) parquet.Value {
	if tomb || env == nil {
		return parquet.NullValue()
	}
	var v int64
	var ok bool
	switch f {
	case config.EnvelopeOp:
		return parquet.ByteArrayValue([]byte{env.Op})
	case config.EnvelopeLSN:
		v, ok = env.LSN, env.HasLSN
	case config.EnvelopeSourceTsMs:
		v, ok = env.SourceTsMs, env.HasSourceTsMs
	case config.EnvelopeTsMs:
		v, ok = env.TsMs, env.HasTsMs
	}
	if !ok {
		return parquet.NullValue()
	}
	return parquet.Int64Value(v)
}

// TombstoneRow appends the row of a tombstone of a changelog table to cols (the flush's
// column buffers, by leaf of the Table's Parquet schema) and places it like a decoded
// row: its key columns hold the key its Kafka key names (read as Tombstone reads it),
// every other column NULL until the fills (Kafka and generated columns, CHECK
// constraints) and the changelog columns (_change_operation 'delete', _change_sequence
// NULL under sequence_by, else the offset) set theirs. Errors: Tombstone's missing_key,
// a fill's (nothing of the row is left in cols).
func (s *Stage) TombstoneRow(cfg *config.Config, rec *kgo.Record, cols []column.Column) error {
	k := s.keyed
	if k == nil || k.mode == nil || !k.mode.changelog {
		return errors.New("write a tombstone's row: the table is not a changelog")
	}
	if rec.Key == nil {
		return &decode.Error{Reason: decode.ReasonMissingKey, Err: errors.New("a tombstone (null value) with a null key names no key to delete")}
	}
	vals, err := s.tombstoneKey(cfg, rec.Key)
	if err != nil {
		return err
	}
	s.row.begin(cols)
	s.row.writer = &deltalog.StructType{}
	for i := range cols {
		cols[i].Append(parquet.NullValue().Level(0, 0, i))
	}
	for i, c := range k.key {
		v, err := leafKeyValue(c.field.Type, vals[i])
		if err == nil {
			err = s.row.setTop(c.field.Name, v)
		}
		if err != nil {
			s.row.drop()
			return &decode.Error{Reason: decode.ReasonMissingKey, Field: c.field.Name, Err: fmt.Errorf("a tombstone's key: column %s: %w", c.field.Name, err)}
		}
	}
	k.tomb = true
	defer func() { k.tomb = false }()
	return s.Fill(rec)
}

// leafKeyValue is a key value read from a Kafka key (goKeyValue: integers as int64) in
// the physical type of its column's leaf (INT32 for byte, short and integer).
func leafKeyValue(t deltalog.DataType, v parquet.Value) (parquet.Value, error) {
	switch t {
	case deltalog.Byte, deltalog.Short, deltalog.Integer:
		n := v.Int64()
		if n < -1<<31 || n > 1<<31-1 {
			return parquet.Value{}, fmt.Errorf("%d is out of range for a %s column", n, t)
		}
		return parquet.Int32Value(int32(n)), nil
	}
	return v, nil
}

// SoftDelete flags row (of file; nil: the unpartitioned table's cols) deleted with
// sequence seq: the row of an upsert change whose key a later tombstone of the flush
// soft-deletes (table.deletes soft), kept with its values. A seq of
// keyindex.NullSequence (a delete of a key nothing was known of before a snapshot read
// ordered by its position) is written NULL. Errors: the table has no _deleted or
// _deleted_sequence column (checked at start-up: not expected).
func (s *Stage) SoftDelete(file *PartitionFile, cols []column.Column, row int, seq int64) error {
	if err := s.setRow(file, cols, row, Deleted, parquet.BooleanValue(true)); err != nil {
		return fmt.Errorf("soft-delete a row: %w", err)
	}
	if err := s.setRow(file, cols, row, DeletedSequence, sequenceValue(seq)); err != nil {
		return fmt.Errorf("soft-delete a row: %w", err)
	}
	return nil
}

// SetSequence writes into the row of ch (a snapshot read ordered by its position:
// Change.SeqFromPosition; cols are the unpartitioned table's columns) the sequence the
// keyed flush gave it, ch.Seq: in the column the envelope sequence is stored in
// (SequenceColumn: _source_lsn, _source_ts_ms), where the key index reads it after a
// restart, and in _change_sequence of a changelog row or _deleted_sequence of a
// soft-deleted one. keyindex.NullSequence (nothing of its key known before it) is
// written NULL, which the key index reads as older than any sequence, as the flush
// ordered it. A no-op for any other change. Errors: a column the table lacks (checked at
// start-up: not expected), or that is a partition column.
func (s *Stage) SetSequence(cols []column.Column, ch Change) error {
	k := s.keyed
	if k == nil || k.mode == nil || !ch.SeqFromPosition || ch.Row < 0 {
		return nil
	}
	v := sequenceValue(ch.Seq)
	if k.mode.seqColumn != "" {
		if err := s.setRow(ch.File, cols, ch.Row, k.mode.seqColumn, v); err != nil {
			return fmt.Errorf("set a snapshot read's sequence: %w", err)
		}
	}
	name := ""
	switch {
	case k.mode.changelog:
		name = ChangeSequence
	case k.mode.soft && ch.Delete:
		name = DeletedSequence
	default:
		return nil
	}
	if err := s.setRow(ch.File, cols, ch.Row, name, v); err != nil {
		return fmt.Errorf("set a snapshot read's sequence: %w", err)
	}
	return nil
}

// sequenceValue is seq as a column value: NULL for keyindex.NullSequence.
func sequenceValue(seq int64) parquet.Value {
	if seq == keyindex.NullSequence {
		return parquet.NullValue()
	}
	return parquet.Int64Value(seq)
}

// setRow sets the value of top-level primitive column name in row of file (nil: the
// unpartitioned table's cols), a row placed before. Errors: no such column, or a
// partition column (not in the files).
func (s *Stage) setRow(file *PartitionFile, cols []column.Column, row int, name string, v parquet.Value) error {
	c, ok := s.row.column(name)
	if !ok || !c.primitive {
		return fmt.Errorf("the table lacks column %s", name)
	}
	i := c.first
	if file != nil {
		cols = file.Cols
		if i = s.parts.leafMap[i]; i < 0 { // a partition file's leaves
			return fmt.Errorf("%s is a partition column", name)
		}
	}
	def := c.maxDefLevel
	if v.IsNull() {
		def = 0
	}
	cols[i].Set(row, v.Level(0, def, i))
	return nil
}
