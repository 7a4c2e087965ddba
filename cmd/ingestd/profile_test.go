package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ingestd/ingestd/ingest/config"
)

func TestMemoryLimitFromBatchBudgets(t *testing.T) {
	cfgs := []*config.Config{{Batch: config.Batch{MaxBytes: 128 << 20}}, {Batch: config.Batch{MaxBytes: 64 << 20}}}
	if got, want := memoryLimit(cfgs), int64(384<<20); got != want {
		t.Fatalf("memoryLimit = %d, want %d (128 MiB + 64 MiB + 256 MiB - 64 MiB)", got, want)
	}
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })

	t.Setenv("GOMEMLIMIT", "1GiB")
	if _, _, set := setMemoryLimit(cfgs); set {
		t.Fatal("setMemoryLimit overrode GOMEMLIMIT")
	}
	if got := debug.SetMemoryLimit(-1); got != old {
		t.Fatalf("with GOMEMLIMIT set the limit changed to %d", got)
	}
}

func TestMemoryLimitSetWithoutGOMEMLIMIT(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	t.Setenv("GOMEMLIMIT", "")
	if err := os.Unsetenv("GOMEMLIMIT"); err != nil { // t.Setenv restores it afterwards
		t.Fatal(err)
	}
	oldGC := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(oldGC) })
	t.Setenv("GOGC", "")
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	cfgs := []*config.Config{{Batch: config.Batch{MaxBytes: 128 << 20}}}
	limit, gogc, set := setMemoryLimit(cfgs)
	if !set || limit != 320<<20 || gogc != "200" {
		t.Fatalf("setMemoryLimit = %d, %q, %v; want %d, \"200\", true", limit, gogc, set, 320<<20)
	}
	if got := debug.SetMemoryLimit(-1); got != 320<<20 {
		t.Fatalf("runtime memory limit = %d, want %d", got, 320<<20)
	}
	if got := gcPercentNow(); got != 200 {
		t.Fatalf("GOGC with the memory limit = %d, want 200", got)
	}

	// A GOGC of the environment stands.
	debug.SetGCPercent(150)
	t.Setenv("GOGC", "150")
	if _, gogc, set := setMemoryLimit(cfgs); !set || gogc != "150" {
		t.Fatalf("with GOGC=150: setMemoryLimit set %v, GOGC %q; want true, \"150\"", set, gogc)
	}
	if got := gcPercentNow(); got != 150 {
		t.Fatalf("GOGC=150 in the environment: the collector's GOGC = %d, want 150", got)
	}
}

// TestStartProfiles: --cpuprofile, --memprofile and --trace each write their file in its own
// format (pprof's gzip-compressed protobuf; runtime/trace's "go 1.N trace" header), and a
// file that cannot be created is an error naming it, with no profile left running.
func TestStartProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, mem, tr := filepath.Join(dir, "cpu"), filepath.Join(dir, "mem"), filepath.Join(dir, "trace")
	stop, err := startProfiles(cpu, mem, tr)
	if err != nil {
		t.Fatalf("startProfiles: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, p := range []string{cpu, mem} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("%s: not a gzip-compressed pprof profile (starts % x)", filepath.Base(p), b[:min(len(b), 4)])
		}
	}
	b, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b[:min(len(b), 16)], []byte(" trace")) {
		t.Errorf("trace: no runtime/trace header (starts %q)", b[:min(len(b), 16)])
	}

	bad := filepath.Join(dir, "missing", "trace")
	if _, err := startProfiles(cpu, "", bad); err == nil || !strings.Contains(err.Error(), "create trace") {
		t.Fatalf("startProfiles with an uncreatable trace file: %v, want a create trace error", err)
	}
	// The CPU profile the failed call started was stopped: a new one can start.
	stop, err = startProfiles(cpu, "", "")
	if err != nil {
		t.Fatalf("startProfiles after a failed start: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// gcPercentNow is the collector's current GOGC (-1: off).
func gcPercentNow() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
