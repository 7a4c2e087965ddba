package main

import (
	"fmt"
	"strings"
)

// markdown renders results as one table, a row per run in the order they ran. Rates are
// per wall second and per CPU-second of the reader's own process (utime+stime); the broker's
// CPU seconds over the same wall time stand beside them ("–" when not measured).
func markdown(rs []result) string {
	var b strings.Builder
	b.WriteString("| # | reader | topic | record | records | wall s | records/s wall | CPU s | records/CPU-s | MB/CPU-s | broker CPU s | peak RSS MiB | files | commits | rows (delta-rs) | latency p50 / p99 s |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range rs {
		rows, lat := "–", "–"
		if r.RowsChecked >= 0 {
			rows = fmt.Sprintf("%d (%d ids)", r.RowsChecked, r.UniqueIDs)
			if r.RowsChecked != r.Records || r.UniqueIDs != r.Records {
				rows += " **MISMATCH**"
			}
		}
		if r.LatencyP99 > 0 {
			lat = fmt.Sprintf("%.2f / %.2f", r.LatencyP50, r.LatencyP99)
		}
		broker := "–"
		if r.BrokerCPUSeconds > 0 {
			broker = fmt.Sprintf("%.2f", r.BrokerCPUSeconds)
		}
		files, commits := "–", "–"
		if r.RowsChecked >= 0 {
			files, commits = fmt.Sprint(r.Files), fmt.Sprint(r.Commits)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d B | %d | %.1f | %s | %.1f | %s | %.0f | %s | %.0f | %s | %s | %s | %s |\n",
			i+1, r.Label, r.Topic, r.RecordBytes, r.Records, r.WallSeconds, si(float64(r.Records)/r.WallSeconds),
			r.CPUSeconds, si(float64(r.Records)/r.CPUSeconds), float64(r.Bytes)/1e6/r.CPUSeconds, broker, r.PeakRSSMiB,
			files, commits, rows, lat)
	}
	return b.String()
}

// si prints n with a K or M suffix, three significant digits.
func si(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f K", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

// consumeOnlyLimit is, per record size, the most CPU per record ingestd (GOMAXPROCS=1)
// may spend as a multiple of the consume-only reader's: regression bounds of the append
// path.
var consumeOnlyLimit = map[int]float64{200: 2.6, 1024: 2.1}

// goalLimits are the run's settings the performance goals are measured against.
type goalLimits struct {
	MaxBytesMiB float64 // ingestd's batch.max_bytes
	MaxAgeS     float64 // ingestd's batch.max_age
}

// goals marks each performance goal (throughput per CPU-second, the ratios to
// kafka-delta-ingest, scaling to 2 cores, peak RSS, produce → visible latency) met or not
// met with the measured figure, from the mean of the throughput runs (not the latency
// runs) of each reader at each record size.
func goals(rs []result, lim goalLimits) string {
	type agg struct{ recPerCPU, mbPerCPU, recPerWall, rss float64 }
	mean := map[string]agg{} // key: label|size
	count := map[string]float64{}
	var lat []result
	for _, r := range rs {
		if strings.Contains(r.Label, "latency run") {
			lat = append(lat, r)
			continue
		}
		k := fmt.Sprintf("%s|%d", r.Label, r.RecordBytes)
		a := mean[k]
		a.recPerCPU += float64(r.Records) / r.CPUSeconds
		a.mbPerCPU += float64(r.Bytes) / 1e6 / r.CPUSeconds
		a.recPerWall += float64(r.Records) / r.WallSeconds
		a.rss = max(a.rss, r.PeakRSSMiB)
		mean[k] = a
		count[k]++
	}
	get := func(label string, size int) (agg, bool) {
		k := fmt.Sprintf("%s|%d", label, size)
		n := count[k]
		if n == 0 {
			return agg{}, false
		}
		a := mean[k]
		return agg{a.recPerCPU / n, a.mbPerCPU / n, a.recPerWall / n, a.rss}, true
	}
	var b strings.Builder
	mark := func(ok bool) string {
		if ok {
			return "**met**"
		}
		return "**not met**"
	}
	line := func(goal, verdict, figure string) { fmt.Fprintf(&b, "- %s: %s — %s\n", goal, verdict, figure) }
	const g1, g2, kdi, baseline = "ingestd GOMAXPROCS=1", "ingestd GOMAXPROCS=2", "kafka-delta-ingest", "consume-only (franz-go)"
	if a, ok := get(g1, 200); ok {
		line("≥ 1.0 M records per CPU-second at 200 B", mark(a.recPerCPU >= 1e6), fmt.Sprintf("%s records/CPU-s (GOMAXPROCS=1, mean of runs)", si(a.recPerCPU)))
	} else {
		line("≥ 1.0 M records per CPU-second at 200 B", "not measured", "no 200 B ingestd GOMAXPROCS=1 run")
	}
	if a, ok := get(g1, 1024); ok {
		line("≥ 400 MB per CPU-second at 1 KB", mark(a.mbPerCPU >= 400), fmt.Sprintf("%.0f MB/CPU-s (GOMAXPROCS=1)", a.mbPerCPU))
	} else {
		line("≥ 400 MB per CPU-second at 1 KB", "not measured", "no 1024 B ingestd GOMAXPROCS=1 run")
	}
	for _, size := range []int{200, 1024} {
		i1, ok1 := get(g1, size)
		i2, ok2 := get(g2, size)
		k, okk := get(kdi, size)
		if ok1 && okk {
			r := i1.recPerCPU / k.recPerCPU
			line(fmt.Sprintf("≥ 30× kafka-delta-ingest per CPU-second (%d B)", size), mark(r >= 30), fmt.Sprintf("%.1f× (ingestd GOMAXPROCS=1 %s vs %s records/CPU-s)", r, si(i1.recPerCPU), si(k.recPerCPU)))
		}
		if ok2 && okk {
			r := i2.recPerWall / k.recPerWall
			line(fmt.Sprintf("≥ 15× kafka-delta-ingest in wall time (%d B)", size), mark(r >= 15), fmt.Sprintf("%.1f× (ingestd GOMAXPROCS=2 %s vs %s records/s)", r, si(i2.recPerWall), si(k.recPerWall)))
		}
		if (ok1 || ok2) && !okk {
			line(fmt.Sprintf("≥ 30× / ≥ 15× kafka-delta-ingest (%d B)", size), "not measured", "no kafka-delta-ingest run")
		}
		if ok1 && ok2 {
			r := i2.recPerWall / i1.recPerWall
			line(fmt.Sprintf("2 cores ≥ 1.7× one core in wall time (%d B)", size), mark(r >= 1.7), fmt.Sprintf("%.2f× (%s vs %s records/s)", r, si(i2.recPerWall), si(i1.recPerWall)))
		}
		// The append path's stable yardstick: ingestd's CPU per record over a consume-only
		// reader's on the same topic (a peer's per-CPU figure moves 2× between machines).
		if b0, okb := get(baseline, size); ok1 && okb {
			limit := consumeOnlyLimit[size]
			r := b0.recPerCPU / i1.recPerCPU
			line(fmt.Sprintf("ingestd CPU ≤ %.1f× the consume-only reader's (%d B)", limit, size), mark(r <= limit),
				fmt.Sprintf("%.2f× (ingestd GOMAXPROCS=1 %s vs consume-only %s records/CPU-s)", r, si(i1.recPerCPU), si(b0.recPerCPU)))
		}
		if ok1 || ok2 {
			rss := max(i1.rss, i2.rss)
			line(fmt.Sprintf("peak RSS ≤ max_bytes + 256 MiB (%d B)", size), mark(rss <= lim.MaxBytesMiB+256), fmt.Sprintf("%.0f MiB, limit %.0f MiB (highest of the ingestd runs)", rss, lim.MaxBytesMiB+256))
		}
	}
	found := false
	for _, r := range lat {
		if !strings.HasPrefix(r.Label, "ingestd") {
			continue
		}
		found = true
		line("p99 produce → visible ≤ max_age + 1 s at 50 % of capacity", mark(r.LatencyP99 > 0 && r.LatencyP99 <= lim.MaxAgeS+1),
			fmt.Sprintf("p99 %.2f s, p50 %.2f s, limit %.1f s (%s)", r.LatencyP99, r.LatencyP50, lim.MaxAgeS+1, r.Label))
	}
	if !found {
		line("p99 produce → visible ≤ max_age + 1 s at 50 % of capacity", "not measured", "no ingestd latency run")
	}
	return b.String()
}
