package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/dlq"
)

func TestParseReplayBound(t *testing.T) {
	ts := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want ReplayBound
		err  string
	}{
		{in: "0", want: ReplayBound{Offset: 0}},
		{in: "1200", want: ReplayBound{Offset: 1200}},
		{in: " 7 ", want: ReplayBound{Offset: 7}},
		{in: "2026-11-29T10:00:00Z", want: ReplayBound{Time: ts}},
		{in: "2026-11-29T11:00:00+01:00", want: ReplayBound{Time: ts}},
		{in: "-1", err: "an offset is 0 or more"},
		{in: "yesterday", err: `parse bound "yesterday": want a DLQ offset (e.g. 1200) or an RFC 3339 time`},
		{in: "2026-11-29", err: "want a DLQ offset"},
		{in: "", err: "want a DLQ offset"},
	} {
		got, err := ParseReplayBound(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseReplayBound(%q) = %v, %v; want error containing %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got.Offset != c.want.Offset || !got.Time.Equal(c.want.Time) || got.IsTime() != c.want.IsTime() {
			t.Errorf("ParseReplayBound(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestReplayOptionsValidate(t *testing.T) {
	off := func(n int64) *ReplayBound { return &ReplayBound{Offset: n} }
	at := func(s string) *ReplayBound {
		b, err := ParseReplayBound(s)
		if err != nil {
			t.Fatal(err)
		}
		return &b
	}
	for _, c := range []struct {
		name string
		o    ReplayOptions
		err  string // "" = valid
	}{
		{name: "nothing", o: ReplayOptions{}},
		{name: "known reasons", o: ReplayOptions{Reasons: []string{"schema_mismatch", "bad_magic"}}},
		{name: "unknown reason", o: ReplayOptions{Reasons: []string{"schema_mismatch", "schema-mismatch"}},
			err: `--reason "schema-mismatch" is not a dead-letter reason; use one of bad_magic, check_violation, decode_error, generated_column_mismatch, kafka_column_collision, key_decode_error, missing_key, not_null_violation, schema_mismatch, schema_not_found, schema_parse_error, schema_unreadable, too_short, trailing_bytes, truncated, unsupported_type`},
		{name: "offset range", o: ReplayOptions{From: off(3), Until: off(4)}},
		{name: "offsets equal", o: ReplayOptions{From: off(4), Until: off(4)}, err: "--from 4 is not before --until 4 (--until is exclusive): the range is empty"},
		{name: "from after until", o: ReplayOptions{From: off(9), Until: off(4)}, err: "--from 9 is not before --until 4"},
		{name: "time range", o: ReplayOptions{From: at("2026-11-29T10:00:00Z"), Until: at("2026-11-29T10:00:01Z")}},
		{name: "times reversed", o: ReplayOptions{From: at("2026-11-29T11:00:00Z"), Until: at("2026-11-29T10:00:00Z")},
			err: "--from 2026-11-29T11:00:00Z is not before --until 2026-11-29T10:00:00Z"},
		{name: "mixed kinds cannot be compared", o: ReplayOptions{From: at("2026-11-29T11:00:00Z"), Until: off(1)}},
		{name: "until 0", o: ReplayOptions{Until: off(0)}, err: "--until 0 stops before the first record"},
		{name: "two errors at once", o: ReplayOptions{Reasons: []string{"nope"}, From: off(2), Until: off(1)}, err: "--reason \"nope\" is not a dead-letter reason; use one of bad_magic, check_violation, decode_error, generated_column_mismatch, kafka_column_collision, key_decode_error, missing_key, not_null_violation, schema_mismatch, schema_not_found, schema_parse_error, schema_unreadable, too_short, trailing_bytes, truncated, unsupported_type\n--from 2 is not before --until 1 (--until is exclusive): the range is empty"},
	} {
		err := c.o.Validate()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		}
	}
}

func dlqTestRecord(off int64, reason string, ts time.Time, value string) *kgo.Record {
	return &kgo.Record{Topic: "d", Offset: off, Timestamp: ts, Value: []byte(value), Headers: []kgo.RecordHeader{
		{Key: dlq.HeaderConnectTopic, Value: []byte("src")}, {Key: dlq.HeaderConnectPartition, Value: []byte("0")},
		{Key: dlq.HeaderConnectOffset, Value: []byte(fmt.Sprint(100 + off))},
		{Key: dlq.HeaderReason, Value: []byte(reason)}, {Key: dlq.HeaderReplayCount, Value: []byte("0")}}}
}

func TestReplaySelectsAndStops(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	// offsets 0..5; timestamps not monotonic, as in a DLQ holding carried-forward records
	mins := []int{0, 5, 10, 3, 20, 1}
	reasons := []string{"schema_mismatch", "bad_magic", "schema_mismatch", "truncated", "bad_magic", "schema_mismatch"}
	var recs []*kgo.Record
	for i := range mins {
		recs = append(recs, dlqTestRecord(int64(i), reasons[i], t0.Add(time.Duration(mins[i])*time.Minute), "v"))
	}
	sel := func(o ReplayOptions) string {
		var b strings.Builder
		for _, r := range recs {
			if o.selects(r) {
				fmt.Fprint(&b, r.Offset)
			}
		}
		return b.String()
	}
	for _, c := range []struct {
		o    ReplayOptions
		want string
	}{
		{ReplayOptions{}, "012345"},
		{ReplayOptions{Reasons: []string{"schema_mismatch"}}, "025"},
		{ReplayOptions{Reasons: []string{"schema_mismatch", "truncated"}}, "0235"},
		{ReplayOptions{From: &ReplayBound{Offset: 2}}, "2345"},
		{ReplayOptions{From: &ReplayBound{Time: t0.Add(5 * time.Minute)}}, "124"}, // >= 10:05 inclusive
		{ReplayOptions{Reasons: []string{"bad_magic"}, From: &ReplayBound{Offset: 2}}, "4"},
	} {
		if got := sel(c.o); got != c.want {
			t.Errorf("selects %+v: %s, want %s", c.o, got, c.want)
		}
	}
	for _, c := range []struct {
		until     *ReplayBound
		end, next int64
		want      int64
	}{
		{nil, 6, 0, 6},
		{&ReplayBound{Offset: 4}, 6, 0, 4},
		{&ReplayBound{Offset: 40}, 6, 0, 6},
		{&ReplayBound{Time: t0.Add(4 * time.Minute)}, 6, 0, 1}, // first record at or past 10:04 is offset 1
		{&ReplayBound{Time: t0.Add(4 * time.Minute)}, 6, 3, 4}, // searched from the replay position on
		{&ReplayBound{Time: t0.Add(5 * time.Minute)}, 6, 0, 1}, // exclusive: 10:05 itself stops
		{&ReplayBound{Time: t0.Add(time.Hour)}, 6, 0, 6},
	} {
		o := ReplayOptions{Until: c.until}
		if got := o.stopOffset(recs, c.end, c.next); got != c.want {
			t.Errorf("stopOffset(until %v, end %d, next %d) = %d, want %d", c.until, c.end, c.next, got, c.want)
		}
	}
}

// deadLetterSetup runs a dead_letter pipeline over 10 v1 orders, 6 v2 orders (a field the
// table lacks: schema_mismatch) and 3 JSON values (bad_magic), all on partition 0, then
// adds the column. The DLQ holds offsets 0..5 schema_mismatch, 6..8 bad_magic.
func deadLetterSetup(t *testing.T) (*harness, *config.Config) {
	h := newHarness(t, 1)
	cfg := h.config()
	cfg.Schema.Policy = config.PolicyDeadLetter
	h.produce(1, 10, 0, 1, 0)
	h.produce(11, 6, 1, 1, 0)
	h.produceRaw(0, []byte(`{"order_id":17}`), []byte(`{"order_id":18}`), []byte(`{"order_id":19}`))
	m := h.startWith("pipeline", cfg, nil)
	h.waitHandled(19, 30*time.Second, m)
	m.stop(t)
	dl := h.readTopicAll(h.dlq)
	var got []string
	for _, r := range dl {
		reason, _ := dlq.Header(r, dlq.HeaderReason)
		got = append(got, fmt.Sprintf("%d:%s", r.Offset, reason))
	}
	want := "[0:schema_mismatch 1:schema_mismatch 2:schema_mismatch 3:schema_mismatch 4:schema_mismatch 5:schema_mismatch 6:bad_magic 7:bad_magic 8:bad_magic]"
	if fmt.Sprint(got) != want {
		t.Fatalf("DLQ %v, want %s", got, want)
	}
	h.addChannel()
	return h, cfg
}

func (h *harness) replay(cfg *config.Config, log *slog.Logger, o ReplayOptions) (*ReplaySummary, error) {
	h.t.Helper()
	if log == nil {
		log = slog.New(slog.NewTextHandler(testWriter{h.t, "replay"}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return Replay(context.Background(), cfg, h.deps(log), o)
}

func reasonCounts(s *ReplaySummary) string {
	var b strings.Builder
	for _, r := range []string{"bad_magic", "schema_mismatch"} {
		if o := s.ByReason[r]; o != nil {
			fmt.Fprintf(&b, "%s:%d/%d/%d/%d ", r, o.Landed, o.DeadLettered, o.Parked, o.Carried)
		}
	}
	return strings.TrimSpace(b.String())
}

// TestReplayReasonCarriesForward: --reason lands the selected dead letters and carries the
// others forward unchanged (same partition, headers, timestamp); a later unfiltered replay
// handles the carried copies, not the originals; the parked topic is needed only when a
// record is parked, and its absence loses nothing.
func TestReplayReasonCarriesForward(t *testing.T) {
	t.Parallel() // mostly waits on kfake timers; own cluster, registry and table (newHarness)
	h, cfg := deadLetterSetup(t)
	before := h.snapshot().Version

	dry, err := h.replay(cfg, nil, ReplayOptions{Reasons: []string{"schema_mismatch"}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Read != 9 || dry.Landed != 6 || dry.Carried != 3 || reasonCounts(dry) != "bad_magic:0/0/0/3 schema_mismatch:6/0/0/0" {
		t.Fatalf("dry run %+v %s", dry, reasonCounts(dry))
	}
	if v := h.snapshot().Version; v != before || h.dlqCount() != 9 {
		t.Fatalf("dry run wrote: version %d → %d, DLQ %d records", before, v, h.dlqCount())
	}

	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	first, err := h.replay(cfg, log, ReplayOptions{Reasons: []string{"schema_mismatch"}, ProgressEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if first.Read != 9 || first.Landed != 6 || first.Carried != 3 || first.Parked != 0 || len(first.DeadLettered) != 0 ||
		reasonCounts(first) != "bad_magic:0/0/0/3 schema_mismatch:6/0/0/0" {
		t.Fatalf("first replay %+v %s", first, reasonCounts(first))
	}
	if !strings.Contains(logs.String(), `msg="replay progress" pipeline=orders topic=orders.dlq partition=0 offset=8 high_watermark=9 stop=9 read=9 landed=6 dead_lettered=0 parked=0 carried=3`) {
		t.Errorf("no final progress line with the counts:\n%s", logs.String())
	}
	dl := h.readTopicAll(h.dlq)
	if len(dl) != 12 {
		t.Fatalf("DLQ holds %d records, want 9 + 3 carried", len(dl))
	}
	acks, err := dlq.NewAckIndex(context.Background(), h.deps(nil).Table.Store(), dl)
	if err != nil {
		t.Fatal(err)
	}
	for i := 9; i < 12; i++ {
		c, o := dl[i], dl[i-3]
		// the same record but for the ack headers, which name the replay's commit
		a, _, _ := dlq.AckOf(o)
		want := dlq.WithAck(o.Headers, dlq.Ack{CommitID: "", TxnAppID: "orders-replay-orders.dlq-0", TxnVersion: int64(i - 3)})
		got := slices.Clone(c.Headers)
		want[len(want)-3].Value, got[len(got)-3].Value = nil, nil // the commit id, checked below
		if c.Partition != 0 || !bytes.Equal(c.Value, o.Value) || !bytes.Equal(c.Key, o.Key) || !reflect.DeepEqual(got, want) || !c.Timestamp.Equal(o.Timestamp) {
			t.Errorf("carried record %d differs from offset %d: %+v vs %+v", i, i-3, c, o)
		}
		ca, _, _ := dlq.AckOf(c)
		if ca.CommitID == a.CommitID || acks.Classify(c) != dlq.AckReal || acks.Classify(o) != dlq.AckReal {
			t.Errorf("carried record %d: commit id %q (original's %q), %v; original %v: want another id, both real",
				i, ca.CommitID, a.CommitID, acks.Classify(c), acks.Classify(o))
		}
	}
	if got := h.snapshot().Txns["orders-replay-orders.dlq-0"]; got != 8 {
		t.Errorf("replay txn version %d, want 8", got)
	}
	ids := h.orderIDs()
	if len(ids) != 16 {
		t.Errorf("table holds %d orders, want 16", len(ids))
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("order %d is in the table %d times", id, n)
		}
	}

	// Unfiltered: the carried copies (9..11) are read, the originals (6..8) are not.
	second, err := h.replay(cfg, nil, ReplayOptions{MaxReplays: 1})
	if err != nil {
		t.Fatal(err)
	}
	if second.Read != 3 || second.AlreadyReplayed != 9 || second.Duplicates != 0 || second.DeadLettered["bad_magic"] != 3 || reasonCounts(second) != "bad_magic:0/3/0/0" {
		t.Fatalf("second replay %+v %s", second, reasonCounts(second))
	}

	// Now they would be parked, and orders.dlq.parked does not exist: the replay fails at
	// that point, writes and produces nothing.
	v, n := h.snapshot().Version, h.dlqCount()
	_, err = h.replay(cfg, nil, ReplayOptions{MaxReplays: 1})
	if !errors.Is(err, ErrParkedTopicMissing) || !strings.Contains(err.Error(), `go to "orders.dlq.parked", which does not exist: create it (kafka-topics.sh --bootstrap-server BROKER --create --topic orders.dlq.parked)`) {
		t.Fatalf("replay without the parked topic: %v", err)
	}
	if h.snapshot().Version != v || h.dlqCount() != n {
		t.Fatalf("the failed replay committed or produced: version %d → %d, DLQ %d → %d", v, h.snapshot().Version, n, h.dlqCount())
	}
	dry2, err := h.replay(cfg, nil, ReplayOptions{MaxReplays: 1, DryRun: true})
	if err != nil || dry2.Parked != 3 || !dry2.ParkedTopicMissing {
		t.Fatalf("dry run without the parked topic: %+v, %v", dry2, err)
	}
	if _, err := kadm.NewClient(h.producer).CreateTopic(context.Background(), 1, 1, nil, "orders.dlq.parked"); err != nil {
		t.Fatal(err)
	}
	third, err := h.replay(cfg, nil, ReplayOptions{MaxReplays: 1})
	if err != nil || third.Read != 3 || third.Parked != 3 || reasonCounts(third) != "bad_magic:0/0/3/0" {
		t.Fatalf("third replay %+v %s, %v", third, reasonCounts(third), err)
	}
	if got := len(h.readTopicAll("orders.dlq.parked")); got != 3 {
		t.Errorf("parked holds %d, want 3", got)
	}
	last, err := h.replay(cfg, nil, ReplayOptions{})
	if err != nil || last.Read != 0 || last.AlreadyReplayed != 15 {
		t.Errorf("last replay %+v, %v", last, err)
	}
	if n := len(h.orderIDs()); n != 16 {
		t.Errorf("table holds %d orders, want 16", n)
	}
}

// TestReplayFromUntilOffsets: --from carries the records before it forward, --until leaves
// the records from it on in place (the txn stops before it); a later replay lands the rest
// once, and a crash between carrying forward and committing leaves a copy that is an
// orphan once this replay commits past its original, which is replayed instead.
func TestReplayFromUntilOffsets(t *testing.T) {
	h, cfg := deadLetterSetup(t)
	s, err := h.replay(cfg, nil, ReplayOptions{From: &ReplayBound{Offset: 2}, Until: &ReplayBound{Offset: 5}})
	if err != nil {
		t.Fatal(err)
	}
	// 0,1 carried; 2,3,4 landed; 5..8 remain
	if s.Read != 5 || s.Landed != 3 || s.Carried != 2 || s.Remaining != 4 || reasonCounts(s) != "schema_mismatch:3/0/0/2" {
		t.Fatalf("replay --from 2 --until 5: %+v %s", s, reasonCounts(s))
	}
	if got := h.snapshot().Txns["orders-replay-orders.dlq-0"]; got != 4 {
		t.Errorf("replay txn version %d, want 4 (stopped before --until 5)", got)
	}
	if h.dlqCount() != 11 {
		t.Errorf("DLQ holds %d, want 9 + 2 carried", h.dlqCount())
	}

	// A replay that crashed after carrying forward and before its commit: an extra copy of
	// offset 5 sits at the end of the DLQ, the txn still at 4.
	dl := h.readTopicAll(h.dlq)
	orphan := dlq.Carried(dl[5], dlq.Ack{CommitID: "the-crashed-replay", TxnAppID: "orders-replay-orders.dlq-0", TxnVersion: 5})
	if err := h.producer.ProduceSync(context.Background(), orphan).FirstErr(); err != nil {
		t.Fatal(err)
	}
	all, err := h.replay(cfg, nil, ReplayOptions{Reasons: []string{"schema_mismatch"}})
	if err != nil {
		t.Fatal(err)
	}
	// read 5..11: 5 landed; 6..8 carried; 9, 10 (carried 0, 1) landed; 11 (the crashed
	// replay's copy of 5) pending until this replay committed past 5, then an orphan
	if all.Read != 7 || all.Orphans != 1 || all.Duplicates != 0 || all.Pending != 0 || all.Landed != 3 || all.Carried != 3 ||
		reasonCounts(all) != "bad_magic:0/0/0/3 schema_mismatch:3/0/0/0" {
		t.Fatalf("second replay %+v %s", all, reasonCounts(all))
	}
	ids := h.orderIDs()
	if len(ids) != 16 {
		t.Errorf("table holds %d orders, want 16", len(ids))
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("order %d is in the table %d times", id, n)
		}
	}
	again, err := h.replay(cfg, nil, ReplayOptions{Reasons: []string{"schema_mismatch"}})
	if err != nil || again.Landed != 0 || again.Read != 3 || again.Carried != 3 {
		t.Errorf("third replay %+v, %v: want only the 3 bad_magic read and carried again", again, err)
	}
	if n := len(h.orderIDs()); n != 16 {
		t.Errorf("table holds %d orders after a rerun, want 16", n)
	}
}
