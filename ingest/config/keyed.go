package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/expr"
)

// DefaultDeleteHorizon is table.delete_horizon when an upsert pipeline leaves it out.
const DefaultDeleteHorizon = 24 * time.Hour

// validateKeyed checks the keys of a keyed table (table.mode, key, sequence_by,
// delete_when, delete_horizon): what can be checked without the table's schema. The
// key and sequence columns' presence and types are checked at start-up against the
// table, and on create against the writer schema (docs/keyed-tables.md).
func (c *Config) validateKeyed(bad func(path, msg, fix string)) {
	t := &c.Table
	switch t.Mode {
	case ModeAppend, ModeUpsert:
	default:
		bad("$.table.mode", fmt.Sprintf("table.mode %q is not append or upsert", t.Mode), "use append (every record a new row) or upsert (the latest row per table.key)")
		return
	}
	if !t.Keyed() {
		for _, k := range []struct {
			path, name string
			set        bool
		}{
			{"$.table.key", "table.key", len(t.Key) > 0},
			{"$.table.sequence_by", "table.sequence_by", t.SequenceBy != ""},
			{"$.table.delete_when", "table.delete_when", t.DeleteWhen != ""},
			{"$.table.delete_horizon", "table.delete_horizon", t.DeleteHorizon != 0},
		} {
			if k.set {
				bad(k.path, k.name+" is set but table.mode is append, which ignores it", "set table.mode: upsert, or remove "+k.name)
			}
		}
		return
	}
	if len(t.Key) == 0 {
		bad("$.table", "table.mode is upsert but table.key is missing", "name the key columns, e.g. key: [id]")
	}
	seen := map[string]bool{}
	for i, k := range t.Key {
		path := fmt.Sprintf("$.table.key[%d]", i)
		switch nk := deltalog.NameKey(k); {
		case strings.TrimSpace(k) == "":
			bad(path, "table.key: an empty column name", "name a top-level column of the row, e.g. key: [id]")
		case seen[nk]:
			bad(path, fmt.Sprintf("table.key: column %q is listed twice", k), "list each key column once")
		default:
			seen[nk] = true
		}
	}
	if t.SequenceBy != "" && seen[deltalog.NameKey(t.SequenceBy)] {
		bad("$.table.sequence_by", fmt.Sprintf("table.sequence_by %q is a key column", t.SequenceBy), "order changes by a column that changes with each change, e.g. an update timestamp or a log sequence number")
	}
	if t.DeleteWhen != "" {
		n, err := expr.Parse(t.DeleteWhen)
		if err == nil {
			err = expr.CheckSupported(n)
		}
		if err != nil {
			bad("$.table.delete_when", fmt.Sprintf("table.delete_when %q: %v", t.DeleteWhen, err), "write a boolean Spark SQL expression over the row's columns, e.g. delete_when: \"op = 'd'\"")
		}
	}
	if t.DeleteHorizon < 0 {
		bad("$.table.delete_horizon", "table.delete_horizon is negative", "use a duration such as 24h")
	}
	if c.DeadLetter.Topic == "" {
		bad("$.dead_letter", "table.mode is upsert but dead_letter.topic is missing: a record without its key (or with a NULL key column) goes to the dead-letter topic under every policy",
			"set dead_letter: {topic: <topic>.dlq}")
	}
	if len(c.Table.KafkaColumns) > 0 {
		for i, k := range c.Table.KafkaColumns {
			if seen[deltalog.NameKey(k)] {
				bad(fmt.Sprintf("$.table.kafka_columns[%d]", i), fmt.Sprintf("table.kafka_columns: %q is a key column", k), "key an upsert table by columns of the row")
			}
		}
	}
}
