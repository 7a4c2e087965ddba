package ingest

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestDeadLetterLogRateLimited: dead letters are logged at WARN with their reason, the
// count since the reason's last line and an example; a reason logs at most one line every
// 10 s (the records of the flushes between are counted into the next line), each reason on
// its own.
func TestDeadLetterLogRateLimited(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	l := newDeadLetterLog()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	l.add(log, "schema_mismatch", 3, "orders", "amount", "field amount: string in the writer schema, long in the table")
	now = now.Add(4 * time.Second)
	l.add(log, "schema_mismatch", 5, "orders", "amount", "x")
	l.add(log, "schema_not_found", 2, "orders", "", "schema 99 not found")
	now = now.Add(6 * time.Second)
	l.add(log, "schema_mismatch", 1, "orders", "amount", "y")
	want := `level=WARN msg="records dead-lettered" reason=schema_mismatch count=3 topic=orders field=amount example="field amount: string in the writer schema, long in the table" next_line_in=10s
level=WARN msg="records dead-lettered" reason=schema_not_found count=2 topic=orders field="" example="schema 99 not found" next_line_in=10s
level=WARN msg="records dead-lettered" reason=schema_mismatch count=6 topic=orders field=amount example=y next_line_in=10s
`
	if got := buf.String(); got != want {
		t.Errorf("log\n%s\nwant\n%s", got, want)
	}
	if n := strings.Count(buf.String(), "\n"); n != 3 {
		t.Errorf("%d lines", n)
	}
}
