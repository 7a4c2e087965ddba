package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// TestReplayPartitionedGenerated: replay into a table partitioned by a generated date
// with Kafka columns. Four v2 records (a field the table lacks) are dead-lettered, the
// column is added with table alter, and the replay lands them: each row's event_date is
// computed from its created_at and sits in its date's directory, and its Kafka columns
// are the original record's (topic, partition, offset, key), not the dead-letter copy's.
func TestReplayPartitionedGenerated(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "brkrp", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	tsType := `{"type":"long","logicalType":"timestamp-micros"}`
	texts := []string{
		`{"type":"record","name":"Ev","fields":[{"name":"id","type":"long"},{"name":"created_at","type":` + tsType + `}]}`,
		`{"type":"record","name":"Ev","fields":[{"name":"id","type":"long"},{"name":"created_at","type":` + tsType + `},{"name":"note","type":["null","string"],"default":null}]}`,
	}
	base := time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for i := 0; i < 8; i++ {
		text := texts[i/4]
		ss, err := reg.CreateSchema(ctx, fmt.Sprintf("%s-v%d", topic, i/4), sr.Schema{Schema: text, Type: sr.TypeAvro})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{"id": int64(i), "created_at": base.Add(time.Duration(i) * time.Hour)}
		if i >= 4 {
			m["note"] = map[string]any{"string": fmt.Sprint("n", i)}
		}
		body, err := avro.Marshal(avro.MustParse(text), m)
		if err != nil {
			t.Fatal(err)
		}
		v := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(v[1:], uint32(ss.ID))
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("k", i)), Value: append(v, body...),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}, Timestamp: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)})
	}
	cl := kafkaClient(t, s)
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tbl := filepath.Join(dir, "orders")
	cfgDir := filepath.Join(dir, "pipelines")
	mustMkdir(t, cfgDir)
	y := strings.Replace(pipelineYAML("brkrp", s, topic, tbl, "dead_letter", topic+".dlq", ""),
		"create: true}", `create: true, partition_by: [event_date], kafka_columns: [key, topic, partition, offset], key_format: string, generated_columns: {event_date: "CAST(created_at AS DATE)"}}`, 1)
	writePipeline(t, cfgDir, "brkrp", y)
	createTopicNamed(t, s, topic+".dlq", 1)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, 45*time.Second, "records handled", func() bool { return handled(t, tbl) == 8 })
	d.stop(t)
	cfg := filepath.Join(cfgDir, "brkrp.yaml")
	if out, err := runCLI(t, "table", "alter", "--config", cfg, "--add-column", "note STRING"); err != nil {
		t.Fatalf("alter: %v %s", err, out)
	}
	sum := replay(t, cfg)
	if sum.Read != 4 || sum.Landed != 4 || sum.Remaining != 0 {
		t.Errorf("replay summary %+v, want 4 read, 4 landed, 0 remaining", sum)
	}
	var want []string
	for i, r := range recs {
		note := "null"
		if i >= 4 {
			note = fmt.Sprintf("%q", fmt.Sprint("n", i))
		}
		ca := base.Add(time.Duration(i) * time.Hour)
		want = append(want, fmt.Sprintf(`{"id":%d,"created_at":%d,"event_date":%q,"note":%s,"_kafka_key":"k%d","_kafka_topic":%q,"_kafka_partition":0,"_kafka_offset":%d}`,
			i, ca.UnixMicro(), ca.Format(time.DateOnly), note, i, topic, r.Offset))
	}
	sameJSONRows(t, "delta-rs", readDeltaRS(t, s.python, tbl).Rows, want)
	adds := logAdds(t, tbl)
	for _, a := range adds {
		pv := deref(a.PartitionValues["event_date"])
		if len(a.PartitionValues) != 1 || (pv != "2026-11-28" && pv != "2026-11-29") || !strings.HasPrefix(a.Path, "event_date="+pv+"/part-") {
			t.Errorf("add %s with partitionValues %v: want event_date 2026-11-28 or -29 and its directory", a.Path, pvMap(a.PartitionValues))
		}
	}
	if len(adds) != 3 { // the first flush: both dates; the replay: 2026-11-29 only
		t.Errorf("%d data files, want 3", len(adds))
	}
}
