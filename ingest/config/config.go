package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ingestd/ingestd/deltawriter/deltalog"
	"github.com/ingestd/ingestd/deltawriter/storage"
	"github.com/ingestd/ingestd/ingest/kafkacols"
)

// The record formats a pipeline's `format` names (docs/formats.md).
const (
	FormatAvro        = "avro"
	FormatProtobuf    = "protobuf"
	FormatJSONSchema  = "json_schema"
	FormatJSON        = "json"
	FormatConnectJSON = "connect_json"
)

// Config is one pipeline: one YAML file, one table. Field names are the YAML keys.
type Config struct {
	Name           string    `yaml:"name"`
	AppID          string    `yaml:"app_id"` // txn appId prefix; defaults to Name
	Kafka          Kafka     `yaml:"kafka"`
	SchemaRegistry *Registry `yaml:"schema_registry"`
	AvroSchemaFile string    `yaml:"avro_schema_file"` // raw (unframed) Avro with this writer schema
	// Format is the record values' format (docs/formats.md): avro (default), protobuf,
	// json_schema, json or connect_json.
	Format     string     `yaml:"format"`
	Table      Table      `yaml:"table"`
	Schema     Schema     `yaml:"schema"`
	DeadLetter DeadLetter `yaml:"dead_letter"`
	Batch      Batch      `yaml:"batch"`
	// Maintenance is the optional background table maintenance of `ingestd run`
	// (docs/maintenance.md); absent: none.
	Maintenance Maintenance `yaml:"maintenance"`

	// File is the path the config was loaded from (set by Load).
	File string `yaml:"-"`
	// Warnings are settings that work but are unsafe (SASL without TLS, skipped
	// certificate checks); `validate` prints them and `run` logs them at WARN.
	Warnings []*Error `yaml:"-"`

	lines map[string]int // line of every YAML path seen ("$.schema.policy"), for validation errors
}

// Kafka names the source topics and the consumer group.
type Kafka struct {
	Brokers []string `yaml:"brokers"`
	Topics  []string `yaml:"topics"`
	// TopicPattern, instead of Topics, reads every topic whose whole name matches this
	// RE2 expression, each into its own table (Table.URI a template with {topic} or the
	// pattern's named groups), under the one consumer group (ForTopic).
	TopicPattern string `yaml:"topic_pattern"`
	// DiscoverEvery is how often a TopicPattern pipeline lists the cluster's topics for
	// new matches (default 30s): a topic created while it runs is read within this.
	DiscoverEvery time.Duration `yaml:"discover_every"`
	Group         string        `yaml:"group"`        // defaults to "ingestd-<name>"
	StartOffset   string        `yaml:"start_offset"` // earliest (default) | latest: used when the table has no txn for a partition
	// SessionTimeout is how long the group coordinator waits for a silent member (e.g. a
	// killed process) before moving its partitions; default 45s, the broker allows 6s..30m.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// ClientID names ingestd in broker logs, quotas and ACL audit (default "ingestd").
	ClientID string `yaml:"client_id"`
	// InstanceID turns on static group membership (KIP-345) for the consumer: a restart
	// within session_timeout gets its partitions back without a rebalance. Unique per
	// process in the group, e.g. ${HOSTNAME} in a StatefulSet.
	InstanceID string `yaml:"instance_id"`
	TLS        *TLS   `yaml:"tls"`  // absent: plaintext; `tls: {}`: TLS with the system roots
	SASL       *SASL  `yaml:"sasl"` // absent: no SASL
}

// Registry is a Confluent-compatible schema registry.
type Registry struct {
	URL      string `yaml:"url"`
	Username string `yaml:"username"`
	// Password is a literal password (kept for compatibility; prefer PasswordFile or
	// PasswordEnv, resolved after parsing and re-read on every request).
	Password        Secret `yaml:"password"`
	PasswordFile    string `yaml:"password_file"`
	PasswordEnv     string `yaml:"password_env"`
	BearerTokenFile string `yaml:"bearer_token_file"` // instead of basic auth; re-read on every request
	TLS             *TLS   `yaml:"tls"`
}

// Table locates the Delta table.
type Table struct {
	// URI is the table root: file:///abs/path or /abs/path, s3://bucket/path,
	// gs://bucket/path, az://container/path or
	// abfss://container@account.dfs.core.windows.net/path (see storage.OpenWith).
	URI         string   `yaml:"uri"`
	Create      bool     `yaml:"create"` // create the table on first write if it does not exist
	PartitionBy []string `yaml:"partition_by"`
	// GeneratedColumns are the generated columns of a table ingestd creates: column name →
	// Spark SQL generation expression (expr.Supported), stored as
	// delta.generationExpression; the column's type is the expression's result type.
	GeneratedColumns map[string]string `yaml:"generated_columns"`
	Properties       map[string]string `yaml:"properties"` // table properties set on create, e.g. delta.checkpointInterval
	// ColumnMapping is delta.columnMapping.mode for a table ingestd creates: none
	// (default), name or id. Names such as "order id" need it.
	ColumnMapping string `yaml:"column_mapping"`
	// KafkaColumns are the Kafka columns the table gets and ingestd fills from each
	// record (any of key, headers, topic, partition, offset, timestamp: _kafka_key, …;
	// see kafkacols). Opt-in: none by default.
	KafkaColumns []string `yaml:"kafka_columns"`
	// KeyFormat is how _kafka_key holds the record key and how a keyed table's tombstones
	// name their key: bytes (default: binary), string (UTF-8 text), avro
	// (Confluent-framed, decoded via the registry into a struct), connect_json (Kafka
	// Connect's JsonConverter with schemas; _kafka_key is the payload's JSON text) or json
	// (plain JSON; _kafka_key is its text).
	KeyFormat string `yaml:"key_format"`
	// Storage holds optional object-store settings; credentials always come from the
	// cloud's standard environment and credential chain, never from this file.
	Storage Storage `yaml:"storage"`

	// Mode is how records become rows: append (default: every record is a new row),
	// upsert (the table holds the latest row per Key) or changelog (every change of a key
	// is a new row with its operation and sequence; docs/keyed-tables.md).
	Mode string `yaml:"mode"`
	// Key are the key columns of an upsert table: top-level columns of the row
	// (keyindex.CheckKeyColumns says which types).
	Key []string `yaml:"key"`
	// SequenceBy is the top-level column that orders the changes of one key (an integer,
	// date or timestamp column); empty: the order the records are read in (the Kafka
	// offset within a partition). Ties are broken by that order.
	SequenceBy string `yaml:"sequence_by"`
	// DeleteWhen is a Spark SQL boolean expression over the row's columns (the
	// expression subset of CHECK constraints): a record whose row makes it true deletes
	// its key instead of being written, e.g. "op = 'd'". A tombstone (null value) always
	// deletes the key its Kafka key names.
	DeleteWhen string `yaml:"delete_when"`
	// DeleteHorizon is how long a delete's sequence is remembered per key, so that a
	// change with an older sequence arriving later does not bring the row back; past it
	// such a change is applied. Only with SequenceBy. Default 24h.
	DeleteHorizon time.Duration `yaml:"delete_horizon"`
	// UpsertWrite is how an upsert table's replaced and deleted rows leave it:
	// merge_on_read (default: marked in deletion vectors) or copy_on_write (the files
	// holding them rewritten without them, for readers without deletion vector support).
	UpsertWrite string `yaml:"upsert_write"`
	// Deletes is what a delete does to an upsert table's row: hard (default: the row is
	// gone) or soft (the row stays with _deleted true and the delete's sequence in
	// _deleted_sequence; docs/keyed-tables.md, Soft deletes).
	Deletes string `yaml:"deletes"`
	// Envelope is how a keyed table's record values carry their change: "" (the value is
	// the row), debezium (Debezium's change event: the row is after, or before for a
	// delete) or debezium_flattened (the row as ExtractNewRecordState leaves it, its "__"
	// fields the envelope's); docs/keyed-tables.md, Change data capture.
	Envelope string `yaml:"envelope"`
	// EnvelopeColumns are the envelope's fields the table gets as columns, filled from
	// each change (any of op, lsn, source_ts_ms, ts_ms: _op, _source_lsn, …). Only with
	// Envelope; none by default.
	EnvelopeColumns []string `yaml:"envelope_columns"`
	// UnavailableValue is the text Debezium sends for a column whose value it does not
	// have (PostgreSQL's unchanged TOASTed values under REPLICA IDENTITY DEFAULT; the
	// connector's unavailable.value.placeholder): such a column keeps the key's current
	// value instead (Table.Placeholder). Only with Envelope; "" is
	// DefaultUnavailableValue.
	UnavailableValue string `yaml:"unavailable_value"`
}

// Write modes of table.mode, and the ways of table.upsert_write.
const (
	ModeAppend    = "append"
	ModeUpsert    = "upsert"
	ModeChangelog = "changelog"

	DeletesHard = "hard"
	DeletesSoft = "soft"

	MergeOnRead = "merge_on_read"
	CopyOnWrite = "copy_on_write"

	EnvelopeDebezium          = "debezium"
	EnvelopeDebeziumFlattened = "debezium_flattened"

	// SequenceLSN and SequenceSourceTsMs are the envelope paths table.sequence_by may
	// name with an envelope: Debezium's source.lsn (the flattened form's __lsn) and
	// source.ts_ms (__source_ts_ms).
	SequenceLSN        = "source.lsn"
	SequenceSourceTsMs = "source.ts_ms"
)

// The envelope fields table.envelope_columns may name.
const (
	EnvelopeOp         = "op"           // the change's operation: c, u, r or d
	EnvelopeLSN        = "lsn"          // source.lsn (flattened: __lsn)
	EnvelopeSourceTsMs = "source_ts_ms" // source.ts_ms (flattened: __source_ts_ms)
	EnvelopeTsMs       = "ts_ms"        // the envelope's ts_ms (flattened: __ts_ms)
)

// EnvelopeFields are the values of table.envelope_columns, in the order their columns
// are added.
var EnvelopeFields = []string{EnvelopeOp, EnvelopeLSN, EnvelopeSourceTsMs, EnvelopeTsMs}

// Keyed reports whether the pipeline writes a keyed table (table.mode upsert or
// changelog): its records carry a key, and a tombstone deletes the key it names.
func (t Table) Keyed() bool { return t.Mode == ModeUpsert || t.Mode == ModeChangelog }

// Upsert reports whether the table holds the latest row per key (table.mode upsert).
func (t Table) Upsert() bool { return t.Mode == ModeUpsert }

// Changelog reports whether every change of a key is appended as a row (table.mode
// changelog).
func (t Table) Changelog() bool { return t.Mode == ModeChangelog }

// SoftDeletes reports whether an upsert table keeps a deleted key's row flagged
// (table.deletes soft) instead of removing it.
func (t Table) SoftDeletes() bool { return t.Upsert() && t.Deletes == DeletesSoft }

// CopyOnWrite reports whether an upsert table's replaced rows leave it by rewriting their
// files (table.upsert_write copy_on_write) instead of deletion vectors.
func (t Table) CopyOnWrite() bool { return t.Upsert() && t.UpsertWrite == CopyOnWrite }

// Storage is table.storage: settings of the table's object store.
type Storage struct {
	// Endpoint is an S3-compatible server (MinIO, R2, Ceph, versitygw; path-style
	// addressing is then used) or an Azure Blob endpoint (Azurite). Default: the cloud's
	// own, or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL.
	Endpoint string `yaml:"endpoint"`
	// Region is the S3 region; default AWS_REGION, the shared config, else us-east-1.
	Region string `yaml:"region"`
}

// StorageOptions returns the storage.Options of table.storage.
func (t Table) StorageOptions() storage.Options {
	return storage.Options{Endpoint: t.Storage.Endpoint, Region: t.Storage.Region}
}

// Schema is the guard's policy for this table.
type Schema struct {
	Policy             string   `yaml:"policy"`          // evolve | dead_letter | halt
	OnIncompatible     string   `yaml:"on_incompatible"` // halt (default) | dead_letter: what evolve does with changes it cannot make
	AllowTableFeatures []string `yaml:"allow_table_features"`
}

// DeadLetter is where records that cannot be written go.
type DeadLetter struct {
	Topic string `yaml:"topic"`
}

// Batch bounds one Delta commit.
type Batch struct {
	MaxRecords int           `yaml:"max_records"`
	MaxBytes   ByteSize      `yaml:"max_bytes"`
	MaxAge     time.Duration `yaml:"max_age"`
	// MaxOpenPartitions bounds the partition values (data files) one flush writes to a
	// partitioned table (default 256): per source partition, the records from the first
	// one that would open one value more are left for the next flush.
	MaxOpenPartitions int `yaml:"max_open_partitions"`
}

// Maintenance is the maintenance block: background OPTIMIZE and VACUUM of the
// pipeline's table, run by one goroutine per table off the commit path (docs/maintenance.md).
// Each job is off when its block is absent.
type Maintenance struct {
	Optimize *Optimize `yaml:"optimize"`
	Vacuum   *Vacuum   `yaml:"vacuum"`
}

// Optimize is maintenance.optimize: bin-packing compaction
// (maintenance.Optimize).
type Optimize struct {
	// Every is the interval between runs (required, at least 1s); the first run starts
	// after a random part of it (jitter), so daemons started together spread out.
	Every time.Duration `yaml:"every"`
	// TargetFileSize is the size files are compacted towards, in bytes (default 256MiB);
	// files at least this large are left alone.
	TargetFileSize ByteSize `yaml:"target_file_size"`
	// MinFiles is how many small files a partition needs before it is compacted
	// (default 10, at least 2).
	MinFiles int `yaml:"min_files"`
	// MaxRewriteRate bounds the bytes read per second while rewriting (default 0:
	// unthrottled), so compaction leaves the store's bandwidth to the pipeline.
	MaxRewriteRate ByteSize `yaml:"max_rewrite_rate"`
}

// Vacuum is maintenance.vacuum: deletion of files no version inside the retention
// still references (maintenance.Vacuum).
type Vacuum struct {
	// Every is the interval between runs (required, at least 1s), jittered like optimize.
	Every time.Duration `yaml:"every"`
	// Retain is how long removed and orphaned files are kept. 0 (unset): the table's own
	// delta.deletedFileRetentionDuration (7 days unless the table sets it), as `ingestd
	// table vacuum` without --retain; a value shorter than the table's setting fails each
	// run (background vacuums never force).
	Retain time.Duration `yaml:"retain"`
}

// Defaults of maintenance.optimize.
const (
	DefaultTargetFileSize = ByteSize(256 << 20)
	DefaultMinFiles       = 10
)

// ByteSize is a size in bytes that YAML may spell as 134217728, "128MiB", "64MB" or "512KiB".
type ByteSize int64

var sizeRe = regexp.MustCompile(`^\s*(\d+)\s*([KMGT]i?B|B)?\s*$`)

// UnmarshalText parses a byte size; decimal units (KB, MB) are powers of 1000, binary
// units (KiB, MiB) powers of 1024. The config decoder adds the key and line to errors.
func (s *ByteSize) UnmarshalText(b []byte) error {
	n, err := parseByteSize(string(b))
	if err != nil {
		return err
	}
	*s = n
	return nil
}

func parseByteSize(str string) (ByteSize, error) {
	m := sizeRe.FindStringSubmatch(str)
	if m == nil {
		return 0, fmt.Errorf("invalid byte size %q: write a number with an optional unit, e.g. 128MiB", str)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid byte size %q: %w", str, err)
	}
	mult := map[string]int64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	return ByteSize(n * mult), nil
}

// The values of schema.policy (docs/schema-policies.md, Decision table).
const (
	PolicyEvolve     = "evolve"
	PolicyDeadLetter = "dead_letter"
	PolicyHalt       = "halt"
)

// Error is one problem in one config file, with the line it is on (0 if unknown)
// and the change that fixes it.
type Error struct {
	File string
	Line int
	Msg  string
	Fix  string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	s := loc + ": " + e.Msg
	if e.Fix != "" {
		s += " (fix: " + e.Fix + ")"
	}
	return s
}

// Load loads one pipeline file, or every *.yaml / *.yml file of a directory (not
// recursive), expands ${VAR} and ${VAR:-default} from the environment, rejects unknown
// keys, applies defaults and validates everything. It returns the pipelines sorted by file
// name, or an error joining every Error found in every file (errors.Join), so a user
// sees all problems at once.
func Load(path string) ([]*Config, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	files := []string{path}
	if st.IsDir() {
		files = nil
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("read config dir %s: %w", path, err)
		}
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, &Error{File: path, Msg: "no *.yaml pipeline files in directory", Fix: "add one file per pipeline, see configs/"}
		}
	}
	var cfgs []*Config
	var errs []error
	names := map[string]string{}
	for _, f := range files {
		c, ferrs := loadConfigFile(f)
		errs = append(errs, ferrs...)
		if c == nil {
			continue
		}
		if prev, dup := names[c.Name]; dup {
			errs = append(errs, &Error{File: f, Line: c.Line("$.name"), Msg: fmt.Sprintf("pipeline name %q is also used by %s", c.Name, prev), Fix: "give every pipeline a unique name"})
		}
		names[c.Name] = f
		for _, prev := range cfgs {
			if prev.Routed() || c.Routed() {
				if what := routedOverlap(prev, c); what != "" {
					errs = append(errs, &Error{File: f, Line: c.Line("$.table.uri"),
						Msg: fmt.Sprintf("pipeline %q writes %s, like pipeline %q (%s): every record would land twice", c.Name, what, prev.Name, prev.File),
						Fix: "give each pipeline its own tables (another table.uri), or a kafka.topic_pattern that matches other topics"})
				}
				continue
			}
			if shared := sharedTopics(prev, c); sameTable(prev.Table.URI, c.Table.URI) && len(shared) > 0 {
				errs = append(errs, &Error{File: f, Line: c.Line("$.table.uri"),
					Msg: fmt.Sprintf("pipeline %q writes topic %v into table %s, like pipeline %q (%s): every record would land twice", c.Name, shared, c.Table.URI, prev.Name, prev.File),
					Fix: "give each pipeline its own table, or let one pipeline read both topics (kafka.topics takes a list)"})
			}
		}
		cfgs = append(cfgs, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfgs, nil
}

// routedOverlap says what a and b, one of them or both with kafka.topic_pattern, would
// both write into the same table ("" when nothing can be shown to): with the same
// pattern and table.uri template, every matching topic; with one topics list, each
// listed topic that the other's pattern routes into the list's table. Two different
// patterns are not compared (what they both match depends on the cluster's topics).
func routedOverlap(a, b *Config) string {
	if a.Routed() && b.Routed() {
		if a.Kafka.TopicPattern == b.Kafka.TopicPattern && sameTable(a.Table.URI, b.Table.URI) {
			return fmt.Sprintf("every topic matching kafka.topic_pattern %q into table %s", a.Kafka.TopicPattern, a.Table.URI)
		}
		return ""
	}
	if b.Routed() {
		a, b = b, a
	}
	var shared []string
	for _, t := range b.Kafka.Topics {
		if tc, err := a.ForTopic(t); err == nil && sameTable(tc.Table.URI, b.Table.URI) {
			shared = append(shared, t)
		}
	}
	if len(shared) == 0 {
		return ""
	}
	return fmt.Sprintf("topic %v into table %s", shared, b.Table.URI)
}

// sameTable reports whether two table URIs (or templates) name one location, written
// alike or not (a trailing slash, file:// or a plain path: storage.CanonicalURI).
func sameTable(a, b string) bool { return storage.CanonicalURI(a) == storage.CanonicalURI(b) }

// sharedTopics returns the source topics a and b both read.
func sharedTopics(a, b *Config) []string {
	var out []string
	for _, t := range b.Kafka.Topics {
		if slices.Contains(a.Kafka.Topics, t) {
			out = append(out, t)
		}
	}
	return out
}

var envRe = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// loadConfigFile decodes and validates one pipeline file; see decodeYAML for what is
// reported. The result is nil when there is any error.
func loadConfigFile(file string) (*Config, []error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, []error{&Error{File: file, Msg: err.Error()}}
	}
	c := &Config{}
	lines, errs := decodeYAML(file, raw, c)
	if len(errs) > 0 {
		return nil, errs
	}
	c.File, c.lines = file, lines
	c.applyDefaults()
	if errs := c.validate(); len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// line returns the 1-based line of a YAML path ("$", "$.schema.policy",
// "$.schema.allow_table_features[0]"): the key's line for a mapping entry, the item's for
// a list entry; for a path that is absent, the line of its nearest present parent; 0 for
// an empty file.
func (c *Config) Line(path string) int {
	for path != "" {
		if l, ok := c.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

func (c *Config) applyDefaults() {
	if c.AppID == "" {
		c.AppID = c.Name
	}
	if c.Format == "" {
		c.Format = FormatAvro
	}
	var brokers []string
	for _, b := range c.Kafka.Brokers {
		for _, one := range strings.Split(b, ",") {
			if one = strings.TrimSpace(one); one != "" {
				brokers = append(brokers, one)
			}
		}
	}
	if len(brokers) > 0 {
		c.Kafka.Brokers = brokers
	}
	if c.Kafka.Group == "" && c.Name != "" {
		c.Kafka.Group = "ingestd-" + c.Name
	}
	if c.Kafka.TopicPattern != "" && c.Kafka.DiscoverEvery == 0 {
		c.Kafka.DiscoverEvery = DefaultDiscoverEvery
	}
	if c.Kafka.SessionTimeout == 0 {
		c.Kafka.SessionTimeout = 45 * time.Second
	}
	if c.Kafka.StartOffset == "" {
		c.Kafka.StartOffset = "earliest"
	}
	if c.Table.KeyFormat == "" {
		c.Table.KeyFormat = kafkacols.KeyBytes
	}
	if c.Table.Mode == "" {
		c.Table.Mode = ModeAppend
	}
	if c.Table.Upsert() && c.Table.DeleteHorizon == 0 {
		c.Table.DeleteHorizon = DefaultDeleteHorizon
	}
	if c.Table.Upsert() && c.Table.UpsertWrite == "" {
		c.Table.UpsertWrite = MergeOnRead
	}
	if c.Table.Upsert() && c.Table.Deletes == "" {
		c.Table.Deletes = DeletesHard
	}
	if c.Schema.OnIncompatible == "" {
		c.Schema.OnIncompatible = PolicyHalt
	}
	if c.Batch.MaxRecords == 0 {
		c.Batch.MaxRecords = 100_000
	}
	if c.Batch.MaxBytes == 0 {
		c.Batch.MaxBytes = 128 << 20
	}
	if c.Batch.MaxAge == 0 {
		c.Batch.MaxAge = 10 * time.Second
	}
	if c.Batch.MaxOpenPartitions == 0 {
		c.Batch.MaxOpenPartitions = 256
	}
	if o := c.Maintenance.Optimize; o != nil {
		if o.TargetFileSize == 0 {
			o.TargetFileSize = DefaultTargetFileSize
		}
		if o.MinFiles == 0 {
			o.MinFiles = DefaultMinFiles
		}
	}
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (c *Config) validate() []error {
	var errs []error
	bad := func(path, msg, fix string) {
		errs = append(errs, &Error{File: c.File, Line: c.Line(path), Msg: msg, Fix: fix})
	}
	if c.Name == "" {
		bad("$", "name is missing", "add `name: <pipeline-name>`")
	} else if !namePattern.MatchString(c.Name) {
		bad("$.name", fmt.Sprintf("name %q has characters other than letters, digits, '.', '_' and '-'", c.Name), "rename the pipeline")
	}
	if len(c.Kafka.Brokers) == 0 || slicesHasEmpty(c.Kafka.Brokers) {
		bad("$.kafka", "kafka.brokers is missing or has an empty entry", `set kafka.brokers: ["host:9092"]`)
	}
	c.validateTopics(bad)
	if c.Kafka.StartOffset != "earliest" && c.Kafka.StartOffset != "latest" {
		bad("$.kafka.start_offset", fmt.Sprintf("kafka.start_offset %q is not earliest or latest", c.Kafka.StartOffset), "use earliest or latest")
	}
	if c.Kafka.SessionTimeout < 6*time.Second || c.Kafka.SessionTimeout > 30*time.Minute {
		bad("$.kafka.session_timeout", fmt.Sprintf("kafka.session_timeout %v is outside the broker's default range 6s..30m", c.Kafka.SessionTimeout), "use e.g. 45s")
	}
	switch c.Format {
	case FormatAvro:
	case FormatProtobuf, FormatJSONSchema:
		if c.SchemaRegistry == nil {
			bad("$.format", fmt.Sprintf("format %s needs schema_registry: its records are Confluent-framed with the id of their registry schema", c.Format), `add schema_registry: {url: "http://registry:8081"}`)
		}
		if c.AvroSchemaFile != "" {
			bad("$.avro_schema_file", fmt.Sprintf("avro_schema_file is set with format %s", c.Format), "remove avro_schema_file: the registry serves the schemas of "+c.Format+" records")
		}
	case FormatJSON, FormatConnectJSON:
		if c.SchemaRegistry != nil {
			bad("$.schema_registry", fmt.Sprintf("schema_registry is set with format %s, whose records carry no schema id", c.Format), "remove schema_registry, or use format json_schema for Confluent-framed JSON")
		}
		if c.Format == FormatConnectJSON && c.AvroSchemaFile != "" {
			bad("$.avro_schema_file", "avro_schema_file is set with format connect_json, whose records embed their schema", "remove avro_schema_file")
		}
	default:
		bad("$.format", fmt.Sprintf("format %q is not avro, protobuf, json_schema, json or connect_json", c.Format), "use one of avro (the default), protobuf, json_schema, json, connect_json")
	}
	switch {
	case c.Format != FormatAvro:
		// The format's checks above say which of the two it takes.
		c.checkSchemaFile(bad)
		c.checkRegistryURL(bad)
	case c.SchemaRegistry == nil && c.AvroSchemaFile == "":
		bad("$", "neither schema_registry nor avro_schema_file is set", `add schema_registry: {url: "http://registry:8081"} for Confluent-framed Avro, or avro_schema_file: x.avsc for raw Avro`)
	case c.SchemaRegistry != nil && c.AvroSchemaFile != "":
		bad("$.avro_schema_file", "both schema_registry and avro_schema_file are set", "keep one: schema_registry for Confluent-framed records, avro_schema_file for raw Avro")
	case c.SchemaRegistry != nil:
		c.checkRegistryURL(bad)
	default:
		c.checkSchemaFile(bad)
	}
	if c.Table.URI == "" {
		bad("$.table", "table.uri is missing", `set table.uri: "file:///var/lib/ingestd/<table>"`)
	} else if err := storage.CheckURI(c.templateURI(), storage.Options{}); err != nil {
		bad("$.table.uri", fmt.Sprintf("table.uri %q: %v", c.Table.URI, err), `use file:///abs/path, s3://bucket/path, gs://bucket/path, az://container/path or abfss://container@account.dfs.core.windows.net/path`)
	} else if err := storage.CheckURI(c.templateURI(), c.Table.StorageOptions()); err != nil {
		path := "$.table.storage.endpoint"
		if c.Table.Storage.Endpoint == "" || strings.Contains(err.Error(), "region") {
			path = "$.table.storage.region"
		}
		bad(path, fmt.Sprintf("table.%v", err), "remove the setting or correct it")
	}
	switch c.Table.ColumnMapping {
	case "", "none", "name", "id":
	default:
		bad("$.table.column_mapping", fmt.Sprintf("table.column_mapping %q is not none, name or id", c.Table.ColumnMapping), "use name (recommended) or id")
	}
	seenPart := map[string]bool{}
	for i, col := range c.Table.PartitionBy {
		switch k := deltalog.NameKey(col); {
		case strings.TrimSpace(col) == "":
			bad(fmt.Sprintf("$.table.partition_by[%d]", i), "table.partition_by: an empty column name", "name a top-level column of the table, e.g. partition_by: [event_date]")
		case seenPart[k]:
			bad(fmt.Sprintf("$.table.partition_by[%d]", i), fmt.Sprintf("table.partition_by: column %q is listed twice", col), "list each partition column once")
		default:
			seenPart[k] = true
		}
	}
	if c.Batch.MaxOpenPartitions < 0 {
		bad("$.batch.max_open_partitions", fmt.Sprintf("batch.max_open_partitions %d is negative", c.Batch.MaxOpenPartitions), "use a positive number of partition values per flush (default 256)")
	}
	errs = append(errs, c.validateGenerated()...)
	c.validateKafkaColumns(bad)
	c.validateKeyed(bad)
	switch c.Schema.Policy {
	case PolicyEvolve, PolicyDeadLetter, PolicyHalt:
	case "":
		bad("$.schema", "schema.policy is missing", "set schema.policy to evolve, dead_letter or halt")
	default:
		bad("$.schema.policy", fmt.Sprintf("schema.policy %q is not evolve, dead_letter or halt", c.Schema.Policy), "use evolve (bronze), dead_letter (silver) or halt (gold)")
	}
	if c.Schema.OnIncompatible != PolicyHalt && c.Schema.OnIncompatible != PolicyDeadLetter {
		bad("$.schema.on_incompatible", fmt.Sprintf("schema.on_incompatible %q is not halt or dead_letter", c.Schema.OnIncompatible), "use halt or dead_letter")
	}
	for i, f := range c.Schema.AllowTableFeatures {
		switch f {
		case deltalog.FeatureTypeWidening, deltalog.FeatureTimestampNtz, deltalog.FeatureColumnMapping:
		default:
			bad(fmt.Sprintf("$.schema.allow_table_features[%d]", i), fmt.Sprintf("unknown table feature %q", f), "use typeWidening, timestampNtz or columnMapping")
		}
	}
	needsDLQ := c.Schema.Policy == PolicyDeadLetter || c.Schema.OnIncompatible == PolicyDeadLetter
	if needsDLQ && c.DeadLetter.Topic == "" {
		bad("$.dead_letter", "dead_letter.topic is missing but the policy sends records to a dead-letter topic", "set dead_letter: {topic: <topic>.dlq}")
	}
	for _, t := range c.Kafka.Topics {
		if t != "" && t == c.DeadLetter.Topic {
			bad("$.dead_letter.topic", fmt.Sprintf("dead_letter.topic %q is also a source topic", t), "use a separate dead-letter topic")
		}
	}
	c.validateSecurity(bad, func(path, msg, fix string) {
		c.Warnings = append(c.Warnings, &Error{File: c.File, Line: c.Line(path), Msg: msg, Fix: fix})
	})
	if c.Batch.MaxRecords < 0 {
		bad("$.batch.max_records", "batch.max_records is negative", "use a positive number")
	}
	if c.Batch.MaxBytes < 0 {
		bad("$.batch.max_bytes", "batch.max_bytes is negative", "use a size such as 128MiB")
	}
	if c.Batch.MaxAge < 0 {
		bad("$.batch.max_age", "batch.max_age is negative", "use a duration such as 10s")
	}
	c.validateMaintenance(bad)
	return errs
}

// checkSchemaFile makes a set avro_schema_file absolute (relative to the YAML file) and
// checks that it exists.
func (c *Config) checkSchemaFile(bad func(path, msg, fix string)) {
	if c.AvroSchemaFile == "" {
		return
	}
	if !filepath.IsAbs(c.AvroSchemaFile) {
		c.AvroSchemaFile = filepath.Join(filepath.Dir(c.File), c.AvroSchemaFile)
	}
	if _, err := os.Stat(c.AvroSchemaFile); err != nil {
		bad("$.avro_schema_file", fmt.Sprintf("avro_schema_file: %v", err), "point it at an existing .avsc file (relative paths are relative to this YAML file)")
	}
}

// checkRegistryURL checks that a set schema_registry.url is an http(s) URL.
func (c *Config) checkRegistryURL(bad func(path, msg, fix string)) {
	if c.SchemaRegistry != nil && !strings.HasPrefix(c.SchemaRegistry.URL, "http://") && !strings.HasPrefix(c.SchemaRegistry.URL, "https://") {
		bad("$.schema_registry.url", fmt.Sprintf("schema_registry.url %q is not an http(s) URL", redactURL(c.SchemaRegistry.URL)), `set schema_registry.url: "http://host:8081"`)
	}
}

// validateMaintenance checks the maintenance block.
func (c *Config) validateMaintenance(bad func(path, msg, fix string)) {
	if o := c.Maintenance.Optimize; o != nil {
		if o.Every < time.Second {
			bad("$.maintenance.optimize.every", fmt.Sprintf("maintenance.optimize.every %v is missing or shorter than 1s", o.Every), "set an interval such as every: 15m")
		}
		if o.TargetFileSize < 1<<20 {
			bad("$.maintenance.optimize.target_file_size", fmt.Sprintf("maintenance.optimize.target_file_size %d bytes is below 1MiB", o.TargetFileSize), "use a size such as 256MiB")
		}
		if o.MinFiles < 2 {
			bad("$.maintenance.optimize.min_files", fmt.Sprintf("maintenance.optimize.min_files %d is below 2 (one file cannot be compacted with itself)", o.MinFiles), "use e.g. min_files: 10")
		}
		if o.MaxRewriteRate < 0 {
			bad("$.maintenance.optimize.max_rewrite_rate", "maintenance.optimize.max_rewrite_rate is negative", "use a rate in bytes per second such as 64MiB, or leave it out")
		}
	}
	if v := c.Maintenance.Vacuum; v != nil {
		if v.Every < time.Second {
			bad("$.maintenance.vacuum.every", fmt.Sprintf("maintenance.vacuum.every %v is missing or shorter than 1s", v.Every), "set an interval such as every: 24h")
		}
		if v.Retain < 0 {
			bad("$.maintenance.vacuum.retain", "maintenance.vacuum.retain is negative", "use a duration such as 168h")
		}
	}
}

// validateKafkaColumns checks table.kafka_columns and table.key_format.
func (c *Config) validateKafkaColumns(bad func(path, msg, fix string)) {
	seen := map[string]bool{}
	for i, k := range c.Table.KafkaColumns {
		path := fmt.Sprintf("$.table.kafka_columns[%d]", i)
		switch {
		case !slices.Contains(kafkacols.All, k):
			bad(path, fmt.Sprintf("table.kafka_columns: unknown Kafka column %q", k), "use any of "+strings.Join(kafkacols.All, ", "))
		case seen[k]:
			bad(path, fmt.Sprintf("table.kafka_columns lists %q twice", k), "list each Kafka column once")
		}
		seen[k] = true
	}
	if !slices.Contains(kafkacols.KeyFormats, c.Table.KeyFormat) {
		bad("$.table.key_format", fmt.Sprintf("table.key_format %q is not bytes, string, avro, connect_json or json", c.Table.KeyFormat), "use bytes (default), string, avro, connect_json or json")
		return
	}
	switch {
	case c.Table.KeyFormat == kafkacols.KeyAvro && (c.Format == FormatJSON || c.Format == FormatConnectJSON):
		// Such a pipeline cannot have a registry (validate refuses schema_registry with these formats).
		bad("$.table.key_format", fmt.Sprintf("table.key_format avro reads Confluent-framed Avro keys through schema_registry, which format %s has none of", c.Format),
			"use key_format connect_json for keys of Kafka Connect's JsonConverter with schemas.enable=true ({\"schema\": …, \"payload\": …}), or json without schemas")
	case c.Table.KeyFormat == kafkacols.KeyAvro && c.SchemaRegistry == nil:
		bad("$.table.key_format", "table.key_format avro needs schema_registry (keys are Confluent-framed Avro, decoded by their schema id)", "set schema_registry, or use key_format bytes or string")
	}
	if c.Table.KeyFormat != kafkacols.KeyBytes && !seen[kafkacols.Key] && !c.Table.Keyed() { // a keyed table reads tombstones' keys in it
		bad("$.table.key_format", fmt.Sprintf("table.key_format %s has no effect: table.kafka_columns does not list key", c.Table.KeyFormat), "add key to table.kafka_columns, or remove key_format")
	}
	// A Kafka column's type is fixed by this file, so a partition column that cannot be
	// one (deltawriter.CheckPartitionColumns: binary, struct, map) is refused here, not at
	// the first flush's create.
	for i, col := range c.Table.PartitionBy {
		var what, kind, fix string
		switch k := deltalog.NameKey(col); {
		case seen[kafkacols.Key] && k == deltalog.NameKey(kafkacols.Column(kafkacols.Key)) && c.Table.KeyFormat == kafkacols.KeyBytes:
			what, kind, fix = "binary under key_format bytes", "binary", "use key_format string to partition by the key, or partition by another column"
		case seen[kafkacols.Key] && k == deltalog.NameKey(kafkacols.Column(kafkacols.Key)) && c.Table.KeyFormat == kafkacols.KeyAvro:
			what, kind, fix = "a struct under key_format avro", "struct", "use key_format string to partition by the key, or partition by another column"
		case seen[kafkacols.Headers] && k == deltalog.NameKey(kafkacols.Column(kafkacols.Headers)):
			what, kind, fix = "map<string, binary>", "map", "partition by another column"
		default:
			continue
		}
		bad(fmt.Sprintf("$.table.partition_by[%d]", i), fmt.Sprintf("table.partition_by: column %q is %s, %s: %v: %s",
			col, kafkacols.Column(strings.TrimPrefix(strings.ToLower(col), kafkacols.Prefix)), what, deltalog.ErrPartitionType, kind), fix)
	}
}

func slicesHasEmpty(s []string) bool {
	for _, v := range s {
		if strings.TrimSpace(v) == "" {
			return true
		}
	}
	return false
}

// CheckStorageCredentials resolves, for each pipeline whose table is in object storage,
// the credentials its store would use (storage.CheckCredentials: no request to the store,
// no secret printed). It returns where each pipeline's credentials come from, by pipeline
// name ("" for local tables), and a Error (file:line of table.uri) per pipeline
// whose credentials do not resolve, joined.
func CheckStorageCredentials(ctx context.Context, cfgs []*Config) (map[string]string, error) {
	src := map[string]string{}
	var errs []error
	for _, c := range cfgs {
		if !storage.IsCloudURI(c.Table.URI) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		// A table.uri template may have a placeholder in the bucket (s3://{team}/orders):
		// the credentials are resolved for a sample of it, as the URI checks do.
		s, err := storage.CheckCredentials(cctx, c.templateURI(), c.Table.StorageOptions())
		cancel()
		if err != nil {
			errs = append(errs, &Error{File: c.File, Line: c.Line("$.table.uri"),
				Msg: fmt.Sprintf("credentials for table %s: %v", c.Table.URI, err),
				Fix: "provide credentials through the cloud's standard environment (see docs/object-stores.md)"})
			continue
		}
		src[c.Name] = s
	}
	return src, errors.Join(errs...)
}

// ParseByteSize parses a byte size as the config does ("256MiB", "64MB", "134217728").
func ParseByteSize(s string) (ByteSize, error) { return parseByteSize(s) }
