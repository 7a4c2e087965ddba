package integration

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/sr"
)

// tsCase is one record of TestKafkaTimestampExact: the CreateTime its producer writes into
// the record's millisecond field, and what _kafka_timestamp (µs) and the generated
// kafka_date partition must hold ("" NULL).
type tsCase struct {
	ms   int64
	us   string
	date string
	java bool // the Java producer writes it (it refuses negative timestamps; librdkafka cannot write 0)
}

var tsCases = []tsCase{
	{253402300799999, "253402300799999000", "9999-12-31", true}, // 9999-12-31T23:59:59.999Z
	{-1, "", "", false},                                    // NO_TIMESTAMP
	{1735689600000000, "", "", true},                       // 2025-01-01 in µs written into the ms field: year 56970
	{0, "0", "1970-01-01", true},                           // the epoch
	{-14182940000, "-14182940000000", "1969-07-20", false}, // 1969-07-20T20:17:40Z
	{1700000000123, "1700000000123000", "2023-11-14", true},
}

// The broker's millisecond timestamps land exactly in _kafka_timestamp (× 1000 µs) for every
// value Spark and Delta hold, whatever franz-go's time.Time says (it wraps outside
// 1677–2262: 9999-12-31 read as 1816-03-30); Kafka's -1 is NULL, and so is a value past
// 9999 (microseconds written into the ms field), counted in
// ingestd_kafka_timestamp_out_of_range_total; both have a NULL kafka_date partition
// (never a 1969-12-31 directory). The records are written by producers that set the
// millisecond field directly — the Kafka Java producer, and librdkafka for the negative
// values the Java producer refuses — to a topic whose message.timestamp.after.max.ms
// admits far-future values (a Kafka 4 broker refuses timestamps more than an hour ahead
// by default). The broker's values are read back with librdkafka; the table with delta-rs
// (QueryBuilder) and Spark.
func TestKafkaTimestampExact(t *testing.T) {
	t.Parallel()
	s := need(t)
	python, jars := needSpark(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("kts-%d", time.Now().UnixNano())
	adm := kadm.NewClient(kafkaClient(t, s))
	maxAfter := "9223372036854775807"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"message.timestamp.after.max.ms": &maxAfter}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	text := `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"sent_ms","type":"long"}]}`
	ss, err := reg.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	value := func(id int, ms int64) string {
		body, err := avro.Marshal(avro.MustParse(text), map[string]any{"id": int64(id), "sent_ms": ms})
		if err != nil {
			t.Fatal(err)
		}
		v := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(v[1:], uint32(ss.ID))
		return hex.EncodeToString(append(v, body...))
	}
	// In order, each through its producer: consecutive runs per producer keep offsets = ids.
	produceCases := func(cases []tsCase, firstID int) {
		for i := 0; i < len(cases); {
			j := i
			for j < len(cases) && cases[j].java == cases[i].java {
				j++
			}
			if cases[i].java {
				var in strings.Builder
				for k := i; k < j; k++ {
					fmt.Fprintf(&in, "%d %s\n", cases[k].ms, value(firstID+k, cases[k].ms))
				}
				cmd := exec.CommandContext(ctx, "java", "-cp", javaKafkaClasspath(t), filepath.Join(repoRoot, "integration", "testdata", "ProduceTimestamps.java"), s.brokers, topic)
				cmd.Stdin = strings.NewReader(in.String())
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("Java producer: %v\n%s", err, out)
				}
			} else {
				var spec []map[string]any
				for k := i; k < j; k++ {
					spec = append(spec, map[string]any{"value_hex": value(firstID+k, cases[k].ms), "timestamp_ms": cases[k].ms})
				}
				f := filepath.Join(t.TempDir(), "spec.json")
				b, _ := json.Marshal(spec)
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.CommandContext(ctx, s.python, filepath.Join(repoRoot, "integration", "testdata", "produce_raw.py"),
					"--brokers", s.brokers, "--topic", topic, "--spec", f).CombinedOutput(); err != nil {
					t.Fatalf("librdkafka producer: %v\n%s", err, out)
				}
			}
			i = j
		}
	}
	produceCases(tsCases, 0)
	out, err := exec.CommandContext(ctx, s.python, filepath.Join(repoRoot, "integration", "testdata", "read_timestamps.py"),
		"--brokers", s.brokers, "--topic", topic, "--count", fmt.Sprint(len(tsCases))).Output()
	if err != nil {
		t.Fatalf("read_timestamps.py: %v", err)
	}
	var broker []struct {
		Offset int64  `json:"offset"`
		MS     int64  `json:"ms"`
		Type   string `json:"type"`
	}
	if err := json.Unmarshal(out, &broker); err != nil {
		t.Fatal(err)
	}
	for i, c := range tsCases {
		if broker[i].Offset != int64(i) || broker[i].MS != c.ms || broker[i].Type != "create_time" {
			t.Fatalf("broker holds %+v at %d, want CreateTime %d", broker[i], i, c.ms)
		}
	}

	dir := t.TempDir()
	tbl := filepath.Join(dir, "events")
	cfgDir := filepath.Join(dir, "pipelines")
	mustMkdir(t, cfgDir)
	createTopicNamed(t, s, topic+".dlq", 1)
	y := strings.Replace(pipelineYAML("kts", s, topic, tbl, "dead_letter", topic+".dlq", ""),
		"create: true}", `create: true, partition_by: [kafka_date], kafka_columns: [offset, timestamp], generated_columns: {kafka_date: "CAST(_kafka_timestamp AS DATE)"}}`, 1)
	writePipeline(t, cfgDir, "kts", y)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 60*time.Second, "6 records handled", func() bool { return handled(t, tbl) == int64(len(tsCases)) })
	// The daemon counts and then logs a commit just after the commit is visible in the
	// table: once the warning is in the log, the counter holds the row.
	waitFor(t, d, 10*time.Second, "the warning about the out-of-range timestamp", func() bool {
		return logHasLine(t, d, "outside 0001-01-01..9999-12-31", `"rows":1`)
	})
	if m := d.metrics(t); !containsLine(m, `ingestd_kafka_timestamp_out_of_range_total{pipeline="kts"} 1`) {
		t.Errorf("metrics lack ingestd_kafka_timestamp_out_of_range_total 1 for the µs-in-ms record:\n%s", grepLines(m, "out_of_range"))
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d", code)
	}

	nullable := func(s string) string {
		if s == "" {
			return "null"
		}
		return s
	}
	quoted := func(s string) string {
		if s == "" {
			return "null"
		}
		return fmt.Sprintf("%q", s)
	}
	var want []string
	for i, c := range tsCases {
		want = append(want, fmt.Sprintf(`{"_kafka_offset":%d,"_kafka_timestamp":%s,"id":%d,"kafka_date":%s,"sent_ms":%d}`, i, nullable(c.us), i, quoted(c.date), c.ms))
	}
	got := readTable(t, s, tbl)
	sameJSONRows(t, "delta-rs", got.Rows, want)

	spark := startSpark(t, python, jars)
	var rows []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT id, sent_ms, CAST(unix_micros(_kafka_timestamp) AS STRING) AS us, CAST(kafka_date AS STRING) AS d, " +
		"CAST(_kafka_timestamp AS STRING) AS ts FROM delta.`" + tbl + "` ORDER BY id"}, &rows)
	var side []string
	for i, r := range rows {
		c := tsCases[i]
		us, _ := r["us"].(string)
		day, _ := r["d"].(string)
		side = append(side, fmt.Sprintf("broker %d ms → Spark %v µs (%v), kafka_date %v", broker[i].MS, r["us"], r["ts"], r["d"]))
		if fmt.Sprint(r["id"]) != fmt.Sprint(i) || us != c.us || day != c.date {
			t.Errorf("Spark row %v, want id %d, µs %q, kafka_date %q", r, i, c.us, c.date)
		}
	}
	if len(rows) != len(tsCases) {
		t.Errorf("Spark read %d rows, want %d", len(rows), len(tsCases))
	}
	t.Logf("broker and table side by side:\n%s", strings.Join(side, "\n"))

	snap, err := openTable(t, tbl).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, a := range snap.Files.All() {
		dirs = append(dirs, strings.SplitN(a.Path, "/", 2)[0])
	}
	sort.Strings(dirs)
	wantDirs := []string{"kafka_date=1969-07-20", "kafka_date=1970-01-01", "kafka_date=2023-11-14", "kafka_date=9999-12-31", "kafka_date=__HIVE_DEFAULT_PARTITION__"}
	if fmt.Sprint(dirs) != fmt.Sprint(wantDirs) {
		t.Errorf("partition directories %v, want %v (no 1969-12-31 for -1)", dirs, wantDirs)
	}

	// Dead letters and replay keep the source timestamp exactly: two records break a CHECK
	// constraint, one at 9999-12-31 (franz-go's producer, writing through int64 ns, would
	// turn it into 1816) and one at 2100-01-01 (the dead-letter topic has the broker's
	// default message.timestamp.after.max.ms, one hour: a dead letter keeping it would be
	// refused); the constraint is dropped and a replay lands both with their timestamps.
	if out, err := runCLI(t, "table", "alter", tbl, "--add-constraint", "early CHECK (id < 6)"); err != nil {
		t.Fatalf("add constraint: %v\n%s", err, out)
	}
	late := []tsCase{{253402300799999, "253402300799999000", "9999-12-31", true}, {4102444800000, "4102444800000000", "2100-01-01", true}}
	produceCases(late, len(tsCases))
	before := time.Now()
	d = startDaemon(t, cfgDir)
	waitFor(t, d, 60*time.Second, "8 records handled", func() bool { return handled(t, tbl) == int64(len(tsCases)+len(late)) })
	if code := d.stop(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	dls := readDLQ(t, s, topic+".dlq")
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dls))
	}
	for i, r := range dls {
		if got, want := r.headers["ingestd.error.source_timestamp"], fmt.Sprint(late[i].ms); got != want || r.headers["ingestd.error.reason"] != "check_violation" {
			t.Errorf("dead letter %d: source timestamp %q reason %q, want %s check_violation", i, got, r.headers["ingestd.error.reason"], want)
		}
		if r.timestamp.Before(before.Add(-time.Second)) || r.timestamp.After(time.Now()) {
			t.Errorf("dead letter %d has record timestamp %v, want the time of dead-lettering (after %v)", i, r.timestamp, before)
		}
	}
	if out, err := runCLI(t, "table", "alter", tbl, "--drop-constraint", "early"); err != nil {
		t.Fatalf("drop constraint: %v\n%s", err, out)
	}
	if rs := replay(t, filepath.Join(cfgDir, "kts.yaml")); rs.Landed != 2 {
		t.Fatalf("replay landed %d, want 2: %+v", rs.Landed, rs)
	}
	for i, c := range late {
		want = append(want, fmt.Sprintf(`{"_kafka_offset":%d,"_kafka_timestamp":%s,"id":%d,"kafka_date":%s,"sent_ms":%d}`, len(tsCases)+i, c.us, len(tsCases)+i, quoted(c.date), c.ms))
	}
	sameJSONRows(t, "delta-rs after replay", readTable(t, s, tbl).Rows, want)
	rows = nil
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT id, CAST(unix_micros(_kafka_timestamp) AS STRING) AS us, CAST(kafka_date AS STRING) AS d FROM delta.`" + tbl + "` WHERE id >= 6 ORDER BY id"}, &rows)
	if got, want := fmt.Sprint(rows), "[map[d:9999-12-31 id:6 us:253402300799999000] map[d:2100-01-01 id:7 us:4102444800000000]]"; got != want {
		t.Errorf("Spark reads the replayed rows as %s, want %s", got, want)
	}
}

// javaKafkaClasspath is the Kafka Java client's classpath from the stack's jars
// (kafka-clients and slf4j-api), for testdata/ProduceTimestamps.java.
func javaKafkaClasspath(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repoRoot, ".stack", "kafka-jars")
	var cp []string
	for _, pat := range []string{"kafka-clients-*.jar", "slf4j-api-*.jar"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		if len(m) != 1 {
			t.Fatalf("no single %s in %s (scripts/stack.sh resolves the Kafka jars)", pat, dir)
		}
		cp = append(cp, m[0])
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("java: %v", err)
	}
	return strings.Join(cp, string(os.PathListSeparator))
}
