package dlq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingestd/ingestd/ingest/decode"
)

type noSchemas struct{}

func (noSchemas) Schema(context.Context, int) (*decode.WriterSchema, error) {
	return nil, errors.New("no registry in this test")
}

// TestInspectSamplesPerReason: dlq inspect streams the topic, counts every record, and
// shows the first samples of each reason by partition and offset (not only the first
// records of the topic), with their keys; Reasons limits the samples, not the counts.
func TestInspectSamplesPerReason(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "d"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	now := time.Now()
	var recs []*kgo.Record
	// 40 bad_magic dead letters first, then 3 schema_mismatch ones, one with a binary key.
	for i := range 43 {
		reason, key := "bad_magic", fmt.Appendf(nil, "order-%d", i)
		if i >= 40 {
			reason = "schema_mismatch"
		}
		if i == 42 {
			key = []byte{0, 0xff}
		}
		src := &kgo.Record{Topic: "src", Partition: 0, Offset: int64(i), Key: key, Value: []byte("x")}
		r := DeadLetter{Pipeline: "p", Rec: src, Reason: reason, SchemaID: -1, TableVersion: -1}.Record("d", "t", now)
		r.Partition = int32(i % 2)
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		reasons []string
		want    string
	}{
		{nil, "[bad_magic d[0]@0 order-0 bad_magic d[0]@1 order-2 schema_mismatch d[0]@20 order-40 schema_mismatch d[0]@21 0x00ff]"},
		{[]string{"schema_mismatch"}, "[schema_mismatch d[0]@20 order-40 schema_mismatch d[0]@21 0x00ff]"},
	} {
		rd, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Inspect(context.Background(), rd, InspectOptions{Topic: "d", Pipeline: "p", Samples: 2, Reasons: c.reasons, Schemas: noSchemas{}})
		rd.Close()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range rep.Samples {
			got = append(got, fmt.Sprintf("%s d[%d]@%d %s", s.Reason, s.Partition, s.Offset, s.Key))
		}
		if fmt.Sprint(got) != c.want || rep.Total != 43 || rep.ByReason["bad_magic"] != 40 || rep.ByReason["schema_mismatch"] != 3 {
			t.Errorf("reasons %v: samples %v, total %d, by reason %v; want %s, 43 = 40 bad_magic + 3 schema_mismatch", c.reasons, got, rep.Total, rep.ByReason, c.want)
		}
	}
}
