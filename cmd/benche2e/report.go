package main

import (
	"fmt"
	"strings"
)

// markdown renders results as one table, a row per run in the order they ran. Rates are
// per wall second and per CPU-second of the reader's own process (utime+stime).
func markdown(rs []result) string {
	var b strings.Builder
	b.WriteString("| # | reader | topic | record | records | wall s | records/s wall | CPU s | records/CPU-s | MB/CPU-s | peak RSS MiB | files | commits | rows (delta-rs) | latency p50 / p99 s |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
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
		files, commits := "–", "–"
		if r.RowsChecked >= 0 {
			files, commits = fmt.Sprint(r.Files), fmt.Sprint(r.Commits)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d B | %d | %.1f | %s | %.1f | %s | %.0f | %.0f | %s | %s | %s | %s |\n",
			i+1, r.Label, r.Topic, r.RecordBytes, r.Records, r.WallSeconds, si(float64(r.Records)/r.WallSeconds),
			r.CPUSeconds, si(float64(r.Records)/r.CPUSeconds), float64(r.Bytes)/1e6/r.CPUSeconds, r.PeakRSSMiB,
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
