package ingest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/schemaguard"
)

// errSnapshotChanged asks flushLocked to rebuild the commit on a fresh snapshot: another
// writer changed the table's metadata or protocol.
var errSnapshotChanged = errors.New("table changed under the commit")

// flushLocked writes the buffered records (p.mu held) and retries until they are
// committed: transient failures (registry, broker, store) with backoff, a lost commit race
// with a metadata change on the new snapshot. It is the replay's flush (the consumer
// pipeline makes one attempt per flush and backs off per partition instead). When ctx ends
// first it returns ctx's error; nothing past the last txn was committed, so a rerun reads
// the records again. Records dead-lettered (or carried forward) by an attempt whose
// produce succeeded stay so in every later attempt (p.deadSet): their DLQ copies name
// p.commitID, which the attempts share until one commits.
func (p *Pipeline) flushLocked(ctx context.Context) error {
	recs := p.batch.Take()
	if len(recs) == 0 {
		return nil
	}
	for attempt := 0; ; attempt++ {
		err := p.flushOnce(ctx, recs)
		switch {
		case err == nil:
			if attempt > 0 {
				p.status.recovered()
			}
			return nil
		case errors.Is(err, errSnapshotChanged):
			p.m.CommitConflicts.WithLabelValues(p.cfg.Name).Inc()
			p.log.Info("table changed by another writer; re-running the guard on the new snapshot", "attempt", attempt+1)
			if attempt >= 3 { // a busy table: back off before racing again
				if serr := sleepCtx(ctx, backoff(attempt-3)); serr != nil {
					return fmt.Errorf("flush: %w", serr)
				}
			}
			continue
		case errors.Is(err, fs.ErrPermission):
			return fmt.Errorf("write table %s: %w (give ingestd's user write access to the table directory)", p.cfg.Table.URI, err)
		case isTransient(err):
			var te *transientError
			stage := "flush"
			if errors.As(err, &te) {
				stage = te.stage
			}
			p.m.TransientErrors.WithLabelValues(p.cfg.Name, stage).Inc()
			p.status.retrying(err)
			p.log.Warn("flush failed, retrying", "err", err, "attempt", attempt+1)
			if serr := sleepCtx(ctx, backoff(attempt)); serr != nil {
				return fmt.Errorf("flush after %v: %w", err, serr)
			}
			continue
		default:
			return err
		}
	}
}

// transientError marks a failure worth retrying with the same records.
type transientError struct {
	stage string
	err   error
}

func (e *transientError) Error() string { return e.stage + ": " + e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

func isTransient(err error) bool {
	if errors.As(err, new(*KafkaSecurityError)) {
		return false // authentication/authorization/TLS: fail, do not retry (kafkasec.go)
	}
	var t *transientError
	return errors.As(err, &t) || errors.Is(err, decode.ErrTransient)
}

// outcome is what happens to one record.
type outcome int

const (
	outWrite outcome = iota
	outDeadLetter
	outHalt
)

// badRecordOutcome maps a record-level failure to dead-letter or halt, per policy: schema
// mismatches follow the policy (evolve: on_incompatible); malformed bytes and unknown
// schema ids go to the dead-letter topic when one is configured, else halt.
func (p *Pipeline) badRecordOutcome(reason string, schemaDecision *schemaguard.Decision) outcome {
	if schemaDecision != nil {
		if schemaDecision.Action == schemaguard.DeadLetterIt {
			return outDeadLetter
		}
		return outHalt
	}
	policy := p.cfg.Schema.Policy
	if policy == PolicyEvolve {
		policy = p.cfg.Schema.OnIncompatible
	}
	switch reason {
	case "not_null_violation", "schema_mismatch", "unsupported_type":
		// schema-level: the writer schema (or this record's null) does not fit the table
		if policy == PolicyDeadLetter {
			return outDeadLetter
		}
		return outHalt
	}
	if p.cfg.DeadLetter.Topic != "" {
		return outDeadLetter
	}
	return outHalt
}

type decoderKey struct {
	schemaID int
	schema   string // column mapping mode + table schema JSON
}

// pending is one record on its way through a flush.
type pending struct {
	rec     *kgo.Record
	ws      *decode.WriterSchema
	payload []byte
	fail    *decode.Error // set when framing, schema lookup or conversion failed
}

func (p *Pipeline) flushOnce(ctx context.Context, recs []*kgo.Record) error {
	start := time.Now()
	snap, err := p.deps.Table.Snapshot(ctx)
	exists := true
	switch {
	case errors.Is(err, deltawriter.ErrTableNotFound):
		exists = false
	case err != nil:
		return &transientError{"read snapshot", err}
	}
	var (
		tableSchema *deltalog.StructType
		mode        = deltalog.ColumnMappingNone
		readVersion = int64(-1)
		txns        = map[string]int64{}
	)
	if exists {
		if err := p.checkWritable(snap); err != nil {
			return err // permanent: nothing of this flush is written
		}
		tableSchema, readVersion, txns = snap.Schema, snap.Version, snap.Txns
		mode = snap.ColumnMapping
	}

	// Pass 1: drop what the table already has (a zombie or a retried commit that landed),
	// skip tombstones, parse frames and resolve writer schemas.
	handled := map[topicPartition]int64{}
	var items []pending
	for _, r := range recs {
		k := topicPartition{r.Topic, r.Partition}
		if _, h := p.halted[k]; h {
			continue
		}
		if v, ok := txns[p.txnAppID(r.Topic, r.Partition)]; ok && r.Offset <= v {
			p.m.RecordsSkipped.WithLabelValues(p.cfg.Name, "already_committed").Inc()
			continue
		}
		if _, kept := p.deadSet[keyOf(r)]; kept || (p.replay != nil && p.replay.carry[r]) {
			// dead-lettered by an earlier attempt under this commit id, or carried forward
			// unchanged: not decoded
			items = append(items, pending{rec: r})
			continue
		}
		if r.Value == nil {
			p.m.RecordsSkipped.WithLabelValues(p.cfg.Name, "tombstone").Inc()
			items = append(items, pending{rec: r})
			continue
		}
		it := pending{rec: r, payload: r.Value}
		id := 0
		if p.deps.Framed {
			id, it.payload, err = decode.ParseFrame(r.Value)
			if err != nil {
				it.fail = asDecodeError(err)
				items = append(items, it)
				continue
			}
		}
		ws, err := p.deps.Schemas.Schema(ctx, id)
		if err != nil {
			var de *decode.Error
			if errors.As(err, &de) {
				it.fail = de
				it.ws = &decode.WriterSchema{ID: id}
				items = append(items, it)
				continue
			}
			return &transientError{"resolve schema id " + strconv.Itoa(id), err}
		}
		it.ws = ws
		if ws.DeltaErr != nil {
			it.fail = asDecodeError(ws.DeltaErr)
		}
		items = append(items, it)
	}

	// Pass 2: the guard, once per writer schema id, against the table schema read above.
	opts := schemaguard.Options{
		Policy:         schemaguard.Policy(p.cfg.Schema.Policy),
		OnIncompatible: schemaguard.Policy(p.cfg.Schema.OnIncompatible),
		Allow:          map[string]bool{},
	}
	for _, f := range p.cfg.Schema.AllowTableFeatures {
		opts.Allow[f] = true
	}
	if exists {
		opts.Table = schemaguard.TableState{
			TypeWidening:  snap.Metadata.Configuration["delta.enableTypeWidening"] == "true",
			ColumnMapping: mode != deltalog.ColumnMappingNone,
			Features:      map[string]bool{},
		}
		for _, f := range append(slices.Clone(snap.Protocol.ReaderFeatures), snap.Protocol.WriterFeatures...) {
			opts.Table.Features[f] = true
		}
	}
	decisions := map[int]*schemaguard.Decision{}
	enable := map[string]bool{}
	created := false
	if !exists {
		// The first writer schema that can define the table creates it (all columns
		// nullable); one that cannot (e.g. it needs a table feature that is not allowed)
		// follows the policy like any other non-fitting schema.
		empty := &deltalog.StructType{}
		for _, it := range items {
			if it.ws == nil || it.fail != nil || decisions[it.ws.ID] != nil {
				continue
			}
			changes := schemaguard.Diff(empty, it.ws.Delta)
			create := opts
			create.Policy = schemaguard.Evolve
			if d := schemaguard.Decide(changes, create); d.Action == schemaguard.EvolveAndWrite || d.Action == schemaguard.Write {
				tableSchema, created = newTableSchema(it.ws.Delta), true
				for _, f := range d.Features {
					enable[f] = true
				}
				break
			}
			d := schemaguard.Decide(changes, opts)
			decisions[it.ws.ID] = &d
		}
	}
	newSchema := tableSchema
	var evolved []schemaguard.Change
	for _, it := range items {
		if it.ws == nil || it.fail != nil || tableSchema == nil || decisions[it.ws.ID] != nil {
			continue
		}
		d := schemaguard.Decide(schemaguard.Diff(tableSchema, it.ws.Delta), opts)
		decisions[it.ws.ID] = &d
		if d.Action == schemaguard.EvolveAndWrite {
			for _, f := range d.Features {
				enable[f] = true
			}
			var applied []schemaguard.Change
			newSchema, applied = schemaguard.Apply(newSchema, it.ws.Delta, opts.Table.TypeWidening || enable[schemaguard.FeatureTypeWidening])
			evolved = append(evolved, applied...)
		}
	}
	// Every writer schema that evolves the table must also fit the final schema: two
	// writers may add the same field with different types in one batch.
	if len(evolved) > 0 {
		for _, it := range items {
			d := decisions[idOf(it)]
			if d == nil || d.Action != schemaguard.EvolveAndWrite {
				continue
			}
			if again := schemaguard.Decide(schemaguard.Diff(newSchema, it.ws.Delta), opts); again.Action == schemaguard.DeadLetterIt || again.Action == schemaguard.HaltIt {
				decisions[it.ws.ID] = &again
			}
		}
	}

	// The metaData (and protocol) of this commit: on create, or when the schema evolved or
	// a table feature is enabled. Under column mapping, new fields get ids and physical
	// names here, before the Parquet schema is built from newSchema.
	features := slices.Sorted(maps.Keys(enable))
	var newMeta *deltalog.Metadata
	var newProto *deltalog.Protocol
	switch {
	case created:
		conf := maps.Clone(p.cfg.Table.Properties)
		if conf == nil {
			conf = map[string]string{}
		}
		if cm := p.cfg.Table.ColumnMapping; cm != "" && cm != "none" {
			conf["delta.columnMapping.mode"] = cm
		} else if enable[schemaguard.FeatureColumnMapping] {
			conf["delta.columnMapping.mode"] = "name"
		}
		if enable[schemaguard.FeatureTypeWidening] {
			conf["delta.enableTypeWidening"] = "true"
		}
		proto, meta := deltawriter.NewTableMetadata(p.cfg.Name, newSchema, p.cfg.Table.PartitionBy, conf)
		if meta, newSchema, err = deltawriter.EvolveMetadata(meta, newSchema); err != nil {
			return fmt.Errorf("create table metadata: %w", err)
		}
		newMeta, newProto = &meta, &proto
	case len(evolved) > 0 || len(features) > 0:
		if enable[schemaguard.FeatureColumnMapping] {
			return fmt.Errorf("evolve table %s: enabling column mapping on an existing table is not supported yet; "+
				"enable it with Spark (ALTER TABLE … SET TBLPROPERTIES ('delta.columnMapping.mode'='name')) and ingestd follows", p.cfg.Table.URI)
		}
		meta := snap.Metadata
		meta.Configuration = maps.Clone(meta.Configuration)
		if meta.Configuration == nil {
			meta.Configuration = map[string]string{}
		}
		if enable[schemaguard.FeatureTypeWidening] {
			meta.Configuration["delta.enableTypeWidening"] = "true"
		}
		// deltawriter records widenings (delta.typeChanges), assigns column mapping ids and
		// upgrades the protocol for the features the new schema needs.
		if meta, newSchema, newProto, err = deltawriter.EvolveTable(snap.Protocol, meta, newSchema); err != nil {
			return fmt.Errorf("evolve table metadata: %w", err)
		}
		newMeta = &meta
	}
	if newMeta != nil {
		if mode, err = newMeta.ColumnMappingMode(); err != nil {
			return fmt.Errorf("read column mapping mode: %w", err)
		}
	}

	// Pass 3: in offset order per partition, decide each record's fate and decode the ones
	// that are written straight into column buffers.
	var (
		pq      *parquet.Schema
		cols    [][]parquet.Value
		numRows int
		dlq     []deadLetter // decided by this attempt: produced below
		kept    []deadLetter // produced by an earlier attempt under p.commitID: stay dead-lettered
		halts   []HaltedPartition
		stopped = map[topicPartition]bool{}
	)
	if newSchema != nil {
		if pq, err = deltawriter.ParquetSchema(newSchema, mode); err != nil {
			return fmt.Errorf("build parquet schema: %w", err)
		}
		// The previous flushOnce has returned: WriteDataFile keeps no values and dead
		// letters hold Kafka records, so nothing references the previous batch's values.
		p.arena.Reset()
		n := len(pq.Columns())
		if cap(p.colBufs) < n {
			p.colBufs = make([][]parquet.Value, n)
		}
		cols = p.colBufs[:n]
		for i := range cols {
			clear(cols[i]) // let large values of the last batch go
			cols[i] = cols[i][:0]
		}
	}
	// Per flush, not per record: the decoder cache key of the table schema, and one
	// explanation (and error) per rejected writer schema.
	var schemaKey string
	if newSchema != nil {
		b, err := newSchema.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encode table schema: %w", err)
		}
		schemaKey = string(mode) + string(b)
	}
	rejections := map[int]*decode.Error{}
	landing := map[string]string{} // replay: originals written by this attempt → their DLQ reason
	var carried []*kgo.Record      // replay: records carried forward by this attempt
	var keptCarried []*kgo.Record  // replay: carried forward by an earlier attempt under p.commitID
	dups := 0                      // replay: copies of an original landed in this run
	for _, it := range items {
		r := it.rec
		k := topicPartition{r.Topic, r.Partition}
		if stopped[k] {
			continue
		}
		if r.Value == nil {
			handled[k] = r.Offset
			continue
		}
		if e, ok := p.deadSet[keyOf(r)]; ok {
			// Its dead letter (or carried copy) names this commit id: it stays as it was
			// decided, whatever the new snapshot allows (written as well, it would land twice).
			handled[k] = r.Offset
			if e.carried {
				keptCarried = append(keptCarried, r)
			} else {
				kept = append(kept, e.dl)
			}
			continue
		}
		if p.replay != nil {
			if _, ok := landing[originalKey(r)]; ok || p.replay.landed[originalKey(r)] {
				// another copy of this original (at any replay count) landed in this run
				dups++
				handled[k] = r.Offset
				continue
			}
			if p.replay.carry[r] {
				carried = append(carried, r)
				handled[k] = r.Offset
				continue
			}
		}
		schemaID := -1
		if it.ws != nil {
			schemaID = it.ws.ID
		}
		fail, message := it.fail, ""
		var decision *schemaguard.Decision
		if fail == nil {
			decision = decisions[it.ws.ID]
			if decision != nil && (decision.Action == schemaguard.DeadLetterIt || decision.Action == schemaguard.HaltIt) {
				if rejections[it.ws.ID] == nil {
					msg := schemaguard.Explain(*decision, tableSchema, p.cfg.Name, readVersion, it.ws.Delta, it.ws.ID, opts)
					rejections[it.ws.ID] = &decode.Error{Reason: decision.Reason, Field: decision.Field, Err: errors.New(msg)}
				}
				fail = rejections[it.ws.ID]
				message = fail.Err.Error()
			}
		}
		if fail == nil {
			dec, err := p.decoder(it.ws, newSchema, schemaKey, mode, pq)
			if err != nil {
				fail = asDecodeError(err)
				decision = nil
			} else if cols, err = dec.DecodeWith(&p.arena, it.payload, cols); errors.Is(err, decode.ErrNullRecord) {
				p.m.RecordsSkipped.WithLabelValues(p.cfg.Name, "null_record").Inc()
				handled[k] = r.Offset
				continue
			} else if err != nil {
				fail = asDecodeError(err)
				decision = nil
			} else {
				numRows++
				handled[k] = r.Offset
				if p.replay != nil {
					landing[originalKey(r)], _ = header(r, HeaderReason)
				}
				continue
			}
		}
		if message == "" && fail.Reason == "not_null_violation" && schemaID >= 0 {
			message = fmt.Sprintf("writer schema id %d: %s is null in this record, but the column is NOT NULL in table %s at version %d "+
				"(the writer schema declares it nullable). To let it through: make the column nullable "+
				"(ALTER TABLE … ALTER COLUMN %s DROP NOT NULL), or set schema.policy: evolve, which relaxes it in the same commit",
				schemaID, fail.Field, p.cfg.Name, readVersion, fail.Field)
		}
		if message == "" {
			message = fail.Error()
		}
		switch p.badRecordOutcome(fail.Reason, decision) {
		case outDeadLetter:
			dlq = append(dlq, deadLetter{pipeline: p.cfg.Name, rec: r, reason: fail.Reason, field: fail.Field, message: message,
				schemaID: schemaID, tableVersion: readVersion,
				ack: p.ackOf(r)})
			handled[k] = r.Offset
		case outHalt:
			stopped[k] = true
			halts = append(halts, HaltedPartition{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
				Reason: fail.Reason, Field: fail.Field, Message: message})
		}
	}

	if cols != nil {
		p.colBufs = cols // keep the grown slices for the next flush
	}
	allDLQ := append(slices.Clip(kept), dlq...)
	allCarried := append(slices.Clip(keptCarried), carried...)
	if p.replay != nil && p.replay.dryRun {
		p.replay.sum.Duplicates += dups
		p.replay.tally(landing, allDLQ, allCarried, halts)
		p.applyHalts(halts)
		return nil
	}
	if p.replay != nil {
		if err := p.replay.beforeCommit(ctx, dlq); err != nil {
			return err // <dlq>.parked is missing: nothing of this flush is produced or committed
		}
	}

	// Dead letters (and, in a replay, carried-forward records) are acknowledged before the
	// commit that moves the txn past them.
	// Once acknowledged they join p.deadSet: every rebuild of this batch keeps them.
	if len(dlq) > 0 {
		if err := p.produceDeadLetters(ctx, dlq); err != nil {
			return &transientError{"produce dead letters", err}
		}
		for _, d := range dlq {
			p.deadSet[keyOf(d.rec)] = deadEntry{dl: d}
		}
	}
	if p.replay != nil {
		if err := p.replay.produceCarried(ctx, carried, p.ackOf); err != nil {
			return err
		}
		for _, r := range carried {
			p.deadSet[keyOf(r)] = deadEntry{carried: true}
		}
	}

	// Commit: data, schema change and txn per partition, atomically.
	c := deltawriter.Commit{ReadVersion: readVersion, Operation: "WRITE",
		OperationParameters: map[string]string{"mode": "Append"}, EngineInfo: engineInfo, TxnID: p.commitID}
	c.Protocol, c.Metadata = newProto, newMeta
	if newMeta != nil && !created {
		c.OperationParameters["mergeSchema"] = "true"
	}
	var written int64
	if numRows > 0 {
		fo := deltawriter.FileOptions{Schema: newSchema, ColumnMapping: mode}
		switch {
		case newMeta != nil:
			fo.Configuration = newMeta.Configuration
		case exists:
			fo.Configuration = snap.Metadata.Configuration
		}
		add, err := deltawriter.WriteDataFile(ctx, p.deps.Table.Store(), pq, cols, numRows, fo)
		if err != nil {
			return &transientError{"write data file", err}
		}
		c.Adds = append(c.Adds, add)
		written = add.Size
	}
	now := time.Now().UnixMilli()
	if !exists && !created {
		// No table yet and no record that could define its schema (only tombstones and dead
		// letters): the dead letters are acknowledged but there is no txn to move. The commit
		// id stays, and the commit that creates the table moves these partitions' txns past
		// them too (p.noTableTxns), so that it is the commit they name. After a restart
		// before that, the records are read (and dead-lettered) again and these copies
		// become orphans.
		for k, off := range handled {
			p.noTableTxns[k] = max(p.noTableTxns[k], off)
		}
		for _, r := range recs {
			delete(p.deadSet, keyOf(r))
		}
		p.applyHalts(halts)
		return nil
	}
	if p.replay == nil {
		for k, off := range p.noTableTxns {
			if h, ok := handled[k]; !ok || h < off {
				handled[k] = off
			}
		}
	}
	for k, off := range handled {
		c.Txns = append(c.Txns, deltalog.Txn{AppID: p.txnAppID(k.topic, k.partition), Version: off, LastUpdated: &now})
	}
	if len(c.Txns) == 0 && len(c.Adds) == 0 {
		// Nothing to record.
		for _, r := range recs {
			delete(p.deadSet, keyOf(r))
		}
		p.applyHalts(halts)
		return nil
	}
	if p.beforeCommit != nil {
		if err := p.beforeCommit(len(dlq)); err != nil {
			return err
		}
	}
	version, err := p.deps.Table.Commit(ctx, c)
	switch {
	case errors.Is(err, deltawriter.ErrTxnAlreadyCommitted):
		// A zombie fence: a winner covers one of our partitions' offsets. Other partitions
		// of this batch may not be covered, so never drop the whole batch: rebuild on the
		// new snapshot, whose txn versions drop exactly what the table already has.
		p.log.Warn("another writer already committed some of these offsets; rebuilding the batch without them", "records", len(recs))
		return errSnapshotChanged
	case errors.Is(err, deltawriter.ErrUnsupportedFeature):
		return fmt.Errorf("commit to %s: %w", p.cfg.Table.URI, err) // permanent: a person must act
	case errors.Is(err, deltawriter.ErrMetadataChanged), errors.Is(err, deltawriter.ErrConcurrentTxn):
		// Another writer changed the schema, or moved one of our partitions' txn to a
		// version inside this batch: rebuild on the new snapshot, which drops what it has.
		return errSnapshotChanged
	case err != nil:
		return &transientError{"commit", err}
	}
	// Committed under p.commitID: what it acknowledged is settled; the next commit gets a
	// new id, and whatever is still in deadSet (records of a failed flush) must be decided
	// and dead-lettered again under it.
	p.commitID = newCommitID()
	clear(p.deadSet)
	clear(p.noTableTxns)
	dur := time.Since(start)
	p.m.Commits.WithLabelValues(p.cfg.Name).Inc()
	p.m.CommitDuration.WithLabelValues(p.cfg.Name).Observe(dur.Seconds())
	p.m.RecordsWritten.WithLabelValues(p.cfg.Name).Add(float64(numRows))
	p.m.BytesWritten.WithLabelValues(p.cfg.Name).Add(float64(written))
	for _, ch := range evolved {
		p.m.SchemaEvolutions.WithLabelValues(p.cfg.Name, string(ch.Kind)).Inc()
		p.log.Info("table schema evolved", "change", string(ch.Kind), "field", ch.Path, "from", ch.TableType, "to", ch.WriterType, "version", version)
	}
	if len(features) > 0 && c.Protocol != nil {
		p.m.SchemaEvolutions.WithLabelValues(p.cfg.Name, "enable_feature").Add(float64(len(features)))
		p.log.Warn("table protocol upgraded (irreversible), as schema.allow_table_features allows",
			"features", features, "min_reader_version", c.Protocol.MinReaderVersion, "min_writer_version", c.Protocol.MinWriterVersion, "version", version)
	}
	p.log.Info("commit", "version", version, "rows", numRows, "files", len(c.Adds), "bytes", written,
		"dead_lettered", len(allDLQ), "partitions", len(handled), "duration_ms", dur.Milliseconds())

	if p.replay != nil {
		for k := range landing { // committed: these originals are in the table
			p.replay.landed[k] = true
		}
		p.replay.sum.Duplicates += dups
		p.replay.tally(landing, allDLQ, allCarried, halts)
		p.applyHalts(halts)
		return nil
	}

	// Advisory Kafka offsets, for lag tools; the txn actions are the truth.
	offs := map[string]map[int32]kgo.EpochOffset{}
	for k, off := range handled {
		if offs[k.topic] == nil {
			offs[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offs[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: off + 1}
	}
	if p.cl != nil {
		// Asynchronous: a synchronous commit would wait for a rebalance that itself waits
		// for this poll loop (BlockRebalanceOnPoll). A late commit for a partition that
		// moved is harmless: these offsets are advisory.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		p.cl.CommitOffsets(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			defer cancel()
			if err != nil {
				p.log.Warn("commit kafka offsets (advisory) failed", "err", err)
			}
		})
	}
	p.applyHalts(halts)
	return nil
}

const engineInfo = "ingestd"

// applyHalts pauses halted partitions and reports them (logs, status, metric).
func (p *Pipeline) applyHalts(halts []HaltedPartition) {
	for _, h := range halts {
		k := topicPartition{h.Topic, h.Partition}
		p.halted[k] = h
		p.status.halt(h)
		p.m.PipelineHalted.WithLabelValues(p.cfg.Name).Set(1)
		p.log.Error("pipeline halted: a record does not fit the table under policy "+p.cfg.Schema.Policy,
			"topic", h.Topic, "partition", h.Partition, "offset", h.Offset, "reason", h.Reason, "field", h.Field, "message", h.Message)
		if p.cl != nil {
			p.cl.PauseFetchPartitions(map[string][]int32{h.Topic: {h.Partition}})
		}
	}
}

// decoder returns the compiled decoder for (writer schema, table schema), compiling it on
// first use; schemaKey identifies the table schema and column mapping mode.
func (p *Pipeline) decoder(ws *decode.WriterSchema, table *deltalog.StructType, schemaKey string, mode deltalog.ColumnMappingMode, pq *parquet.Schema) (*decode.Decoder, error) {
	k := decoderKey{ws.ID, schemaKey}
	if d, ok := p.compiled[k]; ok {
		return d, nil
	}
	d, err := decode.Compile(ws, table, mode, pq)
	if err != nil {
		return nil, err
	}
	if len(p.compiled) > 1024 {
		clear(p.compiled)
	}
	p.compiled[k] = d
	return d, nil
}

func (p *Pipeline) produceDeadLetters(ctx context.Context, dlq []deadLetter) error {
	now := time.Now()
	recs := make([]*kgo.Record, len(dlq))
	for i, d := range dlq {
		if p.replay != nil {
			recs[i] = p.replay.deadLetterRecord(p.cfg.Table.URI, d, now)
		} else {
			recs[i] = dlqRecord(p.cfg.DeadLetter.Topic, p.cfg.Table.URI, d, now)
		}
	}
	if err := p.produceDLQ(ctx, recs); err != nil {
		return fmt.Errorf("produce to %s: %w", p.cfg.DeadLetter.Topic, err)
	}
	for _, d := range dlq {
		p.m.RecordsDeadLettered.WithLabelValues(p.cfg.Name, d.reason).Inc()
	}
	p.log.Info("dead-lettered records", "topic", recs[0].Topic, "count", len(dlq))
	return nil
}

// newTableSchema is the schema of a table ingestd creates: the writer's, all nullable.
func newTableSchema(writer *deltalog.StructType) *deltalog.StructType {
	s, _ := schemaguard.Apply(&deltalog.StructType{}, writer, false)
	return s
}

func asDecodeError(err error) *decode.Error {
	var de *decode.Error
	if errors.As(err, &de) {
		return de
	}
	return &decode.Error{Reason: "decode_error", Err: err}
}

// txnAppID is the Delta txn appId that records a source partition's progress: the
// pipeline's own (<app_id>-<topic>-<partition>) or, during a replay, the replay's
// (<app_id>-replay-<dlq topic>-<partition>).
func (p *Pipeline) txnAppID(topic string, partition int32) string {
	if p.replay != nil {
		return fmt.Sprintf("%s-replay-%s-%d", p.cfg.AppID, topic, partition)
	}
	return p.appID(topic, partition)
}

// ackOf names the commit that acknowledges r once this pipeline handles it: the next
// commit (p.commitID) moving r's txn appId to r's offset.
func (p *Pipeline) ackOf(r *kgo.Record) ack {
	return ack{commitID: p.commitID, txnAppID: p.txnAppID(r.Topic, r.Partition), txnVersion: r.Offset}
}

// recordKey identifies a record of the batch (topic, partition, offset).
type recordKey struct {
	topic     string
	partition int32
	offset    int64
}

func keyOf(r *kgo.Record) recordKey { return recordKey{r.Topic, r.Partition, r.Offset} }

// deadEntry is a record of p.deadSet: its dead letter, or a carried-forward record.
type deadEntry struct {
	dl      deadLetter
	carried bool
}

// newCommitID names this pipeline's next commit (commitInfo.txnId).
func newCommitID() string { return deltawriter.NewTxnID() }

func idOf(it pending) int {
	if it.ws == nil || it.fail != nil {
		return -1
	}
	return it.ws.ID
}
