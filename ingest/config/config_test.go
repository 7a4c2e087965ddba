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

func TestExampleConfigsLoad(t *testing.T) {
	t.Setenv("KAFKA_BROKERS", "k1:9092")
	t.Setenv("SCHEMA_REGISTRY_URL", "http://reg:8081")
	t.Setenv("INGESTD_DATA", "/data")
	cfgs, err := Load("../../configs")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"orders-bronze": "evolve", "orders-gold": "halt", "orders-silver": "dead_letter"}
	if len(cfgs) != len(want) {
		t.Fatalf("loaded %d pipelines, want %d", len(cfgs), len(want))
	}
	for _, c := range cfgs {
		if want[c.Name] != c.Schema.Policy {
			t.Errorf("%s: policy %q, want %q", c.Name, c.Schema.Policy, want[c.Name])
		}
		if c.Kafka.Brokers[0] != "k1:9092" || c.SchemaRegistry.URL != "http://reg:8081" || !strings.HasPrefix(c.Table.URI, "file:///data/") {
			t.Errorf("%s: env not expanded: %v %s %s", c.Name, c.Kafka.Brokers, c.SchemaRegistry.URL, c.Table.URI)
		}
		if c.Batch.MaxBytes != 128<<20 || c.Batch.MaxAge != 10*time.Second || c.Batch.MaxRecords != 100000 {
			t.Errorf("%s: batch %+v", c.Name, c.Batch)
		}
		if c.AppID != c.Name || c.Schema.OnIncompatible != "halt" {
			t.Errorf("%s: defaults app_id=%q on_incompatible=%q", c.Name, c.AppID, c.Schema.OnIncompatible)
		}
	}
}

const goodConfig = `name: orders-silver
kafka: {brokers: ["k:9092"], topics: [orders]}
schema_registry: {url: "http://r:8081"}
table: {uri: "file:///tmp/t", create: true}
schema: {policy: dead_letter}
dead_letter: {topic: orders.dlq}
`

func TestConfigDefaults(t *testing.T) {
	cfgs, err := Load(configtest.Write(t, goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	c := cfgs[0]
	if c.Kafka.Group != "ingestd-orders-silver" || c.Kafka.StartOffset != "earliest" || c.Batch.MaxAge != 10*time.Second || c.Batch.MaxRecords != 100000 ||
		c.Batch.MaxOpenPartitions != 256 {
		t.Fatalf("defaults: %+v %+v", c.Kafka, c.Batch)
	}
}

// TestConfigPartitionBy: table.partition_by is accepted, in the YAML's order.
func TestConfigPartitionBy(t *testing.T) {
	cfgs, err := Load(configtest.Write(t, strings.Replace(goodConfig, "create: true", "create: true, partition_by: [event_date, region]", 1)+
		"batch: {max_open_partitions: 32}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfgs[0]; strings.Join(c.Table.PartitionBy, ",") != "event_date,region" || c.Batch.MaxOpenPartitions != 32 {
		t.Fatalf("partition_by %v, max_open_partitions %d; want [event_date region], 32", c.Table.PartitionBy, c.Batch.MaxOpenPartitions)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string // substrings that must all appear
	}{
		{"unknown nested key", strings.Replace(goodConfig, "topics: [orders]", "topics: [orders], gruop: x", 1),
			[]string{"p.yaml:2: ", `unknown field "gruop"`, "fix: remove it or correct its spelling"}},
		{"bad policy names its line", strings.Replace(goodConfig, "policy: dead_letter", "policy: evolv", 1),
			[]string{"p.yaml:5: ", `schema.policy "evolv" is not evolve, dead_letter or halt`, "fix: use evolve"}},
		{"unset env var", strings.Replace(goodConfig, `"k:9092"`, `"${NOPE_NOT_SET_X}"`, 1),
			[]string{"p.yaml:2: ", "environment variable NOPE_NOT_SET_X is not set"}},
		{"missing dlq topic for dead_letter", strings.Replace(goodConfig, "dead_letter: {topic: orders.dlq}\n", "", 1),
			[]string{"dead_letter.topic is missing"}},
		{"bad byte size", goodConfig + "batch: {max_bytes: 12 parsecs}\n",
			[]string{"p.yaml:7", "invalid byte size"}},
		{"bool that is not a bool names key and line", strings.Replace(goodConfig, "create: true", "create: yes", 1),
			[]string{"p.yaml:4: ", `create: "yes" is not true or false`, "fix: write true or false"}},
		{"number that is not a number", goodConfig + "batch: {max_records: lots}\n",
			[]string{"p.yaml:7: ", `max_records: "lots" is not a whole number`}},
		{"duration without a unit", goodConfig + "batch: {max_age: 2}\n",
			[]string{"p.yaml:7: ", `max_age: "2" is not a duration such as 10s`}},
		{"empty file names the file", "", []string{"p.yaml: name is missing"}},
		{"partition column listed twice", strings.Replace(goodConfig, "create: true", "create: true, partition_by: [event_date, EVENT_DATE]", 1),
			[]string{"p.yaml:4: ", `table.partition_by: column "EVENT_DATE" is listed twice`, "fix: list each partition column once"}},
		{"negative max_open_partitions", goodConfig + "batch: {max_open_partitions: -1}\n",
			[]string{"p.yaml:7: ", "batch.max_open_partitions -1 is negative"}},
		{"all errors at once", strings.NewReplacer("policy: dead_letter", "policy: nope", "start", "x").Replace(goodConfig) +
			"batch: {max_age: -1s}\n", []string{"schema.policy \"nope\"", "batch.max_age is negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(configtest.Write(t, tt.body))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"128MiB": 128 << 20, "64MB": 64e6, "512": 512, `"1GiB"`: 1 << 30, "10KB": 10000} {
		s, err := parseByteSize(strings.Trim(in, `"`))
		if err != nil || s != want {
			t.Errorf("%s: got %d, %v; want %d", in, s, err, want)
		}
	}
}

func TestConfigEnvEdges(t *testing.T) {
	t.Setenv("BROKERS_X", "a:9092, b:9092")
	body := strings.Replace(goodConfig, `"k:9092"`, `"${BROKERS_X}"`, 1) + "# ${NOT_SET_ONLY_IN_A_COMMENT} is fine here\n"
	body = strings.Replace(body, "policy: dead_letter}", "policy: dead_letter} # see ${ALSO_NOT_SET}", 1)
	cfgs, err := Load(configtest.Write(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfgs[0].Kafka.Brokers, "|"); got != "a:9092|b:9092" {
		t.Errorf("brokers %q, want the comma-separated list split", got)
	}
	_, err = Load(configtest.Write(t, strings.Replace(goodConfig, "file:///tmp/t", "file://relative/t", 1)))
	if err == nil || !strings.Contains(err.Error(), "a file URI needs an absolute path") {
		t.Errorf("file://relative accepted: %v", err)
	}
}

// Two pipelines that read the same topic into the same table would land every record
// twice (each has its own consumer group and txn appIds): refused at load time.
func TestConfigSameTopicSameTable(t *testing.T) {
	dir := t.TempDir()
	second := strings.Replace(goodConfig, "name: orders-silver", "name: orders-copy", 1)
	third := strings.NewReplacer("name: orders-silver", "name: other", "topics: [orders]", "topics: [payments]").Replace(goodConfig)
	// The same table written another way: a plain path with a trailing slash.
	fourth := strings.NewReplacer("name: orders-silver", "name: orders-path", `uri: "file:///tmp/t"`, `uri: "/tmp/t/"`).Replace(goodConfig)
	for name, body := range map[string]string{"a.yaml": goodConfig, "b.yaml": second, "c.yaml": third, "d.yaml": fourth} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(dir)
	if err == nil {
		t.Fatal("no error")
	}
	want := filepath.Join(dir, "b.yaml") + `:4: pipeline "orders-copy" writes topic [orders] into table file:///tmp/t, like pipeline "orders-silver"`
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q\n does not contain %q", err, want)
	}
	want = filepath.Join(dir, "d.yaml") + `:4: pipeline "orders-path" writes topic [orders] into table /tmp/t/, like pipeline "orders-silver"`
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q\n does not contain %q", err, want)
	}
	if n := strings.Count(err.Error(), "would land twice"); n != 3 {
		t.Fatalf("want 3 errors (b.yaml and d.yaml against a.yaml, d.yaml against b.yaml; c.yaml reads another topic), got %d: %v", n, err)
	}
}

// errorsOf loads body as p.yaml and returns its error text with the temp dir removed,
// one error per line.
func errorsOf(t *testing.T, body string) string {
	t.Helper()
	p := configtest.Write(t, body)
	_, err := Load(p)
	if err == nil {
		t.Fatalf("no error for:\n%s", body)
	}
	return strings.ReplaceAll(err.Error(), filepath.Dir(p)+string(filepath.Separator), "")
}

// A broker list written the way Kafka users write it (an unquoted host:port in a flow
// list) is the YAML 1.2 plain scalar "localhost:9092", not a mapping.
func TestConfigUnquotedBrokerList(t *testing.T) {
	body := strings.Replace(goodConfig, `kafka: {brokers: ["k:9092"], topics: [orders]}`, `kafka: {brokers: [localhost:9092, 10.0.0.2:9093], topics: [orders]}`, 1)
	cfgs, err := Load(configtest.Write(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfgs[0].Kafka.Brokers, "|"); got != "localhost:9092|10.0.0.2:9093" {
		t.Fatalf("brokers %q", got)
	}
	block := "name: x\nkafka:\n  brokers:\n    - localhost:9092\n  topics: [orders]\nschema_registry: {url: \"http://r:8081\"}\ntable: {uri: /tmp/t}\nschema: {policy: evolve}\n"
	cfgs, err = Load(configtest.Write(t, block))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfgs[0].Kafka.Brokers, "|"); got != "localhost:9092" {
		t.Fatalf("block list brokers %q", got)
	}
}

// Anchors, aliases and merge keys work; the mapping's own keys win over merged ones.
func TestConfigMergeKeys(t *testing.T) {
	body := `x-kafka: &k {brokers: [b1:9092, b2:9092], topics: [orders], start_offset: latest}
name: m
kafka:
  <<: *k
  start_offset: earliest
schema_registry: {url: "http://r:8081"}
table: {uri: /tmp/t}
schema: {policy: evolve}
`
	// x-kafka is not a pipeline key: refused like any unknown key
	if got := errorsOf(t, body); !strings.HasPrefix(got, `p.yaml:1: unknown field "x-kafka" at the top level`) {
		t.Fatalf("got %s", got)
	}
	body = strings.Replace(body, "x-kafka: &k {brokers: [b1:9092, b2:9092], topics: [orders], start_offset: latest}\nname: m\nkafka:\n  <<: *k",
		"name: m\nkafka:\n  <<: &k {brokers: [b1:9092, b2:9092], topics: [orders], start_offset: latest}", 1)
	cfgs, err := Load(configtest.Write(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if k := cfgs[0].Kafka; strings.Join(k.Brokers, ",") != "b1:9092,b2:9092" || k.Topics[0] != "orders" || k.StartOffset != "earliest" {
		t.Fatalf("merged kafka %+v", k)
	}
}

// ${VAR} is expanded in scalar values after parsing: a value with " #", ": ", quotes,
// braces or a backslash is taken exactly as the variable holds it, and never parsed.
func TestConfigEnvValueTakenAsWritten(t *testing.T) {
	const pw = `p #a: b, {c} [d] 'e' "f" \g &h *i !j %k @l`
	t.Setenv("SR_PW_TEST", pw)
	t.Setenv("SR_USER_TEST", "ingestd")
	body := strings.Replace(goodConfig, `schema_registry: {url: "http://r:8081"}`,
		"schema_registry:\n  url: \"http://r:8081\"\n  username: ${SR_USER_TEST}\n  password: ${SR_PW_TEST}   # a comment is still a comment", 1)
	cfgs, err := Load(configtest.Write(t, body))
	if err != nil {
		t.Fatal(err)
	}
	r := cfgs[0].SchemaRegistry
	if r.Username != "ingestd" || string(r.Password) != pw {
		t.Fatalf("username %q, password %q; want %q", r.Username, string(r.Password), pw)
	}
	// only ${NAME} is expanded: Event Hubs' literal user name "$ConnectionString" stays
	cfgs, err = Load(configtest.Write(t, strings.Replace(goodConfig, `{url: "http://r:8081"}`, `{url: "http://r:8081", username: "$ConnectionString", password: x}`, 1)))
	if err != nil || cfgs[0].SchemaRegistry.Username != "$ConnectionString" {
		t.Fatalf("$ConnectionString: %v", err)
	}
	// a default may hold ": " and " #" too, and a set variable wins over it
	body = strings.Replace(goodConfig, "topic: orders.dlq", `topic: "${DLQ_UNSET_TEST:-a: b #c}"`, 1)
	cfgs, err = Load(configtest.Write(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfgs[0].DeadLetter.Topic; got != "a: b #c" {
		t.Fatalf("default %q", got)
	}
}

// Every error names the file, the line, the key and the expected form, exactly.
func TestConfigErrorMessagesExact(t *testing.T) {
	t.Setenv("SECRET_PW_TEST", "hunter2-secret")
	tests := []struct{ name, body, want string }{
		{"unknown key with a suggestion", strings.Replace(goodConfig, "topics: [orders]", "topics: [orders], gruop: x", 1),
			`p.yaml:2: unknown field "gruop" in kafka (fix: remove it or correct its spelling: did you mean "group"?; known keys here: brokers, topics, topic_pattern, discover_every, group, start_offset, session_timeout, client_id, instance_id, tls, sasl)`},
		{"unknown top-level key", goodConfig + "tabel: {}\n",
			`p.yaml:7: unknown field "tabel" at the top level (fix: remove it or correct its spelling: did you mean "table"?; known keys here: name, app_id, kafka, schema_registry, avro_schema_file, format, table, schema, dead_letter, batch, maintenance)`},
		{"list given a single value", strings.Replace(goodConfig, `brokers: ["k:9092"]`, `brokers: k:9092`, 1),
			`p.yaml:2: kafka.brokers: expected a list such as [a, b], got a single value (fix: write a list such as [a, b])`},
		{"syntax error names the line", goodConfig + "batch:\n  max_age: 1s\n   max_records: 5\n",
			`p.yaml:9: invalid YAML: mapping values are not allowed in this context (fix: check the indentation and quoting on that line (quote values that contain ': ' or ' #'))`},
		{"unclosed flow mapping names where it starts", strings.Replace(goodConfig, "{policy: dead_letter}", "{policy: dead_letter", 1),
			`p.yaml:5: invalid YAML in the list or mapping that starts here: did not find expected ',' or '}' (fix: check the indentation and quoting on that line (quote values that contain ': ' or ' #'))`},
		{"block list given a single value", "name: x\nkafka:\n  brokers: localhost:9092\n  topics: [orders]\n",
			`p.yaml:3: kafka.brokers: expected a list such as [a, b], got a single value (fix: write a list such as [a, b])`},
		{"list given a mapping", "name: x\nkafka:\n  brokers: [k:1]\n  topics: {orders: 1}\n",
			`p.yaml:4: kafka.topics: expected a list such as [a, b], got a mapping ({key: value}) (fix: write a list such as [a, b])`},
		{"section given a list", goodConfig + "batch: [1]\n",
			`p.yaml:7: batch: expected a mapping of keys such as {key: value}, got a list ([a, b]) (fix: write a mapping of keys such as {key: value})`},
		{"bool", strings.Replace(goodConfig, "create: true", "create: yes", 1),
			`p.yaml:4: table.create: "yes" is not true or false (fix: write true or false)`},
		{"whole number", goodConfig + "batch: {max_records: lots}\n",
			`p.yaml:7: batch.max_records: "lots" is not a whole number (fix: write a whole number)`},
		{"duration", goodConfig + "batch:\n  max_age: 2\n",
			`p.yaml:8: batch.max_age: "2" is not a duration such as 10s or 500ms (fix: write a duration such as 10s or 500ms)`},
		{"byte size", goodConfig + "batch: {max_bytes: 12 parsecs}\n",
			`p.yaml:7: batch.max_bytes: invalid byte size "12 parsecs": write a number with an optional unit, e.g. 128MiB (fix: write a size such as 128MiB)`},
		{"repeated key", goodConfig + "name: again\n",
			`p.yaml:7: name is set twice (also on line 1) (fix: keep one)`},
		{"unset variable names the key", strings.Replace(goodConfig, "{topic: orders.dlq}", `{topic: "${DLQ_NOT_SET_TEST}"}`, 1),
			`p.yaml:6: environment variable DLQ_NOT_SET_TEST is not set (used by dead_letter.topic) (fix: export DLQ_NOT_SET_TEST=… or write ${DLQ_NOT_SET_TEST:-default})`},
		{"an empty tls block is not plaintext by accident", strings.Replace(goodConfig, "topics: [orders]}", "topics: [orders], tls: }", 1),
			`p.yaml:2: kafka.tls is empty (fix: write kafka.tls: {} for TLS with the system roots, fill it in, or remove the key)`},
		{"a secret's value is never quoted", strings.Replace(goodConfig, `{url: "http://r:8081"}`, `{url: "http://r:8081", password: [hunter2-secret]}`, 1),
			`p.yaml:3: schema_registry.password: expected a string, got a list ([a, b]) (fix: write a string)`},
		{"unknown format", goodConfig + "format: thrift\n",
			`p.yaml:7: format "thrift" is not avro, protobuf, json_schema, json or connect_json (fix: use one of avro (the default), protobuf, json_schema, json, connect_json)`},
		{"protobuf needs the registry", strings.Replace(goodConfig, `schema_registry: {url: "http://r:8081"}`, "format: protobuf", 1),
			`p.yaml:3: format protobuf needs schema_registry: its records are Confluent-framed with the id of their registry schema (fix: add schema_registry: {url: "http://registry:8081"})`},
		{"plain json has no registry", goodConfig + "format: json\n",
			`p.yaml:3: schema_registry is set with format json, whose records carry no schema id (fix: remove schema_registry, or use format json_schema for Confluent-framed JSON)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorsOf(t, tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// configs/s3 holds the bronze pipeline with its table on S3 (docker-compose.yml runs it).
func TestExampleS3ConfigLoads(t *testing.T) {
	t.Setenv("S3_ENDPOINT", "http://s3:7070")
	t.Setenv("AWS_REGION", "")
	cfgs, err := Load("../../configs/s3")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs) != 1 {
		t.Fatalf("loaded %d pipelines, want 1", len(cfgs))
	}
	c := cfgs[0]
	if c.Name != "orders-bronze-s3" || c.Table.URI != "s3://lake/bronze/orders" || c.Schema.Policy != "evolve" ||
		c.Table.Storage.Endpoint != "http://s3:7070" || c.Table.Storage.Region != "us-east-1" {
		t.Errorf("configs/s3: %s %s %s %+v", c.Name, c.Table.URI, c.Schema.Policy, c.Table.Storage)
	}
}

// table.uri takes object-store URIs and table.storage their settings; mistakes name
// their line and the fix.
func TestConfigTableStorage(t *testing.T) {
	s3 := strings.Replace(goodConfig, `table: {uri: "file:///tmp/t", create: true}`,
		"table:\n  uri: \"s3://lake/bronze/orders\"\n  create: true\n  storage:\n    endpoint: \"http://127.0.0.1:7070\"\n    region: eu-west-1\n", 1)
	cfgs, err := Load(configtest.Write(t, s3))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfgs[0].Table.StorageOptions(); got.Endpoint != "http://127.0.0.1:7070" || got.Region != "eu-west-1" || cfgs[0].Table.URI != "s3://lake/bronze/orders" {
		t.Fatalf("table %+v, storage options %+v", cfgs[0].Table, got)
	}
	for _, uri := range []string{"gs://lake/t", "az://lake/t", "abfss://lake@acct.dfs.core.windows.net/t", "/abs/t"} {
		if _, err := Load(configtest.Write(t, strings.Replace(goodConfig, "file:///tmp/t", uri, 1))); err != nil {
			t.Errorf("%s: %v", uri, err)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{strings.Replace(goodConfig, "file:///tmp/t", "hdfs://nn/t", 1), `p.yaml:4: table.uri "hdfs://nn/t": scheme "hdfs" is not supported`},
		{strings.Replace(goodConfig, "file:///tmp/t", "abfss://acct.dfs.core.windows.net/t", 1), "p.yaml:4: table.uri \"abfss://acct.dfs.core.windows.net/t\": open store abfss://acct.dfs.core.windows.net/t: write abfss://container@account.dfs.core.windows.net/path"},
		{strings.Replace(goodConfig, "file:///tmp/t", "s3:///t", 1), "no bucket in the URI"},
		{strings.Replace(s3, "s3://lake/bronze/orders", "gs://lake/o", 1), "p.yaml:8: table.storage.endpoint is not used for GCS: set STORAGE_EMULATOR_HOST"},
		{strings.Replace(s3, "http://127.0.0.1:7070", "127.0.0.1:7070", 1), `p.yaml:8: table.storage.endpoint "127.0.0.1:7070" is not an http(s) URL`},
		{strings.Replace(strings.Replace(s3, "s3://lake/bronze/orders", "az://lake/o", 1), "    endpoint: \"http://127.0.0.1:7070\"\n", "", 1), "p.yaml:8: table.storage.region is only used for s3:// tables"},
		{strings.Replace(s3, "region: eu-west-1", "regoin: eu-west-1", 1), `unknown field "regoin"`},
	} {
		_, err := Load(configtest.Write(t, tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v\n does not contain %q", err, tc.want)
		}
	}
}

// validate resolves object-store credentials without printing them, and names the
// pipeline file and line when they do not resolve.
func TestCheckStorageCredentials(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	body := strings.Replace(goodConfig, "file:///tmp/t", "s3://lake/orders", 1)
	cfgs, err := Load(configtest.Write(t, body))
	if err != nil {
		t.Fatal(err)
	}
	_, err = CheckStorageCredentials(context.Background(), cfgs)
	if err == nil || !strings.Contains(err.Error(), "p.yaml:4: credentials for table s3://lake/orders: no AWS credentials") {
		t.Fatalf("no credentials: %v", err)
	}
	const secret = "wJalrXUtnFEMI-do-not-print"
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	src, err := CheckStorageCredentials(context.Background(), cfgs)
	if err != nil || src["orders-silver"] != "AWS EnvConfigCredentials" {
		t.Fatalf("env credentials: %v, %v; want AWS EnvConfigCredentials", src, err)
	}
	t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:4443")
	cfgs[0].Table.URI = "gs://lake/orders"
	if src, err := CheckStorageCredentials(context.Background(), cfgs); err != nil || !strings.Contains(src["orders-silver"], "GCS emulator") {
		t.Fatalf("gcs emulator: %v, %v", src, err)
	}
	for _, s := range src {
		if strings.Contains(s, secret) {
			t.Fatalf("credential source shows the secret: %q", s)
		}
	}
}

func TestConfigKafkaColumns(t *testing.T) {
	cfgs, err := Load(configtest.Write(t, strings.Replace(goodConfig, "create: true}", "create: true, kafka_columns: [offset, key, headers], key_format: string}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfgs[0].Table; strings.Join(c.KafkaColumns, ",") != "offset,key,headers" || c.KeyFormat != "string" {
		t.Errorf("table: %+v", c)
	}
	for _, kf := range []string{"connect_json", "json"} { // JSON keys: a string column of their text, so a partition column too
		cfgs, err = Load(configtest.Write(t, strings.Replace(goodConfig, "create: true}", "create: true, partition_by: [_kafka_key], kafka_columns: [key], key_format: "+kf+"}", 1)))
		if err != nil {
			t.Fatal(err)
		}
		if c := cfgs[0].Table; c.KeyFormat != kf {
			t.Errorf("key_format %q, want %s", c.KeyFormat, kf)
		}
	}
	cfgs, err = Load(configtest.Write(t, goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfgs[0].Table; len(c.KafkaColumns) != 0 || c.KeyFormat != "bytes" {
		t.Errorf("defaults: no Kafka columns, key_format bytes; got %+v", c)
	}
	tests := []struct{ name, body, want string }{
		{"unknown column", strings.Replace(goodConfig, "create: true}", "create: true,\n  kafka_columns: [key, value]}", 1),
			`p.yaml:5: table.kafka_columns: unknown Kafka column "value" (fix: use any of key, headers, topic, partition, offset, timestamp)`},
		{"twice", strings.Replace(goodConfig, "create: true}", "create: true, kafka_columns: [offset, offset]}", 1),
			`p.yaml:4: table.kafka_columns lists "offset" twice (fix: list each Kafka column once)`},
		{"bad format", strings.Replace(goodConfig, "create: true}", "create: true, kafka_columns: [key], key_format: xml}", 1),
			`p.yaml:4: table.key_format "xml" is not bytes, string, avro, connect_json or json (fix: use bytes (default), string, avro, connect_json or json)`},
		{"json format without key", strings.Replace(goodConfig, "create: true}", "create: true, kafka_columns: [offset], key_format: connect_json}", 1),
			`p.yaml:4: table.key_format connect_json has no effect: table.kafka_columns does not list key (fix: add key to table.kafka_columns, or remove key_format)`},
		{"format without key", strings.Replace(goodConfig, "create: true}", "create: true, kafka_columns: [offset], key_format: string}", 1),
			`p.yaml:4: table.key_format string has no effect: table.kafka_columns does not list key (fix: add key to table.kafka_columns, or remove key_format)`},
		// A Kafka column's type is fixed by the configuration: a binary key, a struct key or
		// the headers map cannot be a partition column, and that is known at start-up.
		{"binary key partition", strings.Replace(goodConfig, "create: true}", "create: true, partition_by: [_KAFKA_KEY], kafka_columns: [key]}", 1),
			`p.yaml:4: table.partition_by: column "_KAFKA_KEY" is _kafka_key, binary under key_format bytes: unsupported partition column type: binary (fix: use key_format string to partition by the key, or partition by another column)`},
		{"avro key partition", strings.Replace(goodConfig, "create: true}", "create: true, partition_by: [_kafka_key], kafka_columns: [key], key_format: avro}", 1),
			`p.yaml:4: table.partition_by: column "_kafka_key" is _kafka_key, a struct under key_format avro: unsupported partition column type: struct (fix: use key_format string to partition by the key, or partition by another column)`},
		{"headers partition", strings.Replace(goodConfig, "create: true}", "create: true, partition_by: [_kafka_headers], kafka_columns: [headers]}", 1),
			`p.yaml:4: table.partition_by: column "_kafka_headers" is _kafka_headers, map<string, binary>: unsupported partition column type: map (fix: partition by another column)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorsOf(t, tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// The maintenance block: defaults, and every bad value named with its line and fix.
func TestMaintenanceConfig(t *testing.T) {
	cfgs, err := Load(configtest.Write(t, goodConfig+"maintenance:\n  optimize: {every: 15m}\n  vacuum: {every: 24h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := cfgs[0].Maintenance
	if o := m.Optimize; o.Every != 15*time.Minute || o.TargetFileSize != 256<<20 || o.MinFiles != 10 || o.MaxRewriteRate != 0 {
		t.Errorf("optimize defaults: %+v", *o)
	}
	if v := m.Vacuum; v.Every != 24*time.Hour || v.Retain != 0 {
		t.Errorf("vacuum defaults: %+v", *v)
	}
	cfgs, err = Load(configtest.Write(t, goodConfig+"maintenance:\n  optimize: {every: 2s, target_file_size: 64MiB, min_files: 4, max_rewrite_rate: 1MB}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o := cfgs[0].Maintenance.Optimize; o.Every != 2*time.Second || o.TargetFileSize != 64<<20 || o.MinFiles != 4 || o.MaxRewriteRate != 1e6 || cfgs[0].Maintenance.Vacuum != nil {
		t.Errorf("optimize: %+v, vacuum %v", *o, cfgs[0].Maintenance.Vacuum)
	}
	tests := []struct{ name, body, want string }{
		{"every missing", "maintenance:\n  optimize: {min_files: 4}\n",
			`p.yaml:8: maintenance.optimize.every 0s is missing or shorter than 1s (fix: set an interval such as every: 15m)`},
		{"target too small", "maintenance:\n  optimize:\n    every: 1m\n    target_file_size: 1KiB\n",
			`p.yaml:10: maintenance.optimize.target_file_size 1024 bytes is below 1MiB (fix: use a size such as 256MiB)`},
		{"min files", "maintenance:\n  optimize:\n    every: 1m\n    min_files: 1\n",
			`p.yaml:10: maintenance.optimize.min_files 1 is below 2 (one file cannot be compacted with itself) (fix: use e.g. min_files: 10)`},
		{"bad size", "maintenance:\n  optimize: {every: 1m, target_file_size: huge}\n",
			`p.yaml:8: maintenance.optimize.target_file_size: invalid byte size "huge": write a number with an optional unit, e.g. 128MiB (fix: write a size such as 128MiB)`},
		{"vacuum every", "maintenance:\n  vacuum:\n    retain: 200h\n",
			`p.yaml:8: maintenance.vacuum.every 0s is missing or shorter than 1s (fix: set an interval such as every: 24h)`},
		{"unknown job key", "maintenance:\n  optimise: {every: 1m}\n",
			`p.yaml:8: unknown field "optimise" in maintenance (fix: remove it or correct its spelling: did you mean "optimize"?; known keys here: optimize, vacuum)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorsOf(t, goodConfig+tt.body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestConfigHostnameFallback: bash sets HOSTNAME without exporting it, so a daemon started
// from a shell sees none; instance_id: ${HOSTNAME} is then the host name (os.Hostname), while
// ${HOSTNAME:-x} keeps its default and an exported HOSTNAME wins.
func TestConfigHostnameFallback(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skipf("no host name: %v", err)
	}
	load := func(instanceID string) string {
		t.Helper()
		body := strings.Replace(goodConfig, `topics: [orders]}`, `topics: [orders], instance_id: "`+instanceID+`"}`, 1)
		cfgs, err := Load(configtest.Write(t, body))
		if err != nil {
			t.Fatal(err)
		}
		return cfgs[0].Kafka.InstanceID
	}
	t.Setenv("HOSTNAME", "")
	os.Unsetenv("HOSTNAME")
	if got := load("${HOSTNAME}"); got != host {
		t.Errorf("instance_id ${HOSTNAME} without HOSTNAME = %q, want the host name %q", got, host)
	}
	if got := load("${HOSTNAME:-static-1}"); got != "static-1" {
		t.Errorf("instance_id ${HOSTNAME:-static-1} without HOSTNAME = %q, want the default", got)
	}
	t.Setenv("HOSTNAME", "pod-7")
	if got := load("${HOSTNAME}"); got != "pod-7" {
		t.Errorf("instance_id ${HOSTNAME} with HOSTNAME=pod-7 = %q", got)
	}
}

// TestConfigMessagesForCarriedOverKeys: an ssl: block (Kafka's and librdkafka's name) is
// pointed to tls, not to sasl, the nearest spelling; an unquoted ${VAR} in a flow list or
// mapping, which YAML reads as the start of a mapping, gets the fix to quote it.
func TestConfigMessagesForCarriedOverKeys(t *testing.T) {
	cases := []struct{ name, from, to, want string }{
		{"ssl", `topics: [orders]}`, `topics: [orders], ssl: {ca_file: /ca.pem}}`,
			`:2: unknown field "ssl" in kafka (fix: TLS settings go under tls (e.g. tls: {ca_file: /etc/ingestd/kafka-ca.pem}); Kafka's security.protocol SSL is tls, SASL_SSL is tls and sasl; known keys here: brokers, topics, topic_pattern, discover_every, group, start_offset, session_timeout, client_id, instance_id, tls, sasl)`},
		{"flow list", `brokers: ["k:9092"]`, `brokers: [${KAFKA_BROKERS}]`,
			`:2: invalid YAML in the list or mapping that starts here: did not find expected ',' or ']' (fix: quote ${KAFKA_BROKERS} as "${KAFKA_BROKERS}": inside [ ] or { } an unquoted ${ opens a YAML mapping (e.g. brokers: ["${KAFKA_BROKERS}"]))`},
		{"flow mapping", `brokers: ["k:9092"]`, `brokers: ${KAFKA_BROKERS}`,
			`:2: invalid YAML in the list or mapping that starts here: did not find expected ',' or '}' (fix: quote ${KAFKA_BROKERS} as "${KAFKA_BROKERS}": inside [ ] or { } an unquoted ${ opens a YAML mapping (e.g. brokers: ["${KAFKA_BROKERS}"]))`},
		{"quoted is fine elsewhere", `url: "http://r:8081"}`, `url: "http://r:8081", x: 1}`,
			`:3: unknown field "x" in schema_registry (fix: remove it or correct its spelling; known keys here: `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("KAFKA_BROKERS", "k:9092")
			path := configtest.Write(t, strings.Replace(goodConfig, c.from, c.to, 1))
			_, err := Load(path)
			if err == nil || !strings.HasPrefix(err.Error(), path+c.want) {
				t.Fatalf("Load: %v\nwant prefix\n%s%s", err, path, c.want)
			}
		})
	}
}
