//go:build !unix

package keyindex

import "time"

// cpuTime is not measured on this platform: the benchmarks report wall time only.
func cpuTime() time.Duration { return 0 }
