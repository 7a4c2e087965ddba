package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestReplayCreatesTableFromDeadLetters: every record of a topic is dead-lettered as
// schema_not_found before the table exists (a registry front answers 404 for the
// records' schema id, as a registry the producers did not use would), so the pipeline
// never creates the table. Once the registry serves the id, `ingestd replay --reason
// schema_not_found` must land all 6 records, creating the table, without any new record;
// before, it reported them all "pending" (no commit had moved their txn) and landed
// nothing until a new record made the pipeline create the table.
func TestReplayCreatesTableFromDeadLetters(t *testing.T) {
	s := need(t)
	topic := createTopic(t, s, "replaynotable", 1)
	dlq := createTopic(t, s, "replaynotable.dlq", 1)
	orders := produce(t, s, topic, 6, 0, 1)
	id := readTopic(t, s, topic, 6)[0].schemaID
	target, err := url.Parse(s.registry)
	if err != nil {
		t.Fatal(err)
	}
	var hide atomic.Bool
	hide.Store(true)
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hide.Load() && strings.HasSuffix(r.URL.Path, fmt.Sprintf("/schemas/ids/%d", id)) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error_code":40403,"message":"Schema %d not found"}`, id)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "configs")
	mustMkdir(t, cfgDir)
	table := filepath.Join(dir, "t")
	yaml := pipelineYAML("replaynotable", s, topic, table, "dead_letter", dlq, "{max_records: 2, max_bytes: 1MiB, max_age: 200ms}")
	yaml = strings.Replace(yaml, fmt.Sprintf("url: %q", s.registry), fmt.Sprintf("url: %q", front.URL+target.Path), 1)
	writePipeline(t, cfgDir, "replaynotable", yaml)
	d := startDaemon(t, cfgDir)
	waitFor(t, d, time.Minute, "6 dead letters", func() bool { return len(readDLQ(t, s, dlq)) == 6 })
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n := handled(t, table); n != 0 {
		t.Fatalf("the table exists (%d records handled) before the replay", n)
	}
	hide.Store(false) // the registry now serves the id
	out, err := runCLI(t, "replay", "--config", filepath.Join(cfgDir, "replaynotable.yaml"), "--reason", "schema_not_found")
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	rows := readTable(t, s, table).Rows
	var ids []string
	for _, r := range rows {
		ids = append(ids, fmt.Sprint(r["order_id"]))
	}
	if len(rows) != len(orders) {
		t.Errorf("after the replay the table holds %d rows %v, want the %d orders\nreplay output:\n%s", len(rows), ids, len(orders), out)
	}
}
