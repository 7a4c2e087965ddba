package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// datagenCount is the records produced per schema.
const datagenCount = 50

// TestDatagenSchemas: every valid schema of the datagen folder (37 of 38; one is not valid
// JSON) gets a topic; datagen_produce.py produces datagenCount records per topic with
// confluent-kafka's AvroSerializer through the real registry and writes the rows a Delta
// reader must see; one `ingestd run` runs an evolve pipeline per topic; delta-rs reads every
// table back and each row must equal a produced row exactly (as multisets: Kafka gives no
// order across partitions, and the schemas have no unique key).
func TestDatagenSchemas(t *testing.T) {
	s := need(t)
	schemas := filepath.Join(repoRoot, "testdata", "avro", "datagen")
	prefix := fmt.Sprintf("datagen-%d-", time.Now().UnixNano())
	var stems []string
	paths, _ := filepath.Glob(filepath.Join(schemas, "*.avsc"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if json.Valid(b) {
			stems = append(stems, strings.TrimSuffix(filepath.Base(p), ".avsc"))
		}
	}
	if len(stems) != 37 {
		t.Fatalf("%d valid datagen schemas, want 37", len(stems))
	}

	adm := kadm.NewClient(kafkaClient(t, s))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topics := make([]string, len(stems))
	for i, st := range stems {
		topics[i] = prefix + st
	}
	resp, err := adm.CreateTopics(ctx, 2, 1, nil, append(slices.Clone(topics), prefix+"dlq")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("create topic %s: %v", r.Topic, r.Err)
		}
	}

	out := t.TempDir()
	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "datagen_produce.py"),
		"--brokers", s.brokers, "--registry", s.registry, "--schemas", schemas,
		"--topic-prefix", prefix, "--count", fmt.Sprint(datagenCount), "--out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("datagen_produce.py: %v\n%s", err, b)
	}

	cfg := t.TempDir()
	data := t.TempDir()
	for i, st := range stems {
		writePipeline(t, cfg, "dg-"+st, pipelineYAML("dg-"+strings.ReplaceAll(st, "_", "-"), s, topics[i],
			filepath.Join(data, st), "evolve", prefix+"dlq", ""))
	}
	d := startDaemon(t, cfg)
	waitFor(t, d, 120*time.Second, "every datagen table to hold its records", func() bool {
		for _, st := range stems {
			if handled(t, filepath.Join(data, st)) < datagenCount {
				return false
			}
		}
		return true
	})
	if code := d.stop(t); code != 0 {
		t.Fatalf("ingestd exited %d", code)
	}

	for _, st := range stems {
		t.Run(st, func(t *testing.T) {
			want := readJSONLines(t, filepath.Join(out, st+".jsonl"))
			got := readTableExact(t, s, filepath.Join(data, st))
			if len(got) != len(want) {
				t.Fatalf("%d rows in the table, %d produced", len(got), len(want))
			}
			slices.Sort(got)
			slices.Sort(want)
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("row %d (sorted)\n got %s\nwant %s", i, got[i], want[i])
				}
			}
		})
	}
}

// canonicalJSON re-encodes a JSON value with sorted keys and numbers kept verbatim.
func canonicalJSON(t *testing.T, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("parse %s: %v", b, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(buf.String())
}

func readJSONLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, canonicalJSON(t, sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// readTableExact reads a table with read_table.py and returns its rows as canonical JSON,
// keeping integers exact (readTable decodes them into float64).
func readTableExact(t *testing.T, s stack, path string) []string {
	t.Helper()
	cmd := exec.Command(s.python, filepath.Join(repoRoot, "integration", "testdata", "read_table.py"), path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_table.py %s: %v\n%s", path, err, stderr.String())
	}
	var d struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(d.Rows))
	for i, r := range d.Rows {
		out[i] = canonicalJSON(t, r)
	}
	return out
}
