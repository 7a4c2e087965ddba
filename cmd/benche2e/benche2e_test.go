package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// The hand-written encoder must produce what an Avro library reads back as the intended
// values, at exactly the asked size, for the first and a far id.
func TestEncoderRoundTrip(t *testing.T) {
	sch := avro.MustParse(recordSchema)
	for _, size := range []int{200, 1024} {
		enc, err := newEncoder(7, size)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int64{0, 1, 12_345_678, 99_999_999_999} {
			ts := int64(1_796_131_462_828_123)
			b := enc.appendRecord(nil, i, ts)
			if len(b) != size {
				t.Fatalf("size %d id %d: record is %d bytes", size, i, len(b))
			}
			if b[0] != 0 || binary.BigEndian.Uint32(b[1:5]) != 7 {
				t.Fatalf("frame header % x, want 00 00000007", b[:5])
			}
			var m map[string]any
			if err := avro.Unmarshal(sch, b[frameHeaderLen:], &m); err != nil {
				t.Fatalf("size %d id %d: %v", size, i, err)
			}
			if m["id"] != idBase+i || m["kind"] != []string{"CLICK", "VIEW", "BUY"}[i%3] || m["count"] != int(100+i%7000) {
				t.Fatalf("size %d id %d: decoded %v", size, i, m)
			}
			if got := m["ts"].(time.Time).UnixMicro(); got != ts {
				t.Fatalf("ts = %d, want %d", got, ts)
			}
			if tg := m["tags"].([]any); len(tg) != 4 || tg[3] != "returning-customer!!!" {
				t.Fatalf("tags = %v", tg)
			}
		}
	}
	if _, err := newEncoder(1, 100); err == nil {
		t.Fatal("a 100-byte record was accepted; the fixed fields alone are larger")
	}
}

func TestParseProcUsage(t *testing.T) {
	stat := []byte("4242 (ingestd run (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 567 0 0 20 0 9 0 100 2000000 5000 18446744073709551615\n")
	status := []byte("Name:\tingestd\nVmPeak:\t 2000000 kB\nVmHWM:\t  573440 kB\nVmRSS:\t 100 kB\n")
	u, err := parseProcUsage(stat, status)
	if err != nil {
		t.Fatal(err)
	}
	if u.CPUSeconds != 18.01 || u.PeakRSSMiB != 560 {
		t.Fatalf("got %+v, want 18.01 s and 560 MiB", u)
	}
	if _, err := parseProcUsage(stat, []byte("Name:\tx\n")); err == nil {
		t.Fatal("status without VmHWM accepted")
	}
	self, err := readProcUsage("self")
	if err != nil || self.PeakRSSMiB <= 0 {
		t.Fatalf("self: %+v, %v", self, err)
	}
}

func TestLogStats(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "_delta_log")
	if err := os.MkdirAll(log, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(v int, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(log, fmt.Sprintf("%020d.json", v)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(0, `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}`+"\n"+`{"metaData":{"id":"x"}}`+"\n")
	write(1, `{"add":{"path":"a.parquet","stats":"{\"numRecords\":100}"}}`+"\n"+`{"add":{"path":"b.parquet","stats":"{\"numRecords\":50}"}}`+"\n"+`{"txn":{"appId":"a","version":3}}`+"\n")
	var s logStats
	if err := s.update(dir); err != nil {
		t.Fatal(err)
	}
	if s.Commits != 1 || s.Files != 2 || s.Rows != 150 {
		t.Fatalf("after v1: %+v", s)
	}
	write(2, `{"add":{"path":"c.parquet","stats":"{\"numRecords\":7}"}}`+"\n")
	if err := s.update(dir); err != nil {
		t.Fatal(err)
	}
	if s.Commits != 2 || s.Files != 3 || s.Rows != 157 {
		t.Fatalf("after v2: %+v", s)
	}
	write(3, `{"add":{"path":"d.parquet","stats":"{}"}}`+"\n")
	if err := s.update(dir); err == nil {
		t.Fatal("an add without numRecords was accepted")
	}
}

func TestMarkdownFlagsMismatch(t *testing.T) {
	md := markdown([]result{
		{Label: "ingestd", RecordBytes: 200, Records: 10, Bytes: 2000, WallSeconds: 1, CPUSeconds: 0.5, BrokerCPUSeconds: 0.25, RowsChecked: 10, UniqueIDs: 10},
		{Label: "lossy", RecordBytes: 200, Records: 10, Bytes: 2000, WallSeconds: 1, CPUSeconds: 0.5, RowsChecked: 9, UniqueIDs: 9},
	})
	want := "| 1 | ingestd |  | 200 B | 10 | 1.0 | 10 | 0.5 | 20 | 0 | 0.25 | 0 | 0 | 0 | 10 (10 ids) | – |\n"
	if !strings.Contains(md, want) || !strings.Contains(md, "| 0 | – | 0 | 0 | 0 | 9 (9 ids) **MISMATCH**") {
		t.Fatalf("markdown:\n%s", md)
	}
}

func TestGoals(t *testing.T) {
	rs := []result{
		{Label: "ingestd GOMAXPROCS=1", RecordBytes: 200, Records: 1_000_000, Bytes: 200_000_000, WallSeconds: 2, CPUSeconds: 0.8, PeakRSSMiB: 300},
		{Label: "ingestd GOMAXPROCS=1", RecordBytes: 200, Records: 1_000_000, Bytes: 200_000_000, WallSeconds: 2, CPUSeconds: 1.2, PeakRSSMiB: 390},
		{Label: "ingestd GOMAXPROCS=2", RecordBytes: 200, Records: 1_000_000, Bytes: 200_000_000, WallSeconds: 1, CPUSeconds: 1, PeakRSSMiB: 310},
		{Label: "kafka-delta-ingest", RecordBytes: 200, Records: 1_000_000, Bytes: 200_000_000, WallSeconds: 20, CPUSeconds: 25},
		{Label: "consume-only (franz-go)", RecordBytes: 200, Records: 1_000_000, Bytes: 200_000_000, WallSeconds: 1, CPUSeconds: 0.4},
		{Label: "ingestd GOMAXPROCS=1, latency run at 1000 records/s", RecordBytes: 200, Records: 20_000, LatencyP50: 3, LatencyP99: 6.5},
	}
	g := goals(rs, goalLimits{MaxBytesMiB: 128, MaxAgeS: 5})
	want := `- ≥ 1.0 M records per CPU-second at 200 B: **met** — 1.04 M records/CPU-s (GOMAXPROCS=1, mean of runs)
- ≥ 400 MB per CPU-second at 1 KB: not measured — no 1024 B ingestd GOMAXPROCS=1 run
- ≥ 30× kafka-delta-ingest per CPU-second (200 B): **not met** — 26.0× (ingestd GOMAXPROCS=1 1.04 M vs 40.0 K records/CPU-s)
- ≥ 15× kafka-delta-ingest in wall time (200 B): **met** — 20.0× (ingestd GOMAXPROCS=2 1.00 M vs 50.0 K records/s)
- 2 cores ≥ 1.7× one core in wall time (200 B): **met** — 2.00× (1.00 M vs 500.0 K records/s)
- ingestd CPU ≤ 2.6× the consume-only reader's (200 B): **met** — 2.40× (ingestd GOMAXPROCS=1 1.04 M vs consume-only 2.50 M records/CPU-s)
- peak RSS ≤ max_bytes + 256 MiB (200 B): **not met** — 390 MiB, limit 384 MiB (highest of the ingestd runs)
- p99 produce → visible ≤ max_age + 1 s at 50 % of capacity: **not met** — p99 6.50 s, p50 3.00 s, limit 6.0 s (ingestd GOMAXPROCS=1, latency run at 1000 records/s)
`
	if g != want {
		t.Fatalf("goals:\n%s\nwant:\n%s", g, want)
	}
}
