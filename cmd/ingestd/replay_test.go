package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/ingest"
)

func TestPrintReplay(t *testing.T) {
	var b bytes.Buffer
	printReplay(&b, &ingest.ReplaySummary{DeadLetterTopic: "orders.dlq", Read: 32, AlreadyReplayed: 4, Duplicates: 1, Landed: 16,
		DeadLettered: map[string]int{"not_null_violation": 4}, Carried: 11, Remaining: 3, DryRun: true, Parked: 2, ParkedTopicMissing: true,
		ByReason: map[string]*ingest.ReasonOutcome{
			"schema_mismatch":    {Landed: 16, DeadLettered: 4},
			"not_null_violation": {Carried: 11, Parked: 2},
		}})
	want := `orders.dlq dry run (nothing written): 32 records after the replay position (4 already replayed, 1 duplicates skipped)
  landed in the table:  16
  dead-lettered again:  4  reason=not_null_violation
  parked:               2  (in orders.dlq.parked)
  note: orders.dlq.parked does not exist; create it before replaying (kafka-topics.sh --create --topic orders.dlq.parked)
  carried forward:      11  (not selected; re-produced unchanged to orders.dlq)
  left for later:       3  (at or past --until)
  by dead-letter reason:  reason                   land   re-dlq     park    carry
                          not_null_violation          0        0        2       11
                          schema_mismatch            16        4        0        0
`
	if b.String() != want {
		t.Errorf("printReplay:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	printReplay(&b, &ingest.ReplaySummary{DeadLetterTopic: "orders.dlq", Read: 8, Orphans: 6, Landed: 2, Pending: 3, Remaining: 5})
	want = `orders.dlq replayed: 8 records after the replay position (0 already replayed, 0 duplicates skipped)
  landed in the table:  2
  orphans skipped:      6  (their flush never committed; a later flush handled the records)
  left for later:       5  (at or past --until, or from a pending dead letter: 3 whose commit is not in the table yet)
`
	if b.String() != want {
		t.Errorf("printReplay with orphans and pending:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestReplayFlags: bad values and combinations exit 2 with a message naming the flag,
// before the config is read.
func TestReplayFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--reason", "schema_mismatch,nope"}, `ingestd replay: --reason "nope" is not a dead-letter reason; use one of bad_magic, check_violation, decode_error, generated_column_mismatch, kafka_column_collision, key_decode_error, missing_key, not_null_violation, schema_mismatch, schema_not_found, schema_parse_error, schema_unreadable, too_short, trailing_bytes, truncated, unsupported_type` + "\n"},
		{[]string{"--reason", "a", "--reason", "b"}, "ingestd replay: --reason \"a\" is not a dead-letter reason; use one of bad_magic, check_violation, decode_error, generated_column_mismatch, kafka_column_collision, key_decode_error, missing_key, not_null_violation, schema_mismatch, schema_not_found, schema_parse_error, schema_unreadable, too_short, trailing_bytes, truncated, unsupported_type\ningestd replay: --reason \"b\" is not"},
		{[]string{"--from", "yesterday"}, `ingestd replay: --from: parse bound "yesterday": want a DLQ offset (e.g. 1200) or an RFC 3339 time (e.g. 2026-11-29T10:00:00Z)` + "\n"},
		{[]string{"--until", "2026-11-29 10:00"}, `ingestd replay: --until: parse bound "2026-11-29 10:00": want a DLQ offset`},
		{[]string{"--from", "10", "--until", "5"}, "ingestd replay: --from 10 is not before --until 5 (--until is exclusive): the range is empty\n"},
		{[]string{"--until", "0"}, "ingestd replay: --until 0 stops before the first record (--until is exclusive): the range is empty\n"},
		{[]string{"--max-replays", "0"}, "ingestd replay: --max-replays must be at least 1\n"},
	} {
		var out, errb bytes.Buffer
		code := cmdReplay(context.Background(), append([]string{"--config", "/nonexistent.yaml"}, c.args...), &out, &errb)
		if code != exitUsage || !strings.HasPrefix(errb.String(), c.want) || out.Len() != 0 {
			t.Errorf("replay %v: exit %d, stderr %q; want exit %d and %q", c.args, code, errb.String(), exitUsage, c.want)
		}
	}
}
