package integration

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// The no-copy decode (decode.Arena.AliasPayloads) makes every string, bytes and
// map-key value of a flush a slice of its Kafka record, and its byte bound hands the
// records held back after a transient failure out again, half of max_bytes at a time.
// These tests attack both end to end, with the real broker, registry, S3 emulator and
// delta-rs: values that must outlive a failed flush (the same records decoded again after
// releaseCols) and partition values kept across rows and files.

// aliasSchema has every kind of value the aliasing arena slices from the payload: a string
// partition column, a large string (16 KiB and more for some rows), an empty string, map
// keys and values, bytes.
const aliasSchema = `{"type":"record","name":"Aliased","fields":[
{"name":"id","type":"long"},
{"name":"cat","type":"string"},
{"name":"big","type":"string"},
{"name":"empty","type":"string"},
{"name":"tags","type":{"type":"map","values":"string"}},
{"name":"blob","type":"bytes"}]}`

// aliasCats are the partition values: Hive-escaped characters, non-ASCII, a long one.
var aliasCats = []string{"a=b/c%d#e", "α β", strings.Repeat("long-", 12)}

// aliasRow is the row of id: big is 20 KiB of non-ASCII for id%4 == 0, exactly 16 KiB for
// id%4 == 1 (the size from which a copying arena gave a value its own allocation), short
// otherwise; tags has an empty key and two keys naming the id.
func aliasRow(id int64) map[string]any {
	var big string
	switch id % 4 {
	case 0:
		big = strings.Repeat(fmt.Sprintf("€%05d", id), 20<<10/8)[:20<<10] // 8 bytes a repeat
	case 1:
		big = strings.Repeat(fmt.Sprintf("%08d", id), 16<<10/8)
	default:
		big = "short-" + strconv.FormatInt(id, 10)
	}
	return map[string]any{
		"id":    id,
		"cat":   aliasCats[id%int64(len(aliasCats))],
		"big":   big,
		"empty": "",
		"tags":  map[string]any{"": "", "k" + strconv.FormatInt(id, 10): "v-ü-" + strconv.FormatInt(id, 10), "zz": strconv.FormatInt(id*7, 10)},
		"blob":  []byte{0x00, byte(id), 0xff, byte(id >> 8)},
	}
}

// produceAliasRows produces ids seq from..to-1 of each of parts partitions (id = p*1000 +
// seq, so that a fresh topic's offset of id is seq), Confluent-framed with schema id.
// Each record has its aliasKafka key and headers.
func produceAliasRows(t *testing.T, cl *kgo.Client, topic string, parts int, id int, schema avro.Schema, from, to int) {
	t.Helper()
	var hdr sr.ConfluentHeader
	var recs []*kgo.Record
	for seq := from; seq < to; seq++ {
		for p := 0; p < parts; p++ {
			body, err := avro.Marshal(schema, aliasRow(int64(p*1000+seq)))
			if err != nil {
				t.Fatal(err)
			}
			framed, _ := hdr.AppendEncode(nil, id, nil)
			key, headers := aliasKafka(int64(p*1000 + seq))
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: []byte(key), Headers: headers, Value: append(framed, body...)})
		}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// aliasKafka is the key and headers of id's record: a 17 KiB header value, an empty
// header key with an empty value.
func aliasKafka(id int64) (string, []kgo.RecordHeader) {
	return fmt.Sprintf("key-%d-ß", id), []kgo.RecordHeader{
		{Key: "h1", Value: []byte(strings.Repeat(fmt.Sprintf("%07d|", id), 17<<10/8))},
		{Key: "", Value: []byte{}},
	}
}

// TestAliasedValuesSurviveFailedCommits: a partitioned table on the S3 emulator behind a
// proxy that answers every data file upload (PUT of a .parquet) 503 SlowDown while it is
// failing, so that each flush fails transiently and its records are held back. 60 records
// of 3 Kafka partitions arrive while uploads fail (their flushes are retried: the same
// records decoded again after releaseCols dropped the last attempt's values), 60 more
// arrive behind them while they are held, the batch byte bound (256 KiB: a few 20 KiB
// records a batch) cuts the takes, and the daemon gets SIGTERM while records are held;
// then the store comes back, the drain commits what was buffered, and a restarted daemon
// reads the rest. Every record is in the table exactly once with its exact values
// (delta-rs): strings of 16 and 20 KiB, empty strings (not null), map keys, bytes, the
// string partition values in add.partitionValues, and the row fills that read the aliased
// values or the record: the Kafka columns _kafka_key (key_format string) and
// _kafka_headers (a 17 KiB header value, an empty key and value), generated columns
// upper(cat) and substring(big, 1, 7) (in characters). Each partition's txn only moves
// forward, to its last offset. The variants below run without the fills.
func TestAliasedValuesSurviveFailedCommits(t *testing.T) { aliasOutage(t, outage{fills: true}) }

// TestAliasedValuesSurviveRebalanceWhileHeld is TestAliasedValuesSurviveFailedCommits
// with a second member joining the group while the records are held: the revoke's one
// flush of the moved partitions fails too (their records are dropped, the new owner
// re-reads them from the txn), and both members drain once the store is back. The table
// is not partitioned: the decoded values then stay in the flusher's column buffers until
// releaseCols (a partitioned table's rows move to their files' buffers), so a payload
// changed through them would be read back by the retried decode.
func TestAliasedValuesSurviveRebalanceWhileHeld(t *testing.T) {
	aliasOutage(t, outage{rebalance: true, unpartitioned: true})
}

// TestAliasedValuesSurviveKill9WhileHeld is TestAliasedValuesSurviveFailedCommits with
// kill -9 instead of SIGTERM while the records are held (and flushes are failing): nothing
// of them was committed, and the restart writes every record once.
func TestAliasedValuesSurviveKill9WhileHeld(t *testing.T) { aliasOutage(t, outage{kill9: true}) }

// TestAliasedValuesSurviveFailingCommitPuts is TestAliasedValuesSurviveFailedCommits with
// the commits refused instead of the uploads (503 on every PUT of a _delta_log JSON): the
// flush in flight retries its identical commit put while later records wait behind it,
// SIGTERM arrives during those retries, and the store comes back.
func TestAliasedValuesSurviveFailingCommitPuts(t *testing.T) {
	aliasOutage(t, outage{commits: true})
}

// outage is how aliasOutage varies its run: a second member joins during the outage
// (rebalance), the table has Kafka and generated columns (fills), the daemon is killed
// with SIGKILL instead of SIGTERM (kill9), the commit puts fail instead of the data file
// uploads (commits), the table is not partitioned (unpartitioned).
type outage struct{ rebalance, fills, kill9, commits, unpartitioned bool }

// aliasOutage runs the outage of TestAliasedValuesSurviveFailedCommits as how says.
func aliasOutage(t *testing.T, how outage) {
	s := need(t)
	o := needStore(t, "s3")
	const parts, wave = 3, 20 // 2 waves: 120 records
	fp := newFaultProxy(t, o.endpoint)
	var failing atomic.Bool
	var refused atomic.Int64
	fp.setHook(func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		refuse := strings.HasSuffix(r.URL.Path, ".parquet")
		if how.commits {
			refuse = strings.Contains(r.URL.Path, "/_delta_log/") && strings.HasSuffix(r.URL.Path, ".json")
		}
		if failing.Load() && r.Method == http.MethodPut && refuse {
			refused.Add(1)
			s3ErrorReply(w, http.StatusServiceUnavailable, "SlowDown")
			return true
		}
		return false
	})
	t.Setenv("AWS_ENDPOINT_URL_S3", fp.srv.URL) // the daemon's store goes through the proxy

	topic := createTopic(t, s, "alias", parts)
	dlq := createTopic(t, s, "alias.dlq", 1)
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := reg.CreateSchema(context.Background(), topic+"-value", sr.Schema{Schema: aliasSchema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(aliasSchema)
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	uri := o.base + "/t"
	root := t.TempDir()
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	extra := ", partition_by: [cat]"
	if how.unpartitioned {
		extra = ""
	}
	if how.fills {
		extra += `, kafka_columns: [key, headers], key_format: string, generated_columns: {cat_up: "upper(cat)", big_head: "substring(big, 1, 7)"}`
	}
	writePipeline(t, cfgDir, "alias", fmt.Sprintf(`name: alias
kafka: {brokers: [%q], topics: [%s], group: alias-%d, start_offset: earliest, session_timeout: 6s}
schema_registry: {url: %q}
table: {uri: %q, create: true%s}
schema: {policy: evolve, on_incompatible: halt}
dead_letter: {topic: %s}
batch: {max_records: 10, max_bytes: 256KiB, max_age: 200ms}
`, s.brokers, topic, time.Now().UnixNano(), s.registry, uri, extra, dlq))
	d := startDaemonLogged(t, cfgDir, filepath.Join(root, "ingestd.log"))
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"ingestd.log", "ingestd2.log", "ingestd3.log"} {
				if b, err := os.ReadFile(filepath.Join(root, name)); err == nil {
					os.WriteFile(filepath.Join(os.TempDir(), t.Name()+"-"+name), b, 0o644)
					t.Logf("%s kept in %s", name, filepath.Join(os.TempDir(), t.Name()+"-"+name))
				}
			}
		}
	})
	waitFor(t, d, 30*time.Second, "the daemon to be ready", func() bool { r, _ := d.readyz(t); return r.Ready })

	failing.Store(true)
	produceAliasRows(t, cl, topic, parts, ss.ID, schema, 0, wave)
	waitFor(t, d, 30*time.Second, "4 refused uploads", func() bool { return refused.Load() >= 4 })
	produceAliasRows(t, cl, topic, parts, ss.ID, schema, wave, 2*wave)
	n := refused.Load()
	waitFor(t, d, 30*time.Second, "4 more refused uploads", func() bool { return refused.Load() >= n+4 })
	if got := handledAt(t, uri); got != 0 {
		t.Fatalf("%d records handled while every data file upload was refused; want 0", got)
	}
	daemons := []*daemon{d}
	if how.rebalance {
		d2 := startDaemonLogged(t, cfgDir, filepath.Join(root, "ingestd2.log"))
		daemons = append(daemons, d2)
		waitFor(t, d2, 30*time.Second, "the first member's revoke flush to fail", func() bool {
			b, _ := os.ReadFile(filepath.Join(root, "ingestd.log"))
			return strings.Contains(string(b), "flush on revoke incomplete")
		})
		failing.Store(false)
		waitFor(t, d2, 60*time.Second, "both members to commit everything", func() bool { return handledAt(t, uri) == int64(parts*2*wave) })
	}
	if how.kill9 {
		d.kill9(t)
		daemons = nil
		if got := handledAt(t, uri); got != 0 {
			t.Fatalf("%d records handled before the kill -9; want 0", got)
		}
	}
	for _, d := range daemons {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
	}
	// On purpose: the store keeps refusing for a second after the SIGTERM, so the drain
	// starts with records held back and meets the failures before the store comes back
	// (the daemon logs nothing at the drain's start to wait for).
	time.Sleep(time.Second)
	failing.Store(false)
	for i, d := range daemons {
		select {
		case <-d.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("member %d did not exit within 60 s of SIGTERM once the store was back", i+1)
		}
		if code := d.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("member %d: exit code %d after SIGTERM; want 0 (the drain committed what was buffered)", i+1, code)
		}
	}
	t.Logf("%d PUTs refused, %d records committed before the restart", refused.Load(), handledAt(t, uri))
	// What was not buffered at the SIGTERM is read again by the next run.
	d = startDaemonLogged(t, cfgDir, filepath.Join(root, "ingestd3.log"))
	waitFor(t, d, 30*time.Second, "the restarted daemon to be ready", func() bool { r, _ := d.readyz(t); return r.Ready })
	waitFor(t, d, 60*time.Second, "the restarted daemon to commit everything", func() bool { return handledAt(t, uri) == int64(parts*2*wave) })
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d after the restart's SIGTERM", code)
	}

	// Txns: each version moves a partition's txn forward only, to its last offset at the end.
	versions := logVersions(t, uri)
	vs := make([]int64, 0, len(versions))
	for v := range versions {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	last := map[string]int64{}
	for _, v := range vs {
		for app, off := range txnsOf(versions[v]) {
			if prev, ok := last[app]; ok && off <= prev {
				t.Errorf("version %d moves txn %s from %d to %d; want it to move forward", v, app, prev, off)
			}
			last[app] = off
		}
		for _, a := range versions[v] {
			if a.Add == nil {
				continue
			}
			pv := a.Add.PartitionValues["cat"]
			if how.unpartitioned {
				if len(a.Add.PartitionValues) != 0 {
					t.Errorf("version %d adds %s with partitionValues %v; want none", v, a.Add.Path, a.Add.PartitionValues)
				}
			} else if pv == nil || !contains(aliasCats, *pv) {
				t.Errorf("version %d adds %s with partitionValues.cat %v; want one of %q", v, a.Add.Path, pvString(pv), aliasCats)
			}
		}
	}
	for p := 0; p < parts; p++ {
		app := fmt.Sprintf("alias-%s-%d", topic, p)
		if last[app] != 2*wave-1 {
			t.Errorf("txn %s = %d at the end; want %d", app, last[app], 2*wave-1)
		}
	}

	// Rows: every id once, every value exact.
	data := readTableAt(t, s, o, uri)
	seen := map[int64]int{}
	for _, row := range data.Rows {
		id, err := strconv.ParseInt(fmt.Sprint(row["id"]), 10, 64)
		if err != nil {
			t.Fatalf("row id %v: %v", row["id"], err)
		}
		seen[id]++
		want := aliasRow(id)
		for _, col := range []string{"cat", "big", "empty"} {
			if got, ok := row[col].(string); !ok || got != want[col] {
				t.Errorf("id %d: %s is %s; want %s", id, col, abbrev(row[col]), abbrev(want[col]))
			}
		}
		if got, want := fmt.Sprint(row["blob"]), hex.EncodeToString(want["blob"].([]byte)); got != want {
			t.Errorf("id %d: blob is %s; want %s", id, got, want)
		}
		if how.fills {
			key, headers := aliasKafka(id)
			cat, big := want["cat"].(string), want["big"].(string)
			wantFills := map[string]string{"_kafka_key": key, "cat_up": strings.ToUpper(cat), "big_head": string([]rune(big)[:7])}
			for col, w := range wantFills {
				if got, ok := row[col].(string); !ok || got != w {
					t.Errorf("id %d: %s is %s; want %s", id, col, abbrev(row[col]), abbrev(w))
				}
			}
			hs, _ := row["_kafka_headers"].(map[string]any)
			if len(hs) != len(headers) {
				t.Errorf("id %d: _kafka_headers has %d keys; want %d", id, len(hs), len(headers))
			}
			for _, h := range headers {
				if got := fmt.Sprint(hs[h.Key]); got != hex.EncodeToString(h.Value) {
					t.Errorf("id %d: _kafka_headers[%q] is %s; want %s", id, h.Key, abbrev(got), abbrev(hex.EncodeToString(h.Value)))
				}
			}
		}
		tags, _ := row["tags"].(map[string]any)
		wantTags := want["tags"].(map[string]any)
		if len(tags) != len(wantTags) {
			t.Errorf("id %d: tags %v; want %v", id, tags, wantTags)
		}
		for k, v := range wantTags {
			if got, ok := tags[k]; !ok || got != v {
				t.Errorf("id %d: tags[%q] = %v (present %v); want %q", id, k, got, ok, v)
			}
		}
	}
	for p := 0; p < parts; p++ {
		for seq := 0; seq < 2*wave; seq++ {
			if id := int64(p*1000 + seq); seen[id] != 1 {
				t.Errorf("id %d read %d times; want once", id, seen[id])
			}
		}
	}
	if len(data.Rows) != parts*2*wave {
		t.Errorf("delta-rs reads %d rows; want %d", len(data.Rows), parts*2*wave)
	}
}

// abbrev renders v for an error message, long strings by their length and ends.
func abbrev(v any) string {
	s, ok := v.(string)
	if !ok {
		return fmt.Sprintf("%T %v", v, v)
	}
	if len(s) <= 40 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%d bytes %q…%q", len(s), s[:16], s[len(s)-16:])
}

// TestPeakRSSWithinMaxBytes checks README's memory promise for the no-copy decode:
// with batch.max_bytes 64MiB, the daemon's peak RSS (VmHWM) while it ingests a
// backlog of several batch budgets stays within max_bytes + 256 MiB, for a stream of
// 1 KB records and one of 10 KB records (strings of pseudo-random hex, one flush's
// values aliasing its records' fetch buffers). Every record is written once (the txns
// reach the end offsets).
func TestPeakRSSWithinMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size, num int
	}{{"1KB", 1 << 10, 80_000}, {"10KB", 10 << 10, 12_000}} {
		t.Run(tc.name, func(t *testing.T) {
			s := need(t)
			const parts = 4
			topic := createTopic(t, s, "rss"+strings.ToLower(tc.name), parts)
			dlq := createTopic(t, s, "rss.dlq", 1)
			const text = `{"type":"record","name":"Sized","fields":[{"name":"id","type":"long"},{"name":"n","type":"int"},{"name":"payload","type":"string"}]}`
			reg, err := sr.NewClient(sr.URLs(s.registry))
			if err != nil {
				t.Fatal(err)
			}
			ss, err := reg.CreateSchema(context.Background(), topic+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
			if err != nil {
				t.Fatal(err)
			}
			schema := avro.MustParse(text)
			var hdr sr.ConfluentHeader
			cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
			x := uint64(0x9E3779B97F4A7C15)
			raw := make([]byte, tc.size/2)
			const chunk = 5000
			for from := 0; from < tc.num; from += chunk {
				recs := make([]*kgo.Record, 0, chunk)
				for id := from; id < min(from+chunk, tc.num); id++ {
					for i := range raw { // xorshift: incompressible, deterministic
						x ^= x << 13
						x ^= x >> 7
						x ^= x << 17
						raw[i] = byte(x)
					}
					body, err := avro.Marshal(schema, map[string]any{"id": int64(id), "n": int32(id), "payload": hex.EncodeToString(raw)})
					if err != nil {
						t.Fatal(err)
					}
					framed, _ := hdr.AppendEncode(nil, ss.ID, nil)
					recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(id % parts), Value: append(framed, body...)})
				}
				if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			root := t.TempDir()
			table := filepath.Join(root, "t")
			cfgDir := filepath.Join(root, "configs")
			mustMkdir(t, cfgDir)
			writePipeline(t, cfgDir, "rss", pipelineYAML("rss", s, topic, table, "evolve", dlq, "{max_records: 100000, max_bytes: 64MiB, max_age: 2s}"))
			start := time.Now()
			d := startDaemon(t, cfgDir)
			var peakKiB int64
			waitFor(t, d, 90*time.Second, "the backlog to be written", func() bool {
				peakKiB = max(peakKiB, vmHWM(d.cmd.Process.Pid))
				return handled(t, table) == int64(tc.num)
			})
			took := time.Since(start)
			peakKiB = max(peakKiB, vmHWM(d.cmd.Process.Pid))
			if code := d.stop(t); code != 0 {
				t.Errorf("exit code %d after SIGTERM", code)
			}
			mb := float64(tc.num*tc.size) / (1 << 20)
			t.Logf("%d records of %s (%.0f MiB raw), max_bytes 64MiB: %v, peak RSS %.1f MiB", tc.num, tc.name, mb, took.Round(time.Millisecond), float64(peakKiB)/1024)
			if limit := int64(64+256) << 10; peakKiB == 0 || peakKiB > limit {
				t.Errorf("peak RSS %d KiB; want a measurement within max_bytes + 256 MiB = %d KiB", peakKiB, limit)
			}
			txns := txnVersions(t, table)
			if len(txns) != parts {
				t.Errorf("txns %v; want one for each of the %d partitions", txns, parts)
			}
			for app, v := range txns {
				if v != int64(tc.num/parts-1) {
					t.Errorf("txn %s = %d; want %d", app, v, tc.num/parts-1)
				}
			}
		})
	}
}
