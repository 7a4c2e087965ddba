// Package configtest holds the pipeline files that the tests of ingest, ingest/config and
// ingest/rowfill share, and writes them where config.Load can read them. Only tests
// import it.
package configtest

import (
	"os"
	"path/filepath"
	"testing"
)

// GeneratedColumns is a pipeline whose table is created with two generated columns,
// event_date and y, on lines 8 and 9 (table.generated_columns on line 7); tests replace
// those lines with the keys they check.
const GeneratedColumns = `name: orders-silver
kafka: {brokers: ["k:9092"], topics: [orders]}
schema_registry: {url: "http://r:8081"}
table:
  uri: "file:///tmp/t"
  create: true
  generated_columns:
    event_date: "CAST(created_at AS DATE)"
    y: "YEAR(created_at)"
schema: {policy: dead_letter}
dead_letter: {topic: orders.dlq}
`

// Write writes body to p.yaml in a new temporary directory of t and returns its path;
// a failed write fails t.
func Write(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
