package integration

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ingestd/ingestd/ingest/dlq"
)

// peakRSS runs the ingestd binary with args and returns its stdout and its peak resident
// set size (the kernel's ru_maxrss of the finished child, in bytes).
func peakRSS(t *testing.T, args ...string) (string, int64) {
	t.Helper()
	cmd := exec.Command(ingestdBin(t), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ingestd %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage for the child")
	}
	return string(out), ru.Maxrss << 10
}

// TestDLQReadersStreamWithinMaxBytes: `ingestd dlq inspect` and `ingestd replay` stream
// the dead-letter topic instead of holding it. A DLQ of 400 MiB (200,000 dead letters of
// 2 KiB, two partitions) is read at batch.max_bytes 16MiB: each command's peak RSS stays
// within the documented bound (max_bytes + 256 MiB, as for ingestd run), below the
// topic's size (holding it took 1,015 MiB for inspect, 1,262 MiB for replay), and the
// replay still lands every record exactly once (its txns reach the end offsets; a second
// replay lands nothing).
func TestDLQReadersStreamWithinMaxBytes(t *testing.T) {
	s := need(t) // not parallel: it measures the peak RSS of the processes it runs
	const (
		num   = 200_000
		size  = 2 << 10
		parts = 2
	)
	src := createTopic(t, s, "dlqmem", 1)
	dlqTopic := createTopic(t, s, "dlqmem.dlq", parts)
	const text = `{"type":"record","name":"Sized","fields":[{"name":"id","type":"long"},{"name":"payload","type":"string"}]}`
	reg, err := sr.NewClient(sr.URLs(s.registry))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := reg.CreateSchema(context.Background(), src+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(text)
	var hdr sr.ConfluentHeader
	cl := kafkaClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	x := uint64(0x9E3779B97F4A7C15)
	raw := make([]byte, size/2)
	now := time.Now()
	const chunk = 5000
	for from := 0; from < num; from += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for id := from; id < min(from+chunk, num); id++ {
			for i := range raw { // xorshift: incompressible, deterministic
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				raw[i] = byte(x)
			}
			body, err := avro.Marshal(schema, map[string]any{"id": int64(id), "payload": hex.EncodeToString(raw)})
			if err != nil {
				t.Fatal(err)
			}
			framed, _ := hdr.AppendEncode(nil, ss.ID, nil)
			orig := &kgo.Record{Topic: src, Partition: 0, Offset: int64(id), Key: fmt.Appendf(nil, "k%d", id), Value: append(framed, body...), Timestamp: now}
			// A dead letter of the table-less pipeline: no acknowledging commit to wait for.
			d := dlq.DeadLetter{Pipeline: "dlqmem", Rec: orig, Reason: "schema_not_found", Message: "test", SchemaID: ss.ID, TableVersion: -1}
			r := d.Record(dlqTopic, "t", now)
			r.Partition = int32(id % parts)
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dlqMiB := float64(num*size) / (1 << 20)

	root := t.TempDir()
	table := filepath.Join(root, "t")
	cfgDir := filepath.Join(root, "configs")
	mustMkdir(t, cfgDir)
	writePipeline(t, cfgDir, "dlqmem", pipelineYAML("dlqmem", s, src, table, "evolve", dlqTopic, "{max_records: 100000, max_bytes: 16MiB, max_age: 2s}"))
	cfg := filepath.Join(cfgDir, "dlqmem.yaml")
	const bound = (16 + 256) << 20

	start := time.Now()
	out, peak := peakRSS(t, "dlq", "inspect", "--config", cfg, "--json", "--samples", "2")
	t.Logf("dlq inspect: %d dead letters, %.0f MiB, batch.max_bytes 16MiB: %v, peak RSS %.1f MiB", num, dlqMiB, time.Since(start).Round(time.Millisecond), float64(peak)/(1<<20))
	var rep dlq.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Total != num || rep.ByReason["schema_not_found"] != num || len(rep.Samples) != 2 ||
		rep.Samples[0].Key != "k0" || rep.Samples[1].Key != "k2" {
		t.Errorf("dlq inspect: total %d, by reason %v, %d samples (%+v); want %d schema_not_found, samples k0, k2",
			rep.Total, rep.ByReason, len(rep.Samples), rep.Samples, num)
	}
	if peak > bound {
		t.Errorf("dlq inspect peak RSS %.1f MiB; want within max_bytes + 256 MiB = %d MiB", float64(peak)/(1<<20), bound>>20)
	}

	start = time.Now()
	out, peak = peakRSS(t, "replay", "--config", cfg, "--json")
	t.Logf("replay: %d dead letters, %.0f MiB, batch.max_bytes 16MiB: %v, peak RSS %.1f MiB", num, dlqMiB, time.Since(start).Round(time.Millisecond), float64(peak)/(1<<20))
	var sum replaySummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Read != num || sum.Landed != num || sum.Duplicates != 0 {
		t.Errorf("replay %s; want %d read and landed", out, num)
	}
	// The documented bound of replay (docs/dead-letters-and-replay.md, Memory): inspect's,
	// plus about 200 bytes of identity per dead letter, which replay keeps to dedupe.
	replayBound := int64(bound) + int64(num)*200
	if peak > replayBound {
		t.Errorf("replay peak RSS %.1f MiB; want within max_bytes + 256 MiB + 200 bytes per dead letter = %d MiB", float64(peak)/(1<<20), replayBound>>20)
	}
	txns := txnVersions(t, table)
	for p := range parts {
		app := fmt.Sprintf("dlqmem-replay-%s-%d", dlqTopic, p)
		if txns[app] != num/parts-1 {
			t.Errorf("txn %s = %d; want %d (txns %v)", app, txns[app], num/parts-1, txns)
		}
	}
	if again := replay(t, cfg); again.Landed != 0 || again.AlreadyReplayed != num {
		t.Errorf("second replay %+v; want nothing landed, %d already replayed", again, num)
	}
}
