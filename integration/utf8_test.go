package integration

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// An Avro string that is not UTF-8 (the byte form copies a string column's bytes as they
// come): one `ingestd run` on a table partitioned by the string region dead-letters the
// records whose s or region is not UTF-8 (decode_error at the field, value untouched)
// and writes the others, multi-byte strings included; delta-rs, which refuses a data
// file holding a non-UTF-8 string ("encountered non UTF-8 data"), reads back exactly
// the good rows.
func TestInvalidUTF8DeadLettered(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "utf8", 1)
	dlq := createTopic(t, s, "utf8.dlq", 1)
	const schema = `{"type":"record","name":"U","fields":[
 {"name":"id","type":"long"},{"name":"region","type":"string"},{"name":"s","type":["null","string"]},{"name":"b","type":"bytes"}]}`
	type in struct{ region, s string }
	ins := []in{{"eu", "plain"}, {"eu", "bad\xff\xfe"}, {"zürich", "ünïcødé ✓ 😀"}, {"e\xc3", "x"}, {"eu", ""}}
	var rows []map[string]any
	want := map[string]string{}
	for i, r := range ins {
		id := int64(i + 1)
		b := []byte{0xff, byte(i), 0xc3}
		rows = append(rows, map[string]any{"id": id, "region": r.region, "s": map[string]any{"string": r.s}, "b": b})
		if i != 1 && i != 3 {
			want[fmt.Sprint(id)] = fmt.Sprintf(`{"b":%q,"region":%q,"s":%q}`, hex.EncodeToString(b), r.region, r.s)
		}
	}
	produceAvro(t, s, topic, schema, rows)

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(dir, "utf8")
	writePipeline(t, cfgDir, "utf8", partPipelineYAML("utf8", s, topic, table, "region", dlq, ""))
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "the 5 records to be handled", func() bool { return handled(t, table) == int64(len(ins)) })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	var dead []string
	for _, r := range readDLQ(t, s, dlq) {
		dead = append(dead, fmt.Sprintf("%s@%s:%s", r.headers["ingestd.error.reason"], r.headers["ingestd.error.field"], r.headers["__connect.errors.offset"]))
	}
	slices.Sort(dead)
	if fmt.Sprint(dead) != "[decode_error@region:3 decode_error@s:1]" {
		t.Errorf("dead letters %v; want [decode_error@region:3 decode_error@s:1]", dead)
	}
	got := readTable(t, s, table)
	if got.Unsupported != "" {
		t.Fatalf("delta-rs cannot read the table: %s", got.Unsupported)
	}
	sameRowMap(t, "delta-rs", rowsByKey(t, got.Rows), want)
}
