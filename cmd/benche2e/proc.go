package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on every
// Linux architecture Go supports (proc(5)).
const clockTicks = 100

// procUsage is one process's CPU time and peak resident set, read from /proc.
type procUsage struct {
	CPUSeconds float64 // utime + stime, seconds (/proc/<pid>/stat fields 14 and 15)
	PeakRSSMiB float64 // VmHWM of /proc/<pid>/status, MiB
}

// readProcUsage reads pid's usage ("self" for this process). Errors name the file.
func readProcUsage(pid string) (procUsage, error) {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procUsage{}, fmt.Errorf("read process stat: %w", err)
	}
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return procUsage{}, fmt.Errorf("read process status: %w", err)
	}
	return parseProcUsage(stat, status)
}

// parseProcUsage parses the contents of /proc/<pid>/stat and /proc/<pid>/status.
func parseProcUsage(stat, status []byte) (procUsage, error) {
	// The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return procUsage{}, fmt.Errorf("parse process stat: no ')' in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return procUsage{}, fmt.Errorf("parse process stat: %d fields after the name, want ≥ 13", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return procUsage{}, fmt.Errorf("parse process stat: utime %q stime %q", f[11], f[12])
	}
	u := procUsage{CPUSeconds: float64(ut+st) / clockTicks}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return procUsage{}, fmt.Errorf("parse process status: VmHWM %q", rest)
			}
			u.PeakRSSMiB = float64(kb) / 1024
			return u, nil
		}
	}
	return procUsage{}, fmt.Errorf("parse process status: no VmHWM line")
}

// brokerMeter measures another process's CPU seconds (the Kafka broker's) from a start;
// the zero value (no pid) measures nothing and reports 0.
type brokerMeter struct {
	pid   string
	start float64
}

func startBrokerMeter(pid string) (brokerMeter, error) {
	if pid == "" {
		return brokerMeter{}, nil
	}
	u, err := readProcUsage(pid)
	if err != nil {
		return brokerMeter{}, fmt.Errorf("broker pid %s: %w", pid, err)
	}
	return brokerMeter{pid: pid, start: u.CPUSeconds}, nil
}

// used is the CPU seconds the process used since startBrokerMeter.
func (m brokerMeter) used() (float64, error) {
	if m.pid == "" {
		return 0, nil
	}
	u, err := readProcUsage(m.pid)
	if err != nil {
		return 0, fmt.Errorf("broker pid %s: %w", m.pid, err)
	}
	return u.CPUSeconds - m.start, nil
}
