package ingest

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingestd/ingestd/batcher"
	"github.com/ingestd/ingestd/ingest/decode"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
	"github.com/ingestd/ingestd/ingest/maintain"
)

// Metrics are the pipeline metrics, labelled by pipeline, with the Kafka clients' SASL
// counters (Kafka) and the background maintenance's (Maintenance, labelled by table). Names
// follow Prometheus conventions: ingestd_ prefix, counters end in _total, units in names.
// One Metrics is shared by every pipeline of a process; docs/operations.md lists them.
type Metrics struct {
	RecordsConsumed      *prometheus.CounterVec   // pipeline
	RecordsWritten       *prometheus.CounterVec   // pipeline
	RecordsDeadLettered  *prometheus.CounterVec   // pipeline, reason
	RecordsSkipped       *prometheus.CounterVec   // pipeline, reason (tombstone, null_record, already_committed, debezium_message)
	BytesWritten         *prometheus.CounterVec   // pipeline: Parquet bytes
	FilesWritten         *prometheus.CounterVec   // pipeline: data files committed
	FilesPerCommit       *prometheus.HistogramVec // pipeline: data files per commit (one per partition value)
	PartitionCuts        *prometheus.CounterVec   // pipeline: flushes cut at batch.max_open_partitions
	TimestampsOutOfRange *prometheus.CounterVec   // pipeline: rows written with _kafka_timestamp NULL, the record's timestamp outside 0001–9999
	StaleLastCheckpoint  *prometheus.CounterVec   // pipeline: full log loads whose _last_checkpoint named a missing or unreadable checkpoint
	Batches              *prometheus.CounterVec   // pipeline: flush attempts with records
	BatchFlushes         *prometheus.CounterVec   // pipeline, trigger: why buffered records were flushed
	Commits              *prometheus.CounterVec   // pipeline
	CommitConflicts      *prometheus.CounterVec   // pipeline
	CommitDuration       *prometheus.HistogramVec // pipeline, seconds
	FlushWait            *prometheus.HistogramVec // pipeline, seconds: the poll loop waiting for the flush in flight
	SchemaEvolutions     *prometheus.CounterVec   // pipeline, kind
	PipelineHalted       *prometheus.GaugeVec     // pipeline: 1 when halted
	PipelineFailures     *prometheus.CounterVec   // pipeline: runs ended by a permanent failure
	TransientErrors      *prometheus.CounterVec   // pipeline, stage
	PartitionsBackingOff *prometheus.GaugeVec     // pipeline: partitions paused after a transient failure
	ConsumerLag          *prometheus.GaugeVec     // pipeline, topic, partition: records past the table's txn
	KeyedChanges         *prometheus.CounterVec   // pipeline, outcome: a keyed table's changes (upserted, deleted, superseded, stale)
	KeyedRowsMarked      *prometheus.CounterVec   // pipeline: stored rows marked deleted in deletion vectors
	KeyIndex             *prometheus.GaugeVec     // pipeline, measure: the key index's keys, remembered deletes and bytes
	KeyIndexExpired      *prometheus.CounterVec   // pipeline: remembered deletes forgotten past table.delete_horizon
	KeyedUnavailable     *prometheus.CounterVec   // pipeline, outcome: placeholders of unavailable values replaced (flush, table, null, dead_lettered)
	RoutedTables         *prometheus.GaugeVec     // pipeline, state: the tables of a kafka.topic_pattern pipeline (Router)
	// SchemaNotFoundFlushes is the number of consecutive flushes whose every record was
	// dead-lettered as schema_not_found (0 after any other flush).
	SchemaNotFoundFlushes *prometheus.GaugeVec // pipeline

	// Maintenance are the background maintenance metrics (OPTIMIZE, VACUUM), labelled by
	// table URI and job.
	Maintenance *maintain.Metrics

	// Kafka are the Kafka clients' SASL counters (credential reads, re-authentications).
	Kafka *kafkaclient.Metrics

	registries *registryCollector
}

// registryStatser is the schema registry client's counters (decode.Registry).
type registryStatser interface {
	Stats() decode.RegistryStats
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		RecordsConsumed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_records_consumed_total",
			Help: "Kafka records read from source topics."}, []string{"pipeline"}),
		RecordsWritten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_records_written_total",
			Help: "Rows committed to the Delta table."}, []string{"pipeline"}),
		RecordsDeadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_records_dead_lettered_total",
			Help: "Records sent to the dead-letter topic and acknowledged, by reason code."}, []string{"pipeline", "reason"}),
		RecordsSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_records_skipped_total",
			Help: "Records that carry no row (tombstone, null_record) or that the table already has (already_committed)."}, []string{"pipeline", "reason"}),
		BytesWritten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_parquet_written_bytes_total",
			Help: "Bytes of Parquet data files written."}, []string{"pipeline"}),
		FilesWritten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_data_files_written_total",
			Help: "Parquet data files committed (one per partition value per flush)."}, []string{"pipeline"}),
		FilesPerCommit: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ingestd_data_files_per_commit",
			Help:    "Data files in one Delta commit: 1 for an unpartitioned table, else the partition values the flush touched.",
			Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}}, []string{"pipeline"}),
		TimestampsOutOfRange: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_kafka_timestamp_out_of_range_total",
			Help: "Rows committed with _kafka_timestamp NULL because the record's Kafka timestamp (ms) was outside 0001-01-01..9999-12-31, the range Delta's readers hold (-1, no timestamp, is NULL too but not counted)."}, []string{"pipeline"}),
		StaleLastCheckpoint: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_delta_last_checkpoint_stale_total",
			Help: "Full loads of the table's log whose _delta_log/_last_checkpoint named a checkpoint that is missing or unreadable; each was recovered by listing the whole log (and logged as a warning)."}, []string{"pipeline"}),
		PartitionCuts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_partition_limit_cuts_total",
			Help: "Flushes cut short because their records would open more than batch.max_open_partitions partition values; the rest is flushed next."}, []string{"pipeline"}),
		Batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_batches_total",
			Help: "Batches handed to the writer (each ends in a commit, nothing to commit, or a retry)."}, []string{"pipeline"}),
		BatchFlushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_batch_flushes_total",
			Help: "Flushes of buffered records, by trigger: records or bytes (batch bound reached), age (batch.max_age), " +
				"retry (a partition's backoff ended), revoke (partitions moving to another member), shutdown (the drain on stop)."}, []string{"pipeline", "trigger"}),
		Commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_delta_commits_total",
			Help: "Delta commits made."}, []string{"pipeline"}),
		CommitConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_delta_commit_conflicts_total",
			Help: "Delta commit attempts that lost to another writer."}, []string{"pipeline"}),
		CommitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ingestd_delta_commit_duration_seconds",
			Help: "Time from the start of a flush to its Delta commit.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"pipeline"}),
		FlushWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ingestd_flush_wait_seconds",
			Help: "Time the poll loop waited for the flush in flight to settle before it handed over the next batch (0 when none was in flight); " +
				"a sum close to the run time means the flushes, not the fetches, bound the throughput.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"pipeline"}),
		SchemaEvolutions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_schema_evolutions_total",
			Help: "Schema changes applied to tables, by kind (add_column, widen, relax_nullability, enable_feature)."}, []string{"pipeline", "kind"}),
		PipelineHalted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ingestd_pipeline_halted",
			Help: "1 when the pipeline is halted by its schema policy and needs a person."}, []string{"pipeline"}),
		PipelineFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_pipeline_failures_total",
			Help: "Pipeline runs ended by a permanent failure that needs a person (see the pipeline's status and error log)."}, []string{"pipeline"}),
		TransientErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_transient_errors_total",
			Help: "Transient failures that were retried (registry, broker, store), by stage."}, []string{"pipeline", "stage"}),
		PartitionsBackingOff: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ingestd_partitions_backing_off",
			Help: "Source partitions paused after a transient failure, waiting for their retry."}, []string{"pipeline"}),
		ConsumerLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ingestd_consumer_lag_records",
			Help: "Records in the source partition after the last one committed to the table (high watermark minus (txn version + 1))."}, []string{"pipeline", "topic", "partition"}),
		KeyedChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_keyed_changes_total",
			Help: "Changes of a keyed table (table.mode upsert), by outcome: upserted (a row written), deleted (a stored row deleted), " +
				"superseded (a later change of its key in the same flush won), stale (older by table.sequence_by than what the table holds)."}, []string{"pipeline", "outcome"}),
		KeyedRowsMarked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_keyed_rows_marked_deleted_total",
			Help: "Stored rows of a keyed table marked deleted in deletion vectors (replaced by a newer row of their key, or deleted)."}, []string{"pipeline"}),
		SchemaNotFoundFlushes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ingestd_schema_not_found_flushes",
			Help: "Consecutive flushes whose every record was dead-lettered as schema_not_found (0 after any other flush); 2 or more: check schema_registry.url."}, []string{"pipeline"}),
		KeyIndex: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ingestd_key_index",
			Help: "An upsert table's key index after the pipeline's last commit or refresh, by measure: keys (keys with a live row), " +
				"remembered_deletes (deleted keys whose delete's sequence is remembered), bytes (its memory)."}, []string{"pipeline", "measure"}),
		KeyIndexExpired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_key_index_expired_deletes_total",
			Help: "Remembered deletes an upsert pipeline forgot because they were older than table.delete_horizon."}, []string{"pipeline"}),
		KeyedUnavailable: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_keyed_unavailable_values_total",
			Help: "Columns of a keyed table's changes that held table.unavailable_value (Debezium's placeholder for an unchanged TOASTed value), " +
				"by where their value came from: flush (an earlier change of the key in the flush), table (the key's stored row), " +
				"null (no current value: NULL written), dead_lettered (no current value for a NOT NULL column)."}, []string{"pipeline", "outcome"}),
		RoutedTables: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ingestd_routed_tables",
			Help: "The tables of a pipeline with kafka.topic_pattern, one per matching topic, by state: running (started), failed (could not open, or its pipeline failed)."}, []string{"pipeline", "state"}),
		registries: &registryCollector{sources: map[string]registryStatser{}},
	}
	reg.MustRegister(m.RecordsConsumed, m.RecordsWritten, m.RecordsDeadLettered, m.RecordsSkipped, m.BytesWritten,
		m.FilesWritten, m.FilesPerCommit, m.PartitionCuts, m.TimestampsOutOfRange, m.StaleLastCheckpoint,
		m.Batches, m.BatchFlushes, m.Commits, m.CommitConflicts, m.CommitDuration, m.FlushWait, m.SchemaEvolutions, m.PipelineHalted,
		m.PipelineFailures, m.TransientErrors, m.PartitionsBackingOff, m.ConsumerLag, m.KeyedChanges, m.KeyedRowsMarked, m.KeyIndex, m.KeyIndexExpired, m.KeyedUnavailable, m.SchemaNotFoundFlushes, m.RoutedTables, m.registries)
	m.Maintenance = maintain.NewMetrics(reg)
	m.Kafka = kafkaclient.NewMetrics(reg)
	return m
}

// kafka returns the Kafka clients' counters, nil when m is (tests without metrics).
func (m *Metrics) kafka() *kafkaclient.Metrics {
	if m == nil {
		return nil
	}
	return m.Kafka
}

// initPipeline makes the pipeline's unlabelled-by-reason series exist from the start, at 0.
func (m *Metrics) initPipeline(name string) {
	for _, c := range []*prometheus.CounterVec{m.RecordsConsumed, m.RecordsWritten, m.BytesWritten, m.FilesWritten, m.PartitionCuts, m.TimestampsOutOfRange, m.StaleLastCheckpoint, m.Batches, m.Commits, m.CommitConflicts, m.PipelineFailures} {
		c.WithLabelValues(name)
	}
	for _, t := range batcher.Triggers() {
		m.BatchFlushes.WithLabelValues(name, t.String())
	}
	m.PipelineHalted.WithLabelValues(name).Set(0)
	m.PartitionsBackingOff.WithLabelValues(name).Set(0)
	m.SchemaNotFoundFlushes.WithLabelValues(name).Set(0)
}

// addRegistry exports the counters of a pipeline's schema registry client.
func (m *Metrics) addRegistry(pipeline string, s registryStatser) {
	m.registries.mu.Lock()
	defer m.registries.mu.Unlock()
	m.registries.sources[pipeline] = s
}

// registryCollector turns decode.Registry.Stats() into counters at scrape time.
type registryCollector struct {
	mu      sync.Mutex
	sources map[string]registryStatser
}

var (
	descRegistryRequests = prometheus.NewDesc("ingestd_schema_registry_requests_total",
		"Schema lookups sent to the schema registry (cache misses; concurrent misses for one id count once).", []string{"pipeline"}, nil)
	descRegistryErrors = prometheus.NewDesc("ingestd_schema_registry_errors_total",
		"Schema registry lookups that failed transiently (5xx, timeouts, refused connections, unparseable replies); never cached.", []string{"pipeline"}, nil)
	descRegistryCacheHits = prometheus.NewDesc("ingestd_schema_registry_cache_hits_total",
		"Schema lookups answered from the client's cache: positive (schema) or negative (not found, within its TTL).", []string{"pipeline", "cache"}, nil)
)

func (c *registryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRegistryRequests
	ch <- descRegistryErrors
	ch <- descRegistryCacheHits
}

func (c *registryCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	names := make([]string, 0, len(c.sources))
	for n := range c.sources {
		names = append(names, n)
	}
	sort.Strings(names)
	stats := make([]decode.RegistryStats, len(names))
	for i, n := range names {
		stats[i] = c.sources[n].Stats()
	}
	c.mu.Unlock()
	for i, n := range names {
		s := stats[i]
		ch <- prometheus.MustNewConstMetric(descRegistryRequests, prometheus.CounterValue, float64(s.Fetches), n)
		ch <- prometheus.MustNewConstMetric(descRegistryErrors, prometheus.CounterValue, float64(s.Transient), n)
		ch <- prometheus.MustNewConstMetric(descRegistryCacheHits, prometheus.CounterValue, float64(s.Hits), n, "positive")
		ch <- prometheus.MustNewConstMetric(descRegistryCacheHits, prometheus.CounterValue, float64(s.NegativeHits), n, "negative")
	}
}
