package ingest

import (
	"testing"
	"time"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
)

// A CHECK constraint on a decimal column is checked per record: under dead_letter the rows
// that make it false are dead-lettered as check_violation naming the constraint and its
// expression; the others are committed.
func TestCheckConstraintDeadLetters(t *testing.T) {
	h := newHarness(t, 1)
	h.createTable(nil, map[string]string{"delta.constraints.amount.min": "amount > 1", "delta.constraints.id_known": "order_id IS NOT NULL"})
	h.produce(0, 10, 0, 1, -1) // amounts id*37/100: 0.00, 0.37, 0.74 violate amount > 1
	cfg := h.config()
	cfg.Schema.Policy = config.PolicyDeadLetter
	m := h.startWith("pipeline", cfg, nil)
	h.waitHandled(10, 20*time.Second, m)
	got := h.snapshot()
	if got.Files.Len() != 1 {
		t.Fatalf("%d files, want one", got.Files.Len())
	}
	for _, a := range got.Files.All() {
		if n, _ := a.NumRecords(); n != 7 {
			t.Fatalf("%d rows, want 7", n)
		}
	}
	recs := h.readTopicAll(h.dlq)
	if len(recs) != 3 {
		t.Fatalf("%d dead letters, want 3", len(recs))
	}
	for _, r := range recs {
		reason, _ := dlq.Header(r, dlq.HeaderReason)
		name, _ := dlq.Header(r, "ingestd.error.constraint")
		src, _ := dlq.Header(r, "ingestd.error.constraint.amount.min")
		msg, _ := dlq.Header(r, dlq.HeaderConnectMessage)
		want := "decode: check_violation: the row violates CHECK constraint amount.min (amount > 1) is false (a row must make every constraint true; NULL is a violation)"
		if reason != "check_violation" || name != "amount.min" || src != "amount > 1" || msg != want {
			t.Errorf("dead letter: reason %q constraint %q expression %q message %q", reason, name, src, msg)
		}
	}
}
