package schemaguard

import (
	"maps"
	"slices"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// Writer is one writer schema of a batch: its schema id and its Delta form.
type Writer struct {
	ID     int
	Schema *deltalog.StructType
}

// BatchPlan is the guard's decision for one batch of records, taken once per writer schema
// against the table's current schema.
type BatchPlan struct {
	// Base is the table schema the decisions were taken against: the current one, or,
	// when Create is set, the schema of the table this batch creates. nil: there is no
	// table and no writer schema of the batch can define one.
	Base *deltalog.StructType
	// Schema is the table schema after the batch: Base with every evolving writer's
	// changes applied, in writer order. Base itself when nothing evolves.
	Schema *deltalog.StructType
	// Create: there is no table yet; this batch creates it with Base (all columns
	// nullable, from the first writer schema that can define a table).
	Create bool
	// Evolved are the changes applied to Base to get Schema (add_column, widen,
	// relax_nullability), in order.
	Evolved []Change
	// Enable are the table features the batch turns on (sorted): those needed by the
	// created schema and by the evolving writers, as opts.Allow permits.
	Enable []string
	// Decisions hold each writer schema's decision, by schema id.
	Decisions map[int]Decision
}

// PlanBatch decides a batch's writer schemas against table (nil: the table does not exist
// yet) under opts; writers are in the order the batch first uses them, each id once.
//
// Without a table, the first writer schema that could define one (every change an
// add_column, and its table features allowed) creates it, with all columns nullable;
// writers before it that could not follow the policy. Each writer is then decided against
// the table schema (Decide over Diff); evolving writers are applied cumulatively (Apply),
// and every evolving writer is decided again against the final schema, since two writers
// may add the same field with different types in one batch: one that no longer fits is
// dead-lettered or halted like any other non-fitting schema.
func PlanBatch(table *deltalog.StructType, writers []Writer, opts Options) BatchPlan {
	p := BatchPlan{Base: table, Decisions: map[int]Decision{}}
	enable := map[string]bool{}
	if table == nil {
		create := opts
		create.Policy = Evolve
		for _, w := range writers {
			changes := DiffValue(&deltalog.StructType{}, w.Schema, opts.KafkaColumns)
			if d := Decide(changes, create); d.Action == EvolveAndWrite || d.Action == Write {
				p.Base, p.Create = NewTableSchema(w.Schema), true
				if opts.CreateColumns != nil {
					p.Base = opts.CreateColumns(p.Base)
				}
				for _, f := range d.Features {
					enable[f] = true
				}
				break
			}
			p.Decisions[w.ID] = Decide(changes, opts)
		}
	}
	p.Schema = p.Base
	if p.Base == nil {
		return p
	}
	for _, w := range writers {
		if _, done := p.Decisions[w.ID]; done {
			continue
		}
		d := Decide(DiffValue(p.Base, w.Schema, opts.KafkaColumns), opts)
		p.Decisions[w.ID] = d
		if d.Action != EvolveAndWrite {
			continue
		}
		for _, f := range d.Features {
			enable[f] = true
		}
		var applied []Change
		p.Schema, applied = Apply(p.Schema, w.Schema, opts.Table.TypeWidening || enable[deltalog.FeatureTypeWidening])
		p.Evolved = append(p.Evolved, applied...)
	}
	if len(p.Evolved) > 0 {
		for _, w := range writers {
			if p.Decisions[w.ID].Action != EvolveAndWrite {
				continue
			}
			if again := Decide(DiffValue(p.Schema, w.Schema, opts.KafkaColumns), opts); again.Action == DeadLetterIt || again.Action == HaltIt {
				p.Decisions[w.ID] = again
			}
		}
	}
	p.Enable = slices.Sorted(maps.Keys(enable))
	return p
}

// NewTableSchema is the schema of a table ingestd creates for a writer schema: the
// writer's fields, all nullable (docs/schema-policies.md, "Avro to Delta types").
func NewTableSchema(writer *deltalog.StructType) *deltalog.StructType {
	s, _ := Apply(&deltalog.StructType{}, writer, false)
	return s
}
