package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The commands of one table (replay, dlq inspect) take a pipeline with
// kafka.topic_pattern only with --topic, which names the table; --topic without a
// pattern is refused.
func TestOnePipelineOfRoutedConfig(t *testing.T) {
	dir := t.TempDir()
	routed := filepath.Join(dir, "routed.yaml")
	if err := os.WriteFile(routed, []byte(`name: cdc
kafka: {brokers: ["k:9092"], topic_pattern: 'pg\.public\.(?P<table>.+)'}
schema_registry: {url: "http://r:8081"}
table: {uri: "file:///lake/{table}", create: true}
schema: {policy: dead_letter}
dead_letter: {topic: pg.dlq}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if c, code := onePipeline(routed, "", &stderr); c != nil || code != exitUsage ||
		!strings.Contains(stderr.String(), `pipeline cdc (`+routed+`) writes one table per topic matching kafka.topic_pattern "pg\\.public\\.(?P<table>.+)": add --topic TOPIC to name one`) {
		t.Fatalf("without --topic: %v, %d, %q", c, code, stderr.String())
	}
	c, code := onePipeline(routed, "pg.public.orders", &stderr)
	if c == nil || code != exitOK || c.Name != "cdc/pg.public.orders" || c.Table.URI != "file:///lake/orders" {
		t.Fatalf("--topic pg.public.orders: %+v, %d, %q", c, code, stderr.String())
	}
	stderr.Reset()
	if c, code := onePipeline(routed, "other", &stderr); c != nil || code != exitUsage || !strings.Contains(stderr.String(), "does not match kafka.topic_pattern") {
		t.Fatalf("--topic other: %v, %d, %q", c, code, stderr.String())
	}
	plain := filepath.Join(dir, "plain.yaml")
	if err := os.WriteFile(plain, []byte(`name: orders
kafka: {brokers: ["k:9092"], topics: [orders]}
schema_registry: {url: "http://r:8081"}
table: {uri: "file:///lake/orders", create: true}
schema: {policy: dead_letter}
dead_letter: {topic: orders.dlq}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if c, code := onePipeline(plain, "orders", &stderr); c != nil || code != exitUsage || !strings.Contains(stderr.String(), "has no kafka.topic_pattern; remove --topic") {
		t.Fatalf("--topic on a plain pipeline: %v, %d, %q", c, code, stderr.String())
	}
}
