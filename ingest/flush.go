package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/column"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/dlq"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
	"github.com/ingestd/ingestd/ingest/kafkacols"
	"github.com/ingestd/ingestd/ingest/rowfill"
	"github.com/ingestd/ingestd/schemaguard"
)

// errSnapshotChanged asks the flusher's owner (Pipeline.writeLocked, replayer.flush) to
// rebuild the commit on a fresh snapshot: another writer changed the table's metadata or protocol, or moved one of the
// batch's txns.
var errSnapshotChanged = errors.New("table changed under the commit")

const engineInfo = "ingestd"

// flusher turns one batch of records into at most one Delta commit (docs/architecture.md,
// Data flow and Exactly-once): it reads the table, lets the guard plan the batch's writer
// schemas, routes every record (write, dead-letter, halt, skip), decodes the written ones
// into column buffers and runs their per-row stage (rowfill.Stage), produces the dead
// letters and waits for their acknowledgement, writes the data files and commits them
// with the schema change and one txn per source partition. The consumer pipeline and a
// replay each own one, with their mode. Not safe for concurrent use: its owner
// serialises flushes (the Pipeline's flush token).
type flusher struct {
	cfg   *config.Config
	deps  Deps
	log   *slog.Logger
	m     *Metrics
	mode  mode
	rules rules
	// format is the pipeline's record format (config.Config.Format, avro when unset); a
	// writer schema of another format fails every record of its id.
	format string
	dlq    *dlq.Producer  // dead letters; nil when the pipeline has none (rules.hasDLQ false)
	carry  *dlq.Producer  // a replay's carried-forward records; nil otherwise
	dlLog  *deadLetterLog // the rate-limited WARN lines about dead letters
	// halted holds the owner's halted partitions: a flush does not handle their records.
	halted map[topicPartition]HaltedPartition

	// commitID is commitInfo.txnId of the next commit, named in advance in every dead
	// letter (ingestd.commit.id) so that replay can tell whether the commit that
	// acknowledges it is the one that moved its txn (dlq.AckIndex). Every attempt and
	// every non-committing flush reuse it; a new one follows each commit. deadSet holds
	// the records whose dead letter (or carried copy) under commitID was acknowledged but
	// not committed yet: every rebuild keeps them so instead of deciding again, so that a
	// record that fits after a concurrent schema change is not written as well.
	commitID string
	deadSet  map[recordKey]deadEntry
	// noTableTxns holds, per partition, the last offset of dead-letter-only flushes made
	// while the table did not exist (nothing to commit then): the commit that creates the
	// table moves these txns too, under the commitID the dead letters name, so replay
	// classifies them as real. The owner drops a partition's entry when it loses it.
	noTableTxns map[topicPartition]int64
	// fromGroup holds, per partition assigned while the table did not exist, the last
	// offset its Kafka group offset covers (the fallback progress of dead-letter-only
	// flushes before a restart; see consumerMode.done): noTableTxns starts there, and the
	// commit that moves these txns names them (dlq.ParamGroupOffsetTxns), so replay knows
	// those dead letters were acknowledged by the group offset and are real.
	fromGroup map[topicPartition]int64

	// Decoders by (writer schema, table schema), and the buffers of the batch being
	// decoded: string bytes and column values (levelled or dense, package column),
	// reused across flushes.
	compiled map[decoderKey]decode.RecordDecoder
	kafka    *kafkaState // the Kafka columns' key schemas (table.kafka_columns)
	arena    decode.Arena
	colBufs  []column.Column
	// colsClean is set when every levelled value left in colBufs points into the arena's
	// kept chunks or a decoder's constants (no column fills, nothing decode.Arena.Detached),
	// once releaseCols has cleared the values aliasing the batch's records: dropping them
	// frees nothing, so the next flush reuses the buffers without clearing. Dense words
	// hold no pointers and are never cleared.
	colsClean bool
	// levelled starts every column of a flush levelled (column.Column.ToLevelled after
	// Reset) instead of dense where the leaf allows it: a test seam, the baseline of
	// BenchmarkFlushColumns.
	levelled bool
	// items is the batch's items (collect), reused across flushes; the flush clears it
	// when it ends, so that no record of a finished batch stays reachable from it.
	items []item

	// hooks are the owner's test seams (hooks.beforeCommit); nil in a replay.
	hooks *hooks

	// keyed is a keyed table's state (table.mode upsert): the key index; nil for an
	// append table.
	keyed *keyedState
	// envelopes are the compiled envelopes (table.envelope) by envelope writer schema
	// (WriterSchema.Key); nil without an envelope.
	envelopes map[int]envelopeOf
	// envs are the envelope changes of the batch's items (item.env), reused across
	// flushes and cleared with the items.
	envs []decode.EnvelopeChange
	// placeholder is table.unavailable_value's text (config.Table.Placeholder; "" without
	// an envelope: no column is searched for it).
	placeholder string
}

func newFlusher(cfg *config.Config, deps Deps, log *slog.Logger, md mode, halted map[topicPartition]HaltedPartition) *flusher {
	f := &flusher{cfg: cfg, deps: deps, log: log, m: deps.Metrics, mode: md, halted: halted,
		rules:    rules{policy: cfg.Schema.Policy, onIncompatible: cfg.Schema.OnIncompatible, hasDLQ: cfg.DeadLetter.Topic != ""},
		commitID: deltawriter.NewTxnID(), deadSet: map[recordKey]deadEntry{}, noTableTxns: map[topicPartition]int64{},
		fromGroup: map[topicPartition]int64{}, compiled: map[decoderKey]decode.RecordDecoder{}, kafka: newKafkaState(md),
		keyed: newKeyedState(cfg), dlLog: newDeadLetterLog(), format: cmp.Or(cfg.Format, config.FormatAvro), placeholder: cfg.Table.Placeholder()}
	// The batch's records (franz-go's, given no kgo.WithPools, so their buffers are never
	// reused) stay unmodified and reachable until the flush returns: values alias them
	// instead of a copy of each body; releaseCols drops them when it returns.
	f.arena.AliasPayloads()
	if cfg.Table.Envelope != "" {
		f.envelopes = map[int]envelopeOf{}
	}
	return f
}

// outcome is what one flush did (or, for a dry run, would do).
type outcome struct {
	version    int64                    // the committed table version; -1: nothing committed
	rows       int                      // rows in the data file
	bytes      int64                    // its size
	handled    map[topicPartition]int64 // per partition, the last offset handled: the txn versions
	kept       []dlq.DeadLetter         // dead-lettered by an earlier attempt under the commit id
	fresh      []dlq.DeadLetter         // dead-lettered by this attempt
	carried    []*kgo.Record            // a replay's carried-forward records (kept ones first)
	newCarried int                      // how many of carried this attempt produces (the tail)
	written    []*kgo.Record            // with a mode identity: the records whose rows are written
	files      int                      // data files written (one per partition value)
	// cutAt holds, per partition whose records would have opened more than
	// batch.max_open_partitions partition values, the offset of the first record left for
	// the next flush (routeCut): it and every later record of that partition are not
	// handled (the txn stays before it) and must be flushed again.
	cutAt map[topicPartition]int64
	// rawBytes are the key and value bytes of the written records; decodedBytes what the
	// flush decoded them into: the column values (levelled: a parquet.Value, valueBytes
	// each; dense: a word, denseBytes each; prepared.columnBytes) and their
	// Avro bodies. The flusher no longer copies the bodies (decode.Arena.AliasPayloads), but
	// they stay charged: the batch's fetch buffers outlive their records' share of them
	// and the collector's headroom grows with the batch, and charging only the values made
	// 1 KB batches 1.6× larger and the harness's peak RSS 305–344 MiB instead of 204–259
	// (docs/architecture.md, Memory). The consumer's batch.max_bytes budget
	// charges decoded bytes by their ratio (Pipeline.budgetSize).
	rawBytes, decodedBytes int64
	noTable                bool // handled without a table to record it in (noTableTxns)
	duplicates             int  // records routeDuplicate
	halts                  []HaltedPartition
}

// stopOffsets maps each partition a flush stopped early (halted, or cut at
// batch.max_open_partitions) to the offset it stopped at: that record and every later
// one of the partition are left for the flush that resumes it.
type stopOffsets map[topicPartition]int64

// stoppedAt is the outcome's halts and cuts as one map, for the stages after routing that
// handle records the router skips (a keyed table's tombstones).
func (o *outcome) stoppedAt() stopOffsets {
	s := make(stopOffsets, len(o.halts)+len(o.cutAt))
	for _, h := range o.halts {
		s[topicPartition{h.Topic, h.Partition}] = h.Offset
	}
	for k, off := range o.cutAt {
		s[k] = off
	}
	return s
}

// covers reports whether rec is at or after its partition's stop.
func (s stopOffsets) covers(rec *kgo.Record) bool {
	off, ok := s[topicPartition{rec.Topic, rec.Partition}]
	return ok && rec.Offset >= off
}

// deadLetters are the outcome's dead letters, kept ones first.
func (o *outcome) deadLetters() []dlq.DeadLetter {
	return append(o.kept[:len(o.kept):len(o.kept)], o.fresh...)
}

// flush makes one attempt to commit recs, a batch in offset order per partition: snapshot
// → plan → route and decode → produce dead letters (acknowledged) → write the data file →
// commit. Records of halted partitions and records the table already has (their txn is
// at or past them) are not handled; a halt stops its partition before the offending
// record. Errors: a *transientError (retry the same records later), errSnapshotChanged
// (rebuild on the new snapshot at once), any other is permanent (a person must act).
func (f *flusher) flush(ctx context.Context, recs []*kgo.Record, note frameNote) (*outcome, error) {
	start := time.Now()
	t, err := f.readTable(ctx)
	if err != nil {
		return nil, err
	}
	if f.keyed != nil && t.exists() {
		building := f.keyed.ix == nil
		if err := f.keyed.sync(ctx, f.deps.Table.Store(), t.snap); err != nil {
			return nil, &transientError{stage: "key index", err: err}
		}
		if building { // a new index reserves its bytes before the batch is decoded; commits report after
			f.keyed.report(f.m, f.deps.Memory, f.cfg.Name)
		}
	}
	items, err := f.collect(ctx, t, recs, note)
	if err != nil {
		return nil, err
	}
	defer f.release(items)
	if err := f.resolveKeys(ctx, t, items); err != nil {
		return nil, err
	}
	b, err := f.prepare(t, items)
	if err != nil {
		return nil, err
	}
	defer f.releaseCols(b)
	out := f.route(t, b, items)
	if f.keyed != nil {
		if b.keyed, err = f.reduceKeyed(ctx, t, b, items, out); err != nil {
			return nil, err
		}
	}
	if f.cfg.Table.Changelog() {
		// Sequences first: positions are the decoded rows' until placeholders drop rows.
		if err := f.changelogSequences(b); err != nil {
			return nil, err
		}
		if err := f.changelogUnavailable(ctx, t, b, items, out); err != nil {
			return nil, err
		}
		f.changelogTombstones(t, b, items, out)
	}
	if proceed, err := f.mode.beforeProduce(ctx, out); err != nil || !proceed {
		return out, err
	}
	// Dead letters (and carried-forward records) are acknowledged before the commit that
	// moves the txn past them.
	if err := f.produce(ctx, out); err != nil {
		return nil, err
	}
	if err := f.commit(ctx, t, b, out, recs); err != nil {
		return nil, err
	}
	if out.version >= 0 {
		f.report(b, out, time.Since(start))
	}
	f.mode.done(ctx, out)
	return out, nil
}

// readTable reads the table's latest snapshot; a table that does not exist yet is a
// state, not an error. Errors: a *transientError (the store), or the refusal of a table
// ingestd cannot write (checkWritable).
func (f *flusher) readTable(ctx context.Context) (tableState, error) {
	snap, err := f.deps.Table.Snapshot(ctx)
	switch {
	case errors.Is(err, deltawriter.ErrTableNotFound):
		return tableState{version: -1, txns: map[string]int64{}}, nil
	case err != nil:
		return tableState{}, &transientError{stage: "read snapshot", err: err}
	}
	if err := checkWritable(f.cfg, snap); err != nil {
		return tableState{}, err // permanent: nothing of this flush is written
	}
	return tableState{snap: snap, schema: snap.Schema, version: snap.Version, txns: snap.Txns}, nil
}

// collect drops what the flush does not handle (halted partitions; records the table
// already has, from a zombie or a retried commit that landed), routes what needs no
// guard (tombstones, records kept from an earlier attempt, the mode's own routes), and
// for the rest parses the frame and looks up the writer schema. Errors: a
// *transientError when the schema registry fails transiently.
func (f *flusher) collect(ctx context.Context, t tableState, recs []*kgo.Record, note frameNote) ([]item, error) {
	items := f.items[:0]
	f.envs = f.envs[:0]
	if cap(items) < len(recs) {
		items = make([]item, 0, len(recs))
	}
	// Per-record work is kept to what changes per record: records come in runs of one
	// partition and one writer schema, so the partition's txn version and the last writer
	// schema are looked up once per run (txnAppID formats a string; the registry's cache is
	// a sync.Map with a boxed key), and empty maps are not hashed into.
	var txn struct {
		topic      string
		partition  int32
		valid, has bool
		version    int64
	}
	var last struct { // the last schema looked up (for Protobuf: its file, before the message is selected)
		id int
		ws *decode.WriterSchema
	}
	noted := f.deps.Framed && note.uniform
	for _, r := range recs {
		if len(f.halted) > 0 {
			if _, h := f.halted[topicPartition{r.Topic, r.Partition}]; h {
				continue
			}
		}
		if !txn.valid || r.Partition != txn.partition || r.Topic != txn.topic {
			txn.topic, txn.partition, txn.valid = r.Topic, r.Partition, true
			txn.version, txn.has = t.txns[f.mode.txnAppID(r.Topic, r.Partition)]
		}
		if txn.has && r.Offset <= txn.version {
			f.m.RecordsSkipped.WithLabelValues(f.cfg.Name, "already_committed").Inc()
			continue
		}
		if len(f.deadSet) > 0 {
			if _, kept := f.deadSet[keyOf(r)]; kept {
				items = append(items, item{rec: r, route: routeKeep})
				continue
			}
		}
		if r.Value == nil {
			items = append(items, f.tombstone(r))
			continue
		}
		if rt, ok := f.mode.route(r); ok {
			items = append(items, item{rec: r, route: rt})
			continue
		}
		it := item{rec: r, payload: r.Value}
		if f.deps.Documents != nil { // unframed JSON: the record and the table give its writer schema
			ws, body, err := f.deps.Documents.Writer(t.schema, r.Value)
			if err == nil {
				var null bool
				if null, err = ws.ConnectNull(body); null && err == nil {
					items = append(items, f.tombstone(r))
					continue
				}
			}
			switch {
			case err != nil:
				it.fail = asDecodeError(err)
			case f.envelopes != nil && ws.Avro != nil: // only the row inside must map to Delta, not the envelope's source block (openEnvelope)
				it.ws, it.payload = ws, body
				it = f.openDocumentEnvelope(it)
			default:
				it.ws, it.payload = ws, body
				if ws.DeltaErr != nil {
					it.fail = asDecodeError(ws.DeltaErr)
				}
			}
			items = append(items, it)
			continue
		}
		id := 0
		if noted {
			id, it.payload = note.id, r.Value[decode.FrameHeaderLen:]
		} else if f.deps.Framed {
			var err error
			if id, it.payload, err = decode.ParseFrame(r.Value); err != nil {
				it.fail = asDecodeError(err)
				items = append(items, it)
				continue
			}
		}
		ws := last.ws
		if ws == nil || id != last.id {
			got, err := f.deps.Schemas.Schema(ctx, id)
			var de *decode.Error
			switch {
			case errors.As(err, &de):
				it.fail, it.ws = de, &decode.WriterSchema{ID: id}
				items = append(items, it)
				continue
			case errors.Is(err, decode.ErrRegistryAuth):
				f.release(items)
				return nil, err // permanent: the pipeline fails with the registry's refusal
			case err != nil:
				f.release(items)
				return nil, &transientError{stage: "resolve schema", what: "resolve schema id " + strconv.Itoa(id), err: err}
			}
			if got.FormatName() != f.format {
				it.fail, it.ws = formatMismatch(got, f.format), &decode.WriterSchema{ID: id}
				items = append(items, it)
				continue
			}
			ws = got
			last.id, last.ws = id, ws
		}
		if ws.Format == decode.FormatProtobuf { // the message-index array selects the file's message
			msg, body, err := ws.Message(it.payload)
			if err != nil {
				it.fail, it.ws = asDecodeError(err), ws
				items = append(items, it)
				continue
			}
			ws, it.payload = msg, body
		}
		it.ws = ws
		if f.envelopes != nil {
			items = append(items, f.openEnvelope(it))
			continue
		}
		if ws.DeltaErr != nil {
			it.fail = asDecodeError(ws.DeltaErr)
		}
		items = append(items, it)
	}
	return items, nil
}

// tombstone is the item of tombstone r, a null value or a Kafka Connect JSON value whose
// payload is null (JsonConverter converts {"schema": …, "payload": null} to a null value;
// Debezium's ExtractNewRecordState writes each delete so by default): a keyed table's
// tombstone deletes its key (reduceKeyed, changelogTombstones), other tables skip it.
func (f *flusher) tombstone(r *kgo.Record) item {
	if !f.cfg.Table.Keyed() || envelopeSkipsTombstones(f.cfg) {
		f.m.RecordsSkipped.WithLabelValues(f.cfg.Name, "tombstone").Inc()
	}
	return item{rec: r, route: routeSkip, tomb: true}
}

// release keeps items' array for the next flush's collect, cleared: no record of this
// batch stays reachable from it.
func (f *flusher) release(items []item) {
	clear(items)
	f.items = items[:0]
	clear(f.envs) // their rows alias the batch's records
	f.envs = f.envs[:0]
}

// frameNote is what the consumer's schema check (Pipeline.resolveSchemas) read of the
// frames of the batch it passes on: uniform when every value of it (tombstones aside) is a
// Confluent frame of writer schema id. collect then takes the id and the payload from the
// note instead of reading each value's first bytes a second time (at 100 K records a
// batch no longer fits the cache, so that read is a cache miss per record). The zero
// value notes nothing (collect parses every frame): a replay's batches, and progress
// commits.
type frameNote struct {
	id      int
	uniform bool
}

// prepared is a flush's plan for the table: the guard's decisions, the commit's schema
// change, and the Parquet schema and column buffers of its data file.
type prepared struct {
	opts   schemaguard.Options
	guard  schemaguard.BatchPlan
	delta  deltawriter.SchemaDelta // the commit's metaData and protocol; nil fields: unchanged
	file   deltawriter.FileOptions // the data file's: the final table schema (nil: no table), column mapping, properties
	schema *deltalog.StructType    // file.Schema
	cm     deltalog.ColumnMappingMode
	pq     *parquet.Schema
	key    string          // decoder cache key of schema and cm
	cols   []column.Column // by leaf column index of pq (flusher.colBufs)
	// stage is the per-row stage after decoding (Kafka, generated and CHECK fills,
	// partition routing); nil when no row needs it: the rows stay in cols as decoded.
	stage *rowfill.Stage
	parts *rowfill.Partitioner // stage.Partitioner(); nil: an unpartitioned table, whose rows stay in cols (one data file)
	// lastWS and lastDec are the writer schema and decoder of the last decoded record:
	// consecutive records share them, and the decoder cache's key hashes the table schema.
	lastWS  *decode.WriterSchema
	lastDec decode.RecordDecoder
	// rows counts the rows decoded into cols; candidates is how many the batch can write
	// at most (prepare); reserveSampleRows rows into an unpartitioned batch, the columns
	// are reserved for the whole batch (reserve).
	rows, candidates int
	// rawBytes and bodyBytes sum the key and value bytes and the Avro bodies of the rows
	// written (outcome.rawBytes, decodedBytes), counted as each row is decoded.
	rawBytes, bodyBytes int64
	// keyed is a keyed flush's reduction (reduceKeyed); nil for an append table.
	keyed *keyedFlush
	// unavailable is what a keyed flush did about Debezium's placeholders (fillUnavailable);
	// nil: none.
	unavailable *unavailableFill
}

// wrote counts its row as written (its bytes: rawBytes, bodyBytes).
func (b *prepared) wrote(it *item) {
	b.rawBytes += recordSize(it.rec)
	b.bodyBytes += int64(len(it.payload))
}

// prepare runs the guard over the batch's writer schemas, builds the commit's schema
// change and readies the column buffers for the final table schema.
func (f *flusher) prepare(t tableState, items []item) (*prepared, error) {
	b := &prepared{opts: guardOptions(f.cfg, t)}
	b.guard = schemaguard.PlanBatch(t.schema, writers(items), b.opts)
	kafka, err := f.kafkaFieldsToCreate(t, b.guard.Create, items)
	if err != nil {
		return nil, err
	}
	if b.delta, b.file, err = commitSchema(f.cfg, t, b.guard, kafka); err != nil {
		return nil, err
	}
	b.schema, b.cm = b.file.Schema, b.file.ColumnMapping
	if b.schema == nil {
		return b, nil
	}
	if b.pq, err = deltawriter.ParquetSchema(b.schema, b.cm); err != nil {
		return nil, fmt.Errorf("build parquet schema: %w", err)
	}
	js, err := b.schema.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode table schema: %w", err)
	}
	b.key = string(b.cm) + string(js)
	if b.stage, err = f.rowStage(t, b); err != nil {
		return nil, err
	}
	b.parts = b.stage.Partitioner()
	leaves := column.Leaves(b.pq)
	// The previous flush has returned: WriteColumns keeps no values and dead letters hold
	// Kafka records, so nothing references the previous batch's values.
	f.arena.Reset()
	n := len(leaves)
	if cap(f.colBufs) < n {
		f.colBufs = slices.Grow(f.colBufs[:0], n)
	}
	b.cols = f.colBufs[:n]
	// Every written row puts at least one entry in every leaf column (Dremel levels: a
	// null or an empty list is one value too; a dense column holds one word or byte-form
	// end offset a row), so the rows this batch can write are a lower bound of each
	// column's length: reserved here, in the form the column starts in, the decode does
	// not grow the columns of an unpartitioned table (whose rows stay in cols) value by
	// value. A dense BYTE_ARRAY column keeps the Bytes capacity the last flush's decode
	// grew it to (column.Column.Reset; within what that flush charged, so within
	// max_bytes); reserve sizes it for this batch from its first rows.
	var rows int
	if b.parts == nil {
		rows = candidates(items)
		b.candidates = rows
	}
	for i := range b.cols {
		c := &b.cols[i]
		if !f.colsClean {
			clear(c.Values) // let large values and Kafka bytes of the last batch go
		}
		c.Reset(leaves[i])
		if f.levelled {
			c.ToLevelled()
		}
		if c.IsDense() {
			if cap(c.Dense) < rows {
				c.Dense = make([]uint64, 0, rows) // no copy: the column holds nothing to keep
			}
		} else if cap(c.Values) < rows {
			c.Values = make([]parquet.Value, 0, rows)
		}
	}
	f.colsClean = false // until route says what the buffers hold
	return b, nil
}

// releaseCols clears the byte-holding values (BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY
// columns, up to each levelled buffer's capacity) of the column buffers kept for the next
// flush, once the flush is done with them (its files written, or it failed): they alias
// the batch's Kafka records (decode.Arena.AliasPayloads), and kept they would retain the
// fetch buffers of a whole batch's raw bytes until the next flush overwrote them. What is
// left holds no pointer into the batch (numbers, booleans, nulls, dense words, and the
// byte form's Bytes, copies the column owns: column.Column; a levelled column that was
// dense has values aliasing its own Bytes, cleared here too; colsClean still decides
// whether prepare clears the rest).
func (f *flusher) releaseCols(b *prepared) {
	if b.pq == nil {
		return // no table schema: nothing was decoded
	}
	for i := range min(len(b.cols), len(f.colBufs)) {
		c := &f.colBufs[i]
		if k := c.Leaf().Kind; k == parquet.ByteArray || k == parquet.FixedLenByteArray {
			clear(c.Values[:cap(c.Values)])
		}
	}
}

// reserveSampleRows is how many rows of a batch are decoded before reserve sizes the
// columns of repeated fields (lists, maps) for the whole batch from them.
const reserveSampleRows = 256

// reserve grows each column of an unpartitioned batch, b.rows rows into it, to the entries
// the batch's candidate rows make at the sampled entries per row, plus an eighth: prepare
// reserved one entry per row, enough for every column but those of repeated fields, whose
// buffers would otherwise grow value by value through the batch (the first flush, or one
// with longer lists than the last). Nothing is reserved when the columns' buffers would
// exceed maxBytes (batch.max_bytes, the memory a batch may take) at valueBytes a levelled
// value, denseBytes a dense word and one byte a byte-form value byte: an unrepresentative
// sample then costs growth, never memory beyond the budget. A column grows in the form it
// holds (a dense one's Dense, and a dense BYTE_ARRAY column's Bytes too, to the sample's
// bytes per row plus an eighth, string lengths vary; column.Column, the byte form).
func (b *prepared) reserve(maxBytes int64) {
	if b.rows == 0 || b.candidates <= b.rows {
		return
	}
	want := make([]int, len(b.cols))
	wantBytes := make([]int, len(b.cols))
	var total int64
	for i := range b.cols {
		c := &b.cols[i]
		n := c.Len() * b.candidates / b.rows
		if c.Len() > b.rows { // a repeated field: its sample's values per row vary
			n += n / 8
		}
		if c.IsDense() {
			want[i] = max(n, cap(c.Dense))
			total += int64(want[i]) * denseBytes
			if c.Leaf().Kind == parquet.ByteArray {
				nb := len(c.Bytes) * b.candidates / b.rows
				wantBytes[i] = max(nb+nb/8, cap(c.Bytes))
				total += int64(wantBytes[i])
			}
		} else {
			want[i] = max(n, cap(c.Values))
			total += int64(want[i]) * valueBytes
		}
	}
	if maxBytes > 0 && total > maxBytes {
		return
	}
	for i := range b.cols {
		c := &b.cols[i]
		if c.IsDense() {
			if cap(c.Dense) < want[i] {
				c.Dense = slices.Grow(c.Dense, want[i]-len(c.Dense))
			}
			if cap(c.Bytes) < wantBytes[i] { // a copy: nothing aliases a dense column's Bytes past its row
				c.Bytes = slices.Grow(c.Bytes, wantBytes[i]-len(c.Bytes))
			}
		} else if cap(c.Values) < want[i] {
			c.Values = slices.Grow(c.Values, want[i]-len(c.Values))
		}
	}
}

// candidates counts the items the guard may route to the data file: at most that many
// rows are written.
func candidates(items []item) int {
	n := 0
	for i := range items {
		if items[i].route == routeGuard && items[i].fail == nil {
			n++
		}
	}
	return n
}

// route routes the items (router), decoding the written ones into b's columns, and
// gathers the outcome: dead letters (named with the next commit), carried records, halts.
func (f *flusher) route(t tableState, b *prepared, items []item) *outcome {
	rt := router{rules: f.rules, guard: b.guard, opts: b.opts, table: f.cfg.Name, version: t.version,
		identity: f.mode.identity(),
		decode: func(it *item) error {
			if err := f.decodeRow(b, it); err != nil {
				return err
			}
			if b.parts == nil {
				b.rows++ // the row stays in b.cols
			}
			b.wrote(it)
			return nil
		}}
	res := rt.route(items)
	if b.cols != nil {
		f.colBufs = b.cols // the same array: its columns keep their grown buffers for the next flush
		f.colsClean = b.stage == nil && f.arena.Detached() == 0
	}
	out := &outcome{version: -1, rows: res.rows, handled: res.handled, cutAt: map[topicPartition]int64{},
		rawBytes: b.rawBytes, decodedBytes: b.bodyBytes}
	var fresh []*kgo.Record
	for i, r := range res.routes {
		if r == routeWrite && rt.identity == nil || r == routeGuard {
			continue // nothing to gather: the item stays untouched (a cache miss less per row)
		}
		it := &items[i]
		var why rejection
		if r == routeDeadLetter || r == routeHalt {
			why = res.why[i] // only these have one
		}
		switch r {
		case routeWrite:
			out.written = append(out.written, it.rec)
		case routeSkip:
			if it.route == routeGuard { // the guard's skip: a null top-level value
				f.m.RecordsSkipped.WithLabelValues(f.cfg.Name, "null_record").Inc()
			}
		case routeDuplicate:
			out.duplicates++
		case routeKeep:
			if e := f.deadSet[keyOf(it.rec)]; e.carried {
				out.carried = append(out.carried, it.rec)
			} else {
				out.kept = append(out.kept, e.dl)
			}
		case routeCarry:
			fresh = append(fresh, it.rec)
		case routeDeadLetter:
			out.fresh = append(out.fresh, dlq.DeadLetter{Pipeline: f.cfg.Name, Rec: it.rec, Reason: why.fail.Reason,
				Field: why.fail.Field, Message: why.message, Details: why.fail.Details, SchemaID: it.schemaID(), TableVersion: t.version, Ack: f.ackOf(it.rec)})
		case routeCut:
			out.cutAt[topicPartition{it.rec.Topic, it.rec.Partition}] = it.rec.Offset
		case routeHalt:
			out.halts = append(out.halts, HaltedPartition{Topic: it.rec.Topic, Partition: it.rec.Partition, Offset: it.rec.Offset,
				Reason: why.fail.Reason, Field: why.fail.Field, Message: why.message})
		}
	}
	out.newCarried = len(fresh)
	out.carried = append(out.carried, fresh...)
	out.decodedBytes += b.columnBytes()
	return out
}

// decodeRow decodes it, a record the router writes, into b's columns, runs the row
// fills and, for a partitioned table, moves the row into its partition's file. Errors:
// the decoder's or a fill's (nothing of the row is left in the columns).
func (f *flusher) decodeRow(b *prepared, it *item) error {
	dec, err := f.decoder(it.ws, b)
	if err != nil {
		return err
	}
	if b.rows == reserveSampleRows && b.parts == nil {
		b.reserve(int64(f.cfg.Batch.MaxBytes))
	}
	if b.stage == nil {
		return dec.DecodeColumns(&f.arena, it.payload, b.cols) // the row stays in b.cols: nothing to fill or move
	}
	b.stage.Begin(b.cols, it.ws)
	err = dec.DecodeColumns(&f.arena, it.payload, b.cols)
	b.stage.Decoded() // the real columns back, the decoder's nulls of filled columns dropped
	if err != nil {
		return err // DecodeColumns cut every column back to Begin's length
	}
	if it.env > 0 {
		b.stage.Envelope(&f.envs[it.env-1])
	}
	return b.stage.Fill(it.rec) // the fills, then the move into its partition's file
}

// valueBytes is the size of one levelled column value (a parquet.Value), denseBytes of
// one dense word or byte-form end offset (column.Column.Dense).
const (
	valueBytes = int64(unsafe.Sizeof(parquet.Value{}))
	denseBytes = int64(unsafe.Sizeof(uint64(0)))
)

// columnBytes is the size of the column entries the flush decoded (in cols, or moved
// into the partitions' files): valueBytes a levelled value, denseBytes a dense word or
// byte-form offset, plus the BYTE_ARRAY value bytes the columns hold themselves
// (column.Column.ByteSize: a dense string's bytes, and those of a levelled column that
// was dense or took copies), in bytes.
func (b *prepared) columnBytes() int64 {
	n := colBytes(b.cols)
	if b.parts != nil {
		for _, part := range b.parts.Files() {
			n += colBytes(part.Cols)
		}
	}
	return n
}

// colBytes is what the entries of cols cost, in bytes (see columnBytes).
func colBytes(cols []column.Column) int64 {
	var n int64
	for i := range cols {
		c := &cols[i]
		if c.IsDense() {
			n += int64(c.Len()) * denseBytes
		} else {
			n += int64(c.Len()) * valueBytes
		}
		n += int64(c.ByteSize())
	}
	return n
}

// produce sends this attempt's dead letters and carried-forward records and waits for
// their acknowledgement; once acknowledged they join deadSet, so every rebuild of this
// batch keeps them. Errors: a *transientError.
func (f *flusher) produce(ctx context.Context, out *outcome) error {
	if len(out.fresh) > 0 {
		if f.dlq == nil {
			return fmt.Errorf("dead-letter %d records of pipeline %s: it has no dead_letter.topic (set one in %s)", len(out.fresh), f.cfg.Name, f.cfg.File)
		}
		now := time.Now()
		recs := make([]*kgo.Record, len(out.fresh))
		for i, d := range out.fresh {
			recs[i] = f.mode.deadLetter(d, now)
		}
		if err := f.dlq.Produce(ctx, recs); err != nil {
			if se := kafkaclient.AsSecurityError(f.cfg.Kafka, "WRITE on topic "+recs[0].Topic, err); se != nil {
				return se // authentication, authorization, certificates: fatal, names the principal and the ACL
			}
			return produceError("produce dead letters", recs[0].Topic, err)
		}
		byReason := map[string]int{}
		example := map[string]dlq.DeadLetter{}
		for _, d := range out.fresh {
			f.deadSet[keyOf(d.Rec)] = deadEntry{dl: d}
			if byReason[d.Reason]++; byReason[d.Reason] == 1 {
				example[d.Reason] = d
			}
		}
		for _, reason := range slices.Sorted(maps.Keys(byReason)) {
			observe(f.m, f.log, f.cfg.Name, verdict{action: actDeadLetter, reason: reason}, byReason[reason], "dead-lettered records", "topic", recs[0].Topic)
			f.dlLog.add(f.log, reason, byReason[reason], example[reason].Rec.Topic, example[reason].Field, example[reason].Message)
		}
	}
	if carried := out.carried[len(out.carried)-out.newCarried:]; len(carried) > 0 {
		recs := make([]*kgo.Record, len(carried))
		for i, r := range carried {
			recs[i] = dlq.Carried(r, f.ackOf(r))
		}
		if err := f.carry.Produce(ctx, recs); err != nil {
			if se := kafkaclient.AsSecurityError(f.cfg.Kafka, "WRITE on topic "+recs[0].Topic, err); se != nil {
				return se
			}
			return produceError("carry forward", recs[0].Topic, err)
		}
		for _, r := range carried {
			f.deadSet[keyOf(r)] = deadEntry{carried: true}
		}
	}
	return nil
}

// commit writes the data file and commits it with the schema change and the txns of the
// partitions handled (out.version is set); with nothing to record, or no table to record
// it in, it commits nothing. Errors: a *transientError (store, commit), errSnapshotChanged
// (another writer won: rebuild), or permanent (an unsupported table feature).
func (f *flusher) commit(ctx context.Context, t tableState, b *prepared, out *outcome, recs []*kgo.Record) error {
	if !t.exists() && !b.guard.Create {
		// No table yet and no record that could define its schema (only tombstones and dead
		// letters): the dead letters are acknowledged but there is no txn to move. The commit
		// id stays, and the commit that creates the table moves these partitions' txns past
		// them too, so that it is the commit they name. After a restart before that, the
		// records are read (and dead-lettered) again and these copies become orphans.
		for k, off := range out.handled {
			f.noTableTxns[k] = max(f.noTableTxns[k], off)
		}
		out.noTable = len(out.handled) > 0
		f.forget(recs)
		return nil
	}
	for k, off := range f.noTableTxns {
		if h, ok := out.handled[k]; !ok || h < off {
			out.handled[k] = off
		}
	}
	c := deltawriter.Commit{ReadVersion: t.version, Operation: "WRITE", OperationParameters: map[string]string{"mode": "Append"},
		EngineInfo: engineInfo, TxnID: f.commitID, Protocol: b.delta.Protocol, Metadata: b.delta.Metadata}
	if b.delta.Metadata != nil && !b.guard.Create {
		c.OperationParameters["mergeSchema"] = "true"
	}
	if len(f.fromGroup) > 0 {
		from := map[string]int64{}
		for k, off := range f.fromGroup {
			from[f.mode.txnAppID(k.topic, k.partition)] = off
		}
		c.OperationParameters[dlq.ParamGroupOffsetTxns] = dlq.FormatGroupOffsetTxns(from)
	}
	adds, err := f.writeFiles(ctx, b, out)
	if err != nil {
		return err
	}
	c.Adds = adds
	if f.hooks != nil && f.hooks.afterWrite != nil {
		if err := f.hooks.afterWrite(); err != nil {
			return err
		}
	}
	if b.keyed != nil {
		removes, marked, err := f.keyedActions(ctx, t, b.keyed, adds)
		if err != nil {
			return err
		}
		c.Removes, c.Adds = removes, append(adds[:len(adds):len(adds)], marked...)
		if c.Domains, err = f.deletesDomains(t, b.keyed, time.Now()); err != nil {
			return err
		}
		// The commit's rows were decided on what the table held: a winner that added or
		// re-marked rows conflicts (deltawriter.ErrConcurrentAppend), rebuilt on its snapshot.
		c.Operation, c.OperationParameters["mode"], c.ReadsData, c.ConflictOnDataChange = "MERGE", "Upsert", true, true
	}
	now := time.Now().UnixMilli()
	for k, off := range out.handled {
		c.Txns = append(c.Txns, deltalog.Txn{AppID: f.mode.txnAppID(k.topic, k.partition), Version: off, LastUpdated: &now})
	}
	if len(c.Txns) == 0 && len(c.Adds) == 0 && len(c.Removes) == 0 {
		f.forget(recs) // nothing to record
		return nil
	}
	if f.hooks != nil && f.hooks.beforeCommit != nil {
		if err := f.hooks.beforeCommit(len(out.fresh)); err != nil {
			return err
		}
	}
	version, err := f.deps.Table.Commit(ctx, c)
	switch {
	case errors.Is(err, deltawriter.ErrTxnAlreadyCommitted):
		// A zombie fence: a winner covers one of our partitions' offsets. Other partitions
		// of this batch may not be covered, so never drop the whole batch: rebuild on the
		// new snapshot, whose txn versions drop exactly what the table already has.
		f.log.Warn("another writer already committed some of these offsets; rebuilding the batch without them", "records", len(recs))
		return errSnapshotChanged
	case errors.Is(err, deltawriter.ErrUnsupportedFeature):
		return fmt.Errorf("commit to %s: %w", f.cfg.Table.URI, err) // permanent: a person must act
	case errors.Is(err, deltawriter.ErrMetadataChanged), errors.Is(err, deltawriter.ErrConcurrentTxn),
		errors.Is(err, deltawriter.ErrConcurrentDelete), errors.Is(err, deltawriter.ErrConcurrentAppend):
		// Another writer changed the schema, or moved one of our partitions' txn to a
		// version inside this batch: rebuild on the new snapshot, which drops what it has.
		return errSnapshotChanged
	case err != nil:
		return &transientError{stage: "commit", err: err}
	}
	// Committed under commitID: what it acknowledged is settled; the next commit gets a
	// new id, and whatever is still in deadSet (records of a failed flush) must be decided
	// and dead-lettered again under it.
	out.version = version
	if b.keyed != nil {
		f.committedKeyed(ctx, version, t, b.keyed, adds)
	}
	f.commitID = deltawriter.NewTxnID()
	clear(f.deadSet)
	clear(f.noTableTxns)
	clear(f.fromGroup)
	return nil
}

// writeFiles writes the flush's data files: one for an unpartitioned table, one per
// partition value tuple otherwise (under its Hive-style directory, with its
// add.partitionValues, written concurrently in the partitioner's order), all for the
// one commit. Errors: a *transientError (the store), the first of the files that failed.
func (f *flusher) writeFiles(ctx context.Context, b *prepared, out *outcome) ([]deltalog.Add, error) {
	if out.rows == 0 {
		return nil, nil
	}
	if b.parts == nil {
		add, err := deltawriter.WriteColumns(ctx, f.deps.Table.Store(), b.pq, b.cols, out.rows, b.file)
		if err != nil {
			return nil, &transientError{stage: "write data file", err: err}
		}
		out.bytes, out.files = add.Size, 1
		return []deltalog.Add{add}, nil
	}
	// One file per partition value tuple, written concurrently (forEachConcurrent: at
	// most GOMAXPROCS at once, the first error wins and cancels the others, all finished
	// before it returns); the adds keep the partitioner's order.
	parts, schema := b.parts.Files(), b.parts.FileSchema()
	if b.keyed != nil {
		parts = b.keyed.files // the files with rows after the reduction, in the same order
	}
	adds := make([]deltalog.Add, len(parts))
	err := forEachConcurrent(ctx, len(parts), func(ctx context.Context, i int) error {
		part := parts[i]
		fo := b.file
		fo.Dir, fo.PartitionValues = part.Dir, part.Values
		add, err := deltawriter.WriteColumns(ctx, f.deps.Table.Store(), schema, part.Cols, part.Rows, fo)
		if err != nil {
			return &transientError{stage: "write data file", what: "write data file in " + part.Dir, err: err}
		}
		adds[i] = add
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, add := range adds {
		out.bytes += add.Size
		out.files++
	}
	return adds, nil
}

// rowStage builds the per-row stage of flush b (rowfill.New), nil when no row needs
// one: the partition columns and protocol are those the commit leaves (its new
// metaData, else the snapshot's). A replay does not cut its batches (the limit bounds a
// consumer's flush; a replay's batch is bounded by batch.max_records alone).
func (f *flusher) rowStage(t tableState, b *prepared) (*rowfill.Stage, error) {
	rt := rowfill.Table{Schema: b.schema, ColumnMapping: b.cm, Parquet: b.pq, Configuration: b.file.Configuration}
	if t.snap != nil {
		rt.PartitionColumns, rt.Protocol = t.snap.Metadata.PartitionColumns, &t.snap.Protocol
	}
	if b.delta.Metadata != nil {
		rt.PartitionColumns = b.delta.Metadata.PartitionColumns
	}
	if b.delta.Protocol != nil {
		rt.Protocol = b.delta.Protocol
	}
	limit := f.cfg.Batch.MaxOpenPartitions
	if f.mode.identity() != nil {
		limit = 0
	}
	return rowfill.New(f.cfg, rt, rowfill.Options{MaxOpenPartitions: limit, Keys: f.kafka.keys, Origin: f.kafka.origin(), Log: f.log, Levelled: f.levelled})
}

// forget drops recs from deadSet after a flush that committed nothing: their dead letters
// stay named with the commit id, which the next commit keeps.
func (f *flusher) forget(recs []*kgo.Record) {
	for _, r := range recs {
		delete(f.deadSet, keyOf(r))
	}
}

// report counts and logs a commit.
func (f *flusher) report(b *prepared, out *outcome, dur time.Duration) {
	name := f.cfg.Name
	f.m.Commits.WithLabelValues(name).Inc()
	f.m.CommitDuration.WithLabelValues(name).Observe(dur.Seconds())
	f.m.RecordsWritten.WithLabelValues(name).Add(float64(out.rows))
	if n := b.stage.TimestampsOutOfRange(); n > 0 {
		f.m.TimestampsOutOfRange.WithLabelValues(name).Add(float64(n))
		f.log.Warn("records with a Kafka timestamp outside 0001-01-01..9999-12-31 written with _kafka_timestamp NULL", "rows", n, "version", out.version)
	}
	f.m.BytesWritten.WithLabelValues(name).Add(float64(out.bytes))
	for _, ch := range b.guard.Evolved {
		f.m.SchemaEvolutions.WithLabelValues(name, string(ch.Kind)).Inc()
		f.log.Info("table schema evolved", "change", string(ch.Kind), "field", ch.Path, "from", ch.TableType, "to", ch.WriterType, "version", out.version)
	}
	if p := b.delta.Protocol; len(b.guard.Enable) > 0 && p != nil {
		f.m.SchemaEvolutions.WithLabelValues(name, "enable_feature").Add(float64(len(b.guard.Enable)))
		f.log.Warn("table protocol upgraded (irreversible), as schema.allow_table_features allows",
			"features", b.guard.Enable, "min_reader_version", p.MinReaderVersion, "min_writer_version", p.MinWriterVersion, "version", out.version)
	}
	f.m.FilesWritten.WithLabelValues(name).Add(float64(out.files))
	f.reportUnavailable(b.unavailable)
	f.m.FilesPerCommit.WithLabelValues(name).Observe(float64(out.files))
	f.log.Info("commit", "version", out.version, "rows", out.rows, "files", out.files, "bytes", out.bytes,
		"dead_lettered", len(out.kept)+len(out.fresh), "partitions", len(out.handled), "duration_ms", dur.Milliseconds())
}

// decoder returns the compiled decoder for (writer schema, b's table schema), compiling it
// on first use.
func (f *flusher) decoder(ws *decode.WriterSchema, b *prepared) (decode.RecordDecoder, error) {
	if ws == b.lastWS && b.lastDec != nil {
		return b.lastDec, nil
	}
	k := decoderKey{ws.Key(), b.key}
	if d, ok := f.compiled[k]; ok {
		b.lastWS, b.lastDec = ws, d
		return d, nil
	}
	d, err := decode.CompileRecord(ws, rowfill.ValueTable(b.schema, kafkaColumns(f.cfg)), b.cm, b.pq)
	if err != nil {
		return nil, err
	}
	if len(f.compiled) > 1024 {
		clear(f.compiled)
	}
	f.compiled[k] = d
	b.lastWS, b.lastDec = ws, d
	return d, nil
}

// ackOf names the commit that acknowledges r once this flusher handles it: the next
// commit (commitID) moving r's txn appId to r's offset.
func (f *flusher) ackOf(r *kgo.Record) dlq.Ack {
	return dlq.Ack{CommitID: f.commitID, TxnAppID: f.mode.txnAppID(r.Topic, r.Partition), TxnVersion: r.Offset}
}

// checkWritable refuses a table this pipeline cannot append to safely: one with a writer
// feature, constraint or column kind deltawriter does not implement
// (deltawriter.ErrUnsupportedFeature), or a partition column ingestd cannot serialise
// (deltawriter.CheckPartitionColumns: binary, nested), or one that lacks a configured
// Kafka column or holds it in another type (kafkacols.Check). It is checked at start-up
// and again on every snapshot a flush reads, before any byte of that flush is written,
// since another writer may change the table.
func checkWritable(cfg *config.Config, snap *deltawriter.Snapshot) error {
	if err := snap.CheckWritable(); err != nil {
		return fmt.Errorf("refuse table %s: %w", cfg.Table.URI, err)
	}
	if err := rowfill.CheckGeneratedConfig(cfg, snap.Schema); err != nil {
		return fmt.Errorf("refuse table %s: %w", cfg.Table.URI, err)
	}
	if len(cfg.Table.KafkaColumns) > 0 {
		if err := kafkacols.Check(snap.Schema, cfg.Table.KafkaColumns, cfg.Table.KeyFormat); err != nil {
			return fmt.Errorf("refuse table %s: %w (configured in %s)", cfg.Table.URI, err, cfg.File)
		}
	}
	if err := deltawriter.CheckPartitionColumns(snap.Schema, snap.Metadata.PartitionColumns); err != nil {
		return fmt.Errorf("refuse table %s: %w", cfg.Table.URI, err)
	}
	if err := rowfill.CheckKeyed(cfg, snap.Schema); err != nil {
		return fmt.Errorf("refuse table %s: %w", cfg.Table.URI, err)
	}
	if cfg.Table.Upsert() {
		mode := deltawriter.DeleteWithDeletionVectors
		if cfg.Table.CopyOnWrite() {
			mode = deltawriter.DeleteByRewrite
		}
		if _, err := snap.CheckDeletes(mode); err != nil {
			return fmt.Errorf("refuse table %s for table.mode upsert (%s): %w", cfg.Table.URI, cfg.File, err)
		}
	}
	return nil
}

type decoderKey struct {
	schemaID int    // decode.WriterSchema.Key
	schema   string // column mapping mode + table schema JSON
}

// formatMismatch is the failure of every record of a writer schema whose registry type is
// not the pipeline's format.
func formatMismatch(ws *decode.WriterSchema, format string) *decode.Error {
	return &decode.Error{Reason: decode.ReasonSchemaParseError, Err: fmt.Errorf("schema id %d is a %s schema, but the pipeline's format is %s", ws.ID, ws.FormatName(), format)}
}

func asDecodeError(err error) *decode.Error {
	var de *decode.Error
	if errors.As(err, &de) {
		return de
	}
	return &decode.Error{Reason: decode.ReasonDecodeError, Err: err}
}

// recordKey identifies a record of the batch (topic, partition, offset).
type recordKey struct {
	topic     string
	partition int32
	offset    int64
}

func keyOf(r *kgo.Record) recordKey { return recordKey{r.Topic, r.Partition, r.Offset} }

// deadEntry is a record of deadSet: its dead letter, or a carried-forward record.
type deadEntry struct {
	dl      dlq.DeadLetter
	carried bool
}
