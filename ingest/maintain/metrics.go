package maintain

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the background maintenance metrics, labelled by table URI and job
// (JobOptimize, JobVacuum), shared by every maintainer of a process (the ingest Metrics
// hold them). A nil *Metrics counts nothing.
type Metrics struct {
	// Runs counts runs by table, job and result (success, noop, lost, skipped, error).
	Runs *prometheus.CounterVec
	// FilesCompacted counts, by table, the source files OPTIMIZE removed.
	FilesCompacted *prometheus.CounterVec
	// BytesRewritten counts, by table, the bytes of the source files OPTIMIZE rewrote.
	BytesRewritten *prometheus.CounterVec
	// Duration is the seconds of one run, by table and job (failed runs included).
	Duration *prometheus.HistogramVec
	// LastSuccess is the Unix time in seconds of the last run that succeeded (success or
	// noop), by table and job.
	LastSuccess *prometheus.GaugeVec
}

// NewMetrics creates the maintenance metrics and registers them with reg:
// ingestd_maintenance_runs_total{table, job, result},
// ingestd_maintenance_files_compacted_total{table},
// ingestd_maintenance_bytes_rewritten_total{table},
// ingestd_maintenance_duration_seconds{table, job} (buckets 10 ms to about 5.5 min) and
// ingestd_maintenance_last_success_timestamp_seconds{table, job}. It panics, like
// prometheus.MustRegister, if reg already holds them.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_maintenance_runs_total",
			Help: "Background maintenance runs, by job (optimize, vacuum) and result (success, noop: nothing to do, lost: every partition went to a concurrent writer, skipped: no table yet, error)."}, []string{"table", "job", "result"}),
		FilesCompacted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_maintenance_files_compacted_total",
			Help: "Small data files removed by background OPTIMIZE (replaced by larger ones)."}, []string{"table"}),
		BytesRewritten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingestd_maintenance_bytes_rewritten_total",
			Help: "Bytes of data files read and rewritten by background OPTIMIZE."}, []string{"table"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ingestd_maintenance_duration_seconds",
			Help: "Duration of one background maintenance run.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 16)}, []string{"table", "job"}),
		LastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ingestd_maintenance_last_success_timestamp_seconds",
			Help: "Unix time of the last successful background maintenance run (success or noop)."}, []string{"table", "job"}),
	}
	reg.MustRegister(m.Runs, m.FilesCompacted, m.BytesRewritten, m.Duration, m.LastSuccess)
	return m
}

// compacted counts what one OPTIMIZE of table removed: files, and bytes.
func (m *Metrics) compacted(table string, files int, bytes int64) {
	if m == nil {
		return
	}
	m.FilesCompacted.WithLabelValues(table).Add(float64(files))
	m.BytesRewritten.WithLabelValues(table).Add(float64(bytes))
}

// run records one run of job on table: its result and duration, and, when it succeeded
// (success or noop), the time now as its last success. The run is counted last, so that a
// scrape that sees it counted also sees its duration and time.
func (m *Metrics) run(table, job, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.Duration.WithLabelValues(table, job).Observe(d.Seconds())
	if result == resultSuccess || result == resultNoop {
		m.LastSuccess.WithLabelValues(table, job).Set(float64(time.Now().Unix()))
	}
	m.Runs.WithLabelValues(table, job, result).Inc()
}
