package ingest

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the pipeline metrics, all labelled by pipeline. Names follow Prometheus
// conventions: ingestd_ prefix, counters end in _total, units in names.
type Metrics struct {
	RecordsConsumed     *prometheus.CounterVec   // pipeline
	RecordsWritten      *prometheus.CounterVec   // pipeline
	RecordsDeadLettered *prometheus.CounterVec   // pipeline, reason
	RecordsSkipped      *prometheus.CounterVec   // pipeline, reason (tombstone, null_record, already_committed)
	BytesWritten        *prometheus.CounterVec   // pipeline: Parquet bytes
	Commits             *prometheus.CounterVec   // pipeline
	CommitConflicts     *prometheus.CounterVec   // pipeline
	CommitDuration      *prometheus.HistogramVec // pipeline, seconds
	SchemaEvolutions    *prometheus.CounterVec   // pipeline, kind
	PipelineHalted      *prometheus.GaugeVec     // pipeline: 1 when halted
	TransientErrors     *prometheus.CounterVec   // pipeline, stage
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		RecordsConsumed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_records_consumed_total",
			Help: "Kafka records read from source topics."}, []string{"pipeline"}),
		RecordsWritten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_records_written_total",
			Help: "Rows committed to the Delta table."}, []string{"pipeline"}),
		RecordsDeadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_records_dead_lettered_total",
			Help: "Records sent to the dead-letter topic, by reason code."}, []string{"pipeline", "reason"}),
		RecordsSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_records_skipped_total",
			Help: "Records that carry no row (tombstones, null records) or were already committed."}, []string{"pipeline", "reason"}),
		BytesWritten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_parquet_written_bytes_total",
			Help: "Bytes of Parquet data files written."}, []string{"pipeline"}),
		Commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_delta_commits_total",
			Help: "Delta commits made."}, []string{"pipeline"}),
		CommitConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_delta_commit_conflicts_total",
			Help: "Delta commit attempts that lost to another writer."}, []string{"pipeline"}),
		CommitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ingestd_delta_commit_duration_seconds",
			Help: "Time from the start of a flush to its Delta commit.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"pipeline"}),
		SchemaEvolutions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_schema_evolutions_total",
			Help: "Schema changes applied to tables, by kind (add_column, widen, relax_nullability)."}, []string{"pipeline", "kind"}),
		PipelineHalted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ingestd_pipeline_halted",
			Help: "1 when the pipeline is halted by its schema policy and needs a person."}, []string{"pipeline"}),
		TransientErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_transient_errors_total",
			Help: "Transient failures that were retried (registry, broker, store), by stage."}, []string{"pipeline", "stage"}),
	}
	reg.MustRegister(m.RecordsConsumed, m.RecordsWritten, m.RecordsDeadLettered, m.RecordsSkipped, m.BytesWritten,
		m.Commits, m.CommitConflicts, m.CommitDuration, m.SchemaEvolutions, m.PipelineHalted, m.TransientErrors)
	return m
}
