package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The flush's typed column path (issue 15, "Typed column path"): fixed-width columns
// are held as one word a row while their values are set and turn levelled at their first
// null, per data file. One `ingestd run` writes a partitioned table whose region a file
// keeps every fixed-width column dense, whose region b file turns n and x levelled at
// nulls after dense rows, with the Kafka columns _kafka_partition and _kafka_offset and a
// generated day = CAST(ts AS DATE) (columns the fills set, dense too); delta-rs reads back
// exactly the produced values.
func TestDenseColumnsReadBack(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "dense", 1)
	dlq := createTopic(t, s, "dense.dlq", 1)
	const schema = `{"type":"record","name":"Dense","fields":[
 {"name":"id","type":"long"},{"name":"n","type":["null","long"]},{"name":"x","type":["null","double"]},
 {"name":"ok","type":"boolean"},{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"region","type":"string"}]}`
	type in struct {
		n      *int64
		x      *float64
		region string
	}
	n := func(v int64) *int64 { return &v }
	x := func(v float64) *float64 { return &v }
	// Region b's first null n comes after two dense rows; its x turns levelled later.
	ins := []in{{n(10), x(0.5), "a"}, {n(-11), x(1.25), "b"}, {n(12), x(-2), "b"}, {n(13), x(3), "a"},
		{nil, x(4), "b"}, {n(15), x(5), "a"}, {n(16), nil, "b"}, {n(1 << 40), x(7e-3), "a"}}
	ts := func(i int) int64 { return 1_700_000_000_000_000 + int64(i)*43_200_000_000 } // half a day apart
	var rows []map[string]any
	want := map[string]string{}
	for i, r := range ins {
		id := int64(100 + i)
		row := map[string]any{"id": id, "n": nil, "x": nil, "ok": i%3 == 0, "ts": ts(i), "region": r.region}
		nv, xv := "null", "null"
		if r.n != nil {
			row["n"] = map[string]any{"long": *r.n}
			nv = fmt.Sprint(*r.n)
		}
		if r.x != nil {
			row["x"] = map[string]any{"double": *r.x}
			xv = fmt.Sprint(*r.x)
		}
		rows = append(rows, row)
		day := time.UnixMicro(ts(i)).UTC().Format("2006-01-02")
		want[fmt.Sprint(id)] = fmt.Sprintf(`{"_kafka_offset":%d,"_kafka_partition":0,"day":%q,"n":%s,"ok":%v,"region":%q,"ts":%d,"x":%s}`,
			i, day, nv, i%3 == 0, r.region, ts(i), xv)
	}
	produceAvro(t, s, topic, schema, rows)

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(dir, "dense")
	y := partPipelineYAML("dense", s, topic, table, "region", dlq, "")
	y = strings.Replace(y, `partition_by: [region]}`,
		`partition_by: [region], kafka_columns: [partition, offset], generated_columns: {day: "CAST(ts AS DATE)"}}`, 1)
	writePipeline(t, cfgDir, "dense", y)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "the 8 records to be committed", func() bool { return handled(t, table) == int64(len(ins)) })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if dirs := partitionDirs(t, table); fmt.Sprint(dirs) != "[region=a region=b]" {
		t.Fatalf("partition directories %v, want [region=a region=b]", dirs)
	}
	got := readTable(t, s, table)
	if got.Unsupported != "" {
		t.Fatalf("delta-rs cannot read the table: %s", got.Unsupported)
	}
	sameRowMap(t, "delta-rs", rowsByKey(t, got.Rows), want)
}
