package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// result is one row of the benchmark table, one JSON object per line in the results file.
type result struct {
	Label       string  `json:"label"`
	Topic       string  `json:"topic"`
	RecordBytes int     `json:"record_bytes"`
	Records     int64   `json:"records"` // records the reader handled (committed rows for a writer)
	Bytes       int64   `json:"bytes"`   // framed value bytes of those records
	WallSeconds float64 `json:"wall_seconds"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	// BrokerCPUSeconds is the Kafka broker's utime+stime over the same wall time (-broker-pid;
	// 0 when not measured): the broker shares the machine's cores with the reader.
	BrokerCPUSeconds float64 `json:"broker_cpu_seconds,omitempty"`
	PeakRSSMiB       float64 `json:"peak_rss_mib"`
	Files            int     `json:"files"`
	Commits          int     `json:"commits"`
	RowsChecked      int64   `json:"rows_checked"` // delta-rs count of the table; -1 when there is no table
	UniqueIDs        int64   `json:"unique_ids"`
	LatencyP50       float64 `json:"latency_p50_s,omitempty"`
	LatencyP99       float64 `json:"latency_p99_s,omitempty"`
	Note             string  `json:"note,omitempty"`
}

type envFlags []string

func (e *envFlags) String() string     { return strings.Join(*e, " ") }
func (e *envFlags) Set(v string) error { *e = append(*e, v); return nil }

// runCmd starts a writer (ingestd or kafka-delta-ingest: the command after "--"), waits
// until want rows are committed, reads the process's /proc usage at that moment, stops it
// with SIGTERM (SIGKILL after 60 s), then sums the table's log and has delta-rs count it.
func runCmd(args []string) (result, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	label := fs.String("label", "", "row label")
	topic := fs.String("topic", "", "topic read (for the table)")
	want := fs.Int64("want", 0, "rows that make the table complete")
	recordBytes := fs.Int("record-bytes", 0, "framed size of each record")
	table := fs.String("table", "", "local path of the Delta table written")
	metrics := fs.String("metrics", "", "ingestd /metrics URL: done when ingestd_records_written_total reaches -want; else the table's log is polled")
	timeout := fs.Duration("timeout", 15*time.Minute, "give up after this long")
	python := fs.String("python", "python3", "Python with deltalake, for the row count")
	statsScript := fs.String("stats-script", "scripts/bench/table_stats.py", "delta-rs row count (and latency) script")
	latency := fs.Bool("latency", false, "also compute produce → visible latency p50/p99 from the table")
	latencyWindow := fs.Duration("latency-window", 0, "with -latency: only the records stamped within this long of the first count (0: all); "+
		"the producer goes on past the window, so the window's last batch is not cut by the stream's end")
	logFile := fs.String("log", "", "file for the writer's stdout and stderr")
	brokerPID := fs.String("broker-pid", "", "the Kafka broker's pid: its CPU seconds over the run are reported too")
	var env envFlags
	fs.Var(&env, "env", "KEY=VALUE for the writer only (repeatable)")
	if err := fs.Parse(args); err != nil {
		return result{}, err
	}
	if fs.NArg() == 0 || *want <= 0 || *table == "" {
		return result{}, fmt.Errorf("run: -want, -table and a command after -- are required")
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Env = append(os.Environ(), env...)
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			return result{}, fmt.Errorf("create writer log: %w", err)
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	broker, err := startBrokerMeter(*brokerPID)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, fmt.Errorf("start %s: %w", fs.Arg(0), err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pid := strconv.Itoa(cmd.Process.Pid)
	var ls logStats
	var u procUsage
	var brokerCPU float64
	for {
		done := false
		if *metrics != "" {
			n, err := scrapeCounter(*metrics, "ingestd_records_written_total")
			done = err == nil && n >= float64(*want)
		} else {
			if err := ls.update(*table); err != nil {
				_ = cmd.Process.Kill()
				return result{}, err
			}
			done = ls.Rows >= *want
		}
		if done {
			var err error
			if u, err = readProcUsage(pid); err != nil {
				return result{}, err
			}
			if brokerCPU, err = broker.used(); err != nil {
				return result{}, err
			}
			break
		}
		select {
		case err := <-exited:
			return result{}, fmt.Errorf("%s exited before %d rows were committed (%v); see %s", *label, *want, err, *logFile)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(start) > *timeout {
			_ = cmd.Process.Kill()
			return result{}, fmt.Errorf("%s: %d rows not committed within %s (log rows %d)", *label, *want, *timeout, ls.Rows)
		}
	}
	wall := time.Since(start).Seconds()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	ls = logStats{}
	if err := ls.update(*table); err != nil {
		return result{}, err
	}
	r := result{Label: *label, Topic: *topic, RecordBytes: *recordBytes, Records: *want, Bytes: *want * int64(*recordBytes),
		WallSeconds: wall, CPUSeconds: u.CPUSeconds, BrokerCPUSeconds: brokerCPU, PeakRSSMiB: u.PeakRSSMiB, Files: ls.Files, Commits: ls.Commits}
	st, err := tableStats(*python, *statsScript, *table, *latency, *latencyWindow)
	if err != nil {
		return result{}, err
	}
	r.RowsChecked, r.UniqueIDs, r.LatencyP50, r.LatencyP99 = st.Rows, st.UniqueIDs, st.P50, st.P99
	return r, nil
}

type tableStatsOut struct {
	Rows      int64   `json:"rows"`
	UniqueIDs int64   `json:"unique_ids"`
	P50       float64 `json:"latency_p50_s"`
	P99       float64 `json:"latency_p99_s"`
}

// tableStats runs the delta-rs script on table and parses its one JSON line. With latency,
// the script also computes produce → visible latency, over the records stamped within
// window of the first one when window > 0 (else over all).
func tableStats(python, script, table string, latency bool, window time.Duration) (tableStatsOut, error) {
	args := []string{script, table}
	if latency {
		args = append(args, "--latency")
		if window > 0 {
			args = append(args, "--latency-window", strconv.FormatFloat(window.Seconds(), 'f', -1, 64))
		}
	}
	out, err := exec.Command(python, args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return tableStatsOut{}, fmt.Errorf("count rows of %s with delta-rs: %w: %s", table, err, ee.Stderr)
		}
		return tableStatsOut{}, fmt.Errorf("count rows of %s with delta-rs: %w", table, err)
	}
	var st tableStatsOut
	if err := json.Unmarshal(out, &st); err != nil {
		return tableStatsOut{}, fmt.Errorf("parse table_stats.py output %q: %w", out, err)
	}
	return st, nil
}

// scrapeCounter sums every series of the Prometheus counter name at url (text format).
func scrapeCounter(url, name string) (float64, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	// Uncompressed: gzipping the page 20 times a second is CPU the measured process would
	// spend for the harness, not for its records.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("scrape %s: %q: %w", url, line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}
