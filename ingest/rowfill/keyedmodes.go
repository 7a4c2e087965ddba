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
	// tombstone's row under sequence_by (a tombstone carries no sequence).
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
	if m.seqColumn != "" {
		seq := parquet.NullValue()
		if !tomb {
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
		if !tomb || !m.ordered {
			seq = parquet.Int64Value(m.sequence(ch, rec))
		}
		if err := row.setTop(ChangeOperation, parquet.ByteArrayValue([]byte(op))); err != nil {
			return err
		}
		return row.setTop(ChangeSequence, seq)
	case m.soft:
		seq := parquet.NullValue()
		if ch.Delete {
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
// soft-deletes (table.deletes soft), kept with its values. Errors: the table has no
// _deleted or _deleted_sequence column (checked at start-up: not expected).
func (s *Stage) SoftDelete(file *PartitionFile, cols []column.Column, row int, seq int64) error {
	del, ok1 := s.row.column(Deleted)
	dseq, ok2 := s.row.column(DeletedSequence)
	if !ok1 || !ok2 || !del.primitive || !dseq.primitive {
		return fmt.Errorf("soft-delete a row: the table lacks %s or %s", Deleted, DeletedSequence)
	}
	di, si := del.first, dseq.first
	if file != nil {
		cols = file.Cols
		di, si = s.parts.leafMap[di], s.parts.leafMap[si] // a partition file's leaves
		if di < 0 || si < 0 {
			return fmt.Errorf("soft-delete a row: %s or %s is a partition column", Deleted, DeletedSequence)
		}
	}
	cols[di].Set(row, parquet.BooleanValue(true).Level(0, del.maxDefLevel, di))
	cols[si].Set(row, parquet.Int64Value(seq).Level(0, dseq.maxDefLevel, si))
	return nil
}
