// Package schemaguard decides what happens to records whose writer schema differs from
// their table's schema.
//
// Diff lists the differences between a writer schema, already mapped to Delta types
// (decode.ToDelta), and a table's schema, recursively through structs, array elements and
// map values. Decide turns them into one Decision per the table's policy: write, evolve the
// table and write, dead-letter, or halt (docs/schema-policies.md, "Decision table"). Apply
// makes the evolvable changes; PlanBatch decides every writer schema of one batch against
// the table, or against the table the batch creates; Explain words a decision for a person,
// like Delta's schema-mismatch error.
//
// The guard decides per writer schema, never per value: every record written with one
// schema meets the same decision, whatever its values (a null for a NOT NULL column is the
// decoder's per-record not_null_violation). Tables ingestd creates are nullable all the way
// down (NewTableSchema); an existing table's NOT NULL columns are kept, and only evolve
// relaxes them.
//
// It is pure: no I/O, no Kafka, no storage, no goroutines and no state between calls (it
// imports only deltawriter/deltalog), so every function is safe for concurrent use. Apply
// never modifies its arguments: it returns a changed copy, or the table itself when nothing
// changes. Diff's time is linear in the number of fields.
package schemaguard
