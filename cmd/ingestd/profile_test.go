package main

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/ingestd/ingestd/ingest"
)

func TestMemoryLimitFromBatchBudgets(t *testing.T) {
	cfgs := []*ingest.Config{{Batch: ingest.BatchConfig{MaxBytes: 128 << 20}}, {Batch: ingest.BatchConfig{MaxBytes: 64 << 20}}}
	if got, want := memoryLimit(cfgs), int64(448<<20); got != want {
		t.Fatalf("memoryLimit = %d, want %d (128 MiB + 64 MiB + 256 MiB)", got, want)
	}
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })

	t.Setenv("GOMEMLIMIT", "1GiB")
	if _, set := setMemoryLimit(cfgs); set {
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
	cfgs := []*ingest.Config{{Batch: ingest.BatchConfig{MaxBytes: 128 << 20}}}
	limit, set := setMemoryLimit(cfgs)
	if !set || limit != 384<<20 {
		t.Fatalf("setMemoryLimit = %d, %v; want %d, true", limit, set, 384<<20)
	}
	if got := debug.SetMemoryLimit(-1); got != 384<<20 {
		t.Fatalf("runtime memory limit = %d, want %d", got, 384<<20)
	}
}
