package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strconv"

	"github.com/ingestd/ingestd/ingest/config"
)

// startProfiles starts a CPU profile into cpuPath and an execution trace into tracePath
// (each when not empty) and returns the function that stops them and writes the heap
// profile into memPath (when not empty). The profiles are pprof's protobuf format (`go tool
// pprof ingestd FILE`); the heap profile carries alloc_space/alloc_objects since start and
// inuse_* at exit. The trace is runtime/trace's (`go tool trace FILE`: each goroutine's
// running, runnable and blocked time, syscalls, GC). Errors name the file.
func startProfiles(cpuPath, memPath, tracePath string) (stop func() error, err error) {
	var cpu, tr *os.File
	if cpuPath != "" {
		if cpu, err = os.Create(cpuPath); err != nil {
			return nil, fmt.Errorf("create CPU profile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			_ = cpu.Close()
			return nil, fmt.Errorf("start CPU profile %s: %w", cpuPath, err)
		}
	}
	if tracePath != "" {
		if tr, err = startTrace(tracePath); err != nil {
			if cpu != nil {
				pprof.StopCPUProfile()
				_ = cpu.Close()
			}
			return nil, err
		}
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close CPU profile %s: %w", cpuPath, err))
			}
		}
		if tr != nil {
			trace.Stop()
			if err := tr.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close trace %s: %w", tracePath, err))
			}
		}
		if memPath != "" {
			if err := writeHeapProfile(memPath); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create heap profile: %w", err)
	}
	runtime.GC() // up-to-date inuse figures
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("write heap profile %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close heap profile %s: %w", path, err)
	}
	return nil
}

// startTrace creates path and starts an execution trace (runtime/trace) into it.
func startTrace(path string) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start trace %s: %w", path, err)
	}
	return f, nil
}

// memoryHeadroom is what the process may use besides its batches, in bytes: the Kafka
// client's fetch buffers, a data file being encoded, the runtime: peak RSS stays within
// batch.max_bytes + 256 MiB (docs/architecture.md, "Memory").
const memoryHeadroom = 256 << 20

// nonHeapRSS is the part of the headroom the Go memory limit leaves to resident memory
// it does not count or that comes past it, in bytes: the binary's own pages (about 30 MiB
// of ingestd's are resident), heap pages freed but not yet returned to the kernel, and
// what the fetches allocate while a collection runs. At 32 MiB a stream of 1 KB records
// at max_bytes 64MiB peaked at 317 MiB against the 320 MiB promise
// (TestPeakRSSWithinMaxBytes); at 64 MiB it stays about 30 MiB below it.
const nonHeapRSS = 64 << 20

// memoryLimit is the soft memory limit (runtime/debug.SetMemoryLimit, bytes) for cfgs:
// the sum of their batch.max_bytes (which counts decoded values, Pipeline.budgetSize) and
// memoryHeadroom, less nonHeapRSS, so that the process's RSS stays within the sum and
// memoryHeadroom when the collector holds the heap at the limit.
func memoryLimit(cfgs []*config.Config) int64 {
	limit := int64(memoryHeadroom - nonHeapRSS)
	for _, c := range cfgs {
		limit += int64(c.Batch.MaxBytes)
	}
	return limit
}

// gcPercent is the collector's GOGC that setMemoryLimit sets with the memory limit: the
// heap may grow to three times the live batches (not twice) before a collection, which
// cuts the collector's CPU by about a tenth at 1 KB records for 50–90 MiB more RSS, while
// the memory limit still bounds the heap (docs/performance.md).
const gcPercent = 200

// setMemoryLimit sets memoryLimit(cfgs) as the Go runtime's soft memory limit unless the
// GOMEMLIMIT environment variable is set (then the runtime's own settings stand; "off"
// disables it). With the limit it also sets GOGC to gcPercent unless the GOGC environment
// variable is set: the collector lets the heap grow to three times the live batches
// before it runs, and runs sooner as the heap nears the limit. It returns the limit, the
// GOGC in effect (as GOGC is written: the environment's, or gcPercent's) and whether the
// limit was set.
func setMemoryLimit(cfgs []*config.Config) (limit int64, gogc string, set bool) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok || len(cfgs) == 0 {
		return 0, "", false
	}
	limit = memoryLimit(cfgs)
	debug.SetMemoryLimit(limit)
	if env, ok := os.LookupEnv("GOGC"); ok {
		return limit, env, true
	}
	debug.SetGCPercent(gcPercent)
	return limit, strconv.Itoa(gcPercent), true
}
