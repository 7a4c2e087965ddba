package integration

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/deltawriter"
	"github.com/ingestd/ingestd/deltawriter/deltalog"
)

// ordersNoteNotNull is the orders v1 table as another engine created it, with `note`
// NOT NULL: v1 orders whose note is null (order_id % 5 == 0) are dead-lettered with
// not_null_violation, v2 orders (new field `channel`) with schema_mismatch.
const ordersNoteNotNull = `{"type":"struct","fields":[
 {"name":"order_id","type":"long","nullable":true,"metadata":{}},
 {"name":"customer","type":"string","nullable":true,"metadata":{}},
 {"name":"amount","type":"decimal(10,2)","nullable":true,"metadata":{}},
 {"name":"created_at","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"status","type":"string","nullable":true,"metadata":{}},
 {"name":"note","type":"string","nullable":false,"metadata":{}}]}`

// relaxNotNull makes a NOT NULL column nullable, as Spark's ALTER TABLE … ALTER COLUMN …
// DROP NOT NULL does: one metaData commit.
func relaxNotNull(t *testing.T, table, column string) {
	t.Helper()
	ctx := context.Background()
	tbl := openTable(t, table)
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := deltalog.ParseSchema(snap.Metadata.SchemaString)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range schema.Fields {
		if f.Name == column {
			f.Nullable, found = true, true
		}
	}
	if !found {
		t.Fatalf("no column %s in %s", column, snap.Metadata.SchemaString)
	}
	b, err := schema.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	meta := snap.Metadata
	meta.SchemaString = string(b)
	if _, err := tbl.Commit(ctx, deltawriter.Commit{ReadVersion: snap.Version, Metadata: &meta, Operation: "CHANGE COLUMN"}); err != nil {
		t.Fatalf("relax %s: %v", column, err)
	}
}

func reasonLine(s replaySummary, reason string) string {
	o := s.ByReason[reason]
	return fmt.Sprintf("%s land=%d re-dlq=%d park=%d carry=%d", reason, o.Landed, o.DeadLettered, o.Parked, o.Carried)
}

// TestReplayReasonFilter: the DLQ holds two reasons. `replay --reason schema_mismatch`
// after the column is added lands those that now fit, re-dead-letters those that fail for
// another reason, and carries the not_null_violation ones forward unchanged; once the
// column is relaxed, an unfiltered replay lands the rest. Every order is in the table
// exactly once, and a rerun changes nothing.
func TestReplayReasonFilter(t *testing.T) {
	s := need(t)
	const nV1, nV2 = 60, 20
	topic := createTopic(t, s, "rp-reason", 2)
	dlq := createTopic(t, s, "rp-reason.dlq", 2) // no .parked topic: nothing is parked
	orders := produce(t, s, topic, nV1, nV2, 1)
	dir := t.TempDir()
	table := filepath.Join(dir, "silver")
	createTable(t, table, ordersNoteNotNull, nil)
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "silver", pipelineYAML("rp-reason", s, topic, table, "dead_letter", dlq, "{max_records: 25, max_bytes: 1MiB, max_age: 200ms}"))
	cfg := filepath.Join(cfgDir, "silver.yaml")
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "silver to handle every record", func() bool { return handled(t, table) == nV1+nV2 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	// v1: 12 of 60 have a null note; v2: all 20 carry channel, 4 of them (65, 70, 75, 80) a null note too.
	const nullV1, nullV2 = 12, 4
	if n := countRows(t, s, table); n != nV1-nullV1 {
		t.Fatalf("table has %d rows, want %d", n, nV1-nullV1)
	}
	dl := readDLQ(t, s, dlq)
	byReason := map[string]int{}
	for _, r := range dl {
		byReason[r.headers["ingestd.error.reason"]]++
	}
	if len(dl) != nullV1+nV2 || byReason["not_null_violation"] != nullV1 || byReason["schema_mismatch"] != nV2 {
		t.Fatalf("DLQ holds %d records %v, want %d not_null_violation and %d schema_mismatch", len(dl), byReason, nullV1, nV2)
	}
	if out, err := runCLI(t, "table", "alter", "--config", cfg, "--add-column", "channel STRING"); err != nil {
		t.Fatalf("table alter: %v\n%s", err, out)
	}

	want := []string{"not_null_violation land=0 re-dlq=0 park=0 carry=12", "schema_mismatch land=16 re-dlq=4 park=0 carry=0"}
	version := readVersion(t, table)
	dry := replay(t, cfg, "--reason", "schema_mismatch", "--dry-run")
	if dry.Read != nullV1+nV2 || dry.Landed != nV2-nullV2 || dry.Carried != nullV1 || dry.DeadLettered["not_null_violation"] != nullV2 ||
		reasonLine(dry, "not_null_violation") != want[0] || reasonLine(dry, "schema_mismatch") != want[1] {
		t.Fatalf("dry run %+v\n%s\n%s", dry, reasonLine(dry, "not_null_violation"), reasonLine(dry, "schema_mismatch"))
	}
	if v := readVersion(t, table); v != version || len(readDLQ(t, s, dlq)) != len(dl) {
		t.Fatalf("the dry run wrote something: version %d → %d", version, v)
	}

	first := replay(t, cfg, "--reason", "schema_mismatch")
	if first.Read != nullV1+nV2 || first.Landed != nV2-nullV2 || first.Carried != nullV1 || first.Parked != 0 ||
		reasonLine(first, "not_null_violation") != want[0] || reasonLine(first, "schema_mismatch") != want[1] {
		t.Fatalf("replay --reason schema_mismatch %+v", first)
	}
	if n := countRows(t, s, table); n != nV1-nullV1+nV2-nullV2 {
		t.Fatalf("table has %d rows, want %d", n, nV1-nullV1+nV2-nullV2)
	}
	// The carried records are the not_null_violation dead letters, unchanged, in their
	// partition; the re-dead-lettered ones have replay count 1.
	after := readDLQ(t, s, dlq)
	if len(after) != len(dl)+nullV1+nullV2 {
		t.Fatalf("DLQ holds %d records, want %d + %d carried + %d re-dead-lettered", len(after), len(dl), nullV1, nullV2)
	}
	orig := map[string]topicRecord{}
	for _, r := range dl {
		orig[r.headers["__connect.errors.partition"]+"/"+r.headers["__connect.errors.offset"]] = r
	}
	carried, redlq := 0, 0
	seenAt := map[string]bool{}
	for _, r := range dl {
		seenAt[fmt.Sprintf("%d/%d", r.partition, r.offset)] = true
	}
	for _, r := range after {
		if seenAt[fmt.Sprintf("%d/%d", r.partition, r.offset)] {
			continue
		}
		o := orig[r.headers["__connect.errors.partition"]+"/"+r.headers["__connect.errors.offset"]]
		switch r.headers["ingestd.replay.count"] {
		case "0":
			carried++
			// unchanged but for the ack headers, which name the replay's commit, the
			// replay appId of the DLQ partition and the original dead letter's DLQ offset
			rh, oh := maps.Clone(r.headers), maps.Clone(o.headers)
			ackApp, ackVer, ackID := rh["ingestd.txn.app_id"], rh["ingestd.txn.version"], rh["ingestd.commit.id"]
			for _, k := range []string{"ingestd.txn.app_id", "ingestd.txn.version", "ingestd.commit.id"} {
				delete(rh, k)
				delete(oh, k)
			}
			if fmt.Sprint(rh) != fmt.Sprint(oh) || string(r.value) != string(o.value) || string(r.key) != string(o.key) || r.partition != o.partition ||
				r.headers["ingestd.error.reason"] != "not_null_violation" {
				t.Errorf("carried record %d/%d differs from its dead letter %d/%d", r.partition, r.offset, o.partition, o.offset)
			}
			if !strings.HasSuffix(ackApp, fmt.Sprintf("-replay-%s-%d", dlq, o.partition)) || ackVer != fmt.Sprint(o.offset) ||
				ackID == "" || ackID == o.headers["ingestd.commit.id"] {
				t.Errorf("carried record %d/%d acks %s@%s commit %q; want the replay appId of partition %d, version %d and a new commit id",
					r.partition, r.offset, ackApp, ackVer, ackID, o.partition, o.offset)
			}
		case "1":
			redlq++
			if r.headers["ingestd.error.reason"] != "not_null_violation" || r.headers["ingestd.error.field"] != "note" || string(r.value) != string(o.value) {
				t.Errorf("re-dead-lettered record %d/%d: %v", r.partition, r.offset, r.headers)
			}
		}
	}
	if carried != nullV1 || redlq != nullV2 {
		t.Errorf("new DLQ records: %d carried, %d re-dead-lettered; want %d and %d", carried, redlq, nullV1, nullV2)
	}

	// The engineer relaxes `note` (Spark: ALTER COLUMN note DROP NOT NULL) and replays
	// everything: the carried copies and the re-dead-lettered ones land, not the originals.
	relaxNotNull(t, table, "note")
	second := replay(t, cfg)
	if second.Read != nullV1+nullV2 || second.Landed != nullV1+nullV2 || second.Duplicates != 0 || second.Carried != 0 ||
		second.AlreadyReplayed != len(dl) || reasonLine(second, "not_null_violation") != "not_null_violation land=16 re-dlq=0 park=0 carry=0" {
		t.Fatalf("unfiltered replay %+v", second)
	}
	checkOrders(t, "silver", readTable(t, s, table), orders, true)

	third := replay(t, cfg)
	if third.Read != 0 || third.Landed != 0 || third.AlreadyReplayed != len(after) {
		t.Errorf("rerun %+v, want nothing read and %d already replayed", third, len(after))
	}
	if n := countRows(t, s, table); n != nV1+nV2 {
		t.Errorf("after a rerun: %d rows, want %d", n, nV1+nV2)
	}
}

// TestReplayFromTimeUntilOffset: three waves of v2 orders with record timestamps two hours,
// one hour and ten minutes old. `replay --from <90 minutes ago> --until 25` carries the
// oldest wave forward (their timestamps are kept), lands offsets 10..24 and leaves 25 on in
// place; rerunning it changes nothing; `--from` alone then lands the rest of the newer
// waves and carries the old one again; an unfiltered replay lands it. Exactly once.
func TestReplayFromTimeUntilOffset(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "rp-window", 1)
	dlq := createTopic(t, s, "rp-window.dlq", 1)
	now := time.Now()
	ms := func(d time.Duration) string { return strconv.FormatInt(now.Add(-d).UnixMilli(), 10) }
	orders := produce(t, s, topic, 5, 10, 1, "--timestamp-ms", ms(2*time.Hour))                       // v1 1..5, v2 6..15 → DLQ 0..9
	orders = append(orders, produce(t, s, topic, 0, 10, 16, "--timestamp-ms", ms(time.Hour))...)      // DLQ 10..19
	orders = append(orders, produce(t, s, topic, 0, 10, 26, "--timestamp-ms", ms(10*time.Minute))...) // DLQ 20..29
	dir := t.TempDir()
	table := filepath.Join(dir, "silver")
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "silver", pipelineYAML("rp-window", s, topic, table, "dead_letter", dlq, "{max_records: 100, max_bytes: 1MiB, max_age: 200ms}"))
	cfg := filepath.Join(cfgDir, "silver.yaml")
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "silver to handle every record", func() bool { return handled(t, table) == 35 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	dl := readDLQ(t, s, dlq)
	if len(dl) != 30 {
		t.Fatalf("DLQ holds %d, want 30", len(dl))
	}
	if out, err := runCLI(t, "table", "alter", "--config", cfg, "--add-column", "channel STRING"); err != nil {
		t.Fatalf("table alter: %v\n%s", err, out)
	}
	from := now.Add(-90 * time.Minute).UTC().Format(time.RFC3339)
	txn := func() int64 { return txnVersions(t, table)["rp-window-replay-"+dlq+"-0"] }

	dry := replay(t, cfg, "--from", from, "--until", "25", "--dry-run")
	if dry.Read != 25 || dry.Landed != 15 || dry.Carried != 10 || dry.Remaining != 5 || reasonLine(dry, "schema_mismatch") != "schema_mismatch land=15 re-dlq=0 park=0 carry=10" {
		t.Fatalf("dry run %+v", dry)
	}
	first := replay(t, cfg, "--from", from, "--until", "25")
	if first.Read != 25 || first.Landed != 15 || first.Carried != 10 || first.Remaining != 5 || txn() != 24 {
		t.Fatalf("replay --from %s --until 25: %+v, txn %d", from, first, txn())
	}
	if n := countRows(t, s, table); n != 5+15 {
		t.Fatalf("%d rows, want 20", n)
	}
	// The same command again: the replay position is at --until, nothing to do; the carried
	// records (30..39) are past --until too.
	again := replay(t, cfg, "--from", from, "--until", "25")
	if again.Read != 0 || again.Landed != 0 || again.Carried != 0 || again.Remaining != 15 || txn() != 24 {
		t.Fatalf("rerun %+v, txn %d", again, txn())
	}
	// --from alone: 25..29 land; the carried copies kept their two-hour-old timestamps, so
	// they are carried again (40..49).
	second := replay(t, cfg, "--from", from)
	if second.Read != 15 || second.Landed != 5 || second.Carried != 10 || second.Duplicates != 0 || txn() != 39 {
		t.Fatalf("replay --from %s: %+v, txn %d", from, second, txn())
	}
	last := replay(t, cfg)
	if last.Read != 10 || last.Landed != 10 || last.Carried != 0 || last.Duplicates != 0 || txn() != 49 {
		t.Fatalf("unfiltered replay %+v, txn %d", last, txn())
	}
	if len(orders) != 35 {
		t.Fatalf("%d orders produced, want 35", len(orders))
	}
	checkOrders(t, "silver", readTable(t, s, table), orders, true)
	if rerun := replay(t, cfg); rerun.Read != 0 || rerun.Landed != 0 {
		t.Errorf("rerun %+v", rerun)
	}
	if n := countRows(t, s, table); n != 35 {
		t.Errorf("after a rerun: %d rows", n)
	}
}

// TestReplayFlagErrors: bad values and combinations are refused before anything is read.
func TestReplayFlagErrors(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "none.yaml") // never read: the flags fail first
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--reason", "schema_mismatch,nope"}, `--reason "nope" is not a dead-letter reason; use one of bad_magic, check_violation, decode_error`},
		{[]string{"--from", "yesterday"}, `--from: parse bound "yesterday": want a DLQ offset (e.g. 1200) or an RFC 3339 time`},
		{[]string{"--until", "-3"}, `--until: parse bound "-3": an offset is 0 or more`},
		{[]string{"--from", "10", "--until", "5"}, "--from 10 is not before --until 5 (--until is exclusive): the range is empty"},
		{[]string{"--from", "2026-11-29T12:00:00Z", "--until", "2026-11-29T11:00:00Z"}, "--from 2026-11-29T12:00:00Z is not before --until 2026-11-29T11:00:00Z"},
	} {
		out, err := runCLI(t, append([]string{"replay", "--config", cfg}, c.args...)...)
		ce, ok := err.(*cliError)
		if !ok || ce.err.(*exec.ExitError).ExitCode() != 2 || !strings.Contains(ce.stderr, c.want) {
			t.Errorf("replay %v: %v (stdout %q), want exit 2 and %q", c.args, err, out, c.want)
		}
	}
}
