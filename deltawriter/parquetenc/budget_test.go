package parquetenc

import (
	"runtime"
	"testing"
)

// Encode takes helpers only from the GOMAXPROCS-1 budget and gives them back.
func TestEncodeHelpersBudget(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	if got := acquireHelpers(10); got != 3 {
		t.Fatalf("took %d helpers with GOMAXPROCS 4, want 3", got)
	}
	if got := acquireHelpers(1); got != 0 {
		t.Fatalf("took %d more helpers past the budget", got)
	}
	releaseHelpers(3)
	runtime.GOMAXPROCS(1)
	if got := acquireHelpers(5); got != 0 {
		t.Fatalf("took %d helpers with GOMAXPROCS 1", got)
	}
	if busy := encodeHelpersBusy.Load(); busy != 0 {
		t.Fatalf("%d helpers still counted busy", busy)
	}
}
