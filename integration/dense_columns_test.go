package integration

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The flush's typed column path (docs/architecture.md, "Memory"): fixed-width columns
// are held as one word a row, and non-repeated string, bytes and enum columns in the byte
// form (their bytes back to back, an end offset a row), while their values are set, and
// turn levelled at their first null, per data file. One `ingestd run` writes a table
// partitioned by a string column whose region a file keeps every column dense, whose
// region b file turns n, x and the string s levelled at nulls after dense rows, and whose
// region "c/d" (a value Hive-escaped in the directory) holds a non-ASCII string and an
// empty one; with the Kafka columns _kafka_topic, _kafka_partition and _kafka_offset and
// a generated day = CAST(ts AS DATE) (columns the fills set, dense too); delta-rs reads
// back exactly the produced values.
func TestDenseColumnsReadBack(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "dense", 1)
	dlq := createTopic(t, s, "dense.dlq", 1)
	const schema = `{"type":"record","name":"Dense","fields":[
 {"name":"id","type":"long"},{"name":"n","type":["null","long"]},{"name":"x","type":["null","double"]},
 {"name":"ok","type":"boolean"},{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"region","type":"string"},{"name":"s","type":["null","string"]},{"name":"b","type":"bytes"},
 {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}}]}`
	type in struct {
		n      *int64
		x      *float64
		region string
		s      *string
	}
	n := func(v int64) *int64 { return &v }
	x := func(v float64) *float64 { return &v }
	str := func(v string) *string { return &v }
	// Region b's first null n comes after two dense rows, its first null s after three;
	// its x turns levelled later.
	ins := []in{{n(10), x(0.5), "a", str("alpha")}, {n(-11), x(1.25), "b", str("beta")}, {n(12), x(-2), "b", str("gamma")},
		{n(13), x(3), "a", str("delta")}, {nil, x(4), "b", str("epsilon")}, {n(15), x(5), "a", str("zeta")}, {n(16), nil, "b", nil},
		{n(1 << 40), x(7e-3), "a", str("eta")}, {n(18), x(8), "b", str("theta")}, {n(19), x(9), "c/d", str("ünïcødé ✓")},
		{n(20), x(10), "c/d", str("")}}
	ts := func(i int) int64 { return 1_700_000_000_000_000 + int64(i)*43_200_000_000 } // half a day apart
	colors := []string{"RED", "GREEN", "BLUE"}
	var rows []map[string]any
	want := map[string]string{}
	for i, r := range ins {
		id := int64(100 + i)
		bin := []byte(fmt.Sprintf("\x00b%d\xff", i))[:i%5] // 0 to 4 bytes, empty for rows 0, 5, 10
		row := map[string]any{"id": id, "n": nil, "x": nil, "ok": i%3 == 0, "ts": ts(i), "region": r.region, "s": nil, "b": bin, "e": colors[i%3]}
		nv, xv, sv := "null", "null", "null"
		if r.n != nil {
			row["n"] = map[string]any{"long": *r.n}
			nv = fmt.Sprint(*r.n)
		}
		if r.x != nil {
			row["x"] = map[string]any{"double": *r.x}
			xv = fmt.Sprint(*r.x)
		}
		if r.s != nil {
			row["s"] = map[string]any{"string": *r.s}
			q, _ := json.Marshal(*r.s)
			sv = string(q)
		}
		rows = append(rows, row)
		day := time.UnixMicro(ts(i)).UTC().Format("2006-01-02")
		rq, _ := json.Marshal(r.region)
		want[fmt.Sprint(id)] = fmt.Sprintf(`{"_kafka_offset":%d,"_kafka_partition":0,"_kafka_topic":%q,"b":%q,"day":%q,"e":%q,"n":%s,"ok":%v,"region":%s,"s":%s,"ts":%d,"x":%s}`,
			i, topic, hex.EncodeToString(bin), day, colors[i%3], nv, i%3 == 0, rq, sv, ts(i), xv)
	}
	produceAvro(t, s, topic, schema, rows)

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(dir, "dense")
	y := partPipelineYAML("dense", s, topic, table, "region", dlq, "")
	y = strings.Replace(y, `partition_by: [region]}`,
		`partition_by: [region], kafka_columns: [topic, partition, offset], generated_columns: {day: "CAST(ts AS DATE)"}}`, 1)
	writePipeline(t, cfgDir, "dense", y)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "the 11 records to be committed", func() bool { return handled(t, table) == int64(len(ins)) })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if dirs := partitionDirs(t, table); fmt.Sprint(dirs) != "[region=a region=b region=c%2Fd]" {
		t.Fatalf("partition directories %v, want [region=a region=b region=c%%2Fd]", dirs)
	}
	got := readTable(t, s, table)
	if got.Unsupported != "" {
		t.Fatalf("delta-rs cannot read the table: %s", got.Unsupported)
	}
	sameRowMap(t, "delta-rs", rowsByKey(t, got.Rows), want)
}
