package integration

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// Attacks on the typed column path end to end. One `ingestd run` writes a table
// partitioned by a generated yr = year(ts) (an INTEGER column the fill sets on every row:
// dense), with the Kafka columns _kafka_key (key_format avro: a struct of an int and a
// long, NULL for a record without a key), _kafka_partition, _kafka_offset and
// _kafka_timestamp, from records at the edges (int32 extremes widened from nothing,
// timestamp-millis before 1970, -0.0, a float, booleans), in two batches: the first batch
// all set (every fixed-width column dense), the second with a null v (v levelled in its
// file). delta-rs reads back exactly the produced values; Spark reads the same rows and
// its data skipping on add.stats finds each edge value (a wrong min/max in the dense stats
// would prune the file holding it and lose the row from the query).
func TestDenseBreakAvroKeyGeneratedPartition(t *testing.T) {
	s := need(t)
	python, jars := needSpark(t)
	spark := startSpark(t, python, jars) // boots while the pipeline runs
	topic := createTopic(t, s, "dbrk", 1)
	dlq := createTopic(t, s, "dbrk.dlq", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	const valText = `{"type":"record","name":"Brk","fields":[{"name":"id","type":"long"},
 {"name":"v","type":["null","int"]},{"name":"f","type":"float"},{"name":"ok","type":"boolean"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	const keyText = `{"type":"record","name":"BrkKey","fields":[{"name":"n","type":"int"},{"name":"k","type":"long"}]}`
	vs, err := reg.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: valText, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := reg.CreateSchema(ctx, topic+"-key", sr.Schema{Schema: keyText, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	frame := func(id int, sch, v string, val map[string]any) []byte {
		body, err := avro.Marshal(avro.MustParse(sch), val)
		if err != nil {
			t.Fatalf("encode %s %v: %v", v, val, err)
		}
		out := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(out[1:], uint32(id))
		return append(out, body...)
	}
	type in struct {
		v   *int32
		f   float32
		ts  int64 // ms
		key *[2]int64
	}
	i32 := func(v int32) *int32 { return &v }
	key := func(n, k int64) *[2]int64 { return &[2]int64{n, k} }
	negZero := float32(math.Copysign(0, -1))
	batch1 := []in{
		{v: i32(math.MinInt32), f: 1.5, ts: -1, key: key(math.MinInt32, math.MinInt64)},
		{v: i32(-1), f: negZero, ts: 0, key: key(-1, -1)},
		{v: i32(math.MaxInt32), f: -3.25, ts: 1_700_000_000_123, key: nil},
		{v: i32(7), f: 0.1, ts: -31_536_000_001, key: key(math.MaxInt32, math.MaxInt64)}, // 1968-12-31T23:59:59.999
	}
	batch2 := []in{
		{v: nil, f: 2, ts: -2, key: key(0, 0)},
		{v: i32(-100), f: -0.5, ts: 1_700_000_000_456, key: key(5, -5)},
		{v: i32(100), f: 1e-30, ts: 1, key: nil},
	}
	base := time.UnixMilli(1_790_000_000_000)
	var recs1, recs2 []*kgo.Record
	mk := func(off int, r in) *kgo.Record {
		val := map[string]any{"id": int64(off), "v": nil, "f": r.f, "ok": off%2 == 0, "ts": r.ts}
		if r.v != nil {
			val["v"] = map[string]any{"int": *r.v}
		}
		rec := &kgo.Record{Topic: topic, Partition: 0, Timestamp: base.Add(time.Duration(off) * time.Millisecond), Value: frame(vs.ID, valText, "value", val)}
		if r.key != nil {
			rec.Key = frame(ks.ID, keyText, "key", map[string]any{"n": int32(r.key[0]), "k": r.key[1]})
		}
		return rec
	}
	all := append(append([]in{}, batch1...), batch2...)
	for i, r := range batch1 {
		recs1 = append(recs1, mk(i, r))
	}
	for i, r := range batch2 {
		recs2 = append(recs2, mk(len(batch1)+i, r))
	}
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs1...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(dir, "dbrk")
	y := partPipelineYAML("dbrk", s, topic, table, "yr", dlq, "{max_records: 4, max_bytes: 64MiB, max_age: 300ms}")
	y = strings.Replace(y, `partition_by: [yr]}`,
		`partition_by: [yr], kafka_columns: [key, partition, offset, timestamp], key_format: avro, generated_columns: {yr: "year(ts)"}}`, 1)
	writePipeline(t, cfgDir, "dbrk", y)
	d := startDaemon(t, cfgDir)
	// Spark's JVM boots beside the daemon on the same two cores (startSpark above): under
	// load the first commit has waited past a minute (twice in about twenty runs).
	waitFor(t, d, 3*time.Minute, "the first 4 records to be committed", func() bool { return handled(t, table) == int64(len(batch1)) })
	if err := cl.ProduceSync(ctx, recs2...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, d, time.Minute, "all 7 records to be committed", func() bool { return handled(t, table) == int64(len(all)) })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	want := map[string]string{}
	for off, r := range all {
		ts := r.ts * 1000
		yr := time.UnixMicro(ts).UTC().Year()
		var k any
		if r.key != nil {
			// readTable decodes JSON numbers as float64: a long beyond 2^53 reads back
			// rounded, as here; the Spark queries below check the exact extremes.
			k = map[string]any{"n": r.key[0], "k": float64(r.key[1])}
		}
		var v any
		if r.v != nil {
			v = *r.v
		}
		row := map[string]any{"_kafka_key": k, "_kafka_offset": off, "_kafka_partition": 0,
			"_kafka_timestamp": base.Add(time.Duration(off) * time.Millisecond).UnixMicro(),
			"f":                float64(r.f), "ok": off%2 == 0, "ts": ts, "v": v, "yr": yr}
		b, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprint(off)] = string(b)
	}
	got := readTable(t, s, table)
	if got.Unsupported != "" {
		t.Fatalf("delta-rs cannot read the table: %s", got.Unsupported)
	}
	gotRows := rowsByKey(t, got.Rows)
	sameRowMap(t, "delta-rs", gotRows, want)

	// Spark: the rows, and each edge value found through data skipping on add.stats.
	var sp []map[string]any
	spark.call(t, map[string]any{"op": "sql", "query": "SELECT id, v, yr, _kafka_key.n AS kn, _kafka_key.k AS kk, _kafka_offset AS o FROM delta.`" + table + "` ORDER BY id"}, &sp)
	var spRows []string
	for _, r := range sp {
		spRows = append(spRows, fmt.Sprint(r["id"], " ", r["v"], " ", r["yr"], " ", r["kn"], " ", r["kk"], " ", r["o"]))
	}
	var wantSp []string
	for off, r := range all {
		v, kn, kk := "<nil>", "<nil>", "<nil>"
		if r.v != nil {
			v = fmt.Sprint(*r.v)
		}
		if r.key != nil {
			kn, kk = fmt.Sprint(r.key[0]), fmt.Sprint(r.key[1])
		}
		wantSp = append(wantSp, fmt.Sprint(off, " ", v, " ", time.UnixMilli(r.ts).UTC().Year(), " ", kn, " ", kk, " ", off))
	}
	if strings.Join(spRows, "\n") != strings.Join(wantSp, "\n") {
		t.Errorf("Spark rows:\n%s\nwant:\n%s", strings.Join(spRows, "\n"), strings.Join(wantSp, "\n"))
	}
	for _, q := range []struct{ where, want string }{
		{"v = -2147483648", "0"}, {"v = 2147483647", "2"}, {"v = -1", "1"}, {"v = -100", "5"}, {"v IS NULL", "4"},
		{"_kafka_key.n = -2147483648", "0"}, {"_kafka_key.k = 9223372036854775807", "3"}, {"_kafka_key.k = -9223372036854775808", "0"},
		{"_kafka_key IS NULL", "2,6"}, {"f = CAST(1e-30 AS FLOAT)", "6"}, {"f = -3.25", "2"}, {"f = 0", "1"},
		{"ts = TIMESTAMP_MILLIS(-1)", "0"}, {"ts = TIMESTAMP_MILLIS(-31536000001)", "3"}, {"ts < TIMESTAMP_MILLIS(0)", "0,3,4"},
		{"_kafka_offset = 6", "6"}, {"_kafka_offset >= 4", "4,5,6"}, {"yr = 1968", "3"}, {"yr = 1969", "0,4"}, {"ok = false", "1,3,5"},
	} {
		var r []map[string]any
		spark.call(t, map[string]any{"op": "sql", "query": "SELECT id FROM delta.`" + table + "` WHERE " + q.where + " ORDER BY id"}, &r)
		var ids []string
		for _, x := range r {
			ids = append(ids, fmt.Sprint(x["id"]))
		}
		sort.Strings(ids)
		if strings.Join(ids, ",") != q.want {
			t.Errorf("Spark WHERE %s: ids [%s], want [%s]", q.where, strings.Join(ids, ","), q.want)
		}
	}
}
