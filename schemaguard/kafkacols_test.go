package schemaguard

import (
	"strings"
	"testing"

	dl "github.com/ingestd/ingestd/deltawriter/deltalog"
)

// TestKafkaColumnCollision: a table with the Kafka columns _kafka_key and _kafka_offset
// (NOT NULL) meets value schema 3602, which has a field _KAFKA_Offset. A value field named
// like a Kafka column (case-insensitively) is incompatible with reason
// kafka_column_collision, routed by the policy (evolve: on_incompatible); the Kafka
// columns themselves, NOT NULL ones included, are never "missing" from the value schema
// (101, order_id alone) and are no drift.
func TestKafkaColumnCollision(t *testing.T) {
	kafka := []string{"_kafka_key", "_kafka_offset"}
	table := st(null("order_id", dl.Long), null("_kafka_key", dl.Binary), notNull("_kafka_offset", dl.Long))
	v101 := st(notNull("order_id", dl.Long))
	v3602 := st(notNull("order_id", dl.Long), notNull("_KAFKA_Offset", dl.Long))
	for _, tt := range []struct {
		policy, onIncompatible Policy
		want                   Action
	}{
		{DeadLetter, Halt, DeadLetterIt}, {Halt, DeadLetter, HaltIt}, {Evolve, DeadLetter, DeadLetterIt}, {Evolve, Halt, HaltIt},
	} {
		opts := Options{Policy: tt.policy, OnIncompatible: tt.onIncompatible, KafkaColumns: kafka}
		p := PlanBatch(table, []Writer{{101, v101}, {3602, v3602}}, opts)
		if d := p.Decisions[101]; d.Action != Write || len(d.Changes) != 0 {
			t.Errorf("%s: ID 101 (no Kafka columns in the value) = %v %v, want write with no change", tt.policy, d.Action, d.Changes)
		}
		d := p.Decisions[3602]
		if d.Action != tt.want || d.Reason != "kafka_column_collision" || d.Field != "_KAFKA_Offset" {
			t.Errorf("%s/%s: ID 3602 = %v %q %q, want %v kafka_column_collision _KAFKA_Offset", tt.policy, tt.onIncompatible, d.Action, d.Reason, d.Field, tt.want)
		}
		if len(p.Evolved) != 0 || p.Schema != table {
			t.Errorf("%s: the table must not change: %v", tt.policy, p.Evolved)
		}
		msg := Explain(d, table, "orders", 7, v3602, 3602, opts)
		for _, w := range []string{"field _KAFKA_Offset long collides with Kafka column _kafka_offset, which ingestd fills from the record (table.kafka_columns)",
			"rename field _KAFKA_Offset in the producer's schema, or remove offset from table.kafka_columns"} {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message lacks %q:\n%s", tt.policy, w, msg)
			}
		}
	}
	// Without Kafka columns configured, _kafka_offset is an ordinary column.
	if d := PlanBatch(table, []Writer{{3602, v3602}}, Options{Policy: DeadLetter, OnIncompatible: Halt}).Decisions[3602]; d.Action != Write {
		t.Errorf("no kafka_columns: %v %v, want write", d.Action, d.Changes)
	}
	// Creating a table: the colliding writer cannot define it; the next one does, without the collision.
	p := PlanBatch(nil, []Writer{{3602, v3602}, {101, v101}}, Options{Policy: Evolve, OnIncompatible: DeadLetter, KafkaColumns: kafka})
	if !p.Create || p.Decisions[3602].Reason != "kafka_column_collision" || p.Base.String() != st(null("order_id", dl.Long)).String() {
		t.Errorf("create: %+v", p)
	}
}
