package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestd/ingestd/ingest/internal/configtest"
)

const routedConfig = `name: cdc
kafka: {brokers: ["k:9092"], topic_pattern: 'pg\.(?P<schema>[^.]+)\.(?P<table>[^.]+)', instance_id: host-1}
schema_registry: {url: "http://r:8081"}
table: {uri: "s3://lake/bronze/{schema}_{table}", create: true}
schema: {policy: evolve}
dead_letter: {topic: pg.dlq}
`

// A routed pipeline's table for a topic: the URI filled from the pattern's groups, the
// topic alone, the pipeline's group and app id, a per-topic instance id; topics the
// pattern does not wholly match, internal ones and the dead-letter topic are not read.
func TestConfigForTopic(t *testing.T) {
	cfgs, err := Load(configtest.Write(t, routedConfig))
	if err != nil {
		t.Fatal(err)
	}
	c := cfgs[0]
	if !c.Routed() || c.Kafka.DiscoverEvery != 30*time.Second {
		t.Fatalf("Routed %v, discover_every %v; want true, 30s", c.Routed(), c.Kafka.DiscoverEvery)
	}
	for topic, want := range map[string]bool{
		"pg.public.orders": true, "pg.inventory.items": true,
		"pg.public.orders.extra": false, // the whole name must match
		"xpg.public.orders":      false,
		"pg.dlq":                 false, // the dead-letter topic: [^.]+\.[^.]+ needs two dots
		"__pg.public.orders":     false,
	} {
		if got := c.MatchTopic(topic); got != want {
			t.Errorf("MatchTopic(%q) = %v, want %v", topic, got, want)
		}
	}
	tc, err := c.ForTopic("pg.public.orders")
	if err != nil {
		t.Fatal(err)
	}
	if tc.Name != "cdc/pg.public.orders" || tc.Table.URI != "s3://lake/bronze/public_orders" ||
		strings.Join(tc.Kafka.Topics, ",") != "pg.public.orders" || tc.Kafka.TopicPattern != "" ||
		tc.Kafka.Group != "ingestd-cdc" || tc.AppID != "cdc" || tc.Kafka.InstanceID != "host-1/pg.public.orders" || tc.Routed() {
		t.Fatalf("ForTopic = name %q uri %q topics %v pattern %q group %q app_id %q instance %q",
			tc.Name, tc.Table.URI, tc.Kafka.Topics, tc.Kafka.TopicPattern, tc.Kafka.Group, tc.AppID, tc.Kafka.InstanceID)
	}
	if c.Table.URI != "s3://lake/bronze/{schema}_{table}" || c.Kafka.InstanceID != "host-1" {
		t.Fatalf("ForTopic changed the pipeline's own config: uri %q instance %q", c.Table.URI, c.Kafka.InstanceID)
	}
	if _, err := c.ForTopic("other"); err == nil || !strings.Contains(err.Error(), `does not match kafka.topic_pattern`) {
		t.Fatalf("ForTopic(other) = %v, want a no-match error", err)
	}
}

// A group name given in two alternatives takes the text of the alternative that matched;
// placeholders that would leave a path segment empty for a topic (their groups matched
// nothing) are refused: the table would be s3://lake/bronze//v1 or, at the end of the
// URI, the parent folder of the other tables.
func TestConfigForTopicGroupValues(t *testing.T) {
	body := strings.Replace(strings.Replace(routedConfig,
		`'pg\.(?P<schema>[^.]+)\.(?P<table>[^.]+)'`, `'pg\.(?P<t>[a-z]+)|mysql\.(?P<t>[a-z]+)|legacy(?P<n>[0-9]*)'`, 1),
		"{schema}_{table}", "{t}{n}/v1", 1)
	cfgs, err := Load(configtest.Write(t, body))
	if err != nil {
		t.Fatal(err)
	}
	c := cfgs[0]
	for topic, want := range map[string]string{
		"pg.orders":   "s3://lake/bronze/orders/v1",
		"mysql.items": "s3://lake/bronze/items/v1",
		"legacy7":     "s3://lake/bronze/7/v1",
	} {
		tc, err := c.ForTopic(topic)
		if err != nil {
			t.Errorf("ForTopic(%q): %v", topic, err)
		} else if tc.Table.URI != want {
			t.Errorf("ForTopic(%q) = uri %q, want %q", topic, tc.Table.URI, want)
		}
	}
	want := `route topic legacy: table.uri "s3://lake/bronze/{t}{n}/v1": placeholder {t}, {n} is empty for this topic (its group matched nothing), which leaves a path segment empty; make each segment's groups match at least one character`
	if _, err := c.ForTopic("legacy"); err == nil || err.Error() != want {
		t.Errorf("ForTopic(legacy) = %v\nwant %s", err, want)
	}
	c.Table.URI = "s3://lake/bronze/{t}" // legacy7's table would be s3://lake/bronze/
	if _, err := c.ForTopic("legacy7"); err == nil || !strings.Contains(err.Error(), "placeholder {t} is empty for this topic") {
		t.Errorf("ForTopic(legacy7) into %s = %v, want the empty placeholder refused", c.Table.URI, err)
	}
}

func TestConfigTopicPatternErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"both topics and pattern", strings.Replace(routedConfig, "topic_pattern:", "topics: [a], topic_pattern:", 1),
			`p.yaml:2: both kafka.topics and kafka.topic_pattern are set (fix: keep one: kafka.topics for named topics into one table, kafka.topic_pattern for one table per matching topic)`},
		{"bad regex", strings.Replace(routedConfig, `(?P<table>[^.]+)'`, `(?P<table>[^.]+'`, 1),
			"p.yaml:2: kafka.topic_pattern \"pg\\\\.(?P<schema>[^.]+)\\\\.(?P<table>[^.]+\" is not a regular expression: error parsing regexp: missing closing ): `^(?:pg\\.(?P<schema>[^.]+)\\.(?P<table>[^.]+)$` (fix: write an RE2 expression matched against the whole topic name, e.g. 'pg\\.public\\.(?P<table>.+)')"},
		{"no placeholder", strings.Replace(routedConfig, "{schema}_{table}", "all", 1),
			`p.yaml:4: table.uri "s3://lake/bronze/all" has no placeholder, so every topic matching kafka.topic_pattern would share one table (fix: put {topic} (or a named group of the pattern, e.g. {table}) in the URI, e.g. "s3://lake/bronze/{topic}"; or list the topics in kafka.topics to write them into one table)`},
		{"unknown placeholder", strings.Replace(routedConfig, "{schema}_{table}", "{db}_{table}", 1),
			`p.yaml:4: table.uri placeholder {db} is neither {topic} nor a named group of kafka.topic_pattern (schema, table) (fix: name a group in the pattern, e.g. (?P<db>[^.]+), or use {topic})`},
		{"placeholder without pattern", strings.Replace(strings.Replace(routedConfig, `topic_pattern: 'pg\.(?P<schema>[^.]+)\.(?P<table>[^.]+)'`, "topics: [a]", 1), "{schema}_{table}", "{topic}", 1),
			`p.yaml:4: table.uri "s3://lake/bronze/{topic}" has the placeholder {topic}, but kafka.topic_pattern is not set (fix: set kafka.topic_pattern (one table per matching topic), or write the table's own URI)`},
		{"discover_every without pattern", strings.Replace(strings.Replace(routedConfig, `topic_pattern: 'pg\.(?P<schema>[^.]+)\.(?P<table>[^.]+)'`, "topics: [a], discover_every: 5s", 1), "{schema}_{table}", "t", 1),
			`p.yaml:2: kafka.discover_every is set but kafka.topic_pattern is not (fix: remove kafka.discover_every, or set kafka.topic_pattern)`},
		{"group named topic", strings.Replace(routedConfig, "(?P<table>", "(?P<topic>", 1),
			"p.yaml:2: kafka.topic_pattern \"pg\\\\.(?P<schema>[^.]+)\\\\.(?P<topic>[^.]+)\" names a group topic, but {topic} in table.uri is always the whole topic name (fix: rename the group, e.g. (?P<name>…), and use {name})"},
		{"discover_every too short", strings.Replace(routedConfig, "instance_id: host-1", "discover_every: 100ms", 1),
			`p.yaml:2: kafka.discover_every 100ms is under 1s (fix: use e.g. 30s (the default))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorsOf(t, tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// validate resolves the credentials of a table.uri template whose bucket is a
// placeholder, instead of failing to parse "{t}" as a host name.
func TestCheckStorageCredentialsTemplate(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "example")
	cfgs, err := Load(configtest.Write(t, strings.Replace(routedConfig, "s3://lake/bronze/{schema}_{table}", "s3://{schema}/bronze/{table}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	src, err := CheckStorageCredentials(context.Background(), cfgs)
	if err != nil || src["cdc"] != "AWS EnvConfigCredentials" {
		t.Fatalf("CheckStorageCredentials = %v, %v; want AWS EnvConfigCredentials", src, err)
	}
}

// Two pipeline files that route the same topics into the same tables would land every
// record twice (each has its own txn app ids), as two kafka.topics files would: refused
// when it can be told from the files (the same pattern and template, or a listed topic
// that a pattern routes into the list's table).
func TestConfigRoutedSameTopicSameTable(t *testing.T) {
	dir := t.TempDir()
	copyOf := strings.Replace(routedConfig, "name: cdc", "name: cdc-copy", 1)
	other := strings.NewReplacer("name: cdc", "name: cdc-mysql", `topic_pattern: 'pg\.`, `topic_pattern: 'my\.`).Replace(routedConfig)
	listed := strings.NewReplacer("name: cdc", "name: orders", `topic_pattern: 'pg\.(?P<schema>[^.]+)\.(?P<table>[^.]+)'`, "topics: [pg.public.orders, orders]",
		"{schema}_{table}", "public_orders").Replace(routedConfig)
	for name, body := range map[string]string{"a.yaml": routedConfig, "b.yaml": copyOf, "c.yaml": other, "d.yaml": listed} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(dir)
	if err == nil {
		t.Fatal("no error")
	}
	got := strings.ReplaceAll(err.Error(), dir+"/", "")
	want := `b.yaml:4: pipeline "cdc-copy" writes every topic matching kafka.topic_pattern "pg\\.(?P<schema>[^.]+)\\.(?P<table>[^.]+)" into table s3://lake/bronze/{schema}_{table}, like pipeline "cdc" (a.yaml): every record would land twice (fix: give each pipeline its own tables (another table.uri), or a kafka.topic_pattern that matches other topics)
d.yaml:4: pipeline "orders" writes topic [pg.public.orders] into table s3://lake/bronze/public_orders, like pipeline "cdc" (a.yaml): every record would land twice (fix: give each pipeline its own tables (another table.uri), or a kafka.topic_pattern that matches other topics)
d.yaml:4: pipeline "orders" writes topic [pg.public.orders] into table s3://lake/bronze/public_orders, like pipeline "cdc-copy" (b.yaml): every record would land twice (fix: give each pipeline its own tables (another table.uri), or a kafka.topic_pattern that matches other topics)`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
