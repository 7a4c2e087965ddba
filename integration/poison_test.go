package integration

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPoisonPills on the real broker: values that are not Confluent-framed Avro killed
// consumers or looped them forever on one record (delta-io/kafka-delta-ingest#199,
// spring-projects/spring-kafka#1287). Here such bytes (or a frame whose schema id is
// unknown) go to the dead-letter topic with a precise reason and untouched bytes;
// tombstones are skipped; the good records around them land once (the decoder's side:
// TestCaseC21PoisonPills).
func TestPoisonPills(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "poison", 1)
	dlq := createTopic(t, s, "poison.dlq", 1)
	v1 := rec("Order", `{"name":"order_id","type":"long"}`, `{"name":"status","type":"string"}`)
	produceSpec(t, s, topic, map[string]string{"v1": v1}, [][2]string{{"v1", `{"order_id":1,"status":"NEW"}`}})
	good := readTopic(t, s, topic, 1)[0].value
	id := binary.BigEndian.Uint32(good[1:5])
	frame := func(id uint32, body string) string {
		b := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], id)
		return hex.EncodeToString(b) + body
	}
	body := hex.EncodeToString(good[5:])
	poison := []struct {
		hex    *string
		reason string
	}{
		{ptr(""), "too_short"},                 // empty value
		{nil, ""},                              // tombstone: skipped
		{ptr("00"), "too_short"},               // 1 byte
		{ptr("00000000"), "too_short"},         // 4 bytes
		{ptr("7b226964223a317d"), "bad_magic"}, // JSON
		{ptr(frame(999999, body)), "schema_not_found"},
		{ptr(frame(id, body[:2])), "truncated"}, // order_id, then the body ends
		{ptr(frame(id, body+"00ff")), "trailing_bytes"},
		{ptr(frame(id, "0201")), "decode_error"}, // order_id, then a negative string length
	}
	var spec []map[string]any
	for i, p := range poison {
		spec = append(spec, map[string]any{"value_hex": p.hex, "key": fmt.Sprintf("p%d", i)})
	}
	b, _ := json.Marshal(spec)
	specFile := filepath.Join(t.TempDir(), "raw.json")
	if err := os.WriteFile(specFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "produce_raw.py"), "--brokers", s.brokers, "--topic", topic, "--spec", specFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("produce_raw.py: %v\n%s", err, out)
	}
	produceSpec(t, s, topic, map[string]string{"v1": v1}, [][2]string{{"v1", `{"order_id":2,"status":"PAID"}`}})
	src := readTopic(t, s, topic, len(poison)+2)

	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	tables := map[string]string{}
	for _, policy := range []string{"evolve", "dead_letter"} {
		tables[policy] = filepath.Join(dir, policy)
		writePipeline(t, cfgDir, policy, pipelineYAML("poison-"+strings.ReplaceAll(policy, "_", "-"), s, topic, tables[policy], policy, dlq, "{max_records: 100, max_bytes: 1MiB, max_age: 200ms}"))
	}
	d := startDaemon(t, cfgDir)
	n := int64(len(poison) + 2)
	waitFor(t, d, time.Minute, "both pipelines to handle every record", func() bool {
		return handled(t, tables["evolve"]) == n && handled(t, tables["dead_letter"]) == n
	})
	m := d.metrics(t)
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, policy := range []string{"evolve", "dead_letter"} {
		rows := readTable(t, s, tables[policy]).Rows
		var ids []string
		for _, r := range rows {
			ids = append(ids, fmt.Sprint(r["order_id"]))
		}
		slices.Sort(ids)
		if strings.Join(ids, ",") != "1,2" {
			t.Errorf("%s table holds orders %v, want exactly 1 and 2", policy, ids)
		}
		if !containsLine(m, fmt.Sprintf(`ingestd_records_skipped_total{pipeline="poison-%s",reason="tombstone"} 1`, strings.ReplaceAll(policy, "_", "-"))) {
			t.Errorf("%s: tombstone not counted once:\n%s", policy, grepLines(m, "skipped"))
		}
	}
	// Each pipeline dead-letters each poison record once, with its reason and bytes.
	got := map[string][]string{}
	for _, r := range readDLQ(t, s, dlq) {
		var off int64
		fmt.Sscan(r.headers["__connect.errors.offset"], &off)
		orig := src[off]
		if string(r.value) != string(orig.value) || string(r.key) != orig.key {
			t.Errorf("DLQ record for offset %d: bytes changed", off)
		}
		got[r.headers["ingestd.error.pipeline"]] = append(got[r.headers["ingestd.error.pipeline"]], fmt.Sprintf("%d:%s", off, r.headers["ingestd.error.reason"]))
	}
	var want []string
	for i, p := range poison {
		if p.reason != "" {
			want = append(want, fmt.Sprintf("%d:%s", i+1, p.reason))
		}
	}
	for _, pipeline := range []string{"poison-evolve", "poison-dead-letter"} {
		if fmt.Sprint(got[pipeline]) != fmt.Sprint(want) {
			t.Errorf("%s dead letters\n got %v\nwant %v", pipeline, got[pipeline], want)
		}
	}
}

func ptr(s string) *string { return &s }
