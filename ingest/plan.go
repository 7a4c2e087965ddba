package ingest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/dlq"
	"github.com/ingestd/ingestd/ingest/rowfill"
	"github.com/ingestd/ingestd/schemaguard"
)

// route is what a flush does with one record.
type route uint8

const (
	// routeGuard: not decided before the guard; the guard and the decoder decide
	// (routeWrite, routeDeadLetter, routeHalt or, for a null record, routeSkip).
	routeGuard      route = iota
	routeWrite            // decoded into the data file
	routeSkip             // no row, the txn moves past it: tombstone, null record, another pipeline's dead letter
	routeDuplicate        // replay: a copy of an original already landed (in this run or this attempt): like routeSkip, counted
	routeDeadLetter       // produced to the dead-letter topic (a replay: re-dead-lettered or parked)
	routeKeep             // dead-lettered or carried by an earlier attempt under this commit id: stays so, not produced again
	routeCarry            // replay: re-produced unchanged to the dead-letter topic
	routeHalt             // the partition stops before it; nothing of the partition from here is handled
	routeCut              // it would open one partition value more than batch.max_open_partitions: it and the rest of its partition wait for the next flush
)

// item is one record on its way through a flush.
type item struct {
	rec     *kgo.Record
	ws      *decode.WriterSchema // nil when the schema was not looked up (route set) or the frame is bad
	payload []byte               // the Avro body (after the frame)
	fail    *decode.Error        // framing, schema lookup or schema conversion failed
	route   route                // set before the guard (tombstone, kept, carried, duplicate), else routeGuard
	// tomb: the record is a tombstone (routeSkip): a null value, or a Kafka Connect JSON
	// value whose payload is null, which JsonConverter reads as a null value.
	tomb bool
	// env is 1 + the index in flusher.envs of the record's change as its envelope states
	// it (table.envelope; its Row is payload); 0: none. An index, in route's padding, so
	// that an item (charged per record: recordOverhead) stays as small without an envelope.
	env int32
}

// schemaID is the item's writer schema id, -1 when unknown.
func (it *item) schemaID() int {
	if it.ws == nil || it.ws.Format == decode.FormatJSON || it.ws.Format == decode.FormatConnectJSON {
		return -1 // unknown, or a format without schema ids
	}
	return it.ws.ID
}

// tableState is what one flush attempt read of the table.
type tableState struct {
	snap    *deltawriter.Snapshot // nil: the table does not exist yet
	schema  *deltalog.StructType  // nil without a table
	version int64                 // the read version; -1 without a table
	txns    map[string]int64      // txn appId → version
}

func (t tableState) exists() bool { return t.snap != nil }

// files are the table's live files (none without a table).
func (t tableState) files() *deltawriter.FileSet {
	if t.snap == nil {
		return nil
	}
	return t.snap.Files
}

// rules are the pipeline settings that route a record that does not fit.
type rules struct {
	policy         string // schema.policy
	onIncompatible string // schema.on_incompatible
	hasDLQ         bool   // dead_letter.topic is set
}

// onFailure routes a record that cannot be written: with the guard's decision for its
// writer schema, as the decision says; a schema-level failure of the record itself
// (a null for a NOT NULL column, …) by the policy (evolve: its
// on_incompatible), as is a schema the registry refuses to serve (dlq.FollowsPolicy);
// malformed bytes and unknown schema ids to the dead-letter topic when one is configured,
// else halt.
func (r rules) onFailure(reason string, d *schemaguard.Decision) route {
	if d != nil {
		if d.Action == schemaguard.DeadLetterIt {
			return routeDeadLetter
		}
		return routeHalt
	}
	if dlq.FollowsPolicy(reason) {
		policy := r.policy
		if policy == config.PolicyEvolve {
			policy = r.onIncompatible
		}
		if policy == config.PolicyDeadLetter {
			return routeDeadLetter
		}
		return routeHalt
	}
	if r.hasDLQ {
		return routeDeadLetter
	}
	return routeHalt
}

// alterTable names cfg's table in the fix commands of a schema decision: the pipeline
// file, whose storage options `ingestd table alter --config` uses, else the table URI.
func alterTable(cfg *config.Config) string {
	if cfg.File != "" {
		return "--config " + cfg.File
	}
	return cfg.Table.URI
}

// guardOptions are the schema guard's options for the pipeline and table t.
func guardOptions(cfg *config.Config, t tableState) schemaguard.Options {
	opts := schemaguard.Options{
		Policy:         schemaguard.Policy(cfg.Schema.Policy),
		OnIncompatible: schemaguard.Policy(cfg.Schema.OnIncompatible),
		Allow:          map[string]bool{},
		CreateColumns:  rowfill.GeneratedCreateColumns(cfg),
		KafkaColumns:   kafkaColumns(cfg),
		AlterTable:     alterTable(cfg),
	}
	for _, f := range cfg.Schema.AllowTableFeatures {
		opts.Allow[f] = true
	}
	if s := t.snap; s != nil {
		opts.PartitionColumns = s.Metadata.PartitionColumns
		opts.Table = schemaguard.TableState{
			TypeWidening:  s.Metadata.Configuration[deltalog.PropEnableTypeWidening] == "true",
			ColumnMapping: s.ColumnMapping != deltalog.ColumnMappingNone,
			Features:      map[string]bool{},
		}
		for _, f := range append(slices.Clone(s.Protocol.ReaderFeatures), s.Protocol.WriterFeatures...) {
			opts.Table.Features[f] = true
		}
	}
	return opts
}

// writers are the writer schemas the guard decides: those of the items it routes, in
// first-use order, each id once.
func writers(items []item) []schemaguard.Writer {
	var out []schemaguard.Writer
	seen := map[int]bool{}
	var last *decode.WriterSchema // consecutive items share their writer schema: no lookup
	for i := range items {
		it := &items[i]
		if it.route != routeGuard || it.ws == nil || it.fail != nil || it.ws == last {
			continue
		}
		last = it.ws
		if seen[it.ws.Key()] {
			continue
		}
		seen[it.ws.Key()] = true
		out = append(out, schemaguard.Writer{ID: it.ws.Key(), Schema: it.ws.Delta})
	}
	return out
}

// rejection is why one record is not written: its failure, as it goes into the dead
// letter or the halt, with the message for a person.
type rejection struct {
	fail    *decode.Error
	message string
}

// routed is the result of routing a batch: every item's route and, for the records that
// are not written, why.
type routed struct {
	routes  []route                  // parallel to the items
	why     map[int]rejection        // by item index: routeDeadLetter and routeHalt
	handled map[topicPartition]int64 // per partition, the last offset handled (the txn version to commit)
	rows    int                      // items written
}

// router routes the items of one batch in order (offset order per partition), with the
// guard's plan for their writer schemas; decode is the one effect it calls: it appends
// the item's row to the data file's columns, or fails (decode.ErrNullRecord: a null
// top-level value, no row). A halt stops its partition: later items there get no route
// (routeGuard) and are not handled. identity, when not nil, names an item's source
// record (replay): a second item of one identity whose first was written is a
// duplicate.
type router struct {
	rules    rules
	guard    schemaguard.BatchPlan
	opts     schemaguard.Options // the guard's options, for its explanations
	table    string              // the table's name in messages (the pipeline's)
	version  int64               // the table version read; -1 without a table
	identity func(r *kgo.Record) string
	decode   func(it *item) error
}

// route routes items; see router.
func (rt router) route(items []item) routed {
	out := routed{routes: make([]route, len(items)), why: map[int]rejection{}, handled: map[topicPartition]int64{}}
	stopped := map[topicPartition]bool{}
	written := map[string]bool{}
	rejections := map[int]rejection{} // one per rejected writer schema
	// Records come in runs of one partition: the run's last handled offset goes into
	// out.handled when the run ends, not once per record (a map write hashes the topic).
	var run struct {
		k       topicPartition
		off     int64
		pending bool
	}
	endRun := func() {
		if run.pending {
			out.handled[run.k] = run.off
			run.pending = false
		}
	}
	// writes is the last writer schema the guard let write: the next items of it (a batch
	// holds one or a few) need no decision lookup.
	var writes *decode.WriterSchema
	for i := range items {
		it := &items[i]
		k := topicPartition{it.rec.Topic, it.rec.Partition}
		if run.pending && k != run.k {
			endRun()
		}
		if len(stopped) > 0 && stopped[k] {
			continue
		}
		r := it.route
		id := ""
		if rt.identity != nil && r != routeSkip && r != routeKeep {
			if id = rt.identity(it.rec); written[id] {
				r = routeDuplicate // another copy of this original is written by this attempt
			}
		}
		if r == routeGuard {
			var why rejection
			if it.fail == nil && it.ws != nil && it.ws == writes {
				r = routeWrite
			} else if r, why = rt.decide(it, rejections); r == routeWrite && it.fail == nil {
				writes = it.ws
			}
			if r != routeWrite {
				out.why[i] = why
			} else if err := rt.decode(it); errors.Is(err, decode.ErrNullRecord) {
				r = routeSkip
			} else if errors.Is(err, rowfill.ErrPartitionLimit) {
				r = routeCut
			} else if err != nil {
				fail := asDecodeError(err)
				r = rt.rules.onFailure(fail.Reason, nil)
				out.why[i] = rejection{fail: fail, message: rt.message(fail, it)}
			} else {
				out.rows++
				if id != "" {
					written[id] = true
				}
			}
		}
		out.routes[i] = r
		if r == routeHalt || r == routeCut {
			endRun()
			stopped[k] = true
			continue
		}
		run.k, run.off, run.pending = k, it.rec.Offset, true
	}
	endRun()
	return out
}

// decide is the guard's route for an item before decoding: write, or the rejection of
// its frame, schema lookup or writer schema (one message per writer schema, shared).
func (rt router) decide(it *item, rejections map[int]rejection) (route, rejection) {
	if it.fail != nil {
		return rt.rules.onFailure(it.fail.Reason, nil), rejection{fail: it.fail, message: rt.message(it.fail, it)}
	}
	d, ok := rt.guard.Decisions[it.ws.Key()]
	if !ok || (d.Action != schemaguard.DeadLetterIt && d.Action != schemaguard.HaltIt) {
		return routeWrite, rejection{}
	}
	why, ok := rejections[it.ws.Key()]
	if !ok {
		msg := schemaguard.Explain(d, rt.guard.Base, rt.table, rt.version, it.ws.Delta, it.ws.ID, rt.opts)
		why = rejection{fail: &decode.Error{Reason: d.Reason, Field: d.Field, Err: errors.New(msg)}, message: msg}
		rejections[it.ws.Key()] = why
	}
	return rt.rules.onFailure(d.Reason, &d), why
}

// message is the person's message for a record-level failure: a null for a NOT NULL
// column says how to let it through; the others are the failure itself.
func (rt router) message(fail *decode.Error, it *item) string {
	if fail.Reason != decode.ReasonNotNullViolation || it.schemaID() < 0 {
		return fail.Error()
	}
	return fmt.Sprintf("writer schema id %d: %s is null in this record, but the column is NOT NULL in table %s at version %d "+
		"(the writer schema declares it nullable). To let it through: make the column nullable "+
		"(ALTER TABLE … ALTER COLUMN %s DROP NOT NULL), or set schema.policy: evolve, which relaxes it in the same commit",
		it.schemaID(), fail.Field, rt.table, rt.version, fail.Field)
}

// commitSchema is the metaData (and protocol) a flush's commit carries, built by
// deltawriter.PrepareSchemaChange: on create, or when the schema evolved or a table
// feature is enabled (a zero SchemaDelta otherwise); and the options of its data file
// (under column mapping, new fields get ids and physical names here, before the Parquet
// schema is built from fo.Schema). Without a table and no schema to create one with,
// fo.Schema is nil.
//
// A table being created gets kafka (its Kafka columns, kafkaFieldsToCreate) appended
// after the writer's columns.
func commitSchema(cfg *config.Config, t tableState, g schemaguard.BatchPlan, kafka []*deltalog.StructField) (deltawriter.SchemaDelta, deltawriter.FileOptions, error) {
	if !t.exists() && !g.Create {
		return deltawriter.SchemaDelta{}, deltawriter.FileOptions{ColumnMapping: deltalog.ColumnMappingNone}, nil
	}
	schema := g.Schema
	if g.Create {
		schema = withColumns(schema, kafka)
		// Before the log layer's checks, which cannot name the pipeline file: a generated
		// column left out for a source the schema lacks, then a partition column missing.
		if err := rowfill.CheckGeneratedConfig(cfg, schema); err != nil {
			return deltawriter.SchemaDelta{}, deltawriter.FileOptions{}, fmt.Errorf("create table %s: %w", cfg.Table.URI, err)
		}
		for i, col := range cfg.Table.PartitionBy {
			if deltawriter.PartitionField(schema, col) == nil {
				return deltawriter.SchemaDelta{}, deltawriter.FileOptions{}, fmt.Errorf("create table %s: %s:%d: table.partition_by: column %q is neither in the writer schema creating the table nor a generated or Kafka column of %s "+
					"(fix: name a top-level field of the value schema, a table.generated_columns key or a listed _kafka_ column)",
					cfg.Table.URI, cfg.File, cfg.Line(fmt.Sprintf("$.table.partition_by[%d]", i)), col, cfg.File)
			}
		}
	}
	enable := g.Enable
	if cfg.Table.Upsert() && !cfg.Table.CopyOnWrite() {
		// An upsert marks replaced rows in deletion vectors: the table gets the feature
		// when it is created, or with the first upsert commit (checkWritable refused a
		// table whose properties forbid it).
		need := !t.exists()
		if t.exists() {
			need, _ = t.snap.CheckDeletes(deltawriter.DeleteWithDeletionVectors)
		}
		if need {
			enable = append(slices.Clip(enable), deltalog.FeatureDeletionVectors)
		}
	}
	if cfg.Table.Upsert() && cfg.Table.CopyOnWrite() && !cfg.Table.SoftDeletes() && cfg.Table.SequenceBy != "" &&
		(!t.exists() || !t.snap.SupportsFeature(deltalog.FeatureDomainMetadata)) {
		// Copy-on-write keeps no deleted row to remember a delete's sequence by: the
		// deletes go into domainMetadata (keyindex.DeletesDomainPrefix).
		enable = append(slices.Clip(enable), deltalog.FeatureDomainMetadata)
	}
	change, fo, err := deltawriter.PrepareSchemaChange(t.snap, deltawriter.SchemaChange{Schema: schema, Enable: enable,
		Name: cfg.Name, PartitionColumns: cfg.Table.PartitionBy, Properties: cfg.Table.Properties, ColumnMapping: cfg.Table.ColumnMapping})
	if err != nil {
		return deltawriter.SchemaDelta{}, deltawriter.FileOptions{}, fmt.Errorf("prepare the commit's schema change for %s: %w", cfg.Table.URI, err)
	}
	if !t.exists() {
		if err := rowfill.CheckGeneratedConfig(cfg, fo.Schema); err != nil {
			return deltawriter.SchemaDelta{}, deltawriter.FileOptions{}, fmt.Errorf("create table %s: %w", cfg.Table.URI, err)
		}
	}
	return change, fo, nil
}
