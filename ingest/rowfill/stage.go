package rowfill

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// Table is the table one flush writes, as the flush's commit leaves it (its new metaData
// and protocol, else the snapshot's).
type Table struct {
	Schema        *deltalog.StructType       // the final table schema (deltawriter.FileOptions.Schema)
	ColumnMapping deltalog.ColumnMappingMode // delta.columnMapping.mode
	// Parquet is the table-wide Parquet schema of Schema under ColumnMapping
	// (deltawriter.ParquetSchema): the leaf column indexes of the flush's column buffers.
	Parquet *parquet.Schema
	// Configuration is metaData.configuration after the commit
	// (deltawriter.FileOptions.Configuration): generated columns are evaluated in its
	// ingestd.generation.timeZone, CHECK constraints read delta.constraints.*, and
	// delta.randomizeFilePrefixes places partition files.
	Configuration map[string]string
	// PartitionColumns are metaData.partitionColumns (logical names); none: unpartitioned.
	PartitionColumns []string
	// Protocol is the table's protocol; nil without one. The writer feature
	// materializePartitionColumns keeps the partition columns in the data files.
	Protocol *deltalog.Protocol
}

// Source is the Kafka record a row's Kafka columns describe (Options.Origin).
type Source struct {
	Topic     string
	Partition int32
	Offset    int64
	Headers   []kgo.RecordHeader // in order, repeats kept
	// TimestampMs is the record's Kafka timestamp, ms since the Unix epoch (-1: none),
	// the broker's exact value.
	TimestampMs int64
}

// Options are what a Stage needs besides the table.
type Options struct {
	// MaxOpenPartitions is how many partition value tuples (data files) one flush may
	// open: batch.max_open_partitions for a consumer's flush; 0 is unbounded (a replay,
	// whose batch batch.max_records alone bounds).
	MaxOpenPartitions int
	// Keys are the key writer schemas resolved for this flush (key_format avro).
	Keys KeySchemas
	// Origin, when set, gives the source the Kafka columns hold for a record: a replay's
	// is the original record that the dead letter keeps. Nil: the record's own. It is
	// called once per record filled.
	Origin func(*kgo.Record) Source
	// Log receives the partitioner's warnings (a __HIVE_DEFAULT_PARTITION__ string value,
	// once per flush).
	Log *slog.Logger
	// Levelled starts every partition file's columns levelled instead of dense where the
	// leaf allows (column.Column.ToLevelled): the levelled baseline of the flush's tests
	// and benchmarks.
	Levelled bool
}

// Stage is the per-row stage of one flush after decoding: for each record decoded into the
// flush's column buffers it runs the column fills in order (Kafka columns, generated
// columns, CHECK constraints) and, for a partitioned table, moves the row into its
// partition's file (Partitioner). A Stage is built per flush (New) and used by one
// goroutine; see the package documentation for its memory.
type Stage struct {
	row   *rowView
	fills []columnFill // run on every decoded row, in order (fillsFor)
	parts *Partitioner // nil: an unpartitioned table, whose rows stay in the columns
	// filled are the dense-capable top-level columns a fill sets on every row it accepts
	// (fillTargets); detour is those the decoder of writer schema detourWS only writes a
	// null into (detourFor), which Begin sends to the row's spare columns instead, so that
	// the null does not turn the real column levelled before the fill sets it.
	filled   []filledColumn
	detour   []int
	detourWS *decode.WriterSchema
	// kafka is the Kafka column fill (nil without Kafka columns); outOfRange counts the
	// rows placed whose record timestamp was outside Delta's range (written NULL).
	kafka      *kafkaFill
	outOfRange int
	// keyed reads each row's key, sequence and delete flag for a keyed table (Changes);
	// nil for an append table.
	keyed *keyFill
	// keys are the key writer schemas resolved for the flush (Options.Keys): a keyed
	// table's tombstones with Avro keys are read with them.
	keys KeySchemas
}

// New builds the per-row stage of a flush of cfg's pipeline to table t: the Kafka column
// fill (table.kafka_columns, in table.key_format), the generated column fill (the
// table's delta.generationExpression columns, evaluated as Spark does; PROTOCOL.md,
// Generated Columns), the check of its CHECK constraints and column invariants
// (PROTOCOL.md, Check Constraints, Column Invariants) and its partitioner (PROTOCOL.md,
// Partition Value Serialization). It returns nil, nil when rows need none of these (no
// fills, an unpartitioned table): the decoded rows then stay in the flush's columns as
// they are. Errors: a configured Kafka column the schema lacks or cannot hold
// (kafkacols.Check), a generated column or constraint that does not compile, a partition
// column the schema lacks or cannot partition by (deltawriter.CheckPartitionColumns).
func New(cfg *config.Config, t Table, o Options) (*Stage, error) {
	fills, err := fillsFor(cfg, t.Schema, t.ColumnMapping, t.Parquet, t.Configuration, o)
	if err != nil {
		return nil, err
	}
	row, err := newRowView(t.Schema, t.ColumnMapping, t.Parquet)
	if err != nil {
		return nil, err
	}
	materialize := t.Protocol != nil && slices.Contains(t.Protocol.WriterFeatures, deltalog.FeatureMaterializePartitionColumns)
	random := t.ColumnMapping != deltalog.ColumnMappingNone || t.Configuration[deltalog.PropRandomizeFilePrefixes] == "true"
	parts, err := newPartitioner(t.Schema, t.PartitionColumns, t.ColumnMapping, t.Parquet, row, materialize, random, o.MaxOpenPartitions, o.Log)
	if err != nil {
		return nil, err
	}
	if parts != nil {
		parts.levelled = o.Levelled
	}
	keyed, err := newKeyFill(cfg, t.Schema, o)
	if err != nil {
		return nil, err
	}
	if keyed != nil {
		keyed.colMode = t.ColumnMapping
	}
	if len(fills) == 0 && parts == nil && keyed == nil {
		return nil, nil
	}
	s := &Stage{row: row, fills: fills, parts: parts, keyed: keyed, keys: o.Keys}
	for _, fl := range fills {
		if kf, ok := fl.(*kafkaFill); ok {
			s.kafka = kf
		}
	}
	s.filled = fillTargets(cfg, fills, row, column.Leaves(t.Parquet))
	return s, nil
}

// TimestampsOutOfRange is how many rows this Stage placed whose record's Kafka timestamp
// was outside the range _kafka_timestamp holds (0001-01-01..9999-12-31,
// kafkacols.TimestampMicros) and was written NULL; 0 for a nil Stage.
func (s *Stage) TimestampsOutOfRange() int {
	if s == nil {
		return 0
	}
	return s.outOfRange
}

// Partitioner is the flush's partitioner; nil for an unpartitioned table (and for a nil
// Stage).
func (s *Stage) Partitioner() *Partitioner {
	if s == nil {
		return nil
	}
	return s.parts
}

// Begin starts the row of the next record, of writer schema ws, at the current end of
// cols (the flush's column buffers, by leaf of Table.Parquet), before the record is
// decoded into them. The decoder's values of the columns the fills set that ws lacks go
// to spare columns until Decoded, so that its null does not turn a dense column levelled.
func (s *Stage) Begin(cols []column.Column, ws *decode.WriterSchema) {
	s.row.begin(cols)
	s.row.writer = ws.Delta
	if ws != s.detourWS { // records come in runs of one writer schema
		s.detourFor(ws)
	}
	s.row.swapSpares(s.detour)
}

// Decoded ends the decode Begin started, whether it failed or not: the real columns are
// back in the buffers. After a failed decode (which cuts every column back to Begin's
// length) the record has no row and Fill is not called.
func (s *Stage) Decoded() {
	if len(s.detour) > 0 { // small enough to inline: no call per record without a detour
		s.restoreSpares()
	}
}

// restoreSpares puts the real columns of the detoured leaves back and empties their
// spares (the decoder's values, which a fill replaces).
func (s *Stage) restoreSpares() {
	s.row.swapSpares(s.detour)
	s.row.clearSpares(s.detour)
}

// Envelope gives the envelope change (table.envelope) of the row Fill fills next: its
// operation deletes the key (decode.OpDelete), and its source.lsn or source.ts_ms is the
// sequence when table.sequence_by names one. c must stay valid until Fill returns. A
// no-op for a Stage of a table that is not keyed (and for a nil Stage).
func (s *Stage) Envelope(c *decode.EnvelopeChange) {
	if s != nil && s.keyed != nil {
		s.keyed.env = c
	}
}

// Fill runs the fills on the row of rec decoded since Begin, in order, then, for a
// partitioned table, moves the row into its partition's file. Errors (nothing of the row
// is left in the buffers): a *decode.Error rejects that record only, routed by its Reason
// like a decode failure (key_decode_error, not_null_violation,
// generated_column_mismatch, check_violation, decode_error); ErrPartitionLimit when its
// partition value would open one file more than Options.MaxOpenPartitions; any other
// error is the record's decode_error.
func (s *Stage) Fill(rec *kgo.Record) error {
	for _, fl := range s.fills {
		if err := fl.fill(rec, s.row); err != nil {
			s.row.drop()
			return err
		}
	}
	if len(s.detour) > 0 {
		s.row.fillMissing(s.detour)
	}
	switch {
	case s.keyed != nil:
		if err := s.keyedPlace(rec); err != nil { // reads the key, then places the row
			return err
		}
	case s.parts != nil:
		if err := s.parts.place(s.row); err != nil { // moves the row into its partition's file
			return err
		}
	}
	if s.kafka != nil && s.kafka.outOfRange {
		s.outOfRange++
	}
	return nil
}

// keyedPlace reads the row's key (keyFill.read) before placing it, and records its change
// once placed.
func (s *Stage) keyedPlace(rec *kgo.Record) error {
	ch, err := s.keyed.read(s.row)
	if err != nil {
		s.row.drop()
		return err
	}
	ch.Rec = rec
	if m := s.keyed.mode; m != nil {
		if err := m.set(s.row, ch, rec, s.keyed.tomb, s.keyed.env); err != nil {
			s.row.drop()
			s.keyed.arena = s.keyed.arena[:len(s.keyed.arena)-len(ch.Key)]
			return err
		}
	}
	if s.parts == nil {
		ch.Row = s.keyed.unparted
		s.keyed.unparted++
	} else {
		if err := s.parts.place(s.row); err != nil {
			s.keyed.arena = s.keyed.arena[:len(s.keyed.arena)-len(ch.Key)]
			return err
		}
		ch.File, ch.Row = s.parts.last, s.parts.last.Rows-1
	}
	s.keyed.changes = append(s.keyed.changes, ch)
	return nil
}

// columnFill computes or checks columns of one record after its value is decoded
// (generated columns, Kafka columns). fill reads and writes the record's row through
// row. A *decode.Error return rejects that record only: it is routed by its Reason like
// any decode failure, and Stage.Fill removes the row's values from the buffers
// (rowView.drop). Any other error is routed as decode.ReasonDecodeError.
//
// Stage.Fill runs a flush's fills (fillsFor) in order after every successful decode,
// then reads the partition values from the row (Partitioner.place).
type columnFill interface {
	fill(rec *kgo.Record, row *rowView) error
}

// fillsFor returns the column fills of a flush whose final table schema is schema, under
// column mapping mode cm, with Parquet schema pq (from deltawriter.ParquetSchema): Kafka
// columns first, then generated columns (a generated column may derive from
// _kafka_timestamp), then the check of the table's CHECK constraints and invariants. It
// returns none for a table without such columns. Errors: a column the configuration asks
// for that the schema cannot hold (each constructor names it).
//
// conf is the table's configuration after the flush's commit (FileOptions.Configuration):
// generated columns are evaluated in its ingestd.generation.timeZone.
func fillsFor(cfg *config.Config, schema *deltalog.StructType, cm deltalog.ColumnMappingMode, pq *parquet.Schema, conf map[string]string, o Options) ([]columnFill, error) {
	var fills []columnFill
	if len(cfg.Table.KafkaColumns) > 0 { // Kafka columns (table.kafka_columns), kafka.go
		kf, err := newKafkaFill(cfg, schema, cm, pq, o)
		if err != nil {
			return nil, err
		}
		fills = append(fills, kf)
	}
	gen, err := newGeneratedFill(schema, conf) // generated columns (table.generated_columns)
	if err != nil {
		return nil, fmt.Errorf("prepare generated columns: %w", err)
	}
	if gen != nil {
		fills = append(fills, gen)
	}
	cons, err := newConstraintFill(schema, cm, pq, conf) // CHECK constraints and invariants: check only, after every column is filled
	if err != nil {
		return nil, fmt.Errorf("prepare CHECK constraints: %w", err)
	}
	if cons != nil {
		fills = append(fills, cons)
	}
	return fills, nil
}

// filledColumn is a top-level column whose every accepted row's value a fill sets
// (rowView.setTop): a Kafka column (always) or a generated column (computed when the
// writer lacks it, else checked and set to the same value).
type filledColumn struct {
	leaf      int
	generated string // the generated column's name; "" for a Kafka column
}

// fillTargets lists the filled columns of a flush whose leaves may be dense
// (column.Leaf.Denseable, BYTE_ARRAY included): the configured Kafka columns
// _kafka_topic, _kafka_partition, _kafka_offset, _kafka_timestamp and a primitive
// _kafka_key (a string or binary key; kafkaFill.fill sets each on every row it accepts,
// a null key as NULL), and the generated columns of the flush's generatedFill.
// rowView.spare readies a levelled spare for each.
func fillTargets(cfg *config.Config, fills []columnFill, row *rowView, leaves []column.Leaf) []filledColumn {
	var out []filledColumn
	add := func(name, generated string) {
		c, ok := row.column(name)
		if ok && c.primitive && leaves[c.first].Denseable() {
			out = append(out, filledColumn{leaf: c.first, generated: generated})
			row.spare[c.first].Reset(leaves[c.first])
			row.spare[c.first].ToLevelled()
		}
	}
	for _, k := range cfg.Table.KafkaColumns {
		switch k {
		case kafkacols.Topic, kafkacols.Partition, kafkacols.Offset, kafkacols.Timestamp, kafkacols.Key:
			add(kafkacols.Column(k), "")
		}
	}
	for _, fl := range fills {
		if g, ok := fl.(*generatedFill); ok {
			for i := range g.cols {
				add(g.cols[i].Field.Name, g.cols[i].Field.Name)
			}
		}
	}
	return out
}

// detourFor sets s.detour to the leaves of s.filled whose decoded value no fill reads for
// a record of writer schema ws: every Kafka column, and the generated columns ws lacks
// (the decoder writes them NULL; one ws supplies is checked against its value, so it is
// decoded into its column). Begin calls it when the writer schema changes.
func (s *Stage) detourFor(ws *decode.WriterSchema) {
	s.detourWS, s.detour = ws, s.detour[:0]
	for _, c := range s.filled {
		if c.generated != "" && ws.Delta != nil && ws.Delta.FieldByKey(c.generated) != nil {
			continue
		}
		s.detour = append(s.detour, c.leaf)
	}
}
